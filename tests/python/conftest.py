"""Shared fixtures and checks. Results are compared against NumPy (float64 references) and, for
dtype rules, against PyTorch (torch 2.13 in the project's .venv) when it is installed."""
import os
import pathlib
import subprocess
import sys

os.environ.setdefault("LT_CACHE_DIR", "off")  # no disk cache: every run compiles what it checks

try:
    import lazytensor  # noqa: F401
except ImportError:  # run straight from a checkout after `cmake --build build`
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "build" / "python"))

import numpy as np
import pytest

import lazytensor as lt

DEVICES = ["cpu", "lazy"]

# Tolerances per result dtype against a float64 NumPy reference.
TOLERANCES = {
    "float64": (1e-10, 1e-12),
    "float32": (2e-5, 2e-6),
    "float16": (2e-3, 2e-3),
    "bfloat16": (1e-2, 1e-2),
}


@pytest.fixture(params=DEVICES)
def device(request):
    return request.param


@pytest.fixture
def rng(request):
    """A generator seeded from the test's name: fixed per test, different across tests."""
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(request.node.name)) % (2**32)
    return np.random.default_rng(seed)


@pytest.fixture(autouse=True)
def _no_pending_state_between_tests():
    yield
    lt.mark_step()


def torch_or_skip():
    return pytest.importorskip("torch")


def lt_dtype_for(np_dtype):
    return getattr(lt, np.dtype(np_dtype).name)


def assert_close(t, expected, dtype=None, rtol=None, atol=None):
    """`t` (a lazytensor.Tensor) has the dtype and shape expected and matches `expected`."""
    assert isinstance(t, lt.Tensor), type(t)
    expected = np.asarray(expected)
    if dtype is not None:
        assert t.dtype == dtype, f"dtype {t.dtype}, expected {dtype}"
    got = t.float().numpy() if t.dtype == lt.bfloat16 else t.numpy()
    assert tuple(t.shape) == expected.shape, f"shape {tuple(t.shape)}, expected {expected.shape}"
    assert got.shape == expected.shape
    name = t.dtype.name
    if name in TOLERANCES:
        r, a = TOLERANCES[name]
        np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64),
                                   rtol=r if rtol is None else rtol, atol=a if atol is None else atol)
    else:
        np.testing.assert_array_equal(got, expected.astype(got.dtype))


def float32_ulps(got, ref):
    """|got - ref| in ulps of the float64 reference's float32 neighbourhood; subnormal results
    count in 2^-149 (the spacing below float32's smallest normal)."""
    spacing = np.spacing(np.maximum(np.abs(ref).astype(np.float32), np.float32(2.0**-126)))
    return np.abs(got.astype(np.float64) - ref) / spacing.astype(np.float64)


def run_isolated(code, timeout=120):
    """Runs `code` (after `import lazytensor as lt, numpy as np`) in a child interpreter, so that a
    crash of the C++ runtime fails one test instead of killing the whole run."""
    env = dict(os.environ)
    pkg_parent = os.path.dirname(os.path.dirname(os.path.abspath(lt.__file__)))
    env["PYTHONPATH"] = pkg_parent + os.pathsep + env.get("PYTHONPATH", "")
    script = "import lazytensor as lt\nimport numpy as np\n" + code
    return subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                          timeout=timeout)


def crashes(code):
    """True when `code` kills the interpreter (a signal, not a Python exception)."""
    return run_isolated(code).returncode < 0


def torch_attention(q, k, v, mask=None, is_causal=False, scale=None, enable_gqa=False):
    """torch's F.scaled_dot_product_attention, the attention oracle (is_causal given to it as the
    top-left causal mask it means). A bool mask keeps True; a float mask adds."""
    import torch
    if is_causal:
        mask = torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril()
    return torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale,
                                                            enable_gqa=enable_gqa)
