"""Reads the files torch.save writes (its zip format) without PyTorch and without running code.

    <archive>/data.pkl      a pickle of the saved object; each tensor's storage is a persistent id
                            ("storage", torch.<Type>Storage, key, location, numel)
    <archive>/data/<key>    that storage's bytes (in <archive>/byteorder's order, little by default)

The pickle is read by a restricted unpickler, as torch.load(weights_only=True) reads it: the only
globals it may name are the tensor rebuilders of torch._utils, torch's storage and dtype names,
collections.OrderedDict and a few builtins, each mapped to a function of this module (torch itself
is never imported). Anything else (`os.system`, `builtins.eval`, a class) is refused with
pickle.UnpicklingError before it is called. Every storage is checked against its record (present,
of the declared size) and every tensor's view (offset, sizes, strides) against its storage.
"""
import _compat_pickle
import collections
import io
import pickle
import zipfile

import numpy as np

from . import _C

__all__ = ["is_torch_zip", "load_torch_zip"]

# torch.<Name>Storage -> (NumPy dtype of the bytes, lazytensor dtype)
_STORAGES = {
    "FloatStorage": (np.float32, _C.float32), "DoubleStorage": (np.float64, _C.float64),
    "HalfStorage": (np.float16, _C.float16), "BFloat16Storage": (np.uint16, _C.bfloat16),
    "LongStorage": (np.int64, _C.int64), "IntStorage": (np.int32, _C.int32),
    "ShortStorage": (np.int16, None), "CharStorage": (np.int8, _C.int8),
    "ByteStorage": (np.uint8, _C.uint8), "BoolStorage": (np.uint8, _C.bool),
    "UntypedStorage": (np.uint8, _C.uint8),
}
_DTYPES = {"float32": _C.float32, "float": _C.float32, "float64": _C.float64, "double": _C.float64,
           "float16": _C.float16, "half": _C.float16, "bfloat16": _C.bfloat16, "int64": _C.int64,
           "long": _C.int64, "int32": _C.int32, "int": _C.int32, "int8": _C.int8,
           "uint8": _C.uint8, "bool": _C.bool}


def is_torch_zip(head):
    """Whether a file starting with `head` (its first 4 bytes) is a zip archive."""
    return head[:4] in (b"PK\x03\x04", b"PK\x05\x06")


class _StorageType:
    def __init__(self, name):
        self.name = name


class _Storage:
    def __init__(self, array, dtype, key):
        self.array, self.dtype, self.key = array, dtype, key


class _TypeMarker:  # torch.Tensor / torch.nn.Parameter as _rebuild_from_type_v2's new_type
    def __init__(self, name):
        self.name = name


class _Loader:
    def __init__(self, name, archive, prefix, device):
        self.name, self.archive, self.prefix, self.device = name, archive, prefix, device
        self.storages = {}
        order = self._record("byteorder", required=False)
        self.big_endian = order is not None and order.strip() == b"big"
        if order is not None and order.strip() not in (b"little", b"big"):
            raise ValueError(f"{name}: unknown byteorder record {order[:20]!r}")

    def fail(self, what, exc=ValueError):
        return exc(f"lt.load: {self.name}: {what}")

    def _record(self, key, required=True):
        try:
            return self.archive.read(self.prefix + key)
        except KeyError:
            if required:
                raise self.fail(f"the record '{self.prefix + key}' is missing "
                                "(a truncated or incomplete torch.save file)", RuntimeError) from None
            return None
        except (zipfile.BadZipFile, EOFError, OSError, zipfile.LargeZipFile) as e:
            raise self.fail(f"cannot read the record '{self.prefix + key}': {e}") from None

    # ---- the pickle's persistent ids: storages ------------------------------------------------

    def persistent_load(self, pid):
        if not (isinstance(pid, tuple) and len(pid) == 5 and pid[0] == "storage"):
            raise self.fail(f"unsupported persistent id {str(pid)[:80]!r} (only tensor storages)",
                            pickle.UnpicklingError)
        _, stype, key, _location, numel = pid
        if not isinstance(stype, _StorageType) or not isinstance(key, str) \
                or not isinstance(numel, int) or numel < 0:
            raise self.fail(f"malformed storage reference {str(pid)[:80]!r}", pickle.UnpicklingError)
        if key in self.storages:
            return self.storages[key]
        np_dtype, dtype = _STORAGES[stype.name]
        if dtype is None:
            raise self.fail(f"storage type torch.{stype.name} has no lazytensor dtype")
        data = self._record("data/" + key)
        itemsize = np.dtype(np_dtype).itemsize
        if len(data) != numel * itemsize:
            raise self.fail(f"storage '{key}' has {len(data)} bytes where its {numel} elements of "
                            f"torch.{stype.name} need {numel * itemsize} (wrong size)")
        array = np.frombuffer(data, dtype=np.dtype(np_dtype).newbyteorder(
            ">" if self.big_endian else "<")).astype(np_dtype, copy=False)
        self.storages[key] = _Storage(array, dtype, key)
        return self.storages[key]

    # ---- the allowlisted globals -------------------------------------------------------------

    def rebuild_tensor(self, storage, storage_offset, size, stride, requires_grad=False,
                       backward_hooks=None, metadata=None):
        if not isinstance(storage, _Storage):
            raise self.fail("a tensor's storage is not a storage record", pickle.UnpicklingError)
        ints = (isinstance(storage_offset, int) and isinstance(size, tuple)
                and isinstance(stride, tuple) and len(size) == len(stride)
                and all(isinstance(v, int) for v in size + stride))
        if not ints or storage_offset < 0 or any(v < 0 for v in size + stride):
            raise self.fail(f"tensor of storage '{storage.key}' has an invalid view (offset "
                            f"{storage_offset!r}, size {size!r}, stride {stride!r})")
        n = storage.array.shape[0]
        numel = int(np.prod(size, dtype=np.int64)) if size else 1
        if numel:
            last = storage_offset + sum((s - 1) * st for s, st in zip(size, stride))
            if last >= n:
                raise self.fail(f"tensor of storage '{storage.key}' (offset {storage_offset}, size "
                                f"{list(size)}, stride {list(stride)}) reaches element {last} of a "
                                f"storage of {n} elements")
            item = storage.array.itemsize
            array = np.lib.stride_tricks.as_strided(
                storage.array[storage_offset:], shape=size, strides=[st * item for st in stride],
                writeable=False).copy()
        else:
            array = np.zeros(size, dtype=storage.array.dtype)
        return self._to_tensor(array, storage.dtype, bool(requires_grad))

    def _to_tensor(self, array, dtype, requires_grad):
        from ._creation import tensor
        if dtype == _C.bfloat16:  # the bits are float32's high half: exact
            array = (array.astype(np.uint32) << 16).view(np.float32)
        elif dtype == _C.bool:
            array = array != 0
        t = tensor(array, dtype=dtype, device=self.device)
        if requires_grad:
            t.requires_grad_(True)
        return t

    def rebuild_tensor_v1(self, storage, storage_offset, size, stride):
        return self.rebuild_tensor(storage, storage_offset, size, stride)

    def rebuild_parameter(self, data, requires_grad, backward_hooks, state=None):
        from .nn import Parameter
        if not isinstance(data, _C.Tensor):
            raise self.fail("a Parameter's data is not a tensor", pickle.UnpicklingError)
        return Parameter(data, requires_grad=bool(requires_grad))

    def rebuild_from_type_v2(self, func, new_type, args, state):
        if func not in (self.rebuild_tensor, self.rebuild_parameter) \
                or not isinstance(new_type, _TypeMarker) or not isinstance(args, tuple):
            raise self.fail("_rebuild_from_type_v2 of something that is not a tensor",
                            pickle.UnpicklingError)
        t = func(*args)
        if new_type.name == "Parameter" and func is self.rebuild_tensor:
            t = self.rebuild_parameter(t, t.requires_grad, None)
        return t

    def globals(self):
        g = {
            ("torch._utils", "_rebuild_tensor_v2"): self.rebuild_tensor,
            ("torch._utils", "_rebuild_tensor"): self.rebuild_tensor_v1,
            ("torch._utils", "_rebuild_parameter"): self.rebuild_parameter,
            ("torch._utils", "_rebuild_parameter_with_state"): self.rebuild_parameter,
            ("torch._tensor", "_rebuild_from_type_v2"): self.rebuild_from_type_v2,
            ("torch", "Tensor"): _TypeMarker("Tensor"),
            ("torch.nn.parameter", "Parameter"): _TypeMarker("Parameter"),
            ("torch", "Size"): _size,
            ("torch", "device"): _device,
            ("collections", "OrderedDict"): collections.OrderedDict,
            ("builtins", "set"): set, ("builtins", "frozenset"): frozenset,
            ("builtins", "bytearray"): bytearray, ("builtins", "complex"): complex,
            ("_codecs", "encode"): _codecs_encode,
        }
        for name in _STORAGES:
            g[("torch", name)] = _StorageType(name)
        g[("torch.storage", "UntypedStorage")] = _StorageType("UntypedStorage")
        for name, dtype in _DTYPES.items():
            g[("torch", name)] = dtype
        return g


def _size(dims=()):
    if not all(isinstance(d, int) for d in dims):
        raise pickle.UnpicklingError("torch.Size of non-integers")
    return tuple(dims)


def _device(*args):
    if not all(isinstance(a, (str, int)) for a in args):
        raise pickle.UnpicklingError("torch.device of non-strings")
    return ":".join(str(a) for a in args)


def _codecs_encode(obj, encoding="utf-8"):
    # Protocol-2 pickles spell a bytes object as _codecs.encode(str, "latin1").
    if not isinstance(obj, str) or encoding not in ("latin1", "latin-1"):
        raise pickle.UnpicklingError("_codecs.encode is allowed only for latin1 text (bytes)")
    return obj.encode("latin1")


class _RestrictedUnpickler(pickle.Unpickler):
    def __init__(self, file, loader):
        super().__init__(file, encoding="utf-8")
        self._loader = loader
        self._allowed = loader.globals()

    def find_class(self, module, name):
        # Protocol-2 pickles name Python 3's modules by their Python 2 names (__builtin__.set).
        if (module, name) in _compat_pickle.NAME_MAPPING:
            module, name = _compat_pickle.NAME_MAPPING[(module, name)]
        module = _compat_pickle.IMPORT_MAPPING.get(module, module)
        fn = self._allowed.get((module, name))
        if fn is None:
            raise self._loader.fail(
                f"the pickle asks for the global '{module}.{name}', which lt.load does not allow: "
                "it reads only tensors, state dicts and containers of numbers and strings, and never "
                "runs code from a file", pickle.UnpicklingError)
        return fn

    def persistent_load(self, pid):
        return self._loader.persistent_load(pid)


def load_torch_zip(f, name, device):
    """The object in torch.save's zip file `f` (a path or a binary file), tensors on `device`."""
    try:
        archive = zipfile.ZipFile(f)
    except (zipfile.BadZipFile, EOFError) as e:
        raise ValueError(f"lt.load: {name}: not a readable zip archive of torch.save (truncated or "
                         f"corrupt): {e}") from None
    with archive:
        pkls = [n for n in archive.namelist() if n.endswith("/data.pkl") and n.count("/") == 1]
        if not pkls:
            pkls = [n for n in archive.namelist() if n == "data.pkl"]
        if len(pkls) != 1:
            raise ValueError(f"lt.load: {name}: a zip archive but not torch.save's format (expected "
                             f"one '<archive>/data.pkl' record, found {len(pkls)})")
        loader = _Loader(name, archive, pkls[0][:-len("data.pkl")], device)
        data = loader._record("data.pkl")
        try:
            return _RestrictedUnpickler(io.BytesIO(data), loader).load()
        except (pickle.UnpicklingError, ValueError, RuntimeError):
            raise
        except (EOFError, TypeError, KeyError, IndexError, AttributeError, OverflowError,
                MemoryError, UnicodeDecodeError) as e:
            raise pickle.UnpicklingError(f"lt.load: {name}: malformed data.pkl: "
                                         f"{type(e).__name__}: {e}") from None
