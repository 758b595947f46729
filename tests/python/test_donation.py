"""Buffer donation on lazy: an optimizer step writes the parameters and the optimizer state
(Adam's exp_avg / exp_avg_sq, SGD's momentum) into the memory they were read from, so
p.data_ptr() stays put across steps, with the losses of the eager cpu device and one compiled
graph. Donation is refused whenever something else can still see the old values (a DLPack export,
a detached tensor sharing the storage, a NumPy array's own memory), and those keep the old values."""
import gc

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.nn.functional as F


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        # Sizes no other test uses: graph-cache counters here do not depend on test order.
        self.fc1 = nn.Linear(13, 40)
        self.fc2 = nn.Linear(40, 5)

    def forward(self, x):
        return self.fc2(F.relu(self.fc1(x)))


def _train(device, opt_name="AdamW", steps=20):
    lt.manual_seed(21)
    rng = np.random.default_rng(8)
    xs = [rng.standard_normal((24, 13)).astype(np.float32) for _ in range(3)]
    data = [(lt.tensor(x, device=device), lt.tensor(x[:, :5].argmax(1), device=device)) for x in xs]
    model = MLP().to(device)
    if opt_name == "AdamW":
        opt = lt.optim.AdamW(model.parameters(), lr=0.01, weight_decay=0.05)
    else:
        opt = lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-3)
    lt.mark_step()
    lt.metrics.reset()
    params = list(model.parameters())
    before = [p.data_ptr() for p in params]
    losses, ptrs = [], []
    for i in range(steps):
        x, y = data[i % len(data)]
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss)
        state = [t for p in params for k, t in sorted(opt.state[p].items())
                 if isinstance(t, lt.Tensor) and k != "step"]
        ptrs.append(([p.data_ptr() for p in params], [t.data_ptr() for t in state]))
    return [l.item() for l in losses], before, ptrs, lt.metrics.counters()


@pytest.mark.parametrize("opt_name", ["AdamW", "SGD"])
def test_optimizer_step_on_lazy_updates_in_place(opt_name):
    losses, before, ptrs, counters = _train("lazy", opt_name)
    assert counters["graph_compiles"] == 1
    for i, (params, state) in enumerate(ptrs):
        assert params == before, f"step {i}: a parameter moved"
        assert state == ptrs[0][1], f"step {i}: optimizer state moved"
    per_param = 3 if opt_name == "AdamW" else 2  # p, exp_avg, exp_avg_sq / p, momentum_buffer
    assert counters["donated_buffers"] >= per_param * len(before) * len(ptrs)
    assert counters["donated_bytes"] > 0
    cpu, _, _, _ = _train("cpu", opt_name)
    np.testing.assert_allclose(losses, cpu, rtol=1e-5)


class SmallCNN(nn.Module):
    """Two convolutions: the second one's weight is also read by its backward-data step, after its
    gradient (and so its update) is ready, through a value the gradient rule saved."""

    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 6, 3, padding=1)
        self.bn = nn.BatchNorm2d(6)
        self.conv2 = nn.Conv2d(6, 7, 3, padding=1, bias=False)
        self.fc = nn.Linear(7, 4)

    def forward(self, x):
        h = F.relu(self.bn(self.conv1(x)))
        h = F.relu(self.conv2(h))
        return self.fc(F.adaptive_avg_pool2d(h, 1).flatten(1))


def test_convolution_weights_read_by_backward_data_update_in_place():
    def train(device):
        lt.manual_seed(5)
        rng = np.random.default_rng(9)
        x = lt.tensor(rng.standard_normal((5, 3, 9, 9)).astype(np.float32), device=device)
        y = lt.tensor(rng.integers(0, 4, 5), device=device)
        model = SmallCNN().to(device)
        opt = lt.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
        lt.mark_step()
        losses, ptrs = [], []
        for _ in range(5):
            opt.zero_grad(set_to_none=True)
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
            ptrs.append({n: p.data_ptr() for n, p in model.named_parameters()})
        return losses, ptrs

    losses, ptrs = train("lazy")
    for i in range(2, len(ptrs)):  # from the second update on, each value stays in its memory
        moved = [n for n in ptrs[i] if ptrs[i][n] != ptrs[i - 1][n]]
        assert not moved, f"step {i}: moved {moved}"
    cpu, _ = train("cpu")
    np.testing.assert_allclose(losses, cpu, rtol=1e-5)


def _host_lazy():
    t = lt.zeros(1, device="lazy")
    return t.__dlpack_device__()[0] == 1


def test_dlpack_export_keeps_old_values():
    if not _host_lazy():
        pytest.skip("DLPack export needs the lazy backend in host memory")
    p = lt.tensor(np.arange(12, dtype=np.float32), device="lazy")
    lt.mark_step()
    arr = np.from_dlpack(p)  # shares p's memory
    old = arr.copy()
    ptr = p.data_ptr()
    lt.metrics.reset()
    p._assign(p * 2.0 + 1.0)
    lt.mark_step()
    np.testing.assert_array_equal(arr, old)
    np.testing.assert_allclose(p.numpy(), old * 2 + 1)
    assert p.data_ptr() != ptr
    assert lt.metrics.counters()["donated_buffers"] == 0
    del arr
    gc.collect()
    ptr = p.data_ptr()
    p._assign(p - 1.0)  # nothing else sees p's memory now
    lt.mark_step()
    assert p.data_ptr() == ptr
    np.testing.assert_allclose(p.numpy(), old * 2)


def test_tensor_sharing_the_storage_keeps_old_values():
    p = lt.tensor(np.linspace(-1, 1, 10, dtype=np.float32), device="lazy")
    lt.mark_step()
    q = lt.zeros(10, device="lazy")
    q.data = p  # shares p's buffer without aliasing p (as PyTorch's set_data)
    old = q.numpy().copy()
    p._assign(p * 3.0)
    lt.mark_step()
    np.testing.assert_array_equal(q.numpy(), old)
    np.testing.assert_allclose(p.numpy(), old * 3)


def test_detached_alias_follows_a_donated_update():
    p = lt.tensor(np.linspace(-1, 1, 10, dtype=np.float32), device="lazy")
    lt.mark_step()
    q = p.detach()  # an alias, as in PyTorch: it sees p's in-place update
    old = q.numpy().copy()
    p._assign(p * 3.0)
    lt.mark_step()
    np.testing.assert_allclose(q.numpy(), old * 3)
    np.testing.assert_allclose(p.numpy(), old * 3)


def test_numpy_memory_is_never_written():
    arr = np.arange(6, dtype=np.float32)
    t = lt.from_numpy(arr).to("lazy")
    lt.mark_step()
    t._assign(t + 100.0)
    lt.mark_step()
    np.testing.assert_array_equal(arr, np.arange(6, dtype=np.float32))
    np.testing.assert_allclose(t.numpy(), np.arange(6) + 100.0)


def test_compiled_step_replays_update_in_place():
    lt.manual_seed(4)
    model = nn.Sequential(nn.Linear(11, 30), nn.ReLU(), nn.Linear(30, 3)).to("lazy")
    opt = lt.optim.AdamW(model.parameters(), lr=0.01)
    rng = np.random.default_rng(0)
    x = lt.tensor(rng.standard_normal((8, 11)).astype(np.float32), device="lazy")
    y = lt.tensor(np.arange(8) % 3, device="lazy")

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = lt.compile(step)
    lt.mark_step()
    fn(x, y)  # the capture
    ptrs = [p.data_ptr() for p in model.parameters()]
    lt.metrics.reset()
    for _ in range(4):
        fn(x, y)
        assert [p.data_ptr() for p in model.parameters()] == ptrs
    assert fn.stats["replays"] == 4
    assert lt.metrics.counters()["donated_buffers"] >= 3 * len(ptrs) * 4
