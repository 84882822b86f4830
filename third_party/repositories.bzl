"""Every external repository of the workspace, all local: nothing is fetched.

Libraries come from Debian's packages (see testing/setup_debian.sh), wrapped
so that the tree names them with the labels of their own Bazel builds.
"""

load(
    "//third_party:system_libs.bzl",
    "absl_repository",
    "gpu_toolkit_repository",
    "system_repository",
)

# A WORKSPACE dependency function, not a macro that makes targets: like
# rules_cc_dependencies() and friends it takes no `name`.
# buildifier: disable=unnamed-macro
def dsa_dependencies():
    """Declares the workspace's repositories. Call from WORKSPACE."""

    # Bazel's own helpers: local stand-ins for what Bazel would download.
    native.local_repository(name = "rules_cc", path = "third_party/rules_cc")
    native.local_repository(name = "rules_java", path = "third_party/rules_java")
    native.local_repository(
        name = "remote_coverage_tools",
        path = "third_party/remote_coverage_tools",
    )

    # Debian's packaged rules (bazel-rules-proto, bazel-platforms, bazel-skylib).
    native.local_repository(name = "rules_proto", path = "/usr/share/bazel/rules/proto")
    native.local_repository(name = "platforms", path = "/usr/share/bazel/tools/platforms")
    native.local_repository(name = "bazel_skylib", path = "/usr/share/bazel/tools/skylib")

    absl_repository(
        name = "com_google_absl",
        packages = {
            "algorithm": ["algorithm", "container=algorithm_container"],
            "base": ["core_headers", "base"],
            "cleanup": ["cleanup"],
            "container": [
                "btree",
                "fixed_array",
                "flat_hash_map",
                "flat_hash_set",
                "inlined_vector",
            ],
            "functional": ["bind_front", "function_ref"],
            "hash": ["hash"],
            "memory": ["memory"],
            "meta": ["type_traits"],
            "numeric": ["bits", "int128"],
            "random": [
                "bit_gen_ref=random_bit_gen_ref",
                "distributions=random_distributions",
                "random=random_random",
            ],
            "status": ["status", "statusor"],
            "strings": ["strings", "str_format"],
            "synchronization": ["synchronization"],
            "time": ["time"],
            "types": ["optional", "span", "variant"],
            "utility": ["utility"],
        },
    )

    system_repository(
        name = "com_google_protobuf",
        build_file = "//third_party:protobuf.BUILD",
        debian_package = "libprotobuf-dev protobuf-compiler",
        required_paths = [
            "/usr/bin/protoc",
            "/usr/include/google/protobuf/message.h",
        ],
        symlinks = {"/usr/bin/protoc": "bin/protoc"},
    )

    system_repository(
        name = "com_google_googletest",
        build_file = "//third_party:googletest.BUILD",
        debian_package = "libgtest-dev libgmock-dev",
        required_paths = [
            "/usr/include/gtest/gtest.h",
            "/usr/include/gmock/gmock.h",
        ],
    )

    system_repository(
        name = "com_google_benchmark",
        build_file = "//third_party:benchmark.BUILD",
        debian_package = "libbenchmark-dev",
        required_paths = ["/usr/include/benchmark/benchmark.h"],
    )

    system_repository(
        name = "nlohmann_json",
        build_file = "//third_party:nlohmann_json.BUILD",
        debian_package = "nlohmann-json3-dev",
        required_paths = ["/usr/include/nlohmann/json.hpp"],
    )

    # GPU compilers are optional: only --config=rocm / --config=cuda need them,
    # and each compile action checks for its compiler when it runs.
    # AMD device code: Debian's clang 19 against Debian's HIP 5.2 headers and
    # device libraries (HIP 5.2's own hipcc runs clang 15, which stops at
    # gfx940). The LLVM tools make the device-library file HIP 5.2 lacks for
    # gfx942 (third_party/gpus/rocm_device_libs.bzl) and read the code objects
    # (testing/gpu/amd_isa_census.py).
    gpu_toolkit_repository(
        name = "local_config_rocm",
        build_file = "//third_party/gpus:rocm.BUILD",
        compiler = "/usr/bin/clang++-19",
        prefix = "HIP_CLANG",
        install_hint = "install it with testing/setup_debian.sh --rocm (Debian packages clang-19 clang-tools-19 lld-19 llvm-19 libamdhip64-dev rocm-device-libs)",
        paths = {
            "DEVICE_LIBS": "/usr/lib/x86_64-linux-gnu/amdgcn/bitcode",
            "LLVM_AS": "/usr/bin/llvm-as-19",
            "LLVM_CXXFILT": "/usr/bin/llvm-cxxfilt-19",
            "LLVM_DIS": "/usr/bin/llvm-dis-19",
            "LLVM_OBJCOPY": "/usr/bin/llvm-objcopy-19",
            "LLVM_OBJDUMP": "/usr/bin/llvm-objdump-19",
            "LLVM_READELF": "/usr/bin/llvm-readelf-19",
            # The device-code linker clang runs (lld-19).
            "LLD": "/usr/lib/llvm-19/bin/ld.lld",
            "OFFLOAD_BUNDLER": "/usr/bin/clang-offload-bundler-19",
        },
    )

    gpu_toolkit_repository(
        name = "local_config_cuda",
        build_file = "//third_party/gpus:cuda.BUILD",
        compiler = "/usr/local/cuda/bin/nvcc",
        prefix = "NVCC",
        install_hint = "install the CUDA 13 toolkit at /usr/local/cuda (not a Debian package)",
    )
