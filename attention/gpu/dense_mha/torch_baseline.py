"""The torch equivalent of the dense MHA prefill, timed in the same device call
as dense_mha_bench: causal scaled_dot_product_attention on the cuDNN backend
plus the K/V decompression matmul ([S, 512] x kv_b_proj^T), both bf16, at
the presets' shapes; and the card's bf16 matmul rate as the ceiling.

Median of CUDA-event-timed calls after warm-up (warm L2): one request of T
tokens without context (S = T); batches of B equal prompts as SDPA's batch
dimension (what its varlen form computes for equal lengths); a chunk of n
tokens after c tokens of context with the lower-right causal mask (the
decompression then over all c + n latent rows). Prints one line per shape,
in the format of dense_mha_bench.

  python3 torch_baseline.py [--quick] [--floor] [--compare]
    --floor: T = 8192, 1024; --compare: T = 8192, 4 x 2048 and 8 x 1024 of each
    preset (dense_mha_bench --compare's shapes)
"""
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "device"))
from torch_timing import median_ms  # noqa: E402

PRESETS = [
    # name, heads, nope, rope, v
    ("glm5.1", 64, 192, 64, 256),
    ("deepseek3.2", 128, 128, 64, 128),
]
LORA = 512


def sdpa(q, k, v, mask):
    if mask is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def sdpa_backend(q, k, v, mask=None):
    """cuDNN if it takes these shapes, else torch's own choice."""
    for name, backends in (("cudnn", [SDPBackend.CUDNN_ATTENTION]),
                           ("default", None)):
        try:
            if backends is None:
                sdpa(q, k, v, mask)
            else:
                with sdpa_kernel(backends):
                    sdpa(q, k, v, mask)
            return name, backends
        except RuntimeError as e:  # backend refuses the shape
            print(f"  sdpa {name}: {str(e).splitlines()[0][:120]}")
    raise RuntimeError("no SDPA backend")


def bench(name, heads, nope, rope, v, t, iters, batch=1, context=0):
    qk = nope + rope
    dev = "cuda"
    s = context + t
    q = torch.randn(batch, heads, t, qk, device=dev, dtype=torch.bfloat16)
    k = torch.randn(batch, heads, s, qk, device=dev, dtype=torch.bfloat16)
    val = torch.randn(batch, heads, s, v, device=dev, dtype=torch.bfloat16)
    lat = torch.randn(batch * s, LORA, device=dev, dtype=torch.bfloat16)
    w = torch.randn(heads * (nope + v), LORA, device=dev,
                    dtype=torch.bfloat16) * 0.05
    mask = None
    if context:
        from torch.nn.attention.bias import causal_lower_right
        mask = causal_lower_right(t, s)
    backend, backends = sdpa_backend(q, k, val, mask)

    def attn():
        if backends is None:
            return sdpa(q, k, val, mask)
        with sdpa_kernel(backends):
            return sdpa(q, k, val, mask)

    def decompress():
        return lat @ w.t()

    sdpa_ms = median_ms(attn, iters=iters)
    mm_ms = median_ms(decompress, iters=iters)
    att_flops = 2.0 * batch * heads * (t * context + t * (t + 1) / 2) * (qk + v)
    mm_flops = 2.0 * batch * s * LORA * heads * (nope + v)
    total = sdpa_ms + mm_ms
    shape = f"T={t}" if batch == 1 else f"{batch}x{t}"
    if context:
        shape = f"ctx{context}+{t}"
    print(f"torch {name:<11} {shape:<11} sdpa[{backend}] {sdpa_ms:8.3f} ms "
          f"({att_flops / sdpa_ms / 1e9:6.1f} TFLOP/s)  matmul {mm_ms:7.3f} ms "
          f"({mm_flops / mm_ms / 1e9:6.1f} TFLOP/s)  sdpa+matmul "
          f"{total:8.3f} ms  floor(0.5x) {2 * total:8.3f} ms", flush=True)
    del q, k, val, lat, w
    torch.cuda.empty_cache()


def main():
    quick = "--quick" in sys.argv
    iters = 5 if quick else 20
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, "
          f"cudnn {torch.backends.cudnn.version()}")
    a = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(8192, 8192, device="cuda", dtype=torch.bfloat16)
    ms = median_ms(lambda: a @ b, iters=iters)
    print(f"ceiling: bf16 matmul 8192^3 {ms:.3f} ms = "
          f"{2 * 8192 ** 3 / ms / 1e9:.1f} TFLOP/s", flush=True)
    del a, b
    if "--compare" in sys.argv:  # dense_mha_bench --compare's shapes
        for name, heads, nope, rope, v in PRESETS:
            bench(name, heads, nope, rope, v, 8192, iters)
            bench(name, heads, nope, rope, v, 2048, iters, batch=4)
            bench(name, heads, nope, rope, v, 1024, iters, batch=8)
        return
    # The floor's shapes (T = 8192) first.
    for t in (8192, 1024) if "--floor" in sys.argv else (8192, 1024, 1900):
        for name, heads, nope, rope, v in PRESETS:
            bench(name, heads, nope, rope, v, t, iters)
    if "--floor" in sys.argv or quick:
        return
    for name, heads, nope, rope, v in PRESETS:
        bench(name, heads, nope, rope, v, 1024, iters, batch=8)
        bench(name, heads, nope, rope, v, 2048, iters, batch=4)
        bench(name, heads, nope, rope, v, 2048, iters, context=6144)


if __name__ == "__main__":
    main()
