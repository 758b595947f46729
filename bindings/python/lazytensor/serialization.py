"""lt.save / lt.load: state dicts in the safetensors format (https://github.com/huggingface/safetensors):

    8 bytes   little-endian u64 N, the header's length
    N bytes   UTF-8 JSON: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
                           ..., "__metadata__": {"key": "value"}}  (padded with spaces to 8 bytes)
    the rest  the tensors' bytes, little-endian, row-major, at their offsets from here

The format is read and written in C++ (runtime/safetensors.h, also lt::save / lt::load there); this
module keeps PyTorch's calling conventions. Files written here open with any safetensors reader;
files read here are validated completely (lengths, JSON, duplicate keys, dtypes, shapes against
byte counts, offsets in range, contiguous and non-overlapping) and a bad one raises ValueError
naming the file and what is wrong.
"""
import os

from . import _C
from ._utils import as_device

__all__ = ["save", "load"]


def save(obj, f, metadata=None):
    """Writes a dict of name -> Tensor (a state_dict) to `f` (a path) as safetensors."""
    if not isinstance(obj, dict):
        raise TypeError(f"lt.save: expected a dict of str -> Tensor (a state_dict), got {type(obj).__name__}")
    items = []
    for name, t in obj.items():
        if not isinstance(name, str):
            raise TypeError(f"lt.save: keys must be str, got {type(name).__name__}")
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"lt.save: value of {name!r} is {type(t).__name__}, not a Tensor "
                            "(nested state such as an optimizer's is not supported by safetensors)")
        items.append((name, t))
    meta = {str(k): str(v) for k, v in (metadata or {}).items()}
    # Names are checked before the file is opened, so a refused save leaves an existing file as it
    # was; an unwritable path is a RuntimeError naming it (as torch.save's missing-directory error).
    _C._save_safetensors(items, os.fspath(f), meta)


def load(f, device="cpu"):
    """Reads a safetensors file into a dict of name -> Tensor on `device` (in the file's order)."""
    path = os.fspath(f)
    open(path, "rb").close()  # FileNotFoundError, IsADirectoryError, PermissionError as usual
    tensors, _ = _C._load_safetensors(path, as_device(device))
    return dict(tensors)
