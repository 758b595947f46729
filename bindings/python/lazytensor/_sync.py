"""Sync points and backend selection."""
from . import _C


def mark_step():
    """Materializes every live pending lazy tensor: the end of a training step. Inside a step that
    lt.compile is capturing, deferred to the end of the capture (the step is one graph)."""
    if not _C._capture_active():
        _C.mark_step()


def sync(*tensors):
    """Materializes these tensors (and what they depend on); other pending tensors stay pending."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        tensors = tensors[0]
    for t in tensors:
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"sync(): expected Tensors, got {type(t).__name__}")
    _C.sync(list(tensors), _C.SyncReason.sync)


def mark_dynamic(tensor, dim):
    """Makes dimension `dim` of `tensor` symbolic in every graph it enters (as torch._dynamo's
    mark_dynamic): one compiled graph serves every size of it, on backends with symbolic sizes
    (the CPU backend). Sizes 0 and 1 stay static. A pending tensor is materialized first."""
    if not isinstance(tensor, _C.Tensor):
        raise TypeError(f"mark_dynamic(): expected a Tensor, got {type(tensor).__name__}")
    _C.mark_dynamic(tensor, int(dim))


def set_lazy_backend(name):
    """Sets the backend of plain "lazy" ("cpu", "cuda" or "reference"); LT_LAZY_BACKEND wins."""
    _C.set_lazy_backend(name)
