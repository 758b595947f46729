"""An eager LSTM's cost is mostly the host work of tracing its ops (its forward and its backward
each run as one graph), so the ops a 2-layer LSTM over 8 steps traces are pinned: a change that
adds ops per time step fails here. Counted on "lazy" (the same ops, nothing runs); values and
gradients are checked against torch in test_nn_recurrent_transformer.py."""
import lazytensor as lt


def _traced(fn):
    before = lt.metrics.counters()["traced_ops"]
    out = fn()
    return lt.metrics.counters()["traced_ops"] - before, out


def test_lstm_forward_and_backward_traced_ops_are_pinned():
    lt.manual_seed(0)
    lstm = lt.nn.LSTM(16, 16, 2).to("lazy")
    x = lt.randn(8, 4, 16, device="lazy")
    h0, c0 = lt.zeros(2, 4, 16, device="lazy"), lt.zeros(2, 4, 16, device="lazy")
    lt.mark_step()
    fwd, (out, (h, c)) = _traced(lambda: lstm(x, (h0, c0)))
    g = lt.randn(8, 4, 16, device="lazy")
    bwd, _ = _traced(lambda: out.backward(g))
    # About 26 ops per time step forward (h @ W_hh^T + b_hh, the step's gates selected and
    # chunked, 4 activations, the cell and h: nn/recurrent.cc) and 77 backward (each of the
    # 4 chunks and the step's select padded back, 5 ops each with pad's mask cached; the stacked
    # outputs' gradient one slice per step). Before pad's cached mask, cat's one-node rule and the
    # C++ time loop (W_hh transposed once): (434, 1651). Since positions() is an iota node on
    # lazy devices (not an uploaded arange), its 4 index lists count as traced ops: 420 -> 424.
    assert (fwd, bwd) == (424, 1229)
    lt.mark_step()
