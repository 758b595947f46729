"""How an aten op on `lazy` tensors runs (LazyTensor.__torch_dispatch__), in this order:

1. ops the device handles itself (DEVICE_OPS): moves between devices, host reads (`.item()`),
   copies, aliases, random fills; their meaning is the device's, not a graph's;
2. the aten table (aten_table.py, shared with the torch.compile backend): the op is recorded into
   our IR, pending until a sync;
3. in-place (`add_`, `mul_`, ...) and `out=` overloads: the functional op through 1-2, then its
   result written into the tensor (lazytensor's views alias their base, so a write through a view
   reaches the base, as in PyTorch);
4. torch._decomp's decomposition of the op into smaller aten ops, which come back here;
5. otherwise the op runs in PyTorch on the CPU (the operands' values copied there, the results
   copied back): counted in `lt.metrics` `fallbacks` and named once under LT_DEBUG=1, never
   silent.
"""
import os

import torch
from torch._decomp import decomposition_table
from torch.utils._pytree import tree_map

from .. import _C, _sorting
from .aten_table import TABLE
from .interop import lt_dtype
from .lazy_foreach import foreach_as_single_ops
from .lazy_tensor import LazyTensor, from_torch, lt_device, to_cpu, wrap

aten = torch.ops.aten
_named_fallbacks = set()


class _Context:
    """What the table's builders read: the lazy device the values live on."""
    __slots__ = ("device",)

    def __init__(self, device):
        self.device = device


def _unwrap(x):
    if isinstance(x, LazyTensor):
        return x._lt
    if isinstance(x, torch.Tensor):
        if x.dim() == 0:  # a CPU scalar tensor mixes with any device, as in PyTorch
            return from_torch(x)
        raise RuntimeError(f"Expected all tensors to be on the same device, but found a {x.device} "
                           f"tensor of shape {list(x.shape)} among lazy tensors")
    return x


def _wrap(x):
    return wrap(x) if isinstance(x, _C.Tensor) else x


# The hot path's own tree walks: operands are flat, or lists of tensors (cat, stack), and
# torch's generic pytree map cost most of a traced op's ~15 us.
def _unwrap_all(x):
    kind = type(x)
    if kind is LazyTensor:
        return x._lt
    if kind is list or kind is tuple:
        return kind(_unwrap_all(v) for v in x)
    if isinstance(x, torch.Tensor):
        return _unwrap(x)
    return x


def _wrap_all(x):
    if isinstance(x, _C.Tensor):
        return wrap(x)
    kind = type(x)
    if kind is list or kind is tuple:
        return kind(_wrap_all(v) for v in x)
    return x


def _functional_twin(func):
    """The functional overload of an in-place or out= aten op (add_.Tensor -> add.Tensor,
    arange.start_out -> arange.start_step: the overload taking the same positional arguments),
    or None."""
    name = func._schema.name.split("::")[1]
    base = name[:-1] if name.endswith("_") and not name.endswith("__") else name
    packet = getattr(aten, base, None)
    if packet is None:
        return None
    if base != name and func._overloadname in packet.overloads():  # in-place: the same overload
        return getattr(packet, func._overloadname)
    wanted = [a.name for a in func._schema.arguments if not a.kwarg_only]
    for o in packet.overloads():
        cand = getattr(packet, o)
        if cand is func or cand._schema.is_mutable:
            continue
        if [a.name for a in cand._schema.arguments if not a.kwarg_only] == wanted:
            return cand
    return None


def _is_inplace(func):
    name = func._schema.name
    return name.endswith("_") and not name.endswith("__") and func._schema.arguments and \
        func._schema.arguments[0].alias_info is not None and func._schema.arguments[0].alias_info.is_write


def _is_out(func):
    return func._overloadname == "out" or any(
        a.kwarg_only and a.alias_info is not None and a.alias_info.is_write for a in func._schema.arguments)


def _write_into(dst, value):
    """dst (a LazyTensor) now holds `value` (a lazytensor tensor), cast to dst's dtype."""
    if tuple(value.shape) != tuple(dst.shape):
        value = value.expand(*dst.shape)
    if value.dtype != dst._lt.dtype:
        value = _C.cast(value, dst._lt.dtype)
    dst._lt._assign(value)
    return dst


# ---- ops the device handles itself ---------------------------------------------------------------

def _to_copy(x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False,
             memory_format=None):
    target = torch.device(device) if device is not None else x.device
    if target.type == "lazy":
        value = x._lt if isinstance(x, LazyTensor) else from_torch(x)
        if dtype is not None and lt_dtype(dtype) != value.dtype:
            value = _C.cast(value, lt_dtype(dtype))
        elif isinstance(x, LazyTensor):
            value = value.clone()  # a copy: its own value, not an alias
        return wrap(value)
    out = to_cpu(x)
    if dtype is not None:
        out = out.to(dtype)
    return out.to(target) if target.type != "cpu" else out


def _copy_(dst, src, non_blocking=False):
    if isinstance(dst, LazyTensor):
        value = src._lt if isinstance(src, LazyTensor) else from_torch(src)
        return _write_into(dst, value)
    dst.copy_(to_cpu(src))  # a lazy source into a torch tensor elsewhere
    return dst


def _item(x):
    return x._lt.item()


def _alias(x, *rest, **kw):
    return wrap(x._lt.detach())


def _sort(x, dim=-1, descending=False, *, stable=False):
    # lazytensor's sort (the order found on the host: a sync; the values a gather in the graph).
    # A device handler, not an aten table entry: a compiled graph must not bake one call's order.
    values, indices = _sorting.sort(x._lt, dim, descending)
    return wrap(values), wrap(indices)


def _sort_stable(x, *, stable=False, dim=-1, descending=False):
    return _sort(x, dim, descending)


def _topk(x, k, dim=-1, largest=True, sorted=True):
    values, indices = _sorting.topk(x._lt, k, dim, largest, sorted)
    return wrap(values), wrap(indices)


def _clone(x, *, memory_format=None):
    return wrap(x._lt.clone())


def _fill(x, value):
    value = value._lt if isinstance(value, LazyTensor) else value.item() if isinstance(value, torch.Tensor) else value
    if isinstance(value, _C.Tensor):
        return _write_into(x, value)
    return _write_into(x, _C.full(list(x.shape), value, x._lt.dtype, lt_device()))


def _zero(x):
    return _fill(x, 0)


def _normal(x, mean=0.0, std=1.0, *, generator=None):
    noise = _C.randn(list(x.shape), _float(x), lt_device())
    return _write_into(x, noise * std + mean)


def _uniform(x, from_=0.0, to=1.0, *, generator=None):
    u = _C.rand(list(x.shape), _float(x), lt_device())
    return _write_into(x, u * (to - from_) + from_)


def _float(x):
    dtype = x._lt.dtype
    return dtype if dtype in (_C.float32, _C.float64) else _C.float32


def _to(x, device=None, dtype=None, copy=False):
    """Tensor.to(...): itself when nothing changes, else a copy (_to_copy), as PyTorch's."""
    if not copy and (device is None or torch.device(device) == x.device) and (dtype is None or dtype == x.dtype):
        return x
    return _to_copy(x, dtype=dtype, device=device)


# aten.to's overloads, by their schemas' argument order.
def _to_dtype(x, dtype, non_blocking=False, copy=False, memory_format=None):
    return _to(x, dtype=dtype, copy=copy)


def _to_device(x, device, dtype, non_blocking=False, copy=False, memory_format=None):
    return _to(x, device=device, dtype=dtype, copy=copy)


def _to_dtype_layout(x, *, dtype=None, layout=None, device=None, pin_memory=None, non_blocking=False, copy=False,
                     memory_format=None):
    return _to(x, device=device, dtype=dtype, copy=copy)


def _to_other(x, other, non_blocking=False, copy=False, memory_format=None):
    return _to(x, device=other.device, dtype=other.dtype, copy=copy)


def _softmax_int_via(table_op):
    """softmax.int / log_softmax.int (what F.softmax and the math attention call): the table's
    _softmax / _log_softmax, after the optional cast."""
    def handler(x, dim, dtype=None):
        if dtype is not None and dtype != x.dtype:
            x = dispatch(aten._to_copy.default, (x,), {"dtype": dtype})
        return dispatch(table_op, (x, dim, False), {})
    return handler


def _tensor_split_sections(x, sections, dim=0):
    """tensor_split into `sections` pieces (the first size % sections one longer), as views."""
    n = x.shape[dim]
    base, extra = divmod(n, sections)
    out, start = [], 0
    for i in range(sections):
        length = base + (1 if i < extra else 0)
        out.append(wrap(_C.narrow(x._lt, dim, start, length)))
        start += length
    return out


def _like_as_data(fill, table_op):
    """zeros_like/ones_like/empty_like of a parameter under no_grad (what torch.optim does when it
    creates its state inside the first step()) makes device data, not a pending constant: the first
    step's graph then reads the state as an input, as every later step does, and the whole training
    loop compiles one graph. Anything else: the aten table's builder (a constant that fuses)."""
    def handler(x, *args, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
        if (isinstance(x, LazyTensor) and x.requires_grad and x.is_leaf and not torch.is_grad_enabled()
                and device in (None, x.device) and not args):
            value = torch.full(tuple(x.shape), fill, dtype=dtype or x.dtype)
            return wrap(from_torch(value))
        return _run_builder(TABLE[table_op], (x, *args), dict(dtype=dtype, layout=layout, device=device,
                                                              pin_memory=pin_memory, memory_format=memory_format))
    return handler


DEVICE_OPS = {
    aten.zeros_like.default: _like_as_data(0, aten.zeros_like.default),
    aten.empty_like.default: _like_as_data(0, aten.empty_like.default),
    aten.ones_like.default: _like_as_data(1, aten.ones_like.default),
    aten.tensor_split.sections: _tensor_split_sections,
    aten.softmax.int: _softmax_int_via(aten._softmax.default),
    aten.log_softmax.int: _softmax_int_via(aten._log_softmax.default),
    aten._to_copy.default: _to_copy,
    aten.copy_.default: _copy_,
    aten._local_scalar_dense.default: _item,
    aten.detach.default: _alias,
    aten.alias.default: _alias,
    aten.lift_fresh.default: lambda x: x,
    aten.clone.default: _clone,
    aten.sort.default: _sort,
    aten.sort.stable: _sort_stable,
    aten.topk.default: _topk,
    aten.fill_.Scalar: _fill,
    aten.fill_.Tensor: _fill,
    aten.zero_.default: _zero,
    aten.normal_.default: _normal,
    aten.uniform_.default: _uniform,
    aten.to.device: _to_device,
    aten.to.dtype: _to_dtype,
    aten.to.dtype_layout: _to_dtype_layout,
    aten.to.other: _to_other,
    # `.data =` asks whether the two tensors' implementations may share metadata: two lazy
    # tensors may (a shape-changing in-place op on a tensor autograd holds goes that way).
    aten._has_compatible_shallow_copy_type.default:
        lambda a, b: isinstance(a, LazyTensor) and isinstance(b, LazyTensor),
}

# Overloads the table's builder of another op serves unchanged (same arguments).
SAME_BUILDER = {
    torch.ops.prims.where.default: aten.where.self,
    aten.where.ScalarOther: aten.where.self,
    aten.where.ScalarSelf: aten.where.self,
    aten.where.Scalar: aten.where.self,
}


# ---- the order of the module docstring ----------------------------------------------------------

_FAST = {}  # func -> its device handler or table builder, resolved at the op's first dispatch


def dispatch(func, args, kwargs):
    fast = _FAST.get(func)
    if fast is None:
        handler = DEVICE_OPS.get(func)
        builder = TABLE.get(SAME_BUILDER.get(func, func))
        fast = _FAST[func] = (handler, builder)
    handler, builder = fast
    if handler is not None:
        return handler(*args, **kwargs)
    if builder is not None:
        try:
            return _run_builder(builder, args, kwargs)
        except NotImplementedError:
            pass  # an argument combination the builder does not cover: the routes below
    return _slow_routes(func, args, kwargs)


def _slow_routes(func, args, kwargs):
    if func._schema.name.startswith("aten::_foreach_"):
        out = foreach_as_single_ops(func, args, kwargs, dispatch)
        if out is not NotImplemented:
            return out
    if _is_inplace(func) or _is_out(func):
        twin = _functional_twin(func)
        if twin is not None and (twin in TABLE or twin in DEVICE_OPS or twin in decomposition_table):
            return _via_functional(func, twin, args, kwargs)
    decomposition = decomposition_table.get(func)
    if decomposition is not None:
        out = decomposition(*args, **kwargs)
        if out is not NotImplemented:
            return out
    return _fallback(func, args, kwargs)


_CONTEXT = []  # the builders' context, made once lazytensor's default lazy device is known


def _run_builder(builder, args, kwargs):
    if not _CONTEXT:
        _CONTEXT.append(_Context(lt_device()))
    if kwargs:
        out = builder(_CONTEXT[0], *[_unwrap_all(a) for a in args], **{k: _unwrap_all(v) for k, v in kwargs.items()})
    else:
        out = builder(_CONTEXT[0], *[a._lt if type(a) is LazyTensor else _unwrap_all(a) for a in args])
    return wrap(out) if type(out) is _C.Tensor else _wrap_all(out)


@classmethod
def _torch_dispatch(cls, func, types, args=(), kwargs=None):
    return dispatch(func, args, kwargs or {})


LazyTensor.__torch_dispatch__ = _torch_dispatch  # see LazyTensor.__torch_dispatch__


def _via_functional(func, twin, args, kwargs):
    if _is_out(func) and not _is_inplace(func):
        out = kwargs.pop("out", None)
        result = dispatch(twin, args, {k: v for k, v in kwargs.items()})
        if isinstance(out, (tuple, list)):
            return type(out)(_write_into(o, r._lt) for o, r in zip(out, result))
        return _write_into(out, result._lt if isinstance(result, LazyTensor) else from_torch(result))
    result = dispatch(twin, args, kwargs)
    self = args[0]
    if isinstance(result, LazyTensor) and tuple(result.shape) != tuple(self.shape):
        # An in-place op that changes the tensor's shape (transpose_, unsqueeze_, squeeze_): a
        # wrapper's sizes are fixed at its making, so self becomes the new tensor whole, which
        # torch allows only while nothing else (autograd) holds it.
        try:
            torch.utils.swap_tensors(self, result)
        except RuntimeError:
            # Held elsewhere (autograd keeps GRU's output, which aten.gru transposes in place
            # for batch_first): `.data =` gives self's TensorImpl the new sizes and strides
            # without the use-count check, and self then holds the new value.
            with torch.no_grad():
                self.data = result
            self._lt = result._lt
        return self
    return _write_into(self, result._lt if isinstance(result, LazyTensor) else from_torch(result))


def _fallback(func, args, kwargs):
    name = str(func)
    if name not in _named_fallbacks:
        _named_fallbacks.add(name)
        if os.environ.get("LT_DEBUG", "0") not in ("", "0"):
            import sys
            print(f"[lazytensor] lazy device: {name} runs in PyTorch on the CPU (not in the aten table)",
                  file=sys.stderr)
    _C.metrics._count_fallbacks(1)
    cpu_args = tree_map(lambda x: to_cpu(x) if isinstance(x, LazyTensor) else x, args)
    cpu_kwargs = tree_map(lambda x: to_cpu(x) if isinstance(x, LazyTensor) else x, kwargs)
    out = func(*cpu_args, **cpu_kwargs)
    # Mutated operands (in-place, out=) get the results back, and are what the op returns.
    written = []
    for i, a in enumerate(func._schema.arguments):
        if a.alias_info is not None and a.alias_info.is_write:
            mine = args[i] if i < len(args) else kwargs.get(a.name)
            theirs = cpu_args[i] if i < len(cpu_args) else cpu_kwargs.get(a.name)
            if isinstance(mine, LazyTensor):
                written.append(_write_into(mine, from_torch(theirs)))
            elif isinstance(mine, (list, tuple)):  # a mutated list (_foreach_*_): every entry
                for m, t in zip(mine, theirs):
                    if isinstance(m, LazyTensor):
                        _write_into(m, from_torch(t))
    if written and func._schema.returns and func._schema.returns[0].alias_info is not None:
        return written[0] if len(written) == 1 else tuple(written)
    return tree_map(lambda x: wrap(from_torch(x)) if isinstance(x, torch.Tensor) and not isinstance(x, LazyTensor)
                    else x, out)
