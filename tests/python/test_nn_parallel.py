"""lt.nn.parallel: the import path PyTorch scripts use, with PyTorch's behaviour on one process."""
import re

import numpy as np
import pytest
import torch

import lazytensor as lt


def test_nn_parallel_import_path_as_in_pytorch():
    # nanoGPT's import; DataParallel on one device is the module, wrapped; DDP without a process
    # group is PyTorch's error.
    from lazytensor.nn.parallel import DataParallel, DistributedDataParallel as DDP
    rng = np.random.default_rng(4)
    lin = lt.nn.Linear(3, 2)
    x = lt.tensor(rng.standard_normal((4, 3)).astype(np.float32))
    dp = DataParallel(lin)
    np.testing.assert_allclose(dp(x).numpy(), lin(x).numpy())
    assert list(dp.state_dict()) == ["module." + k for k in lin.state_dict()]
    with pytest.raises(ValueError, match="process group"):
        torch.nn.parallel.DistributedDataParallel(torch.nn.Linear(3, 2))
    with pytest.raises(ValueError, match="process group"):
        DDP(lin)


def _one_rank_group_env(monkeypatch):
    """torchrun's variables for a group of this process alone, on a free port."""
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    for k, v in dict(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                     MASTER_PORT=str(port)).items():
        monkeypatch.setenv(k, v)


@pytest.mark.parametrize("mode,want", [("flat", 2), ("per_tensor", 5), ("mixed", 4),
                                       ("bucket", 5)])
def test_ddp_bucket_averaging_modes(monkeypatch, mode, want):
    """One bucket's averaging (lazytensor._C.distributed.average_gradients, DDP's after each
    backward) in a group of one rank: the values come back unchanged, written into the gradient
    tensors themselves. Two buckets of gradients (and an empty one): one all_reduce per bucket
    (flat), per gradient (per_tensor), or per large gradient plus one per bucket for the small
    ones (mixed: the two of 70,000 elements alone, and the second bucket's one small gradient
    alone); bucket tags every all_reduce with its bucket's call group."""
    import lazytensor.distributed as dist
    from lazytensor._C import distributed as _D
    _one_rank_group_env(monkeypatch)
    monkeypatch.setenv("LT_DDP_REDUCE", mode)
    rng = np.random.default_rng(11)
    sizes = [(70000,), (2, 5), (20,), (350, 200), (5,)]
    values = [rng.standard_normal(s).astype(np.float32) for s in sizes]
    dist.init_process_group("gloo")
    try:
        params = [lt.zeros(s, device="lazy").requires_grad_() for s in sizes]
        grads = []
        for p, v in zip(params, values):
            p.grad = lt.tensor(v, device="lazy") * 1
            grads.append(p.grad)
        lt.mark_step()
        _D.average_gradients([params[:3], [], params[3:]])
        lt.mark_step()
        steps = [ln for ln in lt.metrics.last_graph()["grouping"].splitlines()
                 if ln.split(":")[0].endswith("all_reduce")]
        assert len(steps) == want, steps
        # The averaged gradients are views of the reduced buffers (lowering/output_views.h): no
        # kernel copies them out of an all_reduce's result.
        copies = [ln for ln in lt.metrics.last_graph()["grouping"].splitlines()
                  if ln.startswith("k") and ":all_reduce" in ln]
        assert not copies, copies
        groups = {m for ln in steps for m in re.findall(r"call group=(\d+)", ln)}
        assert groups == ({"1", "2"} if mode == "bucket" else set()), steps
        for p, g, v in zip(params, grads, values):
            np.testing.assert_allclose(g.numpy(), v, rtol=1e-6)  # the tensor the caller held
            assert p.grad is not None
            np.testing.assert_allclose(p.grad.numpy(), v, rtol=1e-6)
    finally:
        dist.destroy_process_group()


def test_ddp_reduce_mode_rejects_unknown_values(monkeypatch):
    """A bad LT_DDP_REDUCE is a clear error at the first backward through DDP (in a group of one
    rank; the variable is read there, as every rank reads it), and the process keeps working."""
    import lazytensor.distributed as dist
    from lazytensor.nn.parallel import DistributedDataParallel as DDP
    _one_rank_group_env(monkeypatch)
    rng = np.random.default_rng(12)
    x = lt.tensor(rng.standard_normal((4, 3)).astype(np.float32), device="lazy")
    dist.init_process_group("gloo")
    try:
        model = DDP(lt.nn.Linear(3, 2).to("lazy"))
        monkeypatch.setenv("LT_DDP_REDUCE", "bogus")
        with pytest.raises(ValueError, match="LT_DDP_REDUCE=bogus: expected flat, per_tensor, "
                                             "mixed or bucket"):
            model(x).sum().backward()
        monkeypatch.setenv("LT_DDP_REDUCE", "per_tensor")
        model.zero_grad()
        model(x).sum().backward()
        assert model.module.weight.grad.shape == (2, 3)
        np.testing.assert_allclose(model.module.bias.grad.numpy(), [4.0, 4.0], rtol=1e-6)
    finally:
        dist.destroy_process_group()


def test_ddp_averages_once_per_backward_after_two_forwards(monkeypatch):
    """Two forwards (two micro-batches in one loss) before one backward: the gradients are averaged
    once (per_tensor: one all_reduce per parameter in the step's graph), as the C++ wrapper does.
    A backward that fails drops the queued averaging, and the next forward queues it again."""
    import lazytensor.distributed as dist
    from lazytensor.nn.parallel import DistributedDataParallel as DDP
    _one_rank_group_env(monkeypatch)
    monkeypatch.setenv("LT_DDP_REDUCE", "per_tensor")
    rng = np.random.default_rng(13)
    x = lt.tensor(rng.standard_normal((4, 3)).astype(np.float32), device="lazy")
    dist.init_process_group("gloo")
    try:
        net = lt.nn.Linear(3, 2).to("lazy")
        model = DDP(net)
        lt.mark_step()
        (model(x).sum() + model(x * 2).sum()).backward()
        lt.mark_step()
        steps = [ln for ln in lt.metrics.last_graph()["grouping"].splitlines()
                 if ln.split(":")[0].endswith("all_reduce")]
        assert len(steps) == 2, steps  # weight and bias, once each
        np.testing.assert_allclose(net.bias.grad.numpy(), [8.0, 8.0], rtol=1e-6)
        model.zero_grad()
        y = model(x)
        with pytest.raises(RuntimeError):
            y.sum().backward(lt.ones((2,), device="lazy"))  # a gradient of the wrong shape
        model.zero_grad()
        model(x).sum().backward()
        lt.mark_step()
        steps = [ln for ln in lt.metrics.last_graph()["grouping"].splitlines()
                 if ln.split(":")[0].endswith("all_reduce")]
        assert len(steps) == 2, steps
        np.testing.assert_allclose(net.bias.grad.numpy(), [4.0, 4.0], rtol=1e-6)
    finally:
        dist.destroy_process_group()


@pytest.mark.parametrize("mode,calls", [("bucket", 1), ("per_tensor", 4)])
def test_a_bucket_call_group_is_one_gloo_call(tmp_path, mode, calls):
    """On the CPU backend a bucket's all_reduces (bucket mode: one call group) run as one engine
    call over their operands packed together (backends/host_collective.h): LT_PROFILE's trace
    shows one collective per bucket a step, where per_tensor shows one per gradient; the
    gradients equal the local ones (a group of one rank)."""
    import json
    import os
    import subprocess
    import sys
    out = tmp_path / "trace.json"
    code = """
import socket
import numpy as np
import lazytensor as lt
import lazytensor.distributed as dist
from lazytensor.nn.parallel import DistributedDataParallel as DDP
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
import os
os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1",
                  MASTER_PORT=str(port))
dist.init_process_group("gloo")
lt.manual_seed(0)
net = lt.nn.Sequential(lt.nn.Linear(3, 5), lt.nn.Tanh(), lt.nn.Linear(5, 2)).to("lazy")
model = DDP(net)
x = lt.tensor(np.random.default_rng(1).standard_normal((7, 3)).astype(np.float32), device="lazy")
for _ in range(2):
    model.zero_grad()
    model(x).square().sum().backward()
    lt.mark_step()
got = [p.grad.numpy() for p in net.parameters()]
net.zero_grad()
net(x).square().sum().backward()
for g, p in zip(got, net.parameters()):
    np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-6, atol=1e-7)
dist.destroy_process_group()
print("ok")
"""
    env = dict(os.environ, LT_PROFILE=str(out), LT_CACHE_DIR="off", LT_DDP_REDUCE=mode)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0 and "ok" in r.stdout, r.stderr
    events = json.loads(out.read_text())["traceEvents"]
    reduces = [e for e in events if e["cat"] == "kernel" and e["name"].endswith("_all_reduce")]
    assert len(reduces) == 2 * calls, [e["name"] for e in reduces]  # two steps
