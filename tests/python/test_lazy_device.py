"""The `lazy` device inside PyTorch (issue 27): unchanged torch code with device="lazy" runs on
lazytensor's lazy runtime. torch 2.13 on the CPU is the oracle: the same code on "cpu" and on
"lazy" gives the same values, losses and gradients; a training step compiles once."""
import io

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import lazytensor as lt
import lazytensor.torch  # noqa: F401  (installs the device)


def _host(rng, *shape):
    return torch.from_numpy(rng.standard_normal(shape).astype(np.float32))


def test_factories_and_moves(rng):
    x = torch.randn(4, 3, device="lazy")
    assert type(x).__name__ == "LazyTensor" and x.device == torch.device("lazy", 0)
    assert x.shape == (4, 3) and x.dtype == torch.float32
    for make in (lambda d: torch.zeros(2, 3, device=d), lambda d: torch.ones(5, dtype=torch.int64, device=d),
                 lambda d: torch.arange(2, 11, 3, device=d), lambda d: torch.arange(4.5, device=d),
                 lambda d: torch.full((2, 2), 3.25, device=d), lambda d: torch.empty(3, device=d).fill_(7)):
        want, got = make("cpu"), make("lazy")
        assert got.device.type == "lazy" and got.dtype == want.dtype
        torch.testing.assert_close(got.cpu(), want)
    h = _host(rng, 3, 4)
    lazy = h.to("lazy")
    torch.testing.assert_close(lazy.cpu(), h)
    assert lazy.cpu().numpy().shape == (3, 4)
    assert (lazy * 2).sum().item() == pytest.approx((h * 2).sum().item(), rel=1e-6)
    assert lazy.tolist() == h.tolist()
    assert "device='lazy:0'" in repr(lazy)


def test_elementwise_reductions_views_and_in_place_match_cpu(rng):
    a, b = _host(rng, 4, 5), _host(rng, 5)

    def program(a, b):
        c = (a * b + 1).tanh()
        c[1:, ::2] += 3          # a write through a view reaches c
        d = c.t().contiguous().view(-1)[:7]
        e = torch.cat([c.sum(0), c.amax(1), d], 0)
        return e.softmax(0), c.mean(1, keepdim=True)

    want = program(a, b)
    got = program(a.to("lazy"), b.to("lazy"))
    for w, g in zip(want, got):
        torch.testing.assert_close(g.cpu(), w, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("make_opt", [lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9),
                                      lambda p: torch.optim.AdamW(p, lr=0.01)], ids=["sgd", "adamw"])
def test_mlp_training_matches_cpu_and_compiles_one_graph(rng, make_opt):
    torch.manual_seed(0)
    cpu_model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    lazy_model = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
    lazy_model.load_state_dict(cpu_model.state_dict())
    lazy_model = lazy_model.to("lazy")
    opts = make_opt(cpu_model.parameters()), make_opt(lazy_model.parameters())
    x, y = _host(rng, 8, 6), torch.from_numpy(rng.integers(0, 3, 8))
    xl, yl = x.to("lazy"), y.to("lazy")
    compiles = []
    for step in range(6):
        losses = []
        for model, opt, xi, yi in ((cpu_model, opts[0], x, y), (lazy_model, opts[1], xl, yl)):
            opt.zero_grad()
            loss = F.cross_entropy(model(xi), yi)
            loss.backward()
            opt.step()  # on lazy parameters: the end of the step
            losses.append(loss.item())
        assert losses[1] == pytest.approx(losses[0], rel=1e-5)
        compiles.append(lt.metrics.counters()["graph_compiles"])
    assert compiles[-1] == compiles[2], compiles  # from the third step on, every step is a cache hit
    for pc, pl in zip(cpu_model.parameters(), lazy_model.parameters()):
        torch.testing.assert_close(pl.detach().cpu(), pc.detach(), rtol=1e-4, atol=1e-5)


def test_state_dict_round_trip_across_devices(rng):
    model = torch.nn.Linear(4, 2).to("lazy")
    buf = io.BytesIO()
    torch.save({k: v.cpu() for k, v in model.state_dict().items()}, buf)
    buf.seek(0)
    cpu_model = torch.nn.Linear(4, 2)
    cpu_model.load_state_dict(torch.load(buf))
    x = _host(rng, 3, 4)
    torch.testing.assert_close(model(x.to("lazy")).detach().cpu(), cpu_model(x).detach(), rtol=1e-6, atol=1e-6)
    back = torch.nn.Linear(4, 2).to("lazy")
    back.load_state_dict(cpu_model.state_dict())
    torch.testing.assert_close(back.weight.detach().cpu(), cpu_model.weight.detach())


def test_torch_save_of_a_lazy_state_dict_loads_with_weights_only(rng, tmp_path):
    model = torch.nn.Linear(4, 3).to("lazy")
    torch.save(model.state_dict(), tmp_path / "m.pt")
    sd = torch.load(tmp_path / "m.pt")  # weights_only=True, torch's default
    assert all(v.device.type == "lazy" for v in sd.values())
    cpu_model = torch.nn.Linear(4, 3)
    cpu_model.load_state_dict(sd)  # across devices
    torch.testing.assert_close(cpu_model.weight, model.weight.detach().cpu())


def test_mark_step_names_and_manual_seed():
    x = torch.ones(3, device="lazy") * 2
    assert x._lt._is_pending
    torch._lazy.mark_step()  # LazyTensor Core's name reaches our runtime
    assert not x._lt._is_pending
    y = torch.ones(2, device="lazy") + 1
    lazytensor.torch.mark_step()
    assert not y._lt._is_pending
    torch.manual_seed(5)
    a = torch.randn(4, device="lazy").cpu()
    torch.manual_seed(5)
    b = torch.randn(4, device="lazy").cpu()
    torch.testing.assert_close(a, b)


def test_randperm_on_the_device_is_ours_and_seeded():
    before = lt.metrics.counters().get("fallbacks", 0)
    torch.manual_seed(3)
    p = torch.randperm(40, device="lazy")
    q = torch.randperm(40, device="lazy", dtype=torch.float32, generator=torch.Generator())
    torch.manual_seed(3)
    again = torch.randperm(40, device="lazy")
    assert p.device.type == "lazy" and p.dtype == torch.int64 and q.dtype == torch.float32
    assert sorted(p.cpu().tolist()) == list(range(40)) and sorted(q.cpu().tolist()) == list(range(40))
    assert p.cpu().tolist() == again.cpu().tolist()
    assert lt.metrics.counters().get("fallbacks", 0) == before


def test_torch_tf32_switches_reach_the_runtime(rng):
    """A script sets torch.backends' TF32 switches; the matmuls and convolutions it runs on the
    device carry them to the runtime's settings, which the CUDA launches read (the GPU run checks
    their effect on values: tests/gpu/check_conv_cudnn.py)."""
    x, w = _host(rng, 2, 3, 6, 6).to("lazy"), _host(rng, 4, 3, 3, 3).to("lazy")
    a = _host(rng, 4, 5).to("lazy")
    try:
        for on in (False, True, False):
            torch.backends.cudnn.allow_tf32 = on
            torch.backends.cuda.matmul.allow_tf32 = not on
            F.conv2d(x, w).cpu()
            (a @ a.t()).cpu()
            assert lt._C.conv_allow_tf32() is on and lt._C.matmul_allow_tf32() is (not on)
    finally:
        torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = True, False
        lt.backends.cudnn.allow_tf32, lt.backends.cuda.matmul.allow_tf32 = True, False


def test_an_op_outside_the_table_runs_in_torch_counted_and_right(rng):
    h = _host(rng, 5, 3).abs() + 0.5
    before = lt.metrics.counters().get("fallbacks", 0)
    got = torch.cumprod(h.to("lazy"), dim=0).cpu()
    torch.testing.assert_close(got, torch.cumprod(h, dim=0))
    assert lt.metrics.counters().get("fallbacks", 0) > before


def _run_script(tmp_path, text, **env):
    """Runs `text` as a fresh Python process (this one's environment, no disk cache, plus `env`)."""
    import os
    import subprocess
    import sys
    script = tmp_path / "script.py"
    script.write_text(text)
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=dict(os.environ, LT_CACHE_DIR="off", **env), timeout=120)


def test_import_torch_alone_gives_the_device(tmp_path):
    """torch's device-backend autoload finds lazytensor's entry point: a script that never
    imports lazytensor runs on it by naming the device; TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it
    off (the script then fails as plain torch does)."""
    script = ("import sys, torch\n"
              "x = torch.arange(6.0, device='lazy').reshape(2, 3)\n"
              "print(type(x).__name__, (x * 2).sum().item(), 'lazytensor.torch.backend' in sys.modules)\n")
    r = _run_script(tmp_path, script)
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["LazyTensor", "30.0", "False"]  # and the compile backend not loaded
    r = _run_script(tmp_path, script, TORCH_DEVICE_BACKEND_AUTOLOAD="0")
    assert r.returncode != 0 and "Lazy" in r.stderr


def test_importing_lazytensor_torch_before_torch_works(tmp_path):
    """`import lazytensor.torch` as a script's first line: its own import of torch runs torch's
    autoload of the same module while that module is half made (once a circular-import crash)."""
    r = _run_script(tmp_path, "import lazytensor.torch\nimport torch\n"
                              "x = torch.arange(6.0, device='lazy').reshape(2, 3)\n"
                              "print(type(x).__name__, (x * 2).sum().item())\n")
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == ["LazyTensor", "30.0"]


def test_gpt_with_tied_weights_trains_like_cpu_without_fallbacks(rng):
    """nanoGPT-style model (F.scaled_dot_product_attention, weight tying) moved with
    model.to("lazy"): the tie survives the move (one parameter, one gradient), losses follow the
    CPU run, no op falls back, and the step stops compiling."""
    import sys
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).parent))
    from torch_models import GPT
    torch.manual_seed(0)
    cpu, lazy = GPT(), GPT()
    lazy.load_state_dict(cpu.state_dict())
    lazy = lazy.to("lazy")
    assert lazy.head.weight is lazy.wte.weight and isinstance(lazy.wte.weight, torch.nn.Parameter)
    oc, ol = torch.optim.AdamW(cpu.parameters(), lr=1e-3), torch.optim.AdamW(lazy.parameters(), lr=1e-3)
    idx, tgt = (torch.from_numpy(rng.integers(0, 64, (4, 16))) for _ in range(2))
    il, tl = idx.to("lazy"), tgt.to("lazy")
    fallbacks = lt.metrics.counters().get("fallbacks", 0)
    compiles = []
    for _ in range(5):
        ol.zero_grad()
        loss = lazy(il, tl)
        loss.backward()
        ol.step()
        oc.zero_grad()
        want = cpu(idx, tgt)
        want.backward()
        oc.step()
        assert loss.item() == pytest.approx(want.item(), rel=1e-5)
        compiles.append(lt.metrics.counters()["graph_compiles"])
    assert compiles[-1] == compiles[0], compiles  # one graph, the first step's included
    assert lt.metrics.counters().get("fallbacks", 0) == fallbacks
    back = lazy.to("cpu")
    assert back.head.weight is back.wte.weight and type(back.wte.weight) is torch.nn.Parameter


def _train_both(make, batches, steps=4, make_opt=lambda p: torch.optim.AdamW(p, lr=1e-3), loss_of=None):
    """The same model (same initial state) trained on cpu and on lazy; per step the two losses, and
    the compile counter on lazy after each step."""
    torch.manual_seed(0)
    cpu, lazy = make(), make()
    lazy.load_state_dict(cpu.state_dict())
    lazy = lazy.to("lazy")
    oc, ol = make_opt(cpu.parameters()), make_opt(lazy.parameters())
    rows, compiles = [], []
    fallbacks = lt.metrics.counters().get("fallbacks", 0)
    for _ in range(steps):
        pair = []
        for model, opt, dev in ((cpu, oc, "cpu"), (lazy, ol, "lazy")):
            opt.zero_grad()
            loss = loss_of(model, *(b.to(dev) for b in batches))
            loss.backward()
            opt.step()
            pair.append(loss.item())
        rows.append(pair)
        compiles.append(lt.metrics.counters()["graph_compiles"])
    return rows, compiles, lt.metrics.counters().get("fallbacks", 0) - fallbacks


@pytest.mark.parametrize("arch", ["gpt2", "bert"])
def test_hf_transformers_train_like_cpu(rng, arch):
    import torch_env
    torch_env.allow_torchvision_import()
    import transformers
    if arch == "gpt2":
        cfg = transformers.GPT2Config(vocab_size=128, n_positions=32, n_embd=32, n_layer=2, n_head=4,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
        make = lambda: transformers.GPT2LMHeadModel(cfg)  # noqa: E731
        loss_of = lambda m, ids: m(ids, labels=ids).loss  # noqa: E731
    else:
        cfg = transformers.BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                                      intermediate_size=64, max_position_embeddings=32,
                                      hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        make = lambda: transformers.BertForMaskedLM(cfg)  # noqa: E731
        loss_of = lambda m, ids: m(input_ids=ids, labels=ids).loss  # noqa: E731
    ids = torch.from_numpy(rng.integers(0, 128, (2, 16)))
    rows, compiles, fallbacks = _train_both(make, (ids,), loss_of=loss_of)
    for want, got in rows:
        assert got == pytest.approx(want, rel=1e-4)
    assert compiles[-1] == compiles[2], compiles
    assert fallbacks == 0


def test_cnn_with_batchnorm_trains_like_cpu(rng):
    def make():
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 8, 3, padding=1), torch.nn.BatchNorm2d(8), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Flatten(), torch.nn.Linear(8 * 4 * 4, 10))
    x = _host(rng, 4, 3, 8, 8)
    y = torch.from_numpy(rng.integers(0, 10, 4))
    rows, compiles, _ = _train_both(make, (x, y), make_opt=lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9),
                                    loss_of=lambda m, x, y: F.cross_entropy(m(x), y))
    for want, got in rows:
        assert got == pytest.approx(want, rel=1e-4)
    assert compiles[-1] == compiles[2], compiles


def test_bad_uses_raise_pytorch_error_types_and_the_session_goes_on():
    a = torch.ones(3, device="lazy")
    with pytest.raises(RuntimeError, match="same device"):
        a + torch.ones(3)  # a lazy and a cpu tensor in one op
    with pytest.raises(RuntimeError, match="complex64"):  # NotImplementedError is a RuntimeError
        torch.ones(3, dtype=torch.complex64, device="lazy")
    with pytest.raises(RuntimeError):
        a @ torch.ones(4, device="lazy")  # shapes that do not fit: the op's own error
    assert (a * 2).sum().item() == 6.0


@pytest.mark.parametrize("arch", ["lstm", "transformer"])
def test_word_language_model_style_trains_like_cpu(rng, arch):
    """pytorch/examples word_language_model: Embedding -> LSTM (hidden state carried across
    batches, detached) or TransformerEncoder with a causal mask -> Linear, SGD with clipping."""
    ntoken, ninp = 40, 16

    class RNNModel(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = torch.nn.Embedding(ntoken, ninp)
            if arch == "lstm":
                self.rnn = torch.nn.LSTM(ninp, ninp, 2)
            else:
                layer = torch.nn.TransformerEncoderLayer(ninp, 4, 32, dropout=0.0)
                self.rnn = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
            self.decoder = torch.nn.Linear(ninp, ntoken)

        def forward(self, x, hidden):
            emb = self.encoder(x)
            if arch == "lstm":
                out, hidden = self.rnn(emb, hidden)
            else:
                mask = torch.nn.Transformer.generate_square_subsequent_mask(len(x), device=x.device)
                out = self.rnn(emb, mask)
            return self.decoder(out), hidden

    torch.manual_seed(0)
    cpu, lazy = RNNModel(), RNNModel()
    lazy.load_state_dict(cpu.state_dict())
    lazy = lazy.to("lazy")
    data = torch.from_numpy(rng.integers(0, ntoken, (7 * 6 + 1, 3)))
    losses, compiles = {}, None
    for model, dev in ((cpu, "cpu"), (lazy, "lazy")):
        opt = torch.optim.SGD(model.parameters(), lr=0.5)
        hidden = tuple(torch.zeros(2, 3, ninp, device=dev) for _ in range(2))
        losses[dev] = []
        for i in range(0, 7 * 6, 7):
            x, y = data[i:i + 7].to(dev), data[i + 1:i + 8].to(dev)
            hidden = tuple(h.detach() for h in hidden)  # repackage_hidden
            opt.zero_grad()
            out, hidden = model(x, hidden)
            loss = F.cross_entropy(out.view(-1, ntoken), y.reshape(-1))
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
            opt.step()
            losses[dev].append(loss.item())
            if dev == "lazy" and i == 14:
                compiles = lt.metrics.counters()["graph_compiles"]
    assert lt.metrics.counters()["graph_compiles"] == compiles  # no compile after the third batch
    np.testing.assert_allclose(losses["lazy"], losses["cpu"], rtol=1e-4)


def _makemore(dev, steps=30):
    """Karpathy's makemore (part 2) MLP as written: raw tensors, C[X[ix]] embedding lookup, manual
    SGD through `p.data += -lr * p.grad`, one loss.item() per step."""
    g = torch.Generator().manual_seed(2147483647)
    X, Y = torch.randint(0, 27, (500, 3), generator=g), torch.randint(0, 27, (500,), generator=g)
    C = torch.randn((27, 10), generator=g)
    W1, b1 = torch.randn((30, 64), generator=g) * 0.2, torch.randn(64, generator=g) * 0.01
    W2, b2 = torch.randn((64, 27), generator=g) * 0.01, torch.randn(27, generator=g) * 0
    parameters = [p.to(dev) for p in (C, W1, b1, W2, b2)]
    for p in parameters:
        p.requires_grad = True
    C, W1, b1, W2, b2 = parameters
    X, Y = X.to(dev), Y.to(dev)
    losses, compiles = [], []
    for _ in range(steps):
        ix = torch.randint(0, X.shape[0], (32,), generator=g).to(dev)
        emb = C[X[ix]]
        h = torch.tanh(emb.view(-1, 30) @ W1 + b1)
        loss = F.cross_entropy(h @ W2 + b2, Y[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -0.1 * p.grad
        losses.append(loss.item())
        compiles.append(lt.metrics.counters()["graph_compiles"])
    return np.array(losses), compiles


def test_makemore_style_manual_sgd_keeps_one_graph():
    want, _ = _makemore("cpu")
    got, compiles = _makemore("lazy")
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert got[-1] < got[0]
    assert compiles[-1] == compiles[1], compiles  # no optimizer state: one graph from the start


def test_mnist_style_mlp_with_a_dataloader(rng):
    """pytorch/examples mnist's loop shape with an MLP: a CPU DataLoader whose batches move to the
    device, log_softmax + nll_loss, SGD; loss.item() every batch."""
    from torch.utils.data import DataLoader, TensorDataset
    data = TensorDataset(torch.from_numpy(rng.standard_normal((96, 1, 8, 8)).astype(np.float32)),
                         torch.from_numpy(rng.integers(0, 10, 96)))

    def train(dev):
        torch.manual_seed(1)
        model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(64, 32), torch.nn.ReLU(),
                                    torch.nn.Linear(32, 10)).to(dev)
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        losses = []
        for x, y in DataLoader(data, batch_size=16, shuffle=False):
            x, y = x.to(dev), y.to(dev)
            opt.zero_grad()
            loss = F.nll_loss(F.log_softmax(model(x), dim=1), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return np.array(losses)

    np.testing.assert_allclose(train("lazy"), train("cpu"), rtol=1e-5)


@pytest.mark.parametrize("cls", [torch.nn.GRU, torch.nn.LSTM, torch.nn.RNN])
@pytest.mark.parametrize("batch_first", [True, False])
def test_recurrent_modules_match_cpu_values_and_gradients(rng, cls, batch_first):
    """aten.gru/lstm/rnn decompose in PyTorch's C++; with batch_first the output is transposed
    in place (transpose_) while autograd holds it: the wrapper takes the new shape by `.data =`."""
    torch.manual_seed(0)
    ref = cls(4, 8, num_layers=2, batch_first=batch_first)
    model = cls(4, 8, num_layers=2, batch_first=batch_first)
    model.load_state_dict(ref.state_dict())
    model = model.to("lazy")
    x = _host(rng, 2, 5, 4)
    lt.metrics.reset()
    out_ref, _ = ref(x)
    out, _ = model(x.to("lazy"))
    weights = _host(rng, *out_ref.shape)
    (out_ref * weights).sum().backward()
    (out * weights.to("lazy")).sum().backward()
    torch.testing.assert_close(out.cpu(), out_ref, rtol=1e-5, atol=1e-6)
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.grad.cpu(), q.grad, rtol=1e-4, atol=1e-6)
    assert lt.metrics.counters()["fallbacks"] == 0


@pytest.mark.parametrize("causal", [True, False])
def test_sdpa_on_the_device_is_lazytensors_fused_attention(rng, causal):
    """F.scaled_dot_product_attention on `lazy` records lazytensor's fused attention (one op and
    its VJP) instead of PyTorch's math decomposition; values and gradients as on cpu. A float mask
    that needs a gradient takes the decomposition, with its gradient."""
    q, k, v = (_host(rng, 2, 3, 8, 16).requires_grad_() for _ in range(3))
    mask = _host(rng, 8, 8).requires_grad_()
    grad = _host(rng, 2, 3, 8, 16)
    lazy = [t.detach().to("lazy").requires_grad_() for t in (q, k, v, mask)]
    lt.metrics.reset()
    ref = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
    out = F.scaled_dot_product_attention(*lazy[:3], is_causal=causal)
    assert "lazytensor_sdpa" in type(out.grad_fn).__name__
    ref.backward(grad)
    out.backward(grad.to("lazy"))
    torch.testing.assert_close(out.cpu(), ref, rtol=1e-5, atol=1e-5)
    for a, b in zip(lazy[:3], (q, k, v)):
        torch.testing.assert_close(a.grad.cpu(), b.grad, rtol=1e-4, atol=1e-5)
    ref = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out = F.scaled_dot_product_attention(*lazy[:3], attn_mask=lazy[3])
    assert "lazytensor_sdpa" not in type(out.grad_fn).__name__
    ref.sum().backward()
    out.sum().backward()
    torch.testing.assert_close(lazy[3].grad.cpu(), mask.grad, rtol=1e-4, atol=1e-5)
    assert lt.metrics.counters()["fallbacks"] == 0


@pytest.mark.parametrize("make_opt", [
    lambda p: torch.optim.AdamW(p, lr=1e-2),
    lambda p: torch.optim.Adam(p, lr=1e-2, weight_decay=0.1, amsgrad=True),
    lambda p: torch.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True),
    lambda p: torch.optim.RMSprop(p, lr=1e-2, momentum=0.5, centered=True),
    lambda p: torch.optim.Adagrad(p, lr=0.1),
    lambda p: torch.optim.NAdam(p, lr=1e-2),
    lambda p: torch.optim.Adamax(p, lr=1e-2),
    lambda p: torch.optim.Adadelta(p),
])
def test_optimizers_take_their_foreach_paths_like_cuda(rng, make_opt):
    """torch.optim defaults to foreach on `lazy` (as on CUDA), and clip_grad_norm_ too: the
    `_foreach_*` ops expand per tensor into the step's graph (lazy_foreach.py). Values as on cpu,
    nothing falls back to PyTorch, and from the third step on no new graph compiles."""
    from torch.optim.optimizer import _default_to_fused_or_foreach
    torch.manual_seed(0)
    ref = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.Tanh(), torch.nn.Linear(8, 3))
    model.load_state_dict(ref.state_dict())
    model = model.to("lazy")
    assert _default_to_fused_or_foreach(list(model.parameters()), False) == (False, True)
    opts = make_opt(ref.parameters()), make_opt(model.parameters())
    lt.metrics.reset()
    for step in range(6):
        x = _host(rng, 4, 6)
        for m, opt, xx in ((ref, opts[0], x), (model, opts[1], x.to("lazy"))):
            loss = m(xx).square().mean()
            opt.zero_grad()
            loss.backward()
            torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            opt.step()
        if step == 1:
            compiles = lt.metrics.counters()["graph_compiles"]
    for p, q in zip(model.parameters(), ref.parameters()):
        torch.testing.assert_close(p.cpu(), q, rtol=1e-5, atol=1e-6)
    assert lt.metrics.counters()["fallbacks"] == 0
    assert lt.metrics.counters()["graph_compiles"] == compiles


def test_sort_argsort_topk_run_on_the_device_with_gradients(rng):
    """torch.sort/argsort/topk on `lazy` use lazytensor's sort (no CPU fallback): values and
    indices as on cpu (stable order), and gradients through the values."""
    x = torch.from_numpy(rng.integers(-3, 4, size=(4, 9)).astype(np.float32))  # ties
    lt.metrics.reset()
    for descending in (False, True):
        v, i = torch.sort(x.to("lazy"), dim=1, descending=descending, stable=True)
        want_v, want_i = torch.sort(x, dim=1, descending=descending, stable=True)
        torch.testing.assert_close(v.cpu(), want_v)
        torch.testing.assert_close(i.cpu(), want_i)
        torch.testing.assert_close(torch.argsort(x.to("lazy"), dim=0, descending=descending, stable=True).cpu(),
                                   torch.argsort(x, dim=0, descending=descending, stable=True))
    distinct = _host(rng, 5, 7)
    a, b = distinct.clone().requires_grad_(), distinct.to("lazy").requires_grad_()
    g = _host(rng, 5, 3)
    torch.topk(a, 3, dim=1).values.mul(g).sum().backward()
    out = torch.topk(b, 3, dim=1)
    out.values.mul(g.to("lazy")).sum().backward()
    torch.testing.assert_close(out.indices.cpu(), torch.topk(distinct, 3, dim=1).indices)
    torch.testing.assert_close(b.grad.cpu(), a.grad)
    assert lt.metrics.counters()["fallbacks"] == 0
