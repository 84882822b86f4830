"""The DeepseekV32 attention stack from Python: a Hugging Face checkpoint
(DeepseekV32ForCausalLM, GlmMoeDsaForCausalLM), a config.json alone (random
weights), a preset name or a textproto, run on the CPU or a CUDA (or ROCm)
GPU with the project's kernels, returning the hidden states after every
layer so that they can be compared with another implementation.

    from dsa_torch import stack
    model = stack.from_pretrained("/models/GLM-5.1-FP8", device="cuda")
    out = model.prefill(input_ids=torch.tensor([151331, 9707, 11]))
    out.hidden_states        # [num_layers, tokens, hidden] float32
    out.last_hidden_state    # after the last main layer
    out.mtp_hidden_state     # after the MTP layer (None without one)

The stack is attention-only, as the project computes it: every layer is
h = h + o_proj(attn(input_layernorm(h))) (no MLP or MoE), with the model's
own numerics from its config (vLLM's: rope theta and YaRN, the mscale^2
softmax scale, RMSNorm eps, the indexer's bf16 roundings and fp8 scale).
Prompts longer than index_topk take the sparse path over the indexer's
top-k. The MTP layer reads eh_proj([enorm(embed(next tokens)) |
hnorm(model.norm(h))]).

The work happens in libdsa_stack.so, a C ABI over the C++ stack
(model/deepseek_v32/stack_api.h) that Bazel builds:

    bazel build //model/deepseek_v32:libdsa_stack.so            # CPU
    bazel build --config=cuda //model/deepseek_v32:libdsa_stack.so  # + CUDA

found at $DSA_STACK_LIBRARY, else under bazel-bin. No torch extension is
needed; torch only holds the inputs and outputs.
"""

from __future__ import annotations

import ctypes
import dataclasses
import os
import threading
from typing import Optional, Sequence

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))

API_MAJOR = 1


def default_library() -> str:
    """$DSA_STACK_LIBRARY, else bazel-bin/model/deepseek_v32/libdsa_stack.so."""
    return os.environ.get("DSA_STACK_LIBRARY") or os.path.join(
        _ROOT, "bazel-bin", "model", "deepseek_v32", "libdsa_stack.so")


class _OpenArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("model", ctypes.c_char_p),
                ("platform", ctypes.c_char_p),
                ("seed", ctypes.c_uint64),
                ("max_tokens", ctypes.c_int64),
                ("bf16_activations", ctypes.c_int32),
                ("indexer_hadamard_rotation", ctypes.c_int32),
                ("num_threads", ctypes.c_int32),
                ("progress", ctypes.c_int32)]


class _Info(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("num_main_layers", ctypes.c_int32),
                ("num_mtp_layers", ctypes.c_int32),
                ("hidden_size", ctypes.c_int32),
                ("vocab_size", ctypes.c_int32),
                ("index_topk", ctypes.c_int32),
                ("max_tokens", ctypes.c_int64),
                ("has_checkpoint_weights", ctypes.c_int32),
                ("name", ctypes.c_char * 128),
                ("description", ctypes.c_char * 768)]


class _PrefillArgs(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("num_tokens", ctypes.c_int64),
                ("input_ids", ctypes.POINTER(ctypes.c_int64)),
                ("hidden_states", ctypes.POINTER(ctypes.c_float)),
                ("mtp_input_ids", ctypes.POINTER(ctypes.c_int64)),
                ("mtp_hidden_states", ctypes.POINTER(ctypes.c_float)),
                ("out_hidden_states", ctypes.POINTER(ctypes.c_float)),
                # minor 1
                ("out_topk", ctypes.POINTER(ctypes.c_int32))]


_Status = ctypes.c_int32
_OpenFn = ctypes.CFUNCTYPE(_Status, ctypes.POINTER(_OpenArgs),
                           ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                           ctypes.c_size_t)
_InfoFn = ctypes.CFUNCTYPE(_Status, ctypes.c_void_p, ctypes.POINTER(_Info),
                           ctypes.c_char_p, ctypes.c_size_t)
_PrefillFn = ctypes.CFUNCTYPE(_Status, ctypes.c_void_p,
                              ctypes.POINTER(_PrefillArgs), ctypes.c_char_p,
                              ctypes.c_size_t)
_CloseFn = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class _Api(ctypes.Structure):
    _fields_ = [("struct_size", ctypes.c_size_t),
                ("major", ctypes.c_uint32),
                ("minor", ctypes.c_uint32),
                ("open", _OpenFn),
                ("info", _InfoFn),
                ("prefill", _PrefillFn),
                ("close", _CloseFn)]


# absl's codes, as the C ABI returns them.
_INVALID_ARGUMENT, _NOT_FOUND, _RESOURCE_EXHAUSTED = 3, 5, 8
_OUT_OF_RANGE, _UNIMPLEMENTED = 11, 12

_lock = threading.Lock()
_api = None


def _load_api(library: Optional[str]):
    global _api
    with _lock:
        if _api is not None:
            return _api
        path = os.path.abspath(library or default_library())
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{path}: no stack library; build it with `bazel build "
                f"//model/deepseek_v32:libdsa_stack.so` (add --config=cuda "
                f"for CUDA) or set DSA_STACK_LIBRARY")
        lib = ctypes.CDLL(path)
        get = lib.DsaGetStackApi
        get.restype = ctypes.POINTER(_Api)
        api = get().contents
        if api.major != API_MAJOR:
            raise RuntimeError(f"{path}: stack API {api.major}.{api.minor}, "
                               f"this package speaks {API_MAJOR}.x")
        _api = (lib, api)
        return _api


def _raise(code: int, error: ctypes.Array, what: str):
    message = f"{what}: {error.value.decode('utf-8', 'replace')}"
    if code == _NOT_FOUND:
        raise FileNotFoundError(message)
    if code == _OUT_OF_RANGE:
        raise IndexError(message)
    if code == _UNIMPLEMENTED:
        raise NotImplementedError(message)
    if code == _INVALID_ARGUMENT:
        raise ValueError(message)
    if code == _RESOURCE_EXHAUSTED:
        raise MemoryError(message)
    raise RuntimeError(message)


@dataclasses.dataclass
class PrefillOutput:
    """The hidden states after every layer of one prefill."""
    # [num_main_layers + num_mtp_layers, tokens, hidden] float32.
    hidden_states: "torch.Tensor"  # noqa: F821
    num_main_layers: int
    # With prefill(return_topk=True): [num_layers, tokens, index_topk] int32,
    # per layer the key positions its sparse path attended to, ascending,
    # -1 padded (a sharing layer: its source's); all -1 on a layer that ran
    # the dense path (every causal key). Else None.
    topk: Optional["torch.Tensor"] = None  # noqa: F821

    @property
    def last_hidden_state(self):
        """[tokens, hidden] after the last main layer (before model.norm)."""
        return self.hidden_states[self.num_main_layers - 1]

    @property
    def mtp_hidden_state(self):
        """[tokens, hidden] after the last MTP layer, or None."""
        if self.hidden_states.shape[0] == self.num_main_layers:
            return None
        return self.hidden_states[-1]


class Stack:
    """A loaded model on one device; see from_pretrained."""

    def __init__(self, handle, api, lib, device: str):
        self._handle = handle
        self._api = api
        self._lib = lib  # keeps the library loaded while the stack lives
        self._minor = api.minor
        self.device = device
        info = _Info()
        info.struct_size = ctypes.sizeof(_Info)
        error = ctypes.create_string_buffer(1024)
        code = api.info(handle, ctypes.byref(info), error, len(error))
        if code != 0:
            _raise(code, error, "stack info")
        self.name = info.name.decode()
        self.description = info.description.decode()
        self.num_main_layers = info.num_main_layers
        self.num_mtp_layers = info.num_mtp_layers
        self.num_layers = info.num_main_layers + info.num_mtp_layers
        self.hidden_size = info.hidden_size
        self.vocab_size = info.vocab_size
        self.index_topk = info.index_topk
        self.max_tokens = info.max_tokens
        self.has_checkpoint_weights = bool(info.has_checkpoint_weights)

    def __repr__(self):
        return (f"Stack({self.description}, {self.num_main_layers} layers + "
                f"{self.num_mtp_layers} MTP on {self.device})")

    def close(self):
        if self._handle is not None:
            self._api.close(self._handle)
            self._handle = None

    def __del__(self):
        try:
            self.close()
        except Exception:  # interpreter shutdown
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def prefill(self, input_ids=None, hidden_states=None, mtp_input_ids=None,
                mtp_hidden_states=None, next_token_id: int = 0,
                return_topk: bool = False) -> PrefillOutput:
        """One prefill of a fresh sequence (positions 0..tokens-1).

        The main layers read input_ids ([tokens] or [1, tokens], looked up
        in the checkpoint's embed_tokens, or random rows without one) or
        hidden_states ([tokens, hidden] or [1, tokens, hidden]). The MTP
        layer's token input is embed(next token): mtp_input_ids, or
        mtp_hidden_states, or with input_ids by default input_ids shifted by
        one with `next_token_id` last (the token the model would sample
        there; this stack has no lm_head). With hidden_states and no MTP
        input, hidden_states stand in for it. return_topk: read back each
        layer's top-k as well (PrefillOutput.topk; a synchronisation per
        layer).
        """
        import torch

        if (input_ids is None) == (hidden_states is None):
            raise ValueError("prefill: give exactly one of input_ids and "
                             "hidden_states")
        if mtp_input_ids is not None and mtp_hidden_states is not None:
            raise ValueError("prefill: give at most one of mtp_input_ids and "
                             "mtp_hidden_states")
        args = _PrefillArgs()
        args.struct_size = ctypes.sizeof(_PrefillArgs)
        keep = []

        def ids_arg(t, what):
            t = torch.as_tensor(t)
            if t.dim() == 2 and t.shape[0] == 1:
                t = t[0]
            if t.dim() != 1 or t.dtype.is_floating_point:
                raise ValueError(f"prefill: {what} must be integer ids of "
                                 f"shape [tokens], got {tuple(t.shape)} "
                                 f"{t.dtype}")
            t = t.detach().to("cpu", torch.int64).contiguous()
            keep.append(t)
            return t, ctypes.cast(t.data_ptr(), ctypes.POINTER(ctypes.c_int64))

        def states_arg(t, what):
            t = torch.as_tensor(t)
            if t.dim() == 3 and t.shape[0] == 1:
                t = t[0]
            if t.dim() != 2 or t.shape[1] != self.hidden_size:
                raise ValueError(f"prefill: {what} must be [tokens, "
                                 f"{self.hidden_size}], got {tuple(t.shape)}")
            t = t.detach().to("cpu", torch.float32).contiguous()
            keep.append(t)
            return t, ctypes.cast(t.data_ptr(), ctypes.POINTER(ctypes.c_float))

        if input_ids is not None:
            ids, args.input_ids = ids_arg(input_ids, "input_ids")
            tokens = ids.shape[0]
            if mtp_input_ids is None and mtp_hidden_states is None:
                mtp_input_ids = torch.cat(
                    [ids[1:], torch.tensor([next_token_id], dtype=torch.int64)])
        else:
            states, args.hidden_states = states_arg(hidden_states,
                                                    "hidden_states")
            tokens = states.shape[0]
        if mtp_input_ids is not None:
            mtp, args.mtp_input_ids = ids_arg(mtp_input_ids, "mtp_input_ids")
            if mtp.shape[0] != tokens:
                raise ValueError(f"prefill: mtp_input_ids has {mtp.shape[0]} "
                                 f"tokens, the input {tokens}")
        elif mtp_hidden_states is not None:
            mtp, args.mtp_hidden_states = states_arg(mtp_hidden_states,
                                                     "mtp_hidden_states")
            if mtp.shape[0] != tokens:
                raise ValueError(f"prefill: mtp_hidden_states has "
                                 f"{mtp.shape[0]} tokens, the input {tokens}")
        out = torch.empty((self.num_layers, tokens, self.hidden_size),
                          dtype=torch.float32)
        args.num_tokens = tokens
        args.out_hidden_states = ctypes.cast(out.data_ptr(),
                                             ctypes.POINTER(ctypes.c_float))
        topk = None
        if return_topk:
            if self._minor < 1:
                raise RuntimeError(f"prefill: return_topk needs stack API "
                                   f"{API_MAJOR}.1, the library has "
                                   f"{API_MAJOR}.{self._minor}")
            topk = torch.empty((self.num_layers, tokens, self.index_topk),
                               dtype=torch.int32)
            args.out_topk = ctypes.cast(topk.data_ptr(),
                                        ctypes.POINTER(ctypes.c_int32))
        error = ctypes.create_string_buffer(2048)
        if self._handle is None:
            raise RuntimeError("prefill: the stack is closed")
        code = self._api.prefill(self._handle, ctypes.byref(args), error,
                                 len(error))
        if code != 0:
            _raise(code, error, "prefill")
        return PrefillOutput(out.to(self.device), self.num_main_layers,
                             None if topk is None else topk.to(self.device))


def _platform_of(device) -> str:
    import torch

    device = torch.device(device)
    if device.type == "cpu":
        return "cpu"
    if device.type == "cuda":
        return "rocm" if getattr(torch.version, "hip", None) else "cuda"
    raise ValueError(f"device {device}: expected cpu or cuda")


def from_pretrained(path: str, device="cpu", *, dtype=None,
                    max_tokens: Optional[int] = None, seed: int = 0,
                    indexer_hadamard_rotation: Optional[bool] = None,
                    num_threads: int = 0, progress: bool = True,
                    library: Optional[str] = None) -> Stack:
    """Loads `path` into the stack on `device` ("cpu" or "cuda").

    path: a checkpoint directory (config.json and model.safetensors or
    model.safetensors.index.json; BF16, F16, F32 and block-scaled FP8 with
    weight_scale_inv, dequantised once at load), a config.json alone (that
    model with random weights drawn from `seed`), a preset name
    ("glm-5.1", "tiny-glm-5.2", ...) or a .textproto. A bad checkpoint (a
    missing tensor, a shape or dtype the config disagrees with, a lying
    header, a truncated file) raises before anything runs, naming the tensor
    and its file.

    dtype: the activations the projections and attention read
    (torch.bfloat16, what engines run; default torch.float32).
    max_tokens: the longest prefill (default min(max_position_embeddings,
    8192)); device memory is reserved for it.
    indexer_hadamard_rotation: override the model option (None: the
    model's; vLLM's numerics have it off).
    """
    import torch

    lib, api = _load_api(library)
    args = _OpenArgs()
    args.struct_size = ctypes.sizeof(_OpenArgs)
    spec = os.fspath(path)
    args.model = spec.encode()
    args.platform = _platform_of(device).encode()
    args.seed = seed
    args.max_tokens = max_tokens or 0
    if dtype not in (None, torch.float32, torch.bfloat16):
        raise ValueError(f"dtype {dtype}: expected torch.float32 or "
                         f"torch.bfloat16")
    args.bf16_activations = 1 if dtype == torch.bfloat16 else 0
    args.indexer_hadamard_rotation = (
        -1 if indexer_hadamard_rotation is None
        else int(bool(indexer_hadamard_rotation)))
    args.num_threads = num_threads
    args.progress = 1 if progress else 0
    handle = ctypes.c_void_p()
    error = ctypes.create_string_buffer(2048)
    code = api.open(ctypes.byref(args), ctypes.byref(handle), error,
                    len(error))
    if code != 0:
        _raise(code, error, f"from_pretrained({spec!r})")
    return Stack(handle, api, lib, str(torch.device(device)))


__all__: Sequence[str] = ("from_pretrained", "Stack", "PrefillOutput",
                          "default_library")
