"""`Parameter`: a tensor that a Module registers as one of its parameters (requires grad)."""
from .. import _C

Tensor = _C.Tensor


class Parameter(Tensor):
    """A leaf tensor that requires grad and registers itself when assigned to a Module attribute.
    It shares `data`'s values (never a copy) but has its own identity and autograd state."""

    def __init__(self, data=None, requires_grad=True):
        if data is None:
            data = _C.empty([0], _C.float32, _C.device("cpu"))
        if not isinstance(data, Tensor):
            raise TypeError(f"Parameter(): data must be a Tensor, got {type(data).__name__}")
        super().__init__(data.detach())
        if requires_grad:
            self.requires_grad_(True)

    def __repr__(self):
        return "Parameter containing:\n" + Tensor.__repr__(self)

    __str__ = __repr__

    def __reduce_ex__(self, proto):
        raise NotImplementedError("not implemented: pickling Parameters (use lazytensor.save)")


class Buffer(Tensor):
    """Marks a tensor to be registered as a module buffer when assigned (torch.nn.Buffer)."""

    def __init__(self, data, persistent=True):
        super().__init__(data.detach())
        self.persistent = persistent
