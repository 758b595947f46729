"""lt.save / lt.load: state dicts in the safetensors format (https://github.com/huggingface/safetensors):

    8 bytes   little-endian u64 N, the header's length
    N bytes   UTF-8 JSON: {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
                           ..., "__metadata__": {"key": "value"}}  (padded with spaces to 8 bytes)
    the rest  the tensors' bytes, little-endian, row-major, at their offsets from here

The format is read and written in C++ (nn/safetensors.h, also lt::save / lt::load there); this
module keeps PyTorch's calling conventions. Files written here open with any safetensors reader;
files read here are validated completely (lengths, JSON, duplicate keys, dtypes, shapes against
byte counts, offsets in range, contiguous and non-overlapping) and a bad one raises ValueError
naming the file and what is wrong.

lt.load also reads PyTorch's own files (torch.save's zip format and its legacy pickle format:
tensors, state dicts, nested containers), with a restricted unpickler that never runs code from the file (lazytensor/_torch_format.py);
it tells the formats apart by their first bytes.
"""
import os
import tempfile

from . import _C
from ._torch_format import is_pickle, is_torch_zip, load_torch_legacy, load_torch_zip
from ._utils import as_device
from .nn.module import Module

__all__ = ["save", "load"]


def save(obj, f, metadata=None):
    """Writes a dict of name -> Tensor (a state_dict) to `f` (a path) as safetensors."""
    if isinstance(obj, Module):
        # torch.save(model) pickles the module's class and code; safetensors holds tensors only.
        raise TypeError(f"lt.save: cannot save a whole module ({type(obj).__name__}); save its "
                        "state_dict instead: lt.save(model.state_dict(), path), and restore it "
                        "with model.load_state_dict(lt.load(path))")
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


def load(f, map_location=None, *, device=None, weights_only=True, mmap=None, **pickle_load_args):
    """Reads `f` (a path or a binary file object) onto `device` (or `map_location`, as in torch.load;
    default "cpu"): a safetensors file gives a dict of name -> Tensor (in the file's order); a file of
    torch.save gives the object saved (a tensor, a state dict, containers of them), read as
    torch.load(weights_only=True) reads it whatever `weights_only` says: no code from a file runs."""
    device = _load_device(device if device is not None else map_location)
    if hasattr(f, "read"):
        name = getattr(f, "name", None) or "<file object>"
        head = f.read(_HEAD_BYTES)
        f.seek(-len(head), os.SEEK_CUR)
        if is_torch_zip(head):
            return load_torch_zip(f, name, device)
        if is_pickle(head) and not _is_safetensors(head):
            return load_torch_legacy(f, name, device)
        with tempfile.NamedTemporaryFile(suffix=".safetensors") as tmp:
            tmp.write(f.read())
            tmp.flush()
            return _load_safetensors(tmp.name, device)
    path = os.fspath(f)
    with open(path, "rb") as fh:  # FileNotFoundError, IsADirectoryError, PermissionError as usual
        head = fh.read(_HEAD_BYTES)
    if is_torch_zip(head):
        return load_torch_zip(path, path, device)
    if is_pickle(head) and not _is_safetensors(head):
        with open(path, "rb") as fh:
            return load_torch_legacy(fh, path, device)
    return _load_safetensors(path, device)


# Enough of a file to tell the formats apart: safetensors' 8-byte header length and its JSON's "{".
_HEAD_BYTES = 9


def _is_safetensors(head):
    """A safetensors header starts with "{" after its length. The length's first byte can be 0x80 (a
    128-byte header), which alone looks like the start of a pickle."""
    return head[8:9] == b"{"


def _load_safetensors(path, device):
    tensors, _ = _C._load_safetensors(path, device)
    return dict(tensors)


def _load_device(location):
    """A device from torch.load's map_location: a device or its name; a dict or a function (which
    PyTorch uses to move CUDA storages to the CPU) loads onto the CPU."""
    if location is None or isinstance(location, dict) or callable(location):
        return as_device("cpu")
    return as_device(location)
