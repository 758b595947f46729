"""Row kernels with large outputs store them with non-temporal stores on x86 (a separate streaming
body, backends/cpu/streaming_stores.h). Oracle: torch / numpy in float64."""
import platform

import numpy as np
import pytest
import torch

import lazytensor as lt
import lazytensor.nn.functional as F

DEV = "lazy:cpu"
pytestmark = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                                reason="streaming stores are emitted for x86 only")


def _sources():
    return "\n".join(lt.debug.kernel_sources())


def _layer_norm64(x, w, b):
    return torch.nn.functional.layer_norm(torch.from_numpy(x).double(), (x.shape[-1],),
                                          torch.from_numpy(w).double(), torch.from_numpy(b).double())


def test_large_gelu_layer_norm_residual_streams_and_matches_torch():
    rng = np.random.default_rng(21)
    x, r = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))  # 4 MiB each
    w, b = (rng.standard_normal(1024).astype(np.float32) for _ in range(2))
    y = F.gelu(F.layer_norm(lt.tensor(x, device=DEV), (1024,), lt.tensor(w, device=DEV),
                            lt.tensor(b, device=DEV))) + lt.tensor(r, device=DEV)
    lt.mark_step()
    src = _sources()
    assert "!nontemporal" in src and "llvm.x86.sse.sfence" in src
    ref = (torch.nn.functional.gelu(_layer_norm64(x, w, b)) + torch.from_numpy(r).double()).numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-5)


def test_small_row_kernel_keeps_plain_stores():
    x = np.random.default_rng(22).standard_normal((64, 256)).astype(np.float32)
    y = lt.tensor(x, device=DEV).softmax(-1)
    lt.mark_step()
    assert ".stream" not in _sources()
    ref = torch.softmax(torch.from_numpy(x).double(), -1).numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("cols", [1024, 1001, 333])
def test_streamed_rows_of_any_length(cols):
    # Rows that do not start on a 32-byte boundary (1001 and 333 floats) leave their stores plain
    # where alignment cannot be proven; every length must give the same values.
    rows = (4 << 20) // (4 * cols) + 3
    x = np.random.default_rng(cols).standard_normal((rows, cols)).astype(np.float32) * 3 + 1
    y = lt.tensor(x, device=DEV).softmax(-1)
    lt.mark_step()
    assert ".stream" in _sources()
    ref = torch.softmax(torch.from_numpy(x).double(), -1).numpy()
    np.testing.assert_allclose(y.numpy(), ref, rtol=1e-5, atol=1e-7)


def test_in_place_row_update_of_a_large_tensor():
    # x -= mean(x, -1): the output may take x's own buffer (the in-place body, never streamed).
    x0 = np.random.default_rng(23).standard_normal((2048, 1024)).astype(np.float32) + 5
    x = lt.tensor(x0, device=DEV)
    for _ in range(3):
        x.sub_(x.mean(-1, keepdim=True))
        lt.mark_step()
    ref = torch.from_numpy(x0).double()
    for _ in range(3):
        ref = ref - ref.mean(-1, keepdim=True)
    np.testing.assert_allclose(x.numpy(), ref.numpy(), atol=1e-5)
