#!/usr/bin/env bash
# The PyTorch binding's CI step (called at the end of testing/test.sh):
# installs Debian's PyTorch and pytest on first use, builds the plugins it
# loads with Bazel and the binding with engines/torch/build.sh, and runs
# the pytest suite.
#
#   engines/torch/test.sh [pytest args]
#
# Environment: DSA_TORCH_PLUGINS (os.pathsep-separated plugin paths, platform
# plugins first) replaces the CPU plugins, e.g. to add a CUDA attention plugin.
set -euo pipefail
cd "$(dirname "$0")/../.."
testing/setup_debian.sh --torch

bazel --max_idle_secs=300 build \
  //platform/cpu:libdsa_cpu_platform.so //attention/cpu:libdsa_attention_cpu.so \
  //platform/rocm:libdsa_rocm_platform.so //platform/cuda:libdsa_cuda_platform.so \
  //model/deepseek_v32:libdsa_stack.so

python=/usr/bin/python3  # Debian's, which has python3-torch
[ -n "${PYTHON:-}" ] && python="$PYTHON"
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
PYTHON="$python" engines/torch/build.sh "$out"
export DSA_TORCH_LIBRARY="$out/libdsa_torch.so"

# Exit status 5 (no test collected) is a failure too.
status=0
"$python" -m pytest -q -p no:cacheprovider engines/torch/tests "$@" || status=$?
if [ "$status" -eq 5 ]; then
  echo "engines/torch/test.sh: pytest collected no tests" >&2
fi
exit "$status"
