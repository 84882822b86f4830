#!/bin/bash
# End-to-end test of the `plan` binary as a user runs it: the seed's probe
# numbers, stdout holding exactly one JSON object (checked by Python's strict
# json parser), and exit status 2 with one stderr line on bad input.
set -uo pipefail

plan="$1"
failures=0
fail() {
  local text="$*"
  echo "FAIL: ${text:0:300}" >&2
  failures=$((failures + 1))
}

# Runs plan with the given flags and --format=json; checks the JSON with a
# Python expression over `d` (the parsed object).
expect_json() {
  local check="$1"
  shift
  local out err rc
  out="$("${plan}" "$@" --format=json 2>"${TEST_TMPDIR}/err")"
  rc=$?
  err="$(cat "${TEST_TMPDIR}/err")"
  if [[ ${rc} -ne 0 || -n "${err}" ]]; then
    fail "plan $*: exit ${rc}, stderr: ${err}"
    return
  fi
  if ! printf '%s' "${out}" | python3 -c '
import json, sys
d = json.loads(sys.stdin.read())  # raises on anything but one JSON value
assert isinstance(d, dict), "not an object"
assert list(d) == ["model", "platform", "layers", "indexer_calls"], list(d)
for i, l in enumerate(d["layers"]):
    assert list(l) == ["layer", "mtp", "indexer", "prefill_branch",
                       "k_cache_write"], l
    assert l["layer"] == i, l
c = d["indexer_calls"]
tally = {k: sum(l["indexer"] == v for l in d["layers"]) for k, v in
         [("scored", "score"), ("skipped", "skip"), ("shared", "shared"),
          ("workspace_only", "workspace_only")]}
assert c == tally, (c, tally)
ok = eval(sys.argv[1])
assert ok, sys.argv[1]
' "${check}"; then
    fail "plan $*: JSON check failed: ${check}"
  fi
}

# Expects exit status 2, nothing on stdout and one stderr line containing
# the given text.
expect_error() {
  local text="$1"
  shift
  local out rc lines
  out="$("${plan}" "$@" 2>"${TEST_TMPDIR}/err")"
  rc=$?
  lines="$(wc -l <"${TEST_TMPDIR}/err")"
  if [[ ${rc} -ne 2 ]]; then fail "plan $*: exit ${rc}, want 2"; fi
  if [[ -n "${out}" ]]; then fail "plan $*: wrote stdout: ${out}"; fi
  if [[ "${lines}" -ne 1 ]]; then fail "plan $*: ${lines} stderr lines"; fi
  if ! grep -qF -- "${text}" "${TEST_TMPDIR}/err"; then
    fail "plan $*: stderr lacks '${text}': $(cat "${TEST_TMPDIR}/err")"
  fi
}

# The seed's probe: GLM-5.1 on ROCm.
expect_json 'c["skipped"] == 78 and c["scored"] == 1 and d["layers"][78]["mtp"] and d["layers"][78]["indexer"] == "score"' \
  --model=glm-5.1 --platform=rocm --requests=0+1024
expect_json 'c["scored"] == 79 and all(l["prefill_branch"] == "sparse_mqa" for l in d["layers"])' \
  --model=glm-5.1 --platform=rocm --requests=0+8192
expect_json 'c == {"scored": 1, "skipped": 21, "shared": 57, "workspace_only": 0}' \
  --model=glm-5.2 --platform=rocm --requests=0+1024
expect_json 'c["scored"] == 79' --model=glm-5.1 --platform=rocm --requests=100+1,0+1024
expect_json 'c["scored"] == 79' --model=glm-5.1 --platform=rocm --requests=0+1024 --cudagraph=full
expect_json 'c["scored"] == 79' --model=glm-5.1 --platform=rocm --requests=0+1024 --capturing
expect_json 'c["workspace_only"] == 62 and not any(l["k_cache_write"] for l in d["layers"])' \
  --model=deepseek-v3.2 --platform=rocm --profile_run
expect_json 'c["scored"] == 79 and d["platform"] == "cpu"' --model=glm-5.1 --platform=cpu --requests=0+1024
expect_json 'c["skipped"] == 78 and d["platform"] == "cuda"' \
  --model=glm-5.1 --platform=cuda --arch=sm_90 --requests=0+1024
expect_json 'c["skipped"] == 78' --model=glm-5.1 --platform=rocm --arch=gfx950 --spec_tokens=3 --requests=10+3,20+3
expect_json 'c["skipped"] == 4 and c["shared"] == 4 and c["scored"] == 1' \
  --model=tiny-glm-5.2 --platform=rocm --requests=0+64

# The table makes the probe visible.
table="$("${plan}" --model=glm-5.1 --platform=rocm --requests=0+1024)"
grep -q "indexer calls: 1 scored, 78 skipped" <<<"${table}" || fail "table: ${table}"
grep -q "^78 .*mtp .*score .*MTP layer" <<<"${table}" || fail "table lacks the MTP row"

expect_error "decode context parallel" --model=glm-5.1 --platform=rocm --requests=0+1024 --dcp=2
expect_error "unknown model preset" --model=glm-6 --requests=0+1024
expect_error "--requests" --model=glm-5.1 --requests=1024
expect_error "unknown flag --frobnicate" --model=glm-5.1 --requests=0+1 --frobnicate
expect_error "gfx942" --model=glm-5.1 --platform=rocm --arch=gfx1030 --requests=0+1

# Files given as --model: only regular files, refused at once otherwise (a
# fifo with no writer must not block: `timeout` turns a hang into status 124).
fifo="${TEST_TMPDIR}/model.fifo"
rm -f "${fifo}"
mkfifo "${fifo}"
out="$(timeout 10 "${plan}" --model="${fifo}" --requests=0+1 2>"${TEST_TMPDIR}/err")"
rc=$?
if [[ ${rc} -ne 2 ]]; then fail "fifo as --model: exit ${rc}, want 2 (124: it hung)"; fi
grep -q "is a fifo (named pipe), not a regular file" "${TEST_TMPDIR}/err" ||
  fail "fifo as --model: $(cat "${TEST_TMPDIR}/err")"
expect_error "no config.json (not a Hugging Face checkpoint directory)" --model="${TEST_TMPDIR}/" --requests=0+1
expect_error "is a character device" --model=/dev/zero --requests=0+1

# A syntax error names its line and column and quotes no other content.
printf 'name: "custom"\nnum_hidden_layers: 3\nnum_hidden_layers 4 private_line_3\nprivate_line_4: 1\n' \
  >"${TEST_TMPDIR}/syntax.textproto"
expect_error "line 3, column 19" --model="${TEST_TMPDIR}/syntax.textproto" --requests=0+1
if grep -q "private_line\|custom" "${TEST_TMPDIR}/err"; then
  fail "a syntax error quotes the file: $(cat "${TEST_TMPDIR}/err")"
fi

# A long argument is echoed capped. Linux limits one argument to 128 KiB, so
# 120 KB here (plan_tool_test passes 900 KB through the library).
long="$(head -c 120000 /dev/zero | tr '\0' q)"
check_long() {
  expect_error " bytes)" "$@"
  local bytes
  bytes="$(wc -c <"${TEST_TMPDIR}/err")"
  if [[ ${bytes} -ge 300 ]]; then fail "a long argument: ${bytes} bytes on stderr"; fi
}
check_long --model="${long}" --requests=0+1
check_long --model="/${long}" --requests=0+1
check_long --model=glm-5.1 --requests="${long}"
check_long --model=glm-5.1 --requests=0+1 --platform="${long}"
check_long --model=glm-5.1 --requests=0+1 --"${long}"
check_long --model=glm-5.1 --requests=0+1 "${long}"

# Output that cannot be written is an error (exit 1, one line), not success.
for format in json table; do
  "${plan}" --model=glm-5.1 --platform=rocm --requests=0+1024 --format="${format}" \
    >/dev/full 2>"${TEST_TMPDIR}/err"
  rc=$?
  if [[ ${rc} -ne 1 ]]; then fail "--format=${format} >/dev/full: exit ${rc}, want 1"; fi
  grep -q "^plan: cannot write the output" "${TEST_TMPDIR}/err" ||
    fail ">/dev/full: stderr: $(cat "${TEST_TMPDIR}/err")"
done
"${plan}" --help >/dev/full 2>/dev/null && fail "--help >/dev/full exited 0"
# A closed stdout is a failed write too.
for args in "--model=glm-5.1 --platform=rocm --requests=0+1024" "--help"; do
  # shellcheck disable=SC2086
  "${plan}" ${args} >&- 2>"${TEST_TMPDIR}/err"
  rc=$?
  if [[ ${rc} -ne 1 ]]; then fail "${args} >&-: exit ${rc}, want 1"; fi
  if [[ "$(wc -l <"${TEST_TMPDIR}/err")" -ne 1 ]] ||
    ! grep -q "^plan: cannot write the output" "${TEST_TMPDIR}/err"; then
    fail "${args} >&-: stderr: $(cat "${TEST_TMPDIR}/err")"
  fi
done

if [[ ${failures} -ne 0 ]]; then
  echo "${failures} check(s) failed" >&2
  exit 1
fi
echo "plan_test: all checks passed"
