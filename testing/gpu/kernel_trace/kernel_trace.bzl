"""libkernel_trace.so: a host-only CUPTI library built by the CUDA toolkit's nvcc.

The CUPTI headers and library live in the toolkit (/usr/local/cuda), which the
host C++ toolchain does not know as a system include folder; nvcc does.
"""

load("@local_config_cuda//:defs.bzl", "NVCC_COMPILER", "NVCC_INSTALL_HINT")

def kernel_trace_library(name, src, **kwargs):
    native.genrule(
        name = name + "_build",
        srcs = [src],
        outs = [name],
        cmd = " ".join([
            "{ [ -x %s ]; } || { echo '%s not found; %s' >&2; exit 1; };" % (
                NVCC_COMPILER,
                NVCC_COMPILER,
                NVCC_INSTALL_HINT,
            ),
            "tmp=$$(mktemp -d); trap 'rm -rf \"$$tmp\"' EXIT;",
            "TMPDIR=$$tmp",
            NVCC_COMPILER,
            "-std=c++17 -O2 -shared -Xcompiler -fPIC -Xcompiler -Wall",
            "-x c++ $(location %s) -o $@" % src,
            "-L$$(dirname %s)/../lib64 -lcupti" % NVCC_COMPILER,
            "-Xlinker -rpath -Xlinker '$$ORIGIN'",
        ]),
        **kwargs
    )
