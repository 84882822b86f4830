#!/usr/bin/env bash
# Runs the whole test suite; the README's test command, and what CI runs.
#
#   testing/test.sh [extra bazel flags, e.g. --config=asan]
#
# Without flags it also builds and tests the PyTorch binding (engines/torch).
#
# On a machine without a GPU, tests tagged `gpu` are excluded. On an NVIDIA
# or AMD machine the device code is built (--config=cuda / --config=rocm) and
# the gpu tests run too.
set -euo pipefail
cd "$(dirname "$0")/.."
testing/setup_debian.sh

gpu_flags=(--test_tag_filters=-gpu)
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpu_flags=(--config=cuda)
elif [ -e /dev/kfd ] && command -v clang++-19 >/dev/null 2>&1; then
  gpu_flags=(--config=rocm)
fi
bazel test "${gpu_flags[@]}" "$@" //...
# The PyTorch binding builds outside Bazel (against the torch Python imports)
# and runs pytest. Extra Bazel flags (a sanitizer build, say) concern the
# Bazel suite only, so it runs in the plain invocation.
if [ $# -eq 0 ]; then
  engines/torch/test.sh
fi
