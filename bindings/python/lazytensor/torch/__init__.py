"""lazytensor under PyTorch 2: `torch.compile(model, backend="lazytensor")`.

    import torch, lazytensor.torch
    model = torch.compile(model, backend="lazytensor")

Importing this package registers the backend; once lazytensor is installed (or its build tree is
on sys.path) torch finds it by name through the `torch_dynamo_backends` entry point, without the
import. The bridge is pure Python over lazytensor's runtime (nothing is built against torch's
headers), so one lazytensor serves every torch 2.x from 2.6 on.
"""
from .backend import decompositions, lazytensor_backend, register
from .aten_table import TABLE as aten_table
from .partition import fallback_ops

register()

__all__ = ["lazytensor_backend", "decompositions", "aten_table", "fallback_ops"]
