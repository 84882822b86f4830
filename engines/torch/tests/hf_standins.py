"""Stand-ins for transformers' DSA models, for tests without transformers.

They have transformers' module layout and call conventions (5.x:
model.model.layers[i].self_attn with q_a_proj ... o_proj and an indexer
with wq_b, wk, k_norm, weights_proj; model.model.rotary_emb returning
cat(freqs, freqs) cos/sin; decoder layers that unpack 2 or 3 values from
self_attn; GLM-5.2's shared layers reusing the previous top-k; a padding
mask turned into a 4D additive mask; position ids from the cache length)
and compute the model as transformers does, in whatever dtype they are cast
to: in float64 they are the reference the converted model is checked
against. They keep no cache of their own: a reference run recomputes the
whole sequence.

Test-only knobs on the attention modules: latent_round (round kv_c and the
roped k_pe to that dtype, or "fp8_ds_mla": kv_c to fp8 in tiles of 128 and
k_pe to bf16, as the latent cache stores them), forced_topk
(the top-k positions [batch, tokens, topk] to attend to, -1 padded, in
place of the indexer's, which still runs) and on the indexer emulate_fp8 (score fp8-rounded
queries and keys with ue8m0 scales, as the kernels do; last_scores keeps
the index scores of its last call).
"""

import math
import types

import torch
import torch.nn.functional as F
from torch import nn

FP8_MAX = 448.0


def e4m3_round(x):
    """float64 values rounded to float8 e4m3fn (nearest even, saturating)."""
    a = x.abs().clamp(max=FP8_MAX)
    e = torch.floor(torch.log2(a.clamp(min=2.0 ** -9))).clamp(min=-6)
    step = torch.pow(2.0, e - 3)
    r = (torch.round(a / step) * step).clamp(max=FP8_MAX)
    return torch.sign(x) * r


def fp8_quantize(x):
    """Per vector of the last dim: ue8m0 scale, e4m3 values, dequantised."""
    amax = x.abs().amax(-1, keepdim=True).clamp(min=1e-4)
    scale = torch.pow(2.0, torch.ceil(torch.log2(amax.float().double()
                                                 / FP8_MAX)))
    return e4m3_round(x / scale) * scale


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin, unsqueeze_dim=1):
    cos, sin = cos.unsqueeze(unsqueeze_dim), sin.unsqueeze(unsqueeze_dim)
    return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin


def apply_rotary_pos_emb_interleave(q, k, cos, sin, unsqueeze_dim=1):
    """transformers 5.x: pairs (x0, x1), (x2, x3) ...; the result laid out
    as (even parts | odd parts)."""
    half = cos.shape[-1] // 2
    cos = cos[..., :half].unsqueeze(unsqueeze_dim)
    sin = sin[..., :half].unsqueeze(unsqueeze_dim)

    def one(x):
        x1, x2 = x[..., 0::2], x[..., 1::2]
        return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1)
    return one(q), one(k)


def identity(x):
    return x


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.variance_epsilon = eps

    def forward(self, x):
        dtype = x.dtype
        h = x.to(torch.float32 if dtype != torch.float64 else dtype)
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True)
                            + self.variance_epsilon)
        return self.weight * h.to(dtype)


class RotaryEmbedding(nn.Module):
    def __init__(self, config):
        super().__init__()
        dim = config.qk_rope_head_dim
        theta = config.rope_parameters["rope_theta"]
        inv = 1.0 / (theta ** (torch.arange(0, dim, 2, dtype=torch.float64)
                               / dim))
        self.register_buffer("inv_freq", inv, persistent=False)
        self.attention_scaling = config.attention_scaling

    def forward(self, x, position_ids):
        freqs = position_ids[:, :, None].double() * self.inv_freq[None, None]
        emb = torch.cat((freqs, freqs), -1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        if x.dtype == torch.float64:
            return cos, sin
        return cos.float().to(x.dtype), sin.float().to(x.dtype)


class IndexerBase(nn.Module):
    def __init__(self, config, layer_idx):
        super().__init__()
        self.n_heads = config.index_n_heads
        self.head_dim = config.index_head_dim
        self.qk_rope_head_dim = config.qk_rope_head_dim
        self.index_topk = config.index_topk
        self.wq_b = nn.Linear(config.q_lora_rank, self.n_heads * self.head_dim,
                              bias=False)
        self.wk = nn.Linear(config.hidden_size, self.head_dim, bias=False)
        self.k_norm = nn.LayerNorm(self.head_dim, eps=1e-6)
        self.weights_proj = nn.Linear(config.hidden_size, self.n_heads,
                                      bias=False)
        self.softmax_scale = self.head_dim ** -0.5
        self.emulate_fp8 = False

    def scores(self, hidden_states, q_resid, position_embeddings, mask,
               rope_fn, relu_fn):
        """[B, S, S] index scores (mask added) and the top-k positions."""
        B, S, _ = hidden_states.shape
        cos, sin = position_embeddings
        r = self.qk_rope_head_dim
        q = self.wq_b(q_resid).view(B, S, self.n_heads, self.head_dim)
        k = self.k_norm(self.wk(hidden_states))[:, :, None]
        q_pe, k_pe = rope_fn(q[..., :r], k[..., :r], cos, sin,
                             unsqueeze_dim=2)
        q = torch.cat([q_pe, q[..., r:]], -1)
        k = torch.cat([k_pe, k[..., r:]], -1)[:, :, 0]
        if self.emulate_fp8:
            q, k = fp8_quantize(q.double()), fp8_quantize(k.double())
        s = relu_fn(torch.einsum("bshd,btd->bsht", q.double(), k.double())
                    * self.softmax_scale)
        w = self.weights_proj(hidden_states).double() * self.n_heads ** -0.5
        index = torch.einsum("bsht,bsh->bst", s, w)
        if mask is not None:
            index = index + mask.double()
        self.last_scores = index
        return index, index.topk(min(self.index_topk, S), dim=-1).indices


class GlmIndexer(IndexerBase):
    def forward(self, hidden_states, q_resid, position_embeddings,
                attention_mask=None, use_cache=False):
        return self.scores(hidden_states, q_resid, position_embeddings,
                           attention_mask, apply_rotary_pos_emb_interleave,
                           F.relu)[1]


class DsIndexer(IndexerBase):
    def forward(self, hidden_states, q_resid, position_embeddings,
                attention_mask=None, position_ids=None, past_key_values=None):
        # NON-interleaved (half-split) rope, as transformers' DeepSeek.
        return self.scores(hidden_states, q_resid, position_embeddings,
                           attention_mask, apply_rotary_pos_emb, F.relu)[1]


class NoReluIndexer(IndexerBase):
    def forward(self, hidden_states, q_resid, position_embeddings,
                attention_mask=None):
        return self.scores(hidden_states, q_resid, position_embeddings,
                           attention_mask, apply_rotary_pos_emb_interleave,
                           identity)[1]


class AttentionBase(nn.Module):
    indexer_class = GlmIndexer

    def __init__(self, config, layer_idx):
        super().__init__()
        self.config = config
        self.layer_idx = layer_idx
        self.num_heads = config.num_attention_heads
        self.qk_nope_head_dim = config.qk_nope_head_dim
        self.qk_rope_head_dim = config.qk_rope_head_dim
        self.v_head_dim = config.v_head_dim
        self.kv_lora_rank = config.kv_lora_rank
        qk = self.qk_nope_head_dim + self.qk_rope_head_dim
        self.q_a_proj = nn.Linear(config.hidden_size, config.q_lora_rank,
                                  bias=False)
        self.q_a_layernorm = RMSNorm(config.q_lora_rank)
        self.q_b_proj = nn.Linear(config.q_lora_rank, self.num_heads * qk,
                                  bias=False)
        self.kv_a_proj_with_mqa = nn.Linear(
            config.hidden_size, self.kv_lora_rank + self.qk_rope_head_dim,
            bias=False)
        self.kv_a_layernorm = RMSNorm(self.kv_lora_rank)
        self.kv_b_proj = nn.Linear(
            self.kv_lora_rank,
            self.num_heads * (self.qk_nope_head_dim + self.v_head_dim),
            bias=False)
        self.o_proj = nn.Linear(self.num_heads * self.v_head_dim,
                                config.hidden_size, bias=False)
        self.scaling = qk ** -0.5 * config.mscale ** 2
        self.indexer = self.indexer_class(config, layer_idx)
        types_ = config.indexer_types
        self.skip_topk = types_[layer_idx] == "shared"
        self.next_skip_topk = (layer_idx + 1 < len(types_)
                               and types_[layer_idx + 1] == "shared")
        self.latent_round = None
        self.forced_topk = None

    def compute(self, h, position_embeddings, mask, prev_topk, rope_fn):
        B, S, _ = h.shape
        H, nope, r, v = (self.num_heads, self.qk_nope_head_dim,
                         self.qk_rope_head_dim, self.v_head_dim)
        cos, sin = position_embeddings
        q_resid = self.q_a_layernorm(self.q_a_proj(h))
        q = self.q_b_proj(q_resid).view(B, S, H, nope + r).transpose(1, 2)
        kv = self.kv_a_proj_with_mqa(h)
        kv_c = self.kv_a_layernorm(kv[..., :self.kv_lora_rank])
        k_pe = kv[..., self.kv_lora_rank:].reshape(B, 1, S, r)
        q_pe, k_pe = rope_fn(q[..., nope:], k_pe, cos, sin)
        if self.latent_round == "fp8_ds_mla":
            tiles = kv_c.reshape(*kv_c.shape[:-1], -1, 128).double()
            kv_c = fp8_quantize(tiles).reshape(kv_c.shape).to(h.dtype)
            k_pe = k_pe.to(torch.bfloat16).to(h.dtype)
        elif self.latent_round is not None:
            kv_c = kv_c.to(self.latent_round).to(h.dtype)
            k_pe = k_pe.to(self.latent_round).to(h.dtype)
        kvb = self.kv_b_proj(kv_c).view(B, S, H, nope + v).transpose(1, 2)
        k = torch.cat([kvb[..., :nope], k_pe.expand(B, H, S, r)], -1)
        values = kvb[..., nope:]
        qf = torch.cat([q[..., :nope], q_pe], -1)
        scores = qf @ k.transpose(-1, -2) * self.scaling
        if mask is not None:
            scores = scores + mask
        if self.skip_topk and prev_topk is not None:
            topk = prev_topk
        else:
            topk = self.indexer(h, q_resid, position_embeddings,
                                mask[:, 0] if mask is not None else None)
        if self.forced_topk is not None:  # the indexer still ran
            topk = self.forced_topk
        keep = torch.zeros((B, S, S + 1), dtype=torch.bool)
        idx = torch.where(topk >= 0, topk, torch.full_like(topk, S))
        keep.scatter_(-1, idx.long(), True)
        scores = scores.masked_fill(~keep[:, None, :, :S], -math.inf)
        p = torch.softmax(scores.double(), -1).to(values.dtype)
        p = torch.nan_to_num(p)  # rows without any key (padding)
        o = (p @ values).transpose(1, 2).reshape(B, S, H * v)
        return self.o_proj(o), topk


class GlmAttention(AttentionBase):
    indexer_class = GlmIndexer

    def forward(self, hidden_states, position_embeddings, attention_mask=None,
                past_key_values=None, prev_topk_indices=None, **kwargs):
        out, topk = self.compute(hidden_states, position_embeddings,
                                 attention_mask, prev_topk_indices,
                                 apply_rotary_pos_emb_interleave)
        return out, None, topk if self.next_skip_topk else None


class DsAttention(AttentionBase):
    indexer_class = DsIndexer

    def forward(self, hidden_states, position_embeddings, attention_mask=None,
                past_key_values=None, position_ids=None, **kwargs):
        out, _ = self.compute(hidden_states, position_embeddings,
                              attention_mask, None,
                              apply_rotary_pos_emb_interleave)
        return out, None


class NoReluAttention(GlmAttention):
    indexer_class = NoReluIndexer


class MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.gate_proj = nn.Linear(config.hidden_size, 2 * config.hidden_size,
                                   bias=False)
        self.down_proj = nn.Linear(2 * config.hidden_size, config.hidden_size,
                                   bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)))


class GlmDecoderLayer(nn.Module):
    attention_class = GlmAttention

    def __init__(self, config, layer_idx):
        super().__init__()
        self.self_attn = self.attention_class(config, layer_idx)
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(config.hidden_size,
                                                config.rms_norm_eps)
        self.mlp = MLP(config)

    def forward(self, hidden_states, attention_mask=None, position_ids=None,
                past_key_values=None, use_cache=False,
                position_embeddings=None, prev_topk_indices=None, **kwargs):
        residual = hidden_states
        hidden_states, _, topk_indices = self.self_attn(
            hidden_states=self.input_layernorm(hidden_states),
            attention_mask=attention_mask, position_ids=position_ids,
            past_key_values=past_key_values, use_cache=use_cache,
            position_embeddings=position_embeddings,
            prev_topk_indices=prev_topk_indices, **kwargs)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = residual + self.mlp(
            self.post_attention_layernorm(hidden_states))
        return hidden_states, topk_indices


class DsDecoderLayer(GlmDecoderLayer):
    attention_class = DsAttention

    def forward(self, hidden_states, attention_mask=None, position_ids=None,
                past_key_values=None, use_cache=False,
                position_embeddings=None, **kwargs):
        residual = hidden_states
        hidden_states, _ = self.self_attn(
            hidden_states=self.input_layernorm(hidden_states),
            attention_mask=attention_mask, position_ids=position_ids,
            past_key_values=past_key_values, use_cache=use_cache,
            position_embeddings=position_embeddings, **kwargs)
        hidden_states = residual + hidden_states
        return hidden_states + self.mlp(
            self.post_attention_layernorm(hidden_states)), None


class NoReluDecoderLayer(GlmDecoderLayer):
    attention_class = NoReluAttention


class DynamicCache:
    """transformers' default cache as the converted model meets it: empty
    (generate() made it) or holding tokens (an unconverted run filled it)."""

    is_compileable = False

    def __init__(self, tokens=0):
        self.tokens = tokens

    def get_seq_length(self, layer_idx=0):
        return self.tokens

    def get_mask_sizes(self, query, layer_idx=0):
        q = query.shape[0] if hasattr(query, "shape") else int(query)
        return self.tokens + q, 0


class StaticCache(DynamicCache):
    is_compileable = True


class Output(types.SimpleNamespace):
    pass


class InnerModel(nn.Module):
    def __init__(self, config, layer_class):
        super().__init__()
        self.config = config
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(
            [layer_class(config, i) for i in range(config.num_hidden_layers)])
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.rotary_emb = RotaryEmbedding(config)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None,
                past_key_values=None, inputs_embeds=None, use_cache=None,
                **kwargs):
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache()
        B, S, _ = inputs_embeds.shape
        past = past_key_values.get_seq_length() if past_key_values else 0
        if past and not hasattr(past_key_values, "latent"):
            raise RuntimeError("the stand-in's own modules keep no cache")
        if position_ids is None:
            position_ids = (torch.arange(S) + past)[None]
        kv_len, _ = (past_key_values.get_mask_sizes(torch.arange(S), 0)
                     if past_key_values is not None else (S, 0))
        dtype = inputs_embeds.dtype
        mask = torch.full((S, kv_len), -math.inf, dtype=dtype).triu(
            1 + kv_len - S)[None, None].expand(B, 1, S, kv_len).clone()
        if attention_mask is not None:
            mask = mask.masked_fill(attention_mask[:, None, None, :] == 0,
                                    -math.inf)
        h = inputs_embeds
        position_embeddings = self.rotary_emb(h, position_ids)
        topk = None
        for layer in self.layers[:self.config.num_hidden_layers]:
            h, topk = layer(h, attention_mask=mask,
                            position_embeddings=position_embeddings,
                            position_ids=position_ids,
                            past_key_values=past_key_values,
                            use_cache=use_cache, prev_topk_indices=topk,
                            **kwargs)
        return Output(last_hidden_state=self.norm(h),
                      past_key_values=past_key_values)


class CausalLMBase(nn.Module):
    layer_class = GlmDecoderLayer

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.model = InnerModel(config, self.layer_class)
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size,
                                 bias=False)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None,
                past_key_values=None, inputs_embeds=None, use_cache=None,
                logits_to_keep=0, **kwargs):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask,
                         position_ids=position_ids,
                         past_key_values=past_key_values,
                         inputs_embeds=inputs_embeds, use_cache=use_cache,
                         **kwargs)
        h = out.last_hidden_state
        if logits_to_keep:
            h = h[:, -logits_to_keep:]
        return Output(logits=self.lm_head(h),
                      past_key_values=out.past_key_values)


class GlmMoeDsaForCausalLM(CausalLMBase):
    layer_class = GlmDecoderLayer


class DeepseekV32ForCausalLM(CausalLMBase):
    layer_class = DsDecoderLayer


class NoReluGlm(CausalLMBase):
    layer_class = NoReluDecoderLayer


class LlamaForCausalLM(CausalLMBase):
    pass


def make_config(**overrides):
    c = dict(vocab_size=61, hidden_size=64, num_hidden_layers=2,
             num_attention_heads=2, num_key_value_heads=2, q_lora_rank=32,
             kv_lora_rank=128, qk_nope_head_dim=24, qk_rope_head_dim=16,
             v_head_dim=24, index_n_heads=2, index_head_dim=32, index_topk=128,
             max_position_embeddings=4096, rms_norm_eps=1e-5,
             rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
             attention_scaling=1.0, mscale=1.0, _attn_implementation="sdpa")
    c.update(overrides)
    if "indexer_types" not in c:
        c["indexer_types"] = ["full"] * c["num_hidden_layers"]
    return types.SimpleNamespace(**c)


def make_model(cls, seed, dtype=torch.float32, **overrides):
    """A random model: weights of std 0.2 (peaked attention), norms near 1."""
    torch.manual_seed(seed)
    model = cls(make_config(**overrides))
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() >= 2:
                p.normal_(0.0, 0.2)
            elif name.endswith("bias"):
                p.normal_(0.0, 0.1)
            else:
                p.uniform_(0.8, 1.2)
    return model.to(dtype).eval()


def greedy(model, input_ids, steps, attention_mask=None, cache=None,
           logits_hook=None):
    """transformers' greedy loop in miniature: the prompt, then one token a
    step, the mask grown by a column and position ids from it (left
    padding), the cache carried from the model's output."""
    if attention_mask is None:
        attention_mask = torch.ones_like(input_ids)
    ids, mask = input_ids, attention_mask
    position_ids = (mask.long().cumsum(-1) - 1).clamp(min=0)
    out = model(input_ids=ids, attention_mask=mask, position_ids=position_ids,
                past_key_values=cache, use_cache=True)
    logits = [out.logits[:, -1]]
    tokens = []
    for _ in range(steps):
        nxt = logits[-1].argmax(-1)
        tokens.append(nxt)
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], 1)
        pos = mask.long().sum(-1, keepdim=True) - 1
        out = model(input_ids=nxt[:, None], attention_mask=mask,
                    position_ids=pos, past_key_values=out.past_key_values,
                    use_cache=True)
        logits.append(out.logits[:, -1])
    return torch.stack(tokens, 1), torch.stack(logits, 1), \
        out.past_key_values
