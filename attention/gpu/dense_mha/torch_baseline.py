"""The torch equivalent of the dense MHA prefill, timed in the same device call
as dense_mha_bench: causal scaled_dot_product_attention on the cuDNN backend
plus the K/V decompression matmul ([S, 512] x kv_b_proj^T), both bf16, at
the presets' shapes; and the card's bf16 matmul rate as the ceiling.

Median of CUDA-event-timed calls after warm-up (warm L2), one request of T
tokens without context (S = T). Prints one line per shape, in the format of
dense_mha_bench.

  python3 torch_baseline.py [--quick] [--floor]   (--floor: T = 8192, 1024)
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


def sdpa_backend(q, k, v):
    """cuDNN if it takes these shapes, else torch's own choice."""
    for name, backends in (("cudnn", [SDPBackend.CUDNN_ATTENTION]),
                           ("default", None)):
        try:
            if backends is None:
                F.scaled_dot_product_attention(q, k, v, is_causal=True)
            else:
                with sdpa_kernel(backends):
                    F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return name, backends
        except RuntimeError as e:  # backend refuses the shape
            print(f"  sdpa {name}: {str(e).splitlines()[0][:120]}")
    raise RuntimeError("no SDPA backend")


def bench(name, heads, nope, rope, v, t, iters):
    qk = nope + rope
    dev = "cuda"
    q = torch.randn(1, heads, t, qk, device=dev, dtype=torch.bfloat16)
    k = torch.randn(1, heads, t, qk, device=dev, dtype=torch.bfloat16)
    val = torch.randn(1, heads, t, v, device=dev, dtype=torch.bfloat16)
    lat = torch.randn(t, LORA, device=dev, dtype=torch.bfloat16)
    w = torch.randn(heads * (nope + v), LORA, device=dev,
                    dtype=torch.bfloat16) * 0.05
    backend, backends = sdpa_backend(q, k, val)

    def attn():
        if backends is None:
            return F.scaled_dot_product_attention(q, k, val, is_causal=True)
        with sdpa_kernel(backends):
            return F.scaled_dot_product_attention(q, k, val, is_causal=True)

    def decompress():
        return lat @ w.t()

    sdpa_ms = median_ms(attn, iters=iters)
    mm_ms = median_ms(decompress, iters=iters)
    att_flops = 2.0 * heads * (t * (t + 1) / 2) * (qk + v)
    mm_flops = 2.0 * t * LORA * heads * (nope + v)
    total = sdpa_ms + mm_ms
    print(f"torch {name:<11} T={t:<5} sdpa[{backend}] {sdpa_ms:8.3f} ms "
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
    # The floor's shapes (T = 8192) first.
    for t in (8192, 1024) if "--floor" in sys.argv else (8192, 1024, 1900):
        for name, heads, nope, rope, v in PRESETS:
            bench(name, heads, nope, rope, v, t, iters)


if __name__ == "__main__":
    main()
