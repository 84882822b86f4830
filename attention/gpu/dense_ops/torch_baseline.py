"""The torch equivalents of dense_bench, in the same device call: bf16
x @ w.T (cuBLAS through torch) at a GLM-5.1 layer's projection shapes, and
RMSNorm, median ms over 30 event-timed calls after warm-up."""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "..", "device"))
from torch_timing import median_ms  # noqa: E402


SHAPES = [("q_a_proj", 6144, 2048), ("q_b_proj", 2048, 64 * 256),
          ("kv_a_proj_with_mqa", 6144, 576), ("indexer_wq_b", 2048, 32 * 128),
          ("indexer_wk", 6144, 128), ("indexer_weights_proj", 6144, 32),
          ("o_proj", 64 * 256, 6144)]


def main():
    rows_list = [int(a) for a in sys.argv[1:]] or [1024, 8192, 32]
    dev = torch.device("cuda")
    for rows in rows_list:
        total = 0.0
        for name, k, n in SHAPES:
            x = torch.randn(rows, k, device=dev, dtype=torch.bfloat16)
            w = torch.randn(n, k, device=dev, dtype=torch.bfloat16)
            ms = median_ms(lambda: x @ w.t())
            total += ms
            print(f"torch gemm T={rows:<5} {name:<22} {ms:8.4f} ms "
                  f"{2 * rows * k * n / ms * 1e-9:7.1f} TFLOP/s")
        print(f"torch gemm T={rows:<5} sum of the layer's projections: "
              f"{total:.4f} ms")
        x = torch.randn(rows, 2048, device=dev)
        w = torch.randn(2048, device=dev, dtype=torch.bfloat16)

        def norm():
            v = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6)
            return (v * w).to(torch.bfloat16)

        print(f"torch rms_norm T={rows:<5} {median_ms(norm):8.4f} ms")


if __name__ == "__main__":
    main()
