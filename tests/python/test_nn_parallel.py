"""lt.nn.parallel: the import path PyTorch scripts use, with PyTorch's behaviour on one process."""
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


@pytest.mark.parametrize("mode,want", [("flat", 1), ("per_tensor", 5), ("mixed", 3),
                                       ("bucket", 5)])
def test_ddp_bucket_averaging_modes(monkeypatch, mode, want):
    """One bucket's averaging (lt.nn.parallel._averaged) in a group of one rank: the values come
    back unchanged, and the step has one all_reduce per bucket (flat), per gradient (per_tensor),
    or per large gradient plus one for the small ones (mixed: the two of 70,000 elements alone)."""
    import lazytensor.distributed as dist
    from lazytensor._C import distributed as _D
    from lazytensor.nn.parallel import _averaged
    _one_rank_group_env(monkeypatch)
    rng = np.random.default_rng(11)
    sizes = [(70000,), (2, 5), (20,), (350, 200), (5,)]
    values = [rng.standard_normal(s).astype(np.float32) for s in sizes]
    dist.init_process_group("gloo")
    try:
        grads = [lt.tensor(v, device="lazy") * 1 for v in values]
        out = _averaged(_D, grads, mode, 1, group=4)
        pos = {id(g): i for i, g in enumerate(grads)}
        assert sorted(pos[id(g)] for g, _ in out) == list(range(len(grads)))  # each once
        lt.mark_step()
        steps = [ln for ln in lt.metrics.last_graph()["grouping"].splitlines()
                 if ln.split(":")[0].endswith("all_reduce")]
        assert len(steps) == want, steps
        # bucket: every all_reduce in the call group, which the grouping names
        assert all(("call group=4" in ln) == (mode == "bucket") for ln in steps), steps
        for g, a in out:
            np.testing.assert_allclose(a.numpy(), values[pos[id(g)]], rtol=1e-6)
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
