"""DeepSeek sparse attention for PyTorch: the plugins' kernels as torch.ops.dsa.

    import dsa_torch
    dsa_torch.load(plugins=dsa_torch.cpu_plugins())   # platform plugin first
    topk = torch.ops.dsa.indexer_topk(logits, starts, ends, 2048)

load() loads the binding library (libdsa_torch.so, built by
engines/torch/build.sh) into PyTorch, then each plugin shared object in
order: a platform plugin before the kernels registered for it. The ops are
torch.ops.dsa.<op> (also dsa_torch.ops.<op>); their schemas are in
csrc/dsa_torch.cc and the README's "Use from PyTorch" section. The
indexer-skip decision is dsa_torch.plan (no torch needed for it).
"""

from __future__ import annotations

import os
import threading
from typing import Iterable, List, Optional

from . import plan  # noqa: F401  (dsa_torch.plan)

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.normpath(os.path.join(_HERE, "..", "..", ".."))

_lock = threading.Lock()
_library_path: Optional[str] = None
_loaded_plugins = {}  # (st_dev, st_ino) -> plugin name


def default_library() -> str:
    """$DSA_TORCH_LIBRARY, else engines/torch/build/libdsa_torch.so."""
    return os.environ.get("DSA_TORCH_LIBRARY") or os.path.join(
        _ROOT, "engines", "torch", "build", "libdsa_torch.so")


def cpu_plugins(bazel_bin: Optional[str] = None) -> List[str]:
    """The CPU platform and CPU attention plugins as Bazel builds them
    (bazel build //platform/cpu:libdsa_cpu_platform.so
    //attention/cpu:libdsa_attention_cpu.so), platform first."""
    base = bazel_bin or os.path.join(_ROOT, "bazel-bin")
    return [os.path.join(base, "platform", "cpu", "libdsa_cpu_platform.so"),
            os.path.join(base, "attention", "cpu",
                         "libdsa_attention_cpu.so")]


def load_library(path: Optional[str] = None) -> str:
    """Loads the binding library once per process; returns its path."""
    global _library_path
    import torch

    with _lock:
        if _library_path is not None:
            return _library_path
        path = os.path.abspath(path or default_library())
        if not os.path.isfile(path):
            raise FileNotFoundError(
                f"{path}: no binding library; build it with "
                f"engines/torch/build.sh (or set DSA_TORCH_LIBRARY)")
        torch.ops.load_library(path)
        # A ROCm build of PyTorch names AMD GPUs "cuda" too.
        if getattr(torch.version, "hip", None):
            torch.ops.dsa.set_device_platform("cuda", "rocm")
        _library_path = path
        return path


def load(plugins: Iterable[str] = (), library: Optional[str] = None
         ) -> List[str]:
    """Loads the binding library and then each plugin, in order.

    A plugin file this process already loaded (under any path) is not loaded
    again. Returns the names the plugins registered under. Errors (a missing,
    truncated or corrupt file, a plugin of another ABI version, a kernel
    whose platform is not loaded) raise with the plugin's path in the
    message; a corrupt file is refused before the dynamic loader sees it
    (ValueError), never loaded.
    """
    import torch

    load_library(library)
    names = []
    for path in plugins:
        path = os.fspath(path)
        try:
            st = os.stat(path)
            key = (st.st_dev, st.st_ino)
        except OSError:
            key = None  # the loader reports it
        with _lock:
            if key is not None and key in _loaded_plugins:
                names.append(_loaded_plugins[key])
                continue
            # dlopen treats only names with a '/' as paths.
            name = torch.ops.dsa.load_plugin(
                path if os.sep in path else os.path.join(os.curdir, path))
            if key is not None:
                _loaded_plugins[key] = name
        names.append(name)
    return names


def loaded() -> List[str]:
    """One line per registered platform and kernel."""
    import torch

    return list(torch.ops.dsa.loaded())


class _Ops:
    """dsa_torch.ops.<op> is torch.ops.dsa.<op>."""

    def __getattr__(self, name):
        import torch

        return getattr(torch.ops.dsa, name)


ops = _Ops()
