#!/bin/bash
# Whether the working tree's GPU kernels compile to the same machine code as
# revision REV's (default HEAD): builds both with --config=cuda (REV in a
# temporary worktree) and compares every object's cubins
# (compare_device_code.py). For refactors of device code on a machine
# without a GPU: byte-identical cubins run exactly as REV's did.
#
#   testing/gpu/compare_device_code.sh [REV] [bazel flags, e.g. --disk_cache=DIR]
set -euo pipefail
cd "$(dirname "$0")/../.."
rev="${1:-HEAD}"
shift || true
targets=(//attention/gpu/...)
bazel build --config=cuda "$@" "${targets[@]}"
tree="$(mktemp -d)"
trap 'git worktree remove --force "$tree" >/dev/null 2>&1 || rm -rf "$tree"' EXIT
git worktree add -q --detach "$tree" "$rev"
# A worktree is a workspace of its own: its Bazel server exits when idle.
(cd "$tree" && bazel --max_idle_secs=60 build --config=cuda "$@" "${targets[@]}")
python3 testing/gpu/compare_device_code.py "$tree/bazel-bin" bazel-bin
