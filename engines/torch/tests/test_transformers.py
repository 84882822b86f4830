"""dsa_torch.transformers on stand-in models (no transformers here).

The stand-ins (hf_standins.py) have transformers' module layout and call
conventions and compute the model as transformers does; in float64 they are
the reference. The converted model runs the CPU plugins' kernels in float32
(the latent cache bf16, as the reference rounds it). The skip needs a
CUDA-alike platform: where a test says so, the plan gets CUDA-alike
capabilities while the CPU kernels execute (prefill_bench's emulated-rocm).
What runs only on a GPU: transformers itself, its generate(), and the
timings (check_convert.py, bench_transformers.py).
"""

import abc
import copy
import importlib.util
import os
import sys
import types

import pytest
import torch

import hf_standins as hs
from dsa_torch import plan as p
from dsa_torch import transformers as dt

SEEDS = [int.from_bytes(os.urandom(4), "little") for _ in range(2)]
CUDA_ALIKE = p.PlatformCaps("cpu", "emulated", is_cuda_alike=True,
                            dense_mha_prefill=True,
                            decode_context_parallel=False)
ARCHS = {"glm5": (hs.GlmMoeDsaForCausalLM, {}),
         "dsv32": (hs.DeepseekV32ForCausalLM,
                   dict(mscale=1.3, attention_scaling=1.1)),
         "glm52": (hs.GlmMoeDsaForCausalLM,
                   dict(num_hidden_layers=4,
                        indexer_types=["full", "shared", "full", "shared"]))}


def reference_of(model):
    """The stand-in itself in float64, its latent rounded as the cache
    stores it."""
    ref = copy.deepcopy(model).double()
    for layer in ref.model.layers:
        layer.self_attn.latent_round = torch.bfloat16
    return ref


def rel_err(got, want):
    """Largest error against the largest value. The bound the tests use,
    5e-3, allows a cached latent value to round to the neighbouring bf16
    value from float32 and float64 (errors seen: up to 8e-4; a wrong rope
    style gives 0.7 to 1.2)."""
    return float((got.double() - want).abs().max() / want.abs().max())


def converted(model, caps=CUDA_ALIKE, **kw):
    return dt.convert(model, platform_caps=caps, **kw)


def prompt(seed, length, vocab=61):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, vocab, (1, length), generator=g)


def reference_logits(ref, ids, forced=None):
    """Logits at every position of a full recompute (forced: per layer the
    top-k positions [1, tokens, topk] to attend to)."""
    for i, layer in enumerate(ref.model.layers):
        layer.self_attn.forced_topk = None if forced is None else forced[i]
    with torch.no_grad():
        return ref(input_ids=ids).logits[0]


# ---------------------------------------------------------------------------
# The answers.


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("arch", ["glm5", "dsv32"])
def test_dense_prefill_and_decode_match_the_reference(dsa, seed, arch):
    """A prompt below index_topk (dense_mha_prefill, scoring skipped), then
    decode steps (scored; every key is in the top-k), across a block
    boundary: logits at every step equal the float64 reference's."""
    cls, kw = ARCHS[arch]
    model = hs.make_model(cls, seed, **kw)
    ref = reference_of(model)
    converted(model)
    rt = dt.runtime_of(model)
    ids = prompt(seed, 70)
    with torch.no_grad():
        full = model(input_ids=ids).logits[0]
    assert rt.last_plan.counts()["skip"] == len(model.model.layers)
    assert rel_err(full, reference_logits(ref, ids)) < 5e-3
    tokens, logits, cache = hs.greedy(model, ids, 6)
    assert cache.get_seq_length() == 76
    assert rt.last_plan.counts()["score"] == len(model.model.layers)
    seq = torch.cat([ids, tokens], 1)
    want = reference_logits(ref, seq)[69:]
    assert rel_err(logits[0], want) < 5e-3


def collect_topk(rt, layers, owners, prefill_topk, steps):
    """Per layer, [1, tokens, topk]: each forward's recorded rows, shared
    layers taking their owner's."""
    out = []
    for layer in range(layers):
        src = max(i for i in range(layer + 1) if owners[i])
        rows = [prefill_topk[src]] + [s[src] for s in steps]
        out.append(torch.cat(rows)[None])
    return out


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("arch", ["glm5", "dsv32", "glm52"])
def test_sparse_path_matches_the_reference(dsa, seed, arch):
    """A prompt above index_topk (scored, sparse_mla over the top-k) and
    decode steps past it: the logits equal the reference attending to the
    same top-k; the top-k is the one the reference's fp8-rounded scores
    pick; GLM-5.2's shared layers reuse their owner's."""
    cls, kw = ARCHS[arch]
    model = hs.make_model(cls, seed, index_topk=32, **kw)
    ref = reference_of(model)
    converted(model)
    rt = dt.runtime_of(model)
    rt.record_topk = True
    owners = rt.spec.owners
    layers = len(model.model.layers)
    ids = prompt(seed, 80)
    mask = torch.ones_like(ids)
    with torch.no_grad():
        out = model(input_ids=ids, attention_mask=mask, use_cache=True)
        counts = rt.last_plan.counts()
        assert counts["score"] == sum(owners)
        assert counts["shared"] == layers - sum(owners)
        prefill_topk = {k: v for k, v in rt.last_topk.items()}
        assert set(prefill_topk) == {i for i in range(layers) if owners[i]}
        logits, steps, seq = [out.logits[0]], [], ids
        for _ in range(3):
            nxt = out.logits[:, -1:].argmax(-1)
            seq = torch.cat([seq, nxt], 1)
            mask = torch.ones_like(seq)
            out = model(input_ids=nxt, attention_mask=mask,
                        past_key_values=out.past_key_values, use_cache=True)
            steps.append(dict(rt.last_topk))
            logits.append(out.logits[0])
    forced = collect_topk(rt, layers, owners, prefill_topk, steps)
    # One reference run: attention over our top-k, and what its own indexer
    # picks from fp8-rounded scores (the kernels' numerics) beside it.
    for layer in ref.model.layers:
        layer.self_attn.indexer.emulate_fp8 = True
    want = reference_logits(ref, seq, forced)
    got = torch.cat(logits)
    assert rel_err(got, want[:got.shape[0]]) < 5e-3
    # Every key we picked scores at least the 32nd best of the reference,
    # within what an fp8 rounding flip moves a score (the reference's
    # float64 inputs round to other fp8 values now and then: 6 % of one
    # component). Ties aside: relu makes many scores exactly 0.
    for i, layer in enumerate(ref.model.layers):
        if not owners[i]:
            continue
        scores = layer.self_attn.indexer.last_scores[0]
        ours = forced[i][0]
        for t in range(32, ours.shape[0]):
            row = scores[t, :t + 1]
            tol = 3e-2 * float(row.abs().max())
            picked = ours[t][ours[t] >= 0].long()
            assert picked.numel() == 32
            kth = row.topk(32).values[-1]
            assert float(row[picked].min()) >= float(kth) - tol, (
                f"layer {i} row {t}: picked a key below the top 32")

@pytest.mark.parametrize("seed", SEEDS[:1])
def test_skip_on_and_off_give_equal_logits_to_the_bit(dsa, seed):
    model = hs.make_model(hs.GlmMoeDsaForCausalLM, seed)
    converted(model)
    ids = prompt(seed, 90)
    before = dict(dt.indexer_calls(model))
    tok_skip, logits_skip, _ = hs.greedy(model, ids, 4)
    after = dt.indexer_calls(model)
    layers = len(model.model.layers)
    assert after["skip"] - before["skip"] == layers  # the prefill
    assert after["score"] - before["score"] == 4 * layers  # the decodes
    dt.set_skip_indexer(model, False)
    tok_main, logits_main, _ = hs.greedy(model, ids, 4)
    assert dt.indexer_calls(model)["skip"] == after["skip"]
    assert torch.equal(tok_skip, tok_main)
    assert torch.equal(logits_skip, logits_main)


def test_cpu_platform_never_skips(dsa):
    """With the CPU platform's own capabilities (not CUDA-alike) every
    prefill scores, as the rule says."""
    model = hs.make_model(hs.GlmMoeDsaForCausalLM, 1)
    dt.convert(model)
    with torch.no_grad():
        model(input_ids=prompt(1, 20))
    assert dt.runtime_of(model).last_plan.counts()["skip"] == 0
    assert dt.indexer_calls(model)["score"] == 2


@pytest.mark.parametrize("seed", SEEDS[:1])
@pytest.mark.parametrize("lengths", [(70, 50), (70, 1), (40, 40, 9)])
def test_batches_with_left_padding_match_each_sequence_alone(dsa, seed,
                                                             lengths):
    """Left-padded batches (a one-token prompt makes a mixed batch: a
    decode beside a prefill) give each sequence's own logits."""
    model = hs.make_model(hs.GlmMoeDsaForCausalLM, seed)
    converted(model)
    width = max(lengths)
    prompts = [prompt(seed + i, n) for i, n in enumerate(lengths)]
    ids = torch.zeros((len(lengths), width), dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, (pr, n) in enumerate(zip(prompts, lengths)):
        ids[i, width - n:] = pr[0]
        mask[i, width - n:] = 1
    _, logits, cache = hs.greedy(model, ids, 3, attention_mask=mask)
    assert cache.lengths == [n + 3 for n in lengths]
    assert cache.get_seq_length() == width + 3
    for i, pr in enumerate(prompts):
        _, alone, _ = hs.greedy(model, pr, 3)
        assert rel_err(logits[i], alone[0].double()) < 1e-5


# ---------------------------------------------------------------------------
# The cache.


def test_cache_interface_and_growth(dsa):
    model = hs.make_model(hs.GlmMoeDsaForCausalLM, 3)
    converted(model)
    ids = prompt(3, 60)
    small = dt.DsaCache(model, max_batch_size=1, max_tokens=8)
    assert small.num_blocks == 1
    _, grown, cache = hs.greedy(model, ids, 70, cache=small)
    assert cache is small and small.num_blocks >= 3
    big = dt.DsaCache(model, max_tokens=256)
    _, steady, _ = hs.greedy(model, ids, 70, cache=big)
    assert torch.equal(grown, steady)
    assert small.get_seq_length() == 130 and len(small) == 2
    assert small.get_mask_sizes(torch.arange(5), 0) == (135, 0)
    assert small.get_mask_sizes(5, 1) == (135, 0)
    assert small.get_max_cache_shape() == -1
    assert not small.is_compileable
    assert small.layers[1].get_seq_length() == 130
    with pytest.raises(NotImplementedError, match="beam search"):
        small.reorder_cache(torch.tensor([0]))
    with pytest.raises(NotImplementedError):
        small.crop(10)
    small.crop(200)  # nothing dropped
    with pytest.raises(NotImplementedError):
        small.batch_repeat_interleave(2)
    with pytest.raises(TypeError, match="only the converted"):
        small.update(None, None, 0)
    with pytest.raises(TypeError):
        small[0]
    small.reset()
    assert small.get_seq_length() == 0
    _, again, _ = hs.greedy(model, ids, 70, cache=small)
    assert torch.equal(again, steady)


def test_an_empty_cache_of_transformers_is_stood_in_for(dsa):
    """generate() makes an empty DynamicCache; the converted model serves it
    with a DsaCache of its own, the same one on every step."""
    model = hs.make_model(hs.DeepseekV32ForCausalLM, 4)
    converted(model)
    ids = prompt(4, 30)
    _, mine, _ = hs.greedy(model, ids, 4)
    theirs = hs.DynamicCache()
    _, stood_in, cache = hs.greedy(model, ids, 4, cache=theirs)
    assert isinstance(cache, dt.DsaCache)
    assert torch.equal(mine, stood_in)
    # The same empty cache again continues the same DsaCache.
    with torch.no_grad():
        out = model(input_ids=ids[:, :1], past_key_values=theirs,
                    attention_mask=torch.ones((1, 35), dtype=torch.long))
    assert out.past_key_values is cache and cache.get_seq_length() == 35


@pytest.mark.parametrize("cache,match", [
    (hs.DynamicCache(tokens=5), "cannot hold 5 tokens in DynamicCache"),
    (hs.StaticCache(), "compileable"),
    (((torch.zeros(1), torch.zeros(1)),), "legacy"),
])
def test_caches_it_cannot_hold_are_refused(dsa, cache, match):
    model = hs.make_model(hs.GlmMoeDsaForCausalLM, 5)
    converted(model)
    with pytest.raises(TypeError, match=match):
        with torch.no_grad():
            model(input_ids=prompt(5, 4), past_key_values=cache)


def test_a_cache_of_another_model_is_refused(dsa):
    a = converted(hs.make_model(hs.GlmMoeDsaForCausalLM, 6))
    b = converted(hs.make_model(hs.GlmMoeDsaForCausalLM, 7))
    with pytest.raises(TypeError, match="another converted model"):
        with torch.no_grad():
            b(input_ids=prompt(6, 4), past_key_values=dt.DsaCache(a))


def test_inconsistent_inputs_are_refused(dsa):
    model = converted(hs.make_model(hs.GlmMoeDsaForCausalLM, 8))
    ids = prompt(8, 10)
    with torch.no_grad():
        with pytest.raises(ValueError, match="covers 12 columns"):
            model(input_ids=ids, attention_mask=torch.ones((1, 12)))
        with pytest.raises(dt.UnsupportedModelError, match="padding mask"):
            model(input_ids=ids, attention_mask=torch.ones((1, 1, 10, 10)))
        cache = dt.DsaCache(model)
        model(input_ids=ids, past_key_values=cache)
        with pytest.raises(ValueError, match="holds 1 sequences"):
            model(input_ids=torch.cat([ids, ids]), past_key_values=cache)
        with pytest.raises(ValueError, match="max_position_embeddings"):
            model(input_ids=prompt(8, 5000))
    model.train()
    with pytest.raises(RuntimeError, match="inference-only"):
        model(input_ids=ids)


# ---------------------------------------------------------------------------
# The conversion itself.


def test_weights_are_shared_and_restore_undoes_it(dsa):
    model = hs.make_model(hs.GlmMoeDsaForCausalLM, 9)
    ids = prompt(9, 12)
    with torch.no_grad():
        before = model(input_ids=ids).logits
    keys = list(model.state_dict())
    ptrs = {k: v.data_ptr() for k, v in model.state_dict().items()}
    originals = [l.self_attn for l in model.model.layers]
    converted(model)
    assert all(isinstance(l.self_attn, dt.DsaAttention)
               for l in model.model.layers)
    assert list(model.state_dict()) == keys
    assert {k: v.data_ptr() for k, v in model.state_dict().items()} == ptrs
    with pytest.raises(ValueError, match="already converted"):
        dt.convert(model)
    dt.restore(model)
    assert [l.self_attn for l in model.model.layers] == originals
    assert "forward" not in model.model.__dict__
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids).logits, before)


def test_what_it_reads_of_transformers_modules():
    glm = hs.make_model(hs.GlmMoeDsaForCausalLM, 10)
    ds = hs.make_model(hs.DeepseekV32ForCausalLM, 10, mscale=1.3)
    attn = glm.model.layers[0].self_attn
    assert dt.rope_styles(attn, glm.config) == (True, True)
    assert dt.rope_styles(ds.model.layers[0].self_attn, ds.config) == (True,
                                                                     False)
    assert dt.indexer_has_relu(attn)
    assert dt.attention_output_arity(glm.model.layers[0]) == 3
    assert dt.attention_output_arity(ds.model.layers[0]) == 2
    spec = dt.inspect_model(ds)
    assert (spec.mla_rope, spec.indexer_rope) == ("interleaved", "neox")
    assert spec.softmax_scale == pytest.approx(40 ** -0.5 * 1.3 ** 2)
    assert spec.owners == (True, True) and spec.layout().indexer_layers is None
    g52 = hs.make_model(hs.GlmMoeDsaForCausalLM, 10, num_hidden_layers=7,
                        indexer_types=["full"] * 3 + ["shared"] * 3 + ["full"])
    spec = dt.inspect_model(g52)
    assert spec.layout().indexer_layers == (0, 1, 2, 6)
    assert dt.inspect_model(glm, rope_styles_override=(
        "neox", "neox")).indexer_rope == "neox"


def refuse(model, match, **kw):
    originals = [l.self_attn for l in model.model.layers]
    with pytest.raises(dt.UnsupportedModelError, match=match):
        dt.convert(model, **kw)
    assert [l.self_attn for l in model.model.layers] == originals
    assert not dt.is_converted(model)


def test_what_it_cannot_serve_is_refused(dsa):
    make = hs.make_model
    refuse(make(hs.LlamaForCausalLM, 1), "not a supported architecture")
    refuse(make(hs.GlmMoeDsaForCausalLM, 1,
                _attn_implementation="flash_attention_2"),
           "attention implementation 'flash_attention_2'")
    refuse(make(hs.GlmMoeDsaForCausalLM, 1,
                rope_parameters={"rope_type": "dynamic", "rope_theta": 1e4}),
           "rope type 'dynamic'")
    model = make(hs.NoReluGlm, 1)  # a GLM whose indexer has no relu
    model.__class__ = type("GlmMoeDsaForCausalLM", (hs.NoReluGlm,), {})
    refuse(model, "without relu")
    refuse(make(hs.GlmMoeDsaForCausalLM, 1, dtype=torch.float16),
           "float16")
    refuse(make(hs.GlmMoeDsaForCausalLM, 1, num_key_value_heads=1),
           "num_key_value_heads")
    refuse(make(hs.GlmMoeDsaForCausalLM, 1,
                indexer_types=["shared", "full"]), "no earlier one")
    model = make(hs.GlmMoeDsaForCausalLM, 1)
    model.model.layers[0].self_attn.q_a_proj = None
    refuse(model, "no q_a_proj")
    refuse(make(hs.GlmMoeDsaForCausalLM, 1, kv_lora_rank=96),
           "multiple of 128", latent_cache_dtype="float8_e4m3fn")
    refuse(make(hs.GlmMoeDsaForCausalLM, 1), "rope_styles must be",
           rope_styles=("neox", "yarn"))
    model = make(hs.GlmMoeDsaForCausalLM, 1)
    kv_b = model.model.layers[0].self_attn.kv_b_proj
    kv_b.weight = torch.nn.Parameter(kv_b.weight.data.to(torch.uint8),
                                     requires_grad=False)
    refuse(model, "kv_b_proj holds torch.uint8")
    with pytest.raises(ValueError, match="latent_cache_dtype"):
        dt.convert(make(hs.GlmMoeDsaForCausalLM, 1),
                   latent_cache_dtype="int8")


@pytest.mark.parametrize("seed", SEEDS[:1])
def test_fp8_latent_cache(dsa, seed):
    """vLLM's fp8_ds_mla latent: the reference with kv_c rounded to fp8 in
    tiles of 128 (ue8m0 scales) and k_pe to bf16, as that cache stores
    them."""
    model = hs.make_model(hs.GlmMoeDsaForCausalLM, seed)
    ref = copy.deepcopy(model).double()
    for layer in ref.model.layers:
        layer.self_attn.latent_round = "fp8_ds_mla"
    converted(model, latent_cache_dtype="float8_e4m3fn")
    # 128 fp8 values, one fp32 scale per 128, 16 bf16 rope values.
    assert dt.runtime_of(model).latent_width == 128 + 4 + 32
    ids = prompt(seed, 40)
    tokens, logits, _ = hs.greedy(model, ids, 3)
    want = reference_logits(ref, torch.cat([ids, tokens], 1))[39:]
    assert rel_err(logits[0], want) < 5e-3


def test_fp8_block_weights_are_dequantised():
    if getattr(torch, "float8_e4m3fn", None) is None:
        pytest.skip("this torch has no float8 dtype (the path is for FP8 "
                    "checkpoints under torch >= 2.1)")
    lin = torch.nn.Linear(200, 300, bias=False)
    codes = lin.weight.data.to(torch.float8_e4m3fn)
    lin.weight = torch.nn.Parameter(codes, requires_grad=False)
    scale = torch.rand(3, 2) + 0.5
    lin.weight_scale_inv = scale
    got = dt._dense_weight(lin, "w", torch.float32)
    assert dt._dense_weight(torch.nn.Linear(4, 4), "w", torch.float32) is None
    want = codes.float() * scale.repeat_interleave(128, 0)[:300] \
        .repeat_interleave(128, 1)[:, :200]
    assert torch.equal(got, want)


def test_under_a_cache_base_with_read_only_properties(dsa, monkeypatch):
    """transformers' Cache declares read-only properties (5.17: batch_size,
    which the first H200 run collided with) and may declare abstract
    methods: DsaCache, made a subclass of such a base, writes none of its
    names and still serves a forward."""
    names = ("batch_size", "max_batch_size", "max_cache_len", "layers",
             "is_compileable", "is_initialized", "is_sliding", "seen_tokens",
             "offloading", "layer_class_to_replicate", "block_size",
             "num_blocks", "lengths", "seen", "latent", "index_k", "tables",
             "num_sequences")

    def refuse_read(self):
        raise AssertionError("the base's property was read")

    body = {n: property(refuse_read) for n in names}
    body["update"] = abc.abstractmethod(lambda self, *a: None)
    base = abc.ABCMeta("Cache", (), body)
    fake = types.ModuleType("transformers")
    fake_cache = types.ModuleType("transformers.cache_utils")
    fake_cache.Cache = base
    fake.cache_utils = fake_cache
    monkeypatch.setitem(sys.modules, "transformers", fake)
    monkeypatch.setitem(sys.modules, "transformers.cache_utils", fake_cache)
    spec = importlib.util.spec_from_file_location("dsa_torch._probe",
                                                  dt.__file__)
    probe = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "dsa_torch._probe", probe)
    spec.loader.exec_module(probe)
    assert issubclass(probe.DsaCache, base)
    a = hs.make_model(hs.GlmMoeDsaForCausalLM, 12)
    b = copy.deepcopy(a)
    probe.convert(a, platform_caps=CUDA_ALIKE)
    converted(b)
    ids = prompt(12, 70)
    cache = probe.DsaCache(a, max_tokens=80)
    assert cache.num_blocks == 2 and cache.batch_size is None
    _, got, cache = hs.greedy(a, ids, 3, cache=cache)
    assert cache.get_seq_length() == 73 and cache.lengths == [73]
    _, want, _ = hs.greedy(b, ids, 3)
    assert torch.equal(got, want)
