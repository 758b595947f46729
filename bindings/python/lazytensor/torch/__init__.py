"""lazytensor under PyTorch 2: `torch.compile(model, backend="lazytensor")` and the `lazy` device.

    import torch, lazytensor.torch
    model = torch.compile(model, backend="lazytensor")
    # or: run the script's own code on lazytensor's lazy runtime
    model = model.to("lazy"); x = torch.randn(8, 4, device="lazy")

Once lazytensor is installed (or its build tree is on sys.path), neither needs this import: torch
finds the backend by name through the `torch_dynamo_backends` entry point, and gives the `lazy`
device at `import torch` through its device-backend autoload (`torch.backends` entry point). The
bridge is pure Python over lazytensor's runtime (nothing is built against torch's headers), so one
lazytensor serves every torch 2.x from 2.6 on.

The torch.compile backend's modules import torch._dynamo (about a second): they load on first use
of their names here, or when Dynamo asks for the backend, never at `import torch`.
"""
import importlib

from .lazy_device import install as _install_lazy_device, mark_step
from .lazy_tensor import LazyTensor

_install_lazy_device()

_BACKEND_NAMES = {
    "lazytensor_backend": ("backend", "lazytensor_backend"),
    "decompositions": ("backend", "decompositions"),
    "register": ("backend", "register"),
    "aten_table": ("aten_table", "TABLE"),
    "fallback_ops": ("partition", "fallback_ops"),
}


def __getattr__(name):
    if name in _BACKEND_NAMES:
        module, attr = _BACKEND_NAMES[name]
        return getattr(importlib.import_module(f"{__name__}.{module}"), attr)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _backend_found_by_name():
    """Whether Dynamo finds backend="lazytensor" through our entry point (installed metadata)."""
    from importlib.metadata import entry_points
    return any(e.name == "lazytensor" for e in entry_points(group="torch_dynamo_backends"))


if not _backend_found_by_name():  # no package metadata on sys.path: register it ourselves
    importlib.import_module(f"{__name__}.backend").register()

__all__ = ["lazytensor_backend", "decompositions", "aten_table", "fallback_ops", "mark_step", "LazyTensor"]
