"""torch's `_foreach_*` ops on the lazy device, as the per-tensor ops they stand for.

torch.optim and clip_grad_norm_ take their foreach paths on `lazy` (lazy_device.install adds the
device to torch's foreach-capable ones, as torch does for CUDA): `_foreach_add_(params, grads,
alpha=a)` arrives here and becomes `add_(params[i], grads[i], alpha=a)` for each i, each traced
into the step's graph. On a lazy device one fused graph is the whole point, so nothing is lost by
expanding the list; what a foreach kernel saves on CUDA (a launch per tensor) the graph saves here.
"""
import torch

aten = torch.ops.aten

# The base op's overload for each foreach overload: lists of tensors and tensor operands map to
# the Tensor overload, scalars and per-tensor scalar lists to the Scalar one.
_OVERLOAD = {"List": "Tensor", "Tensor": "Tensor", "Scalar": "Scalar", "ScalarList": "Scalar",
             "": "default"}  # "": the default overload
# Ops whose scalar is the base op's keyword `value` (addcmul_(self, t1, t2, *, value)).
_VALUE_KEYWORD = ("addcmul", "addcdiv")
_SPECIAL = {"norm": aten.linalg_vector_norm.default}  # _foreach_norm(self, ord=2, dtype=None)


def _base_op(func):
    schema = func._schema
    name = schema.name.split("::", 1)[1][len("_foreach_"):]
    plain = name.rstrip("_")
    if plain in _SPECIAL:
        return _SPECIAL[plain], name
    # An in-place op without an in-place base (maximum_, minimum_): the functional one, whose
    # result foreach_as_single_ops copies into the list entry.
    packet = getattr(aten, name, None) or getattr(aten, plain, None)
    if packet is None:
        return None, name
    overload = "default" if plain in _VALUE_KEYWORD else _OVERLOAD.get(schema.overload_name)
    if overload is not None and overload not in packet.overloads():
        overload = "default"  # a single overload for every operand kind (maximum(self, other))
    if overload is None or overload not in packet.overloads():
        return None, name
    return getattr(packet, overload), name


def _is_list(x):
    return isinstance(x, (list, tuple))


def foreach_as_single_ops(func, args, kwargs, dispatch):
    """Runs `func` (a `_foreach_*` overload) as one base op per list entry through `dispatch`;
    NotImplemented when the op has no per-tensor counterpart here."""
    base, name = _base_op(func)
    if base is None:
        return NotImplemented
    plain = name.rstrip("_")
    n = len(args[0])
    results = []
    for i in range(n):
        a = [x[i] if _is_list(x) else x for x in args]
        kw = {k: (v[i] if _is_list(v) else v) for k, v in kwargs.items()}
        if plain in _VALUE_KEYWORD and len(a) > 3:  # the scalar (or scalar list) is `value`
            value = a.pop(3)
            kw["value"] = value.item() if isinstance(value, torch.Tensor) else value
        if plain == "norm":
            a, kw = [a[0], a[1] if len(a) > 1 else kw.pop("ord", 2)], {"dtype": kw.get("dtype")}
        out = dispatch(base, tuple(a), kw)
        if name.endswith("_") and not base._schema.name.endswith("_"):
            dispatch(aten.copy_.default, (a[0], out), {})
        results.append(out)
    return None if name.endswith("_") else results
