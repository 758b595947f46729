"""lt.compile(module) in training: the forward's backward is compiled too (as AOTAutograd), so a
replayed call traces no op, forward or backward, and its gradients are those of the plain module
(and of PyTorch, the oracle sharing no code with us)."""
import numpy as np
import pytest
import torch

import lazytensor as lt
import lazytensor.nn.functional as F
from lazytensor import nn

M = lt.metrics


def _counter(name):
    return M.counters()[name]


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(10, 32)
        self.fc2 = nn.Linear(32, 4)

    def forward(self, x):
        return self.fc2(F.tanh(self.fc1(x)))


class Net(nn.Module):
    """Embedding, BatchNorm (buffers updated in place), dropout (random draws), GELU."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        self.fc1 = nn.Linear(16, 32)
        self.bn = nn.BatchNorm1d(32)
        self.drop = nn.Dropout(0.2)
        self.fc2 = nn.Linear(32, 50)

    def forward(self, idx):
        return self.fc2(self.drop(F.gelu(self.bn(self.fc1(self.emb(idx).mean(1))))))


def _batches(n, rng, shape=(8, 10)):
    return [rng.standard_normal(shape).astype(np.float32) for _ in range(n)]


def test_training_matches_torch_and_replays_compile_nothing_new():
    lt.manual_seed(0)
    model = MLP().to("lazy")
    ref = torch.nn.Sequential(torch.nn.Linear(10, 32), torch.nn.Tanh(), torch.nn.Linear(32, 4)).double()
    with torch.no_grad():
        for i, lin in ((0, model.fc1), (2, model.fc2)):
            ref[i].weight.copy_(torch.from_numpy(lin.weight.numpy()))
            ref[i].bias.copy_(torch.from_numpy(lin.bias.numpy()))
    cm = lt.compile(model)
    opt = lt.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    ropt = torch.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
    rng = np.random.default_rng(1)
    compiles = []
    for step, xb in enumerate(_batches(6, rng)):
        yb = rng.integers(0, 4, (8,))
        c0 = _counter("graph_compiles")
        opt.zero_grad()
        loss = F.cross_entropy(cm(lt.tensor(xb, device="lazy")), lt.tensor(yb, device="lazy"))
        loss.backward()
        grads = [p.grad.numpy() for p in (model.fc1.weight, model.fc1.bias, model.fc2.weight, model.fc2.bias)]
        opt.step()
        compiles.append(_counter("graph_compiles") - c0)
        ropt.zero_grad()
        rloss = torch.nn.functional.cross_entropy(ref(torch.from_numpy(xb).double()), torch.from_numpy(yb))
        rloss.backward()
        ropt.step()
        np.testing.assert_allclose(loss.item(), rloss.item(), rtol=1e-5)
        for g, r in zip(grads, (ref[0].weight, ref[0].bias, ref[2].weight, ref[2].bias)):
            np.testing.assert_allclose(g, r.grad.numpy(), rtol=2e-4, atol=1e-6)
    assert cm._compiled_forward.stats == {"traces": 1, "replays": 5, "plain_calls": 0, "stale": 0}
    assert cm._compiled_forward.last_reason is None
    # Step 1 compiles the forward, its backward, the loss and the update; step 2 the update with
    # momentum buffers present; later steps nothing.
    assert compiles[2:] == [0, 0, 0, 0], compiles


def test_a_replayed_call_traces_no_op_forward_or_backward():
    lt.manual_seed(0)
    model = Net().to("lazy")
    cm = lt.compile(model)
    rng = np.random.default_rng(2)
    for step in range(3):
        idx = lt.tensor(rng.integers(0, 50, (8, 5)), device="lazy")
        g = lt.tensor(rng.standard_normal((8, 50)).astype(np.float32), device="lazy")
        model.zero_grad()
        t0 = _counter("traced_ops")
        out = cm(idx)
        t1 = _counter("traced_ops")
        out.backward(g)
        t2 = _counter("traced_ops")
        assert model.fc1.weight.grad is not None and model.emb.weight.grad is not None
        if step:
            assert (t1 - t0, t2 - t1) == (0, 0)
    assert out.grad_fn is not None


def _train(compiled, make, steps, data, opt_cls=lt.optim.SGD):
    lt.manual_seed(0)
    model = make().to("lazy")
    run = lt.compile(model) if compiled else model
    opt = opt_cls(model.parameters(), lr=0.05)
    losses = []
    for xb, yb in data[:steps]:
        opt.zero_grad()
        loss = F.cross_entropy(run(lt.tensor(xb, device="lazy")), lt.tensor(yb, device="lazy"))
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses, model


def test_dropout_batchnorm_embedding_match_the_plain_module():
    rng = np.random.default_rng(3)
    data = [(rng.integers(0, 50, (8, 5)), rng.integers(0, 50, (8,))) for _ in range(5)]
    plain, m1 = _train(False, Net, 5, data)
    comp, m2 = _train(True, Net, 5, data)
    np.testing.assert_allclose(comp, plain, rtol=1e-5)
    for (n, a), b in zip(m1.state_dict().items(), m2.state_dict().values()):
        np.testing.assert_allclose(b.numpy(), a.numpy(), rtol=1e-4, atol=1e-6, err_msg=n)


def test_gradient_accumulation_keeps_each_calls_activations():
    """Two forwards before one backward: each call's backward reads its own saved values."""
    rng = np.random.default_rng(4)
    xs = [lt.tensor(x, device="lazy") for x in _batches(4, rng)]

    def grads(compiled, order):
        lt.manual_seed(0)
        model = MLP().to("lazy")
        run = lt.compile(model) if compiled else model
        out = []
        for a, b in ((0, 1), (2, 3)):
            model.zero_grad()
            la, lb = (run(xs[a]) ** 2).sum(), (run(xs[b]) * 3).tanh().sum()
            if order == "sum":
                (la + lb).backward()
            else:  # the later call's backward first
                lb.backward()
                la.backward()
            out.append([p.grad.numpy().copy() for p in model.parameters()])
        return out

    for order in ("sum", "reversed"):
        for want, got in zip(grads(False, order), grads(True, order)):
            for a, b in zip(want, got):
                np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_gradients_reach_arguments_and_history_before_the_call():
    rng = np.random.default_rng(5)
    xs = _batches(3, rng)

    def run(compiled):
        lt.manual_seed(0)
        pre = nn.Linear(10, 10).to("lazy")
        model = MLP().to("lazy")
        body = lt.compile(model) if compiled else model
        out = []
        for xb in xs:
            pre.zero_grad()
            model.zero_grad()
            x = lt.tensor(xb, device="lazy").requires_grad_()
            h = pre(x)  # a non-leaf argument: its history is outside the compiled call
            (body(h).sin().sum() + body(x).sum()).backward()
            out.append([x.grad.numpy().copy(), pre.weight.grad.numpy().copy(),
                        model.fc1.weight.grad.numpy().copy()])
        return out, body

    want, _ = run(False)
    got, body = run(True)
    for w, g in zip(want, got):
        for a, b in zip(w, g):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
    assert body._compiled_forward.stats["replays"] == 5


class TwoHeads(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(6, 6)
        self.head = nn.Linear(6, 3)

    def forward(self, x, y):
        h = F.relu(self.body(x))
        logits = self.head(h)
        return {"logits": logits, "loss": F.cross_entropy(logits, y), "hidden": h.detach()}


def test_several_returns_requiring_grad_and_a_detached_one():
    rng = np.random.default_rng(6)
    data = [(rng.standard_normal((5, 6)).astype(np.float32), rng.integers(0, 3, (5,))) for _ in range(4)]

    def run(compiled):
        lt.manual_seed(0)
        model = TwoHeads().to("lazy")
        f = lt.compile(model) if compiled else model
        out = []
        for i, (xb, yb) in enumerate(data):
            model.zero_grad()
            r = f(lt.tensor(xb, device="lazy"), lt.tensor(yb, device="lazy"))
            assert not r["hidden"].requires_grad
            (r["loss"] if i % 2 else r["loss"] + r["logits"].pow(2).mean()).backward()
            out.append([r["loss"].item(), r["hidden"].numpy()] + [p.grad.numpy().copy() for p in model.parameters()])
        return out

    for w, g in zip(run(False), run(True)):
        for a, b in zip(w, g):
            np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)


def test_backward_twice_needs_retain_graph_as_in_pytorch():
    lt.manual_seed(0)
    model = MLP().to("lazy")
    cm = lt.compile(model)
    x = lt.tensor(np.random.default_rng(7).standard_normal((4, 10)).astype(np.float32), device="lazy")
    for _ in range(2):
        model.zero_grad()
        y = cm(x).sum()
        y.backward(retain_graph=True)
        once = model.fc1.weight.grad.numpy().copy()
        y.backward()
        np.testing.assert_allclose(model.fc1.weight.grad.numpy(), 2 * once, rtol=1e-6)
        with pytest.raises(RuntimeError, match="backward through the graph a second time"):
            y.backward()


def test_bad_index_on_a_replayed_training_call_raises():
    lt.manual_seed(0)
    model = Net().to("lazy")
    cm = lt.compile(model)
    good = lt.tensor(np.arange(40).reshape(8, 5), device="lazy")
    for _ in range(2):
        cm(good).sum().backward()
    with pytest.raises(IndexError):
        cm(lt.tensor(np.full((8, 5), 50), device="lazy")).sum().backward()
    cm(good).sum().backward()  # and the process keeps working


def test_eval_and_no_grad_calls_are_separate_signatures():
    lt.manual_seed(0)
    model = Net().to("lazy")
    cm = lt.compile(model)
    idx = lt.tensor(np.random.default_rng(8).integers(0, 50, (8, 5)), device="lazy")
    cm(idx).sum().backward()
    model.eval()
    with lt.no_grad():
        a = cm(idx).numpy()
        b = cm(idx).numpy()
        want = model(idx).numpy()
    np.testing.assert_allclose(a, want, rtol=1e-6)
    np.testing.assert_allclose(b, want, rtol=1e-6)
    model.train()
    out = cm(idx)
    assert out.requires_grad and out.grad_fn is not None
    assert cm._compiled_forward.stats["replays"] == 2


class TinyGPT(nn.Module):
    def __init__(self, vocab=40, d=32, heads=4, layers=2, block=12):
        super().__init__()
        self.tok = nn.Embedding(vocab, d)
        self.pos = nn.Embedding(block, d)
        layer = nn.TransformerEncoderLayer(d, heads, 4 * d, dropout=0.1, batch_first=True, norm_first=True)
        self.blocks = nn.TransformerEncoder(layer, layers)
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, vocab, bias=False)
        self.register_buffer("mask", nn.Transformer.generate_square_subsequent_mask(block))

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(lt.arange(t, device=idx.device))
        return self.head(self.ln(self.blocks(x, mask=self.mask[:t, :t], is_causal=True)))


def test_a_small_gpt_trains_the_same_compiled_with_adamw():
    rng = np.random.default_rng(9)
    data = []
    for _ in range(4):
        seq = rng.integers(0, 40, (4, 13))
        data.append((seq[:, :-1], seq[:, 1:]))

    def run(compiled):
        lt.manual_seed(0)
        model = TinyGPT().to("lazy")
        f = lt.compile(model) if compiled else model
        opt = lt.optim.AdamW(model.parameters(), lr=3e-3)
        losses, traced = [], []
        for xb, yb in data:
            opt.zero_grad(set_to_none=True)
            t0 = _counter("traced_ops")
            logits = f(lt.tensor(xb, device="lazy"))
            traced.append(_counter("traced_ops") - t0)
            loss = F.cross_entropy(logits.reshape(-1, 40), lt.tensor(yb.reshape(-1), device="lazy"))
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, traced, f

    plain, _, _ = run(False)
    comp, traced, f = run(True)
    np.testing.assert_allclose(comp, plain, rtol=1e-4)
    assert traced[1:] == [0, 0, 0] and f._compiled_forward.stats["replays"] == 3
