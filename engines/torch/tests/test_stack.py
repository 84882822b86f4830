"""dsa_torch.stack: a checkpoint written here (safetensors by hand, bf16
weights, GLM-5.2-style shared indexer layers, an MTP layer, tensors the
attention-only stack ignores) loaded with from_pretrained, run from token
ids and from hidden states, and compared layer by layer with an
attention-only stack written here in float64 torch; bad checkpoints and bad
calls raise with a message."""

import json
import math
import os
import struct

import pytest
import torch

from dsa_torch import stack

CONFIG = {
    "architectures": ["GlmMoeDsaForCausalLM"],
    "model_type": "glm_moe_dsa",
    "num_hidden_layers": 3,
    "hidden_size": 256,
    "num_attention_heads": 2,
    "q_lora_rank": 64,
    "kv_lora_rank": 128,
    "qk_nope_head_dim": 32,
    "qk_rope_head_dim": 16,
    "v_head_dim": 32,
    "max_position_embeddings": 1024,
    "vocab_size": 100,
    "index_n_heads": 2,
    "index_head_dim": 32,
    "index_topk": 32,
    "indexer_rope_interleave": True,
    "indexer_types": ["full", "shared", "full"],
    "num_nextn_predict_layers": 1,
    "rms_norm_eps": 1e-5,
    "rope_parameters": {"rope_theta": 1000000, "rope_type": "default"},
}

_DTYPES = {torch.bfloat16: "BF16", torch.float32: "F32"}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        if t.dtype == torch.bfloat16:
            data = t.view(torch.int16).numpy().tobytes()
        else:
            data = t.numpy().tobytes()
        header[name] = {"dtype": _DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def make_weights(config, seed=0):
    g = torch.Generator().manual_seed(seed)
    c = config
    hidden, heads = c["hidden_size"], c["num_attention_heads"]
    nope, rope, v = (c["qk_nope_head_dim"], c["qk_rope_head_dim"],
                     c["v_head_dim"])
    q_lora, kv_lora = c["q_lora_rank"], c["kv_lora_rank"]
    ih, idim = c["index_n_heads"], c["index_head_dim"]

    def mat(out, inp):
        return (torch.randn(out, inp, generator=g) / math.sqrt(inp)).to(
            torch.bfloat16)

    def norm(n):
        return (1 + 0.1 * torch.randn(n, generator=g)).to(torch.bfloat16)

    w = {}
    layers = c["num_hidden_layers"] + c["num_nextn_predict_layers"]
    for layer in range(layers):
        p = f"model.layers.{layer}."
        w[p + "input_layernorm.weight"] = norm(hidden)
        w[p + "post_attention_layernorm.weight"] = norm(hidden)
        w[p + "mlp.gate_proj.weight"] = mat(8, hidden)
        w[p + "self_attn.q_a_proj.weight"] = mat(q_lora, hidden)
        w[p + "self_attn.q_a_layernorm.weight"] = norm(q_lora)
        w[p + "self_attn.q_b_proj.weight"] = mat(heads * (nope + rope), q_lora)
        w[p + "self_attn.kv_a_proj_with_mqa.weight"] = mat(kv_lora + rope,
                                                           hidden)
        w[p + "self_attn.kv_a_layernorm.weight"] = norm(kv_lora)
        w[p + "self_attn.kv_b_proj.weight"] = mat(heads * (nope + v), kv_lora)
        w[p + "self_attn.o_proj.weight"] = mat(hidden, heads * v)
        # Every layer ships an indexer, as GLM-5.2's checkpoints do; the
        # shared layer's is never read.
        w[p + "self_attn.indexer.wq_b.weight"] = mat(ih * idim, q_lora)
        w[p + "self_attn.indexer.wk.weight"] = mat(idim, hidden)
        w[p + "self_attn.indexer.k_norm.weight"] = norm(idim)
        w[p + "self_attn.indexer.k_norm.bias"] = 0.1 * norm(idim)
        w[p + "self_attn.indexer.weights_proj.weight"] = mat(
            ih, hidden).to(torch.float32)
    mtp = f"model.layers.{c['num_hidden_layers']}."
    w[mtp + "eh_proj.weight"] = mat(hidden, 2 * hidden)
    w[mtp + "enorm.weight"] = norm(hidden)
    w[mtp + "hnorm.weight"] = norm(hidden)
    w[mtp + "embed_tokens.weight"] = torch.randn(
        c["vocab_size"], hidden, generator=g).to(torch.bfloat16)
    w["model.norm.weight"] = norm(hidden)
    w["model.embed_tokens.weight"] = torch.randn(
        c["vocab_size"], hidden, generator=g).to(torch.bfloat16)
    w["lm_head.weight"] = mat(c["vocab_size"], hidden)
    return w


def write_checkpoint(path, config=CONFIG, weights=None, shards=2):
    os.makedirs(path, exist_ok=True)
    with open(os.path.join(path, "config.json"), "w") as f:
        json.dump(config, f)
    weights = weights if weights is not None else make_weights(config)
    names = sorted(weights)
    weight_map = {}
    for s in range(shards):
        part = names[s::shards]
        file = f"model-{s + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(path, file),
                          {n: weights[n] for n in part})
        weight_map.update({n: file for n in part})
    with open(os.path.join(path, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {}, "weight_map": weight_map}, f)
    return weights


# --- An attention-only stack in float64 torch, written from the models'
# definitions (not from the project's code): input_layernorm, MLA with its
# latent in bf16 (what the latent cache holds), causal softmax attention,
# o_proj and the residual; the MTP layer on [enorm(e) | hnorm(norm(h))].

def rms_norm(x, w, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w


def rope_interleaved(x, positions, theta):
    d = x.shape[-1]
    inv = theta ** (-torch.arange(0, d, 2, dtype=torch.float64) / d)
    angle = positions[:, None].double() * inv[None, :]
    shape = [angle.shape[0]] + [1] * (x.dim() - 2) + [d // 2]
    cos, sin = angle.cos().view(shape), angle.sin().view(shape)
    a, b = x[..., 0::2], x[..., 1::2]
    out = torch.empty_like(x)
    out[..., 0::2] = a * cos - b * sin
    out[..., 1::2] = b * cos + a * sin
    return out


def bf16(x):
    return x.to(torch.bfloat16).to(torch.float64)


def attention_layer(h, w, p, c):
    T = h.shape[0]
    heads = c["num_attention_heads"]
    nope, rope, v = (c["qk_nope_head_dim"], c["qk_rope_head_dim"],
                     c["v_head_dim"])
    kv_lora, eps = c["kv_lora_rank"], c["rms_norm_eps"]
    theta = c["rope_parameters"]["rope_theta"]
    W = lambda n: w[p + n].to(torch.float64)  # noqa: E731
    pos = torch.arange(T)
    x = rms_norm(h, W("input_layernorm.weight"), eps)
    q_c = rms_norm(x @ W("self_attn.q_a_proj.weight").T,
                   W("self_attn.q_a_layernorm.weight"), eps)
    q = (q_c @ W("self_attn.q_b_proj.weight").T).view(T, heads, nope + rope)
    q = torch.cat([q[..., :nope], rope_interleaved(q[..., nope:], pos, theta)],
                  -1)
    kv = x @ W("self_attn.kv_a_proj_with_mqa.weight").T
    kv_c = bf16(rms_norm(kv[:, :kv_lora], W("self_attn.kv_a_layernorm.weight"),
                         eps))
    k_pe = bf16(rope_interleaved(kv[:, kv_lora:], pos, theta))
    kvb = (kv_c @ W("self_attn.kv_b_proj.weight").T).view(T, heads, nope + v)
    k = torch.cat([kvb[..., :nope], k_pe[:, None, :].expand(T, heads, rope)],
                  -1)
    scores = torch.einsum("thd,shd->hts", q, k) / math.sqrt(nope + rope)
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    scores = scores.masked_fill(~mask, float("-inf")).softmax(-1)
    attn = torch.einsum("hts,shd->thd", scores, kvb[..., nope:])
    return h + attn.reshape(T, heads * v) @ W("self_attn.o_proj.weight").T


def reference_stack(w, c, ids, next_ids):
    embed = w["model.embed_tokens.weight"].to(torch.float64)
    h = embed[ids]
    out = []
    for layer in range(c["num_hidden_layers"]):
        h = attention_layer(h, w, f"model.layers.{layer}.", c)
        out.append(h)
    p = f"model.layers.{c['num_hidden_layers']}."
    eps = c["rms_norm_eps"]
    e = w[p + "embed_tokens.weight"].to(torch.float64)[next_ids]
    e[0] = 0  # vLLM masks the MTP input at position 0
    e = rms_norm(e, w[p + "enorm.weight"].double(), eps)
    g = rms_norm(rms_norm(h, w["model.norm.weight"].double(), eps),
                 w[p + "hnorm.weight"].double(), eps)
    h = torch.cat([e, g], -1) @ w[p + "eh_proj.weight"].double().T
    out.append(attention_layer(h, w, p, c))
    return torch.stack(out)


def rel(a, b):
    return ((a.double() - b).norm() / b.norm()).item()


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    path = str(tmp_path_factory.mktemp("ckpt") / "GLM-tiny")
    weights = write_checkpoint(path)
    return path, weights


def test_checkpoint_matches_a_float64_torch_stack(checkpoint):
    path, weights = checkpoint
    model = stack.from_pretrained(path, device="cpu", max_tokens=64)
    assert model.has_checkpoint_weights
    assert model.num_main_layers == 3 and model.num_mtp_layers == 1
    assert "2 files" in model.description, model.description
    T = 24  # below index_topk 32: every causal key
    ids = torch.tensor([(7 * t + 3) % 100 for t in range(T)])
    out = model.prefill(input_ids=ids, next_token_id=42)
    assert out.hidden_states.shape == (4, T, 256)
    next_ids = torch.cat([ids[1:], torch.tensor([42])])
    ref = reference_stack(weights, CONFIG, ids, next_ids)
    for layer in range(4):
        err = rel(out.hidden_states[layer], ref[layer])
        print(f"layer {layer}: relative error {err:.3g}")
        assert 0 < err < 2e-3, (layer, err)
    assert torch.equal(out.last_hidden_state, out.hidden_states[2])
    assert torch.equal(out.mtp_hidden_state, out.hidden_states[3])
    # The same from hidden states: the embedding rows given directly.
    embed = weights["model.embed_tokens.weight"].float()
    mtp_embed = weights["model.layers.3.embed_tokens.weight"].float()
    again = model.prefill(hidden_states=embed[ids],
                          mtp_hidden_states=mtp_embed[next_ids])
    assert torch.equal(again.hidden_states, out.hidden_states)
    # bf16 activations stay close (what engines run).
    fast = stack.from_pretrained(path, device="cpu", dtype=torch.bfloat16,
                                 max_tokens=64)
    err = rel(fast.prefill(input_ids=ids, next_token_id=42).hidden_states[2],
              ref[2])
    assert 0 < err < 3e-2, err


def test_longer_than_topk_takes_the_sparse_path(checkpoint):
    path, _ = checkpoint
    model = stack.from_pretrained(path, device="cpu", max_tokens=128)
    ids = torch.arange(90) % 100
    out = model.prefill(input_ids=ids)
    assert out.hidden_states.shape == (4, 90, 256)
    assert torch.isfinite(out.hidden_states).all()
    # The first 32 positions see every causal key either way.
    short = model.prefill(input_ids=ids[:32], mtp_input_ids=ids[1:33])
    full = model.prefill(input_ids=ids, mtp_input_ids=torch.cat(
        [ids[1:], torch.tensor([0])]))
    assert torch.allclose(full.hidden_states[:, :32], short.hidden_states,
                          rtol=1e-4, atol=1e-4)


def test_the_top_k_each_layer_read(checkpoint):
    """prefill(return_topk=True): per layer the key positions the sparse
    path attended to; nothing else changes."""
    path, _ = checkpoint
    model = stack.from_pretrained(path, device="cpu", max_tokens=128)
    ids = torch.arange(90) % 100
    plain = model.prefill(input_ids=ids)
    assert plain.topk is None
    out = model.prefill(input_ids=ids, return_topk=True)
    assert torch.equal(out.hidden_states, plain.hidden_states)
    assert out.topk.shape == (4, 90, 32) and out.topk.dtype == torch.int32
    for layer in range(4):
        for t in range(90):
            row = out.topk[layer, t]
            picked = row[row >= 0]
            if t < 32:  # every causal key, in order
                assert torch.equal(picked, torch.arange(t + 1,
                                                        dtype=torch.int32))
            else:
                assert picked.numel() == 32
                assert bool((picked[1:] > picked[:-1]).all())
                assert int(picked[-1]) <= t
    # Layer 1 shares layer 0's indexer ("indexer_types": full, shared, full).
    assert torch.equal(out.topk[1], out.topk[0])
    assert not torch.equal(out.topk[2], out.topk[0])


def test_presets_and_config_alone_give_random_weights(tmp_path):
    model = stack.from_pretrained("tiny-glm-5.2", device="cpu", max_tokens=32)
    assert not model.has_checkpoint_weights
    assert model.num_layers == 9
    a = model.prefill(input_ids=torch.arange(10))
    b = model.prefill(input_ids=torch.arange(10))
    assert torch.equal(a.hidden_states, b.hidden_states)
    with open(tmp_path / "config.json", "w") as f:
        json.dump(CONFIG, f)
    alone = stack.from_pretrained(str(tmp_path / "config.json"), max_tokens=16)
    assert "random weights" in alone.description
    assert alone.prefill(hidden_states=torch.randn(5, 256)).hidden_states.shape \
        == (4, 5, 256)


def test_a_model_too_large_for_the_device_raises_memory_error(tmp_path):
    # 1000 layers of hidden size 65536: far beyond any machine's memory. The
    # stack refuses it before allocating anything, naming its size.
    huge = dict(CONFIG, num_hidden_layers=1000, hidden_size=65536,
                indexer_types=["full"] * 1000, num_nextn_predict_layers=0)
    with open(tmp_path / "config.json", "w") as f:
        json.dump(huge, f)
    with pytest.raises(MemoryError, match=r"needs .* GiB .* more of device "
                                          r"memory; platform 'cpu' reports"):
        stack.from_pretrained(str(tmp_path / "config.json"), max_tokens=16)


def test_bad_checkpoints_and_calls_raise_with_a_message(checkpoint, tmp_path):
    path, weights = checkpoint
    broken = dict(weights)
    del broken["model.layers.2.self_attn.o_proj.weight"]
    write_checkpoint(str(tmp_path / "missing"), weights=broken)
    with pytest.raises(ValueError,
                       match="no tensor model.layers.2.self_attn.o_proj.weight"):
        stack.from_pretrained(str(tmp_path / "missing"))
    wrong = dict(weights)
    wrong["model.layers.0.self_attn.q_a_layernorm.weight"] = torch.ones(
        63, dtype=torch.bfloat16)
    write_checkpoint(str(tmp_path / "shape"), weights=wrong)
    with pytest.raises(ValueError, match=r"has shape \[63\], expected \[64\]"):
        stack.from_pretrained(str(tmp_path / "shape"))
    with pytest.raises(FileNotFoundError):
        stack.from_pretrained(str(tmp_path / "nowhere"))
    model = stack.from_pretrained(path, max_tokens=16)
    with pytest.raises(ValueError, match="exactly one"):
        model.prefill()
    with pytest.raises(ValueError, match="num_tokens is 17"):
        model.prefill(input_ids=torch.zeros(17, dtype=torch.int64))
    with pytest.raises(IndexError, match="outside the vocabulary of 100"):
        model.prefill(input_ids=torch.tensor([3, 100]))
    with pytest.raises(ValueError, match=r"must be \[tokens, 256\]"):
        model.prefill(hidden_states=torch.zeros(4, 8))
