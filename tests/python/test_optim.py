"""lazytensor.optim against torch.optim over several steps; state_dict round trips; schedulers;
and the lazy training step: forward + cross_entropy + backward + AdamW step + zero_grad compiles
exactly ONE graph over 20 steps, matches the same script on cpu, and never recompiles for a new
learning rate. Plus examples/python/train_mlp.py reaching its accuracy on lazy and cpu."""
import copy
import math
import os
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.nn.functional as F

torch = pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]

CONFIGS = [
    ("SGD", dict(lr=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.9)),
    ("SGD", dict(lr=0.05, momentum=0.9, dampening=0.3, weight_decay=0.01)),
    ("SGD", dict(lr=0.05, momentum=0.8, nesterov=True, weight_decay=0.1)),
    ("SGD", dict(lr=0.05, momentum=0.8, maximize=True)),
    ("Adam", dict(lr=0.01)),
    ("Adam", dict(lr=0.01, betas=(0.8, 0.99), weight_decay=0.1, eps=1e-6)),
    ("Adam", dict(lr=0.01, amsgrad=True)),
    ("AdamW", dict(lr=0.01)),
    ("AdamW", dict(lr=0.02, weight_decay=0.3, amsgrad=True)),
]


@pytest.mark.parametrize("name,kw", CONFIGS, ids=[f"{n}-{i}" for i, (n, _) in enumerate(CONFIGS)])
def test_optimizer_matches_torch(name, kw, device, rng):
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    b0 = rng.standard_normal(3).astype(np.float32)
    xs = [rng.standard_normal((5, 4)).astype(np.float32) for _ in range(5)]
    lp = [nn.Parameter(lt.tensor(w0, device=device)), nn.Parameter(lt.tensor(b0, device=device))]
    tp = [torch.nn.Parameter(torch.tensor(w0)), torch.nn.Parameter(torch.tensor(b0))]
    lo = getattr(lt.optim, name)(lp, **kw)
    to = getattr(torch.optim, name)(tp, **kw)
    for x in xs:
        for opt, (w, b), mod, dev in ((lo, lp, lt, device), (to, tp, torch, None)):
            opt.zero_grad()
            xx = lt.tensor(x, device=dev) if mod is lt else torch.tensor(x)
            loss = ((xx @ w + b).tanh() ** 2).sum()
            loss.backward()
            opt.step()
        for p, q in zip(lp, tp):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=2e-5, atol=2e-6)


def test_param_groups_and_state_dict(device, rng):
    a = nn.Parameter(lt.tensor(rng.standard_normal(3).astype(np.float32), device=device))
    b = nn.Parameter(lt.tensor(rng.standard_normal(2).astype(np.float32), device=device))
    opt = lt.optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    assert [g["lr"] for g in opt.param_groups] == [0.1, 0.5]
    assert opt.param_groups[0]["betas"] == (0.9, 0.999)

    def step():
        opt.zero_grad()
        ((a * a).sum() + (b ** 3).sum()).backward()
        opt.step()

    step()
    step()
    sd = copy.deepcopy(opt.state_dict())  # its tensors alias the live state, as in PyTorch
    assert sorted(sd["state"]) == [0, 1] and sd["state"][0]["step"] == 2
    assert [g["params"] for g in sd["param_groups"]] == [[0], [1]]
    saved = [a.numpy(), b.numpy()]
    step()
    want = [a.numpy(), b.numpy()]
    # Restore parameters and optimizer state, take the same step again: same result.
    with lt.no_grad():
        a.copy_(lt.tensor(saved[0], device=device))
        b.copy_(lt.tensor(saved[1], device=device))
    opt2 = lt.optim.Adam([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    opt2.load_state_dict(sd)
    assert opt2.state[a]["step"] == 2
    opt = opt2
    step()
    np.testing.assert_allclose(a.numpy(), want[0], rtol=1e-6)
    np.testing.assert_allclose(b.numpy(), want[1], rtol=1e-6)
    with pytest.raises(ValueError):
        opt.load_state_dict({"state": {}, "param_groups": [sd["param_groups"][0]]})
    with pytest.raises(ValueError, match="more than one parameter group"):
        lt.optim.SGD([a, a], lr=0.1)
    with pytest.raises(ValueError, match="Invalid learning rate"):
        lt.optim.Adam([a], lr=-1)
    with pytest.raises(ValueError, match="empty parameter list"):
        lt.optim.SGD([], lr=0.1)


def test_zero_grad_modes(device):
    p = nn.Parameter(lt.ones(3, device=device))
    opt = lt.optim.SGD([p], lr=0.1)
    (p * 2).sum().backward()
    opt.zero_grad(set_to_none=False)
    assert p.grad is not None and np.all(p.grad.numpy() == 0)
    opt.zero_grad()
    assert p.grad is None


@pytest.mark.parametrize("kind", ["StepLR", "CosineAnnealingLR"])
def test_schedulers_match_torch(kind):
    args = {"StepLR": dict(step_size=3, gamma=0.5), "CosineAnnealingLR": dict(T_max=7, eta_min=0.01)}[kind]
    lo = lt.optim.SGD([nn.Parameter(lt.ones(1))], lr=0.3, momentum=0.9)
    to = torch.optim.SGD([torch.nn.Parameter(torch.ones(1))], lr=0.3, momentum=0.9)
    ls = getattr(lt.optim.lr_scheduler, kind)(lo, **args)
    ts = getattr(torch.optim.lr_scheduler, kind)(to, **args)
    got, want = [], []
    for _ in range(20):  # past T_max: cosine goes back up, as in PyTorch
        lo.step()
        to.step()
        ls.step()
        ts.step()
        got.append(ls.get_last_lr()[0])
        want.append(ts.get_last_lr()[0])
    np.testing.assert_allclose(got, want, rtol=1e-12)
    assert len(set(got)) > 2


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


def _train(device, steps=20, scheduler=True):
    """A PyTorch-style loop; returns (losses, graph_compiles during the loop, syncs by reason)."""
    lt.manual_seed(11)
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((16, 10)).astype(np.float32) for _ in range(4)]
    data = [(lt.tensor(x, device=device), lt.tensor(x[:, :4].argmax(1), device=device)) for x in xs]
    model = MLP().to(device)
    opt = lt.optim.AdamW(model.parameters(), lr=0.02)
    sched = lt.optim.lr_scheduler.StepLR(opt, step_size=5, gamma=0.5) if scheduler else None
    lt.mark_step()  # initialization and data are outside the measured loop
    lt.metrics.reset()
    losses, lrs = [], []
    for i in range(steps):
        x, y = data[i % len(data)]
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()          # ends the step on lazy
        if sched:
            sched.step()    # the lr changes at steps 5, 10, 15: must not recompile
        lt.mark_step()      # what an explicit end-of-step call adds: nothing left to compute
        losses.append(loss)
        lrs.append(opt.param_groups[0]["lr"])
    compiles = lt.metrics.counters()["graph_compiles"]
    by_reason = lt.metrics.syncs_by_reason()
    return [l.item() for l in losses], compiles, by_reason, lrs


def test_lazy_training_step_is_one_graph_and_matches_cpu():
    lazy, compiles, by_reason, lrs = _train("lazy")
    assert compiles == 1, f"expected one graph for 20 training steps, got {compiles}"
    assert len(set(lrs)) == 5  # the learning rate did change (after steps 5, 10, 15, 20)
    assert by_reason.get("mark_step", 0) >= 20
    cpu, _, _, _ = _train("cpu")
    np.testing.assert_allclose(lazy, cpu, rtol=1e-5)
    assert cpu[16] < 0.7 * cpu[0]  # it learns (steps 0 and 16 see the same batch)


def test_learning_rate_change_does_not_recompile():
    p = nn.Parameter(lt.randn(8, device="lazy"))
    opt = lt.optim.SGD([p], lr=0.1, momentum=0.9)
    lt.mark_step()
    values = []
    for lr in (0.1, 0.0, 1.0, 0.37):  # 0 and 1 included: they must not be baked into the graph
        opt.param_groups[0]["lr"] = lr
        before = p.numpy()
        if lr == 0.1:
            lt.metrics.reset()
        opt.zero_grad()
        (p * p).sum().backward()
        opt.step()
        values.append((lr, before, p.numpy()))
    assert lt.metrics.counters()["graph_compiles"] == 1
    for lr, before, after in values:
        if lr == 0.0:
            np.testing.assert_array_equal(after, before)
        else:
            assert np.any(after != before)


@pytest.mark.parametrize("device", ["lazy", "cpu"])
def test_train_mlp_example_reaches_its_accuracy(device, tmp_path):
    env = dict(os.environ)
    pkg = pathlib.Path(lt.__file__).resolve().parents[1]
    env["PYTHONPATH"] = str(pkg) + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, str(ROOT / "examples" / "python" / "train_mlp.py"), "--device",
                        device, "--steps", "60", "--log-every", "20", "--min-accuracy", "0.88",
                        "--plot", str(tmp_path / "loss.png")],
                       env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "held-out accuracy" in r.stdout and "lazytensor metrics" in r.stdout
    assert "graph_compiles: 1" in r.stdout if device == "lazy" else True
    assert "steps/s" in r.stdout and (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"  # bar + curve
