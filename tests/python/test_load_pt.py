"""lt.load of PyTorch's own files (torch.save's zip format), written here by torch 2.13: every dtype,
a module's state_dict, a slice of a larger tensor (offset and strides), tensors sharing a storage,
nested containers of tensors, numbers and strings, a Parameter, file objects and devices; safetensors
files still load, and so do files of torch.save's legacy format. Bad files (a truncated zip, a missing record, a storage of the wrong size, a view
outside its storage) raise errors naming the file, and a pickle that asks for code (os.system, a
function that writes a marker file) is refused without running it; loading never imports torch."""
import collections
import io
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

import lazytensor as lt

DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
          "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32,
          "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool}


def values(t):
    """dtype name and values of a torch or lazytensor tensor (bfloat16 read exactly as float32)."""
    name = str(t.dtype).rsplit(".", 1)[-1]
    return name, (t.float() if name == "bfloat16" else t).tolist()


def check_same(ours, theirs):
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, lt.Tensor), type(ours)
        assert tuple(ours.shape) == tuple(theirs.shape)
        assert values(ours) == values(theirs)
    elif isinstance(theirs, dict):
        assert type(ours) is type(theirs) and list(ours) == list(theirs)
        for k in theirs:
            check_same(ours[k], theirs[k])
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs)
        for a, b in zip(ours, theirs):
            check_same(a, b)
    else:
        assert ours == theirs and type(ours) is type(theirs)


def saved(tmp_path, obj, name="obj.pt"):
    path = tmp_path / name
    torch.save(obj, path)
    return path


@pytest.mark.parametrize("dtype", list(DTYPES))
def test_every_dtype_loads_with_its_values(tmp_path, dtype):
    g = torch.Generator().manual_seed(0)
    tdt = DTYPES[dtype]
    if tdt.is_floating_point:
        t = (torch.randn(3, 5, generator=g) * 100).to(tdt)
    elif tdt == torch.bool:
        t = torch.randn(3, 5, generator=g) > 0
    else:
        lo, hi = (0, 256) if tdt == torch.uint8 else (-100, 100)
        t = torch.randint(lo, hi, (3, 5), generator=g).to(tdt)
    if tdt == torch.int64:
        t[0, 0] = 2**40 + 3
    if dtype in ("float32", "float64"):
        t[1, 1] = float("inf")
    ours = lt.load(saved(tmp_path, t))
    assert ours.dtype == getattr(lt, dtype)
    check_same(ours, t)
    assert ours.device == lt.device("cpu")


def test_a_modules_state_dict(tmp_path):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.LayerNorm(8), torch.nn.ReLU(),
                                torch.nn.Linear(8, 2), torch.nn.BatchNorm1d(2))
    sd = model.state_dict()
    ours = lt.load(saved(tmp_path, sd))
    assert isinstance(ours, collections.OrderedDict)
    check_same(ours, sd)
    assert ours["4.num_batches_tracked"].dtype == lt.int64
    # and it loads into the same module built with lazytensor
    lt_model = lt.nn.Sequential(lt.nn.Linear(4, 8), lt.nn.LayerNorm(8), lt.nn.ReLU(),
                                lt.nn.Linear(8, 2))
    lt_model.load_state_dict({k: v for k, v in ours.items() if not k.startswith("4.")})
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    want = model[:4](torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(lt_model(lt.from_numpy(x)).numpy(), want, rtol=1e-5, atol=1e-6)


def test_slices_and_views_of_a_larger_tensor(tmp_path):
    big = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    obj = {"rows": big[2:5], "cols": big[:, 3:7], "strided": big[1::2, ::3],
           "transposed": big[:3, :4].t(), "column": big[:, 9], "scalar": big[4, 4],
           "expanded": torch.tensor([1.0, 2.0]).expand(3, 2), "empty": big[:0],
           "offset_1d": torch.arange(10, dtype=torch.int32)[7:]}
    ours = lt.load(saved(tmp_path, obj))
    check_same(ours, obj)
    assert ours["scalar"].shape == () and ours["scalar"].item() == 44.0


def test_nested_containers_numbers_strings_and_parameters(tmp_path):
    shared = torch.arange(6.0)
    obj = {"epoch": 7, "lr": 0.25, "name": "run-1", "flag": True, "none": None,
           "blob": b"\x00\xffbytes", "list": [shared, shared[2:], (torch.tensor(3), "x")],
           "nested": {"a": {"b": [torch.ones(2, 2, dtype=torch.float16)]}},
           "size": torch.Size([2, 3]), "set": {1, 2}}
    ours = lt.load(saved(tmp_path, obj))
    assert ours["size"] == (2, 3)
    obj["size"] = (2, 3)
    check_same(ours, obj)
    p = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    ours_p = lt.load(saved(tmp_path, p, "p.pt"))
    assert isinstance(ours_p, lt.nn.Parameter) and ours_p.requires_grad
    assert ours_p.tolist() == [1.0, -2.0]
    t = lt.load(saved(tmp_path, torch.ones(2, requires_grad=True), "g.pt"))
    assert t.requires_grad and t.is_leaf


def test_file_objects_devices_and_map_location(tmp_path):
    buf = io.BytesIO()
    torch.save({"w": torch.arange(4.0)}, buf)
    buf.seek(0)
    assert lt.load(buf)["w"].tolist() == [0.0, 1.0, 2.0, 3.0]
    path = saved(tmp_path, {"w": torch.arange(4.0)})
    for kwargs in ({"map_location": "lazy"}, {"device": "lazy"}):
        w = lt.load(path, **kwargs)["w"]
        assert w.device == lt.device("lazy") and w.tolist() == [0.0, 1.0, 2.0, 3.0]
    w = lt.load(path, map_location=lambda storage, loc: storage)["w"]
    assert w.device == lt.device("cpu")


def test_safetensors_still_load_by_path_and_file_object(tmp_path):
    path = tmp_path / "m.safetensors"
    lt.save({"a": lt.arange(3.0), "b": lt.ones(2, dtype=lt.int32)}, path)
    assert lt.load(path)["a"].tolist() == [0.0, 1.0, 2.0]
    with open(path, "rb") as f:
        assert lt.load(f)["b"].dtype == lt.int32


def test_loading_does_not_import_torch(tmp_path):
    path = saved(tmp_path, {"w": torch.arange(3.0), "sd": torch.nn.Linear(2, 2).state_dict()})
    code = ("import sys, lazytensor as lt; d = lt.load(sys.argv[1]); "
            "assert d['w'].tolist() == [0.0, 1.0, 2.0]; "
            "print('torch' in sys.modules, any(m.startswith('torch.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["False", "False"]


# ---- bad and malicious files ----------------------------------------------------------------

def rewrite(src, dst, drop=(), replace=None):
    """A copy of the zip `src` without the records ending in `drop`, with `replace` {suffix: bytes}."""
    replace = replace or {}
    with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
        for info in zin.infolist():
            if any(info.filename.endswith(d) for d in drop):
                continue
            data = next((v for k, v in replace.items() if info.filename.endswith(k)),
                        zin.read(info.filename))
            zout.writestr(info.filename, data)
    return dst


def test_a_truncated_file_is_a_clear_error(tmp_path):
    path = saved(tmp_path, {"w": torch.randn(100)})
    data = path.read_bytes()
    bad = tmp_path / "truncated.pt"
    bad.write_bytes(data[:len(data) // 2])
    with pytest.raises(ValueError, match=r"truncated\.pt.*(truncated|corrupt)"):
        lt.load(bad)
    bad.write_bytes(data[:3])  # not even a zip header: not safetensors either
    with pytest.raises(ValueError, match="truncated.pt"):
        lt.load(bad)


def test_a_missing_or_wrong_size_record_is_a_clear_error(tmp_path):
    path = saved(tmp_path, {"w": torch.randn(10), "b": torch.randn(3)})
    missing = rewrite(path, tmp_path / "missing.pt", drop=("data/1",))
    with pytest.raises(RuntimeError, match=r"missing\.pt.*record '.*data/1' is missing"):
        lt.load(missing)
    short = rewrite(path, tmp_path / "short.pt", replace={"data/0": b"\x00" * 12})
    with pytest.raises(ValueError, match=r"short\.pt.*12 bytes where its 10 elements.*wrong size"):
        lt.load(short)
    nopkl = rewrite(path, tmp_path / "nopkl.pt", drop=("data.pkl",))
    with pytest.raises(ValueError, match=r"nopkl\.pt.*data\.pkl"):
        lt.load(nopkl)


class _Storage:
    """Pickled as a persistent storage id, as torch.save does."""

    def __init__(self, key, numel):
        self.key, self.numel = key, numel


def craft(tmp_path, name, obj, records):
    """A torch-format zip whose data.pkl is `obj` pickled with _Storage as persistent ids."""
    class Pickler(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, _Storage):
                return ("storage", torch.FloatStorage, o.key, "cpu", o.numel)
            return None
    buf = io.BytesIO()
    Pickler(buf, protocol=2).dump(obj)
    path = tmp_path / name
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", buf.getvalue())
        for key, data in records.items():
            z.writestr(f"archive/data/{key}", data)
    return path


class _RebuildOutOfBounds:
    def __reduce__(self):
        return (torch._utils._rebuild_tensor_v2,
                (_Storage("0", 4), 2, (2, 2), (2, 1), False, collections.OrderedDict()))


def test_a_view_outside_its_storage_is_refused(tmp_path):
    path = craft(tmp_path, "oob.pt", {"w": _RebuildOutOfBounds()},
                 {"0": np.arange(4, dtype=np.float32).tobytes()})
    with pytest.raises(ValueError, match=r"oob\.pt.*reaches element 5 of a storage of 4"):
        lt.load(path)


class _WritesMarker:
    """A payload: unpickling it with pickle.load would write the marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (_write_marker, (str(self.marker),))


def _write_marker(path):
    with open(path, "w") as f:
        f.write("code ran")


class _System:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


class _Eval:
    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (eval, (f"open({str(self.marker)!r}, 'w').close()",))


@pytest.mark.parametrize("payload", [_WritesMarker, _System, _Eval])
def test_a_pickle_that_asks_for_code_is_refused_and_never_runs(tmp_path, payload):
    marker = tmp_path / "marker"
    obj = {"w": torch.ones(2), "evil": payload(marker)}
    path = tmp_path / "evil.pt"
    torch.save(obj, path)  # torch.save pickles the payload's __reduce__
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError, match=r"evil\.pt.*asks for the global '.*', which "
                       "lt.load does not allow"):
        lt.load(path)
    assert not marker.exists()
    # the same payload crafted by hand, next to a real storage record
    crafted = craft(tmp_path, "crafted.pt", [payload(marker)], {})
    with pytest.raises(pickle.UnpicklingError, match="does not allow"):
        lt.load(crafted)
    assert not marker.exists()
    with pytest.raises(Exception):  # the oracle: torch's own weights_only loader refuses it too
        torch.load(path, weights_only=True)
    assert not marker.exists()


def test_a_bad_persistent_id_or_rebuild_argument_is_refused(tmp_path):
    class BadId(pickle.Pickler):
        def persistent_id(self, o):
            return ("module", "os") if o == "x" else None
    buf = io.BytesIO()
    BadId(buf, protocol=2).dump(["x"])
    path = tmp_path / "badid.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", buf.getvalue())
    with pytest.raises(pickle.UnpicklingError, match=r"badid\.pt.*persistent id"):
        lt.load(path)

    class NotAStorage:
        def __reduce__(self):
            return (torch._utils._rebuild_tensor_v2, ("0", 0, (1,), (1,), False, None))
    with pytest.raises(pickle.UnpicklingError, match="not a storage"):
        lt.load(craft(tmp_path, "notstorage.pt", NotAStorage(), {}))


def legacy_sample():
    big = torch.arange(60, dtype=torch.float32).reshape(6, 10)
    obj = {name: (torch.arange(6) % 3 == 0 if dt == torch.bool else
                  (torch.arange(6) * 7 - 20).to(dt)) for name, dt in DTYPES.items()}
    obj.update({"slice": big[1::2, 3:7], "big": big, "column": big[:, 9], "nested": [(big[0],)],
                "sd": torch.nn.Linear(3, 2).state_dict(), "step": 3, "tag": "legacy"})
    return obj


def test_the_legacy_format_loads_like_the_zip_one(tmp_path):
    obj = legacy_sample()
    path = tmp_path / "legacy.pt"
    torch.save(obj, path, _use_new_zipfile_serialization=False)
    check_same(lt.load(path), obj)
    with open(path, "rb") as f:
        check_same(lt.load(f), obj)
    p = tmp_path / "param.pt"
    torch.save(torch.nn.Parameter(torch.ones(2)), p, _use_new_zipfile_serialization=False)
    assert isinstance(lt.load(p), lt.nn.Parameter)


def test_a_bad_legacy_file_is_a_clear_error(tmp_path):
    path = tmp_path / "legacy.pt"
    torch.save({"w": torch.arange(10.0), "b": torch.ones(3)}, path,
               _use_new_zipfile_serialization=False)
    data = path.read_bytes()
    bad = tmp_path / "cut.pt"
    for cut, what in ((len(data) - 5, "ends inside storage"), (len(data) - 20, "truncated"),
                      (40, "malformed")):
        bad.write_bytes(data[:cut])
        with pytest.raises((ValueError, RuntimeError, pickle.UnpicklingError),
                           match=f"cut\\.pt.*{what}"):
            lt.load(bad)
    marker = tmp_path / "marker"
    evil = tmp_path / "evil.pt"
    torch.save({"w": torch.ones(2), "evil": _System(marker)}, evil,
               _use_new_zipfile_serialization=False)
    with pytest.raises(pickle.UnpicklingError, match=r"evil\.pt.*'posix.system'"):
        lt.load(evil)
    assert not marker.exists()
    plain_pickle = tmp_path / "plain.pkl"
    plain_pickle.write_bytes(pickle.dumps({"a": 1}, protocol=2))
    with pytest.raises(ValueError, match="no magic number"):
        lt.load(plain_pickle)


def test_a_legacy_storage_view_is_read_from_its_root(tmp_path):
    """Files of PyTorch < 0.4 name a storage that is a view of another (key, offset, count)."""
    class Pickler(pickle.Pickler):
        def persistent_id(self, o):
            if isinstance(o, _Storage):
                view = None if o.key == "root" else (o.key, 2, 3)
                return ("storage", torch.FloatStorage, "root", "cpu", 6, view)
            return None

    class OnView:
        def __reduce__(self):
            return (torch._utils._rebuild_tensor_v2,
                    (_Storage("view", 3), 1, (2,), (1,), False, collections.OrderedDict()))
    path = tmp_path / "view.pt"
    with open(path, "wb") as f:
        for header in (0x1950A86A20F9469CFC6C, 1001, {"little_endian": True}):
            pickle.dump(header, f, protocol=2)
        Pickler(f, protocol=2).dump({"v": OnView()})
        pickle.dump(["root"], f, protocol=2)
        f.write((6).to_bytes(8, "little") + np.arange(6, dtype=np.float32).tobytes())
    assert lt.load(path)["v"].tolist() == [3.0, 4.0]  # root[2:5][1:3]
