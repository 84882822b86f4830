#!/usr/bin/env bash
# Formats the tree, or checks that it is formatted (what CI runs).
#
#   testing/format.sh           # formats in place, then reports lint left to fix
#   testing/format.sh --check   # changes nothing; prints the diffs and the lint
#                               # warnings, exits 1 when there is any
#
# Files: every C/C++/CUDA/HIP source git knows of (tracked, or untracked and
# not ignored) goes through clang-format 14 with the root .clang-format (Google
# style); every BUILD, *.BUILD, .bzl and WORKSPACE file through buildifier,
# pinned in .tools/package.json, with the lint warnings of .buildifier.json.
# Both tools are installed on first use: clang-format and Node.js from Debian
# (testing/setup_debian.sh --format), buildifier from npm into .tools/.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: testing/format.sh [--check]" >&2; exit 2; }
check=0
for arg in "$@"; do
  case "$arg" in
    --check) check=1 ;;
    -h | --help) sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "format.sh: unknown argument '$arg'" >&2; usage ;;
  esac
done

if ! git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  echo "format.sh: $(pwd) is not a git checkout; the files to format are the ones git knows of" >&2
  exit 1
fi

testing/setup_debian.sh --format

# Other clang-format versions break lines differently, so a check with one
# would fail a tree formatted with another: insist on the version CI uses.
clang_format="${CLANG_FORMAT:-}"
if [ -z "$clang_format" ]; then
  for candidate in clang-format-14 clang-format; do
    if command -v "$candidate" >/dev/null 2>&1 &&
        "$candidate" --version | grep -q 'version 14\.'; then
      clang_format="$candidate"
      break
    fi
  done
fi
if [ -z "$clang_format" ]; then
  echo "format.sh: clang-format 14 (Debian 12's clang-format package) not found;" \
    "set CLANG_FORMAT=/path/to/clang-format to use another at your own risk" >&2
  exit 1
fi

# buildifier: the version pinned in .tools/package-lock.json, installed by
# `npm ci` (exactly the lock file's tarball and hash) when it is absent or stale.
buildifier=.tools/node_modules/.bin/buildifier
want=$(node -p 'require("./.tools/package-lock.json").packages["node_modules/@bazel/buildifier"].version')
have=$("$buildifier" --version 2>/dev/null | sed -n 's/^buildifier version: *//p' | tr -d ' ' || true)
if [ "$have" != "$want" ]; then
  echo "format.sh: installing buildifier $want into .tools/ (npm ci)" >&2
  if ! npm ci --prefix .tools --no-audit --no-fund --loglevel=error >&2; then
    echo "format.sh: npm ci --prefix .tools failed; buildifier $want is needed from the npm registry" >&2
    exit 1
  fi
  have=$("$buildifier" --version | sed -n 's/^buildifier version: *//p' | tr -d ' ')
  if [ "$have" != "$want" ]; then
    echo "format.sh: .tools/ holds buildifier '$have' after npm ci, expected $want" >&2
    exit 1
  fi
fi

# Files git knows of that still exist (a deleted, unstaged file is skipped).
list_files() {
  git ls-files -z --cached --others --exclude-standard -- "$@" |
    while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
    sort -zu
}
mapfile -d '' cc_files < <(list_files '*.c' '*.cc' '*.cpp' '*.h' '*.hpp' \
  '*.cu' '*.cuh' '*.hip')
mapfile -d '' bazel_files < <(list_files 'BUILD' '*/BUILD' 'BUILD.bazel' \
  '*/BUILD.bazel' '*.BUILD' '*.bzl' 'WORKSPACE' '*/WORKSPACE' \
  'WORKSPACE.bazel' '*/WORKSPACE.bazel')

if [ "$check" -eq 0 ]; then
  if [ ${#cc_files[@]} -gt 0 ]; then
    "$clang_format" -i --style=file "${cc_files[@]}"
  fi
  if [ ${#bazel_files[@]} -gt 0 ]; then
    # -lint=fix applies buildifier's automatic fixes (sorted loads, removed
    # unused loads, ...); what it cannot fix is reported below.
    "$buildifier" -mode=fix -lint=fix "${bazel_files[@]}"
    if ! lint=$("$buildifier" -mode=check -lint=warn "${bazel_files[@]}" 2>&1); then
      printf '%s\n' "$lint" >&2
      echo "format.sh: formatted ${#cc_files[@]} C++ and ${#bazel_files[@]} Bazel files;" \
        "the buildifier warnings above need a fix by hand" >&2
      exit 1
    fi
  fi
  echo "format.sh: formatted ${#cc_files[@]} C++ and ${#bazel_files[@]} Bazel files" >&2
  exit 0
fi

failed=()
for f in "${cc_files[@]}"; do
  if ! "$clang_format" --style=file "$f" |
      diff -u --label "a/$f" --label "b/$f" "$f" -; then
    failed+=("$f")
  fi
done
if [ ${#bazel_files[@]} -gt 0 ]; then
  # The diffs first (buildifier's own check output names only the files), then
  # the lint warnings; the second run's exit status decides.
  "$buildifier" -mode=diff -lint=off -diff_command='diff -u' \
    "${bazel_files[@]}" || true
  if ! "$buildifier" -mode=check -lint=warn "${bazel_files[@]}"; then
    failed+=("(buildifier: the files and warnings above)")
  fi
fi
if [ ${#failed[@]} -gt 0 ]; then
  echo >&2
  echo "format.sh --check: not formatted or not lint-clean:" >&2
  printf '  %s\n' "${failed[@]}" >&2
  echo "run testing/format.sh to format in place (buildifier warnings need a fix by hand)" >&2
  exit 1
fi
echo "format.sh --check: ${#cc_files[@]} C++ and ${#bazel_files[@]} Bazel files formatted and lint-clean" >&2
