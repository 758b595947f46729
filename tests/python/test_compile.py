"""lt.compile: a compiled training step (forward, cross_entropy, backward, optimizer step,
zero_grad) traces once and then replays without tracing (traced_ops stays at 0), with losses equal
to the same loop uncompiled on lazy and on cpu; guards re-trace on a new shape, an lr change, a new
parameter; dropout masks come from the generator stream as without compile; returned tensors never
alias; a compiled module keeps its state_dict keys; steps that read values or syncs run plainly."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.nn.functional as F


class MLP(nn.Module):
    def __init__(self, p_drop=0.0):
        super().__init__()
        # Sizes no other test uses: graph-cache counters here do not depend on test order.
        self.fc1 = nn.Linear(10, 24)
        self.drop = nn.Dropout(p_drop)
        self.fc2 = nn.Linear(24, 4)

    def forward(self, x):
        return self.fc2(self.drop(F.gelu(self.fc1(x))))


def _data(device, n=4, batch=16):
    rng = np.random.default_rng(5)
    xs = [rng.standard_normal((batch, 10)).astype(np.float32) for _ in range(n)]
    return [(lt.tensor(x, device=device), lt.tensor(x[:, :4].argmax(1), device=device)) for x in xs]


def _train(device, compiled, opt_name="AdamW", steps=20, p_drop=0.1, sched_every=None):
    """Returns (losses, traced_ops per step, final parameters, the compiled step or None)."""
    lt.manual_seed(11)
    data = _data(device)
    model = MLP(p_drop).to(device)
    opt = {"AdamW": lambda p: lt.optim.AdamW(p, lr=0.02),
           "Adam": lambda p: lt.optim.Adam(p, lr=0.02, amsgrad=True),
           "SGD": lambda p: lt.optim.SGD(p, lr=0.05, momentum=0.9, dampening=0.2)}[opt_name](
        model.parameters())
    sched = lt.optim.lr_scheduler.StepLR(opt, step_size=sched_every, gamma=0.5) if sched_every else None

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    fn = lt.compile(step) if compiled else step
    lt.mark_step()
    losses, traced = [], []
    for i in range(steps):
        x, y = data[i % len(data)]
        lt.metrics.reset()
        losses.append(fn(x, y))
        traced.append(lt.metrics.counters()["traced_ops"])
        if sched:
            sched.step()
    params = [p.numpy() for p in model.parameters()]
    return [l.item() for l in losses], traced, params, fn if compiled else None


@pytest.mark.parametrize("opt_name", ["AdamW", "Adam", "SGD"])
def test_compiled_training_step_matches_lazy_and_cpu(opt_name):
    lt.metrics.reset()
    got, traced, params, fn = _train("lazy", True, opt_name)
    want, plain_traced, want_params, _ = _train("lazy", False, opt_name)
    cpu, _, cpu_params, _ = _train("cpu", False, opt_name)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(got, cpu, rtol=1e-5)
    for a, b, c in zip(params, want_params, cpu_params):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7)
        np.testing.assert_allclose(a, c, rtol=1e-4, atol=1e-5)
    # Traced once (SGD with dampening: twice, its first momentum step differs), then replayed.
    n_traces = 2 if opt_name == "SGD" else 1
    assert fn.stats["traces"] == n_traces and fn.stats["replays"] == 20 - n_traces
    assert all(t > 0 for t in traced[:n_traces]) and traced[n_traces:] == [0] * (20 - n_traces)
    assert min(plain_traced) > 100  # plain lazy traces the whole step every time
    assert cpu[16] < cpu[0]  # it learns


def test_replays_reuse_one_executable_and_return_fresh_tensors():
    lt.manual_seed(0)
    model = MLP().to("lazy")
    opt = lt.optim.SGD(model.parameters(), lr=0.1)

    @lt.compile
    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return {"loss": loss, "tag": "ok"}

    data = _data("lazy")
    step(*data[0])
    lt.metrics.reset()
    outs = [step(*data[i % 4]) for i in range(1, 6)]
    c = lt.metrics.counters()
    assert c["graph_compiles"] == 0 and c["graph_cache_hits"] == 5 and c["traced_ops"] == 0
    assert all(o["tag"] == "ok" for o in outs)
    losses = [o["loss"] for o in outs]
    assert len({id(l) for l in losses}) == 5  # no aliasing across calls
    values = [l.item() for l in losses]
    assert len(set(values)) == 5
    assert not losses[0].requires_grad
    # Gradients of the replayed step are on the parameters, as after an uncompiled step.
    assert all(p.grad is not None and p.grad.shape == p.shape for p in model.parameters())


def test_grad_visible_after_replay_matches_plain(rng):
    w0 = rng.standard_normal((5, 3)).astype(np.float32)
    xs = [rng.standard_normal((4, 5)).astype(np.float32) for _ in range(4)]

    def run(compiled):
        w = nn.Parameter(lt.tensor(w0, device="lazy"))
        opt = lt.optim.SGD([w], lr=0.1)

        def step(x):
            loss = ((x @ w).tanh() ** 2).sum()
            loss.backward()
            opt.step()
            return loss

        fn = lt.compile(step) if compiled else step
        grads = []
        for x in xs:
            opt.zero_grad()  # outside the compiled step: p.grad is None when it starts
            fn(lt.tensor(x, device="lazy"))
            grads.append(w.grad.numpy())
        return grads, w.numpy()

    (g1, w1), (g2, w2) = run(True), run(False)
    for a, b in zip(g1, g2):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    np.testing.assert_allclose(w1, w2, rtol=1e-6)


def test_shape_change_retraces_and_old_shape_replays():
    calls = []

    @lt.compile
    def f(x, s):
        calls.append(1)  # Python side effect: runs only when tracing
        return (x * s).sum(0)

    a = lt.ones(3, 4, device="lazy")
    b = lt.ones(5, 4, device="lazy")
    np.testing.assert_allclose(f(a, 2.0).numpy(), np.full(4, 6.0))
    np.testing.assert_allclose(f(a * 3, 2.0).numpy(), np.full(4, 18.0))  # replay: new data
    assert len(calls) == 1
    np.testing.assert_allclose(f(b, 2.0).numpy(), np.full(4, 10.0))       # new shape: re-trace
    assert len(calls) == 2
    np.testing.assert_allclose(f(a, 0.5).numpy(), np.full(4, 1.5))        # new number: re-trace
    assert len(calls) == 3
    lt.metrics.reset()
    np.testing.assert_allclose(f(a + 1, 2.0).numpy(), np.full(4, 12.0))   # old signature replays
    np.testing.assert_allclose(f(b * 0, 2.0).numpy(), np.zeros(4))
    assert len(calls) == 3 and lt.metrics.counters()["traced_ops"] == 2   # the args' own ops
    with lt.no_grad():  # grad mode is part of the signature
        f(a, 2.0)
    assert len(calls) == 4


def test_lr_scheduler_changes_are_honoured():
    got, traced, _, fn = _train("lazy", True, "AdamW", steps=12, p_drop=0.0, sched_every=4)
    want, _, _, _ = _train("lazy", False, "AdamW", steps=12, p_drop=0.0, sched_every=4)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert fn.stats["traces"] == 3  # lr 0.02, 0.01, 0.005
    assert traced.count(0) == 9


def test_dropout_masks_differ_between_replays_and_follow_the_generator():
    def masks(compiled):
        lt.manual_seed(3)
        x = lt.ones(20000, device="lazy")

        def f(x):
            return F.dropout(x, p=0.3)

        fn = lt.compile(f) if compiled else f
        return [fn(x).numpy() for _ in range(4)]

    got, want = masks(True), masks(False)
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)  # same stream as the uncompiled code
        keep = (a != 0).mean()
        assert abs(keep - 0.7) < 0.02
        np.testing.assert_allclose(a[a != 0], 1 / 0.7, rtol=1e-6)
    assert not np.array_equal(got[1], got[2]) and not np.array_equal(got[2], got[3])


def test_in_place_updates_of_arguments_and_state():
    total = lt.zeros(3, device="lazy")
    lt.mark_step()

    @lt.compile
    def accumulate(buf, x):
        buf.add_(x)          # an argument updated in place
        total.add_(x * 2)    # state the function closes over
        return buf.sum()

    b1, b2 = lt.zeros(3, device="lazy"), lt.zeros(3, device="lazy")
    for i in range(3):
        s = accumulate(b1 if i % 2 == 0 else b2, lt.full((3,), float(i + 1), device="lazy"))
        assert s.item() == pytest.approx(3 * (1 + 3) if i == 2 else 3 * (i + 1))
    np.testing.assert_allclose(b1.numpy(), np.full(3, 4.0))
    np.testing.assert_allclose(b2.numpy(), np.full(3, 2.0))
    np.testing.assert_allclose(total.numpy(), np.full(3, 12.0))
    assert accumulate.stats["replays"] == 2


def test_compiled_module_keeps_state_dict_keys_and_replays_inference():
    lt.manual_seed(1)
    model = MLP(0.5).to("lazy")
    cm = lt.compile(model)
    assert isinstance(cm, nn.Module) and cm._orig_mod is model
    assert list(cm.state_dict()) == list(model.state_dict())
    assert [id(p) for p in cm.parameters()] == [id(p) for p in model.parameters()]
    cm.eval()
    assert not model.training and not model.drop.training
    x = lt.tensor(np.random.default_rng(0).standard_normal((8, 10)).astype(np.float32), device="lazy")
    with lt.no_grad():
        outs = [cm(x * float(i + 1)).numpy() for i in range(3)]
        want = [model(x * float(i + 1)).numpy() for i in range(3)]
    for a, b in zip(outs, want):
        np.testing.assert_allclose(a, b, rtol=1e-6)
    assert cm._compiled_forward.stats["replays"] == 2
    # A changed parameter object is seen by the guard.
    with lt.no_grad():
        model.fc2.weight = nn.Parameter(model.fc2.weight * 0)
        np.testing.assert_allclose(cm(x).numpy(), np.broadcast_to(model.fc2.bias.numpy(), (8, 4)),
                                   rtol=1e-6)
    # Loading a state dict into the compiled module reaches the original.
    sd = {k: v * 0 for k, v in model.state_dict().items()}
    cm.load_state_dict(sd)
    assert np.all(model.fc1.weight.numpy() == 0)


def test_compiled_module_in_training_replays_with_its_backward():
    model = MLP().to("lazy")
    cm = lt.compile(model)
    x = lt.ones(4, 10, device="lazy")
    for _ in range(2):
        model.zero_grad()
        cm(x).sum().backward()
        assert model.fc1.weight.grad is not None
    assert cm._compiled_forward.stats["replays"] == 1 and cm._compiled_forward.last_reason is None


def test_steps_that_read_values_run_plainly_and_stay_correct():
    @lt.compile
    def f(x):
        if x.sum().item() > 0:  # a data-dependent branch
            return x * 2
        return x * -1

    for v in (1.0, -1.0, 2.0, -3.0):
        np.testing.assert_allclose(f(lt.full((2,), v, device="lazy")).numpy(), np.full(2, abs(v) * (2 if v > 0 else 1)))
    assert f.stats["replays"] == 0 and "(item)" in f.last_reason
    # Reading a materialized value (an argument) is caught too: no sync, but the trace depends on it.
    h = lt.compile(lambda x: x * 2 if x.numpy().sum() > 0 else x * -1)
    for v in (1.0, -1.0):
        np.testing.assert_allclose(h(lt.full((2,), v, device="lazy")).numpy(), np.full(2, abs(v) * (2 if v > 0 else 1)))
    assert h.stats["replays"] == 0

    @lt.compile(fullgraph=True)
    def g(x):
        return x * x.max().item()

    with pytest.raises(RuntimeError, match=r"fullgraph=True.*cannot be captured.*\(item\)"):
        g(lt.ones(2, device="lazy"))


def _replays_untraced(fn, *args):
    """Calls fn, returning its result and the number of ops it traced."""
    lt.metrics.reset()
    out = fn(*args)
    return out, lt.metrics.counters()["traced_ops"]


def test_embedding_of_argument_token_ids_replays_and_checks_every_call():
    table = np.random.default_rng(7).standard_normal((7, 5)).astype(np.float32)
    weight = lt.tensor(table, device="lazy")

    @lt.compile
    def embed(ids):  # ids: argument data in host memory, range-checked on the host at the op
        return F.embedding(ids, weight) * 2

    calls = [np.array([[1, 6], [0, 0]]), np.array([[3, 2], [6, 5]]), np.array([[4, 4], [1, 0]])]
    for i, ids in enumerate(calls):
        out, traced = _replays_untraced(embed, lt.tensor(ids, device="lazy"))
        np.testing.assert_allclose(out.numpy(), table[ids] * 2, rtol=1e-6)
        assert traced == 0 or i == 0
    assert embed.stats["traces"] == 1 and embed.stats["replays"] == 2 and embed.last_reason is None
    with pytest.raises(IndexError, match=r"embedding: index 7 is out of bounds.*size 7"):
        embed(lt.tensor(np.array([[1, 7], [0, 0]]), device="lazy"))
    with pytest.raises(IndexError, match=r"embedding: index -2"):
        embed(lt.tensor(np.array([[1, 2], [-2, 0]]), device="lazy"))
    out, traced = _replays_untraced(embed, lt.tensor(calls[1], device="lazy"))
    np.testing.assert_allclose(out.numpy(), table[calls[1]] * 2, rtol=1e-6)
    assert traced == 0 and embed.stats["traces"] == 1 and embed.stats["replays"] == 3


def test_integer_tensor_indexing_with_computed_indices_replays_and_checks():
    grid = np.arange(20, dtype=np.float32).reshape(4, 5)
    g = lt.tensor(grid, device="lazy")
    f = lt.compile(lambda i, j: g[i - 1, j * 2] + 1)  # two computed indices: each checked
    for i, j in (([0, 3], [2, -1]), ([1, 1], [0, 2]), ([-2, 2], [1, -2])):
        out = f(lt.tensor(np.array(i), device="lazy"), lt.tensor(np.array(j), device="lazy"))
        np.testing.assert_allclose(out.numpy(), grid[np.array(i) - 1, np.array(j) * 2] + 1)
    assert f.stats["traces"] == 1 and f.stats["replays"] == 2
    with pytest.raises(IndexError, match=r"indexing: index 6 is out of bounds for dimension 1"):
        f(lt.tensor(np.array([0, 1]), device="lazy"), lt.tensor(np.array([3, 0]), device="lazy"))
    with pytest.raises(IndexError, match=r"indexing: index -5 is out of bounds for dimension 0"):
        f(lt.tensor(np.array([0, -4]), device="lazy"), lt.tensor(np.array([1, 0]), device="lazy"))
    out = f(lt.tensor(np.array([3, 3]), device="lazy"), lt.tensor(np.array([0, 2]), device="lazy"))
    np.testing.assert_allclose(out.numpy(), grid[[2, 2], [0, 4]] + 1)
    assert f.stats["traces"] == 1 and f.stats["replays"] == 3


def test_steps_with_computed_indices_replay_with_their_range_checks():
    table = lt.tensor(np.arange(12, dtype=np.float32).reshape(6, 2), device="lazy")

    @lt.compile
    def lookup(x):
        return table.index_select(0, (x * 3).long())  # the index is computed in the step

    for v, want in ((1.0, [6.0, 7.0]), (0.0, [0.0, 1.0]), (1.0, [6.0, 7.0])):
        np.testing.assert_allclose(lookup(lt.full((1,), v, device="lazy")).numpy(), [want])
    assert lookup.stats["traces"] == 1 and lookup.stats["replays"] == 2
    assert lookup.last_reason is None
    with pytest.raises(IndexError, match="index_select: index 15"):
        lookup(lt.full((1,), 5.0, device="lazy"))  # index 15 of 6 rows: checked on the replay
    np.testing.assert_allclose(lookup(lt.full((1,), 1.0, device="lazy")).numpy(), [[6.0, 7.0]])
    assert lookup.stats["traces"] == 1 and lookup.stats["replays"] == 3

    # A bad index on the tracing call raises there, as the plain step's sync would; no program.
    first = lt.compile(lambda x: table.index_select(0, (x * 3).long()))
    with pytest.raises(IndexError, match="index_select: index 12"):
        first(lt.full((1,), 4.0, device="lazy"))
    for v in (1.0, 0.0):
        x = lt.full((1,), v, device="lazy")
        np.testing.assert_allclose(first(x).numpy(), table.numpy()[[int(v * 3)]])
    assert first.stats["traces"] == 1 and first.stats["replays"] == 1

    counts = lt.zeros(8, device="lazy")
    host = np.zeros(8, np.float32)

    @lt.compile
    def scatter(idx, src):  # state += src scattered to 2 * idx
        counts.scatter_add_(0, idx * 2, src)
        return counts.argmax()

    rng = np.random.default_rng(2)
    for i in range(4):
        idx, src = rng.integers(0, 4, 6), rng.random(6).astype(np.float32)
        np.add.at(host, idx * 2, src)
        idx_t, src_t = lt.tensor(idx, device="lazy"), lt.tensor(src, device="lazy")
        got, traced = _replays_untraced(scatter, idx_t, src_t)
        assert got.item() == host.argmax() and (traced == 0 or i == 0)
        np.testing.assert_allclose(counts.numpy(), host, rtol=1e-6)
    assert scatter.stats["replays"] == 3
    with pytest.raises(IndexError, match=r"scatter_add: index 8 is out of bounds.*size 8"):
        scatter(lt.tensor(np.array([0, 1, 4, 2, 0, 0]), device="lazy"), lt.ones(6, device="lazy"))
    np.add.at(host, np.array([0, 2, 4, 0, 0]), 1.0)  # the replay ran; the bad row added nothing
    np.testing.assert_allclose(counts.numpy(), host, rtol=1e-6)
    idx = np.array([1, 3, 3, 0, 2, 1])
    np.add.at(host, idx * 2, 1.0)
    got, traced = _replays_untraced(scatter, lt.tensor(idx, device="lazy"), lt.ones(6, device="lazy"))
    assert got.item() == host.argmax() and traced == 0
    np.testing.assert_allclose(counts.numpy(), host, rtol=1e-6)
    assert scatter.stats["traces"] == 1 and scatter.stats["replays"] == 4


def test_compiled_embedding_training_step_matches_plain_lazy():
    """Embedding forward (host ids) and backward (a scatter_add over the ids) both replay."""

    def train(compiled):
        lt.manual_seed(3)
        emb, head = nn.Embedding(11, 6).to("lazy"), nn.Linear(6, 3).to("lazy")
        opt = lt.optim.SGD(list(emb.parameters()) + list(head.parameters()), lr=0.1)

        def step(ids, y):
            opt.zero_grad()
            loss = F.cross_entropy(head(emb(ids).mean(1)), y)
            loss.backward()
            opt.step()
            return loss

        fn = lt.compile(step) if compiled else step
        rng = np.random.default_rng(4)
        losses, traced = [], []
        for _ in range(6):
            ids = lt.tensor(rng.integers(0, 11, (4, 5)), device="lazy")
            loss, t = _replays_untraced(fn, ids, lt.tensor(rng.integers(0, 3, 4), device="lazy"))
            losses.append(loss.item())
            traced.append(t)
        return losses, traced, emb.weight.numpy(), fn

    got, traced, w, fn = train(True)
    want, _, want_w, _ = train(False)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    np.testing.assert_allclose(w, want_w, rtol=1e-6, atol=1e-7)
    assert fn.stats["traces"] == 1 and fn.stats["replays"] == 5 and traced[1:] == [0] * 5


def test_cpu_device_just_calls_the_function():
    calls = []

    @lt.compile(fullgraph=True)
    def f(x):
        calls.append(1)
        return x + 1

    for i in range(3):
        np.testing.assert_allclose(f(lt.full((2,), float(i))).numpy(), np.full(2, i + 1.0))
    assert len(calls) == 3


def test_exception_in_step_aborts_the_capture():
    @lt.compile
    def f(x, fail):
        y = x * 3
        if fail:
            raise ValueError("boom")
        return y

    with pytest.raises(ValueError, match="boom"):
        f(lt.ones(2, device="lazy"), True)
    np.testing.assert_allclose(f(lt.ones(2, device="lazy"), False).numpy(), [3.0, 3.0])
    np.testing.assert_allclose(f(lt.ones(2, device="lazy") * 2, False).numpy(), [6.0, 6.0])


def test_bad_usage():
    with pytest.raises(TypeError, match="function or an nn.Module"):
        lt.compile(42)
    with pytest.raises(RuntimeError, match="Unrecognized mode"):
        lt.compile(lambda x: x, mode="fastest")
    with pytest.raises(TypeError, match="fullgraph"):
        lt.compile(lambda x: x, fullgraph="yes")
    f = lt.compile(lambda x: x * 2, mode="reduce-overhead", dynamic=False)
    assert lt.compile(f) is f
    np.testing.assert_allclose(f(lt.ones(2, device="lazy")).numpy(), [2.0, 2.0])
    assert lt.compile(lambda x: x, disable=True)(5) == 5
