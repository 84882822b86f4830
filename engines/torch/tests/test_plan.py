"""dsa_torch.plan against the C++ decision.

Two sources of truth: the scenarios of model/deepseek_v32/indexer_skip_test.cc
(the pure decision), repeated here one for one, and golden output of the plan
tool (tests/golden/*.args + *.json, see golden/README.md) for whole forwards,
with the platform capabilities read from the platform plugins through
torch.ops.dsa.platform_capabilities.
"""

import glob
import json
import os

import pytest

from dsa_torch import plan as p

GOLDEN = os.path.join(os.path.dirname(__file__), "golden")
ROOT = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..",
                                     ".."))


def eligible_layer(**overrides):
    """A main indexer layer on ROCm/CUDA with a dense-MHA prefill."""
    kw = dict(owns_indexer=True, is_cuda_alike=True, is_mtp_layer=False,
              prefill_context_parallel=False,
              dense_mha_prefill_supported=True)
    kw.update(overrides)
    return kw


def pure_short_prefill(**overrides):
    """A pure 1K prefill, eager."""
    kw = dict(has_attention_metadata=True, cudagraph_mode="none",
              capturing=False, mla_num_decode_tokens=0, mla_num_prefills=1,
              mla_use_dense_mha=True, force_mqa=False)
    kw.update(overrides)
    return kw


def decide(static, dynamic):
    return p.decide_indexer(p.decide_indexer_static(**static), **dynamic)


SKIP = p.Decision(p.SKIP, p.SHORT_DENSE_PREFILL)


def score(reason):
    return p.Decision(p.SCORE, reason)


# --- indexer_skip_test.cc, scenario by scenario ---------------------------


def test_pure_short_prefill_skips():
    fixed = p.decide_indexer_static(**eligible_layer())
    assert fixed.owns_indexer and fixed.skip_eligible
    assert p.decide_indexer(fixed, **pure_short_prefill()) == SKIP


@pytest.mark.parametrize("override,reason", [
    (dict(is_cuda_alike=False), p.NOT_CUDA_ALIKE),
    (dict(is_mtp_layer=True), p.MTP_LAYER),
    (dict(prefill_context_parallel=True), p.PREFILL_CONTEXT_PARALLEL),
    (dict(dense_mha_prefill_supported=False), p.NO_DENSE_MHA_PREFILL),
])
def test_static_conditions_score(override, reason):
    assert not p.decide_indexer_static(**eligible_layer(**override)).skip_eligible
    assert decide(eligible_layer(**override), pure_short_prefill()) == \
        score(reason)


def test_layer_without_indexer_shares():
    shared = p.Decision(p.SHARED, p.SHARES_TOPK)
    s = eligible_layer(owns_indexer=False)
    assert decide(s, pure_short_prefill()) == shared
    assert decide(s, pure_short_prefill(has_attention_metadata=False)) == shared


def test_no_metadata_reserves_workspace_only():
    d = pure_short_prefill(has_attention_metadata=False)
    workspace = p.Decision(p.WORKSPACE_ONLY, p.NO_ATTENTION_METADATA)
    assert decide(eligible_layer(), d) == workspace
    assert decide(eligible_layer(is_mtp_layer=True), d) == workspace
    assert decide(eligible_layer(is_cuda_alike=False), d) == workspace


@pytest.mark.parametrize("override,want", [
    (dict(cudagraph_mode="full"), score(p.FULL_CUDAGRAPH)),
    (dict(cudagraph_mode="piecewise"), SKIP),
    (dict(cudagraph_mode="piecewise", capturing=True), score(p.CAPTURING)),
    (dict(mla_num_decode_tokens=2), score(p.DECODE_TOKENS)),  # mixed
    (dict(mla_num_decode_tokens=4, mla_num_prefills=0),
     score(p.DECODE_TOKENS)),  # decode-only
    (dict(mla_num_prefills=0), score(p.NO_PREFILL)),
    (dict(mla_use_dense_mha=False), score(p.PREFILL_LONGER_THAN_TOPK)),
    (dict(mla_use_dense_mha=False, force_mqa=True), score(p.FORCE_MQA)),
    # MTP=3: 3-token requests are decodes to the indexer, prefills to the MLA.
    (dict(mla_num_decode_tokens=0, mla_num_prefills=2,
          mla_use_dense_mha=True), SKIP),
])
def test_dynamic_conditions(override, want):
    assert decide(eligible_layer(), pure_short_prefill(**override)) == want


def test_skips_if_and_only_if_every_condition_holds():
    skips = 0
    for bits in range(1 << 12):
        bit = lambda i: bool((bits >> i) & 1)  # noqa: E731
        s = dict(owns_indexer=bit(0), is_cuda_alike=bit(1),
                 is_mtp_layer=bit(2), prefill_context_parallel=bit(3),
                 dense_mha_prefill_supported=bit(4))
        d = dict(has_attention_metadata=bit(5),
                 cudagraph_mode="full" if bit(6) else "piecewise",
                 capturing=bit(7), mla_num_decode_tokens=3 if bit(8) else 0,
                 mla_num_prefills=2 if bit(9) else 0,
                 mla_use_dense_mha=bit(10), force_mqa=bit(11))
        all_hold = (s["owns_indexer"] and s["is_cuda_alike"]
                    and not s["is_mtp_layer"]
                    and not s["prefill_context_parallel"]
                    and s["dense_mha_prefill_supported"]
                    and d["has_attention_metadata"]
                    and d["cudagraph_mode"] != "full" and not d["capturing"]
                    and d["mla_num_decode_tokens"] == 0
                    and d["mla_num_prefills"] > 0 and d["mla_use_dense_mha"])
        got = decide(s, d)
        assert (got.action == p.SKIP) == all_hold, bits
        other = p.SCORE
        if not s["owns_indexer"]:
            other = p.SHARED
        elif not d["has_attention_metadata"]:
            other = p.WORKSPACE_ONLY
        if not all_hold:
            assert got.action == other, bits
        skips += all_hold
    assert skips == 2  # force_mqa only explains; it does not decide


def test_reason_is_the_first_failing_condition():
    s = eligible_layer(is_cuda_alike=False, is_mtp_layer=True)
    assert p.decide_indexer_static(**s).reason == p.NOT_CUDA_ALIKE
    d = pure_short_prefill(cudagraph_mode="full", capturing=True,
                           mla_num_decode_tokens=1)
    assert decide(eligible_layer(), d).reason == p.FULL_CUDAGRAPH
    d["cudagraph_mode"] = "piecewise"
    assert decide(eligible_layer(), d).reason == p.CAPTURING
    d["capturing"] = False
    d["mla_use_dense_mha"] = False
    assert decide(eligible_layer(), d).reason == p.DECODE_TOKENS


# --- bad inputs -------------------------------------------------------------


def test_bad_inputs_raise_naming_the_field():
    model = p.preset("tiny-glm-5.1")
    caps = p.PlatformCaps("rocm", "gfx942", True, True, False)
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        p.EngineConfig(num_speculative_tokens=65)
    with pytest.raises(ValueError, match="decode_context_parallel_size"):
        p.EngineConfig(decode_context_parallel_size=0)
    with pytest.raises(ValueError, match="decode context parallel size 2"):
        p.LayerPlanner(model, caps, p.EngineConfig(decode_context_parallel_size=2))
    with pytest.raises(ValueError, match="capturing"):
        p.ForwardContext(cudagraph_mode="none", capturing=True)
    with pytest.raises(ValueError, match="cudagraph_mode"):
        p.ForwardContext(cudagraph_mode="eager")
    with pytest.raises(ValueError, match="at least one request"):
        p.plan(model, caps, [])
    with pytest.raises(ValueError, match="request 1 new tokens"):
        p.plan(model, caps, [(0, 4), (3, 0)])
    with pytest.raises(ValueError, match="request 0 context"):
        p.plan(model, caps, [(-1, 4)])
    with pytest.raises(ValueError, match="max_position_embeddings 4096"):
        p.plan(model, caps, [(4000, 97)])
    with pytest.raises(ValueError, match="unknown preset"):
        p.preset("glm-9")
    with pytest.raises(ValueError, match=r"indexer_layers\[0\] must be 0"):
        p.ModelLayout("m", 4, 1, 64, 100, indexer_layers=(1, 2))
    with pytest.raises(ValueError, match="bad request"):
        p.parse_requests("0+1,x")


# --- whole forwards against the plan tool -----------------------------------


def platform_plugins():
    env = os.environ.get("DSA_TORCH_PLATFORM_PLUGINS")
    if env:
        return [x for x in env.split(os.pathsep) if x]
    return [os.path.join(ROOT, "bazel-bin", "platform", name, f"libdsa_{name}_platform.so")
            for name in ("cpu", "rocm", "cuda")]


@pytest.fixture(scope="module")
def caps_of(dsa):
    """PlatformCaps from the loaded platform plugins."""
    import dsa_torch

    registered = " ".join(dsa_torch.loaded())
    for path in platform_plugins():
        # A platform an earlier plugin (DSA_TORCH_PLUGINS) already provides
        # is not registered twice.
        name = os.path.basename(path)
        if name.startswith("libdsa_") and name.endswith("_platform.so"):
            platform_id = name[len("libdsa_"):-len("_platform.so")]
            if f"platform {platform_id} " in registered:
                continue
        dsa_torch.load(plugins=[path])
    return p.PlatformCaps.from_plugin


def parse_args(text):
    """The plan tool's flags as this module's inputs."""
    opts = dict(model=None, platform=None, arch="", requests=None,
                engine={}, forward={}, profile=False)
    for arg in text.split():
        key, _, value = arg.partition("=")
        key = key.lstrip("-")
        if key == "model":
            opts["model"] = value
        elif key == "platform":
            opts["platform"] = value
        elif key == "arch":
            opts["arch"] = value
        elif key == "requests":
            opts["requests"] = p.parse_requests(value)
        elif key == "spec_tokens":
            opts["engine"]["num_speculative_tokens"] = int(value)
        elif key == "pcp":
            opts["engine"]["prefill_context_parallel"] = True
        elif key == "dcp":
            opts["engine"]["decode_context_parallel_size"] = int(value)
        elif key == "force_mqa":
            opts["engine"]["force_mqa"] = True
        elif key == "cudagraph":
            opts["forward"]["cudagraph_mode"] = value
        elif key == "capturing":
            opts["forward"]["capturing"] = True
        elif key == "profile_run":
            opts["profile"] = True
        else:
            raise AssertionError(f"flag {arg} is not handled here")
    return opts


GOLDEN_NAMES = sorted(os.path.basename(a)[:-len(".args")]
                      for a in glob.glob(os.path.join(GOLDEN, "*.args")))


def test_golden_files_exist():
    assert len(GOLDEN_NAMES) >= 10


@pytest.mark.parametrize("name", GOLDEN_NAMES)
def test_forward_matches_plan_tool(caps_of, name):
    with open(os.path.join(GOLDEN, name + ".args")) as f:
        opts = parse_args(f.read())
    with open(os.path.join(GOLDEN, name + ".json")) as f:
        want = json.load(f)
    caps = caps_of(opts["platform"], opts["arch"])
    got = p.plan(p.preset(opts["model"]), caps,
                 None if opts["profile"] else opts["requests"],
                 p.EngineConfig(**opts["engine"]),
                 p.ForwardContext(**opts["forward"]))
    assert got.to_json_dict() == want


def test_platform_capabilities_from_plugins(caps_of):
    rocm = caps_of("rocm", "gfx942")
    assert rocm.is_cuda_alike and rocm.dense_mha_prefill
    assert not rocm.decode_context_parallel
    cuda = caps_of("cuda", "sm_90")
    assert cuda.is_cuda_alike and cuda.decode_context_parallel
    assert not caps_of("cpu").is_cuda_alike
    with pytest.raises(ValueError, match="arch"):
        caps_of("rocm", "gfx1")


def test_glm52_shared_layers_follow_their_owner():
    model = p.preset("glm-5.2")
    assert model.indexer_layers[:4] == (0, 1, 2, 6)
    assert [model.topk_source_layer(l) for l in range(3, 11)] == \
        [2, 2, 2, 6, 6, 6, 6, 10]
    assert model.owns_indexer(78)  # the MTP layer
    caps = p.PlatformCaps("cuda", "sm_90", True, True, True)
    fp = p.plan(model, caps, [(0, 1024)])
    assert fp.skipped_layers() == list(model.indexer_layers)
    assert fp.layers[3].topk_source_layer == 2
    assert fp.counts() == {p.SCORE: 1, p.SKIP: 21, p.SHARED: 57,
                           p.WORKSPACE_ONLY: 0}
