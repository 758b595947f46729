"""`lazytensor.nn.utils`: gradient clipping. Pure tensor ops: on "lazy" no value is read back, so
clipping stays inside the training step's graph."""
import math

from .. import _C

Tensor = _C.Tensor

__all__ = ["clip_grad_norm_", "clip_grad_value_", "get_total_norm", "clip_grads_with_norm_"]


def _grads(parameters):
    if isinstance(parameters, Tensor):
        parameters = [parameters]
    params = list(parameters)
    return params, [p.grad for p in params if p.grad is not None]


def get_total_norm(tensors, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    tensors = [tensors] if isinstance(tensors, Tensor) else list(tensors)
    if not tensors:
        return _C.zeros([], _C.float32, _C.device("cpu"))
    norm_type = float(norm_type)
    total = None
    for g in tensors:
        g = g.detach()
        if norm_type == math.inf:
            part = g.abs().amax()
            total = part if total is None else _C.maximum(total, part)
        else:
            part = g.abs().pow(norm_type).sum() if norm_type != 2.0 else (g * g).sum()
            total = part if total is None else total + part
    if norm_type != math.inf:
        total = total.sqrt() if norm_type == 2.0 else total.pow(1.0 / norm_type)
    if error_if_nonfinite:
        v = total.item()  # a sync, as in PyTorch (which also reads the value back)
        if math.isnan(v) or math.isinf(v):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` "
                               "is non-finite, so it cannot be clipped.")
    return total


def clip_grads_with_norm_(parameters, max_norm, total_norm, foreach=None):
    params, _ = _grads(parameters)
    coef = (total_norm + 1e-6).reciprocal() * float(max_norm)
    coef = coef.clamp(max=1.0)
    for p in params:
        g = p.grad
        if g is not None:
            p.grad = g * coef.to(g.dtype)


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients so that their joint norm is at most max_norm; returns the norm before
    clipping (a 0-d tensor)."""
    params, grads = _grads(parameters)
    if not grads:
        return _C.zeros([], _C.float32, _C.device("cpu"))
    # On an eager device, one graph for the norm and every scaled gradient (the runtime's
    # EagerComposite), not a kernel run per op: ~4 ops per parameter, and PyTorch fuses them
    # (_foreach_norm, _foreach_mul_). On lazy it changes nothing.
    _C._composite_enter()
    results = []
    try:
        total = get_total_norm(grads, norm_type, error_if_nonfinite)
        clip_grads_with_norm_(params, max_norm, total)
        results = [total] + [p.grad for p in params if p.grad is not None]
        return total
    finally:
        _C._composite_exit(results)


def clip_grad_value_(parameters, clip_value, foreach=None):
    params, _ = _grads(parameters)
    for p in params:
        if p.grad is not None:
            p.grad = p.grad.clamp(-float(clip_value), float(clip_value))
