"""`lazytensor.backends.cudnn`: the switches scripts set on torch.backends.cudnn, with PyTorch's
defaults. The CUDA backend runs convolutions through cuDNN when it loads (backends/cuda/cudnn_conv.h;
else they are expanded into cuBLAS GEMMs). `allow_tf32` (default True, as PyTorch) is honoured:
float32 cuDNN convolutions may use TF32 tensor cores while it is on; LT_CONV_ALLOW_TF32=0 sets it
off at start. `benchmark`, `deterministic` and `enabled` are stored: cuDNN's heuristics pick the
algorithm, and LT_CUDNN=0 (read at start) turns cuDNN off."""

import sys
import types

from .. import _C

__all__ = ["allow_tf32", "benchmark", "deterministic", "enabled", "is_available", "version"]

benchmark = False
deterministic = False
enabled = True


def is_available():
    """Whether cuDNN loads in this process (the CUDA backend then runs convolutions with it)."""
    return _C.cudnn_version()[0] > 0


def version():
    """cuDNN's version as an integer (e.g. 91000), or None where it does not load (as PyTorch)."""
    v = _C.cudnn_version()[0]
    return int(v) if v else None


class _Module(types.ModuleType):
    """`allow_tf32` reads and writes the runtime's own setting (backends/backend.h)."""

    @property
    def allow_tf32(self):
        return bool(_C.conv_allow_tf32())

    @allow_tf32.setter
    def allow_tf32(self, value):
        _C.set_conv_allow_tf32(bool(value))


sys.modules[__name__].__class__ = _Module
