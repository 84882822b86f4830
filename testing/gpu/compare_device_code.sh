#!/bin/bash
# Whether the working tree's GPU kernels compile to the same machine code as
# revision REV's (default HEAD): builds both with --config=cuda (REV in a
# temporary worktree) and compares them kernel by kernel
# (compare_device_code.py; --objects for whole cubins object by object).
# For refactors of device code on a machine without a GPU: identical
# kernels run exactly as REV's did.
#
#   testing/gpu/compare_device_code.sh [REV] [--objects] [bazel flags]
#
# Only the objects the current targets produce are compared: a bazel-bin
# also holds the objects of sources that have since been moved or deleted.
set -euo pipefail
cd "$(dirname "$0")/../.."
rev="${1:-HEAD}"
shift || true
mode=()
if [ "${1:-}" = --objects ]; then mode=(--objects); shift; fi
# The kernel wing, and where its toolchain checks lived before they moved
# into attention/gpu/device.
targets=(//attention/gpu/... //platform/gpu/...)
work="$(mktemp -d)"
tree="$work/rev"
trap 'git worktree remove --force "$tree" >/dev/null 2>&1; rm -rf "$work"' EXIT

# Copies the device objects of the build in the current directory to $1,
# keeping their paths under bazel-bin.
collect() {
  local dest="$1"
  shift
  bazel aquery --config=cuda "$@" \
    "mnemonic(\"Genrule\", ${targets[0]} + ${targets[1]})" \
    --output=text 2>/dev/null | grep -o 'bazel-out/[^] ,]*_cuda/[^] ,]*\.o' \
    | while read -r obj; do
        local rel="${obj#bazel-out/*/bin/}"
        mkdir -p "$dest/$(dirname "$rel")"
        cp "$obj" "$dest/$rel"
      done
}

bazel build --config=cuda "$@" "${targets[@]}"
collect "$work/new" "$@"
git worktree add -q --detach "$tree" "$rev"
# A worktree is a workspace of its own: its Bazel server exits when idle.
(cd "$tree" && bazel --max_idle_secs=60 build --config=cuda "$@" "${targets[@]}" \
  && collect "$work/old" "$@")
python3 testing/gpu/compare_device_code.py "${mode[@]}" "$work/old" "$work/new"
