"""exp on lazy:cpu, whose float32 kernels compute it inline (backends/cpu/llvm_ops.cc exp_f32:
Cody-Waite reduction by ln2, a degree-5 polynomial, 2^n applied as two factors so overflow and
gradual underflow round once). Oracle: torch in float64, compared in float32 ulps (subnormal
results in units of 2^-149)."""
import numpy as np
import torch

import lazytensor as lt
from conftest import float32_ulps

DEV = "lazy:cpu"


def _exp(x):
    y = lt.tensor(x, device=DEV).exp()
    lt.mark_step()
    return y.numpy()


def _ref(x):
    return torch.exp(torch.from_numpy(x.astype(np.float64))).numpy()


def test_dense_sweep_over_the_whole_finite_range():
    # 2^22 + 1 points over [-105, 90]: subnormal results below -87.3, overflow to inf above 88.72.
    x = np.linspace(-105.0, 90.0, (1 << 22) + 1, dtype=np.float32)
    got, ref = _exp(x), _ref(x)
    finite = np.abs(ref) <= np.finfo(np.float32).max
    err = float32_ulps(got[finite], ref[finite])
    assert err.max() <= 1.5, (err.max(), x[finite][err.argmax()])
    # Past float32's largest value the float32 result is inf, as float32 rounding of ref gives.
    with np.errstate(over="ignore"):
        assert np.array_equal(got[~finite], ref[~finite].astype(np.float32))


def test_random_bit_patterns_and_every_float_near_the_edges():
    bits = np.random.default_rng(5).integers(0, 1 << 32, 1_000_003, dtype=np.uint64)
    x = bits.astype(np.uint32).view(np.float32)
    # All floats within 2^12 ulps of the overflow and underflow edges, of +-ln2/2 (the reduction's
    # seams) and of 0.
    steps = np.arange(-(1 << 12), 1 << 12, dtype=np.int64)
    centres = np.array([88.72283, -87.33654, -103.27893, 0.34657359, -0.34657359, 1e-7, -1e-7],
                       dtype=np.float32).view(np.int32).astype(np.int64)
    near = (centres[:, None] + steps[None, :]).astype(np.int32).view(np.float32).ravel()
    x = np.concatenate([x, near])
    x = x[np.isfinite(x)]
    got, ref = _exp(x), _ref(x)
    with np.errstate(over="ignore"):
        expect = ref.astype(np.float32)
    big = ~np.isfinite(expect) | (expect == 0)
    assert np.array_equal(got[big], expect[big]), x[big][got[big] != expect[big]][:5]
    err = float32_ulps(got[~big], ref[~big])
    assert err.max() <= 1.5, (err.max(), x[~big][err.argmax()])


def test_special_values():
    x = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 89.0, 1e30, -1e30, -104.0, -200.0],
                 dtype=np.float32)
    got = _exp(np.tile(x, 5))[: x.size]  # long enough to take the vector loop as well
    assert got[0] == 1.0 and got[1] == 1.0
    assert got[2] == np.inf and got[3] == 0.0 and np.isnan(got[4])
    assert got[5] == np.inf and got[6] == np.inf and got[7] == 0.0 and got[8] == 0.0
    assert got[9] == 0.0
    tiled = _exp(np.tile(x, 5))
    for k in range(5):  # vector lanes and the scalar tail agree
        np.testing.assert_array_equal(tiled[k * x.size:(k + 1) * x.size], tiled[: x.size])


def test_softmax_rows_sum_to_one_and_match_float64():
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((37, 1029)) * 20).astype(np.float32)
    got = lt.tensor(x, device=DEV).softmax(-1)
    lt.mark_step()
    # x - max rounds in float32 by up to half an ulp of |x - max| (~4e-6 relative in the result at
    # -70): the reference starts from the same float32 difference, then runs in float64.
    z = (x - x.max(-1, keepdims=True)).astype(np.float64)
    e = np.exp(z)
    ref = e / e.sum(-1, keepdims=True)
    np.testing.assert_allclose(got.numpy(), ref, rtol=1e-6, atol=1e-44)  # atol: subnormal outputs
    np.testing.assert_allclose(got.numpy().astype(np.float64).sum(-1), 1.0, rtol=1e-6)
