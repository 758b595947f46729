"""`lazytensor.backends.cuda`: `matmul.allow_tf32` as torch.backends.cuda has it (default False).
Stored only: the CUDA backend does not read it yet (see lazytensor.backends)."""

__all__ = ["matmul"]


class _MatmulFlags:
    """torch.backends.cuda.matmul: a fixed set of attributes; a misspelt one is an AttributeError
    (as in PyTorch), not a silently ignored new attribute."""

    _DEFAULTS = {"allow_tf32": False}

    def __init__(self):
        object.__setattr__(self, "_values", dict(self._DEFAULTS))

    def __getattr__(self, name):
        try:
            return self._values[name]
        except KeyError:
            raise AttributeError(f"Unknown attribute {name}") from None

    def __setattr__(self, name, value):
        if name not in self._values:
            raise AttributeError(f"Unknown attribute {name}")
        self._values[name] = bool(value)

    def __repr__(self):
        return f"lazytensor.backends.cuda.matmul({self._values})"


matmul = _MatmulFlags()
