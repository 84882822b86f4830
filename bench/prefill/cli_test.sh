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
# tiny-glm-5.1's textproto (in the runfiles), edited into models too large.
preset="model/deepseek_v32/presets/tiny-glm-5.1.textproto"
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

# Empty lists are refused alike, not read as "all".
expect_usage_error "--workloads=,: name at least one workload" --workloads=,
expect_usage_error "--arms=,: name at least one arm" --arms=,
expect_usage_error "--workloads=1k_c1,,8k_c1: an empty workload name" --workloads=1k_c1,,8k_c1
expect_usage_error "--arms=main,: an empty arm name" --arms=main,
# A run that would measure nothing: the bound cannot run the sparse path.
expect_usage_error "workload 8k_c1: no arm of --arms=no_indexer runs it, so it would measure nothing (prompts of 256 tokens > index_topk 64" \
  --platform=emulated-rocm --arms=no_indexer --workloads=8k_c1
expect_usage_error "name the same file" --platform=emulated-rocm \
  --plot="$tmp/out.json"

# Long arguments are echoed capped: one short line, whatever the flag.
long="$(head -c 100000 /dev/zero | tr '\0' q)"
for arg in --arch="$long" --"$long"=1 "$long" --op_times="$long" \
    --kv_cache_dtype="$long" --weights="$long" \
    --workloads="$long" --arms="$long" --runs="$long" --platform="$long" \
    --model="$long" --json="/tmp/$long" --plot="/tmp/$long"; do
  "$bench" "$arg" >/dev/null 2>"$tmp/stderr"
  rc=$?
  [ "$rc" -eq 2 ] || fail "${arg:0:12}...: status $rc, expected 2"
  [ "$(wc -l <"$tmp/stderr")" -eq 1 ] || fail "${arg:0:12}...: not one line"
  [ "$(wc -c <"$tmp/stderr")" -lt 600 ] ||
    fail "${arg:0:12}...: $(wc -c <"$tmp/stderr") bytes on stderr"
  grep -q " bytes)" "$tmp/stderr" ||
    fail "${arg:0:12}...: no capped echo: $(head -c 200 "$tmp/stderr")"
done

# Only regular files are written: a device, a fifo or a symlink (the rename
# would replace it) is refused by name before the run, and left as it was.
mkfifo "$tmp/fifo"
ln -s "$tmp/elsewhere.json" "$tmp/link.json"
for target in /dev/null /dev/full /dev/stdout "$tmp/fifo" "$tmp/link.json"; do
  before="$(stat -c '%F %i' "$target")"
  for flag in json plot; do
    timeout 60 "$bench" --platform=emulated-rocm --workloads=1k_c1 --prompts=1 \
      --runs=1 --"$flag"="$target" >"$tmp/stdout" 2>"$tmp/stderr"
    rc=$?
    [ "$rc" -eq 2 ] || fail "--$flag=$target: status $rc, expected 2"
    [ "$(wc -l <"$tmp/stderr")" -eq 1 ] &&
      grep -q "^prefill_bench: --$flag=$target: is a .*, not a regular file" "$tmp/stderr" ||
      fail "--$flag=$target: stderr: $(cat "$tmp/stderr")"
    [ "$(stat -c '%F %i' "$target")" = "$before" ] || fail "--$flag=$target: changed"
  done
done
[ ! -e "$tmp/elsewhere.json" ] || fail "a file was written through the link"
ls /dev | grep -q '\.tmp\.' && fail "a temporary file was left in /dev"

# Results that cannot reach stdout are a failure (status 1, one line), and
# the JSON is still written; a closed stdout is refused (status 1) before
# the run.
rm -f "$tmp/full.json"
"$bench" --platform=emulated-rocm --workloads=1k_c1 --prompts=1 --runs=1 \
  --json="$tmp/full.json" >/dev/full 2>"$tmp/stderr"
rc=$?
[ "$rc" -eq 1 ] || fail ">/dev/full: status $rc, expected 1"
[ "$(grep -c '^prefill_bench: ' "$tmp/stderr")" -eq 1 ] &&
  grep -q "^prefill_bench: cannot write the results to stdout" "$tmp/stderr" ||
  fail ">/dev/full: stderr: $(cat "$tmp/stderr")"
python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$tmp/full.json" ||
  fail ">/dev/full: the JSON was not written"
"$bench" --help >/dev/full 2>/dev/null && fail "--help >/dev/full exited 0"
"$bench" --platform=emulated-rocm --workloads=1k_c1 --prompts=1 --runs=1 \
  >&- 2>"$tmp/stderr"
rc=$?
[ "$rc" -eq 1 ] || fail ">&-: status $rc, expected 1"
grep -q "^prefill_bench: stdout is closed" "$tmp/stderr" ||
  fail ">&-: stderr: $(cat "$tmp/stderr")"

# A --json write that fails half way (the file size limit, as a full disk
# would) is status 1 with one line naming the file and why; the file there
# keeps its old contents and no temporary file is left.
echo '{"old": 1}' >"$tmp/limited.json"
(
  ulimit -f 1
  trap '' XFSZ
  exec "$bench" --platform=emulated-rocm --workloads=1k_c1 --prompts=1 \
    --runs=1 --json="$tmp/limited.json" >/dev/null 2>"$tmp/stderr"
)
rc=$?
[ "$rc" -eq 1 ] || fail "--json past the file size limit: status $rc, expected 1"
[ "$(grep -c '^prefill_bench: ' "$tmp/stderr")" -eq 1 ] &&
  grep -q "^prefill_bench: --json: writing $tmp/limited.json.tmp.*: File too large" \
    "$tmp/stderr" || fail "--json past the file size limit: stderr: $(cat "$tmp/stderr")"
[ "$(cat "$tmp/limited.json")" = '{"old": 1}' ] ||
  fail "--json past the file size limit: the old file changed"
ls "$tmp" | grep -q 'limited.json.tmp' && fail "a temporary file was left"

# A NUL byte in what a message echoes is shown escaped and the line goes on
# past it (here a preset's name).
printf 'name: "ab\\000cd"\n' >"$tmp/nul.textproto"
grep -v '^name:' "$preset" >>"$tmp/nul.textproto"
expect_usage_error 'got "ab\\x00cd"$' --platform=emulated-rocm \
  --model="$tmp/nul.textproto"

# Models too large for the machine, or for 64 bits, are refused with their
# size: index_topk 2^30 (steps of 2^32 tokens over prompts of 2^29), and
# every dimension at its maximum.
sed -e 's/max_position_embeddings: .*/max_position_embeddings: 2147483647/' \
  -e 's/index_topk: .*/index_topk: 1073741824/' "$preset" >"$tmp/huge_topk.textproto"
expect_usage_error "tiny-glm-5.1 with 3 arms needs more than 2^63 bytes" \
  --platform=emulated-rocm --model="$tmp/huge_topk.textproto" --workloads=1k_c1
# In steps of one token its prompts of 2^29 tokens are 2^29 steps: refused
# at once, where the schedule once grew until the host's memory ran out.
expect_usage_error "workload 1k_c1: 1 prompt of 536870912 tokens in steps of at most 1 token take more than 1048576 steps" \
  --platform=emulated-rocm --model="$tmp/huge_topk.textproto" --workloads=1k_c1 \
  --prompts=1 --max_num_batched_tokens=1
cat >"$tmp/largest.textproto" <<'EOF'
name: "largest"
num_hidden_layers: 1024
num_nextn_predict_layers: 64
hidden_size: 65536
num_attention_heads: 65536
q_lora_rank: 65536
kv_lora_rank: 65536
qk_nope_head_dim: 65536
qk_rope_head_dim: 65536
v_head_dim: 65536
max_position_embeddings: 2147483647
vocab_size: 4194304
rope_theta: 10000
rms_norm_eps: 1e-6
mla_rope_style: MLA_ROPE_INTERLEAVED
indexer {
  index_n_heads: 65536
  index_head_dim: 65536
  index_topk: 2048
  rope_style: INDEXER_ROPE_NEOX
  all_layers: true
}
EOF
expect_usage_error "largest with 3 arms needs more than 2^63 bytes" \
  --platform=emulated-rocm --model="$tmp/largest.textproto"
expect_usage_error "largest with 1 arm needs about 4.3 EiB of host memory" \
  --platform=emulated-rocm --model="$tmp/largest.textproto" --arms=main \
  --workloads=1k_c1 --prompts=1 --max_num_batched_tokens=1

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
