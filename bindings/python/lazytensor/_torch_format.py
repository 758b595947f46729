"""Reads the files torch.save writes (its zip format, and the legacy one of before PyTorch 1.6)
without PyTorch and without running code.

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

__all__ = ["is_torch_zip", "load_torch_zip", "load_torch_legacy"]

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


def is_pickle(head):
    """Whether a file starting with `head` is a pickle (torch.save's legacy format starts with one)."""
    return head[:1] == b"\x80"


class _StorageType:
    def __init__(self, name):
        self.name = name


class _Storage:
    """A storage of `numel` elements; its `array` is set when its bytes are read (at once from a
    zip record; after the pickle in the legacy format), or it is a view of `root` from `offset`."""

    def __init__(self, np_dtype, dtype, key, numel, root=None, offset=0):
        self.np_dtype, self.dtype, self.key, self.numel = np.dtype(np_dtype), dtype, key, numel
        self.root, self.offset, self._array = root, offset, None

    @property
    def array(self):
        if self.root is not None:
            return self.root.array[self.offset:self.offset + self.numel]
        return self._array


def _is_view(v):
    """A legacy storage view's metadata: (view key, element offset, element count)."""
    return (isinstance(v, tuple) and len(v) == 3 and isinstance(v[0], str)
            and all(isinstance(x, int) and x >= 0 for x in v[1:]))


class _Pending:
    """A tensor to make once every storage's bytes are read."""

    def __init__(self, storage, offset, size, stride, requires_grad, parameter=False):
        self.storage, self.offset, self.size, self.stride = storage, offset, size, stride
        self.requires_grad, self.parameter = requires_grad, parameter


class _TypeMarker:  # torch.Tensor / torch.nn.Parameter as _rebuild_from_type_v2's new_type
    def __init__(self, name):
        self.name = name


class _Loader:
    def __init__(self, name, device, archive=None, prefix=""):
        self.name, self.device, self.archive, self.prefix = name, device, archive, prefix
        self.storages = {}
        self.big_endian = False
        if archive is not None:
            order = self._record("byteorder", required=False)
            self.big_endian = order is not None and order.strip() == b"big"
            if order is not None and order.strip() not in (b"little", b"big"):
                raise self.fail(f"unknown byteorder record {order[:20]!r}")

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
        # zip: ("storage", type, key, location, numel); legacy: the same + (view_metadata,)
        arity = 5 if self.archive is not None else 6
        if not (isinstance(pid, tuple) and len(pid) == arity and pid[0] == "storage"):
            raise self.fail(f"unsupported persistent id {str(pid)[:80]!r} (only tensor storages)",
                            pickle.UnpicklingError)
        _, stype, key, _location, numel, *view = pid
        view = view[0] if view else None
        if not isinstance(stype, _StorageType) or not isinstance(key, str) \
                or not isinstance(numel, int) or numel < 0 or not (view is None or _is_view(view)):
            raise self.fail(f"malformed storage reference {str(pid)[:80]!r}", pickle.UnpicklingError)
        np_dtype, dtype = _STORAGES[stype.name]
        if dtype is None:
            raise self.fail(f"storage type torch.{stype.name} has no lazytensor dtype")
        root = self.storages.get(key)
        if root is None:
            root = self.storages[key] = _Storage(np_dtype, dtype, key, numel)
            if self.archive is not None:
                self.set_bytes(root, self._record("data/" + key))
        elif root.dtype != dtype or root.numel != numel:
            raise self.fail(f"storage '{key}' is referenced with two types or sizes")
        if view is None:
            return root
        view_key, offset, view_numel = view
        if offset + view_numel > numel:
            raise self.fail(f"storage view '{view_key}' ({view_numel} elements from {offset}) lies "
                            f"outside storage '{key}' of {numel} elements")
        return self.storages.setdefault(view_key, _Storage(np_dtype, dtype, view_key, view_numel,
                                                           root=root, offset=offset))

    def set_bytes(self, storage, data):
        need = storage.numel * storage.np_dtype.itemsize
        if len(data) != need:
            raise self.fail(f"storage '{storage.key}' has {len(data)} bytes where its "
                            f"{storage.numel} elements of {storage.np_dtype} need {need} (wrong size)")
        storage._array = np.frombuffer(data, dtype=storage.np_dtype.newbyteorder(
            ">" if self.big_endian else "<")).astype(storage.np_dtype, copy=False)

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
        if all(size):
            last = storage_offset + sum((s - 1) * st for s, st in zip(size, stride))
            if last >= storage.numel:
                raise self.fail(f"tensor of storage '{storage.key}' (offset {storage_offset}, size "
                                f"{list(size)}, stride {list(stride)}) reaches element {last} of a "
                                f"storage of {storage.numel} elements")
        return _Pending(storage, storage_offset, size, stride, bool(requires_grad))

    def materialize(self, p):
        """The tensor `p` describes (its storage's bytes are read by now)."""
        from .nn import Parameter
        a = p.storage.array
        if all(p.size):
            array = np.lib.stride_tricks.as_strided(
                a[p.offset:], shape=p.size, strides=[st * a.itemsize for st in p.stride],
                writeable=False).copy()
        else:
            array = np.zeros(p.size, dtype=a.dtype)
        t = self._to_tensor(array, p.storage.dtype, p.requires_grad and not p.parameter)
        return Parameter(t, requires_grad=p.requires_grad) if p.parameter else t

    def resolve(self, obj, memo=None):
        """`obj` with every pending tensor made (containers updated in place, tuples rebuilt; an
        object reached twice stays one object)."""
        memo = {} if memo is None else memo
        if id(obj) in memo:
            return memo[id(obj)][1]
        if isinstance(obj, _Pending):
            out = self.materialize(obj)
        elif isinstance(obj, dict):
            memo[id(obj)] = (obj, obj)
            for k, v in obj.items():
                obj[k] = self.resolve(v, memo)
            out = obj
        elif isinstance(obj, list):
            memo[id(obj)] = (obj, obj)
            obj[:] = [self.resolve(v, memo) for v in obj]
            out = obj
        elif isinstance(obj, tuple):
            out = tuple(self.resolve(v, memo) for v in obj)
        else:
            out = obj
        memo[id(obj)] = (obj, out)
        return out

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
        if not isinstance(data, _Pending):
            raise self.fail("a Parameter's data is not a tensor", pickle.UnpicklingError)
        return _Pending(data.storage, data.offset, data.size, data.stride, bool(requires_grad),
                        parameter=True)

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


def _unpickle(file, loader, what):
    """One pickle from `file` through the restricted unpickler; a malformed one is an
    UnpicklingError naming the file (errors this module raises pass unchanged)."""
    try:
        return _RestrictedUnpickler(file, loader).load()
    except (pickle.UnpicklingError, ValueError, RuntimeError, EOFError, TypeError, KeyError,
            IndexError, AttributeError, OverflowError, MemoryError, UnicodeDecodeError) as e:
        if str(e).startswith(f"lt.load: {loader.name}:"):
            raise
        raise loader.fail(f"malformed {what}: {type(e).__name__}: {e}",
                          pickle.UnpicklingError) from None


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
        loader = _Loader(name, device, archive, pkls[0][:-len("data.pkl")])
        obj = _unpickle(io.BytesIO(loader._record("data.pkl")), loader, "data.pkl")
        return loader.resolve(obj)


_LEGACY_MAGIC = 0x1950A86A20F9469CFC6C
_LEGACY_PROTOCOL = 1001


def load_torch_legacy(f, name, device):
    """The object in a file of torch.save's format before the zip one (_use_new_zipfile_serialization=
    False): pickles of a magic number, the protocol version, the writer's byte order, the object
    and its storage keys, then each storage as an int64 element count and its bytes."""
    loader = _Loader(name, device)
    if _unpickle(f, loader, "header") != _LEGACY_MAGIC:
        raise loader.fail("not a file of torch.save (no magic number)")
    if _unpickle(f, loader, "header") != _LEGACY_PROTOCOL:
        raise loader.fail("an unknown version of torch.save's legacy format")
    sys_info = _unpickle(f, loader, "header")
    if not isinstance(sys_info, dict):
        raise loader.fail("malformed header (no sys_info)")
    loader.big_endian = not sys_info.get("little_endian", True)
    obj = _unpickle(f, loader, "object pickle")
    keys = _unpickle(f, loader, "storage keys")
    if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
        raise loader.fail("malformed storage key list")
    order = "big" if loader.big_endian else "little"
    for key in keys:
        storage = loader.storages.get(key)
        if storage is None or storage.root is not None:
            raise loader.fail(f"storage '{key}' is listed but no tensor refers to it")
        head = f.read(8)
        if len(head) != 8:
            raise loader.fail(f"the file ends before storage '{key}' (truncated)")
        numel = int.from_bytes(head, order, signed=True)
        if numel != storage.numel:
            raise loader.fail(f"storage '{key}' has {numel} elements in the file where the pickle "
                              f"says {storage.numel} (wrong size)")
        data = f.read(numel * storage.np_dtype.itemsize)
        if len(data) != numel * storage.np_dtype.itemsize:
            raise loader.fail(f"the file ends inside storage '{key}' (truncated)")
        loader.set_bytes(storage, data)
    missing = [k for k, st in loader.storages.items() if st.root is None and st._array is None]
    if missing:
        raise loader.fail(f"storage '{missing[0]}' has no data in the file (missing record)",
                          RuntimeError)
    return loader.resolve(obj)
