"""Eager PyTorch equivalent of the GPU sparse MLA, timed on the same device.

Per shape: gather each row's top-k latent entries, S = Q K^T (bf16 inputs,
fp32 softmax), O = P V over the first kv_lora dims, then the W_UV product as
one batched matmul over heads, exactly the work sparse_mla_bench times.
Rows go in chunks so that the gathered keys fit in memory. If FlashMLA is
importable, its sparse prefill is timed too (plus the same W_UV matmul).

Prints one line per measurement:
  torch <what> heads=H rows=T topk=K v=V median_ms=... tflops=...
"""

import argparse
import math
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "device"))
from torch_timing import median_ms  # noqa: E402


def affine_indices(rows, topk, seq, gen, device):
    # (a j + b) mod seq with odd a and seq a power of two: topk distinct
    # positions per row, the same construction as sparse_mla_bench.
    a = torch.randint(0, seq // 2, (rows, 1), generator=gen) * 2 + 1
    b = torch.randint(0, seq, (rows, 1), generator=gen)
    j = torch.arange(topk).unsqueeze(0)
    return ((a * j + b) % seq).to(torch.int64).to(device)


def attention(q, kv, idx, scale, lora, out, chunk):
    rows = q.shape[0]
    for i in range(0, rows, chunk):
        k = kv[idx[i : i + chunk]]  # [c, topk, 576]
        s = torch.matmul(q[i : i + chunk], k.transpose(1, 2)).float() * scale
        p = torch.softmax(s, dim=-1).to(torch.bfloat16)
        out[i : i + chunk] = torch.matmul(p, k[..., :lora])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--topk", type=int, default=2048)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--modes", default="prefill,decode",
                    help="comma-separated: prefill, decode")
    ap.add_argument("--contexts", default="8192,65536",
                    help="decode: comma-separated context lengths")
    ap.add_argument("--requests", default="1,32,128",
                    help="decode: comma-separated request counts")
    ap.add_argument("--mtp", default="1,4",
                    help="decode: comma-separated rows per request")
    args = ap.parse_args()
    modes = set(args.modes.split(","))
    dev = torch.device("cuda")
    print("torch", torch.__version__, torch.cuda.get_device_name(0))
    gen = torch.Generator().manual_seed(0)
    lora, rope = 512, 64
    try:
        import flash_mla  # noqa: F401

        have_flash = True
    except Exception as e:  # pragma: no cover - depends on the machine
        have_flash = False
        print("flash_mla not importable:", type(e).__name__)
    shapes = [
        ("prefill", 64, 256, 192, args.tokens, 0),
        ("prefill", 128, 128, 128, args.tokens, 0),
        ("prefill", 64, 256, 192, 1024, 0),
    ]
    # Decode: requests x (1 + speculative tokens) rows over a context of
    # each length (the gathered keys' cost does not depend on it).
    for heads, v, nope in [(64, 256, 192), (128, 128, 128)]:
        for context in [int(c) for c in args.contexts.split(",")]:
            for requests in [int(r) for r in args.requests.split(",")]:
                for mtp in [int(m) for m in args.mtp.split(",")]:
                    shapes.append(
                        ("decode", heads, v, nope, requests * mtp, context))
    for mode, heads, v, nope, rows, context in shapes:
        if mode not in modes:
            continue
        topk = args.topk
        seq = 1
        while seq < (context if mode == "decode" else max(rows, 2 * topk)):
            seq *= 2
        kv = torch.randn(seq, lora + rope, device=dev).to(torch.bfloat16)
        q = torch.randn(rows, heads, lora + rope, device=dev).to(torch.bfloat16)
        w_uv = (torch.randn(heads, v, lora, device=dev) / math.sqrt(lora)).to(
            torch.bfloat16
        )
        idx = affine_indices(rows, topk, seq, gen, dev)
        scale = 1.0 / math.sqrt(nope + rope)
        o = torch.empty(rows, heads, lora, device=dev, dtype=torch.bfloat16)
        attn_flops = rows * heads * 2.0 * topk * (lora + rope + lora)
        wuv_flops = rows * heads * 2.0 * v * lora

        def run_attn():
            attention(q, kv, idx, scale, lora, o, args.chunk)

        def run_wuv():
            return torch.bmm(o.transpose(0, 1), w_uv.transpose(1, 2))

        def run_all():
            run_attn()
            return run_wuv()

        for what, fn, flops in [
            ("gather+softmax", run_attn, attn_flops),
            ("w_uv_bmm", run_wuv, wuv_flops),
            ("total", run_all, attn_flops + wuv_flops),
        ]:
            ms = median_ms(fn, args.iters, warmup=2)
            print(
                f"torch {what} mode={mode} heads={heads} rows={rows} "
                f"context={context} topk={topk} v={v} median_ms={ms:.4f} "
                f"tflops={flops / (ms * 1e-3) / 1e12:.1f}",
                flush=True,
            )
        del kv, q, o
        torch.cuda.empty_cache()


if __name__ == "__main__":
    main()
