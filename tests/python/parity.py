"""The differential check shared by the PyTorch-parity tests: a program runs once in torch (CPU,
eager; the oracle, sharing no code with us) and once in lazytensor on a device, and the results or
the error types must agree."""
import numpy as np
import pytest
import torch

import lazytensor as lt


def _dtype_name(dtype):
    return str(dtype).rsplit(".", 1)[-1]


def _flat(result):
    if isinstance(result, (tuple, list)):
        return [x for r in result for x in _flat(r)]
    return [result]


def _host(t):
    if isinstance(t, torch.Tensor):
        return _dtype_name(t.dtype), t.detach().numpy()
    if isinstance(t, lt.Tensor):
        return _dtype_name(t.dtype), t.numpy()
    return type(t).__name__, np.asarray(t)


def check(program, device, rtol=1e-6, atol=1e-9):
    """program(lib, dev) runs with lib = torch on "cpu" and lib = lazytensor on `device`; the
    results (tensors, nested tuples/lists of them, or None) or the exception type must match."""
    try:
        want = program(torch, "cpu")
    except Exception as e:  # noqa: BLE001 (the oracle's error type is what is compared)
        with pytest.raises(type(e)):
            got = program(lt, device)
            _flat(got)[0].numpy() if got is not None else None  # a lazy error surfaces at the sync
        return
    got = program(lt, device)
    want, got = _flat(want), _flat(got)
    assert len(want) == len(got)
    for i, (w, g) in enumerate(zip(want, got)):
        if w is None:
            assert g is None, f"result {i}: expected None"
            continue
        (wd, wv), (gd, gv) = _host(w), _host(g)
        assert gd == wd, f"result {i}: dtype {gd}, PyTorch {wd}"
        assert gv.shape == wv.shape, f"result {i}: shape {gv.shape}, PyTorch {wv.shape}"
        if wv.dtype.kind in "biu":
            np.testing.assert_array_equal(gv, wv, err_msg=f"result {i}")
        else:
            np.testing.assert_allclose(gv, wv, rtol=rtol, atol=atol, err_msg=f"result {i}")


def leaf(lib, dev, array, dtype=None):
    t = lib.tensor(array.tolist(), dtype=dtype, device=dev)
    return t.requires_grad_() if t.dtype.is_floating_point else t
