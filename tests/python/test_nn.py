"""lazytensor.nn against torch.nn: layers with copied weights (outputs and parameter gradients),
the Module protocol (registration, traversal, state_dict, load_state_dict errors, train/eval, to,
zero_grad), initializations, functional losses, clip_grad_norm_, and explicit not-implemented."""
import math

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.nn as nn
import lazytensor.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional


def to_lt(t, device):
    return lt.tensor(t.detach().numpy(), device=device)


def copy_weights(src_torch, dst_lt, device):
    dst_lt.load_state_dict({k: to_lt(v, device) for k, v in src_torch.state_dict().items()})


def check_layer(tm, lm, x_np, device, rtol=1e-5, atol=1e-6, target=None):
    """Same outputs and same parameter gradients (for a random upstream gradient)."""
    copy_weights(tm, lm, device)
    xt = torch.tensor(x_np)
    xl = lt.tensor(x_np, device=device)
    yt, yl = tm(xt), lm(xl)
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=rtol, atol=atol)
    if yt.dtype.is_floating_point and any(p.requires_grad for p in tm.parameters()):
        g = np.random.default_rng(7).standard_normal(tuple(yt.shape)).astype(np.float32)
        yt.backward(torch.tensor(g))
        yl.backward(lt.tensor(g, device=device))
        lp = dict(lm.named_parameters())
        for name, p in tm.named_parameters():
            np.testing.assert_allclose(lp[name].grad.numpy(), p.grad.numpy(), rtol=1e-4, atol=1e-5,
                                       err_msg=name)


def test_linear_matches_torch(device, rng):
    check_layer(torch.nn.Linear(6, 5), nn.Linear(6, 5, device=device), rng.standard_normal((4, 3, 6)).astype(np.float32), device)
    check_layer(torch.nn.Linear(6, 5, bias=False), nn.Linear(6, 5, bias=False),
                rng.standard_normal((4, 6)).astype(np.float32), "cpu")


def test_layernorm_matches_torch(device, rng):
    tm = torch.nn.LayerNorm(8)
    with torch.no_grad():
        tm.weight.copy_(torch.randn(8))
        tm.bias.copy_(torch.randn(8))
    check_layer(tm, nn.LayerNorm(8).to(device), rng.standard_normal((3, 8)).astype(np.float32), device)


def test_embedding_matches_torch(device, rng):
    tm = torch.nn.Embedding(10, 4)
    lm = nn.Embedding(10, 4).to(device)
    copy_weights(tm, lm, device)
    idx = rng.integers(0, 10, (3, 5))
    yt = tm(torch.tensor(idx))
    yl = lm(lt.tensor(idx, device=device))
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-6)
    g = rng.standard_normal((3, 5, 4)).astype(np.float32)
    yt.backward(torch.tensor(g))
    yl.backward(lt.tensor(g, device=device))
    np.testing.assert_allclose(lm.weight.grad.numpy(), tm.weight.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_embedding_padding_idx(rng):
    lm = nn.Embedding(6, 3, padding_idx=2)
    assert np.all(lm.weight.numpy()[2] == 0) and np.any(lm.weight.numpy()[1] != 0)
    idx = lt.tensor([[2, 1, 2, 5]])
    lm(idx).sum().backward()
    g = lm.weight.grad.numpy()
    assert np.all(g[2] == 0) and np.all(g[1] == 1) and np.all(g[0] == 0)


@pytest.mark.parametrize("name", ["ReLU", "GELU", "SiLU", "Tanh", "Sigmoid", "Softmax", "Flatten",
                                  "Identity", "LeakyReLU", "LogSoftmax"])
def test_activation_layers_match_torch(name, device, rng):
    args = {"Softmax": (1,), "LogSoftmax": (1,)}.get(name, ())
    tm = getattr(torch.nn, name)(*args)
    lm = getattr(nn, name)(*args)
    x = rng.standard_normal((3, 4, 2)).astype(np.float32)
    xt = torch.tensor(x, requires_grad=True)
    xl = lt.tensor(x, device=device, requires_grad=True)
    yt, yl = tm(xt), lm(xl)
    np.testing.assert_allclose(yl.numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = rng.standard_normal(tuple(yt.shape)).astype(np.float32)
    yt.backward(torch.tensor(g))
    yl.backward(lt.tensor(g, device=device))
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)


def test_gelu_tanh_layer(rng):
    x = rng.standard_normal(20).astype(np.float32)
    np.testing.assert_allclose(nn.GELU("tanh")(lt.tensor(x)).numpy(),
                               torch.nn.GELU("tanh")(torch.tensor(x)).numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("kwargs", [{}, {"reduction": "sum"}, {"reduction": "none"},
                                    {"label_smoothing": 0.2}, {"ignore_index": 1},
                                    {"weight": "w"}, {"weight": "w", "label_smoothing": 0.1}])
def test_cross_entropy_matches_torch(kwargs, device, rng):
    x = rng.standard_normal((7, 5)).astype(np.float32)
    t = rng.integers(0, 5, 7)
    w = rng.uniform(0.5, 2.0, 5).astype(np.float32)
    kt = {k: (torch.tensor(w) if v == "w" else v) for k, v in kwargs.items()}
    kl = {k: (lt.tensor(w, device=device) if v == "w" else v) for k, v in kwargs.items()}
    xt = torch.tensor(x, requires_grad=True)
    xl = lt.tensor(x, device=device, requires_grad=True)
    yt = TF.cross_entropy(xt, torch.tensor(t), **kt)
    yl = F.cross_entropy(xl, lt.tensor(t, device=device), **kl)
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    yt.sum().backward()
    yl.sum().backward()
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)


def test_cross_entropy_probability_targets_and_modules(device, rng):
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)
    p = rng.dirichlet(np.ones(3), (4, 2)).transpose(0, 2, 1).astype(np.float32)
    yt = TF.cross_entropy(torch.tensor(x), torch.tensor(p))
    yl = F.cross_entropy(lt.tensor(x, device=device), lt.tensor(p, device=device))
    np.testing.assert_allclose(yl.numpy(), yt.numpy(), rtol=1e-5)
    t = rng.integers(0, 3, 4)
    x2 = x[:, :, 0]
    np.testing.assert_allclose(nn.CrossEntropyLoss(label_smoothing=0.1)(lt.tensor(x2, device=device), lt.tensor(t, device=device)).numpy(),
                               torch.nn.CrossEntropyLoss(label_smoothing=0.1)(torch.tensor(x2), torch.tensor(t)).numpy(), rtol=1e-5)
    a, b = rng.standard_normal((2, 3, 4)).astype(np.float32)
    for red in ("mean", "sum", "none"):
        np.testing.assert_allclose(nn.MSELoss(reduction=red)(lt.tensor(a, device=device), lt.tensor(b, device=device)).numpy(),
                                   torch.nn.MSELoss(reduction=red)(torch.tensor(a), torch.tensor(b)).numpy(), rtol=1e-5)
    lp = TF.log_softmax(torch.tensor(x2), 1)
    np.testing.assert_allclose(F.nll_loss(lt.tensor(lp.numpy(), device=device), lt.tensor(t, device=device), reduction="sum").numpy(),
                               TF.nll_loss(lp, torch.tensor(t), reduction="sum").numpy(), rtol=1e-5)
    with pytest.raises(ValueError):
        F.cross_entropy(lt.tensor(x2), lt.tensor(t[:3]))


def test_functional_helpers_match_torch(device, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    for fl, ft in [(lambda v: F.softmax(v, 0), lambda v: TF.softmax(v, 0)),
                   (lambda v: F.log_softmax(v, -1), lambda v: TF.log_softmax(v, -1)),
                   (F.relu, TF.relu), (F.silu, TF.silu), (F.gelu, TF.gelu),
                   (lambda v: F.layer_norm(v, (5,)), lambda v: TF.layer_norm(v, (5,))),
                   (lambda v: F.leaky_relu(v, 0.2), lambda v: TF.leaky_relu(v, 0.2)),
                   (F.softplus, TF.softplus), (F.elu, TF.elu), (lambda v: F.normalize(v), lambda v: TF.normalize(v))]:
        np.testing.assert_allclose(fl(lt.tensor(x, device=device)).numpy(), ft(torch.tensor(x)).numpy(),
                                   rtol=1e-5, atol=1e-6)
    idx = rng.integers(0, 4, (2, 3))
    oh = F.one_hot(lt.tensor(idx, device=device), 6)
    assert oh.dtype == lt.int64
    np.testing.assert_array_equal(oh.numpy(), TF.one_hot(torch.tensor(idx), 6).numpy())
    np.testing.assert_array_equal(F.one_hot(lt.tensor(idx, device=device)).numpy(),
                                  TF.one_hot(torch.tensor(idx)).numpy())
    with pytest.raises(RuntimeError):
        F.gelu(lt.tensor(x), approximate="bad")


def test_dropout(device):
    lt.manual_seed(3)
    x = lt.ones(200, 100, device=device)
    y = F.dropout(x, 0.3).numpy()
    zeros = (y == 0).mean()
    assert 0.27 < zeros < 0.33
    np.testing.assert_allclose(y[y != 0], 1 / 0.7, rtol=1e-6)
    d = nn.Dropout(0.5)
    d.eval()
    np.testing.assert_array_equal(d(x).numpy(), x.numpy())
    d.train()
    assert (d(x).numpy() == 0).any()
    with pytest.raises(ValueError):
        nn.Dropout(1.5)
    # The mask is differentiable through: dropped elements get no gradient.
    xr = lt.ones(50, device=device, requires_grad=True)
    out = F.dropout(xr, 0.5)
    out.sum().backward()
    np.testing.assert_allclose(xr.grad.numpy(), out.detach().numpy())


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.blocks = nn.ModuleList([nn.Linear(8, 8), nn.Linear(8, 8)])
        self.heads = nn.ModuleDict({"a": nn.Linear(8, 2), "b": nn.LayerNorm(8)})
        self.scale = nn.Parameter(lt.ones(1))
        self.register_buffer("steps", lt.zeros(1))
        self.register_buffer("scratch", lt.zeros(2), persistent=False)
        self.plain = 3

    def forward(self, x):
        h = self.act(self.fc1(x))
        for b in self.blocks:
            h = self.act(b(h))
        return self.heads["a"](self.heads["b"](h)) * self.scale


class TorchNet(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = torch.nn.Linear(4, 8)
        self.act = torch.nn.ReLU()
        self.blocks = torch.nn.ModuleList([torch.nn.Linear(8, 8), torch.nn.Linear(8, 8)])
        self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(8, 2), "b": torch.nn.LayerNorm(8)})
        self.scale = torch.nn.Parameter(torch.ones(1) * 1.5)
        self.register_buffer("steps", torch.zeros(1))
        self.register_buffer("scratch", torch.zeros(2), persistent=False)

    def forward(self, x):
        h = self.act(self.fc1(x))
        for b in self.blocks:
            h = self.act(b(h))
        return self.heads["a"](self.heads["b"](h)) * self.scale


def test_module_registration_matches_torch(device, rng):
    ln, tn = Net(), TorchNet()
    assert [n for n, _ in ln.named_parameters()] == [n for n, _ in tn.named_parameters()]
    assert [n for n, _ in ln.named_buffers()] == [n for n, _ in tn.named_buffers()]
    assert list(ln.state_dict()) == list(tn.state_dict())
    assert [n for n, _ in ln.named_children()] == [n for n, _ in tn.named_children()]
    assert [n for n, _ in ln.named_modules()] == [n for n, _ in tn.named_modules()]
    assert len(list(ln.parameters())) == len(list(tn.parameters()))
    assert len(list(ln.children())) == 4 and len(list(ln.modules())) == 9
    assert all(isinstance(p, nn.Parameter) and p.requires_grad for p in ln.parameters())
    assert ln.plain == 3 and "plain" not in dict(ln.named_parameters())
    ln.to(device)
    check_layer(tn, ln, rng.standard_normal((5, 4)).astype(np.float32), device)
    assert "Linear(in_features=4, out_features=8, bias=True)" in repr(ln)


def test_load_state_dict_errors(rng):
    m = nn.Linear(3, 2)
    sd = m.state_dict()
    with pytest.raises(RuntimeError, match=r'Missing key\(s\) in state_dict: "bias"'):
        m.load_state_dict({"weight": sd["weight"]})
    with pytest.raises(RuntimeError, match=r'Unexpected key\(s\) in state_dict: "extra"'):
        m.load_state_dict(dict(sd, extra=lt.zeros(1)))
    with pytest.raises(RuntimeError, match=r"size mismatch for weight.*\[3, 3\].*\[2, 3\]"):
        m.load_state_dict({"weight": lt.zeros(3, 3), "bias": sd["bias"]})
    res = m.load_state_dict({"weight": sd["weight"], "extra": lt.zeros(1)}, strict=False)
    assert res.missing_keys == ["bias"] and res.unexpected_keys == ["extra"]
    w = rng.standard_normal((2, 3)).astype(np.float32)
    p = m.weight
    m.load_state_dict({"weight": lt.tensor(w), "bias": lt.zeros(2)})
    assert m.weight is p  # loading copies into the same parameter object
    np.testing.assert_array_equal(m.weight.numpy(), w)


def test_train_eval_to_zero_grad(rng):
    m = Net()
    assert m.training and m.blocks[0].training
    m.eval()
    assert not m.training and not m.heads["a"].training
    m.train()
    assert m.blocks[1].training
    params = list(m.parameters())
    before = [p.numpy() for p in params]
    m.to("lazy")
    after = list(m.parameters())
    assert all(a is b for a, b in zip(params, after))  # identity kept, as in PyTorch
    assert all(p.device.type == "lazy" and p.requires_grad for p in after)
    assert all(b.device.type == "lazy" for b in m.buffers())
    for b, p in zip(before, after):
        np.testing.assert_array_equal(p.numpy(), b)
    m(lt.randn(3, 4, device="lazy")).sum().backward()
    assert all(p.grad is not None for p in m.parameters())
    m.zero_grad(set_to_none=False)
    assert all(np.all(p.grad.numpy() == 0) for p in m.parameters())
    m.zero_grad()
    assert all(p.grad is None for p in m.parameters())
    m.double()
    assert all(p.dtype == lt.float64 for p in m.parameters())


def test_setattr_rules():
    m = nn.Module()
    with pytest.raises(TypeError):
        m.register_parameter("w", lt.zeros(2))
    m.w = nn.Parameter(lt.zeros(2))
    with pytest.raises(TypeError):
        m.w = lt.zeros(2)
    m.w = None
    assert m.w is None and list(m.parameters()) == []
    del m.w
    with pytest.raises(AttributeError):
        m.w
    with pytest.raises(NotImplementedError):
        m(1)

    class NoInit(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    with pytest.raises(AttributeError):
        NoInit()


def test_containers():
    s = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    assert len(s) == 3 and isinstance(s[1], nn.ReLU) and isinstance(s[-1], nn.Linear)
    assert len(s[:2]) == 2
    assert [n for n, _ in s.named_parameters()] == ["0.weight", "0.bias", "2.weight", "2.bias"]
    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml.append(nn.Linear(1, 1))
    assert len(ml) == 2 and len(list(ml.parameters())) == 4
    with pytest.raises(IndexError):
        ml[5]
    md = nn.ModuleDict({"x": nn.ReLU()})
    md["y"] = nn.Tanh()
    assert list(md.keys()) == ["x", "y"] and "y" in md


def test_linear_init_follows_torch_defaults():
    lt.manual_seed(0)
    m = nn.Linear(400, 300)
    w, b = m.weight.numpy(), m.bias.numpy()
    bound = 1 / math.sqrt(400)
    assert np.abs(w).max() <= bound and np.abs(b).max() <= bound
    # U(-bound, bound): std bound/sqrt(3); the draw is not degenerate.
    assert abs(w.std() - bound / math.sqrt(3)) < 0.02 * bound
    assert abs(w.mean()) < 0.02 * bound
    lt.manual_seed(0)
    np.testing.assert_array_equal(nn.Linear(400, 300, device="lazy").weight.numpy(), w)  # same seed, same weights


def test_init_functions():
    lt.manual_seed(1)
    t = nn.Parameter(lt.zeros(200, 100))
    nn.init.xavier_uniform_(t)
    a = math.sqrt(6 / 300)
    assert np.abs(t.numpy()).max() <= a and np.abs(t.numpy()).max() > 0.9 * a
    nn.init.kaiming_uniform_(t, nonlinearity="relu")
    bound = math.sqrt(2) * math.sqrt(3 / 100)
    assert np.abs(t.numpy()).max() <= bound and np.abs(t.numpy()).max() > 0.9 * bound
    nn.init.normal_(t, 2.0, 0.5)
    assert abs(t.numpy().mean() - 2) < 0.02 and abs(t.numpy().std() - 0.5) < 0.02
    nn.init.uniform_(t, -3, -2)
    assert t.numpy().min() >= -3 and t.numpy().max() <= -2
    nn.init.zeros_(t)
    assert np.all(t.numpy() == 0)
    nn.init.ones_(t)
    assert np.all(t.numpy() == 1)
    assert t.requires_grad and t.is_leaf
    assert nn.init.calculate_gain("tanh") == torch.nn.init.calculate_gain("tanh")


def test_clip_grad_norm_matches_torch(device, rng):
    shapes = [(3, 4), (5,), (2, 2)]
    grads = [rng.standard_normal(s).astype(np.float32) * 3 for s in shapes]
    for norm_type in (2.0, 1.0, math.inf):
        lp = [nn.Parameter(lt.zeros(*s, device=device)) for s in shapes]
        tp = [torch.nn.Parameter(torch.zeros(*s)) for s in shapes]
        for p, q, g in zip(lp, tp, grads):
            p.grad = lt.tensor(g, device=device)
            q.grad = torch.tensor(g)
        nl = nn.utils.clip_grad_norm_(lp, 1.5, norm_type)
        nt = torch.nn.utils.clip_grad_norm_(tp, 1.5, norm_type)
        np.testing.assert_allclose(nl.numpy(), nt.numpy(), rtol=1e-5)
        for p, q in zip(lp, tp):
            np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)


def test_parameter():
    t = lt.tensor([1.0, 2.0])
    p = nn.Parameter(t)
    assert isinstance(p, lt.Tensor) and p.requires_grad and p.is_leaf
    assert not t.requires_grad  # the source tensor keeps its own autograd state
    assert repr(p).startswith("Parameter containing:")
    assert not nn.Parameter(t, requires_grad=False).requires_grad


@pytest.mark.parametrize("name, kwargs", [("ReLU", {}), ("GELU", {}), ("SiLU", {}), ("Tanh", {}), ("Sigmoid", {}),
                                          ("Softmax", {"dim": -1})])
def test_activation_layers_match_torch(name, kwargs, device, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    lm, tm = getattr(nn, name)(**kwargs), getattr(torch.nn, name)(**kwargs)
    xl = lt.tensor(x, device=device, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    yl, yt = lm(xl), tm(xt)
    np.testing.assert_allclose(yl.detach().numpy(), yt.detach().numpy(), rtol=1e-5, atol=1e-6)
    g = rng.standard_normal(x.shape).astype(np.float32)
    yl.backward(lt.tensor(g, device=device))
    yt.backward(torch.tensor(g))
    np.testing.assert_allclose(xl.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-5)
    # Tensor.neg (and -x) as a function of the same input, for good measure.
    np.testing.assert_allclose(xl.detach().neg().numpy(), -x)
    np.testing.assert_allclose(nn.SiLU()(lt.tensor(x)).numpy(), (x / (1 + np.exp(-x))), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.Sigmoid()(lt.tensor(x)).numpy(), 1 / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(nn.Softmax(dim=1)(lt.tensor(x)).numpy().sum(1), np.ones(3), rtol=1e-5)
