"""Loads the binding and the plugins once per test session.

Plugins: $DSA_TORCH_PLUGINS (paths separated by os.pathsep, platform plugins
first), else the CPU plugins under bazel-bin. The binding library:
$DSA_TORCH_LIBRARY, else engines/torch/build/libdsa_torch.so.
"""

import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

import dsa_torch  # noqa: E402


def plugin_paths():
    env = os.environ.get("DSA_TORCH_PLUGINS")
    if env:
        return [p for p in env.split(os.pathsep) if p]
    return dsa_torch.cpu_plugins()


@pytest.fixture(scope="session")
def dsa():
    """torch.ops.dsa with the plugins loaded and fresh outputs poisoned."""
    import torch

    dsa_torch.load(plugins=plugin_paths())
    torch.ops.dsa.set_poison_outputs(True)
    return torch.ops.dsa


def platform_has_kernels(platform_id):
    return any(line.startswith("kernel ") and f" on {platform_id} " in line
               for line in dsa_torch.loaded())


def devices():
    """cpu, and cuda when PyTorch sees a GPU and a plugin registered kernels
    for the platform PyTorch's "cuda" maps to (cuda or rocm)."""
    import torch

    out = ["cpu"]
    if torch.cuda.is_available():
        out.append("cuda")
    return out


@pytest.fixture(params=devices())
def device(request, dsa):
    if request.param != "cpu":
        platform_id = dsa.device_platform(request.param)
        if not platform_has_kernels(platform_id):
            pytest.skip(f"no plugin with {platform_id} kernels is loaded "
                        f"(set DSA_TORCH_PLUGINS)")
    return request.param


@pytest.fixture
def require_kernel(dsa, device):
    """require_kernel(op) skips the test when the device's platform has no
    kernel for op (a GPU plugin may bring only some of the seven)."""
    def require(op):
        if device == "cpu":
            return
        platform_id = dsa.device_platform(device)
        if not any(line.startswith(f"kernel {op} v")
                   and f" on {platform_id} " in line
                   for line in dsa_torch.loaded()):
            pytest.skip(f"no {op} kernel for {platform_id} is loaded")
    return require
