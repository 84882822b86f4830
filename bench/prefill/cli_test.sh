#!/usr/bin/env bash
# prefill_bench end to end: --help; bad flags, an unknown preset, a GPU
# platform without a device and a workload that does not fit in the caches
# each give one line on stderr and status 2 and write nothing at --json; a
# tiny run's --json parses back with every field of the schema
# (report/result.proto: a figure the run does not have is absent), and
# --plot draws it.
#
#   cli_test.sh PATH/TO/prefill_bench
set -uo pipefail
bench="$1"
tmp="${TEST_TMPDIR:-$(mktemp -d)}"
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }

"$bench" --help >"$tmp/help" 2>&1 || fail "--help exited $?"
for flag in --model --platform --arch --workloads --arms --runs --prompts \
    --max_num_batched_tokens --num_blocks --json --plot; do
  grep -q -- "$flag" "$tmp/help" || fail "--help does not list $flag"
done

# Each case: expected stderr substring, then the arguments.
expect_usage_error() {
  local want="$1"
  shift
  rm -f "$tmp/out.json"
  "$bench" "$@" --json="$tmp/out.json" >"$tmp/stdout" 2>"$tmp/stderr"
  local rc=$?
  [ "$rc" -eq 2 ] || fail "$*: status $rc, expected 2"
  [ "$(wc -l <"$tmp/stderr")" -eq 1 ] ||
    fail "$*: expected one line on stderr, got: $(cat "$tmp/stderr")"
  grep -q -- "$want" "$tmp/stderr" ||
    fail "$*: stderr '$(cat "$tmp/stderr")' lacks '$want'"
  [ ! -e "$tmp/out.json" ] || fail "$*: wrote --json on error"
  ls "$tmp" | grep -q 'out.json.tmp' && fail "$*: left a temporary file"
}
expect_usage_error "unknown flag --bogus" --bogus=1
expect_usage_error "--runs=0: expected an integer" --runs=0
expect_usage_error "unexpected argument" stray
expect_usage_error "--platform=tpu" --platform=tpu
expect_usage_error "--model: " --model=no-such-preset
expect_usage_error "unknown workload" --workloads=1k_c2
expect_usage_error "does not fit in the caches" --num_blocks=1 --platform=emulated-rocm
# GLM-5.1's three arms need ~80 GiB of host memory on the CPU: refused up front.
if [ "$(awk '/MemTotal/{print $2}' /proc/meminfo)" -lt $((90 * 1024 * 1024)) ]; then
  expect_usage_error "of host memory" --model=glm-5.1 --platform=emulated-rocm
fi
expect_usage_error "directory" --platform=emulated-rocm --plot="$tmp/missing/dir/x.png"
# No GPU here: asking for one is a clear error, not a crash.
if ! command -v nvidia-smi >/dev/null 2>&1 && [ ! -e /dev/kfd ]; then
  expect_usage_error "no cuda device" --platform=cuda
  expect_usage_error "no rocm device" --platform=rocm
fi
"$bench" --json="$tmp/no/such/dir/r.json" >/dev/null 2>"$tmp/stderr"
[ $? -eq 2 ] || fail "--json into a missing directory: expected status 2"

# A tiny run: two short workloads and the long one, two runs per arm.
"$bench" --platform=emulated-rocm --workloads=1k_c1,1900_c1,8k_c1 --prompts=2 \
  --runs=2 --commit=test --json="$tmp/r.json" >"$tmp/table" 2>"$tmp/progress"
rc=$?
[ "$rc" -eq 0 ] || fail "tiny run exited $rc: $(cat "$tmp/progress")"
grep -q "EMULATED" "$tmp/table" || fail "the table does not say EMULATED"
grep -q "\[1/" "$tmp/progress" || fail "no progress line"
python3 - "$tmp/r.json" <<'PY' || fail "JSON schema"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["platform"]["emulated"] is True and r["platform"]["arch"] == "gfx950", r["platform"]
assert r["platform"]["name"] == "emulated-rocm"
assert r["model"]["name"] == "tiny-glm-5.1", r["model"]
assert r["commit"] == "test" and r["runs"] == 2
names = [w["name"] for w in r["workloads"]]
assert names == ["1k_c1", "1900_c1", "8k_c1"], names
for w in r["workloads"]:
    for key in ("name", "prompts", "prompt_len", "arms", "change_pct", "outputs_equal",
                "change", "change_cpu"):
        assert key in w, (w["name"], key)
    assert set(w["arms"]) == {"main", "skip", "no_indexer"}, w["arms"].keys()
    assert w["outputs_equal"] is True, w["name"]
    assert isinstance(w["change_pct"], float), w["change_pct"]
    assert w["change"]["verdict"] in ("faster", "slower", "within noise")
    for name, arm in w["arms"].items():
        for key in ("ttft_ms", "ttft_cpu_ms", "bound", "ran"):
            assert key in arm, (w["name"], name, key)
        # GPU-only figures are absent (null) on the CPU.
        assert arm.get("host_issue_ms") is None and arm.get("device_tail_ms") is None
        assert arm["bound"] == (name == "no_indexer"), (w["name"], name)
        if arm.get("median_ttft_ms") is None:
            assert name == "no_indexer" and w["name"] == "8k_c1", (w["name"], name)
            assert not arm["ran"] and "sparse path" in arm["not_run_reason"]
            continue
        for key in ("median_ttft_ms", "indexer_calls", "launches_per_step",
                    "median_ttft_cpu_ms", "launches_per_step_all_ops"):
            assert key in arm, (w["name"], name, key)
        assert len(arm["ttft_ms"]) == 2 and all(t > 0 for t in arm["ttft_ms"])
        calls = arm["indexer_calls"]
        assert calls["total"] == 7 * 2, calls  # 7 indexer layers x 2 steps
    skip = w["arms"]["skip"]["indexer_calls"]["scored"]
    assert skip == (14 if w["name"] == "8k_c1" else 2), (w["name"], skip)
    assert w["arms"]["main"]["indexer_calls"]["scored"] == 14
PY

# --plot draws a picture (where Debian's matplotlib is installed).
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  "$bench" --platform=emulated-rocm --workloads=1k_c1 --prompts=1 --runs=2 \
    --plot="$tmp/r.png" >/dev/null 2>"$tmp/stderr" ||
    fail "--plot exited $?: $(cat "$tmp/stderr")"
  [ "$(head -c 4 "$tmp/r.png" | tail -c 3)" = PNG ] || fail "--plot wrote no PNG"
else
  echo "note: python3-matplotlib is not installed; --plot not checked"
fi

[ "$failures" -eq 0 ] && echo "PASS" || exit 1
