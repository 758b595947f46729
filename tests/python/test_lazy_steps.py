"""Lazy steps that end by themselves (issue 32, item 1; runtime/shared_work.h): a sync also
materializes the live tensors that share work with what it reads, and the values autograd saved
for a backward still to come, so a step's graph holds that step's work only. Each pattern runs
10+ steps and pins the graph per step: the same hash from the second step on, one compile."""
import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn.functional as F


def _graphs_per_step(step, steps=12):
    """Runs step() `steps` times on lazy; returns the per-step (hash, nodes) of the last graph of
    each step and the number of graph compiles after the first two steps."""
    seen = []
    compiles_after_warmup = None
    for i in range(steps):
        step()
        g = lt.metrics.last_graph()
        seen.append((g["hash"], g["nodes"]))
        if i == 1:
            compiles_after_warmup = lt.metrics.counters()["graph_compiles"]
    return seen, lt.metrics.counters()["graph_compiles"] - compiles_after_warmup


def test_manual_sgd_under_no_grad_with_item_per_step_keeps_one_graph(rng):
    """pytorch/examples regression.py: loss.item() before backward, `p.data.add_(-lr * p.grad)`."""
    fc = lt.nn.Linear(4, 1).to("lazy")
    x = lt.tensor(rng.standard_normal((32, 4)).astype(np.float32), device="lazy")
    y = lt.tensor(rng.standard_normal((32, 1)).astype(np.float32), device="lazy")
    losses = []

    def step():
        out = F.smooth_l1_loss(fc(x), y)
        losses.append(out.item())
        fc.zero_grad()
        out.backward()
        for p in fc.parameters():
            p.data.add_(-0.1 * p.grad)

    lt.mark_step()
    seen, new_compiles = _graphs_per_step(step)
    assert len({h for h, _ in seen[2:]}) == 1, seen
    assert new_compiles == 0
    assert losses[-1] < losses[0]


def test_item_before_backward_computes_forward_once(rng):
    """The forward's saved values are outputs of the loss.item() sync: the backward graph reads
    them instead of recomputing the forward (no matmul of the forward in it)."""
    model = lt.nn.Sequential(lt.nn.Linear(8, 16), lt.nn.Tanh(), lt.nn.Linear(16, 1)).to("lazy")
    opt = lt.optim.SGD(model.parameters(), lr=0.05)
    x = lt.tensor(rng.standard_normal((16, 8)).astype(np.float32), device="lazy")
    y = lt.tensor(rng.standard_normal((16, 1)).astype(np.float32), device="lazy")
    lt.mark_step()
    for _ in range(3):
        opt.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.item()
        loss.backward()
        opt.step()
        lt.mark_step()
        # backward + update: x^T-side and W^T-side GEMMs of the two layers, no forward GEMM.
        assert lt.metrics.last_graph()["grouping"].count("gemm") <= 3


def test_two_reads_of_one_pending_result_compute_it_once(rng):
    w = lt.tensor(rng.standard_normal((64, 64)).astype(np.float32), device="lazy", requires_grad=True)
    x = lt.tensor(rng.standard_normal((32, 64)).astype(np.float32), device="lazy")
    lt.mark_step()
    ((x @ w).tanh() ** 2).sum().backward()
    g = w.grad
    first = g.abs().max().item()
    assert lt.metrics.last_graph()["outputs"] >= 2  # the max and the gradient itself
    second = g.abs().sum().item()
    assert lt.metrics.last_graph()["nodes"] <= 6  # abs, sum of stored data: no backward again
    want = np.abs(g.numpy())
    assert first == pytest.approx(float(want.max()), rel=1e-6)
    assert second == pytest.approx(float(want.sum()), rel=1e-5)


def test_sampling_loop_graph_does_not_grow_with_tokens(rng):
    """minGPT's generate: a token buffer grown by cat, read through a slice, a sample read per
    token: each token's graph holds only that token's work."""
    emb = lt.nn.Embedding(20, 8).to("lazy")
    head = lt.nn.Linear(8, 20).to("lazy")
    idx = lt.tensor([[1, 2, 3]], device="lazy")
    nodes = []
    lt.manual_seed(0)
    with lt.no_grad():
        for _ in range(12):
            logits = head(emb(idx[:, -3:])).mean(1)
            probs = F.softmax(logits, dim=-1)
            nxt = lt.multinomial(probs, 1)
            idx = lt.cat([idx, nxt], dim=1)
            nodes.append(lt.metrics.last_graph()["nodes"])
    assert max(nodes[2:]) == min(nodes[2:]), nodes
    assert tuple(idx.shape) == (1, 15)


def test_carried_hidden_state_with_optimizer_keeps_one_graph(rng):
    """word_language_model: a hand-written RNN whose hidden state is carried, detached, across
    batches, with an optimizer step and a loss.item() per step."""
    cell = lt.nn.Linear(6 + 5, 5).to("lazy")
    out = lt.nn.Linear(5, 3).to("lazy")
    params = list(cell.parameters()) + list(out.parameters())
    opt = lt.optim.AdamW(params, lr=0.01)
    xs = lt.tensor(rng.standard_normal((4, 2, 6)).astype(np.float32), device="lazy")
    ys = lt.tensor(rng.integers(0, 3, (4, 2)), device="lazy")
    h = lt.zeros(2, 5, device="lazy")
    lt.mark_step()

    def step():
        nonlocal h
        h = h.detach()
        loss = 0
        for t in range(4):
            h = cell(lt.cat([xs[t], h], dim=1)).tanh()
            loss = loss + F.cross_entropy(out(h), ys[t])
        opt.zero_grad()
        loss.backward()
        opt.step()
        loss.item()

    seen, new_compiles = _graphs_per_step(step)
    assert len({hsh for hsh, _ in seen[2:]}) == 1, seen
    assert new_compiles == 0
