#!/bin/bash
# Builds, on this machine, what testing/gpu/check_transformers.sh runs on the
# GPU machine (which has no Bazel): libdsa_stack.so with the CUDA kernels,
# the gtests of the kernels and the stack the checkpoint work changed, the
# Debian Abseil/protobuf shared objects they need, and the Python package and
# script of the transformers check. --config=cuda, --dynamic_mode=off (the
# project's libraries linked in), binaries gzipped.
#
#   testing/gpu/build_check_payload.sh [OUT_DIR]   # default .device/check
set -euo pipefail
cd "$(dirname "$0")/../.."
out="${1:-.device/check}"
binaries=(
  cache_kernels_test=//attention/gpu:cache_kernels_test
  model_runner_test=//model/deepseek_v32:model_runner_test
)
stack=//model/deepseek_v32:libdsa_stack.so
targets=("$stack")
for b in "${binaries[@]}"; do targets+=("${b#*=}"); done
bazel build --config=cuda --dynamic_mode=off "${targets[@]}"
bin_dir="$(bazel info --config=cuda --dynamic_mode=off bazel-bin)"
path_of() { local t="${1#//}"; echo "$bin_dir/${t%%:*}/${t#*:}"; }

rm -rf "$out"
mkdir -p "$out/bin" "$out/lib" "$out/python"
copy_libs() {
  ldd "$1" | awk '$3 ~ /^(\/usr)?\/lib\/x86_64-linux-gnu\/lib(absl|protobuf)/ {print $3}' \
    | while read -r lib; do cp -nL "$lib" "$out/lib/"; done
}
for b in "${binaries[@]}"; do
  src="$(path_of "${b#*=}")"
  cp "$src" "$out/bin/${b%%=*}"
  copy_libs "$src"
done
cp "$(path_of "$stack")" "$out/lib/"
copy_libs "$(path_of "$stack")"
cp -r engines/torch/dsa_torch "$out/python/"
find "$out/python" -name __pycache__ -prune -exec rm -rf {} +
cp engines/torch/check_transformers.py testing/gpu/check_transformers.sh "$out/"
chmod -R u+w "$out"
strip --strip-debug "$out"/bin/* "$out"/lib/*.so* 2>/dev/null || true
gzip -9 "$out"/bin/*
{ git rev-parse --short=12 HEAD | tr -d '\n'
  git diff --quiet HEAD -- . ':!.device' || printf -- '-dirty'; echo; } > "$out/COMMIT"
du -sh "$out"
