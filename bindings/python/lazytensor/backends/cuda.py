"""`lazytensor.backends.cuda`: `matmul.allow_tf32` as torch.backends.cuda has it (default False,
or LT_ALLOW_TF32=1): the CUDA backend's float32 GEMMs may use TF32 tensor cores when it is on."""

from .. import _C

__all__ = ["matmul"]


class _MatmulFlags:
    """torch.backends.cuda.matmul: a fixed set of attributes; a misspelt one is an AttributeError
    (as in PyTorch), not a silently ignored new attribute."""

    _DEFAULTS = {"allow_tf32": False}

    def __init__(self):
        object.__setattr__(self, "_values", dict(self._DEFAULTS))

    def __getattr__(self, name):
        if name == "allow_tf32":  # the runtime's own setting (backends/backend.h)
            return bool(_C.matmul_allow_tf32())
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"Unknown attribute {name}") from None

    def __setattr__(self, name, value):
        if name not in self._values:
            raise AttributeError(f"Unknown attribute {name}")
        if name == "allow_tf32":
            _C.set_matmul_allow_tf32(bool(value))
        self._values[name] = bool(value)

    def __repr__(self):
        return f"lazytensor.backends.cuda.matmul({self._values})"


matmul = _MatmulFlags()
