"""conv2d as a library prim (oneDNN forward / backward-data / backward-weights on the CPU, direct
loops on the reference interpreter, the sliding-window expansion elsewhere): values and gradients
against PyTorch (torch 2.13, CPU) on random inputs for stride, padding, dilation,
groups and bias; float64 finite differences; pinned library-call and kernel counts; bad input."""
import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

CASES = [  # (N, C, H, W, O, kh, kw, stride, padding, dilation, groups, bias)
    (2, 3, 9, 8, 4, 3, 3, 1, 1, 1, 1, True),
    (2, 4, 11, 10, 6, 3, 2, 2, (1, 0), 1, 2, True),
    (1, 2, 12, 12, 3, 3, 3, (3, 2), 2, 2, 1, False),
    (3, 4, 7, 7, 8, 3, 3, 1, 1, 1, 4, True),     # depthwise, channel multiplier 2
    (2, 3, 10, 10, 5, 1, 1, 2, 0, 1, 1, True),   # 1x1, strided
    (1, 2, 6, 13, 2, 2, 5, 1, (0, 3), (1, 2), 1, True),
]
DEVICES = ["cpu", "lazy", "lazy:reference"]


def library_steps(grouping):
    return grouping.count(": conv "), grouping.count(": gemm ")


def cpu_has_onednn():
    """Whether this build's CPU backend has oneDNN, seen from its matmul (a GEMM step), so the conv
    tests below still fail when convolution alone stops reaching the library."""
    a = lt.ones(4, 4, device="lazy:cpu")
    (a @ a).numpy()
    return library_steps(lt.metrics.last_graph()["grouping"])[1] == 1


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("device", DEVICES)
def test_conv2d_values_and_gradients_match_torch(case, device, rng):
    N, C, H, W, O, kh, kw, s, p, d, g, has_bias = case
    arrays = [rng.standard_normal((N, C, H, W)), rng.standard_normal((O, C // g, kh, kw))]
    if has_bias:
        arrays.append(rng.standard_normal(O))
    arrays = [a.astype(np.float32) for a in arrays]
    lts = [lt.tensor(a, device=device, requires_grad=True) for a in arrays]
    tts = [torch.tensor(a, requires_grad=True) for a in arrays]
    yl = F.conv2d(*lts[:2], lts[2] if has_bias else None, s, p, d, g)
    yt = TF.conv2d(*tts[:2], tts[2] if has_bias else None, s, p, d, g)
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
    r = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yl.backward(lt.tensor(r, device=device))
    yt.backward(torch.tensor(r))
    for name, a, b in zip(["input", "weight", "bias"], lts, tts):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=2e-4, atol=2e-4, err_msg=name)


@pytest.mark.parametrize("H, W, kh, kw, stride, padding, dilation", [
    (5, 5, 2, 2, 2**62, 0, 1), (5, 7, 2, 3, (2**40, 2), 1, 1), (6, 6, 3, 3, (7, 2**50), (1, 0), (2, 1))])
@pytest.mark.parametrize("device", DEVICES)
def test_strides_past_the_input_give_one_output(H, W, kh, kw, stride, padding, dilation, device, rng):
    # PyTorch computes these (one output along the dim); oneDNN refuses such strides, so the CPU
    # backend passes the smallest stride with the same single window. Reference: torch in float64
    # (its float32 training path goes to oneDNN and fails here).
    x, w = rng.standard_normal((2, 2, H, W)), rng.standard_normal((3, 2, kh, kw))
    tx, tw = (torch.tensor(a, requires_grad=True) for a in (x, w))
    lx, lw = (lt.tensor(a.astype(np.float32), device=device, requires_grad=True) for a in (x, w))
    yt = TF.conv2d(tx, tw, None, stride, padding, dilation)
    yl = F.conv2d(lx, lw, None, stride, padding, dilation)
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)
    r = rng.standard_normal(tuple(yt.shape))
    yt.backward(torch.tensor(r))
    yl.backward(lt.tensor(r.astype(np.float32), device=device))
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=2e-4, atol=2e-4)
    np.testing.assert_allclose(lw.grad.numpy(), tw.grad.numpy(), rtol=2e-4, atol=2e-4)


def test_prims_are_traced_on_every_backend(tmp_path):
    """conv2d and its gradients are traced as prims on every backend and dtype, one graph (trace
    key) for lazy:cpu and lazy:reference; lowering runs them as library steps where the backend has
    them (oneDNN: float32 on the CPU; the reference: every float dtype) and expands them elsewhere
    (float64 on the CPU: no conv step, loop kernels and GEMMs)."""
    def trace(device, dtype):
        x = lt.ones(2, 2, 6, 6, dtype=dtype, device=device, requires_grad=True)
        w = lt.ones(3, 2, 3, 3, dtype=dtype, device=device, requires_grad=True)
        loss = (F.conv2d(x, w, padding=1, stride=2) ** 2).sum()
        gx, gw = lt.autograd.grad([loss], [x, w])
        path = tmp_path / f"{device}_{dtype}.json"
        key = lt.debug.dump(path, gx, gw, data=False)
        assert {"conv2d", "conv2d_grad_input", "conv2d_grad_weight"} <= {
            n["op"] for n in json.loads(path.read_text())["nodes"]}
        lt.sync(gx, gw)
        return key, library_steps(lt.metrics.last_graph()["grouping"])[0], gx, gw
    for dtype in (lt.float32, lt.float64):
        cpu, ref = trace("lazy:cpu", dtype), trace("lazy:reference", dtype)
        assert cpu[0] == ref[0]
        assert ref[1] == 3
        assert cpu[1] == (3 if dtype == lt.float32 and cpu_has_onednn() else 0)
        for a, b in zip(cpu[2:], ref[2:]):
            np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-4)


def finite_difference_check(fn, x, eps=1e-6, rtol=1e-5, atol=1e-7, device="lazy:reference"):
    xt = lt.tensor(x, dtype=lt.float64, device=device, requires_grad=True)
    y = fn(xt)
    r = np.random.default_rng(1).standard_normal(tuple(y.shape))
    (y * lt.tensor(r, dtype=lt.float64, device=device)).sum().backward()
    numeric = np.zeros_like(x)
    for i in np.ndindex(*x.shape):
        hi, lo = x.copy(), x.copy()
        hi[i] += eps
        lo[i] -= eps
        f = lambda v: float((fn(lt.tensor(v, dtype=lt.float64, device=device)).numpy() * r).sum())
        numeric[i] = (f(hi) - f(lo)) / (2 * eps)
    np.testing.assert_allclose(xt.grad.numpy(), numeric, rtol=rtol, atol=atol)


@pytest.mark.parametrize("stride, padding, dilation, groups", [(1, 1, 1, 1), ((2, 1), (1, 2), (1, 2), 2)])
def test_prim_gradients_match_float64_finite_differences(stride, padding, dilation, groups, rng):
    x = rng.standard_normal((2, 4, 7, 6))
    w = rng.standard_normal((4, 4 // groups, 3, 2))
    b = lt.tensor(rng.standard_normal(4), dtype=lt.float64, device="lazy:reference")
    wt = lt.tensor(w, dtype=lt.float64, device="lazy:reference")
    xt = lt.tensor(x, dtype=lt.float64, device="lazy:reference")
    finite_difference_check(lambda t: F.conv2d(t, wt, b, stride, padding, dilation, groups), x)
    finite_difference_check(lambda t: F.conv2d(xt, t, b, stride, padding, dilation, groups), w)


def test_conv_bias_relu_forward_is_one_library_call(rng):
    if not cpu_has_onednn():
        pytest.skip("built without oneDNN")
    x = lt.tensor(rng.standard_normal((4, 3, 12, 12)).astype(np.float32), device="lazy:cpu")
    w = lt.tensor(rng.standard_normal((8, 3, 3, 3)).astype(np.float32), device="lazy:cpu")
    b = lt.tensor(rng.standard_normal(8).astype(np.float32), device="lazy:cpu")
    lt.mark_step()
    y = F.relu(F.conv2d(x, w, b, padding=1))
    lt.mark_step()
    g = lt.metrics.last_graph()
    assert library_steps(g["grouping"]) == (1, 0), g["grouping"]
    assert g["kernels"] == 1, g["grouping"]  # conv + bias + relu: one oneDNN call, no kernel
    assert "+bias +relu" in g["grouping"]
    want = TF.relu(TF.conv2d(torch.tensor(x.numpy()), torch.tensor(w.numpy()), torch.tensor(b.numpy()), padding=1))
    np.testing.assert_allclose(y.numpy(), want.numpy(), rtol=1e-4, atol=1e-4)


def test_eager_cpu_conv_is_one_launch(rng):
    if not cpu_has_onednn():
        pytest.skip("built without oneDNN")
    x = lt.tensor(rng.standard_normal((2, 3, 8, 8)).astype(np.float32))
    w = lt.tensor(rng.standard_normal((4, 3, 3, 3)).astype(np.float32))
    b = lt.tensor(rng.standard_normal(4).astype(np.float32))
    before = lt.metrics.counters()["kernel_launches"]
    y = F.conv2d(x, w, b, padding=1)
    assert lt.metrics.counters()["kernel_launches"] - before == 1
    assert tuple(y.shape) == (2, 4, 8, 8)


def test_small_cnn_train_step_counts(rng):
    """Forward, cross_entropy, backward and SGD of conv-relu-pool-conv-relu-pool-linear: one graph
    with a pinned number of library convolutions (2 forward, 2 grad_weight, 1 grad_input: the
    network's input needs no gradient), GEMMs and loop kernels."""
    shapes = [(8, 1, 3, 3), (8,), (16, 8, 3, 3), (16,), (10, 16 * 4 * 4), (10,)]
    if not cpu_has_onednn():
        pytest.skip("built without oneDNN")
    dev = "lazy:cpu"
    ws = [lt.tensor((rng.standard_normal(s) * 0.1).astype(np.float32), device=dev, requires_grad=True)
          for s in shapes]
    x = lt.tensor(rng.standard_normal((8, 1, 16, 16)).astype(np.float32), device=dev)
    y = lt.tensor(rng.integers(0, 10, 8), device=dev)
    lt.mark_step()
    lt.metrics.reset()
    for _ in range(2):
        h = F.max_pool2d(F.relu(F.conv2d(x, ws[0], ws[1], padding=1)), 2)
        h = F.max_pool2d(F.relu(F.conv2d(h, ws[2], ws[3], padding=1)), 2)
        loss = F.cross_entropy(F.linear(h.reshape(8, -1), ws[4], ws[5]), y)
        loss.backward()
        with lt.no_grad():
            for w in ws:
                w -= w.grad * 0.01
                w.grad = None
        lt.mark_step()
    g = lt.metrics.last_graph()
    assert lt.metrics.counters()["graph_compiles"] == 1
    assert library_steps(g["grouping"]) == (5, 3), g["grouping"]
    # 5 convs + 3 GEMMs + 16 loop kernels: the pools' forward (2) and backward (4: each window's
    # first max, then the routed gradient times the ReLU mask), cross_entropy and its gradient (4:
    # the row max and sum of exp come from one two-output row kernel; the target pick is a
    # gather), and the 6 SGD updates (the bias gradients' reductions fused into theirs).
    assert g["kernels"] == 24, g["grouping"]


@pytest.mark.parametrize("call, message", [
    (lambda d: F.conv2d(lt.zeros(1, 3, 5, 5, device=d), lt.zeros(4, 2, 3, 3, device=d)),
     r"conv2d: input \[1, 3, 5, 5\] and weight \[4, 2, 3, 3\] do not match with groups=1"),
    (lambda d: F.conv2d(lt.zeros(1, 4, 5, 5, device=d), lt.zeros(3, 2, 3, 3, device=d), groups=2),
     r"conv2d: input \[1, 4, 5, 5\] and weight \[3, 2, 3, 3\] .*divisible by groups"),
    (lambda d: F.conv2d(lt.zeros(1, 4, 5, 5, device=d), lt.zeros(4, 2, 3, 3, device=d), groups=3),
     r"conv2d: input \[1, 4, 5, 5\] and weight \[4, 2, 3, 3\] do not match with groups=3"),
    (lambda d: F.conv2d(lt.zeros(1, 3, 2, 2, device=d), lt.zeros(4, 3, 5, 5, device=d), padding=1),
     r"conv2d: input \[1, 3, 2, 2\] and weight \[4, 3, 5, 5\]: input size 2 with padding 1 is smaller than "
     r"the kernel extent 5"),
])
@pytest.mark.parametrize("device", DEVICES)
def test_bad_input_names_conv2d_and_the_shapes(call, message, device):
    with pytest.raises(RuntimeError, match=message):
        call(device)


def test_expansion_without_a_conv_library_matches_torch(tmp_path):
    """LT_GEMM=0 takes oneDNN away (as on CUDA without cuDNN or a CPU without oneDNN): conv2d and
    its gradients are still traced as prims, lowering expands them into the sliding-window + im2col
    GEMM form (no conv step), and they still match PyTorch."""
    script = tmp_path / "expand.py"
    script.write_text(
        "import numpy as np, torch, lazytensor as lt\n"
        "import lazytensor.nn.functional as F\n"
        "rng = np.random.default_rng(0)\n"
        "a = [rng.standard_normal(s).astype(np.float32) for s in [(2, 4, 9, 8), (6, 2, 3, 3), (6,)]]\n"
        "for dev in ['cpu', 'lazy']:\n"
        "    l = [lt.tensor(v, device=dev, requires_grad=True) for v in a]\n"
        "    t = [torch.tensor(v, requires_grad=True) for v in a]\n"
        "    yl, yt = F.conv2d(*l, 2, 1, (1, 2), 2), torch.nn.functional.conv2d(*t, 2, 1, (1, 2), 2)\n"
        "    assert '= conv2d(' in lt.debug.ir_text(yl) or dev == 'cpu'\n"
        "    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-4, atol=1e-4)\n"
        "    (yl * yl).sum().backward(); (yt * yt).sum().backward()\n"
        "    for u, v in zip(l, t):\n"
        "        np.testing.assert_allclose(u.grad.numpy(), v.grad.numpy(), rtol=2e-4, atol=2e-3)\n"
        "    assert ': conv ' not in lt.metrics.last_graph()['grouping']\n"
        "print('ok')\n")
    env = dict(os.environ, LT_GEMM="0", LT_CACHE_DIR="off")
    env["PYTHONPATH"] = os.pathsep.join([str(pathlib.Path(lt.__file__).parent.parent), env.get("PYTHONPATH", "")])
    r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
