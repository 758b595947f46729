"""tanh on lazy:cpu, whose float32 kernels compute it inline (backends/cpu/llvm_ops.cc tanh_f32:
an odd polynomial below |x| = 0.625, 1 - 2 / (exp(2|x|) + 1) above). Oracle: torch in float64,
compared in float32 ulps."""
import numpy as np
import torch

import lazytensor as lt
from conftest import float32_ulps

DEV = "lazy:cpu"


def _tanh(x):
    y = lt.tensor(x, device=DEV).tanh()
    lt.mark_step()
    return y.numpy()


def _ref(x):
    return torch.tanh(torch.from_numpy(x.astype(np.float64))).numpy()


def test_dense_sweep_and_random_bit_patterns():
    dense = np.linspace(-12.0, 12.0, (1 << 21) + 1, dtype=np.float32)
    bits = np.random.default_rng(7).integers(0, 1 << 32, 1_000_003, dtype=np.uint64)
    rand = bits.astype(np.uint32).view(np.float32)
    # Every float within 2^12 ulps of the branch seam (+-0.625) and of 0.
    steps = np.arange(-(1 << 12), 1 << 12, dtype=np.int64)
    centres = np.array([0.625, -0.625, 1e-6, -1e-6], dtype=np.float32).view(np.int32).astype(np.int64)
    near = (centres[:, None] + steps[None, :]).astype(np.int32).view(np.float32).ravel()
    x = np.concatenate([dense, rand, near])
    x = x[np.isfinite(x)]
    got, ref = _tanh(x), _ref(x)
    err = float32_ulps(got, ref)
    assert err.max() <= 2.0, (err.max(), x[err.argmax()])


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 1e-30, -1e-30, 45.0, -45.0, 1e30],
                 dtype=np.float32)
    got = _tanh(np.tile(x, 5))[: x.size]  # long enough to take the vector loop as well
    assert got[0] == 0.0 and not np.signbit(got[0]) and got[1] == 0.0 and np.signbit(got[1])
    assert got[2] == 1.0 and got[3] == -1.0 and np.isnan(got[4])
    assert got[5] == np.float32(1e-30) and got[6] == np.float32(-1e-30)
    assert got[7] == 1.0 and got[8] == -1.0 and got[9] == 1.0
