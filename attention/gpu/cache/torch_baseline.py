"""PyTorch equivalents of the three memory-bound ops, timed in the same call
as attention/gpu/cache_bench (indexer K write, indexer Q, MLA latent cache
write), plus the card's copy bandwidth. Plain eager PyTorch: what an engine
without a fused kernel runs (LayerNorm, rope by slicing, amax, a
power-of-two scale, the cast to fp8, a scatter into the paged cache, the
top-k buffer fill).

Usage: python3 torch_baseline.py [--iters=N]
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "device"))
from torch_timing import median_ms  # noqa: E402


def rope_neox(x, cos, sin):
    half = cos.shape[-1]
    x1, x2 = x[..., :half], x[..., half:2 * half]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin, x[..., 2 * half:]], -1)


def ue8m0_quant(y, fp8_max=448.0):
    amax = y.abs().amax(-1, keepdim=True).clamp(min=1e-4)
    scale = torch.pow(2.0, torch.ceil(torch.log2(amax / fp8_max)))
    return (y / scale).to(torch.float8_e4m3fn), scale


def main():
    iters = 50
    for a in sys.argv[1:]:
        if a.startswith("--iters="):
            iters = int(a.split("=")[1])
    dev = "cuda"
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name()}")
    n = 1 << 28  # 1 GiB of float32
    x = torch.empty(n, dtype=torch.float32, device=dev)
    y = torch.empty_like(x)
    ms = median_ms(lambda: y.copy_(x), 20)
    print(f"{'copy 1 GiB (read + write)':44s} {ms:9.4f} ms  "
          f"{2 * 4 * n / 1e6:8.1f} MB  {2 * 4 * n / (ms * 1e-3) / 1e9:7.0f} GB/s")
    del x, y
    hd, rope, topk_n = 128, 64, 2048
    max_pos = 16384
    pos_all = torch.arange(max_pos, device=dev, dtype=torch.float32)
    inv = 10000.0 ** (-torch.arange(0, rope, 2, device=dev, dtype=torch.float32) / rope)
    ang = pos_all[:, None] * inv[None, :]
    cos_t, sin_t = ang.cos(), ang.sin()
    for T in (1024, 1900, 8192):
        pos = torch.arange(T, device=dev)
        slots = torch.arange(T, device=dev)
        k = torch.randn(T, hd, device=dev, dtype=torch.bfloat16)
        w = torch.randn(hd, device=dev, dtype=torch.bfloat16)
        cache_vals = torch.empty(T + 64, hd, dtype=torch.float8_e4m3fn, device=dev)
        cache_scales = torch.empty(T + 64, dtype=torch.float32, device=dev)
        topk = torch.empty(T, topk_n, dtype=torch.int32, device=dev)

        def kwrite():
            yv = torch.nn.functional.layer_norm(k.float(), (hd,), w.float(), w.float(), 1e-6)
            yv = rope_neox(yv, cos_t[pos], sin_t[pos])
            q8, s = ue8m0_quant(yv)
            cache_vals[slots] = q8
            cache_scales[slots] = s[:, 0]
            topk.fill_(-1)

        ms = median_ms(kwrite, iters)
        by = T * (hd * 2 + hd + 4 + topk_n * 4 + 16 + rope * 4)
        print(f"{'torch indexer_k_write T=%d bf16 topk=2048' % T:44s} {ms:9.4f} ms  "
              f"{by / 1e6:8.1f} MB  {by / (ms * 1e-3) / 1e9:7.0f} GB/s")
        for H in (32, 64):
            q = torch.randn(T, H, hd, device=dev, dtype=torch.bfloat16)
            wt = torch.randn(T, H, device=dev, dtype=torch.bfloat16)

            def iq():
                c = cos_t[pos][:, None, :]
                s_ = sin_t[pos][:, None, :]
                yv = rope_neox(q.float(), c, s_)
                q8, s = ue8m0_quant(yv)
                return q8, wt.float() * s[..., 0] * (hd * H) ** -0.5

            ms = median_ms(iq, iters)
            by = T * (H * (hd * 2 + 2 + hd + 4) + 8 + rope * 4)
            print(f"{'torch indexer_q T=%d heads=%d bf16' % (T, H):44s} {ms:9.4f} ms  "
                  f"{by / 1e6:8.1f} MB  {by / (ms * 1e-3) / 1e9:7.0f} GB/s")
        kv = torch.randn(T, 512, device=dev, dtype=torch.bfloat16)
        pe = torch.randn(T, rope, device=dev, dtype=torch.bfloat16)
        cache_bf16 = torch.empty(T + 64, 576, dtype=torch.bfloat16, device=dev)

        def mla_bf16():
            cache_bf16[slots] = torch.cat([kv, pe], -1)

        ms = median_ms(mla_bf16, iters)
        by = T * (576 * 2 * 2 + 8)
        print(f"{'torch mla_cache_write T=%d bf16' % T:44s} {ms:9.4f} ms  "
              f"{by / 1e6:8.1f} MB  {by / (ms * 1e-3) / 1e9:7.0f} GB/s")
        cache_fp8 = torch.empty(T + 64, 656, dtype=torch.uint8, device=dev)

        def mla_fp8():
            q8, s = ue8m0_quant(kv.float().view(T, 4, 128))
            entry = torch.cat([q8.view(T, 512).view(torch.uint8),
                               s.view(T, 4).contiguous().view(torch.uint8),
                               pe.contiguous().view(torch.uint8)], -1)
            cache_fp8[slots] = entry

        ms = median_ms(mla_fp8, iters)
        by = T * (576 * 2 + 656 + 8)
        print(f"{'torch mla_cache_write T=%d fp8_ds_mla' % T:44s} {ms:9.4f} ms  "
              f"{by / 1e6:8.1f} MB  {by / (ms * 1e-3) / 1e9:7.0f} GB/s")


if __name__ == "__main__":
    main()
