"""Everyday PyTorch surface against torch 2.13, on cpu and lazy: Tensor.new_* / type() / roll,
the optimizers Adadelta, Adagrad, RMSprop and LBFGS, amp.GradScaler (and the cuda.amp spelling),
cuda.manual_seed(_all), backends' TF32 flags, lt.save's error for a whole module, and randperm."""
import warnings

import numpy as np
import pytest

import lazytensor as lt
import lazytensor.backends
import lazytensor.nn as nn

torch = pytest.importorskip("torch")


def _torch_dtype_name(t):
    return str(t.dtype).split(".")[1]


def _assert_like_torch(got, want, rtol=1e-6, atol=1e-7):
    """Same shape, dtype name and values as the torch tensor `want`."""
    assert tuple(got.shape) == tuple(want.shape)
    assert got.dtype.name == _torch_dtype_name(want), (got.dtype, want.dtype)
    np.testing.assert_allclose(got.numpy(), want.detach().numpy(), rtol=rtol, atol=atol)


# ---- Tensor.new_* --------------------------------------------------------------------------------

def _sources(device, rng):
    """(lazytensor, torch) pairs of a random float32 and a random int64 tensor."""
    f = rng.standard_normal((2, 3)).astype(np.float32)
    i = rng.integers(-5, 5, size=(4,))
    return [(lt.tensor(f, device=device), torch.tensor(f)),
            (lt.tensor(i, device=device), torch.tensor(i))]


def test_new_constructors_match_torch(device, rng):
    fill = float(rng.uniform(1.5, 3.5))
    data = rng.standard_normal((2, 2)).round(3).tolist()
    for src, tsrc in _sources(device, rng):
        cases = [
            ("new_zeros", (2, 3), {}), ("new_zeros", ((2, 3),), {}), ("new_zeros", ([3],), {}),
            ("new_zeros", ((),), {}), ("new_ones", (3, 1), {}), ("new_ones", ([2],), {}),
            ("new_ones", (2,), {"dtype": "float64"}), ("new_zeros", (2,), {"dtype": "int32"}),
            ("new_full", ((2, 3), fill), {}), ("new_full", ([4], -fill), {}),
            ("new_full", ((2,), 7), {"dtype": "float64"}), ("new_full", ((2,), True), {}),
            ("new_tensor", (data,), {}), ("new_tensor", ([3, -1],), {}),
            ("new_tensor", (data,), {"dtype": "int32"}), ("new_tensor", (fill,), {}),
        ]
        for name, args, kw in cases:
            got = getattr(src, name)(*args, **{k: getattr(lt, v) for k, v in kw.items()})
            want = getattr(tsrc, name)(*args, **{k: getattr(torch, v) for k, v in kw.items()})
            assert got.device == src.device, (name, args)
            _assert_like_torch(got, want)
        empty = src.new_empty(3, 2)
        assert tuple(empty.shape) == (3, 2) and empty.dtype == src.dtype
        assert empty.device == src.device


def test_new_constructors_options_and_errors(device, rng):
    src, _ = _sources(device, rng)[0]
    on_cpu = src.new_zeros(2, device="cpu")
    assert on_cpu.device.type == "cpu"
    g = src.new_ones(3, requires_grad=True)
    assert g.requires_grad and g.is_leaf
    (g * src.new_tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(g.grad.numpy(), [1.0, 2.0, 3.0])
    assert src.new_full((2,), 1.5, requires_grad=True).requires_grad
    with pytest.raises(TypeError, match="missing 1 required positional arguments"):
        src.new_zeros()
    with pytest.raises(TypeError, match="must be tuple of ints, not int"):
        src.new_full(2, 1.0)
    with pytest.raises(RuntimeError, match="floating point"):
        src.long().new_zeros(2, requires_grad=True)
    with pytest.warns(UserWarning, match="detach\\(\\).clone\\(\\)"):
        copy = src.new_tensor(src)
    np.testing.assert_array_equal(copy.numpy(), src.numpy())


# ---- Tensor.type ---------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int64", "int32",
                                   "int8", "uint8", "bool"])
def test_type_string_matches_torch(device, dtype):
    t = lt.zeros(2, dtype=getattr(lt, dtype), device=device)
    want = torch.zeros(2, dtype=getattr(torch, dtype)).type()
    if device == "cpu":
        assert t.type() == want
    else:  # torch names a non-cpu device type after "torch.", as in torch.cuda.FloatTensor
        assert t.type() == want.replace("torch.", "torch.lazy.")


def test_type_casts_like_torch(device, rng):
    x = rng.standard_normal(6).astype(np.float32) * 4
    t, tt = lt.tensor(x, device=device), torch.tensor(x)
    assert t.type(lt.float32) is t and t.type(dtype=None) == t.type()
    for lt_arg, torch_arg in [(lt.int32, torch.int32), (lt.float64, torch.float64),
                              (lt.bool, torch.bool), ("torch.DoubleTensor", "torch.DoubleTensor")]:
        got = t.type(lt_arg)
        _assert_like_torch(got.cpu(), tt.type(torch_arg))
    # A type string names a device type, and moves there, as in PyTorch.
    assert t.type("torch.LongTensor").device.type == "cpu"
    assert t.type("torch.lazy.IntTensor").device.type == "lazy"
    with pytest.raises(ValueError, match="invalid type: 'torch.Foo'"):
        t.type("torch.Foo")
    with pytest.raises(ValueError, match="invalid type"):
        t.type("FloatTensor")
    with pytest.raises(TypeError, match="dtype must be a type, str, or dtype object"):
        t.type(3)


# ---- roll ----------------------------------------------------------------------------------------

ROLLS = [(2, None), (-7, None), ((13,), None), (1, 0), (-2, -1), (4, 1), (0, 2),
         ((1, -2), (0, 2)), ((3, 5), (-1, 1)), ((1, 1), (1, 1)), (11, 2)]


@pytest.mark.parametrize("shifts,dims", ROLLS, ids=[str(r) for r in ROLLS])
def test_roll_matches_torch(device, rng, shifts, dims):
    x = rng.standard_normal((3, 4, 5)).astype(np.float32)
    got = lt.tensor(x, device=device).roll(shifts, dims)
    _assert_like_torch(got, torch.tensor(x).roll(shifts, dims))
    ints = rng.integers(0, 100, size=(3, 4, 5))
    np.testing.assert_array_equal(lt.tensor(ints, device=device).roll(shifts, dims).numpy(),
                                  torch.tensor(ints).roll(shifts, dims).numpy())


def test_roll_gradient_and_edge_cases(device, rng):
    x = rng.standard_normal((4, 3)).astype(np.float32)
    w = rng.standard_normal((4, 3)).astype(np.float32)
    lx = lt.tensor(x, device=device, requires_grad=True)
    tx = torch.tensor(x, requires_grad=True)
    (lx.roll((1, -1), (0, 1)) * lt.tensor(w, device=device)).sum().backward()
    (tx.roll((1, -1), (0, 1)) * torch.tensor(w)).sum().backward()
    np.testing.assert_allclose(lx.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    scalar = lt.tensor(2.5, device=device)
    assert scalar.roll(3).item() == 2.5 and scalar.roll(3).shape == ()
    assert tuple(lt.zeros(0, 3, device=device).roll(2, 0).shape) == (0, 3)
    t = lt.tensor(x, device=device)
    with pytest.raises(RuntimeError, match="shifts and dimensions must align. shifts: 2, dims:1"):
        t.roll((1, 2), (0,))
    with pytest.raises(RuntimeError, match="shifts and dimensions must align. shifts: 2, dims:0"):
        t.roll((1, 2))
    with pytest.raises(IndexError, match="Dimension out of range"):
        t.roll(1, 5)
    with pytest.raises(IndexError, match="tensor has no dimensions"):
        scalar.roll(1, 0)


@pytest.mark.skipif(not hasattr(lt, "roll"), reason="lt.roll needs `from ._tensor_new import roll` "
                    "in lazytensor/__init__.py")
def test_module_level_roll(device, rng):
    x = rng.standard_normal((3, 5)).astype(np.float32)
    _assert_like_torch(lt.roll(lt.tensor(x, device=device), 2, 1),
                       torch.roll(torch.tensor(x), 2, 1))
    _assert_like_torch(lt.roll(lt.tensor(x, device=device), -4), torch.roll(torch.tensor(x), -4))


# ---- Adadelta, Adagrad, RMSprop ------------------------------------------------------------------

def _linear_pair(device, rng, n_in=4, n_out=3):
    """An lt.nn.Linear on `device` and a torch.nn.Linear with the same random weights."""
    w0 = (rng.standard_normal((n_out, n_in)) * 0.5).astype(np.float32)
    b0 = (rng.standard_normal(n_out) * 0.5).astype(np.float32)
    lm = nn.Linear(n_in, n_out, device=device)
    lm.load_state_dict({"weight": lt.tensor(w0, device=device),
                        "bias": lt.tensor(b0, device=device)})
    tm = torch.nn.Linear(n_in, n_out)
    tm.load_state_dict({"weight": torch.tensor(w0), "bias": torch.tensor(b0)})
    return lm, tm


OPTIMIZER_CONFIGS = [
    ("Adadelta", {}),
    ("Adadelta", dict(lr=0.5, rho=0.8, eps=1e-5, weight_decay=0.1)),
    ("Adagrad", dict(lr=0.1)),
    ("Adagrad", dict(lr=0.1, lr_decay=0.05, weight_decay=0.1, initial_accumulator_value=0.3)),
    ("RMSprop", {}),
    ("RMSprop", dict(lr=0.01, momentum=0.9)),
    ("RMSprop", dict(lr=0.01, momentum=0.9, centered=True, weight_decay=0.1)),
    ("RMSprop", dict(lr=0.005, alpha=0.9, centered=True, maximize=True)),
]


@pytest.mark.parametrize("name,kw", OPTIMIZER_CONFIGS,
                         ids=[f"{n}-{i}" for i, (n, _) in enumerate(OPTIMIZER_CONFIGS)])
def test_optimizer_matches_torch(name, kw, device, rng):
    lm, tm = _linear_pair(device, rng)
    lo = getattr(lt.optim, name)(lm.parameters(), **kw)
    to = getattr(torch.optim, name)(tm.parameters(), **kw)
    for _ in range(10):
        x = rng.standard_normal((6, 4)).astype(np.float32)
        y = rng.standard_normal((6, 3)).astype(np.float32)
        for opt, model, mod, dev in ((lo, lm, lt, device), (to, tm, torch, "cpu")):
            opt.zero_grad()
            out = model(mod.tensor(x, device=dev)).tanh()
            loss = ((out - mod.tensor(y, device=dev)) ** 2).mean()
            loss.backward()
            opt.step()
        for p, q in zip(lm.parameters(), tm.parameters()):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
    lsd, tsd = lo.state_dict(), to.state_dict()
    assert sorted(lsd["state"][0]) == sorted(tsd["state"][0])
    for key, want in tsd["state"][0].items():
        np.testing.assert_allclose(np.asarray(lsd["state"][0][key].numpy()), want.numpy(),
                                   rtol=1e-5, atol=1e-6, err_msg=key)
    assert {k: v for k, v in lsd["param_groups"][0].items() if k in kw} == kw


@pytest.mark.parametrize("name,kw", [("Adadelta", dict(rho=0.8)), ("Adagrad", dict(lr_decay=0.1)),
                                     ("RMSprop", dict(momentum=0.5, centered=True))])
def test_optimizer_state_dict_resumes(name, kw, device, rng):
    lm, _ = _linear_pair(device, rng)
    x = lt.tensor(rng.standard_normal((6, 4)).astype(np.float32), device=device)

    def step(opt):
        opt.zero_grad()
        (lm(x).tanh() ** 2).sum().backward()
        opt.step()

    opt = getattr(lt.optim, name)(lm.parameters(), **kw)
    for _ in range(3):
        step(opt)
    saved_params = {k: v.numpy().copy() for k, v in lm.state_dict().items()}
    saved = {"state": {i: {k: (v.clone() if isinstance(v, lt.Tensor) else v) for k, v in s.items()}
                       for i, s in opt.state_dict()["state"].items()},
             "param_groups": opt.state_dict()["param_groups"]}
    step(opt)
    want = [p.numpy().copy() for p in lm.parameters()]
    lm.load_state_dict({k: lt.tensor(v, device=device) for k, v in saved_params.items()})
    resumed = getattr(lt.optim, name)(lm.parameters(), **kw)
    resumed.load_state_dict(saved)
    assert float(resumed.state[lm.weight]["step"]) == 3
    step(resumed)
    for p, w in zip(lm.parameters(), want):
        np.testing.assert_allclose(p.numpy(), w, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("name,kw", [("Adadelta", dict(lr=-1)), ("Adadelta", dict(rho=1.5)),
                                     ("Adagrad", dict(lr_decay=-1)),
                                     ("Adagrad", dict(initial_accumulator_value=-1)),
                                     ("RMSprop", dict(alpha=-0.1)), ("RMSprop", dict(momentum=-1)),
                                     ("RMSprop", dict(eps=-1)), ("LBFGS", dict(lr=-1))])
def test_optimizer_argument_errors_match_torch(name, kw):
    with pytest.raises(ValueError) as want:
        getattr(torch.optim, name)([torch.nn.Parameter(torch.ones(2))], **kw)
    with pytest.raises(ValueError) as got:
        getattr(lt.optim, name)([nn.Parameter(lt.ones(2))], **kw)
    assert str(got.value) == str(want.value)


# ---- LBFGS ---------------------------------------------------------------------------------------

def _least_squares(device, rng):
    """A linear least-squares problem and its closures in both libraries (same data and weights)."""
    lm, tm = _linear_pair(device, rng)
    x = rng.standard_normal((16, 4)).astype(np.float32)
    y = rng.standard_normal((16, 3)).astype(np.float32)
    lx, ly = lt.tensor(x, device=device), lt.tensor(y, device=device)
    tx, ty = torch.tensor(x), torch.tensor(y)

    def closures(lo, to):
        def lt_closure():
            lo.zero_grad()
            loss = ((lm(lx) - ly) ** 2).mean()
            loss.backward()
            return loss

        def torch_closure():
            to.zero_grad()
            loss = ((tm(tx) - ty) ** 2).mean()
            loss.backward()
            return loss

        return lt_closure, torch_closure

    return lm, tm, closures, (x, y)


# Few iterations per step, so the runs stay away from the minimum: there the loss is flat to
# float32 round-off, which (in either library) decides where the tolerance tests stop and where
# the line search lands, and the two agree only to the accuracy of the solution (the test below).
LBFGS_CONFIGS = [dict(lr=0.5, max_iter=4, history_size=3),
                 dict(line_search_fn="strong_wolfe", max_iter=3, history_size=2)]


@pytest.mark.parametrize("kw", LBFGS_CONFIGS, ids=["fixed_step", "strong_wolfe"])
def test_lbfgs_matches_torch(kw, device, rng):
    lm, tm, closures, _ = _least_squares(device, rng)
    lo, to = lt.optim.LBFGS(lm.parameters(), **kw), torch.optim.LBFGS(tm.parameters(), **kw)
    lt_closure, torch_closure = closures(lo, to)
    for _ in range(2):
        got_loss, want_loss = lo.step(lt_closure), to.step(torch_closure)
        assert abs(got_loss.item() - want_loss.item()) <= 1e-5 * abs(want_loss.item())
        for p, q in zip(lm.parameters(), tm.parameters()):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-5, atol=2e-5)
        lstate, tstate = lo.state[lm.weight], to.state[tm.weight]
        assert (lstate["func_evals"], lstate["n_iter"]) == (tstate["func_evals"], tstate["n_iter"])
        assert len(lstate["old_dirs"]) == len(tstate["old_dirs"])


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_lbfgs_reaches_least_squares_solution(line_search_fn, device, rng):
    lm, tm, closures, (x, y) = _least_squares(device, rng)
    lo = lt.optim.LBFGS(lm.parameters(), line_search_fn=line_search_fn)
    lt_closure, _ = closures(lo, None)
    for _ in range(3):
        lo.step(lt_closure)
    design = np.concatenate([x, np.ones((16, 1), np.float32)], 1).astype(np.float64)
    solution = np.linalg.lstsq(design, y.astype(np.float64), rcond=None)[0]
    np.testing.assert_allclose(lm.weight.numpy().T, solution[:4], atol=2e-4)
    np.testing.assert_allclose(lm.bias.numpy(), solution[4], atol=2e-4)


def test_lbfgs_errors():
    p = nn.Parameter(lt.ones(2))
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        lt.optim.LBFGS([p], line_search_fn="backtracking").step(lambda: (p * p).sum())
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        lt.optim.LBFGS([{"params": [p]}, {"params": [nn.Parameter(lt.ones(1))]}])


# ---- GradScaler ----------------------------------------------------------------------------------

def test_grad_scaler_matches_torch(device, rng):
    """Finite steps, an inf and a nan gradient (step skipped, scale backed off), growth after
    growth_interval clean steps: parameters, scale, tracker and state_dict as torch's."""
    lm, tm = _linear_pair(device, rng)
    lo = lt.optim.SGD(lm.parameters(), lr=0.1, momentum=0.9)
    to = torch.optim.SGD(tm.parameters(), lr=0.1, momentum=0.9)
    options = dict(init_scale=1024.0, growth_factor=3.0, backoff_factor=0.3, growth_interval=2)
    ls, ts = lt.amp.GradScaler(device, **options), torch.amp.GradScaler("cpu", **options)
    skipped = []
    for i in range(7):
        x = rng.standard_normal((5, 4)).astype(np.float32)
        if i == 2:
            x[1, 2] = np.inf
        if i == 4:
            x[0, 0] = np.nan
        before = [p.numpy().copy() for p in lm.parameters()]
        for opt, model, mod, scaler, dev in ((lo, lm, lt, ls, device), (to, tm, torch, ts, "cpu")):
            opt.zero_grad()
            loss = (model(mod.tensor(x, device=dev)) ** 2).mean()
            scaler.scale(loss).backward()
            if i % 2:
                scaler.unscale_(opt)  # explicit unscale_ (as before gradient clipping)
            scaler.step(opt)
            scaler.update()
        if i in (2, 4):
            skipped.append(all(np.array_equal(p.numpy(), b)
                               for p, b in zip(lm.parameters(), before)))
        for p, q in zip(lm.parameters(), tm.parameters()):
            np.testing.assert_allclose(p.numpy(), q.detach().numpy(), rtol=1e-5, atol=1e-6)
        assert ls.get_scale() == ts.get_scale()
        assert ls.state_dict() == ts.state_dict()
    assert skipped == [True, True]
    assert ls.get_scale() != 1024.0  # it backed off and grew


def test_grad_scaler_api(device):
    p = nn.Parameter(lt.tensor([1.0, -2.0], device=device))
    opt = lt.optim.SGD([p], lr=0.1)
    scaler = lt.amp.GradScaler(device, init_scale=8.0)
    with pytest.raises(AssertionError, match="did not use scaler.scale"):
        scaler.step(opt)
    assert scaler.get_scale() == 8.0
    scaled = scaler.scale([p.sum(), (p.sum(), p * 2)])
    assert isinstance(scaled, list) and isinstance(scaled[1], tuple)
    assert scaled[0].item() == -8.0 and scaled[1][1].tolist() == [16.0, -32.0]
    half = scaler.scale(lt.tensor(3.0, dtype=lt.float16, device=device))
    assert half.dtype == lt.float32  # a 0-d float32 scale, as torch's
    with pytest.raises(ValueError, match="iterable of Tensors"):
        scaler.scale(3.0)
    scaler.scale((p * p).sum()).backward()
    scaler.unscale_(opt)
    np.testing.assert_allclose(p.grad.numpy(), [2.0, -4.0])
    with pytest.raises(RuntimeError, match="already been called on this optimizer"):
        scaler.unscale_(opt)
    with pytest.raises(RuntimeError, match="Closure use is not currently supported"):
        scaler.step(opt, closure=lambda: None)
    scaler.step(opt)
    with pytest.raises(RuntimeError, match="step\\(\\) has already been called"):
        scaler.step(opt)
    scaler.update(new_scale=4.0)
    assert scaler.get_scale() == 4.0
    state = scaler.state_dict()
    other = lt.amp.GradScaler(device)
    other.load_state_dict(state)
    assert other.state_dict() == state
    with pytest.raises(RuntimeError, match="source state dict is empty"):
        other.load_state_dict({})
    off = lt.amp.GradScaler(device, enabled=False)
    loss = p.sum()
    assert off.scale(loss) is loss and off.get_scale() == 1.0 and off.state_dict() == {}
    with pytest.raises(AssertionError, match="growth factor must be > 1.0"):
        lt.amp.GradScaler(device, growth_factor=1.0)


def test_grad_scaler_refuses_fp16_gradients():
    p = nn.Parameter(lt.tensor([1.0, 2.0], dtype=lt.float16))
    opt = lt.optim.SGD([p], lr=0.1)
    scaler = lt.amp.GradScaler("cpu")
    scaler.scale((p * p).sum()).backward()
    with pytest.raises(ValueError, match="Attempting to unscale FP16 gradients."):
        scaler.unscale_(opt)


def test_cuda_amp_import_path():
    from lazytensor.cuda.amp import GradScaler, autocast
    assert lt.cuda.amp.GradScaler is GradScaler and issubclass(GradScaler, lt.amp.GradScaler)
    with pytest.warns(FutureWarning, match="lazytensor.amp.autocast\\('cuda'"):
        region = autocast()
    assert isinstance(region, lt.amp.autocast)
    assert (region.device_type, region.fast_dtype) == ("cuda", lt.float16)  # torch's defaults
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        scaler = GradScaler(init_scale=4.0)
    assert scaler.is_enabled() == lt.cuda.is_available()
    if not lt.cuda.is_available():  # as torch: disabled, with a warning, when CUDA is absent
        with pytest.warns(UserWarning, match="CUDA is not available.  Disabling."):
            lt.amp.GradScaler("cuda")


# ---- lt.cuda seeding, lt.backends flags, lt.save(module) -----------------------------------------

def test_cuda_manual_seed_seeds_the_generator(device):
    lt.manual_seed(1234)
    want = lt.randn(5, device=device).numpy()
    for seed_fn in (lt.cuda.manual_seed, lt.cuda.manual_seed_all):
        seed_fn(1234)
        np.testing.assert_array_equal(lt.randn(5, device=device).numpy(), want)
    lt.cuda.manual_seed_all(4321)
    assert not np.array_equal(lt.randn(5, device=device).numpy(), want)


def test_backends_tf32_flags():
    matmul, cudnn = lt.backends.cuda.matmul, lt.backends.cudnn
    assert matmul.allow_tf32 == torch.backends.cuda.matmul.allow_tf32 is False
    assert cudnn.allow_tf32 == torch.backends.cudnn.allow_tf32 is True
    try:
        matmul.allow_tf32 = True
        cudnn.allow_tf32 = False
        assert matmul.allow_tf32 is True and cudnn.allow_tf32 is False
    finally:
        matmul.allow_tf32, cudnn.allow_tf32 = False, True
    with pytest.raises(AttributeError, match="Unknown attribute allow_tf23"):
        matmul.allow_tf23 = True
    # matmul.allow_tf32 is the runtime's switch, read by each CUDA GEMM launch (the GPU run checks
    # its effect: tests/gpu/check_ops_vs_torch.py).
    try:
        matmul.allow_tf32 = True
        assert lt._C.matmul_allow_tf32() is True
    finally:
        matmul.allow_tf32 = False
    assert lt._C.matmul_allow_tf32() is False
    # So is cudnn.allow_tf32, read by each cuDNN convolution launch (the GPU run checks its
    # effect: tests/gpu/check_conv_cudnn.py).
    try:
        cudnn.allow_tf32 = False
        assert lt._C.conv_allow_tf32() is False
    finally:
        cudnn.allow_tf32 = True
    assert lt._C.conv_allow_tf32() is True
    # No cuDNN in this CPU-only environment, as torch's CPU build says too.
    assert cudnn.is_available() == torch.backends.cudnn.is_available()
    assert (cudnn.version() is None) == (torch.backends.cudnn.version() is None)


def test_save_whole_module_points_to_state_dict(tmp_path, device):
    model = nn.Sequential(nn.Linear(3, 2, device=device))
    with pytest.raises(TypeError, match=r"save its state_dict instead: "
                       r"lt.save\(model.state_dict\(\), path\)"):
        lt.save(model, tmp_path / "model.safetensors")
    assert not (tmp_path / "model.safetensors").exists()
    # This state dict's safetensors header is 128 bytes: its length's first byte, 0x80, is also how
    # a pickle starts, and lt.load once took the file for torch's legacy format.
    lt.save(model.state_dict(), tmp_path / "model.safetensors")
    loaded = lt.load(tmp_path / "model.safetensors")
    for k, v in model.state_dict().items():
        np.testing.assert_array_equal(loaded[k].numpy(), v.numpy())


# ---- randperm --------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, dtype", [(n, d) for n in (0, 1, 2, 7, 1000)
                                      for d in (None, "int32", "int8", "float32", "float64")
                                      if not (d == "int8" and n > 128)])  # int8: see the errors
def test_randperm_is_a_permutation_of_torchs_dtype(device, n, dtype):
    kw = {} if dtype is None else {"dtype": getattr(lt, dtype)}
    tkw = {} if dtype is None else {"dtype": getattr(torch, dtype)}
    got, want = lt.randperm(n, device=device, **kw), torch.randperm(n, **tkw)
    assert tuple(got.shape) == tuple(want.shape) == (n,)
    assert got.dtype.name == _torch_dtype_name(want)
    assert str(got.device).startswith(device)
    np.testing.assert_array_equal(np.sort(got.numpy()), np.arange(n))


def test_randperm_seeding_and_distribution(device):
    lt.manual_seed(5)
    a = lt.randperm(50, device=device).numpy()
    b = lt.randperm(50, device=device).numpy()
    lt.manual_seed(5)
    np.testing.assert_array_equal(lt.randperm(50, device=device).numpy(), a)  # reproducible
    assert (a != b).any()  # and each call draws anew
    g1, g2 = lt.Generator().manual_seed(9), lt.Generator().manual_seed(9)
    np.testing.assert_array_equal(lt.randperm(20, generator=g1).numpy(), lt.randperm(20, generator=g2).numpy())
    # Uniform over positions: each value lands at position 0 about 1/4 of the time.
    firsts = np.array([lt.randperm(4, device=device).numpy()[0] for _ in range(2000)])
    counts = np.bincount(firsts, minlength=4)
    assert counts.min() > 400 and counts.max() < 600, counts
    x = lt.randperm(3, dtype=lt.float32, requires_grad=True)
    assert x.requires_grad and x.is_leaf


def test_randperm_errors_like_torch():
    for bad in (-1, -5):
        with pytest.raises(RuntimeError, match="negative dimension"):
            lt.randperm(bad)
        with pytest.raises(RuntimeError, match="negative dimension"):
            torch.randperm(bad)
    with pytest.raises(TypeError, match="must be int"):
        lt.randperm(3.0)
    with pytest.raises(NotImplementedError, match="randperm"):
        lt.randperm(3, dtype=lt.bool)
    with pytest.raises(RuntimeError, match="too large"):
        lt.randperm(300, dtype=lt.int8)
    with pytest.raises(RuntimeError):
        torch.randperm(300, dtype=torch.int8)
    with pytest.raises(RuntimeError, match="floating point"):
        lt.randperm(3, requires_grad=True)
