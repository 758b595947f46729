"""lazytensor under PyTorch 2: `torch.compile(model, backend="lazytensor")` and the `lazy` device.

    import torch, lazytensor.torch
    model = torch.compile(model, backend="lazytensor")
    # or: run the script's own code on lazytensor's lazy runtime
    model = model.to("lazy"); x = torch.randn(8, 4, device="lazy")

Importing this package registers the backend; once lazytensor is installed (or its build tree is
on sys.path) torch finds it by name through the `torch_dynamo_backends` entry point, without the
import. The bridge is pure Python over lazytensor's runtime (nothing is built against torch's
headers), so one lazytensor serves every torch 2.x from 2.6 on.
"""
from .backend import decompositions, lazytensor_backend, register
from .aten_table import TABLE as aten_table
from .partition import fallback_ops
from .lazy_device import install as _install_lazy_device, mark_step
from .lazy_tensor import LazyTensor

register()
_install_lazy_device()

__all__ = ["lazytensor_backend", "decompositions", "aten_table", "fallback_ops", "mark_step", "LazyTensor"]
