"""lt.save / lt.load: state dicts in the safetensors format (https://github.com/huggingface/safetensors):

    8 bytes   little-endian u64 N, the header's length
    N bytes   UTF-8 JSON: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
                           ..., "__metadata__": {"key": "value"}}  (padded with spaces to 8 bytes)
    the rest  the tensors' bytes, little-endian, row-major, at their offsets from here

Files written here open with any safetensors reader; files read here are validated completely
(lengths, JSON, dtypes, shapes against byte counts, offsets in range, contiguous and
non-overlapping) and a bad one raises ValueError naming the file and what is wrong.
"""
import json
import struct

import numpy as np

from . import _C

__all__ = ["save", "load"]

# dtype <-> safetensors name and the NumPy dtype of its raw bytes (bfloat16 is carried as uint16).
_TO_ST = {_C.float64: "F64", _C.float32: "F32", _C.float16: "F16", _C.bfloat16: "BF16", _C.int64: "I64",
          _C.int32: "I32", _C.int8: "I8", _C.uint8: "U8", _C.bool: "BOOL"}
_FROM_ST = {v: k for k, v in _TO_ST.items()}
_RAW = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "BF16": "<u2", "I64": "<i8", "I32": "<i4", "I8": "i1",
        "U8": "u1", "BOOL": "?"}
_MAX_HEADER = 100 * 1024 * 1024  # the format's own limit


def _raw_bytes(t):
    """The tensor's bytes in its own dtype (a sync point: the tensor is computed)."""
    if t.dtype == _C.bfloat16:
        # Every bfloat16 value is exact in float32, whose top 16 bits are the bfloat16 bits.
        return (t.float().numpy().astype("<f4").view("<u4") >> 16).astype("<u2").tobytes()
    return np.ascontiguousarray(t.numpy()).astype(_RAW[_TO_ST[t.dtype]], copy=False).tobytes()


def save(obj, f, metadata=None):
    """Writes a dict of name -> Tensor (a state_dict) to `f` (a path) as safetensors."""
    from ._C import Tensor
    if not isinstance(obj, dict):
        raise TypeError(f"lt.save: expected a dict of str -> Tensor (a state_dict), got {type(obj).__name__}")
    header, blobs, offset = {}, [], 0
    for name, t in obj.items():
        if not isinstance(name, str):
            raise TypeError(f"lt.save: keys must be str, got {type(name).__name__}")
        if not isinstance(t, Tensor):
            raise TypeError(f"lt.save: value of {name!r} is {type(t).__name__}, not a Tensor "
                            "(nested state such as an optimizer's is not supported by safetensors)")
        b = _raw_bytes(t.detach())
        header[name] = {"dtype": _TO_ST[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(b)]}
        blobs.append(b)
        offset += len(b)
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(f, "wb") as out:
        out.write(struct.pack("<Q", len(text)))
        out.write(text)
        for b in blobs:
            out.write(b)


def _bad(path, why):
    return ValueError(f"lt.load: {path}: not a valid safetensors file: {why}")


def load(f, device="cpu"):
    """Reads a safetensors file into a dict of name -> Tensor on `device`."""
    with open(f, "rb") as fh:
        data = fh.read()
    if len(data) < 8:
        raise _bad(f, f"{len(data)} bytes, shorter than the 8-byte header length")
    (n,) = struct.unpack("<Q", data[:8])
    if n > _MAX_HEADER or 8 + n > len(data):
        raise _bad(f, f"header length {n} exceeds the file ({len(data)} bytes)")
    try:
        header = json.loads(data[8:8 + n].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise _bad(f, f"header is not JSON ({e})") from None
    if not isinstance(header, dict):
        raise _bad(f, "header is not a JSON object")
    body = memoryview(data)[8 + n:]
    spans, out = [], {}
    for name, info in header.items():
        if name == "__metadata__":
            if not isinstance(info, dict):
                raise _bad(f, "__metadata__ is not an object")
            continue
        if not isinstance(info, dict) or set(info) != {"dtype", "shape", "data_offsets"}:
            raise _bad(f, f"entry {name!r} must have exactly dtype, shape and data_offsets")
        st, shape, offs = info["dtype"], info["shape"], info["data_offsets"]
        if st not in _FROM_ST:
            raise _bad(f, f"entry {name!r} has unsupported dtype {st!r}")
        if (not isinstance(shape, list) or any(not isinstance(d, int) or isinstance(d, bool) or d < 0 for d in shape)):
            raise _bad(f, f"entry {name!r} has an invalid shape {shape!r}")
        if (not isinstance(offs, list) or len(offs) != 2 or any(not isinstance(o, int) or isinstance(o, bool) for o in offs)
                or not 0 <= offs[0] <= offs[1] <= len(body)):
            raise _bad(f, f"entry {name!r} has data_offsets {offs!r} outside the {len(body)}-byte data section")
        itemsize = np.dtype(_RAW[st]).itemsize
        count = int(np.prod(shape, dtype=np.int64)) if shape else 1
        if count * itemsize != offs[1] - offs[0]:
            raise _bad(f, f"entry {name!r}: shape {shape} of {st} needs {count * itemsize} bytes, "
                          f"data_offsets give {offs[1] - offs[0]}")
        spans.append((offs[0], offs[1], name))
        raw = np.frombuffer(body[offs[0]:offs[1]], dtype=_RAW[st]).reshape(shape)
        out[name] = (st, raw)
    spans.sort()
    end = 0
    for b, e, name in spans:
        if b != end:
            raise _bad(f, f"entry {name!r} starts at {b}, expected {end} (gaps or overlaps between tensors)")
        end = e
    if end != len(body):
        raise _bad(f, f"{len(body) - end} bytes after the last tensor")
    from ._creation import tensor
    result = {}
    for name, (st, raw) in out.items():
        if st == "BF16":
            vals = (raw.astype("<u4") << 16).view("<f4")
            result[name] = tensor(vals, dtype=_C.bfloat16, device=device)
        else:
            result[name] = tensor(raw.astype(raw.dtype.newbyteorder("=")), dtype=_FROM_ST[st], device=device)
    return result
