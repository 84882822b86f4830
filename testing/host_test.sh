#!/bin/bash
# End-to-end test of the `host` binary's arguments and output handling: bad
# arguments exit 2 with the problem and the usage line on stderr, echoing at
# most 80 characters of an argument; a stdout that cannot be written is an
# error (exit 1), not success.
set -uo pipefail

host="$1"
failures=0
fail() {
  local text="$*"
  echo "FAIL: ${text:0:300}" >&2
  failures=$((failures + 1))
}

# Expects exit status `want` and stderr containing `text`.
expect_exit() {
  local want="$1" text="$2"
  shift 2
  "${host}" "$@" >"${TEST_TMPDIR}/out" 2>"${TEST_TMPDIR}/err"
  local rc=$?
  if [[ ${rc} -ne ${want} ]]; then fail "host $*: exit ${rc}, want ${want}"; fi
  if ! grep -qF -- "${text}" "${TEST_TMPDIR}/err"; then
    fail "host $*: stderr lacks '${text}': $(head -c 300 "${TEST_TMPDIR}/err")"
  fi
}

"${host}" --help >"${TEST_TMPDIR}/out" || fail "--help: exit $?"
grep -q "^usage: host" "${TEST_TMPDIR}/out" || fail "--help: $(cat "${TEST_TMPDIR}/out")"

expect_exit 2 'unknown argument "--frobnicate"' --frobnicate
expect_exit 2 'unknown argument "plugins.so"' plugins.so
expect_exit 2 "--platform needs a value" --platform
expect_exit 2 "--arch needs a value" --arch=
expect_exit 2 "--platform given twice" --platform=cpu --platform=rocm
expect_exit 2 "--platform=ro cm: expected a name" "--platform=ro cm"
expect_exit 1 "platform 'tpu' is not registered" --platform=tpu

# A long argument: its first 80 characters and its size, a short message.
long="$(head -c 120000 /dev/zero | tr '\0' q)"
for args in "--${long}" "--platform=${long}" "--arch=${long}" "${long}"; do
  expect_exit 2 "... (" "${args}"
  bytes="$(wc -c <"${TEST_TMPDIR}/err")"
  if [[ ${bytes} -ge 400 ]]; then fail "${args:0:20}...: ${bytes} bytes on stderr"; fi
done

# The CPU platform is built in.
"${host}" --platform=cpu >"${TEST_TMPDIR}/out" 2>"${TEST_TMPDIR}/err" ||
  fail "--platform=cpu: exit $?: $(cat "${TEST_TMPDIR}/err")"
grep -q "^active platform: cpu" "${TEST_TMPDIR}/out" || fail "no active platform line"

# Output that cannot be written.
"${host}" --platform=cpu >/dev/full 2>"${TEST_TMPDIR}/err"
rc=$?
if [[ ${rc} -ne 1 ]]; then fail ">/dev/full: exit ${rc}, want 1"; fi
grep -q "^host: cannot write the output: No space left on device" "${TEST_TMPDIR}/err" ||
  fail ">/dev/full: stderr: $(cat "${TEST_TMPDIR}/err")"
"${host}" --help >/dev/full 2>/dev/null && fail "--help >/dev/full exited 0"

if [[ ${failures} -ne 0 ]]; then
  echo "${failures} check(s) failed" >&2
  exit 1
fi
echo "host_test: all checks passed"
