#!/usr/bin/env bash
# Builds the PyTorch binding, libdsa_torch.so, with a plain g++ command line
# against the PyTorch that Python imports: Debian's python3-torch (1.13, CPU)
# in CI, a pip wheel (2.x, CUDA) elsewhere. Needs only that PyTorch, a C++17
# compiler and this source tree; no Bazel, Abseil or protobuf.
#
#   engines/torch/build.sh [OUTPUT_DIR]      (default engines/torch/build)
#
# Environment:
#   PYTHON  the interpreter whose torch to build against (default: the first
#           of python3 and /usr/bin/python3 that imports torch)
#   CXX     the compiler (default /usr/bin/g++, else g++). Use the system
#           g++: a compiler wrapper that links libstdc++ statically into a
#           shared object gives an extension that crashes next to PyTorch's.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
out="${1:-$root/engines/torch/build}"

python=""
for candidate in ${PYTHON:-} python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null 2>&1 &&
     "$candidate" -c 'import torch' >/dev/null 2>&1; then
    python="$candidate"
    break
  fi
done
if [ -z "$python" ]; then
  echo "build.sh: no Python here imports torch; install it" \
       "(testing/setup_debian.sh --torch) or set PYTHON" >&2
  exit 1
fi
if [ -z "${CXX:-}" ]; then
  if [ -x /usr/bin/g++ ]; then CXX=/usr/bin/g++; else CXX=g++; fi
fi

# Include and library paths, the C++ ABI and the version of that torch.
eval "$("$python" - 2>/dev/null <<'PY'
import shlex
import torch
import torch.utils.cpp_extension as ce
q = lambda xs: " ".join(shlex.quote(x) for x in xs)
print("torch_includes=(%s)" % q(ce.include_paths()))
print("torch_libdirs=(%s)" % q(ce.library_paths()))
print("cxx11_abi=%d" % int(torch._C._GLIBCXX_USE_CXX11_ABI))
print("torch_version=%s" % shlex.quote(torch.__version__))
major, minor = (int(x) for x in torch.__version__.split(".")[:2])
# PyTorch 2.10 and newer need C++20 in their headers; older ones C++17.
print("cxx_std=%s" % ("c++20" if (major, minor) >= (2, 10) else "c++17"))
PY
)"

mkdir -p "$out"
flags=(-std="$cxx_std" -O2 -fPIC -Wall -Wno-unused-parameter
       -D_GLIBCXX_USE_CXX11_ABI="$cxx11_abi" -I"$root")
for dir in "${torch_includes[@]}"; do flags+=(-isystem "$dir"); done
libs=()
for dir in "${torch_libdirs[@]}"; do libs+=(-L"$dir" -Wl,-rpath,"$dir"); done
libs+=(-ltorch -ltorch_cpu -lc10 -ldl -pthread)

sources=(
  engines/torch/csrc/dsa_torch.cc
  platform/plugin_adapter.cc
  platform/plugin_elf.cc
  platform/plugin_file.cc
  attention/kernel_abi.cc
  attention/ops.cc
  attention/tensor.cc
)
objects=()
pids=()
for src in "${sources[@]}"; do
  obj="$out/$(basename "${src%.cc}").o"
  objects+=("$obj")
  "$CXX" "${flags[@]}" -c "$root/$src" -o "$obj" &
  pids+=($!)
done
status=0
for pid in "${pids[@]}"; do wait "$pid" || status=1; done
[ "$status" -eq 0 ] || { echo "build.sh: compilation failed" >&2; exit 1; }
"$CXX" -shared -Wl,--no-undefined -o "$out/libdsa_torch.so.tmp" \
  "${objects[@]}" "${libs[@]}"
mv -f "$out/libdsa_torch.so.tmp" "$out/libdsa_torch.so"
echo "built $out/libdsa_torch.so against torch $torch_version ($python, $CXX)"
