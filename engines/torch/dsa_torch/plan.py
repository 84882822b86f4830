"""The short-prefill indexer-skip decision of one forward, for Python engines.

The same rule as the C++ planner (model/deepseek_v32/indexer_skip.h,
batch_metadata.h, layer_plan.h), written again in Python so that an engine
such as vLLM can decide per forward which layers skip the indexer's scoring
without Abseil or protobuf in its process. tests/test_plan.py checks it
against the C++ unit test's scenarios and against golden output of the plan
tool (`bazel run //model/deepseek_v32:plan -- --format=json ...`).

The rule, per indexer layer:
  static (once per layer): it owns an indexer, the platform is CUDA-alike,
    it is not an MTP layer, prefill context parallelism is off, and the
    platform's sparse MLA backend has a dense-MHA prefill;
  dynamic (every forward): there is attention metadata (a profile run only
    reserves the workspace), the cudagraph runtime mode is not "full", no
    graph is being captured, the MLA (decode threshold 1, not the indexer's
    1 + speculative tokens) sees no decode tokens, there is a prefill, and
    prefill_max_seq_len <= index_topk without force-MQA.
A skipping layer still writes its indexer keys; a layer without an indexer
(GLM-5.2) reuses the previous owner's top-k and is "shared".
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

# Bounds of the C++ side (forward_context.h, batch_metadata.h).
MAX_SPECULATIVE_TOKENS = 64
MAX_CONTEXT_PARALLEL = 1024
MAX_REQUESTS = 1 << 20

CUDAGRAPH_MODES = ("none", "piecewise", "full")

# Indexer actions.
SCORE = "score"
SKIP = "skip"
SHARED = "shared"
WORKSPACE_ONLY = "workspace_only"

# Reasons: the first condition that decides, in the order of the rule.
SHORT_DENSE_PREFILL = "short_dense_prefill"
SHARES_TOPK = "shares_topk"
NO_ATTENTION_METADATA = "no_attention_metadata"
NOT_CUDA_ALIKE = "not_cuda_alike"
MTP_LAYER = "mtp_layer"
PREFILL_CONTEXT_PARALLEL = "prefill_context_parallel"
NO_DENSE_MHA_PREFILL = "no_dense_mha_prefill"
FULL_CUDAGRAPH = "full_cudagraph"
CAPTURING = "capturing"
DECODE_TOKENS = "decode_tokens"
NO_PREFILL = "no_prefill"
FORCE_MQA = "force_mqa"
PREFILL_LONGER_THAN_TOPK = "prefill_longer_than_topk"

# Prefill branches.
BRANCH_NONE = "none"
BRANCH_DENSE_MHA = "dense_mha"
BRANCH_SPARSE_MQA = "sparse_mqa"


def _check_int(name: str, value, low: int, high: Optional[int] = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    if value < low or (high is not None and value > high):
        bound = f"[{low}, {high}]" if high is not None else f">= {low}"
        raise ValueError(f"{name} must be in {bound}, got {value}")
    return value


# ---------------------------------------------------------------------------
# The decision itself (indexer_skip.h).


@dataclasses.dataclass(frozen=True)
class StaticDecision:
    owns_indexer: bool
    skip_eligible: bool
    reason: str


@dataclasses.dataclass(frozen=True)
class Decision:
    action: str
    reason: str


def decide_indexer_static(*, owns_indexer: bool = True,
                          is_cuda_alike: bool = False,
                          is_mtp_layer: bool = False,
                          prefill_context_parallel: bool = False,
                          dense_mha_prefill_supported: bool = False
                          ) -> StaticDecision:
    """The half of the decision fixed when a layer is constructed."""
    if not owns_indexer:
        return StaticDecision(False, False, SHARES_TOPK)
    if not is_cuda_alike:
        return StaticDecision(True, False, NOT_CUDA_ALIKE)
    if is_mtp_layer:
        return StaticDecision(True, False, MTP_LAYER)
    if prefill_context_parallel:
        return StaticDecision(True, False, PREFILL_CONTEXT_PARALLEL)
    if not dense_mha_prefill_supported:
        return StaticDecision(True, False, NO_DENSE_MHA_PREFILL)
    return StaticDecision(True, True, SHORT_DENSE_PREFILL)


def decide_indexer(layer: StaticDecision, *,
                   has_attention_metadata: bool = True,
                   cudagraph_mode: str = "none",
                   capturing: bool = False,
                   mla_num_decode_tokens: int = 0,
                   mla_num_prefills: int = 0,
                   mla_use_dense_mha: bool = False,
                   force_mqa: bool = False) -> Decision:
    """The half of the decision taken every forward."""
    if cudagraph_mode not in CUDAGRAPH_MODES:
        raise ValueError(f"cudagraph_mode must be one of {CUDAGRAPH_MODES}, "
                         f"got {cudagraph_mode!r}")
    if not layer.owns_indexer:
        return Decision(SHARED, SHARES_TOPK)
    if not has_attention_metadata:
        return Decision(WORKSPACE_ONLY, NO_ATTENTION_METADATA)
    if not layer.skip_eligible:
        return Decision(SCORE, layer.reason)
    if cudagraph_mode == "full":
        return Decision(SCORE, FULL_CUDAGRAPH)
    if capturing:
        return Decision(SCORE, CAPTURING)
    if mla_num_decode_tokens != 0:
        return Decision(SCORE, DECODE_TOKENS)
    if mla_num_prefills < 1:
        return Decision(SCORE, NO_PREFILL)
    if not mla_use_dense_mha:
        return Decision(SCORE,
                        FORCE_MQA if force_mqa else PREFILL_LONGER_THAN_TOPK)
    return Decision(SKIP, SHORT_DENSE_PREFILL)


# ---------------------------------------------------------------------------
# The model's layers, the platform and the engine.


@dataclasses.dataclass(frozen=True)
class ModelLayout:
    """What the decision needs of a model: its layers and index_topk.

    indexer_layers lists the main layers that own an indexer (GLM-5.2); None
    means every main layer (DeepSeek-V3.2, GLM-5.1). MTP layers, numbered
    after the main layers, always own one.
    """

    name: str
    num_hidden_layers: int
    num_mtp_layers: int
    index_topk: int
    max_position_embeddings: int
    indexer_layers: Optional[Tuple[int, ...]] = None

    def __post_init__(self):
        _check_int("num_hidden_layers", self.num_hidden_layers, 1)
        _check_int("num_mtp_layers", self.num_mtp_layers, 0)
        _check_int("index_topk", self.index_topk, 1)
        _check_int("max_position_embeddings", self.max_position_embeddings, 1)
        if self.indexer_layers is not None:
            layers = tuple(self.indexer_layers)
            object.__setattr__(self, "indexer_layers", layers)
            if not layers:
                raise ValueError("indexer_layers must not be empty")
            if layers[0] != 0:
                raise ValueError(
                    f"indexer_layers[0] must be 0 (the first layer has no "
                    f"earlier indexer to share), got {layers[0]}")
            for i, layer in enumerate(layers):
                _check_int(f"indexer_layers[{i}]", layer, 0,
                           self.num_hidden_layers - 1)
                if i > 0 and layer <= layers[i - 1]:
                    raise ValueError(
                        f"indexer_layers[{i}] = {layer} is not greater than "
                        f"the previous entry {layers[i - 1]}")

    @property
    def num_layers(self) -> int:
        return self.num_hidden_layers + self.num_mtp_layers

    def is_mtp_layer(self, layer: int) -> bool:
        return layer >= self.num_hidden_layers

    def topk_source_layer(self, layer: int) -> int:
        """The layer whose top-k `layer` reads (itself if it owns one)."""
        _check_int("layer", layer, 0, self.num_layers - 1)
        if self.indexer_layers is None or self.is_mtp_layer(layer):
            return layer
        source = 0
        for owner in self.indexer_layers:
            if owner > layer:
                break
            source = owner
        return source

    def owns_indexer(self, layer: int) -> bool:
        return self.topk_source_layer(layer) == layer

    @classmethod
    def from_textproto(cls, path: str) -> "ModelLayout":
        """Reads the fields the decision needs from a preset's textproto
        (model/deepseek_v32/presets/*.textproto)."""
        with open(path, encoding="utf-8") as f:
            text = re.sub(r"#[^\n]*", "", f.read())

        def scalar(field: str, default=None):
            m = re.search(r"\b%s\s*:\s*(\"[^\"]*\"|[-\w.]+)" % field, text)
            if m is None:
                if default is None:
                    raise ValueError(f"{path}: no field {field}")
                return default
            return m.group(1).strip('"')

        indexer_layers = None
        m = re.search(r"\blayers\s*:\s*\[([^\]]*)\]", text)
        if m is not None:
            indexer_layers = tuple(
                int(x) for x in m.group(1).replace("\n", " ").split(",")
                if x.strip())
        elif scalar("all_layers", "true") != "true":
            raise ValueError(f"{path}: indexer.all_layers is false and no "
                             f"layer_list is given")
        return cls(name=scalar("name"),
                   num_hidden_layers=int(scalar("num_hidden_layers")),
                   num_mtp_layers=int(scalar("num_nextn_predict_layers", 0)),
                   index_topk=int(scalar("index_topk")),
                   max_position_embeddings=int(
                       scalar("max_position_embeddings")),
                   indexer_layers=indexer_layers)


def presets_dir() -> str:
    """The source tree's preset directory (the package lives in it)."""
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.normpath(
        os.path.join(here, "..", "..", "..", "model", "deepseek_v32",
                     "presets"))


def preset(name: str) -> ModelLayout:
    """A preset of the source tree by name: "deepseek-v3.2", "glm-5.1", ..."""
    if not re.fullmatch(r"[a-z0-9._-]+", name or ""):
        raise ValueError(f"preset name {name!r} must be made of [a-z0-9._-]")
    path = os.path.join(presets_dir(), name + ".textproto")
    if not os.path.isfile(path):
        known = sorted(f[:-len(".textproto")]
                       for f in os.listdir(presets_dir())
                       if f.endswith(".textproto"))
        raise ValueError(f"unknown preset {name!r}; known: {', '.join(known)}")
    return ModelLayout.from_textproto(path)


@dataclasses.dataclass(frozen=True)
class PlatformCaps:
    """The capabilities the decision reads (DsaCapabilities)."""

    platform_id: str
    arch: str
    is_cuda_alike: bool
    dense_mha_prefill: bool
    decode_context_parallel: bool

    @classmethod
    def from_plugin(cls, platform_id: str, arch: str = "") -> "PlatformCaps":
        """What a loaded platform plugin reports for `arch` (its default
        architecture when empty); needs dsa_torch.load(...) first."""
        import torch  # only here: the decision itself needs no torch

        (got_arch, cuda_alike, dense, dcp, _warp, _fp8) = (
            torch.ops.dsa.platform_capabilities(platform_id, arch))
        return cls(platform_id, got_arch, bool(cuda_alike), bool(dense),
                   bool(dcp))


@dataclasses.dataclass(frozen=True)
class EngineConfig:
    num_speculative_tokens: int = 0
    prefill_context_parallel: bool = False
    decode_context_parallel_size: int = 1
    force_mqa: bool = False

    def __post_init__(self):
        _check_int("num_speculative_tokens", self.num_speculative_tokens, 0,
                   MAX_SPECULATIVE_TOKENS)
        _check_int("decode_context_parallel_size",
                   self.decode_context_parallel_size, 1, MAX_CONTEXT_PARALLEL)


@dataclasses.dataclass(frozen=True)
class ForwardContext:
    cudagraph_mode: str = "none"
    capturing: bool = False

    def __post_init__(self):
        if self.cudagraph_mode not in CUDAGRAPH_MODES:
            raise ValueError(f"cudagraph_mode must be one of "
                             f"{CUDAGRAPH_MODES}, got {self.cudagraph_mode!r}")
        if self.capturing and self.cudagraph_mode == "none":
            raise ValueError("capturing a cudagraph needs cudagraph_mode "
                             "piecewise or full, not none")


# ---------------------------------------------------------------------------
# The batch (batch_metadata.h).


@dataclasses.dataclass(frozen=True)
class AttentionMetadata:
    decode_threshold: int
    num_decodes: int
    num_prefills: int
    num_decode_tokens: int
    num_prefill_tokens: int
    prefill_max_seq_len: int
    use_dense_mha: bool


@dataclasses.dataclass(frozen=True)
class BatchMetadata:
    num_requests: int
    num_tokens: int
    mla: AttentionMetadata  # decode threshold 1
    indexer: AttentionMetadata  # decode threshold 1 + speculative tokens


def _classify(requests, index_topk, force_mqa, threshold) -> AttentionMetadata:
    decodes = prefills = decode_tokens = prefill_tokens = max_len = 0
    for context, new in requests:
        if new <= threshold:
            decodes += 1
            decode_tokens += new
        else:
            prefills += 1
            prefill_tokens += new
            max_len = max(max_len, context + new)
    return AttentionMetadata(threshold, decodes, prefills, decode_tokens,
                             prefill_tokens, max_len,
                             max_len <= index_topk and not force_mqa)


def build_batch_metadata(model: ModelLayout, engine: EngineConfig,
                         requests: Sequence[Tuple[int, int]]) -> BatchMetadata:
    """Classifies requests given as (context tokens, new tokens) pairs."""
    requests = list(requests)
    if not requests:
        raise ValueError("a batch needs at least one request")
    if len(requests) > MAX_REQUESTS:
        raise ValueError(f"a batch of {len(requests)} requests is over the "
                         f"limit of {MAX_REQUESTS}")
    limit = model.max_position_embeddings
    checked = []
    for i, request in enumerate(requests):
        try:
            context, new = request
        except (TypeError, ValueError):
            raise ValueError(f"request {i}: expected a (context, new) pair, "
                             f"got {request!r}") from None
        _check_int(f"request {i} context", context, 0)
        _check_int(f"request {i} new tokens", new, 1)
        if new > limit or context > limit - new:
            raise ValueError(f"request {i}: {context}+{new} tokens exceed "
                             f"{model.name}'s max_position_embeddings {limit}")
        checked.append((context, new))
    return BatchMetadata(
        len(checked), sum(n for _, n in checked),
        _classify(checked, model.index_topk, engine.force_mqa, 1),
        _classify(checked, model.index_topk, engine.force_mqa,
                  1 + engine.num_speculative_tokens))


def parse_requests(spec: str) -> List[Tuple[int, int]]:
    """"100+1,0+1024" -> [(100, 1), (0, 1024)], as the plan tool reads it."""
    out = []
    for part in spec.split(","):
        m = re.fullmatch(r"([0-9]+)\+([0-9]+)", part)
        if m is None:
            raise ValueError(f'bad request "{part}"; expected CONTEXT+NEW with '
                             f"non-negative integers, e.g. 0+1024")
        out.append((int(m.group(1)), int(m.group(2))))
    return out


# ---------------------------------------------------------------------------
# Every layer of one forward (layer_plan.h).


@dataclasses.dataclass(frozen=True)
class LayerPlan:
    layer: int
    is_mtp: bool
    topk_source_layer: int
    action: str
    reason: str
    prefill_branch: str
    k_cache_write: bool


@dataclasses.dataclass(frozen=True)
class ForwardPlan:
    model: str
    platform: str
    forward: ForwardContext
    metadata: Optional[BatchMetadata]  # None in a profile/dummy run
    layers: Tuple[LayerPlan, ...]

    def counts(self) -> Dict[str, int]:
        out = {SCORE: 0, SKIP: 0, SHARED: 0, WORKSPACE_ONLY: 0}
        for layer in self.layers:
            out[layer.action] += 1
        return out

    def skipped_layers(self) -> List[int]:
        return [l.layer for l in self.layers if l.action == SKIP]

    def scores(self, layer: int) -> bool:
        """Whether `layer` runs the indexer's logits and top-k."""
        return self.layers[layer].action == SCORE

    def to_json_dict(self) -> dict:
        """The plan tool's --format=json object."""
        c = self.counts()
        return {
            "model": self.model,
            "platform": self.platform,
            "layers": [{"layer": l.layer, "mtp": l.is_mtp,
                        "indexer": l.action,
                        "prefill_branch": l.prefill_branch,
                        "k_cache_write": l.k_cache_write}
                       for l in self.layers],
            "indexer_calls": {"scored": c[SCORE], "skipped": c[SKIP],
                              "shared": c[SHARED],
                              "workspace_only": c[WORKSPACE_ONLY]},
        }


class LayerPlanner:
    """The static half per layer, computed once; plan_forward per step."""

    def __init__(self, model: ModelLayout, platform: PlatformCaps,
                 engine: EngineConfig = EngineConfig()):
        if (engine.decode_context_parallel_size > 1
                and not platform.decode_context_parallel):
            raise ValueError(
                f"decode context parallel size "
                f"{engine.decode_context_parallel_size} is not supported: the "
                f"{platform.platform_id} ({platform.arch}) sparse MLA backend "
                f"rejects decode context parallelism")
        self.model = model
        self.platform = platform
        self.engine = engine
        self._static = [
            decide_indexer_static(
                owns_indexer=model.owns_indexer(layer),
                is_cuda_alike=platform.is_cuda_alike,
                is_mtp_layer=model.is_mtp_layer(layer),
                prefill_context_parallel=engine.prefill_context_parallel,
                dense_mha_prefill_supported=platform.dense_mha_prefill)
            for layer in range(model.num_layers)]

    def static_decision(self, layer: int) -> StaticDecision:
        _check_int("layer", layer, 0, self.model.num_layers - 1)
        return self._static[layer]

    def plan_forward(self, requests: Optional[Iterable[Tuple[int, int]]],
                     forward: ForwardContext = ForwardContext()
                     ) -> ForwardPlan:
        """Every layer's plan; requests None is a profile/dummy run."""
        metadata = (None if requests is None else
                    build_batch_metadata(self.model, self.engine, requests))
        mla = metadata.mla if metadata is not None else None
        if mla is None or mla.num_prefills == 0:
            branch = BRANCH_NONE
        elif mla.use_dense_mha and self.platform.dense_mha_prefill:
            branch = BRANCH_DENSE_MHA
        else:
            branch = BRANCH_SPARSE_MQA
        layers = []
        for layer, fixed in enumerate(self._static):
            d = decide_indexer(
                fixed, has_attention_metadata=metadata is not None,
                cudagraph_mode=forward.cudagraph_mode,
                capturing=forward.capturing,
                mla_num_decode_tokens=mla.num_decode_tokens if mla else 0,
                mla_num_prefills=mla.num_prefills if mla else 0,
                mla_use_dense_mha=mla.use_dense_mha if mla else False,
                force_mqa=self.engine.force_mqa)
            layers.append(LayerPlan(
                layer=layer, is_mtp=self.model.is_mtp_layer(layer),
                topk_source_layer=self.model.topk_source_layer(layer),
                action=d.action, reason=d.reason, prefill_branch=branch,
                k_cache_write=fixed.owns_indexer and metadata is not None))
        return ForwardPlan(self.model.name, self.platform.platform_id,
                           forward, metadata, tuple(layers))


def plan(model: ModelLayout, platform: PlatformCaps,
         requests: Optional[Iterable[Tuple[int, int]]],
         engine: EngineConfig = EngineConfig(),
         forward: ForwardContext = ForwardContext()) -> ForwardPlan:
    """One forward's plan; requests None is a profile/dummy run."""
    return LayerPlanner(model, platform, engine).plan_forward(requests, forward)
