"""Hugging Face transformers' DSA models on the project's attention plugins.

    import torch, transformers
    from dsa_torch import transformers as dsa_hf
    model = dsa_hf.convert(transformers.AutoModelForCausalLM.from_pretrained(
        path, dtype=torch.bfloat16, device_map="cuda"))
    out = model.generate(input_ids, max_new_tokens=64)

convert() takes a loaded GlmMoeDsaForCausalLM (GLM-5, GLM-5.1, GLM-5.2) or
DeepseekV32ForCausalLM and swaps every attention module for a DsaAttention
that shares its weights (q_a/q_b/kv_a/kv_b/o_proj, the norms, the indexer's
wq_b/wk/k_norm/weights_proj: the same modules, under the same names, so the
state dict is unchanged) and computes with torch.ops.dsa:

  - the MLA latent cache (kv_c | roped k_pe, bf16 or fp8 "fp8_ds_mla") and
    the indexer's fp8 K cache live in a DsaCache, paged in the ops' layouts
    (blocks of 64 tokens, one block table per sequence shared by every
    layer);
  - every layer that owns an indexer runs the fused K write
    (indexer_k_write) on every forward;
  - once per forward, dsa_torch.plan decides each layer's indexer action
    from the batch (the skip rule of model/deepseek_v32/indexer_skip.h): a
    pure prefill no longer than index_topk on a CUDA-alike platform with a
    dense-MHA prefill skips the scoring and runs dense_mha_prefill; anything
    else scores (indexer_q, indexer_logits, indexer_topk) and runs
    sparse_mla over the top-k; GLM-5.2's layers without an indexer reuse the
    previous owner's top-k.

generate() is unchanged: it may pass a DsaCache (past_key_values=
DsaCache(model)), or nothing, in which case the empty cache transformers
makes is replaced by a DsaCache for that call. Batches of any size work,
left padding included (padding tokens are not cached and output zeros).
What the conversion cannot serve is refused with UnsupportedModelError
(another architecture, an attention implementation other than eager and
sdpa, no relu in the indexer, a dynamic rope, float16, a model on several
devices, a platform without the seven kernels) or TypeError (a cache it
cannot hold: a non-empty cache of transformers', a compileable cache, a
legacy tuple); beam search and assisted decoding, which rewrite a cache,
raise NotImplementedError.

The conversion itself needs no transformers (tests/test_transformers.py
runs it on stand-in modules with the CPU plugins); the answers against
transformers' own run and the timings are measured on a GPU
(check_convert.py, bench_transformers.py).
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import math
import os
import textwrap
import tokenize
import weakref
from typing import Dict, List, Optional, Sequence, Tuple

import torch

from . import plan as _plan

try:  # transformers' Cache, so that generate() takes a DsaCache as its own
    from transformers.cache_utils import Cache as _CacheBase
except Exception:  # no (usable) transformers: the conversion still works
    _CacheBase = object


class UnsupportedModelError(ValueError):
    """A model or setting the conversion cannot serve; nothing was changed."""


# The architectures convert() serves: class name -> config model_type.
ARCHITECTURES = {
    "GlmMoeDsaForCausalLM": "glm_moe_dsa",
    "DeepseekV32ForCausalLM": "deepseek_v32",
}
# transformers' attention implementations whose masks and module calls the
# converted modules are known to receive (they read neither mask).
ATTENTION_IMPLEMENTATIONS = ("eager", "sdpa")
# Rope types whose cos/sin do not depend on the sequence length, so that one
# table serves every forward.
STATIC_ROPE_TYPES = ("default", "linear", "yarn", "llama3")
LATENT_CACHE_DTYPES = ("bfloat16", "float8_e4m3fn", "float8_e4m3fnuz")
BLOCK_SIZE = 64
FP8_BLOCK = 128  # weight_scale_inv blocks of FP8 checkpoints
# The projections DsaAttention calls as modules, and the indexer's.
ATTENTION_MODULES = ("q_a_proj", "q_a_layernorm", "q_b_proj",
                     "kv_a_proj_with_mqa", "kv_a_layernorm", "kv_b_proj",
                     "o_proj")
INDEXER_MODULES = ("wq_b", "wk", "k_norm", "weights_proj")
# Bytes of indexer logits computed at once (rows are chunked to stay under).
LOGITS_CHUNK_BYTES = 1 << 30
NEOX, INTERLEAVED = "neox", "interleaved"


# ---------------------------------------------------------------------------
# Reading transformers' modules (versions differ: read what the code does).


def code_names(fn) -> Optional[set]:
    """The identifiers of a function's code, comments and strings left out
    (a docstring saying "non-interleaved" is not a call); None without
    source."""
    try:
        src = inspect.getsource(fn)
    except (OSError, TypeError):
        return None
    tokens = tokenize.generate_tokens(
        io.StringIO(textwrap.dedent(src)).readline)
    return {t.string for t in tokens if t.type == tokenize.NAME}


def rope_styles(attn, config) -> Tuple[Optional[bool], Optional[bool]]:
    """(MLA interleaved?, indexer interleaved?) as this transformers computes
    them: the config key a module's forward reads, else whether the forward
    calls an interleaved rope; None where the source cannot be read."""
    def interleaved(fn, key):
        names = code_names(fn)
        if names is None:
            return None
        if key in names and hasattr(config, key):
            return bool(getattr(config, key))
        return any("interleave" in n for n in names)
    mla = interleaved(type(attn).forward, "rope_interleave")
    idx = None
    indexer = getattr(attn, "indexer", None)
    if indexer is not None:
        idx = interleaved(type(indexer).forward, "indexer_rope_interleave")
    return mla, idx


def indexer_has_relu(attn) -> Optional[bool]:
    """Whether transformers' indexer scores relu(q.k) as DeepSeek and the
    kernels do (some versions leave the relu out); None without source."""
    names = code_names(type(getattr(attn, "indexer", None)).forward)
    return None if names is None else "relu" in names


def attention_output_arity(decoder_layer) -> Optional[int]:
    """How many values the decoder layer unpacks from self.self_attn(...)
    (2: output and weights; 3 in versions that pass GLM-5.2's top-k on);
    0 when it keeps the whole result; None without source."""
    try:
        src = textwrap.dedent(inspect.getsource(type(decoder_layer).forward))
        tree = ast.parse(src)
    except (OSError, TypeError, SyntaxError):
        return None
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assign) or not isinstance(node.value,
                                                              ast.Call):
            continue
        fn = node.value.func
        if (isinstance(fn, ast.Attribute) and fn.attr == "self_attn"
                and isinstance(fn.value, ast.Name) and fn.value.id == "self"):
            target = node.targets[0]
            if isinstance(target, (ast.Tuple, ast.List)):
                return len(target.elts)
            return 0
    return None


def _indexer_owners(attns, config) -> List[bool]:
    """Per layer, whether it owns an indexer (GLM-5.2's IndexShare: the
    module's own flag, else the config's list, else its frequency rule)."""
    n = len(attns)
    types = getattr(config, "indexer_types", None)
    freq = getattr(config, "index_topk_freq", None)
    out = []
    for i, attn in enumerate(attns):
        if getattr(attn, "indexer", None) is None:
            out.append(False)
        elif hasattr(attn, "skip_topk"):
            out.append(not bool(attn.skip_topk))
        elif types is not None and len(types) >= n:
            out.append(types[i] != "shared")
        elif freq is not None:
            offset = int(getattr(config, "index_skip_topk_offset", 2) or 0)
            out.append(max(i - offset + 1, 0) % max(int(freq), 1) == 0)
        else:
            out.append(True)
    return out


def _rope_type(config) -> str:
    params = getattr(config, "rope_parameters", None)
    if not isinstance(params, dict):
        params = getattr(config, "rope_scaling", None)
    if isinstance(params, dict):
        return str(params.get("rope_type", params.get("type", "default")))
    return "default"


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    """What the converted modules need of a model, read and checked once."""

    architecture: str
    num_layers: int
    hidden_size: int
    num_heads: int
    q_lora_rank: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    index_n_heads: int
    index_head_dim: int
    index_topk: int
    max_position_embeddings: int
    owners: Tuple[bool, ...]
    mla_rope: str
    indexer_rope: str
    softmax_scale: float
    attention_arity: int
    attn_implementation: str
    dtype: object  # torch.dtype
    device: object  # torch.device

    @property
    def indexer_layers(self) -> Optional[Tuple[int, ...]]:
        if all(self.owners):
            return None
        return tuple(i for i, o in enumerate(self.owners) if o)

    def layout(self) -> _plan.ModelLayout:
        return _plan.ModelLayout(
            name=self.architecture, num_hidden_layers=self.num_layers,
            num_mtp_layers=0, index_topk=self.index_topk,
            max_position_embeddings=self.max_position_embeddings,
            indexer_layers=self.indexer_layers)


def _fail(model_name, message):
    raise UnsupportedModelError(f"dsa_torch.transformers: {model_name}: "
                                f"{message}")


def inspect_model(model, rope_styles_override=None) -> ModelSpec:
    """Reads and checks everything the conversion needs; raises
    UnsupportedModelError naming what it cannot serve."""
    arch = type(model).__name__
    if arch not in ARCHITECTURES:
        _fail(arch, f"not a supported architecture (supported: "
                    f"{', '.join(ARCHITECTURES)})")
    config = getattr(model, "config", None)
    inner = getattr(model, "model", None)
    layers = getattr(inner, "layers", None)
    if config is None or layers is None or not hasattr(inner, "rotary_emb"):
        _fail(arch, "expected model.config, model.model.layers and "
                    "model.model.rotary_emb (transformers' layout)")
    impl = getattr(config, "_attn_implementation", None) or "eager"
    if impl not in ATTENTION_IMPLEMENTATIONS:
        _fail(arch, f"attention implementation {impl!r} is not one the "
                    f"conversion knows ({', '.join(ATTENTION_IMPLEMENTATIONS)}"
                    f"); load the model with attn_implementation=\"sdpa\"")
    num_layers = int(getattr(config, "num_hidden_layers", len(layers)))
    if num_layers < 1 or len(layers) < num_layers:
        _fail(arch, f"config.num_hidden_layers {num_layers} but "
                    f"{len(layers)} decoder layers")
    rope_type = _rope_type(config)
    if rope_type not in STATIC_ROPE_TYPES:
        _fail(arch, f"rope type {rope_type!r} changes with the sequence "
                    f"length; supported: {', '.join(STATIC_ROPE_TYPES)}")
    attns = [layers[i].self_attn for i in range(num_layers)]
    first = attns[0]
    for name in ATTENTION_MODULES:
        if getattr(first, name, None) is None:
            _fail(arch, f"attention has no {name} (q_lora_rank None or a "
                        f"layout this conversion does not know)")
    if getattr(first, "indexer", None) is None:
        _fail(arch, "layer 0 has no indexer")
    for name in INDEXER_MODULES:
        if getattr(first.indexer, name, None) is None:
            _fail(arch, f"the indexer has no {name}")

    def cfg(name):
        value = getattr(config, name, None)
        if value is None:
            _fail(arch, f"config has no {name}")
        return int(value)

    heads = cfg("num_attention_heads")
    nope, rope, v = (cfg("qk_nope_head_dim"), cfg("qk_rope_head_dim"),
                     cfg("v_head_dim"))
    kv_lora, q_lora = cfg("kv_lora_rank"), cfg("q_lora_rank")
    index_heads, index_dim = cfg("index_n_heads"), cfg("index_head_dim")
    kv_heads = getattr(config, "num_key_value_heads", heads) or heads
    if int(kv_heads) != heads:
        _fail(arch, f"num_key_value_heads {kv_heads} != num_attention_heads "
                    f"{heads}: MLA expands every head from the latent")
    if rope % 2 or rope > index_dim:
        _fail(arch, f"qk_rope_head_dim {rope} must be even and at most "
                    f"index_head_dim {index_dim}")

    if rope_styles_override is not None:
        styles = tuple(rope_styles_override)
        if len(styles) != 2 or any(s not in (NEOX, INTERLEAVED)
                                   for s in styles):
            _fail(arch, f"rope_styles must be (mla, indexer) of "
                        f"'{NEOX}'/'{INTERLEAVED}', got {rope_styles_override!r}")
        mla_rope, indexer_rope = styles
    else:
        mla_i, idx_i = rope_styles(first, config)
        if mla_i is None or idx_i is None:
            _fail(arch, "cannot read the rope style from transformers' source;"
                        " pass rope_styles=(mla, indexer)")
        mla_rope = INTERLEAVED if mla_i else NEOX
        indexer_rope = INTERLEAVED if idx_i else NEOX
    relu = indexer_has_relu(first)
    if relu is False:
        _fail(arch, "this transformers' indexer scores without relu(q.k); the "
                    "kernels score relu(q.k) as DeepSeek's reference does, so "
                    "the converted model would compute another model")
    scale = getattr(first, "scaling", None)
    if not isinstance(scale, (int, float)) or not scale > 0:
        _fail(arch, "attention has no softmax scale (self.scaling)")
    want_index_scale = index_dim ** -0.5
    got = getattr(first.indexer, "softmax_scale", want_index_scale)
    if not math.isclose(float(got), want_index_scale, rel_tol=1e-6):
        _fail(arch, f"indexer softmax_scale {got} is not index_head_dim^-0.5")
    arity = attention_output_arity(layers[0])
    if arity is None:
        _fail(arch, "cannot read how the decoder layer calls self_attn")
    weight = first.q_a_proj.weight
    dtype, device = weight.dtype, weight.device
    if dtype not in (torch.bfloat16, torch.float32):
        _fail(arch, f"weights are {dtype}; the kernels take bfloat16 or "
                    f"float32 (load with dtype=torch.bfloat16)")
    for i, attn in enumerate(attns):
        for p in attn.parameters():
            if p.device != device:
                _fail(arch, f"layer {i} has parameters on {p.device} and layer "
                            f"0 on {device}; the conversion serves a model on "
                            f"one device")
    owners = _indexer_owners(attns, config)
    if not owners[0]:
        _fail(arch, "layer 0 shares an indexer; there is no earlier one")
    return ModelSpec(
        architecture=arch, num_layers=num_layers,
        hidden_size=int(getattr(config, "hidden_size")), num_heads=heads,
        q_lora_rank=q_lora, kv_lora_rank=kv_lora, qk_nope_head_dim=nope,
        qk_rope_head_dim=rope, v_head_dim=v, index_n_heads=index_heads,
        index_head_dim=index_dim, index_topk=cfg("index_topk"),
        max_position_embeddings=cfg("max_position_embeddings"),
        owners=tuple(owners), mla_rope=mla_rope, indexer_rope=indexer_rope,
        softmax_scale=float(scale), attention_arity=max(arity, 2),
        attn_implementation=impl, dtype=dtype, device=device)


def _dense_weight(module, what, dtype):
    """A Linear's weight as bf16/f32 ([out, in]); FP8 block-scaled weights
    (weight_scale_inv, 128x128 blocks) dequantised once."""
    w = module.weight
    if w.dtype in (torch.bfloat16, torch.float32):
        return w
    scale = getattr(module, "weight_scale_inv", None)
    if w.dim() != 2 or scale is None or w.element_size() != 1:
        raise UnsupportedModelError(
            f"dsa_torch.transformers: {what} holds {w.dtype} weights that the "
            f"conversion cannot read (bf16, f32 or block-scaled fp8 with "
            f"weight_scale_inv)")
    rows, cols = w.shape
    s = scale.float()
    if s.shape != (-(-rows // FP8_BLOCK), -(-cols // FP8_BLOCK)):
        raise UnsupportedModelError(
            f"dsa_torch.transformers: {what}: weight_scale_inv "
            f"{tuple(s.shape)} is not one scale per {FP8_BLOCK}x{FP8_BLOCK} "
            f"block of {tuple(w.shape)}")
    s = s.repeat_interleave(FP8_BLOCK, 0)[:rows].repeat_interleave(
        FP8_BLOCK, 1)[:, :cols]
    return (w.float() * s).to(dtype)


# ---------------------------------------------------------------------------
# The paged caches.


class _LayerView:
    """What transformers reads of one layer of a cache."""

    is_sliding = False
    is_compileable = False
    keys = None
    values = None

    def __init__(self, cache):
        self._cache = weakref.ref(cache)

    @property
    def is_initialized(self):
        return True

    def get_seq_length(self, *args, **kwargs):
        return self._cache().get_seq_length()

    def get_mask_sizes(self, query, *args, **kwargs):
        return self._cache().get_mask_sizes(query)

    def get_max_cache_shape(self, *args, **kwargs):
        return -1

    def lazy_initialization(self, *args, **kwargs):
        pass

    def update(self, *args, **kwargs):
        self._cache().update()


class DsaCache(_CacheBase):
    """The paged caches of a converted model, as transformers' Cache.

    Per layer: the MLA latent cache ([num_blocks, 64, 576] bf16 or [.., 656]
    uint8 fp8) and, on layers that own an indexer, the indexer's fp8 K cache
    ([num_blocks, 64, index_head_dim + 4] uint8). One block table per
    sequence serves every layer; pools grow (doubling) when a sequence
    needs more blocks. get_seq_length() counts the columns transformers has
    fed (padding included), as its own caches do; padding tokens take no
    slot.

    DsaCache(model, max_batch_size=..., max_tokens=...) reserves room for
    that many tokens per sequence up front.
    """

    is_compileable = False
    layer_class_to_replicate = None
    offloading = False

    def __init__(self, model=None, *, max_batch_size: Optional[int] = None,
                 max_tokens: Optional[int] = None, _runtime=None):
        # Every field lives in self._s: transformers' Cache declares
        # read-only properties (batch_size, max_cache_len, ...) that an
        # attribute of the same name would collide with.
        runtime = _runtime if _runtime is not None else runtime_of(model)
        self._runtime = runtime
        self._s = _PagedState(runtime.block_size,
                              [_LayerView(self)
                               for _ in range(runtime.spec.num_layers)])
        if max_tokens is not None:
            batch = max_batch_size or 1
            _plan._check_int("max_batch_size", batch, 1)
            _plan._check_int("max_tokens", max_tokens, 1)
            self._grow(batch * -(-max_tokens // self.block_size))

    # Read-only views of the state.
    layers = property(lambda self: self._s.layers)
    block_size = property(lambda self: self._s.block_size)
    num_blocks = property(lambda self: self._s.num_blocks)
    latent = property(lambda self: self._s.latent)
    index_k = property(lambda self: self._s.index_k)
    tables = property(lambda self: self._s.tables)
    lengths = property(lambda self: self._s.lengths)
    seen = property(lambda self: self._s.seen)
    num_sequences = property(lambda self: self._s.num_sequences)

    def __repr__(self):
        return (f"DsaCache({self._runtime.spec.num_layers} layers, "
                f"{self._runtime.latent_dtype} latent, {self.num_blocks} "
                f"blocks of {self.block_size}, sequences {self.lengths}, "
                f"{self.seen} columns)")

    # --- transformers' Cache interface -----------------------------------

    def get_seq_length(self, layer_idx: int = 0, *args, **kwargs) -> int:
        return self.seen

    def get_mask_sizes(self, query, layer_idx: int = 0, *args, **kwargs):
        """(kv_length, kv_offset): query is cache_position (a tensor) or the
        query length, depending on the transformers version."""
        q = query.shape[0] if hasattr(query, "shape") else int(query)
        return self.seen + q, 0

    def get_max_cache_shape(self, layer_idx: int = 0, *args, **kwargs):
        return -1

    def get_max_length(self):
        return None

    def get_usable_length(self, new_seq_length=0, layer_idx=0):
        return self.seen

    @property
    def seen_tokens(self):
        return self.seen

    @property
    def is_initialized(self):
        return True

    @property
    def is_sliding(self):
        return [False] * len(self.layers)

    @property
    def max_batch_size(self):
        return self.num_sequences

    @property
    def batch_size(self):
        return self.num_sequences

    @property
    def max_cache_len(self):
        return -1

    def __len__(self):
        return len(self.layers)

    def __getitem__(self, layer_idx):
        raise TypeError("DsaCache holds paged MLA latents and indexer keys, not "
                        "per-layer key/value tensors; it has no legacy form")

    def __iter__(self):
        raise TypeError("DsaCache holds paged MLA latents and indexer keys, not "
                        "per-layer key/value tensors; it has no legacy form")

    def to_legacy_cache(self):
        self.__getitem__(0)

    def update(self, *args, **kwargs):
        raise TypeError("DsaCache.update: only the converted attention modules "
                        "write this cache (an unconverted module called it)")

    def update_indexer(self, *args, **kwargs):
        self.update()

    def reset(self):
        st = self._s
        st.free = list(range(st.num_blocks - 1, -1, -1))
        st.tables, st.lengths = [], []
        st.seen, st.num_sequences = 0, None

    def crop(self, max_length: int):
        if max_length < 0:
            max_length = self.seen + max_length
        if max_length >= self.seen:
            return
        raise NotImplementedError(
            "DsaCache.crop: dropping cached tokens (assisted decoding) is not "
            "supported")

    def reorder_cache(self, beam_idx):
        raise NotImplementedError("DsaCache: beam search is not supported")

    def batch_repeat_interleave(self, repeats: int):
        if self.seen:
            raise NotImplementedError(
                "DsaCache: expanding a filled cache is not supported")

    def batch_select_indices(self, indices):
        if self.seen:
            raise NotImplementedError(
                "DsaCache: selecting sequences of a filled cache is not "
                "supported")

    # --- paging ------------------------------------------------------------

    def _grow(self, need_blocks: int):
        """Makes room for at least need_blocks blocks in every pool."""
        st, rt = self._s, self._runtime
        if need_blocks <= st.num_blocks:
            return
        new = max(need_blocks, 2 * st.num_blocks)
        latent, index_k = [], []
        for layer in range(rt.spec.num_layers):
            t = torch.empty((new, st.block_size, rt.latent_width),
                            dtype=rt.latent_torch_dtype, device=rt.device)
            if st.num_blocks:
                t[:st.num_blocks].copy_(st.latent[layer])
            latent.append(t)
            if rt.spec.owners[layer]:
                k = torch.empty((new, st.block_size,
                                 rt.spec.index_head_dim + 4),
                                dtype=torch.uint8, device=rt.device)
                if st.num_blocks:
                    k[:st.num_blocks].copy_(st.index_k[layer])
                index_k.append(k)
            else:
                index_k.append(None)
        st.latent, st.index_k = latent, index_k
        st.free = list(range(new - 1, st.num_blocks - 1, -1)) + st.free
        st.num_blocks = new

    def _start(self, batch: int):
        st = self._s
        st.num_sequences = batch
        st.tables = [[] for _ in range(batch)]
        st.lengths = [0] * batch

    def _ensure(self, seq: int, tokens: int):
        """Blocks for `tokens` tokens of sequence `seq`."""
        st = self._s
        need = -(-tokens // st.block_size) - len(st.tables[seq])
        if need <= 0:
            return
        if need > len(st.free):
            self._grow(st.num_blocks - len(st.free) + need)
        for _ in range(need):
            st.tables[seq].append(st.free.pop())

    def _commit(self, step):
        st = self._s
        st.seen += step.columns
        for b, n in zip(step.seqs, step.new_tokens):
            st.lengths[b] += n


class _PagedState:
    """A DsaCache's fields: pools, free blocks, block tables, lengths."""

    def __init__(self, block_size, layers):
        self.block_size = block_size
        self.layers = layers
        self.latent: List[object] = []
        self.index_k: List[object] = []
        self.num_blocks = 0
        self.free: List[int] = []
        self.tables: List[List[int]] = []
        self.lengths: List[int] = []
        self.seen = 0
        self.num_sequences: Optional[int] = None


# A Cache base that declares abstract methods would refuse to make a
# DsaCache; every method generate() calls is defined above.
if getattr(DsaCache, "__abstractmethods__", None):
    DsaCache.__abstractmethods__ = frozenset()


# ---------------------------------------------------------------------------
# One forward's metadata, computed once for every layer.


class _Step:
    """The batch of one forward as the ops read it (packed real tokens, in
    sequence order, then column order)."""

    def __init__(self):
        self.topk: Dict[int, object] = {}


def _apply_rope(x, cos, sin, style):
    """Rope on x's last dim (float32 arithmetic, rounded back once); cos/sin
    broadcast to x[..., :dim/2]."""
    xf = x.float()
    if style == INTERLEAVED:
        x1, x2 = xf[..., 0::2], xf[..., 1::2]
        out = torch.stack((x1 * cos - x2 * sin, x2 * cos + x1 * sin),
                          dim=-1).flatten(-2)
    else:
        half = xf.shape[-1] // 2
        x1, x2 = xf[..., :half], xf[..., half:]
        out = torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)
    return out.to(x.dtype)


# ---------------------------------------------------------------------------
# The converted attention module.


class DsaAttention(torch.nn.Module):
    """One layer's MLA + indexer on torch.ops.dsa, sharing the original
    module's weights (the same submodules under the same names, so the state
    dict keys do not change)."""

    def __init__(self, original, layer_idx: int, runtime):
        super().__init__()
        for name in ATTENTION_MODULES:
            setattr(self, name, getattr(original, name))
        if getattr(original, "indexer", None) is not None:
            self.indexer = original.indexer
        self.layer_idx = layer_idx
        self.config = getattr(original, "config", None)
        self.is_causal = True
        self.scaling = runtime.spec.softmax_scale
        self._runtime = runtime
        self.train(original.training)

    @property
    def kv_b_weight(self):
        """kv_b_proj's [heads * (nope + v), kv_lora] weight as the kernels
        read it: the module's own, or its dequantised copy."""
        copy = self._runtime.kv_b_weights[self.layer_idx]
        return self.kv_b_proj.weight if copy is None else copy

    def extra_repr(self):
        rt = self._runtime
        owner = rt.spec.owners[self.layer_idx]
        return (f"layer {self.layer_idx}, "
                f"{'owns an indexer' if owner else 'shares the top-k'}, "
                f"{rt.latent_dtype} latent")

    def forward(self, hidden_states, *args, past_key_values=None, **kwargs):
        if self.training:
            raise RuntimeError("dsa_torch.transformers: the converted "
                               "attention is inference-only; call "
                               "model.eval()")
        rt = self._runtime
        if rt.current is None:
            raise RuntimeError(
                "dsa_torch.transformers: a converted attention module ran "
                "outside its model's forward (call the model, not the layer)")
        cache, step = rt.current
        if past_key_values is not None and past_key_values is not cache:
            raise TypeError(
                f"dsa_torch.transformers: layer {self.layer_idx} got "
                f"{type(past_key_values).__name__}, not the model's DsaCache")
        with torch.no_grad():
            out = rt.attention(self, hidden_states, cache, step)
        return (out,) + (None,) * (rt.spec.attention_arity - 1)


# ---------------------------------------------------------------------------
# The runtime of one converted model.


def _plugin_kernels(platform_id) -> set:
    from . import loaded

    ops = set()
    for line in loaded():
        parts = line.split()
        if len(parts) >= 5 and parts[0] == "kernel" and parts[3] == "on" \
                and parts[4] == platform_id:
            ops.add(parts[1])
    return ops


SEVEN_OPS = ("indexer_k_write", "indexer_q", "indexer_logits", "indexer_topk",
             "mla_cache_write", "sparse_mla", "dense_mha_prefill")


class _Runtime:
    """The state a converted model's modules share (not a Module)."""

    def __init__(self, model, spec: ModelSpec, caps: _plan.PlatformCaps,
                 latent_dtype: str, indexer_fp8: str, skip_indexer: bool):
        self.spec = spec
        self.caps = caps
        self.layout = spec.layout()
        self.planner = _plan.LayerPlanner(self.layout, caps)
        self.latent_dtype = latent_dtype
        self.indexer_fp8 = indexer_fp8
        self.skip_indexer = skip_indexer
        self.block_size = BLOCK_SIZE
        self.device = spec.device
        self.dtype = spec.dtype
        self.ops = torch.ops.dsa
        if latent_dtype == "bfloat16":
            self.latent_torch_dtype = torch.bfloat16
            self.latent_width = spec.kv_lora_rank + spec.qk_rope_head_dim
        else:
            self.latent_torch_dtype = torch.uint8
            self.latent_width = (spec.kv_lora_rank + spec.kv_lora_rank // 32
                                 + 2 * spec.qk_rope_head_dim)
        self.inner = model.model
        self._rotary = model.model.rotary_emb
        self._cos_sin = None
        self.current = None
        self._adopted: Dict[int, Tuple[object, DsaCache]] = {}
        self.originals: List[object] = []
        self.kv_b_weights: List[object] = []
        self.last_plan: Optional[_plan.ForwardPlan] = None
        self.calls = {_plan.SCORE: 0, _plan.SKIP: 0, _plan.SHARED: 0}
        self.record_topk = False
        self.last_topk: Dict[int, object] = {}
        self._previous_forward = None

    # --- rope ----------------------------------------------------------------

    def cos_sin(self, positions_needed: int):
        """[n, rope_dim] float32: cos | sin halves, from the model's own
        rotary embedding (its YaRN frequencies and attention scaling)."""
        limit = self.spec.max_position_embeddings
        if positions_needed > limit:
            raise ValueError(f"dsa_torch.transformers: position "
                             f"{positions_needed - 1} is beyond "
                             f"max_position_embeddings {limit}")
        have = 0 if self._cos_sin is None else self._cos_sin.shape[0]
        if positions_needed <= have:
            return self._cos_sin
        n = min(limit, max(positions_needed, 2 * have, 4096))
        probe = torch.zeros((1, 1, 1), dtype=torch.float32, device=self.device)
        pos = torch.arange(n, device=self.device)[None]
        cos, sin = self._rotary(probe, pos)
        cos, sin = cos[0].float(), sin[0].float()
        half = self.spec.qk_rope_head_dim // 2
        if cos.shape[-1] != 2 * half or not (
                torch.equal(cos[:, :half], cos[:, half:])
                and torch.equal(sin[:, :half], sin[:, half:])):
            raise UnsupportedModelError(
                f"dsa_torch.transformers: the rotary embedding's cos/sin "
                f"{tuple(cos.shape)} are not cat(freqs, freqs) over "
                f"qk_rope_head_dim {2 * half}")
        self._cos_sin = torch.cat([cos[:, :half], sin[:, :half]],
                                  1).contiguous()
        return self._cos_sin

    # --- the model forward ------------------------------------------------

    def resolve_cache(self, pkv):
        if isinstance(pkv, DsaCache):
            if pkv._runtime is not self:
                raise TypeError("dsa_torch.transformers: this DsaCache was "
                                "made for another converted model")
            return pkv
        if pkv is None:
            return DsaCache(_runtime=self)
        if isinstance(pkv, (tuple, list)):
            raise TypeError("dsa_torch.transformers: legacy tuple caches are "
                            "not supported; pass a DsaCache or nothing")
        held = self._adopted.get(id(pkv))
        if held is not None and held[0]() is pkv:
            return held[1]
        name = type(pkv).__name__
        length = pkv.get_seq_length() if hasattr(pkv, "get_seq_length") else -1
        if getattr(pkv, "is_compileable", False) or length != 0:
            what = ("a compileable (static) cache" if length == 0 else
                    f"{length} tokens in {name}")
            raise TypeError(
                f"dsa_torch.transformers: the converted model keeps its keys "
                f"in a DsaCache (paged MLA latents and indexer keys) and "
                f"cannot hold {what}; pass past_key_values="
                f"dsa_torch.transformers.DsaCache(model), or nothing")
        # An empty cache that generate() made: this call's DsaCache stands
        # for it for as long as it lives.
        cache = DsaCache(_runtime=self)
        key = id(pkv)
        try:
            ref = weakref.ref(pkv, lambda _r, k=key: self._adopted.pop(k, None))
        except TypeError:
            raise TypeError(f"dsa_torch.transformers: cannot stand in for "
                            f"{name}; pass a DsaCache") from None
        self._adopted[key] = (ref, cache)
        return cache

    def forward(self, original, signature, args, kwargs):
        bound = signature.bind(*args, **kwargs)
        call = {}
        for name, value in bound.arguments.items():
            kind = signature.parameters[name].kind
            if kind == inspect.Parameter.VAR_KEYWORD:
                call.update(value)
            elif kind == inspect.Parameter.VAR_POSITIONAL:
                if value:
                    raise TypeError("dsa_torch.transformers: positional "
                                    "arguments the model does not name")
            else:
                call[name] = value
        ids, embeds = call.get("input_ids"), call.get("inputs_embeds")
        x = embeds if embeds is not None else ids
        if x is None:
            raise ValueError("dsa_torch.transformers: give input_ids or "
                             "inputs_embeds")
        batch, seq = int(x.shape[0]), int(x.shape[1])
        cache = self.resolve_cache(call.get("past_key_values"))
        call["past_key_values"] = cache
        step = self.begin(cache, batch, seq, call.get("attention_mask"),
                          call.get("position_ids"), call.get("cache_position"))
        self.current = (cache, step)
        try:
            out = original(**call)
        finally:
            self.current = None
        cache._commit(step)
        if self.record_topk:
            self.last_topk = dict(step.topk)
        return out

    def begin(self, cache: DsaCache, batch, seq, mask, position_ids,
              cache_position) -> _Step:
        """The forward's metadata: requests, paging, the plan."""
        if cache.num_sequences is None:
            cache._start(batch)
        elif cache.num_sequences != batch:
            raise ValueError(f"dsa_torch.transformers: the cache holds "
                             f"{cache.num_sequences} sequences, the input "
                             f"{batch}")
        if cache_position is not None and cache_position.numel():
            first = int(cache_position.reshape(-1)[0])
            if first != cache.seen:
                raise ValueError(f"dsa_torch.transformers: cache_position "
                                 f"starts at {first}, the cache holds "
                                 f"{cache.seen} columns")
        real = None
        if mask is not None:
            if mask.dim() != 2 or mask.shape[0] != batch:
                raise UnsupportedModelError(
                    f"dsa_torch.transformers: attention_mask "
                    f"{tuple(mask.shape)}: only a [batch, columns] padding "
                    f"mask is supported")
            if mask.shape[1] != cache.seen + seq:
                raise ValueError(
                    f"dsa_torch.transformers: attention_mask covers "
                    f"{mask.shape[1]} columns; the cache holds {cache.seen} "
                    f"and the input has {seq}")
            real = mask[:, cache.seen:].to("cpu") != 0
            if bool(real.all()):
                real = None
        step = _Step()
        step.columns = seq
        step.batch, step.seq = batch, seq
        counts = [seq] * batch if real is None else real.sum(1).tolist()
        requests, seqs, new = [], [], []
        for b in range(batch):
            if counts[b]:
                requests.append((cache.lengths[b], counts[b]))
                seqs.append(b)
                new.append(counts[b])
        step.seqs, step.new_tokens = seqs, new
        step.num_tokens = sum(new)
        if not requests:
            step.plan = None
            return step
        fplan = self.planner.plan_forward(requests)
        step.plan = fplan
        self.last_plan = fplan
        bs = cache.block_size
        for b, (ctx, n) in zip(seqs, requests):
            cache._ensure(b, ctx + n)
        # Host metadata.
        cols, cache_pos, req_of_token = [], [], []
        for r, (b, (ctx, n)) in enumerate(zip(seqs, requests)):
            c = (torch.arange(seq, dtype=torch.int64) if real is None
                 else torch.nonzero(real[b]).reshape(-1))
            cols.append(c + b * seq)
            cache_pos.append(torch.arange(ctx, ctx + n, dtype=torch.int64))
            req_of_token.append(torch.full((n,), r, dtype=torch.int32))
        flat_cols = torch.cat(cols)
        pos = torch.cat(cache_pos)
        token_request = torch.cat(req_of_token)
        max_blocks = max(len(cache.tables[b]) for b in seqs)
        table = torch.zeros((len(seqs), max_blocks), dtype=torch.int64)
        for r, b in enumerate(seqs):
            table[r, :len(cache.tables[b])] = torch.tensor(cache.tables[b])
        slots = table[token_request.long(), pos // bs] * bs + pos % bs
        seq_lens = torch.tensor([c + n for c, n in requests],
                                dtype=torch.int32)
        qsl = torch.zeros(len(requests) + 1, dtype=torch.int32)
        qsl[1:] = torch.cumsum(torch.tensor(new, dtype=torch.int32), 0)
        step.width = int(seq_lens.max())
        padded = real is not None or len(seqs) != batch
        # The prefill branch and which tokens run which attention op.
        branch = fplan.layers[0].prefill_branch
        prefill = [r for r, n in enumerate(new) if n > 1]
        dense_req = prefill if branch == _plan.BRANCH_DENSE_MHA else []
        dense_all = len(dense_req) == len(requests)
        sparse_tokens = None
        if dense_req and not dense_all:
            keep = torch.zeros(len(requests), dtype=torch.bool)
            keep[dense_req] = True
            dense_rows = torch.nonzero(keep[token_request.long()]).reshape(-1)
            sparse_tokens = torch.nonzero(~keep[token_request.long()]).reshape(
                -1)
            d_lens = seq_lens[keep]
            d_qsl = torch.zeros(len(dense_req) + 1, dtype=torch.int32)
            d_qsl[1:] = torch.cumsum(
                torch.tensor([new[r] for r in dense_req], dtype=torch.int32), 0)
            d_table = table[keep]
        # One upload per dtype; device views of it.
        i32 = [table.to(torch.int32).reshape(-1), seq_lens, qsl, token_request,
               (pos + 1).to(torch.int32)]
        i64 = [slots, flat_cols]
        if position_ids is None:
            i64.append(cache.seen + flat_cols % seq)
        if dense_req and not dense_all:
            i32 += [d_table.to(torch.int32).reshape(-1), d_lens, d_qsl]
            i64 += [dense_rows, sparse_tokens]
        dev = self.device
        up32 = torch.cat(i32).to(dev)
        up64 = torch.cat(i64).to(dev)
        o32, o64 = _Offsets(up32), _Offsets(up64)
        step.block_table = o32.take(table.numel()).view(table.shape)
        step.seq_lens = o32.take(len(requests))
        step.query_start_loc = o32.take(len(requests) + 1)
        step.token_request = o32.take(step.num_tokens)
        step.row_key_end = o32.take(step.num_tokens)
        step.row_key_start = torch.zeros(step.num_tokens, dtype=torch.int32,
                                         device=dev)
        step.slots = o64.take(step.num_tokens)
        token_index = o64.take(step.num_tokens)
        step.token_index = token_index if padded else None
        if position_ids is None:
            step.positions = o64.take(step.num_tokens)
            top = cache.seen + seq
        else:
            p = position_ids.to(dev, torch.int64)
            p = p.expand(batch, seq).reshape(-1)
            step.positions = (p.index_select(0, token_index)
                              if padded else p.contiguous())
            top = int(step.positions.max()) + 1
            if int(step.positions.min()) < 0:
                raise ValueError("dsa_torch.transformers: negative "
                                 "position_ids")
        table_cs = self.cos_sin(top)
        step.cos_sin = table_cs
        cs = table_cs.index_select(0, step.positions)
        half = self.spec.qk_rope_head_dim // 2
        step.cos, step.sin = cs[:, :half], cs[:, half:]
        step.dense = None
        step.sparse_rows = None  # None: every token; else a row index
        if dense_req:
            if dense_all:
                step.dense = (None, step.block_table, step.seq_lens,
                              step.query_start_loc, seq_lens, qsl)
                step.sparse_rows = torch.zeros(0, dtype=torch.int64,
                                               device=dev)
            else:
                d_t = o32.take(d_table.numel()).view(d_table.shape)
                d_l = o32.take(len(dense_req))
                d_q = o32.take(len(dense_req) + 1)
                rows = o64.take(dense_rows.numel())
                step.sparse_rows = o64.take(sparse_tokens.numel())
                step.dense = (rows, d_t, d_l, d_q, d_lens.contiguous(),
                              d_qsl)
        return step

    # --- one layer ----------------------------------------------------------

    def action(self, step, layer: int) -> Tuple[str, int]:
        lp = step.plan.layers[layer]
        action = lp.action
        if action == _plan.SKIP and not self.skip_indexer:
            action = _plan.SCORE
        return action, lp.topk_source_layer

    def attention(self, module, hidden_states, cache: DsaCache, step: _Step):
        spec, ops, layer = self.spec, self.ops, module.layer_idx
        batch, seq, hidden = hidden_states.shape
        if step.plan is None:  # nothing but padding
            return torch.zeros_like(hidden_states)
        x = hidden_states.reshape(batch * seq, hidden)
        if step.token_index is not None:
            x = x.index_select(0, step.token_index)
        n = x.shape[0]
        heads, nope, rope = (spec.num_heads, spec.qk_nope_head_dim,
                             spec.qk_rope_head_dim)
        kv_lora, v_dim = spec.kv_lora_rank, spec.v_head_dim
        cos, sin = step.cos, step.sin

        q_resid = module.q_a_layernorm(module.q_a_proj(x))
        q = module.q_b_proj(q_resid).view(n, heads, nope + rope)
        q_nope = q[..., :nope]
        q_pe = _apply_rope(q[..., nope:], cos[:, None], sin[:, None],
                           spec.mla_rope)
        kv = module.kv_a_proj_with_mqa(x)
        kv_c = module.kv_a_layernorm(kv[:, :kv_lora]).contiguous()
        k_pe = _apply_rope(kv[:, kv_lora:], cos, sin, spec.mla_rope)
        ops.mla_cache_write(kv_c, k_pe.contiguous(), step.slots,
                            cache.latent[layer], self.latent_dtype, kv_lora,
                            rope)

        action, source = self.action(step, layer)
        self.calls[action] = self.calls.get(action, 0) + 1
        if spec.owners[layer]:
            topk = self.indexer(module.indexer, x, q_resid, cache, step, layer,
                                action == _plan.SCORE)
            step.topk[layer] = topk
        else:
            topk = step.topk.get(source)

        out = torch.empty((n, heads, v_dim), dtype=x.dtype, device=x.device)
        kv_b = module.kv_b_weight
        if step.dense is not None:
            rows, table, lens, qsl, lens_host, qsl_host = step.dense
            qd = torch.cat([q_nope, q_pe], -1)
            if rows is not None:
                qd = qd.index_select(0, rows)
            od = ops.dense_mha_prefill(
                qd.contiguous(), cache.latent[layer], self.latent_dtype,
                kv_lora, rope, table, lens, qsl, kv_b, spec.softmax_scale,
                seq_lens_host=lens_host, query_start_loc_host=qsl_host)
            if rows is None:
                out = od
            else:
                out.index_copy_(0, rows, od)
        rows = step.sparse_rows
        if rows is None or rows.numel():
            if topk is None:
                raise RuntimeError(f"dsa_torch.transformers: layer {layer} "
                                   f"needs the top-k of layer {source}, which "
                                   f"did not score")
            qn, qp, tr, tk = q_nope, q_pe, step.token_request, topk
            if rows is not None:
                qn, qp = qn.index_select(0, rows), qp.index_select(0, rows)
                tr, tk = tr.index_select(0, rows), tk.index_select(0, rows)
            w_uk = kv_b.view(heads, nope + v_dim, kv_lora)[:, :nope, :]
            q_abs = torch.bmm(qn.transpose(0, 1), w_uk).transpose(0, 1)
            q_abs = torch.cat([q_abs, qp], -1).contiguous()
            os_ = ops.sparse_mla(q_abs, cache.latent[layer], self.latent_dtype,
                                 kv_lora, rope, step.block_table,
                                 step.seq_lens, tr.contiguous(),
                                 tk.contiguous(), kv_b, nope,
                                 spec.softmax_scale)
            if rows is None:
                out = os_
            else:
                out.index_copy_(0, rows, os_)
        o = module.o_proj(out.reshape(n, heads * v_dim))
        if step.token_index is None:
            return o.view(batch, seq, hidden)
        full = torch.zeros((batch * seq, hidden), dtype=o.dtype,
                           device=o.device)
        full.index_copy_(0, step.token_index, o)
        return full.view(batch, seq, hidden)

    def indexer(self, indexer, x, q_resid, cache, step, layer, score):
        """The fused K write, then (when scoring) q, logits and top-k."""
        spec, ops = self.spec, self.ops
        ln = indexer.k_norm
        bias = ln.bias if ln.bias is not None else torch.zeros_like(ln.weight)
        k = indexer.wk(x)
        cleared = ops.indexer_k_write(
            k.contiguous(), ln.weight, bias, float(ln.eps), step.positions,
            step.cos_sin, spec.indexer_rope, step.slots, cache.index_k[layer],
            self.indexer_fp8, spec.index_topk)
        if not score:
            return cleared
        n = x.shape[0]
        q = indexer.wq_b(q_resid).view(n, spec.index_n_heads,
                                       spec.index_head_dim)
        wp = indexer.weights_proj
        w = wp(x.to(wp.weight.dtype))
        q_fp8, head_weights = ops.indexer_q(q.contiguous(), w.contiguous(),
                                            step.positions, step.cos_sin,
                                            spec.indexer_rope,
                                            self.indexer_fp8)
        chunk = max(1, LOGITS_CHUNK_BYTES // (4 * step.width))
        parts = []
        for r0 in range(0, n, chunk):
            r1 = min(n, r0 + chunk)
            start = step.row_key_start[r0:r1]
            end = step.row_key_end[r0:r1]
            logits = ops.indexer_logits(
                q_fp8[r0:r1], head_weights[r0:r1], cache.index_k[layer],
                step.block_table, step.seq_lens, step.token_request[r0:r1],
                start, end, step.width, self.indexer_fp8)
            parts.append(ops.indexer_topk(logits, start, end, spec.index_topk))
        return parts[0] if len(parts) == 1 else torch.cat(parts)


class _Offsets:
    """Consecutive slices of one uploaded buffer."""

    def __init__(self, buffer):
        self.buffer, self.at = buffer, 0

    def take(self, n: int):
        out = self.buffer[self.at:self.at + n]
        self.at += n
        return out


# ---------------------------------------------------------------------------
# The public calls.


def runtime_of(model) -> _Runtime:
    rt = getattr(model, "_dsa_runtime", None)
    if rt is None:
        raise ValueError("dsa_torch.transformers: this model is not converted; "
                         "call dsa_torch.transformers.convert(model) first")
    return rt


def is_converted(model) -> bool:
    return getattr(model, "_dsa_runtime", None) is not None


def _arch_of(device) -> str:
    if device.type == "cuda" and not getattr(torch.version, "hip", None):
        major, minor = torch.cuda.get_device_capability(device)
        return f"sm_{major}{minor}"
    return ""


def convert(model, *, latent_cache_dtype: str = "bfloat16",
            skip_indexer: bool = True, plugins: Sequence[str] = (),
            platform_caps: Optional[_plan.PlatformCaps] = None,
            rope_styles: Optional[Tuple[str, str]] = None):
    """Swaps every attention module of a loaded GlmMoeDsaForCausalLM or
    DeepseekV32ForCausalLM for a DsaAttention sharing its weights; returns
    the model (changed in place; restore() undoes it).

    latent_cache_dtype: "bfloat16", or the platform's fp8 ("float8_e4m3fn"
    on CUDA) for vLLM's fp8_ds_mla latent cache.
    skip_indexer: False scores on every forward (the behaviour before the
    optimisation; the outputs are the same to the bit).
    plugins: plugin shared objects to load first (dsa_torch.load); by
    default those of $DSA_TORCH_PLUGINS when the binding is not loaded yet.
    platform_caps: the capabilities the skip decision reads (default: what
    the device's platform plugin reports).
    rope_styles: ("neox"|"interleaved", same) for the MLA and the indexer,
    overriding what is read from transformers' source.
    """
    from . import load

    if is_converted(model):
        raise ValueError("dsa_torch.transformers: the model is already "
                         "converted")
    spec = inspect_model(model, rope_styles)
    env = os.environ.get("DSA_TORCH_PLUGINS", "")
    if plugins:
        load(plugins=plugins)
    elif not _loaded_library():
        load(plugins=[p for p in env.split(os.pathsep) if p])
    platform_id = torch.ops.dsa.device_platform(spec.device.type)
    if not platform_id:
        raise UnsupportedModelError(
            f"dsa_torch.transformers: no platform serves {spec.device.type} "
            f"tensors; load the plugins first (dsa_torch.load(plugins=...), "
            f"convert(plugins=...) or $DSA_TORCH_PLUGINS)")
    missing = [op for op in SEVEN_OPS if op not in _plugin_kernels(platform_id)]
    if missing:
        raise UnsupportedModelError(
            f"dsa_torch.transformers: the {platform_id} platform has no "
            f"kernel for {', '.join(missing)}; load a plugin that has them")
    fp8 = None
    if platform_caps is None:
        try:
            platform_caps = _plan.PlatformCaps.from_plugin(
                platform_id, _arch_of(spec.device))
        except ValueError:
            platform_caps = _plan.PlatformCaps.from_plugin(platform_id)
    try:
        fp8 = torch.ops.dsa.platform_capabilities(platform_id,
                                                  platform_caps.arch)[5]
    except Exception:
        fp8 = "float8_e4m3fnuz" if getattr(torch.version, "hip",
                                           None) else "float8_e4m3fn"
    if latent_cache_dtype not in LATENT_CACHE_DTYPES:
        raise ValueError(f"dsa_torch.transformers: latent_cache_dtype must be "
                         f"one of {LATENT_CACHE_DTYPES}, got "
                         f"{latent_cache_dtype!r}")
    if latent_cache_dtype != "bfloat16" and spec.kv_lora_rank % FP8_BLOCK:
        raise UnsupportedModelError(
            f"dsa_torch.transformers: an fp8 latent cache needs kv_lora_rank "
            f"a multiple of {FP8_BLOCK}, not {spec.kv_lora_rank}")
    runtime = _Runtime(model, spec, platform_caps, latent_cache_dtype, fp8,
                       skip_indexer)
    layers = model.model.layers
    modules = []
    for i in range(spec.num_layers):
        attn = layers[i].self_attn
        runtime.originals.append(attn)
        runtime.kv_b_weights.append(
            _dense_weight(attn.kv_b_proj, f"layer {i} kv_b_proj", spec.dtype))
        modules.append(DsaAttention(attn, i, runtime))
    # Everything checked: swap.
    for i, m in enumerate(modules):
        layers[i].self_attn = m
    inner = model.model
    runtime._previous_forward = inner.__dict__.get("forward")
    original = inner.forward
    signature = inspect.signature(original)

    def forward(*args, **kwargs):
        return runtime.forward(original, signature, args, kwargs)

    inner.forward = forward
    model._dsa_runtime = runtime
    return model


def _loaded_library() -> bool:
    from . import _library_path

    return _library_path is not None


def restore(model):
    """Puts the original attention modules back; returns the model."""
    rt = runtime_of(model)
    layers = model.model.layers
    for i, attn in enumerate(rt.originals):
        layers[i].self_attn = attn
    inner = model.model
    if rt._previous_forward is None:
        inner.__dict__.pop("forward", None)
    else:
        inner.forward = rt._previous_forward
    del model._dsa_runtime
    return model


def indexer_calls(model) -> Dict[str, int]:
    """How many layer calls scored, skipped and shared since conversion."""
    return dict(runtime_of(model).calls)


def set_skip_indexer(model, on: bool):
    """Turns the skip on (the registered decision) or off (always score)."""
    runtime_of(model).skip_indexer = bool(on)


__all__ = ("convert", "restore", "DsaCache", "UnsupportedModelError",
           "inspect_model", "ModelSpec", "is_converted", "indexer_calls",
           "set_skip_indexer", "rope_styles", "indexer_has_relu",
           "attention_output_arity", "code_names", "ARCHITECTURES")
