#!/usr/bin/env bash
# plot_prefill_bench.py draws the committed H200 results (testing/bench/),
# written before the JSON's schema was a proto, as it draws a new run's
# (cli_test.sh): a PNG per file. Without Debian's matplotlib there is nothing
# to draw with, and the test says so.
#
#   plot_test.sh PATH/TO/plot_prefill_bench.py RESULT.json...
set -uo pipefail
script="$1"
shift
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
export MPLCONFIGDIR="$tmp/matplotlib"
if ! /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  echo "note: python3-matplotlib is not installed; nothing drawn"
  exit 0
fi
failures=0
for json in "$@"; do
  out="$tmp/$(basename "$json" .json).png"
  if ! /usr/bin/python3 "$script" "$json" "$out"; then
    echo "FAIL: $json: the script exited $?" >&2
    failures=$((failures + 1))
  elif [ "$(head -c 4 "$out" | tail -c 3)" != PNG ]; then
    echo "FAIL: $json: no PNG" >&2
    failures=$((failures + 1))
  fi
done
# Anything but a regular file is refused, and left as it was.
for target in /dev/null "$tmp/fifo" "$tmp/link"; do
  [ "$target" = "$tmp/fifo" ] && mkfifo "$target"
  [ "$target" = "$tmp/link" ] && ln -s "$tmp/elsewhere.png" "$target"
  /usr/bin/python3 "$script" "$1" "$target" >/dev/null 2>"$tmp/err"
  rc=$?
  if [ "$rc" -ne 2 ] || ! grep -q "not a regular file" "$tmp/err"; then
    echo "FAIL: $target: status $rc, $(cat "$tmp/err")" >&2
    failures=$((failures + 1))
  fi
done
[ -c /dev/null ] && [ -p "$tmp/fifo" ] && [ -L "$tmp/link" ] && [ ! -e "$tmp/elsewhere.png" ] ||
  { echo "FAIL: a refused target was changed" >&2; failures=$((failures + 1)); }
# A bad call is a usage line and status 2.
/usr/bin/python3 "$script" >/dev/null 2>&1
[ $? -eq 2 ] || { echo "FAIL: no arguments: expected status 2" >&2; failures=$((failures + 1)); }
[ "$failures" -eq 0 ] && echo "PASS" || exit 1
