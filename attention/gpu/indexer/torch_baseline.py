"""PyTorch side of the indexer timings of testing/gpu/device_run.sh, timed in the same call.

Measures the card's ceilings (device-to-device copy bandwidth, bf16 matrix
rate on random data) and the torch equivalents of the indexer scoring at the
shapes the C++ bench times: the logits as a bf16 matmul + relu + weighted sum
over heads + causal mask, and torch.topk over causal float32 logits. Every
figure is the median of event-timed calls after warm-up.

Usage: python3 torch_baseline.py OURS_RESULTS_FILE [DECODE_REQUESTS] [--only=topk]
  Reads the `ours_*` lines the C++ bench printed and prints the side-by-side
  tables last, with DeepGEMM's H200 figures beside our logits and vLLM's and
  SGLang's beside our top-k. The paged decode reference (one query row per
  request over an 8K context, the cache already gathered) uses
  DECODE_REQUESTS requests (default 32). --only=topk times the copy ceiling
  and torch.topk alone: causal rows of T = 1024, 1900, 8192 and the decode
  shapes (1 and 32 rows of 64K and 128K keys, N(0, 1) logits).
"""

import os
import re
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "device"))
from torch_timing import median_ms  # noqa: E402


def ceilings(matmul=True):
    n = 1 << 31  # 2 GiB each way
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), iters=20)
    copy_gbps = 2 * n / (ms * 1e-3) / 1e9
    del src, dst
    if not matmul:
        return copy_gbps, None
    m = 8192
    a = torch.randn(m, m, dtype=torch.bfloat16, device="cuda")
    b = torch.randn(m, m, dtype=torch.bfloat16, device="cuda")
    ms = median_ms(lambda: a @ b, iters=20)
    tflops = 2 * m**3 / (ms * 1e-3) / 1e12
    return copy_gbps, tflops


def torch_logits_ms(heads, tokens):
    q = torch.randn(tokens, heads, 128, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(tokens, 128, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(tokens, heads, dtype=torch.bfloat16, device="cuda")
    causal = torch.ones(tokens, tokens, dtype=torch.bool, device="cuda").tril()

    def ref():
        s = torch.matmul(q, k.t())  # [T, H, T]
        logits = (s.relu() * w[:, :, None]).sum(dim=1, dtype=torch.float32)
        return logits.masked_fill_(~causal, float("-inf"))

    iters = 10 if tokens >= 8192 else 30
    return median_ms(ref, iters=iters)


def torch_decode_logits_ms(heads, context, requests):
    """Paged decode as torch would do it on a gathered cache: one query row
    per request against its whole context."""
    q = torch.randn(requests, heads, 128, dtype=torch.bfloat16, device="cuda")
    k = torch.randn(requests, context, 128, dtype=torch.bfloat16, device="cuda")
    w = torch.randn(requests, heads, dtype=torch.bfloat16, device="cuda")

    def ref():
        s = torch.bmm(q, k.transpose(1, 2))  # [R, H, context]
        return (s.relu() * w[:, :, None]).sum(dim=1, dtype=torch.float32)

    return median_ms(ref)


def torch_topk_ms(tokens, k):
    logits = torch.randn(tokens, tokens, dtype=torch.float32, device="cuda")
    causal = torch.ones(tokens, tokens, dtype=torch.bool, device="cuda").tril()
    logits.masked_fill_(~causal, float("-inf"))
    k = min(k, tokens)
    return median_ms(lambda: torch.topk(logits, k, dim=-1))


def torch_decode_topk_ms(rows, keys, k):
    logits = torch.randn(rows, keys, dtype=torch.float32, device="cuda")
    return median_ms(lambda: torch.topk(logits, k, dim=-1))


# Top-k shapes: (rows, keys a row, causal), and the peers' H200 figures
# (measured by us in separate calls, not in this one; kernel_anchors.md):
# vLLM's top_k_per_row at T = 8192, SGLang's single-CTA radix select
# (fast_topk, one CTA a row) on N(0, 1) rows of 64K and 128K keys. 32 rows
# take a single-CTA kernel the time of one (32 CTAs on 132 multiprocessors).
TOPK_SHAPES = [(1024, 1024, True), (1900, 1900, True), (8192, 8192, True),
               (1, 65536, False), (1, 131072, False), (32, 65536, False),
               (32, 131072, False)]
TOPK_PEERS = {
    (8192, 8192, True): ("vLLM top_k_per_row", 0.147),
    (1, 65536, False): ("SGLang fast_topk", 0.0346),
    (1, 131072, False): ("SGLang fast_topk", 0.0575),
    (32, 65536, False): ("SGLang fast_topk (1-row figure)", 0.0346),
    (32, 131072, False): ("SGLang fast_topk (1-row figure)", 0.0575),
}


def read_ours_topk(path):
    """{(rows, keys, causal, logits source): (auto ms or None, {path: ms})}
    from the bench's `ours_topk` lines (auto=1: the heuristics' choice)."""
    ours = {}
    for line in open(path):
        m = re.match(r"ours_topk (.*)", line)
        if not m:
            continue
        f = dict(kv.split("=", 1) for kv in m.group(1).split() if "=" in kv)
        if "rows" not in f or f.get("k") != "2048":
            continue
        key = (int(f["rows"]), int(f["T"]), f["causal"] == "1",
               f.get("logits", "indexer"))
        auto, paths = ours.get(key, (None, {}))
        ms = float(f["median_ms"])
        if f.get("auto") == "1":
            auto = ms
        else:
            paths[f["path"]] = ms
        ours[key] = (auto, paths)
    return ours


def topk_report(ours_path, copy_gbps):
    ours = read_ours_topk(ours_path) if ours_path else {}
    rows_out = []
    for rows, keys, causal in TOPK_SHAPES:
        if causal:
            ms = torch_topk_ms(keys, 2048)
            keys_read = keys * (keys + 1) / 2
        else:
            ms = torch_decode_topk_ms(rows, keys, 2048)
            keys_read = rows * keys
        torch.cuda.empty_cache()
        print(f"torch_topk k=2048 rows={rows} T={keys} causal={int(causal)} "
              f"median_ms={ms:.4f}")
        bytes_min = keys_read * 4 + rows * 2048 * 4
        peer = TOPK_PEERS.get((rows, keys, causal))
        for source in ("indexer", "normal"):
            auto, paths = ours.get((rows, keys, causal, source), (None, {}))
            if auto is None:
                continue
            rows_out.append((rows, keys, causal, source, auto, ms, peer,
                             bytes_min / (auto * 1e-3) / 1e9, paths))
    print()
    print("| top-k 2048 | logits | ours (ms) | torch.topk (ms) | ours vs torch "
          "| peer (ms, H200, separate call) | peer / ours | ours: GB/s "
          "| of the copy ceiling | each path forced (ms) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for rows, keys, causal, source, mine, theirs, peer, rate, paths in rows_out:
        shape = (f"{keys} causal rows" if causal else f"{rows} x {keys}")
        peer_text = f"{peer[0]} {peer[1]:.4f}" if peer else "-"
        ratio = f"{peer[1] / mine:.2f}x" if peer else "-"
        variants = ", ".join(f"{p} {v:.4f}" for p, v in sorted(paths.items())) or "-"
        print(f"| {shape} | {source} | {mine:.4f} | {theirs:.4f} "
              f"| {theirs / mine:.1f}x | {peer_text} | {ratio} | {rate:.0f} "
              f"| {rate / copy_gbps:.2f} of {copy_gbps:.0f} | {variants} |")


# DeepGEMM's figures on a lent H200 (issue 8's table; measured by us in a
# separate call, not in this one): fp8_mqa_logits and fp8_paged_mqa_logits.
DEEPGEMM_MS = {
    ("logits", 32, 1024): 0.030, ("logits", 32, 1900): 0.047,
    ("logits", 32, 8192): 0.382, ("logits", 64, 1024): 0.033,
    ("logits", 64, 1900): 0.061, ("logits", 64, 8192): 0.585,
    ("decode_logits", 32, 8192): 0.022,
}


def read_ours(path):
    """{(kernel, heads or k, T): ms} from the bench's `ours_*` lines."""
    ours = {}
    for line in open(path):
        m = re.match(r"ours_(\w+) (.*)", line)
        if not m:
            continue
        fields = dict(kv.split("=", 1) for kv in m.group(2).split() if "=" in kv)
        size = int(fields.get("heads", fields.get("k", 0)))
        if "T" in fields and "median_ms" in fields:
            ours[(m.group(1), size, int(fields["T"]))] = float(fields["median_ms"])
    return ours


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    only_topk = "--only=topk" in sys.argv[1:]
    ours_path = args[0] if args else None
    ours = read_ours(ours_path) if ours_path else {}
    decode_requests = int(args[1]) if len(args) > 1 else 32
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    if only_topk:
        copy_gbps, mm_tflops = ceilings(matmul=False)
        print(f"ceiling copy_gbps={copy_gbps:.0f}")
        topk_report(ours_path, copy_gbps)
        return
    copy_gbps, mm_tflops = ceilings()
    print(f"ceiling copy_gbps={copy_gbps:.0f} bf16_matmul_tflops={mm_tflops:.0f}")
    rows = []

    def add_logits(name, key, ms, flops):
        mine = ours.get(key)
        dg = DEEPGEMM_MS.get(key)
        rows.append((name, mine, ms, dg,
                     flops / (mine * 1e-3) / 1e12 if mine else None,
                     mm_tflops, "TFLOP/s"))

    for heads in (32, 64):
        for tokens in (1024, 1900, 8192):
            ms = torch_logits_ms(heads, tokens)
            torch.cuda.empty_cache()
            flops = 2.0 * heads * 128 * tokens * (tokens + 1) / 2
            print(f"torch_logits heads={heads} T={tokens} median_ms={ms:.4f}")
            add_logits(f"logits {heads}x128 T={tokens}", ("logits", heads, tokens),
                       ms, flops)
    for heads in (32,):
        context = 8192
        ms = torch_decode_logits_ms(heads, context, decode_requests)
        torch.cuda.empty_cache()
        flops = 2.0 * heads * 128 * context * decode_requests
        print(f"torch_decode_logits heads={heads} T={context} "
              f"requests={decode_requests} median_ms={ms:.4f}")
        add_logits(f"decode logits {heads}x128, {decode_requests} x {context}",
                   ("decode_logits", heads, context), ms, flops)
    print()
    print("| op | ours (ms) | torch (ms) | ours vs torch | DeepGEMM (ms, published) "
          "| ours: rate | of the ceiling |")
    print("|---|---|---|---|---|---|---|")
    for name, mine, theirs, dg, rate, ceiling, unit in rows:
        dg_text = f"{dg:.3f}" if dg else "-"
        if mine is None:
            print(f"| {name} | - | {theirs:.4f} | - | {dg_text} | - | - |")
        else:
            print(f"| {name} | {mine:.4f} | {theirs:.4f} | {theirs / mine:.1f}x "
                  f"| {dg_text} | {rate:.0f} {unit} "
                  f"| {rate / ceiling:.2f} of {ceiling:.0f} |")
    print()
    topk_report(ours_path, copy_gbps)


if __name__ == "__main__":
    main()
