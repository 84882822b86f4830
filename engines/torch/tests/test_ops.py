"""Every op through torch.ops.dsa against float64 references written here.

The references follow attention/ops.h and nothing else of the project: plain
PyTorch in float64 on the CPU, fresh random inputs each run (the seed is
printed on failure by pytest's parametrisation id), fresh outputs poisoned by
the binding (set_poison_outputs) and caches poisoned here, so an element a
kernel forgets, or one it writes that it should not, fails the test.
"""

import math
import os
import re
import struct
import subprocess
import sys

import pytest
import torch

SEEDS = [int.from_bytes(os.urandom(4), "little") for _ in range(2)]
POISON = 0xAB  # cache bytes no write leaves behind by chance

# --------------------------------------------------------------------------
# fp8 E4M3 (ops.h, attention/dtypes/fp8.h), from the formats' definitions.

FP8 = {
    "float8_e4m3fn": dict(bias=7, max=448.0),
    "float8_e4m3fnuz": dict(bias=8, max=240.0),
}


def fp8_decode(codes, encoding):
    """uint8 codes -> float64 values (NaN codes -> NaN)."""
    bias = FP8[encoding]["bias"]
    c = codes.to(torch.int64)
    mag, neg = c & 0x7F, (c & 0x80) != 0
    e, m = mag >> 3, (mag & 7).to(torch.float64)
    normal = (1 + m / 8) * torch.pow(2.0, (e - bias).to(torch.float64))
    sub = m * 2.0 ** (1 - bias - 3)
    v = torch.where(e == 0, sub, normal)
    v = torch.where(neg, -v, v)
    nan = mag == 0x7F if encoding == "float8_e4m3fn" else c == 0x80
    return torch.where(nan, torch.full_like(v, math.nan), v)


def ue8m0_scale(amax, fp8_max):
    """max(amax, 1e-4) / fp8_max rounded up to a power of two (float32)."""
    a = torch.clamp(amax.to(torch.float32), min=1e-4) / fp8_max
    return torch.pow(2.0, torch.ceil(torch.log2(a.to(torch.float64))))


def assert_fp8_rounds(codes, x, encoding):
    """Each decoded code is a nearest fp8 value of x (within half a step)."""
    got = fp8_decode(codes, encoding)
    assert not torch.isnan(got).any(), "fp8 output holds NaN codes"
    bias = FP8[encoding]["bias"]
    a = x.abs()
    min_normal = 2.0 ** (1 - bias)
    exp = torch.floor(torch.log2(torch.clamp(a, min=min_normal)))
    half_step = torch.pow(2.0, exp - 4)
    err = (got - x).abs()
    bad = err > half_step * (1 + 1e-5) + 1e-30
    assert not bad.any(), (
        f"{int(bad.sum())} fp8 values off: got {got[bad][:4].tolist()}, "
        f"want {x[bad][:4].tolist()}")


def random_fp8(shape, encoding, gen):
    """Random finite fp8 codes."""
    codes = torch.randint(0, 256, shape, generator=gen, dtype=torch.int64)
    nan = (codes & 0x7F) == 0x7F if encoding == "float8_e4m3fn" else codes == 0x80
    return torch.where(nan, torch.zeros_like(codes), codes).to(torch.uint8)


# --------------------------------------------------------------------------
# Rope, paging.


def rope(x, positions, cos_sin, style):
    """x [..., tokens-first, ..., dim] float64: rope on the first rope_dim
    dims; positions index dim 0."""
    r = cos_sin.shape[1]
    half = r // 2
    cs = cos_sin.to(torch.float64)[positions]
    cos, sin = cs[:, :half], cs[:, half:]
    shape = [x.shape[0]] + [1] * (x.dim() - 2) + [half]
    cos, sin = cos.reshape(shape), sin.reshape(shape)
    out = x.clone()
    if style == "neox":
        x1, x2 = x[..., :half], x[..., half:r]
        out[..., :half] = x1 * cos - x2 * sin
        out[..., half:r] = x2 * cos + x1 * sin
    else:
        x1, x2 = x[..., 0:r:2], x[..., 1:r:2]
        out[..., 0:r:2] = x1 * cos - x2 * sin
        out[..., 1:r:2] = x2 * cos + x1 * sin
    return out


def make_cos_sin(max_pos, rope_dim):
    inv = 1.0 / (10000 ** (torch.arange(0, rope_dim, 2, dtype=torch.float64)
                           / rope_dim))
    freqs = torch.arange(max_pos, dtype=torch.float64)[:, None] * inv[None]
    return torch.cat([freqs.cos(), freqs.sin()], 1).to(torch.float32)


def paging(seq_lens, block_size, gen, spare_blocks=3):
    """A block table over distinct random blocks for requests of seq_lens."""
    max_blocks = max(1, max((s + block_size - 1) // block_size for s in seq_lens))
    num_blocks = len(seq_lens) * max_blocks + spare_blocks
    perm = torch.randperm(num_blocks, generator=gen)
    table = perm[: len(seq_lens) * max_blocks].reshape(len(seq_lens), max_blocks)
    return table.to(torch.int32), num_blocks


def slot_of(table, request, position, block_size):
    return int(table[request, position // block_size]) * block_size + position % block_size


def to_dev(device, *tensors):
    return [t.to(device) for t in tensors]


def float_input(shape, dtype, gen, scale=1.0):
    return (torch.randn(shape, generator=gen) * scale).to(dtype)


# --------------------------------------------------------------------------
# indexer_q


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("style", ["neox", "interleaved"])
@pytest.mark.parametrize("encoding", ["float8_e4m3fn", "float8_e4m3fnuz"])
def test_indexer_q(dsa, device, seed, dtype, style, encoding,
                   require_kernel):
    require_kernel("indexer_q")
    gen = torch.Generator().manual_seed(seed)
    tokens, heads, head_dim, rope_dim, max_pos = 7, 4, 64, 16, 50
    q = float_input((tokens, heads, head_dim), dtype, gen, 3.0)
    weights = float_input((tokens, heads), dtype, gen)
    positions = torch.randint(0, max_pos, (tokens,), generator=gen)
    cos_sin = make_cos_sin(max_pos, rope_dim)

    q_fp8, head_weights = dsa.indexer_q(
        *to_dev(device, q, weights, positions, cos_sin), style, encoding)
    assert q_fp8.dtype == torch.uint8 and q_fp8.shape == q.shape
    assert head_weights.dtype == torch.float32
    assert q_fp8.device.type == device

    roped = rope(q.to(torch.float64), positions, cos_sin, style)
    amax = roped.abs().amax(-1)
    scale = ue8m0_scale(amax, FP8[encoding]["max"])
    assert_fp8_rounds(q_fp8.cpu(), roped / scale[..., None], encoding)
    want = (weights.to(torch.float64) * scale * head_dim ** -0.5
            * heads ** -0.5)
    torch.testing.assert_close(head_weights.cpu().to(torch.float64), want,
                               rtol=1e-5, atol=1e-7)


# --------------------------------------------------------------------------
# indexer_k_write


def k_cache_entry(cache, slot, head_dim):
    """(fp8 codes [head_dim], scale) of a slot of the indexer K cache."""
    block_size = cache.shape[1]
    flat = cache.reshape(cache.shape[0], -1)
    block, t = divmod(slot, block_size)
    codes = flat[block, t * head_dim:(t + 1) * head_dim]
    off = block_size * head_dim + 4 * t
    scale = flat[block, off:off + 4].clone().view(torch.float32)[0]
    return codes, float(scale)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("style", ["neox", "interleaved"])
@pytest.mark.parametrize("encoding", ["float8_e4m3fn", "float8_e4m3fnuz"])
def test_indexer_k_write(dsa, device, seed, dtype, style, encoding,
                         require_kernel):
    require_kernel("indexer_k_write")
    gen = torch.Generator().manual_seed(seed)
    tokens, head_dim, rope_dim, max_pos = 9, 32, 16, 40
    num_blocks, block_size, topk = 4, 4, 6
    k = float_input((tokens, head_dim), dtype, gen, 2.0)
    ln_w = float_input((head_dim,), dtype, gen)
    ln_b = float_input((head_dim,), dtype, gen, 0.1)
    eps = 1e-6
    positions = torch.randint(0, max_pos, (tokens,), generator=gen)
    cos_sin = make_cos_sin(max_pos, rope_dim)
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:tokens]
    slots[torch.randperm(tokens, generator=gen)[:2]] = -1  # padding
    cache = torch.full((num_blocks, block_size, head_dim + 4), POISON,
                       dtype=torch.uint8)
    cache_dev = cache.to(device)

    topk_indices = dsa.indexer_k_write(
        *to_dev(device, k, ln_w, ln_b), eps,
        *to_dev(device, positions, cos_sin), style, slots.to(device),
        cache_dev, encoding, topk)
    assert topk_indices.dtype == torch.int32
    assert topk_indices.shape == (tokens, topk)
    assert (topk_indices.cpu() == -1).all()

    k64 = k.to(torch.float64)
    mean = k64.mean(-1, keepdim=True)
    var = ((k64 - mean) ** 2).mean(-1, keepdim=True)
    y = (k64 - mean) / torch.sqrt(var + eps) * ln_w.to(torch.float64) \
        + ln_b.to(torch.float64)
    y = rope(y, positions, cos_sin, style)
    scale = ue8m0_scale(y.abs().amax(-1), FP8[encoding]["max"])

    got = cache_dev.cpu()
    written = set()
    for t in range(tokens):
        slot = int(slots[t])
        if slot < 0:
            continue
        written.add(slot)
        codes, s = k_cache_entry(got, slot, head_dim)
        assert s == float(scale[t]), f"token {t}: scale {s}, want {scale[t]}"
        assert_fp8_rounds(codes, y[t] / scale[t], encoding)
    for slot in range(num_blocks * block_size):
        if slot in written:
            continue
        codes, _ = k_cache_entry(got, slot, head_dim)
        block, t = divmod(slot, block_size)
        flat = got.reshape(num_blocks, -1)[block]
        off = block_size * head_dim + 4 * t
        assert (codes == POISON).all() and (flat[off:off + 4] == POISON).all(), \
            f"slot {slot} was not in slot_mapping but was written"


# --------------------------------------------------------------------------
# indexer_logits


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("encoding", ["float8_e4m3fn", "float8_e4m3fnuz"])
def test_indexer_logits(dsa, device, seed, encoding,
                        require_kernel):
    require_kernel("indexer_logits")
    gen = torch.Generator().manual_seed(seed)
    heads, head_dim, block_size = 4, 32, 8
    seq_lens = [int(x) for x in torch.randint(1, 40, (3,), generator=gen)]
    table, num_blocks = paging(seq_lens, block_size, gen)
    cache = torch.full((num_blocks, block_size, head_dim + 4), POISON,
                       dtype=torch.uint8)
    flat = cache.reshape(num_blocks, -1)
    k_codes = random_fp8((num_blocks, block_size, head_dim), encoding, gen)
    k_scales = torch.pow(2.0, torch.randint(-6, 2, (num_blocks, block_size),
                                            generator=gen).double()).float()
    flat[:, :block_size * head_dim] = k_codes.reshape(num_blocks, -1)
    flat[:, block_size * head_dim:] = k_scales.view(torch.uint8).reshape(
        num_blocks, -1)
    rows_per_request = 3
    rows = rows_per_request * len(seq_lens)
    row_request = torch.arange(len(seq_lens)).repeat_interleave(
        rows_per_request).to(torch.int32)
    starts, ends = [], []
    for r in row_request.tolist():
        a = int(torch.randint(0, seq_lens[r], (1,), generator=gen))
        b = int(torch.randint(a, seq_lens[r] + 1, (1,), generator=gen))
        starts.append(a)
        ends.append(b)
    starts = torch.tensor(starts, dtype=torch.int32)
    ends = torch.tensor(ends, dtype=torch.int32)
    width = max(seq_lens) + 5
    q_fp8 = random_fp8((rows, heads, head_dim), encoding, gen)
    head_weights = torch.rand((rows, heads), generator=gen)

    logits = dsa.indexer_logits(
        *to_dev(device, q_fp8, head_weights, cache, table,
                torch.tensor(seq_lens, dtype=torch.int32), row_request,
                starts, ends), width, encoding)
    assert logits.shape == (rows, width) and logits.dtype == torch.float32

    q = fp8_decode(q_fp8, encoding)
    want = torch.full((rows, width), -math.inf, dtype=torch.float64)
    for i in range(rows):
        r = int(row_request[i])
        for j in range(int(starts[i]), int(ends[i])):
            block = int(table[r, j // block_size])
            kv = fp8_decode(k_codes[block, j % block_size], encoding)
            s = float(k_scales[block, j % block_size])
            dots = torch.relu(q[i] @ kv * s)
            want[i, j] = float((dots * head_weights[i].double()).sum())
    got = logits.cpu().double()
    assert torch.equal(torch.isinf(got), torch.isinf(want))
    finite = ~torch.isinf(want)
    torch.testing.assert_close(got[finite], want[finite], rtol=2e-5,
                               atol=1e-4)


# --------------------------------------------------------------------------
# indexer_topk


def topk_reference(logits, starts, ends, topk):
    out = torch.full((logits.shape[0], topk), -1, dtype=torch.int32)
    for i in range(logits.shape[0]):
        cols = list(range(int(starts[i]), int(ends[i])))

        def rank(j):
            v = float(logits[i, j])
            return (1, 0.0, j) if math.isnan(v) else (0, -v, j)

        chosen = sorted(sorted(cols, key=rank)[:topk])
        out[i, :len(chosen)] = torch.tensor(chosen, dtype=torch.int32)
    return out


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("ties", [False, True])
def test_indexer_topk(dsa, device, seed, ties,
                      require_kernel):
    require_kernel("indexer_topk")
    gen = torch.Generator().manual_seed(seed)
    rows, width, topk = 12, 50, 8
    if ties:  # few distinct values: ties broken by the lower index
        logits = torch.randint(0, 4, (rows, width), generator=gen).float()
    else:
        logits = torch.randn((rows, width), generator=gen)
    logits[0, 3] = -math.inf
    logits[1, 5] = math.nan
    starts = torch.randint(0, width, (rows,), generator=gen)
    ends = torch.minimum(starts + torch.randint(0, 20, (rows,), generator=gen),
                         torch.tensor(width))
    starts, ends = starts.to(torch.int32), ends.to(torch.int32)
    starts[0], ends[0] = 0, 5
    starts[1], ends[1] = 0, width

    got = dsa.indexer_topk(*to_dev(device, logits, starts, ends), topk)
    assert got.dtype == torch.int32 and got.shape == (rows, topk)
    assert torch.equal(got.cpu(), topk_reference(logits, starts, ends, topk))


# --------------------------------------------------------------------------
# The MLA latent cache.


def latent_width(cache_dtype, kv_lora, rope_dim):
    if cache_dtype == "bfloat16":
        return kv_lora + rope_dim
    return kv_lora + 4 * (kv_lora // 128) + 2 * rope_dim


def new_latent_cache(cache_dtype, num_blocks, block_size, kv_lora, rope_dim):
    width = latent_width(cache_dtype, kv_lora, rope_dim)
    if cache_dtype == "bfloat16":
        return torch.full((num_blocks, block_size, width), math.nan,
                          dtype=torch.bfloat16)
    return torch.full((num_blocks, block_size, width), POISON,
                      dtype=torch.uint8)


def latent_entry(cache, cache_dtype, slot, kv_lora, rope_dim):
    """float64 (kv_c [kv_lora], k_pe [rope_dim]) of one cache slot."""
    block, off = divmod(slot, cache.shape[1])
    entry = cache[block, off]
    if cache_dtype == "bfloat16":
        e = entry.to(torch.float64)
        return e[:kv_lora], e[kv_lora:]
    tiles = kv_lora // 128
    codes = entry[:kv_lora]
    scales = entry[kv_lora:kv_lora + 4 * tiles].clone().view(torch.float32)
    k_pe = entry[kv_lora + 4 * tiles:].clone().view(torch.bfloat16)
    kv_c = fp8_decode(codes, cache_dtype).reshape(tiles, 128) \
        * scales.double()[:, None]
    return kv_c.reshape(-1), k_pe.to(torch.float64)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cache_dtype",
                         ["bfloat16", "float8_e4m3fn", "float8_e4m3fnuz"])
def test_mla_cache_write(dsa, device, seed, dtype, cache_dtype,
                         require_kernel):
    require_kernel("mla_cache_write")
    gen = torch.Generator().manual_seed(seed)
    tokens, kv_lora, rope_dim, num_blocks, block_size = 6, 256, 16, 3, 4
    kv_c = float_input((tokens, kv_lora), dtype, gen, 2.0)
    k_pe = float_input((tokens, rope_dim), dtype, gen)
    slots = torch.randperm(num_blocks * block_size, generator=gen)[:tokens]
    slots[int(torch.randint(0, tokens, (1,), generator=gen))] = -1
    cache = new_latent_cache(cache_dtype, num_blocks, block_size, kv_lora,
                             rope_dim)
    cache_dev = cache.to(device)

    result = dsa.mla_cache_write(*to_dev(device, kv_c, k_pe, slots), cache_dev,
                                 cache_dtype, kv_lora, rope_dim)
    assert result is None
    got = cache_dev.cpu()
    written = set()
    for t in range(tokens):
        slot = int(slots[t])
        if slot < 0:
            continue
        written.add(slot)
        block, off = divmod(slot, block_size)
        if cache_dtype == "bfloat16":
            want = torch.cat([kv_c[t].to(torch.bfloat16),
                              k_pe[t].to(torch.bfloat16)])
            assert torch.equal(got[block, off], want), f"token {t}"
            continue
        entry = got[block, off]
        tiles = kv_lora // 128
        x = kv_c[t].to(torch.float64).reshape(tiles, 128)
        scale = ue8m0_scale(x.abs().amax(-1), FP8[cache_dtype]["max"])
        got_scales = entry[kv_lora:kv_lora + 4 * tiles].clone().view(
            torch.float32).double()
        assert torch.equal(got_scales, scale), f"token {t} tile scales"
        assert_fp8_rounds(entry[:kv_lora], (x / scale[:, None]).reshape(-1),
                          cache_dtype)
        got_pe = entry[kv_lora + 4 * tiles:].clone().view(torch.bfloat16)
        assert torch.equal(got_pe, k_pe[t].to(torch.bfloat16))
    for slot in range(num_blocks * block_size):
        if slot not in written:
            block, off = divmod(slot, block_size)
            e = got[block, off]
            untouched = (torch.isnan(e).all() if cache_dtype == "bfloat16"
                         else (e == POISON).all())
            assert untouched, f"slot {slot} written without a token"


def filled_latent_cache(cache_dtype, num_blocks, block_size, kv_lora,
                        rope_dim, gen):
    """A cache of random entries, filled through mla_cache_write's own
    layout rules (written here, not by the op under test)."""
    cache = new_latent_cache(cache_dtype, num_blocks, block_size, kv_lora,
                             rope_dim)
    if cache_dtype == "bfloat16":
        return torch.randn(cache.shape, generator=gen).to(torch.bfloat16)
    tiles = kv_lora // 128
    cache[..., :kv_lora] = random_fp8((num_blocks, block_size, kv_lora),
                                      cache_dtype, gen)
    scales = torch.pow(2.0, torch.randint(-8, -4, (num_blocks, block_size, tiles),
                                          generator=gen).double()).float()
    cache[..., kv_lora:kv_lora + 4 * tiles] = scales.view(torch.uint8).reshape(
        num_blocks, block_size, 4 * tiles)
    pe = torch.randn((num_blocks, block_size, rope_dim), generator=gen).to(
        torch.bfloat16)
    cache[..., kv_lora + 4 * tiles:] = pe.view(torch.uint8).reshape(
        num_blocks, block_size, 2 * rope_dim)
    return cache


def decoded_tokens(cache, cache_dtype, table, request, count, kv_lora,
                   rope_dim):
    """[count, kv_lora + rope_dim] float64 of a request's tokens 0..count-1."""
    block_size = cache.shape[1]
    rows = []
    for p in range(count):
        kv_c, k_pe = latent_entry(cache, cache_dtype,
                                  slot_of(table, request, p, block_size),
                                  kv_lora, rope_dim)
        rows.append(torch.cat([kv_c, k_pe]))
    return torch.stack(rows) if rows else torch.zeros((0, kv_lora + rope_dim),
                                                      dtype=torch.float64)


def output_tolerance(dtype):
    return dict(rtol=2e-2, atol=2e-2) if dtype == torch.bfloat16 else \
        dict(rtol=1e-4, atol=1e-4)


def attention_tolerance(dtype, device, want):
    """The GPU attention kernels multiply on bf16 matrix cores (keys, values
    and the softmax weights rounded to bf16, about 2^-9 each), so their
    bound is 2^-6 of the largest |output|, as in attention/mla_ops_test.cc;
    the CPU kernels accumulate in float32 (output_tolerance)."""
    if device == "cpu":
        return output_tolerance(dtype)
    return dict(rtol=2**-6, atol=2**-6 * float(want.abs().max()))


# --------------------------------------------------------------------------
# sparse_mla


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cache_dtype", ["bfloat16", "float8_e4m3fn"])
def test_sparse_mla(dsa, device, seed, dtype, cache_dtype,
                    require_kernel):
    require_kernel("sparse_mla")
    gen = torch.Generator().manual_seed(seed)
    heads, kv_lora, rope_dim, qk_nope, v_dim = 3, 128, 16, 24, 20
    block_size, topk = 4, 6
    seq_lens = [int(x) for x in torch.randint(1, 20, (2,), generator=gen)]
    table, num_blocks = paging(seq_lens, block_size, gen)
    cache = filled_latent_cache(cache_dtype, num_blocks, block_size, kv_lora,
                                rope_dim, gen)
    tokens = 5
    token_request = torch.randint(0, len(seq_lens), (tokens,),
                                  generator=gen).to(torch.int32)
    topk_indices = torch.full((tokens, topk), -1, dtype=torch.int32)
    for t in range(tokens):
        n = seq_lens[int(token_request[t])]
        k = int(torch.randint(0, topk + 1, (1,), generator=gen)) if t else 0
        idx = torch.randint(0, n, (k,), generator=gen)  # duplicates allowed
        topk_indices[t, :k] = idx.to(torch.int32)
    q = float_input((tokens, heads, kv_lora + rope_dim), dtype, gen)
    kv_b_proj = float_input((heads * (qk_nope + v_dim), kv_lora), dtype, gen,
                            0.1)
    scale = (qk_nope + rope_dim) ** -0.5

    out = dsa.sparse_mla(q.to(device), cache.to(device), cache_dtype, kv_lora,
                         rope_dim,
                         *to_dev(device, table,
                                 torch.tensor(seq_lens, dtype=torch.int32),
                                 token_request, topk_indices, kv_b_proj),
                         qk_nope, scale)
    assert out.shape == (tokens, heads, v_dim) and out.dtype == dtype

    q64, w = q.to(torch.float64), kv_b_proj.to(torch.float64)
    want = torch.zeros((tokens, heads, v_dim), dtype=torch.float64)
    for t in range(tokens):
        r = int(token_request[t])
        keys = decoded_tokens(cache, cache_dtype, table, r, seq_lens[r],
                              kv_lora, rope_dim)
        idx = [int(j) for j in topk_indices[t] if int(j) != -1]
        if not idx:
            continue  # a row without keys outputs zeros
        entries = keys[idx]
        for h in range(heads):
            s = scale * (entries @ q64[t, h])
            p = torch.softmax(s, 0)
            o = p @ entries[:, :kv_lora]
            w_uv = w[h * (qk_nope + v_dim) + qk_nope:(h + 1) * (qk_nope + v_dim)]
            want[t, h] = w_uv @ o
    torch.testing.assert_close(out.cpu().to(torch.float64), want,
                               **output_tolerance(dtype))


# --------------------------------------------------------------------------
# dense_mha_prefill


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cache_dtype", ["bfloat16", "float8_e4m3fnuz"])
def test_dense_mha_prefill(dsa, device, seed, dtype, cache_dtype,
                           require_kernel):
    require_kernel("dense_mha_prefill")
    gen = torch.Generator().manual_seed(seed)
    # Head dims that are multiples of 8: what the GPU kernel's matrix-core
    # tiles take (test_dense_mha_prefill_gpu_rejects_odd_dims).
    heads, kv_lora, rope_dim, qk_nope, v_dim = 2, 128, 16, 24, 24
    block_size = 4
    seq_lens = [int(x) for x in torch.randint(1, 18, (3,), generator=gen)]
    new = [int(torch.randint(1, s + 1, (1,), generator=gen)) for s in seq_lens]
    table, num_blocks = paging(seq_lens, block_size, gen)
    cache = filled_latent_cache(cache_dtype, num_blocks, block_size, kv_lora,
                                rope_dim, gen)
    starts = [0]
    for n in new:
        starts.append(starts[-1] + n)
    tokens = starts[-1]
    q = float_input((tokens, heads, qk_nope + rope_dim), dtype, gen)
    kv_b_proj = float_input((heads * (qk_nope + v_dim), kv_lora), dtype, gen,
                            0.1)
    scale = (qk_nope + rope_dim) ** -0.5

    lens_t = torch.tensor(seq_lens, dtype=torch.int32)
    starts_t = torch.tensor(starts, dtype=torch.int32)
    args = (q.to(device), cache.to(device), cache_dtype, kv_lora, rope_dim,
            *to_dev(device, table, lens_t, starts_t, kv_b_proj), scale)
    out = dsa.dense_mha_prefill(*args)
    assert out.shape == (tokens, heads, v_dim) and out.dtype == dtype
    # The host copies of the lengths: the same output to the bit.
    with_host = dsa.dense_mha_prefill(*args, seq_lens_host=lens_t,
                                      query_start_loc_host=starts_t)
    assert torch.equal(with_host, out)

    q64, w = q.to(torch.float64), kv_b_proj.to(torch.float64)
    want = torch.zeros((tokens, heads, v_dim), dtype=torch.float64)
    for r, seq_len in enumerate(seq_lens):
        keys = decoded_tokens(cache, cache_dtype, table, r, seq_len, kv_lora,
                              rope_dim)
        c, pe = keys[:, :kv_lora], keys[:, kv_lora:]
        for h in range(heads):
            base = h * (qk_nope + v_dim)
            k = torch.cat([c @ w[base:base + qk_nope].T, pe], 1)
            v = c @ w[base + qk_nope:base + qk_nope + v_dim].T
            for i in range(new[r]):
                t = starts[r] + i
                pos = seq_len - new[r] + i
                s = scale * (k[:pos + 1] @ q64[t, h])
                want[t, h] = torch.softmax(s, 0) @ v[:pos + 1]
    torch.testing.assert_close(out.cpu().to(torch.float64), want,
                               **attention_tolerance(dtype, device, want))


def test_a_kernel_out_of_memory_raises_out_of_memory_error():
    """In a fresh interpreter whose address space is capped just above what
    it holds: the CPU kernel's scratch for the whole sequence (16K keys'
    latent values, 37 MB) cannot be allocated, the kernel returns
    RESOURCE_EXHAUSTED, and the op raises PyTorch's OutOfMemoryError naming
    the op; nothing crashes."""
    from conftest import plugin_paths

    script = (
        "import resource, sys, torch\n"
        "sys.path.insert(0, %r)\n"
        "import dsa_torch\n"
        "dsa_torch.load(plugins=sys.argv[1:])\n"
        "torch.set_num_threads(1)\n"
        "seq, block, lora, rope, nope, v = 16384, 64, 512, 64, 64, 64\n"
        "cache = torch.zeros(seq // block, block, lora + rope,\n"
        "                    dtype=torch.bfloat16)\n"
        "table = torch.arange(seq // block, dtype=torch.int32)[None]\n"
        "lens = torch.tensor([seq], dtype=torch.int32)\n"
        "starts = torch.tensor([0, 1], dtype=torch.int32)\n"
        "q = torch.zeros(1, 1, nope + rope)\n"
        "w = torch.zeros(nope + v, lora)\n"
        "with open('/proc/self/status') as f:\n"
        "    vm = [int(l.split()[1]) for l in f if l.startswith('VmSize')][0]\n"
        "cap = vm * 1024 + (16 << 20)\n"
        "resource.setrlimit(resource.RLIMIT_AS, (cap, cap))\n"
        "try:\n"
        "    torch.ops.dsa.dense_mha_prefill(q, cache, 'bfloat16', lora, rope,\n"
        "                                    table, lens, starts, w, 1.0)\n"
        "    print('ran')\n"
        "except Exception as e:\n"
        "    print(type(e).__name__ + ':', str(e).splitlines()[0])\n"
    ) % os.path.join(os.path.dirname(__file__), "..")
    out = subprocess.run([sys.executable, "-c", script] + plugin_paths(),
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    assert out.stdout.startswith("OutOfMemoryError: dense_mha_prefill"), \
        out.stdout


def test_dense_mha_prefill_gpu_rejects_odd_dims(dsa, device, require_kernel):
    if device == "cpu":
        pytest.skip("the CPU kernel takes any head dims")
    require_kernel("dense_mha_prefill")
    gen = torch.Generator().manual_seed(5)
    table, num_blocks = paging([8], 4, gen)
    cache = filled_latent_cache("bfloat16", num_blocks, 4, 128, 16, gen)
    q = float_input((8, 2, 24 + 16), torch.float32, gen)
    kv_b_proj = float_input((2 * (24 + 20), 128), torch.float32, gen, 0.1)
    with pytest.raises(ValueError, match="multiples of 8"):
        dsa.dense_mha_prefill(
            q.to(device), cache.to(device), "bfloat16", 128, 16,
            *to_dev(device, table, torch.tensor([8], dtype=torch.int32),
                    torch.tensor([0, 8], dtype=torch.int32), kv_b_proj), 0.1)


def test_dense_mha_prefill_host_copies_are_checked(dsa, device, require_kernel):
    require_kernel("dense_mha_prefill")
    gen = torch.Generator().manual_seed(6)
    table, num_blocks = paging([8], 4, gen)
    cache = filled_latent_cache("bfloat16", num_blocks, 4, 128, 16, gen)
    q = float_input((8, 2, 24 + 16), torch.float32, gen)
    kv_b_proj = float_input((2 * (24 + 24), 128), torch.float32, gen, 0.1)
    lens = torch.tensor([8], dtype=torch.int32)
    starts = torch.tensor([0, 8], dtype=torch.int32)
    args = (q.to(device), cache.to(device), "bfloat16", 128, 16,
            *to_dev(device, table, lens, starts, kv_b_proj), 0.1)
    with pytest.raises(ValueError, match="seq_lens_host is given without "
                                         "query_start_loc_host"):
        dsa.dense_mha_prefill(*args, seq_lens_host=lens)
    with pytest.raises(ValueError, match=r"query_start_loc_host is "
                                         r"torch\.int64, expected int32"):
        dsa.dense_mha_prefill(*args, seq_lens_host=lens,
                              query_start_loc_host=starts.long())
    with pytest.raises(ValueError, match="query_start_loc_host dim 0"):
        dsa.dense_mha_prefill(*args, seq_lens_host=lens,
                              query_start_loc_host=starts[:1])
    if device != "cpu":
        with pytest.raises(ValueError, match="seq_lens_host is on cuda.*"
                                             "expected cpu"):
            dsa.dense_mha_prefill(*args, seq_lens_host=lens.to(device),
                                  query_start_loc_host=starts)


# --------------------------------------------------------------------------
# Bad arguments raise, naming the argument.


def topk_args(device):
    logits = torch.randn(4, 10, device=device)
    starts = torch.zeros(4, dtype=torch.int32, device=device)
    ends = torch.full((4,), 10, dtype=torch.int32, device=device)
    return logits, starts, ends


def test_bad_dtype_names_argument(dsa, device):
    logits, starts, ends = topk_args(device)
    with pytest.raises(ValueError, match=r"indexer_topk: row_key_start is "
                                         r"torch\.int64, expected int32"):
        dsa.indexer_topk(logits, starts.long(), ends, 3)
    with pytest.raises(ValueError, match="logits is torch.float64"):
        dsa.indexer_topk(logits.double(), starts, ends, 3)


def test_bad_shape_names_argument(dsa, device):
    logits, starts, ends = topk_args(device)
    with pytest.raises(ValueError, match=r"row_key_end dim 0 \(rows\) is 3, "
                                         r"expected 4"):
        dsa.indexer_topk(logits, starts, ends[:3], 3)
    with pytest.raises(ValueError, match="row_key_start has 2 dims"):
        dsa.indexer_topk(logits, starts[None], ends, 3)


def test_bad_size_and_strings_name_argument(dsa, device):
    logits, starts, ends = topk_args(device)
    with pytest.raises(ValueError, match="indexer_topk: topk is 0"):
        dsa.indexer_topk(logits, starts, ends, 0)
    q = torch.randn(2, 2, 16, device=device)
    w = torch.randn(2, 2, device=device)
    pos = torch.zeros(2, dtype=torch.int64, device=device)
    cs = make_cos_sin(4, 8).to(device)
    with pytest.raises(ValueError, match='rope_style is "yarn"'):
        dsa.indexer_q(q, w, pos, cs, "yarn")
    with pytest.raises(ValueError, match='fp8_dtype is "float8_e5m2"'):
        dsa.indexer_q(q, w, pos, cs, "neox", "float8_e5m2")
    with pytest.raises(ValueError, match="softmax_scale"):
        cache = torch.zeros(2, 4, 128 + 16, dtype=torch.bfloat16,
                            device=device)
        dsa.sparse_mla(torch.randn(1, 1, 144, device=device), cache,
                       "bfloat16", 128, 16,
                       torch.zeros(1, 1, dtype=torch.int32, device=device),
                       torch.ones(1, dtype=torch.int32, device=device),
                       torch.zeros(1, dtype=torch.int32, device=device),
                       torch.zeros(1, 1, dtype=torch.int32, device=device),
                       torch.randn(4, 128, device=device), 2, -1.0)


# Sizes of outputs, checked before anything is allocated: a size argument
# out of range, or one whose output would not fit in the device's memory or
# in 64 bits, raises ValueError naming the op, the output and the argument.
# The row-giving input has no elements (a dim of 0 beside the rows), so a
# huge row count costs nothing; its other inputs are only checked later.

ROWS_HUGE = 2 ** 20  # x 2^31 int32 or float32: 8 PiB, more than any device
ROWS_OVERFLOW = 2 ** 31  # x 2^31 x 4 bytes = 2^64: no int64 holds it
SIZE_MAX = 2 ** 31  # attention::kMaxTensorDim


def size_arg_calls(dsa, device):
    """(op, output, argument, call(rows, size)) for each op whose output a
    size argument sizes."""
    i32 = dict(dtype=torch.int32, device=device)
    i64 = dict(dtype=torch.int64, device=device)
    u8 = dict(dtype=torch.uint8, device=device)

    def k_write(rows, topk):
        ln = torch.ones(16, device=device)
        return dsa.indexer_k_write(
            torch.empty(rows, 0, device=device), ln, ln, 1e-6,
            torch.zeros(1, **i64), make_cos_sin(4, 8).to(device), "neox",
            torch.zeros(1, **i64), torch.zeros(2, 2, 20, **u8),
            "float8_e4m3fn", topk)

    def logits(rows, width):
        one = torch.zeros(1, **i32)
        return dsa.indexer_logits(
            torch.empty(rows, 1, 0, **u8), torch.zeros(1, 1, device=device),
            torch.zeros(2, 2, 20, **u8), torch.zeros(1, 1, **i32), one, one,
            one, one, width)

    def topk(rows, k):
        one = torch.zeros(1, **i32)
        return dsa.indexer_topk(torch.empty(rows, 0, device=device), one, one,
                                k)

    return [("indexer_k_write", "topk_indices", "topk", k_write),
            ("indexer_logits", "logits", "width", logits),
            ("indexer_topk", "topk_indices", "topk", topk)]


def test_size_arguments_are_checked_before_allocating(dsa, device):
    for op, output, arg, call in size_arg_calls(dsa, device):
        for bad in (0, -1, -2 ** 40, SIZE_MAX + 1, 2 ** 62):
            with pytest.raises(ValueError,
                               match=rf"^{op}: {arg} is {bad}, expected 1 to "
                                     rf"{SIZE_MAX}"):
                call(4, bad)
        # Fits no device: refused with the sizes, not an allocator's message.
        with pytest.raises(ValueError,
                           match=rf"^{op}: output {output} \[{ROWS_HUGE}, "
                                 rf"{SIZE_MAX}\] \w+, sized by .*{arg} "
                                 rf"\({SIZE_MAX}\), would take \d+ bytes "
                                 rf"\(.* GiB\), more than the .* GiB of "
                                 rf"memory of {device}"):
            call(ROWS_HUGE, SIZE_MAX)
        # Overflows 64 bits.
        with pytest.raises(ValueError,
                           match=rf"^{op}: output {output} "
                                 rf"\[{ROWS_OVERFLOW}, {SIZE_MAX}\] .*{arg} "
                                 rf"\({SIZE_MAX}\), would take more than "
                                 rf"2\^63"):
            call(ROWS_OVERFLOW, SIZE_MAX)
        # A row count past the views' bound, named as the output's dim.
        with pytest.raises(ValueError,
                           match=rf"^{op}: output {output} \[{2 ** 40}, 8\] "
                                 rf".* has dim 0 of {2 ** 40}, expected 0 to "
                                 rf"{SIZE_MAX}"):
            call(2 ** 40, 8)
        # The size checks come first; a size that fits reaches the op's own
        # checks of the (deliberately mismatched) inputs.
        with pytest.raises(ValueError, match=rf"^{op}: (?!output)"):
            call(4, 8)


def test_output_sizes_from_inputs_are_checked_before_allocating(dsa, device):
    """sparse_mla and dense_mha_prefill size their output from the inputs:
    q's tokens and heads, and v_head_dim from kv_b_proj's rows."""
    i32 = dict(dtype=torch.int32, device=device)
    cache = torch.zeros(2, 4, 128 + 16, dtype=torch.bfloat16, device=device)
    one = torch.zeros(1, **i32)
    # [2^31 tokens, 1 head, v_head_dim 2^31] float32: 2^64 bytes.
    with pytest.raises(ValueError,
                       match=rf"^sparse_mla: output output \[{ROWS_OVERFLOW}, "
                             rf"1, {SIZE_MAX}\] float32, sized by .*kv_b_proj"
                             rf".*, would take more than 2\^63 bytes"):
        dsa.sparse_mla(torch.empty(ROWS_OVERFLOW, 1, 0, device=device), cache,
                       "bfloat16", 128, 16, torch.zeros(1, 1, **i32), one,
                       one, torch.zeros(1, 1, **i32),
                       torch.empty(SIZE_MAX, 0, device=device), 0, 0.1)
    with pytest.raises(ValueError, match=r"^sparse_mla: qk_nope_head_dim is "
                                         r"-1, expected 0 to"):
        dsa.sparse_mla(torch.empty(4, 1, 0, device=device), cache,
                       "bfloat16", 128, 16, torch.zeros(1, 1, **i32), one,
                       one, torch.zeros(1, 1, **i32),
                       torch.empty(8, 0, device=device), -1, 0.1)
    # [2^20 tokens, 1 head, v_head_dim 2^31 - 1] float32: 8 PiB.
    with pytest.raises(ValueError,
                       match=rf"^dense_mha_prefill: output output "
                             rf"\[{ROWS_HUGE}, 1, {SIZE_MAX - 1}\] float32, "
                             rf"sized by .*, more than the .* GiB of memory "
                             rf"of {device}"):
        dsa.dense_mha_prefill(
            torch.empty(ROWS_HUGE, 1, 17, device=device), cache, "bfloat16",
            128, 16, torch.zeros(1, 1, **i32), one, torch.zeros(2, **i32),
            torch.empty(SIZE_MAX, 0, device=device), 0.1)


def test_meta_outputs_skip_the_memory_check_but_not_overflow(dsa):
    """Meta tensors take no memory (shape inference of a model larger than
    this machine works), but an output no int64 can measure is refused."""
    m = dict(device="meta")
    i32 = dict(device="meta", dtype=torch.int32)
    out = dsa.indexer_topk(torch.empty(ROWS_HUGE, 5, **m),
                           torch.empty(ROWS_HUGE, **i32),
                           torch.empty(ROWS_HUGE, **i32), SIZE_MAX)
    assert out.shape == (ROWS_HUGE, SIZE_MAX) and out.device.type == "meta"
    with pytest.raises(ValueError, match=r"would take more than 2\^63 bytes"):
        dsa.indexer_topk(torch.empty(ROWS_OVERFLOW, 5, **m),
                         torch.empty(ROWS_OVERFLOW, **i32),
                         torch.empty(ROWS_OVERFLOW, **i32), SIZE_MAX)


def test_non_contiguous_cache_names_argument(dsa, device):
    k = torch.randn(2, 16, device=device)
    ln = torch.ones(16, device=device)
    pos = torch.zeros(2, dtype=torch.int64, device=device)
    cs = make_cos_sin(4, 8).to(device)
    slots = torch.tensor([0, 1], device=device)
    cache = torch.zeros(4, 2, 40, dtype=torch.uint8, device=device)[:, :, :20]
    with pytest.raises(ValueError, match="k_cache"):
        dsa.indexer_k_write(k, ln, ln, 1e-6, pos, cs, "neox", slots, cache,
                            "float8_e4m3fn", 4)


def test_element_out_of_range_raises_index_error(dsa, device):
    k = torch.randn(2, 16, device=device)
    ln = torch.ones(16, device=device)
    pos = torch.zeros(2, dtype=torch.int64, device=device)
    cs = make_cos_sin(4, 8).to(device)
    cache = torch.full((2, 2, 20), POISON, dtype=torch.uint8, device=device)
    slots = torch.tensor([0, 99], device=device)
    if device != "cpu":
        pytest.skip("GPU kernels skip out-of-range slots instead (ops.h)")
    with pytest.raises(IndexError, match=r"slot_mapping\[1\] is 99"):
        dsa.indexer_k_write(k, ln, ln, 1e-6, pos, cs, "neox", slots, cache,
                            "float8_e4m3fn", 4)
    assert (cache == POISON).all(), "a rejected call wrote the cache"


def test_mixed_devices_name_argument(dsa):
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA device next to the CPU")
    logits, starts, ends = topk_args("cpu")
    with pytest.raises(ValueError, match="row_key_end is on cuda:0, expected "
                                         "cpu"):
        dsa.indexer_topk(logits, starts, ends.cuda(), 3)


def test_platform_without_kernels_raises(dsa):
    logits, starts, ends = topk_args("cpu")
    dsa.set_device_platform("cpu", "no-such-platform")
    try:
        with pytest.raises(RuntimeError, match="no kernel is loaded for "
                                               "platform 'no-such-platform'"):
            dsa.indexer_topk(logits, starts, ends, 3)
    finally:
        dsa.set_device_platform("cpu", "cpu")
    assert dsa.indexer_topk(logits, starts, ends, 3).shape == (4, 3)


def test_string_arguments_are_echoed_capped_and_escaped(dsa, device):
    # A NUL would end the message where Python reads it as a C string, and
    # a 100 KB argument would be the whole message: both echoed as a person
    # can read them.
    q = torch.randn(2, 2, 16, device=device)
    w = torch.randn(2, 2, device=device)
    pos = torch.zeros(2, dtype=torch.int64, device=device)
    cs = make_cos_sin(4, 8).to(device)
    with pytest.raises(ValueError) as e:
        dsa.indexer_q(q, w, pos, cs, "neo\x00x")
    assert 'rope_style is "neo\\x00x", expected "neox" or "interleaved"' in \
        str(e.value)
    with pytest.raises(ValueError) as e:
        dsa.indexer_q(q, w, pos, cs, "neox", "q" * 100000)
    assert "... (100000 bytes)" in str(e.value)
    assert len(str(e.value)) < 1200
    for call in (lambda: dsa.platform_capabilities("p\x00" + "q" * 100000),
                 lambda: dsa.device_platform("cuda\x00" + "q" * 100000)):
        with pytest.raises(ValueError) as e:
            call()
        assert "\\x00" in str(e.value) and len(str(e.value)) < 1200


def test_platform_capabilities(dsa):
    arch, cuda_alike, dense, dcp, warp, fp8 = dsa.platform_capabilities("cpu")
    assert not cuda_alike and warp == 1 and fp8 == "float8_e4m3fn"
    with pytest.raises(ValueError, match="no-such-platform"):
        dsa.platform_capabilities("no-such-platform")


# --------------------------------------------------------------------------
# Loading plugins.


def test_load_errors_name_the_file(dsa, tmp_path):
    with pytest.raises(Exception, match="does-not-exist.so"):
        dsa.load_plugin(str(tmp_path / "does-not-exist.so"))
    text = tmp_path / "not-elf.so"
    text.write_text("not a shared object")
    with pytest.raises(Exception, match="not-elf.so"):
        dsa.load_plugin(str(text))
    with pytest.raises(Exception, match="bare.so"):
        dsa.load_plugin("bare.so")


def corrupt_plugin(path, edit):
    """Writes to `path` a copy of the first plugin (an ELF64 little-endian
    shared object, as the build makes them) whose dynamic section entries
    ([tag, value] lists, DT_NULL padding included) `edit` changed."""
    from conftest import plugin_paths

    data = bytearray(open(plugin_paths()[0], "rb").read())
    assert data[:4] == b"\x7fELF" and data[4] == 2 and data[5] == 1
    phoff, = struct.unpack_from("<Q", data, 0x20)
    phentsize, phnum = struct.unpack_from("<HH", data, 0x36)
    for i in range(phnum):
        p_type, _, p_offset, _, _, p_filesz = struct.unpack_from(
            "<IIQQQQ", data, phoff + i * phentsize)
        if p_type == 2:  # PT_DYNAMIC
            entries = [list(struct.unpack_from("<qQ", data, p_offset + 16 * j))
                       for j in range(p_filesz // 16)]
            edit(entries)
            for j, (tag, value) in enumerate(entries):
                struct.pack_into("<qQ", data, p_offset + 16 * j, tag, value)
    with open(path, "wb") as f:
        f.write(data)
    return str(path)


def set_entry(tag, value):
    def edit(entries):
        for e in entries:
            if e[0] == tag:
                e[1] = value(e[1])
                return
        raise AssertionError(f"no dynamic entry {tag}")
    return edit


def no_terminator(entries):
    for e in entries:
        if e[0] == 0:
            e[0] = 21  # DT_NULL -> DT_DEBUG: nothing ends the section


# Each kills a Python that dlopens it: DT_STRTAB far past the object (the
# loader reads DT_NEEDED names there: SIGSEGV), a wrong DT_RELAENT (glibc
# asserts and exits), no DT_NULL (the loader reads past the section).
CORRUPT_PLUGINS = [
    ("strtab_far", set_entry(5, lambda v: v + 2 ** 40),
     "dynamic entry DT_STRTAB at"),
    ("relaent", set_entry(9, lambda v: 16),
     "dynamic entry DT_RELAENT is 16"),
    ("no_terminator", no_terminator, "has no DT_NULL entry"),
]


def test_corrupt_plugins_raise_naming_the_file(dsa, tmp_path):
    """In a fresh interpreter first, so that a crash fails this test and not
    the whole run; then here."""
    paths = [corrupt_plugin(tmp_path / f"corrupt_{name}.so", edit)
             for name, edit, _ in CORRUPT_PLUGINS]
    script = (
        "import sys, torch\n"
        "sys.path.insert(0, %r)\n"
        "import dsa_torch\n"
        "dsa_torch.load_library()\n"
        "for path in sys.argv[1:]:\n"
        "    try:\n"
        "        torch.ops.dsa.load_plugin(path)\n"
        "        print('loaded:', path)\n"
        "    except Exception as e:\n"
        "        print(type(e).__name__ + ':', str(e).splitlines()[0])\n"
    ) % os.path.join(os.path.dirname(__file__), "..")
    out = subprocess.run([sys.executable, "-c", script] + paths,
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, (out.returncode, out.stdout, out.stderr)
    lines = out.stdout.splitlines()
    assert len(lines) == len(CORRUPT_PLUGINS), out.stdout
    for line, path, (_, _, message) in zip(lines, paths, CORRUPT_PLUGINS):
        assert line.startswith(f"ValueError: cannot load plugin: {path}: "), \
            line
        assert message in line, line
    for path, (_, _, message) in zip(paths, CORRUPT_PLUGINS):
        with pytest.raises(ValueError,
                           match=re.escape(path) + ".*" + re.escape(message)):
            dsa.load_plugin(path)


def test_plugin_loaded_twice_is_refused(dsa):
    from conftest import plugin_paths

    with pytest.raises(Exception, match="already"):
        dsa.load_plugin(os.path.abspath(plugin_paths()[-1]))


def test_kernels_before_their_platform_are_refused():
    """In a fresh process: the attention plugin alone names platform cpu,
    which nothing provides yet."""
    from conftest import plugin_paths

    # A kernels-only plugin (the platform plugins of CUDA and ROCm carry
    # their kernels and load alone).
    attention = [p for p in plugin_paths()
                 if "attention" in os.path.basename(p)]
    if not attention:
        pytest.skip("no kernels-only plugin among the loaded ones")
    script = (
        "import sys, torch\n"
        "sys.path.insert(0, %r)\n"
        "import dsa_torch\n"
        "dsa_torch.load_library()\n"
        "try:\n"
        "    torch.ops.dsa.load_plugin(%r)\n"
        "except Exception as e:\n"
        "    print('refused:', e)\n"
        "print(torch.ops.dsa.loaded())\n"
    ) % (os.path.join(os.path.dirname(__file__), ".."),
         os.path.abspath(attention[-1]))
    out = subprocess.run([sys.executable, "-c", script], capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert "refused:" in out.stdout and "load that platform's plugin first" \
        in out.stdout, out.stdout
    assert out.stdout.strip().endswith("[]"), "a refused plugin registered"


# --------------------------------------------------------------------------
# Meta tensors: shapes and dtypes only, no kernel.


def test_meta_tensors_give_output_shapes(dsa):
    m = dict(device="meta")
    i32 = dict(device="meta", dtype=torch.int32)
    i64 = dict(device="meta", dtype=torch.int64)
    u8 = dict(device="meta", dtype=torch.uint8)
    topk = dsa.indexer_k_write(
        torch.empty(5, 64, **m), torch.empty(64, **m), torch.empty(64, **m),
        1e-6, torch.empty(5, **i64), torch.empty(9, 16, **m), "neox",
        torch.empty(5, **i64), torch.empty(3, 4, 68, **u8), "float8_e4m3fn", 7)
    assert topk.shape == (5, 7) and topk.dtype == torch.int32
    assert topk.device.type == "meta"
    q_fp8, hw = dsa.indexer_q(torch.empty(5, 4, 64, **m), torch.empty(5, 4, **m),
                              torch.empty(5, **i64), torch.empty(9, 16, **m),
                              "interleaved")
    assert q_fp8.shape == (5, 4, 64) and q_fp8.dtype == torch.uint8
    assert hw.shape == (5, 4) and hw.dtype == torch.float32
    logits = dsa.indexer_logits(
        q_fp8, hw, torch.empty(3, 4, 68, **u8), torch.empty(2, 3, **i32),
        torch.empty(2, **i32), torch.empty(5, **i32), torch.empty(5, **i32),
        torch.empty(5, **i32), 40)
    assert logits.shape == (5, 40) and logits.dtype == torch.float32
    assert dsa.indexer_topk(logits, torch.empty(5, **i32),
                            torch.empty(5, **i32), 9).shape == (5, 9)
    out = dsa.sparse_mla(
        torch.empty(5, 2, 144, dtype=torch.bfloat16, device="meta"),
        torch.empty(3, 4, 144, dtype=torch.bfloat16, device="meta"),
        "bfloat16", 128, 16, torch.empty(2, 3, **i32), torch.empty(2, **i32),
        torch.empty(5, **i32), torch.empty(5, 8, **i32),
        torch.empty(2 * (24 + 20), 128, **m), 24, 0.1)
    assert out.shape == (5, 2, 20) and out.dtype == torch.bfloat16
    out = dsa.dense_mha_prefill(
        torch.empty(5, 2, 40, **m), torch.empty(3, 4, 144, **u8),
        "float8_e4m3fn", 128, 16, torch.empty(2, 3, **i32),
        torch.empty(2, **i32), torch.empty(3, **i32),
        torch.empty(2 * (24 + 20), 128, **m), 0.1)
    assert out.shape == (5, 2, 20) and out.dtype == torch.float32
    with pytest.raises(ValueError, match="row_key_start is torch.int64"):
        dsa.indexer_topk(logits, torch.empty(5, **i64), torch.empty(5, **i32), 9)
