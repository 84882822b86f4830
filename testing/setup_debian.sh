#!/usr/bin/env bash
# Installs the Debian 12 packages the build needs, from Debian's archive only.
# Idempotent: a no-op when everything is present.
#
#   testing/setup_debian.sh            # Bazel, compilers, system libraries
#   testing/setup_debian.sh --rocm     # also clang 19 (the AMD device compiler),
#                                      # the LLVM 19 tools and linker, HIP 5.2's
#                                      # headers, runtime and device libraries
#   testing/setup_debian.sh --format   # also clang-format 14, Node.js and npm
#                                      # (for testing/format.sh)
#   testing/setup_debian.sh --torch    # also PyTorch 1.13 (CPU) and pytest
#   testing/setup_debian.sh --plot     # also matplotlib, for prefill_bench --plot
#   testing/setup_debian.sh --fuzz     # also clang-15 with libFuzzer and the
#                                      # sanitizer runtimes, llvm-symbolizer
#
# The CUDA toolchain (nvcc at /usr/local/cuda) is not a Debian package; the
# cuda build configuration uses it where present.
set -euo pipefail

packages=(
  bazel-bootstrap bazel-rules-cc bazel-rules-proto bazel-platforms bazel-skylib
  default-jre-headless g++ binutils pkg-config
  libabsl-dev libgtest-dev libgmock-dev libprotobuf-dev protobuf-compiler
  libbenchmark-dev nlohmann-json3-dev
)
for arg in "$@"; do
  case "$arg" in
    # clang-19 compiles HIP for gfx90a and gfx942 (HIP 5.2's own hipcc runs
    # clang 15, which stops at gfx940); it links device code with lld-19 and
    # bundles it with clang-offload-bundler (clang-tools-19); llvm-19's tools
    # make gfx942's device-library file and read the code objects (the AMD
    # ISA census, a Python script).
    --rocm) packages+=(clang-19 clang-tools-19 lld-19 llvm-19 libamdhip64-dev rocm-device-libs python3) ;;
    --format)
      packages+=(clang-format)
      # Node.js and npm are asked for only when their commands are missing: a
      # machine may carry them from elsewhere (a newer Node bundles npm), and
      # Debian's npm package would conflict with that.
      command -v node >/dev/null 2>&1 || packages+=(nodejs)
      command -v npm >/dev/null 2>&1 || packages+=(npm)
      ;;
    --torch) packages+=(python3-torch libtorch-dev python3-pytest) ;;
    --plot) packages+=(python3 python3-matplotlib) ;;
    # clang-15 brings libclang-common-15-dev, which holds libFuzzer and the
    # ASan/UBSan runtimes; lld-15 links them; llvm-15 has llvm-symbolizer-15.
    --fuzz) packages+=(clang-15 libclang-common-15-dev lld-15 llvm-15) ;;
    *) echo "setup_debian.sh: unknown argument '$arg' (expected --rocm, --format, --torch, --plot or --fuzz)" >&2; exit 2 ;;
  esac
done

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
  echo "setup_debian.sh: apt-get is not available; install these Debian 12 packages by hand: ${missing[*]}" >&2
  exit 1
fi
sudo=()
if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then
    sudo=(sudo)
  else
    echo "setup_debian.sh: not root and no sudo; as root run: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi
echo "setup_debian.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
"${sudo[@]}" apt-get update -qq >/dev/null
"${sudo[@]}" apt-get install -y -qq "${missing[@]}" >/dev/null
