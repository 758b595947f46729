"""default_collate / default_convert with torch.utils.data's rules: tensors are stacked along a new
first dimension, NumPy arrays and scalars become tensors of their dtype, Python floats float64,
ints int64 (bools bool), strings stay lists, and dicts, named tuples and sequences are collated
field by field (a tuple of fields becomes a list, as in PyTorch)."""
import collections.abc
import copy
import numbers

import numpy as np

from ... import _C
from ..._creation import from_numpy, tensor
from ..._functions import stack

__all__ = ["default_collate", "default_convert"]

_ERR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; "
        "found {}")
_CPU = _C.device("cpu")


def _host_array(t):
    """`t`'s values as a NumPy array over its memory when that is free (a cpu tensor with a NumPy
    dtype that needs no grad), else None."""
    if t.device != _CPU or t.requires_grad or t.dtype == _C.bfloat16:
        return None
    return t.numpy()


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def _stack_tensors(batch):
    shapes = {tuple(t.shape) for t in batch}
    if len(shapes) > 1:
        raise RuntimeError(f"stack expects each tensor to be equal size, but got {sorted(shapes)} "
                           "in the batch (default_collate stacks the samples' tensors)")
    arrays = [_host_array(t) for t in batch]
    if all(a is not None for a in arrays) and len({t.dtype for t in batch}) == 1:
        # One host copy, no kernel: eager slicing and stacking compile per shape and offset.
        return from_numpy(np.stack(arrays))
    return stack(batch, 0)


def _numpy_to_tensor(a):
    if a.dtype.kind in "SaUO":
        raise TypeError(_ERR.format(a.dtype))
    return from_numpy(np.ascontiguousarray(a))


def default_collate(batch):
    """Merges a list of samples into a batch (see the module's docstring)."""
    elem = batch[0]
    if isinstance(elem, _C.Tensor):
        return _stack_tensors(batch)
    if isinstance(elem, np.ndarray) and not isinstance(elem, np.generic):
        if elem.dtype.kind in "SaUO":
            raise TypeError(_ERR.format(elem.dtype))
        return from_numpy(np.stack(batch))
    if isinstance(elem, np.generic):
        if elem.dtype.kind in "SaUO":
            raise TypeError(_ERR.format(elem.dtype))
        return from_numpy(np.asarray(batch))
    if isinstance(elem, float):
        return tensor(batch, dtype=_C.float64)
    if isinstance(elem, bool):
        return tensor(batch, dtype=_C.bool)
    if isinstance(elem, numbers.Integral):
        return tensor(batch, dtype=_C.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        fields = {key: default_collate([d[key] for d in batch]) for key in elem}
        if isinstance(elem, collections.abc.MutableMapping):
            clone = copy.copy(elem)
            clone.update(fields)
            return clone
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(list(s)) for s in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = [list(s) for s in zip(*batch)]
        collated = [default_collate(s) for s in transposed]
        if isinstance(elem, tuple):
            return collated
        try:
            clone = copy.copy(elem)
            for i, c in enumerate(collated):
                clone[i] = c
            return clone
        except TypeError:
            return collated
    raise TypeError(_ERR.format(type(elem)))


def default_convert(data):
    """What a DataLoader without batching (batch_size=None) yields: NumPy arrays and scalars become
    tensors, containers are converted element by element, anything else is left as it is."""
    if isinstance(data, _C.Tensor):
        return data
    if isinstance(data, np.ndarray) and not isinstance(data, np.generic):
        return data if data.dtype.kind in "SaUO" else _numpy_to_tensor(data)
    if isinstance(data, np.generic):
        return data if data.dtype.kind in "SaUO" else from_numpy(np.asarray(data))
    if isinstance(data, collections.abc.Mapping):
        fields = {key: default_convert(v) for key, v in data.items()}
        if isinstance(data, collections.abc.MutableMapping):
            clone = copy.copy(data)
            clone.update(fields)
            return clone
        return fields
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        try:
            clone = copy.copy(data)
            for i, d in enumerate(data):
                clone[i] = default_convert(d)
            return clone
        except TypeError:
            return [default_convert(d) for d in data]
    return data
