"""PyTorch side of attention/gpu/device_run.sh, timed in the same call.

Measures the card's ceilings (device-to-device copy bandwidth, bf16 matrix
rate on random data) and the torch equivalents of the indexer scoring at the
shapes the C++ bench times: the logits as a bf16 matmul + relu + weighted sum
over heads + causal mask, and torch.topk over causal float32 logits. Every
figure is the median of event-timed calls after warm-up.

Usage: python3 torch_reference.py OURS_RESULTS_FILE
  Reads the `ours_*` lines the C++ bench printed and prints the side-by-side
  table last.
"""

import re
import statistics
import sys

import torch


def median_ms(fn, iters=30, warmup=5):
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(iters):
        begin = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        begin.record()
        fn()
        end.record()
        end.synchronize()
        times.append(begin.elapsed_time(end))
    return statistics.median(times)


def ceilings():
    n = 1 << 31  # 2 GiB each way
    src = torch.randint(0, 255, (n,), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    ms = median_ms(lambda: dst.copy_(src), iters=20)
    copy_gbps = 2 * n / (ms * 1e-3) / 1e9
    del src, dst
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


def torch_topk_ms(tokens, k):
    logits = torch.randn(tokens, tokens, dtype=torch.float32, device="cuda")
    causal = torch.ones(tokens, tokens, dtype=torch.bool, device="cuda").tril()
    logits.masked_fill_(~causal, float("-inf"))
    k = min(k, tokens)
    return median_ms(lambda: torch.topk(logits, k, dim=-1))


def main():
    ours = {}
    if len(sys.argv) > 1:
        for line in open(sys.argv[1]):
            m = re.match(r"ours_(\w+) (\S+)=(\d+) T=(\d+) median_ms=([\d.]+)", line)
            if m:
                ours[(m.group(1), int(m.group(3)), int(m.group(4)))] = float(m.group(5))
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}")
    copy_gbps, mm_tflops = ceilings()
    print(f"ceiling copy_gbps={copy_gbps:.0f} bf16_matmul_tflops={mm_tflops:.0f}")
    rows = []
    for heads in (32, 64):
        for tokens in (1024, 1900, 8192):
            ms = torch_logits_ms(heads, tokens)
            torch.cuda.empty_cache()
            flops = 2.0 * heads * 128 * tokens * (tokens + 1) / 2
            print(f"torch_logits heads={heads} T={tokens} median_ms={ms:.4f}")
            mine = ours.get(("logits", heads, tokens))
            rows.append((f"logits {heads}x128 T={tokens}", mine, ms,
                         flops / (mine * 1e-3) / 1e12 if mine else None,
                         mm_tflops))
    for tokens in (1024, 1900, 8192):
        ms = torch_topk_ms(tokens, 2048)
        torch.cuda.empty_cache()
        print(f"torch_topk k=2048 T={tokens} median_ms={ms:.4f}")
        mine = ours.get(("topk", 2048, tokens))
        bytes_min = tokens * (tokens + 1) / 2 * 4 + tokens * 2048 * 4
        rows.append((f"topk 2048 T={tokens}", mine, ms,
                     bytes_min / (mine * 1e-3) / 1e9 if mine else None,
                     copy_gbps))
    print()
    print("| op | ours (ms) | torch (ms) | speedup | ours: rate | ceiling |")
    print("|---|---|---|---|---|---|")
    for name, mine, theirs, rate, ceiling in rows:
        unit = "TFLOP/s" if name.startswith("logits") else "GB/s"
        if mine is None:
            print(f"| {name} | - | {theirs:.4f} | - | - | {ceiling:.0f} {unit} |")
        else:
            print(f"| {name} | {mine:.4f} | {theirs:.4f} | {theirs / mine:.1f}x "
                  f"| {rate:.0f} {unit} | {ceiling:.0f} {unit} |")


if __name__ == "__main__":
    main()
