"""Times torch.ops.dsa ops against PyTorch equivalents in the same process.

    python3 engines/torch/bench.py [--device cpu|cuda] [--threads N]
        [--plugins a.so:b.so] [--repeats N]

Each row: the op through the plugin boundary, the same computation written
with stock PyTorch ops (eager), the median time of each, and the largest
difference between their outputs (so the two are known to compute the same
thing). Sizes are one tensor-parallel shard of DeepSeek-V3.2 (16 heads,
kv_lora 512, rope 64, qk_nope 128, v 128, index head dim 128, 64 index
heads) and a short prefill; --scale shrinks the token counts for slow
machines. Prints a Markdown table.
"""

import argparse
import math
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dsa_torch  # noqa: E402


def timed(fn, device, repeats):
    """Median seconds per call (CUDA: device events around each call)."""
    out = fn()  # warm up
    if device == "cuda":
        torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        if device == "cuda":
            begin = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            begin.record()
            out = fn()
            end.record()
            end.synchronize()
            times.append(begin.elapsed_time(end) * 1e-3)
        else:
            start = time.perf_counter()
            out = fn()
            times.append(time.perf_counter() - start)
    return statistics.median(times), out


def paged(num_requests, seq_len, block_size, device):
    blocks = (seq_len + block_size - 1) // block_size
    table = torch.randperm(num_requests * blocks).reshape(num_requests, blocks)
    return table.to(torch.int32).to(device), num_requests * blocks


def gather_tokens(cache, table, request, n):
    """[n, width] cache rows of a request's tokens 0..n-1."""
    block_size = cache.shape[1]
    pos = torch.arange(n, device=cache.device)
    blocks = table[request].long()[pos // block_size]
    return cache[blocks, pos % block_size]


def bench_indexer_topk(dsa, device, rows, width, topk, repeats):
    logits = torch.randn(rows, width, device=device)
    starts = torch.zeros(rows, dtype=torch.int32, device=device)
    ends = torch.randint(1, width + 1, (rows,), device=device).to(torch.int32)

    def ours():
        return dsa.indexer_topk(logits, starts, ends, topk)

    def theirs():
        col = torch.arange(width, device=device)
        inside = (col[None] >= starts[:, None]) & (col[None] < ends[:, None])
        masked = torch.where(inside, logits, torch.tensor(-math.inf,
                                                          device=device))
        k = min(topk, width)
        vals, idx = torch.topk(masked, k, dim=1)
        idx = torch.where(torch.isinf(vals), torch.full_like(idx, width), idx)
        idx = torch.sort(idx, dim=1).values
        return torch.where(idx == width, torch.full_like(idx, -1), idx).to(
            torch.int32)

    return ours, theirs, lambda a, b: float((a != b).sum())


def relative_diff(a, b):
    """max |a - b| over max |b|: float outputs are compared at their scale
    (the logits reach ~1e7 here, where the fp8 products' bound is 2^-12)."""
    return float((a - b).abs().max() / b.abs().max().clamp_min(1e-30))


def bench_indexer_logits(dsa, device, rows, seq_len, heads, head_dim,
                         repeats):
    block_size = 64
    table, num_blocks = paged(1, seq_len, block_size, device)
    codes = torch.randint(0, 0x70, (num_blocks, block_size, head_dim))
    scales = torch.full((num_blocks, block_size), 2.0 ** -4)
    cache = torch.cat([codes.to(torch.uint8).reshape(num_blocks, -1),
                       scales.view(torch.uint8).reshape(num_blocks, -1)],
                      1).reshape(num_blocks, block_size, head_dim + 4)
    cache = cache.to(device)
    q_fp8 = torch.randint(0, 0x70, (rows, heads, head_dim)).to(
        torch.uint8).to(device)
    hw = torch.rand(rows, heads, device=device)
    seq_lens = torch.tensor([seq_len], dtype=torch.int32, device=device)
    row_request = torch.zeros(rows, dtype=torch.int32, device=device)
    starts = torch.zeros(rows, dtype=torch.int32, device=device)
    ends = torch.full((rows,), seq_len, dtype=torch.int32, device=device)

    def decode(c):  # float8_e4m3fn bytes -> float32
        c = c.to(torch.int32)
        e, m = (c >> 3) & 15, (c & 7).to(torch.float32)
        v = torch.where(e == 0, m * 2.0 ** -9,
                        (1 + m / 8) * torch.pow(2.0, (e - 7).to(torch.float32)))
        return torch.where((c & 0x80) != 0, -v, v)

    def ours():
        return dsa.indexer_logits(q_fp8, hw, cache, table, seq_lens,
                                  row_request, starts, ends, seq_len)

    def theirs():
        # Each block: block_size * head_dim fp8 values, then block_size
        # float32 scales (ops.h).
        flat = cache.reshape(num_blocks, -1)
        pos = torch.arange(seq_len, device=cache.device)
        blocks = table[0].long()[pos // block_size]
        codes = flat[:, :block_size * head_dim].reshape(
            num_blocks, block_size, head_dim)[blocks, pos % block_size]
        key_scales = flat[:, block_size * head_dim:].contiguous().view(
            torch.float32)[blocks, pos % block_size]
        k = decode(codes) * key_scales[:, None]
        s = torch.relu(torch.einsum("rhd,jd->rhj", decode(q_fp8), k))
        return torch.einsum("rhj,rh->rj", s, hw)

    return ours, theirs, relative_diff


def bench_sparse_mla(dsa, device, tokens, seq_len, topk, heads, repeats):
    kv_lora, rope, nope, v = 512, 64, 128, 128
    block_size = 64
    table, num_blocks = paged(1, seq_len, block_size, device)
    cache = (torch.randn(num_blocks, block_size, kv_lora + rope) * 0.5).to(
        torch.bfloat16).to(device)
    q = torch.randn(tokens, heads, kv_lora + rope, device=device) * 0.1
    w = torch.randn(heads * (nope + v), kv_lora, device=device) * 0.05
    seq_lens = torch.tensor([seq_len], dtype=torch.int32, device=device)
    token_request = torch.zeros(tokens, dtype=torch.int32, device=device)
    idx = torch.stack([torch.randperm(seq_len)[:topk] for _ in range(tokens)])
    idx = idx.to(torch.int32).to(device)
    scale = (nope + rope) ** -0.5

    def ours():
        return dsa.sparse_mla(q, cache, "bfloat16", kv_lora, rope, table,
                              seq_lens, token_request, idx, w, nope, scale)

    def theirs():
        keys = gather_tokens(cache, table, 0, seq_len).float()
        sel = keys[idx.long()]  # [tokens, topk, kv_lora + rope]
        s = torch.einsum("thd,tkd->thk", q, sel) * scale
        o = torch.einsum("thk,tkc->thc", torch.softmax(s, -1),
                         sel[..., :kv_lora])
        w_uv = w.reshape(heads, nope + v, kv_lora)[:, nope:]
        return torch.einsum("thc,hvc->thv", o, w_uv)

    return ours, theirs, relative_diff


def bench_dense_mha_prefill(dsa, device, tokens, heads, repeats):
    kv_lora, rope, nope, v = 512, 64, 128, 128
    block_size = 64
    table, num_blocks = paged(1, tokens, block_size, device)
    cache = (torch.randn(num_blocks, block_size, kv_lora + rope) * 0.5).to(
        torch.bfloat16).to(device)
    q = torch.randn(tokens, heads, nope + rope, device=device) * 0.1
    w = torch.randn(heads * (nope + v), kv_lora, device=device) * 0.05
    seq_lens = torch.tensor([tokens], dtype=torch.int32, device=device)
    qsl = torch.tensor([0, tokens], dtype=torch.int32, device=device)
    scale = (nope + rope) ** -0.5

    def ours():
        return dsa.dense_mha_prefill(q, cache, "bfloat16", kv_lora, rope,
                                     table, seq_lens, qsl, w, scale)

    def theirs():
        keys = gather_tokens(cache, table, 0, tokens).float()
        c, pe = keys[:, :kv_lora], keys[:, kv_lora:]
        kv = torch.einsum("jc,hdc->hjd", c, w.reshape(heads, nope + v, kv_lora))
        k = torch.cat([kv[..., :nope], pe[None].expand(heads, -1, -1)], -1)
        s = torch.einsum("thd,hjd->htj", q, k) * scale
        mask = torch.ones(tokens, tokens, dtype=torch.bool,
                          device=device).triu(1)
        s = s.masked_fill(mask, -math.inf)
        return torch.einsum("htj,hjd->thd", torch.softmax(s, -1), kv[..., nope:])

    return ours, theirs, relative_diff


def rope_cos_sin(max_pos, rope_dim, device):
    inv = 10000.0 ** (-torch.arange(0, rope_dim, 2, dtype=torch.float64)
                      / rope_dim)
    ang = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None]
    return torch.cat([ang.cos(), ang.sin()], 1).float().to(device)


def eager_rope_neox(x, cs):
    """NeoX rope on the first cs.shape[-1] dims of x (cs: cos | sin)."""
    half = cs.shape[-1] // 2
    c, s_ = cs[..., :half], cs[..., half:]
    x1, x2 = x[..., :half], x[..., half:2 * half]
    return torch.cat([x1 * c - x2 * s_, x2 * c + x1 * s_, x[..., 2 * half:]],
                     -1)


def eager_ue8m0_fp8(y, fp8_max=448.0):
    amax = y.abs().amax(-1, keepdim=True).clamp(min=1e-4)
    scale = torch.exp2(torch.ceil(torch.log2(amax / fp8_max)))
    return (y / scale).to(torch.float8_e4m3fn).view(torch.uint8), scale


def bench_indexer_k_write(dsa, device, tokens, topk, repeats):
    head_dim, rope_dim, block_size = 128, 64, 64
    num_blocks = (tokens + block_size - 1) // block_size
    k = torch.randn(tokens, head_dim, device=device).to(torch.bfloat16)
    ln_w = (1 + 0.1 * torch.randn(head_dim, device=device)).to(torch.bfloat16)
    ln_b = (0.1 * torch.randn(head_dim, device=device)).to(torch.bfloat16)
    pos = torch.arange(tokens, device=device)
    cs = rope_cos_sin(tokens, rope_dim, device)
    slots = torch.randperm(num_blocks * block_size)[:tokens].to(device)
    cache = torch.zeros(num_blocks, block_size, head_dim + 4,
                        dtype=torch.uint8, device=device)
    ref = cache.clone()
    ref_topk = torch.empty(tokens, topk, dtype=torch.int32, device=device)

    def ours():
        dsa.indexer_k_write(k, ln_w, ln_b, 1e-6, pos, cs, "neox", slots,
                            cache, "float8_e4m3fn", topk)
        return cache

    def theirs():
        y = torch.nn.functional.layer_norm(k.float(), (head_dim,),
                                           ln_w.float(), ln_b.float(), 1e-6)
        codes, scale = eager_ue8m0_fp8(eager_rope_neox(y, cs[pos]))
        flat = ref.view(num_blocks, -1)
        b, t = slots // block_size, slots % block_size
        vals = flat[:, :block_size * head_dim].view(num_blocks, block_size,
                                                    head_dim)
        vals[b, t] = codes
        scales = flat[:, block_size * head_dim:].view(torch.float32)
        scales[b, t] = scale[:, 0]
        ref_topk.fill_(-1)
        return ref

    # Eager float32 LayerNorm rounds differently from the kernels' float64
    # statistics: count the cache bytes that differ.
    return ours, theirs, lambda a, b: float((a != b).sum())


def bench_indexer_q(dsa, device, tokens, heads, repeats):
    head_dim, rope_dim = 128, 64
    q = torch.randn(tokens, heads, head_dim, device=device).to(torch.bfloat16)
    w = torch.randn(tokens, heads, device=device).to(torch.bfloat16)
    pos = torch.arange(tokens, device=device)
    cs = rope_cos_sin(tokens, rope_dim, device)

    def ours():
        return dsa.indexer_q(q, w, pos, cs, "neox", "float8_e4m3fn")[0]

    def theirs():
        codes, scale = eager_ue8m0_fp8(
            eager_rope_neox(q.float(), cs[pos][:, None]))
        hw = w.float() * scale[..., 0] * (head_dim * heads) ** -0.5
        return codes, hw

    return ours, theirs, lambda a, b: float((a != b[0]).sum())


def bench_mla_cache_write(dsa, device, tokens, repeats):
    kv_lora, rope, block_size, num_blocks = 512, 64, 64, 4 * tokens // 64 + 4
    cache = torch.zeros(num_blocks, block_size, kv_lora + rope,
                        dtype=torch.bfloat16, device=device)
    ref = cache.clone()
    kv_c = torch.randn(tokens, kv_lora, device=device)
    k_pe = torch.randn(tokens, rope, device=device)
    slots = torch.randperm(num_blocks * block_size)[:tokens].to(device)

    def ours():
        dsa.mla_cache_write(kv_c, k_pe, slots, cache, "bfloat16", kv_lora,
                            rope)
        return cache

    def theirs():
        flat = ref.view(-1, kv_lora + rope)
        flat.index_copy_(0, slots, torch.cat([kv_c, k_pe], 1).to(
            torch.bfloat16))
        return ref

    return ours, theirs, lambda a, b: float((a.float() - b.float()).abs().max())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--threads", type=int, default=0,
                    help="torch.set_num_threads (0: PyTorch's default)")
    ap.add_argument("--plugins", default="",
                    help="plugin paths separated by ':' (default: the CPU "
                         "plugins under bazel-bin)")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--scale", type=float, default=1.0,
                    help="multiplies the token counts")
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    plugins = [p for p in args.plugins.split(":") if p] or \
        dsa_torch.cpu_plugins()
    dsa_torch.load(plugins=plugins)
    dsa = torch.ops.dsa
    torch.manual_seed(0)
    n = lambda x: max(1, int(x * args.scale))  # noqa: E731
    d = args.device
    cases = [
        ("indexer_k_write %d tokens, bf16, top-k buffer 2048" % n(8192),
         "indexer_k_write",
         bench_indexer_k_write(dsa, d, n(8192), 2048, args.repeats)),
        ("indexer_q %d tokens x 64 heads, bf16" % n(8192), "indexer_q",
         bench_indexer_q(dsa, d, n(8192), 64, args.repeats)),
        ("indexer_topk 256 rows x 8192, k 2048", "indexer_topk",
         bench_indexer_topk(dsa, d, n(256), 8192, 2048, args.repeats)),
        ("indexer_logits 64 rows x 4096 keys, 64 heads", "indexer_logits",
         bench_indexer_logits(dsa, d, n(64), 4096, 64, 128, args.repeats)),
        ("sparse_mla 64 tokens, top-k 2048 of 8192, 16 heads", "sparse_mla",
         bench_sparse_mla(dsa, d, n(64), 8192, 2048, 16, args.repeats)),
        ("dense_mha_prefill 1024-token prefill, 16 heads",
         "dense_mha_prefill", bench_dense_mha_prefill(dsa, d, n(1024), 16, args.repeats)),
        ("mla_cache_write bf16, 4096 tokens", "mla_cache_write",
         bench_mla_cache_write(dsa, d, n(4096), args.repeats)),
    ]
    print(f"torch {torch.__version__}, device {d}, "
          f"{torch.get_num_threads()} threads, median of {args.repeats}")
    print()
    # Difference: elements that differ (indices, cache bytes) or, for float
    # outputs, max |ours - eager| / max |eager|.
    print("| op | torch.ops.dsa | PyTorch eager | eager / dsa | difference |")
    print("|---|---|---|---|---|")
    platform_id = dsa.device_platform(d)
    loaded = dsa_torch.loaded()
    for name, op, (ours, theirs, diff) in cases:
        if not any(line.startswith(f"kernel {op} v")
                   and f" on {platform_id} " in line for line in loaded):
            print(f"| {name} | no {op} kernel for {platform_id} | | | |")
            continue
        if op in ("indexer_k_write", "indexer_q") and \
                not hasattr(torch, "float8_e4m3fn"):
            print(f"| {name} | | the eager side needs torch.float8_e4m3fn "
                  f"(PyTorch 2.1+) | | |")
            continue
        t_ours, a = timed(ours, d, args.repeats)
        t_theirs, b = timed(theirs, d, args.repeats)
        print(f"| {name} | {t_ours * 1e3:.2f} ms | {t_theirs * 1e3:.2f} ms | "
              f"{t_theirs / t_ours:.2f}x | {diff(a, b):.3g} |")


if __name__ == "__main__":
    main()
