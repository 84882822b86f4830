"""The kernel wing's build macros: HIP sources compiled for AMD or NVIDIA.

gpu_kernel_library: a library of HIP kernels and their launchers.
gpu_kernel_family: what one kernel family (a folder of attention/gpu) is made
of: the device library, its stand-in for builds without a GPU backend, the
select between them, and the family's gtest and benchmark.

Kernels are written once in HIP spelling (device/hip_compat.h). The build
configuration picks the device compiler:

  --config=rocm   clang 19 as a HIP compiler (Debian's clang++-19 against
                  Debian's HIP 5.2 headers and device libraries),
                  --offload-arch for each of $(DSA_ROCM_ARCHS)
  --config=cuda   nvcc, -gencode for each of $(DSA_CUDA_ARCHS), plus PTX
  (default)       no device code: the library holds only its headers, and
                  host code sees neither DSA_GPU_ROCM nor DSA_GPU_CUDA.

Each source becomes one object file in a genrule (so a family's
instantiation files compile in parallel); the objects are linked with
alwayslink, because HIP's kernel registration lives in static constructors
that a linker otherwise drops from an archive (and a shared object would
silently lose its kernels).
"""

load("@local_config_cuda//:defs.bzl", "NVCC_COMPILER", "NVCC_INSTALL_HINT")
load(
    "@local_config_rocm//:defs.bzl",
    "HIP_CLANG_COMPILER",
    "HIP_CLANG_INSTALL_HINT",
    "HIP_CLANG_LLD",
    "HIP_CLANG_OFFLOAD_BUNDLER",
)

_ROCM = "//platform/gpu:build_rocm"
_CUDA = "//platform/gpu:build_cuda"

# Every header of the shared device layer (attention/gpu/device): each device
# source may include any of them.
_DEVICE_LAYER = "//attention/gpu/device:device_headers"

# The fault sites the device layer's runtime calls ask (launch_util.h): linked
# into every kernel library.
_FAULT_INJECTION = "//platform:fault_injection"

# The ROCm bitcode folder with the gfx942 file HIP 5.2 lacks, made by the
# build (third_party/gpus/rocm_device_libs.bzl).
_ROCM_DEVICE_LIBS = "//third_party/gpus:rocm_device_libs"

def _require(compiler, hint):
    """Shell that stops the action with a clear message when `compiler` is absent.

    Tested when the action runs, not when the repository is fetched, so a
    compiler installed after a failed build is picked up by the next build of
    the same server. A failed action is never cached, so nothing else needs
    invalidating.
    """
    for text in (compiler, hint):
        # Both are pasted into the command: no quoting or Make-variable escape.
        if "'" in text or "$" in text:
            fail("gpu_kernel_library: %r must not contain ' or $" % text)
    return "{ [ -f %s ] && [ -x %s ]; } || { echo '%s not found; %s' >&2; exit 1; };" % (
        compiler,
        compiler,
        compiler,
        hint,
    )

def _hip_clang_cmd(copts):
    return " ".join([
        # clang runs the other two itself, with less clear messages.
        _require(HIP_CLANG_COMPILER, HIP_CLANG_INSTALL_HINT),
        _require(HIP_CLANG_LLD, HIP_CLANG_INSTALL_HINT),
        _require(HIP_CLANG_OFFLOAD_BUNDLER, HIP_CLANG_INSTALL_HINT),
        "archs=$$(echo '$(DSA_ROCM_ARCHS)' | tr ',' ' ');",
        "flags=; for a in $$archs; do flags=\"$$flags --offload-arch=$$a\"; done;",
        HIP_CLANG_COMPILER,
        "-x hip -std=c++17 -O3 -fPIC -Wall",
        # HIP 5.2 under /usr; its device libraries from the build's copy.
        "--rocm-path=/usr --rocm-device-lib-path=$(location %s)" % _ROCM_DEVICE_LIBS,
        # Code object v4, what HIP 5.2's runtime (and its hipcc) use; clang
        # 19 would otherwise emit v5.
        "-mcode-object-version=4",
        "-D__HIP_PLATFORM_AMD__ -DDSA_GPU_ROCM=1",
        "-I. -I$(GENDIR)",
        "$$flags",
        " ".join(copts),
        "-c $(location {src}) -o $@",
    ])

def _nvcc_cmd(copts):
    return " ".join([
        _require(NVCC_COMPILER, NVCC_INSTALL_HINT),
        "archs=$$(echo '$(DSA_CUDA_ARCHS)' | tr ',' ' ');",
        "flags=; for a in $$archs; do",
        "flags=\"$$flags -gencode=arch=compute_$$a,code=sm_$$a\"; last=$$a; done;",
        # PTX of the newest target, so newer GPUs can JIT it.
        "flags=\"$$flags -gencode=arch=compute_$$last,code=compute_$$last\";",
        # nvcc names its temporary files after its process id, and the
        # sandboxes' process ids repeat (each is a PID namespace) while /tmp
        # is shared: two nvcc actions at once would overwrite each other's
        # files. Each action gets a directory of its own.
        "tmp=$$(mktemp -d); trap 'rm -rf \"$$tmp\"' EXIT;",
        "TMPDIR=$$tmp",
        NVCC_COMPILER,
        "-std=c++17 -O3 -Xcompiler -fPIC -Xcompiler -Wall",
        "-DDSA_GPU_CUDA=1",
        "-I. -I$(GENDIR)",
        "$$flags",
        " ".join(copts),
        "-x cu -c $(location {src}) -o $@",
    ])

def gpu_kernel_library(
        name,
        srcs,
        hdrs = [],
        device_hdrs = [],
        deps = [],
        visibility = None,
        testonly = False,
        rocm_copts = [],
        nvcc_copts = []):
    """A C++ library whose sources are HIP kernels and their launchers.

    Args:
      name: the cc_library's name.
      srcs: .hip.cc files, in HIP spelling.
      hdrs: plain C++ headers declaring the host launchers (no HIP types), for
        code built by the C++ compiler.
      device_hdrs: further headers the device sources include (the device
        layer's are always there).
      deps: cc_library deps of the host side.
      visibility: as for cc_library.
      testonly: as for cc_library.
      rocm_copts: extra flags for the AMD compile (clang), e.g.
        -ffp-contract=off.
      nvcc_copts: extra flags for nvcc (e.g. --fmad=false).
    """
    all_hdrs = hdrs + device_hdrs + [_DEVICE_LAYER]
    rocm_objs = []
    cuda_objs = []
    for src in srcs:
        stem = src.replace(".hip.cc", "").replace("/", "_")
        for backend, cmd, objs, tools in [
            ("rocm", _hip_clang_cmd(rocm_copts), rocm_objs, [_ROCM_DEVICE_LIBS]),
            ("cuda", _nvcc_cmd(nvcc_copts), cuda_objs, []),
        ]:
            out = "_%s_%s/%s.o" % (name, backend, stem)
            native.genrule(
                name = "%s_%s_%s" % (name, stem, backend),
                srcs = [src] + all_hdrs + tools,
                outs = [out],
                cmd = cmd.replace("{src}", src),
                message = "Compiling %s for %s" % (src, backend),
                tags = ["manual"],
                testonly = testonly,
                visibility = ["//visibility:private"],
            )
            objs.append(out)

    native.cc_library(
        name = name,
        srcs = select({
            _ROCM: rocm_objs,
            _CUDA: cuda_objs,
            "//conditions:default": [],
        }),
        hdrs = hdrs,
        defines = select({
            _ROCM: ["DSA_GPU_ROCM=1"],
            _CUDA: ["DSA_GPU_CUDA=1"],
            "//conditions:default": [],
        }),
        deps = deps + [_FAULT_INJECTION] + select({
            _ROCM: ["@local_config_rocm//:hip_runtime"],
            _CUDA: ["@local_config_cuda//:cudart_static"],
            "//conditions:default": [],
        }),
        alwayslink = True,
        # Linked into each binary, never as its own shared object: the device
        # runtime (static cudart) is resolved at the final link.
        linkstatic = True,
        visibility = visibility,
        testonly = testonly,
    )

def gpu_kernel_family(
        name,
        hdrs,
        srcs,
        unbuilt_srcs,
        device_hdrs = [],
        deps = [],
        device_deps = [],
        rocm_copts = [],
        nvcc_copts = [],
        visibility = None,
        test_srcs = [],
        test_deps = [],
        bench_srcs = [],
        bench_deps = []):
    """One kernel family: `name` is the library every user depends on.

    Emits:
      <name>_device   gpu_kernel_library of `srcs` (under --config=rocm/cuda)
      <name>_unbuilt  cc_library of `unbuilt_srcs`: every launcher answers
                      kNotBuilt (the default build, no GPU backend)
      <name>          cc_library of `hdrs` selecting one of the two
      kernels_test    the family's gtest (tag `gpu`: skipped without a
                      device), when `test_srcs` is given
      bench           the family's timing harness, when `bench_srcs` is given

    Args:
      name: the library's name.
      hdrs: plain C++ headers of the launchers and their params.
      srcs: .hip.cc files (launchers, instantiations).
      unbuilt_srcs: the stand-in's sources.
      device_hdrs: family headers the device sources include (kernel bodies,
        config); the device layer's headers are always available.
      deps: deps of the launchers' host side, shared by both builds.
      device_deps: further deps of the device build only.
      rocm_copts: extra flags for the AMD compile (clang).
      nvcc_copts: extra flags for nvcc.
      visibility: of `name`.
      test_srcs: sources of the gtest.
      test_deps: its deps besides `name`, the device test helpers and gtest.
      bench_srcs: sources of the benchmark binary.
      bench_deps: its deps besides `name` and the device runtime.
    """
    runtime = "//attention/gpu/device:runtime"
    gpu_kernel_library(
        name = name + "_device",
        srcs = srcs,
        hdrs = hdrs,
        device_hdrs = device_hdrs,
        deps = deps + device_deps,
        rocm_copts = rocm_copts,
        nvcc_copts = nvcc_copts,
    )
    native.cc_library(
        name = name + "_unbuilt",
        srcs = unbuilt_srcs,
        hdrs = hdrs,
        deps = deps,
    )
    native.cc_library(
        name = name,
        hdrs = hdrs,
        visibility = visibility,
        deps = deps + select({
            _ROCM: [":" + name + "_device"],
            _CUDA: [":" + name + "_device"],
            "//conditions:default": [":" + name + "_unbuilt"],
        }),
    )
    if test_srcs:
        native.cc_test(
            name = "kernels_test",
            size = "medium",
            srcs = test_srcs,
            tags = ["gpu"],
            deps = [
                ":" + name,
                runtime,
                "//attention/gpu/device:test_util",
                "@com_google_googletest//:gtest_main",
            ] + test_deps,
        )
    if bench_srcs:
        native.cc_binary(
            name = "bench",
            srcs = bench_srcs,
            deps = [":" + name, runtime] + bench_deps,
        )
