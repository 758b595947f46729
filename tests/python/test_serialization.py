"""lt.save / lt.load in the safetensors format: round trips of every dtype, a module's state_dict,
the raw bytes checked by an independent parser (struct + json + numpy), and malformed files."""
import json
import struct

import numpy as np
import pytest

import lazytensor as lt


def _parse(path):
    """An independent reader of the raw format: {name: (dtype name, shape, bytes)}."""
    data = open(path, "rb").read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    return {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items() if k != "__metadata__"}, header.get("__metadata__"), n


def test_every_dtype_round_trips_bit_exactly(tmp_path, rng, device):
    src = {
        "f64": rng.standard_normal((3, 4)),
        "f32": rng.standard_normal((5,)).astype(np.float32),
        "f16": rng.standard_normal((2, 2)).astype(np.float16),
        "i64": rng.integers(-2**40, 2**40, (4,)),
        "i32": rng.integers(-1000, 1000, (2, 3)).astype(np.int32),
        "i8": rng.integers(-100, 100, (6,)).astype(np.int8),
        "u8": rng.integers(0, 255, (3,)).astype(np.uint8),
        "b": rng.standard_normal((4,)) > 0,
        "scalar": np.array(2.5, np.float32),
        "empty": np.zeros((0, 3), np.float32),
    }
    ts = {k: lt.tensor(v, device=device) for k, v in src.items()}
    ts["bf16"] = lt.tensor(rng.standard_normal(7).astype(np.float32), dtype=lt.bfloat16, device=device)
    path = tmp_path / "all.safetensors"
    lt.save(ts, str(path), metadata={"format": "pt"})
    raw, meta, n = _parse(path)
    assert meta == {"format": "pt"} and n % 8 == 0
    for k, v in src.items():
        assert raw[k][1] == list(v.shape)
        np.testing.assert_array_equal(np.frombuffer(raw[k][2], dtype=v.dtype.newbyteorder("<")).reshape(v.shape), v)
    assert raw["f64"][0] == "F64" and raw["b"][0] == "BOOL" and raw["bf16"][0] == "BF16"
    back = lt.load(str(path), device=device)
    assert set(back) == set(ts)
    for k, t in ts.items():
        assert back[k].dtype == t.dtype and back[k].shape == t.shape, k
        np.testing.assert_array_equal(back[k].float().numpy() if k == "bf16" else back[k].numpy(),
                                      t.float().numpy() if k == "bf16" else t.numpy())


def test_module_state_dict_round_trip(tmp_path, device):
    lt.manual_seed(1)
    a = lt.nn.Sequential(lt.nn.Linear(4, 8), lt.nn.ReLU(), lt.nn.Linear(8, 2)).to(device)
    lt.manual_seed(2)
    b = lt.nn.Sequential(lt.nn.Linear(4, 8), lt.nn.ReLU(), lt.nn.Linear(8, 2)).to(device)
    path = tmp_path / "m.safetensors"
    lt.save(a.state_dict(), str(path))
    b.load_state_dict(lt.load(str(path), device=device))
    x = lt.randn(3, 4, device=device)
    np.testing.assert_array_equal(a(x).numpy(), b(x).numpy())


def test_save_rejects_what_safetensors_cannot_hold(tmp_path):
    with pytest.raises(TypeError, match="state_dict"):
        lt.save([lt.ones(2)], str(tmp_path / "x"))
    with pytest.raises(TypeError, match="not a Tensor"):
        lt.save({"state": {"step": 1}}, str(tmp_path / "x"))


def _write(path, header, body=b"", n=None):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(text) if n is None else n) + text + body)
    return str(path)


MALFORMED = {
    "empty file": lambda p: (p.write_bytes(b""), str(p))[1],
    "short length": lambda p: (p.write_bytes(b"\x01\x02"), str(p))[1],
    "length past the end": lambda p: _write(p, {"a": 1}, n=1 << 20),
    "not json": lambda p: _write(p, b"{not json"),
    "not utf-8": lambda p: _write(p, b"\xff\xfe"),
    "array header": lambda p: _write(p, [1, 2]),
    "unknown dtype": lambda p: _write(p, {"a": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8),
    "missing key": lambda p: _write(p, {"a": {"dtype": "F32", "shape": [1]}}, b"\0" * 4),
    "negative dim": lambda p: _write(p, {"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}}, b"\0" * 4),
    "bytes do not match shape": lambda p: _write(p, {"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}},
                                                 b"\0" * 4),
    "offsets out of range": lambda p: _write(p, {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}),
    "overlap": lambda p: _write(p, {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]},
                                    "b": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 4),
    "gap": lambda p: _write(p, {"a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}}, b"\0" * 8),
    "trailing bytes": lambda p: _write(p, {"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}}, b"\0" * 9),
    "bad metadata": lambda p: _write(p, {"__metadata__": [1]}),
    "metadata value not a string": lambda p: _write(p, {"__metadata__": {"k": 1}}),
    "duplicate tensor name": lambda p: _write(
        p, b'{"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}}',
        b"x"),
    "duplicate field": lambda p: _write(p, b'{"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}}', b"x"),
    "float dim": lambda p: _write(p, {"a": {"dtype": "F32", "shape": [1.0], "data_offsets": [0, 4]}}, b"\0" * 4),
    "bool dim": lambda p: _write(p, {"a": {"dtype": "U8", "shape": [True], "data_offsets": [0, 1]}}, b"\0"),
    "element count overflows": lambda p: _write(
        p, {"a": {"dtype": "U8", "shape": [2**32, 2**32, 0], "data_offsets": [0, 0]}}),
    "byte count overflows": lambda p: _write(p, {"a": {"dtype": "F64", "shape": [2**61], "data_offsets": [0, 0]}}),
    "dim past int64": lambda p: _write(p, {"a": {"dtype": "U8", "shape": [2**63], "data_offsets": [0, 0]}}),
    "offsets past u64": lambda p: _write(p, {"a": {"dtype": "U8", "shape": [1], "data_offsets": [2**64, 0]}}, b"x"),
    "negative offset": lambda p: _write(p, {"a": {"dtype": "U8", "shape": [1], "data_offsets": [-1, 0]}}, b"x"),
    "partial overlap": lambda p: _write(p, {"a": {"dtype": "U8", "shape": [4], "data_offsets": [0, 4]},
                                            "b": {"dtype": "U8", "shape": [4], "data_offsets": [2, 6]}}, b"\0" * 6),
    "empty name": lambda p: _write(p, {"": {"dtype": "U8", "shape": [1], "data_offsets": [0, 1]}}, b"x"),
    "length of 2**64-1": lambda p: _write(p, {}, n=2**64 - 1),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_files_are_a_clear_value_error(tmp_path, case):
    path = MALFORMED[case](tmp_path / "bad.safetensors")
    with pytest.raises(ValueError, match="not a valid safetensors file") as e:
        lt.load(path)
    assert path in str(e.value)  # the message names the file (and is readable text)
    # The session keeps working.
    assert (lt.ones(3, device="lazy") * 2).sum().item() == 6


def test_errors_name_the_entry_and_the_problem(tmp_path):
    path = _write(tmp_path / "x.safetensors", {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 4]}}, b"\0" * 4)
    with pytest.raises(ValueError, match=r"entry \"w\": shape \[2\] of F32 needs 8 bytes, data_offsets give 4"):
        lt.load(path)
    path = _write(tmp_path / "y.safetensors", {"w": {"dtype": "C64", "shape": [1], "data_offsets": [0, 8]}}, b"\0" * 8)
    with pytest.raises(ValueError, match=r"entry \"w\" has unsupported dtype \"C64\""):
        lt.load(path)


def test_files_of_other_writers_load(tmp_path):
    # Unpadded header, tensors listed out of data order, empty tensors sharing an offset, bool bytes
    # other than 0/1 (read as true), a path object.
    body = struct.pack("<2d", 1.5, -2.0) + b"\x00\x02\x01"
    path = tmp_path / "other.safetensors"
    _write(path, {"flags": {"dtype": "BOOL", "shape": [3], "data_offsets": [16, 19]},
                  "e": {"dtype": "F32", "shape": [0, 2], "data_offsets": [16, 16]},
                  "x": {"dtype": "F64", "shape": [2, 1], "data_offsets": [0, 16]}}, body)
    back = lt.load(path)
    assert list(back) == ["flags", "e", "x"]  # the file's order
    assert back["flags"].tolist() == [False, True, True]
    assert back["x"].tolist() == [[1.5], [-2.0]] and back["x"].dtype == lt.float64
    assert tuple(back["e"].shape) == (0, 2)


def test_save_keeps_dict_order_and_syncs_pending_tensors(tmp_path, device):
    ts = {"z": lt.ones(2, device=device) * 3, "a": lt.arange(3, device=device)}
    path = tmp_path / "order.safetensors"
    lt.save(ts, path)
    raw, meta, n = _parse(path)
    assert list(raw) == ["z", "a"] and meta is None and n % 8 == 0
    assert np.frombuffer(raw["z"][2], "<f4").tolist() == [3.0, 3.0]
    assert list(lt.load(path, device=device)) == ["z", "a"]


def test_io_errors_keep_their_python_types(tmp_path):
    with pytest.raises(FileNotFoundError):
        lt.load(tmp_path / "missing.safetensors")
    with pytest.raises(IsADirectoryError):
        lt.load(tmp_path)
    with pytest.raises(RuntimeError, match="cannot open"):
        lt.save({"a": lt.ones(1)}, tmp_path / "no" / "such" / "dir.safetensors")
    with pytest.raises(ValueError, match="__metadata__"):
        lt.save({"__metadata__": lt.ones(1)}, tmp_path / "m.safetensors")
