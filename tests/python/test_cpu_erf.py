"""erf and gelu on lazy:cpu, whose fused float32 kernels compute erf inline: on AVX2+FMA hosts one
polynomial per interval [k, k+1) of |x| with per-lane coefficient tables (backends/cpu/erf_table.cc),
elsewhere x + x P(x^2) below |x| = 0.921875 and 1 - 2^Q(|x|) above (llvm_ops.cc). Oracle: torch in
float64, compared in float32 ulps; float16/bfloat16 go through the same float32 code."""
import re

import numpy as np
import pytest
import torch

import lazytensor as lt
import lazytensor.nn.functional as F
from conftest import float32_ulps

DEV = "lazy:cpu"


def _erf(x):
    y = lt.tensor(x, device=DEV).erf()
    lt.mark_step()
    return y.numpy()


def _ref_erf(x):
    return torch.erf(torch.from_numpy(x.astype(np.float64))).numpy()


def test_dense_sweep_within_twofloat32_ulps():
    # 2^22 + 1 evenly spaced points over [-6, 6]: both halves, the 0.921875 seam, saturation at 4.
    x = np.linspace(-6.0, 6.0, (1 << 22) + 1, dtype=np.float32)
    err = float32_ulps(_erf(x), _ref_erf(x))
    assert err.max() <= 2.0, (err.max(), x[err.argmax()])


def test_random_bit_patterns_over_the_whole_float_range():
    # Uniform over bit patterns: every exponent equally, subnormals and tiny |x| included.
    bits = np.random.default_rng(7).integers(0, 1 << 32, 1_000_003, dtype=np.uint64)
    x = bits.astype(np.uint32).view(np.float32)
    x = x[np.isfinite(x)]
    err = float32_ulps(_erf(x), _ref_erf(x))
    assert err.max() <= 2.0, (err.max(), x[err.argmax()])


def test_every_float_near_the_seams_and_near_zero():
    # All floats within 2^14 ulps of each seam of either erf (0.921875; the table's 1, 2, 3 and its
    # clamp 4 - 2^-21), of +-1e-3, and of 3.9 and 2.8 (erf -> 1).
    steps = np.arange(-(1 << 14), 1 << 14, dtype=np.int64)
    centres = np.array([0.921875, 1e-3, 3.9, 2.8, 1.0, 2.0, 3.0, 4.0 - 2.0**-21, 4.0],
                       dtype=np.float32).view(np.int32).astype(np.int64)
    pos = (centres[:, None] + steps[None, :]).astype(np.int32).view(np.float32).ravel()
    x = np.concatenate([pos, -pos])
    err = float32_ulps(_erf(x), _ref_erf(x))
    assert err.max() <= 2.0, (err.max(), x[err.argmax()])


def test_strided_sweep_of_the_floats_below_4():
    # Every 61st float in [0, 4] (17.7M, an odd stride so each mantissa pattern mod 61 is hit), and
    # their negatives: past 4 the result is exactly +-1 (test_special_values).
    x = np.arange(0, 0x40800001, 61, dtype=np.uint32).view(np.float32)
    x = np.concatenate([x, -x[::7]])
    err = float32_ulps(_erf(x), _ref_erf(x))
    assert err.max() <= 2.0, (err.max(), x[err.argmax()])


def test_vector_lanes_and_scalar_tail_agree_bitwise():
    # The vectorized loop and its scalar remainder run different code (AVX2 lookups vs. loads from
    # a table); the same input must give the same bits wherever it lands. Shifting the array by
    # 1..7 moves every element between vector lanes and the tail of a 8k+r long loop.
    x = np.random.default_rng(11).uniform(-4.5, 4.5, 64 + 7).astype(np.float32)
    base = _erf(x)
    for shift in range(1, 8):
        got = _erf(x[shift:])
        assert np.array_equal(got.view(np.uint32), base[shift:].view(np.uint32)), shift


def _host_has(*flags):
    try:
        with open("/proc/cpuinfo") as f:
            have = set(re.search(r"^flags\s*:(.*)$", f.read(), re.M).group(1).split())
    except (OSError, AttributeError):
        return False
    return all(fl in have for fl in flags)


@pytest.mark.skipif(not _host_has("avx2", "fma"), reason="the table erf needs AVX2 and FMA")
def test_fused_gelu_kernel_vectorizes_the_table_erf_without_calls():
    x = lt.tensor(np.ones((64, 256), np.float32), device=DEV)
    y = F.gelu(x) + x
    lt.mark_step()
    src = "\n".join(lt.debug.kernel_sources())
    assert "vpermilvar.ps.256" in src  # the 8-lane table lookups, inlined into the loop
    assert not re.search(r"call .*@lt_erf", src), "the erf call was left out of line"
    assert np.isfinite(y.numpy()).all()


def test_special_values():
    x = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0, 1e-45, -1e-45, 1e-38, 3.4e38, -3.4e38, 4.0,
                  -3.9999998, 10.0] * 3, dtype=np.float32)  # odd patterns fill a vector and a tail
    got = _erf(x)
    assert np.isnan(got[2]) and np.isnan(got[15])
    expect = np.array([1, -1, np.nan, 0, -0.0, 1.4e-45, -1.4e-45, 1.1283792e-38, 1, -1, 1, -1, 1],
                      dtype=np.float32)
    ok = ~np.isnan(expect)
    np.testing.assert_allclose(got[:13][ok], expect[ok], rtol=1e-7, atol=0)
    assert np.signbit(got[4]) and not np.signbit(got[3])


@pytest.mark.parametrize("dtype,tdtype",
                         [(lt.float16, torch.float16), (lt.bfloat16, torch.bfloat16)])
def test_half_types_round_the_float32_result(dtype, tdtype):
    x32 = np.random.default_rng(8).uniform(-5, 5, 40_001).astype(np.float32)
    xt = torch.from_numpy(x32).to(tdtype)
    y = lt.tensor(x32, device=DEV).to(dtype).erf()
    lt.mark_step()
    got = torch.from_numpy(y.to(lt.float32).numpy())
    ref = torch.erf(xt.double()).to(tdtype).float()
    # Correctly rounded float64 erf, rounded once more: at most one half-type ulp apart.
    ulp = (ref.abs().to(tdtype).float() * (2.0**-10 if tdtype == torch.float16 else 2.0**-7))
    assert bool(((got - ref).abs() <= ulp + 1e-7).all())


def test_gelu_matches_float64_torch():
    x = np.concatenate([np.linspace(-12, 12, 1_000_001, dtype=np.float32),
                        np.random.default_rng(9).standard_normal(100_000).astype(np.float32)])
    y = F.gelu(lt.tensor(x, device=DEV))
    lt.mark_step()
    got = y.numpy().astype(np.float64)
    ref = torch.nn.functional.gelu(torch.from_numpy(x.astype(np.float64))).numpy()
    # For x << 0, gelu = x (1 + erf(x / sqrt 2)) / 2 cancels; float32 erf's ulp near -1 then bounds
    # the absolute error by about |x| 2^-25 per ulp (torch's float32 gelu has the same bound).
    bound = 4 * np.spacing(np.abs(ref).astype(np.float32)).astype(np.float64) + np.abs(x) * 2.0**-23
    assert (np.abs(got - ref) <= bound).all(), np.max(np.abs(got - ref) / bound)
