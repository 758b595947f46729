"""Edge cases a differential tester found against PyTorch 2.13 (issue 26, items 3, 4 and 6): each
program runs once in torch (CPU, eager) and once in lazytensor on every device, and values,
dtypes, gradients and error types must agree. torch is the oracle; it shares no code with us."""
import numpy as np
import pytest
import torch

import lazytensor as lt
import lazytensor.nn.functional as LF
import torch.nn.functional as TF
from parity import check, leaf


# ---- item 3: gradients at edge points ---------------------------------------------------------


@pytest.mark.parametrize("dim,keepdim", [(None, False), (1, False), (0, True), (-1, True)])
def test_prod_gradient_with_zero_entries(device, rng, dim, keepdim):
    x = rng.uniform(-2, 2, (4, 5))
    x[0, 2] = 0.0             # one zero in row 0 (and in column 2)
    x[1, 1] = x[1, 3] = 0.0   # two zeros in row 1
    x[3, 1] = 0.0             # column 1 has two zeros, column 4 none
    w = rng.uniform(-1, 1, (4, 5))

    def program(lib, dev):
        t = leaf(lib, dev, x, lib.float64)
        y = t.prod() if dim is None else t.prod(dim, keepdim=keepdim)
        weight = lib.tensor(w.tolist(), dtype=lib.float64, device=dev)
        ws = weight.sum() if dim is None else weight.sum(dim, keepdim=keepdim)
        (y * ws).sum().backward()
        return y, t.grad

    check(program, device)


@pytest.mark.parametrize("dim", [None, 1, 0])
def test_std_gradient_of_constant_input(device, rng, dim):
    x = rng.normal(size=(3, 4))
    x[:, 2] = -1.0   # a constant column
    x[1] = 2.5       # and a constant row
    if dim is None:
        x[:] = 0.75  # all constant

    def program(lib, dev):
        t = leaf(lib, dev, x, lib.float64)
        u = leaf(lib, dev, x, lib.float64)
        y = t.std() if dim is None else t.std(dim)
        v = u.var() if dim is None else u.var(dim)  # var's was right: checked beside std's
        (y.sum() + v.sum()).backward()
        return y, t.grad, v, u.grad

    check(program, device)


def test_std_gradient_constant_rows_with_correction_zero(device, rng):
    x = rng.normal(size=(2, 5))
    x[0] = 3.0

    def program(lib, dev):
        t = leaf(lib, dev, x, lib.float64)
        y = t.std(1, correction=0, keepdim=True)
        (y * 2).sum().backward()
        return y, t.grad

    check(program, device)


# ---- item 4: integer and bool semantics -------------------------------------------------------


@pytest.mark.parametrize("case", [
    "pow3", "square", "zero", "rpow", "tensor_exp", "negative_tensor_exp", "negative_number_exp",
    "wraps", "int32", "int8_wraps", "uint8_wraps", "pow_",
])
def test_integer_pow_keeps_integer(device, rng, case):
    base = rng.integers(-6, 7, (3, 4))
    exp = rng.integers(0, 5, (3, 4))

    def program(lib, dev):
        t = lib.tensor(base.tolist(), device=dev)
        e = lib.tensor(exp.tolist(), device=dev)
        if case == "pow3":
            return t.pow(3)
        if case == "square":  # a float exponent still gives float
            return t ** 2, t ** 2.0, t ** 0.5
        if case == "zero":
            return t ** 0
        if case == "rpow":  # a float base still gives float
            return 2 ** e, (-3) ** e, 2.5 ** e
        if case == "tensor_exp":
            return t ** e, lib.pow(t, e)
        if case == "negative_tensor_exp":  # 1 for base 1, +-1 for base -1, else 0 (no error)
            b = lib.tensor([-1, 1, 2, 0, -1, -3, 5], device=dev)
            return b ** lib.tensor([-1, -2, -1, -1, -2, -3, 0], device=dev)
        if case == "negative_number_exp":
            return t ** -1
        if case == "wraps":  # int64 overflow wraps around as PyTorch's does
            return lib.tensor([3, -7, 2, 2], device=dev) ** lib.tensor([50, 41, 62, 64], device=dev)
        if case == "int32":
            return lib.tensor(base.tolist(), dtype=lib.int32, device=dev) ** 3
        if case == "int8_wraps":
            return lib.tensor([3, -5, 7], dtype=lib.int8, device=dev) ** 5
        if case == "uint8_wraps":
            return lib.tensor([30, 7, 255], dtype=lib.uint8, device=dev) ** 2
        t.pow_(2)  # in place keeps the integer dtype
        return t

    check(program, device)


@pytest.mark.parametrize("start,end", [(2.0, 5.0), (-1.5, 7.25), (3, -3)])
def test_linspace_one_step_is_start(device, start, end):
    def program(lib, dev):
        return (lib.linspace(start, end, 1, device=dev),
                lib.linspace(start, end, 1, dtype=lib.float64, device=dev),
                lib.linspace(start, end, 2, device=dev), lib.linspace(start, end, 7, device=dev))

    check(program, device)


def test_tensor_from_python_floats_rounds_once_to_the_requested_dtype(device, rng):
    x = rng.normal(size=(3, 4)) * 1e3

    def program(lib, dev):
        return (lib.tensor(x.tolist(), dtype=lib.float64, device=dev),
                lib.tensor(x[0, 0].item(), dtype=lib.float64, device=dev),
                lib.tensor(x.tolist(), device=dev), lib.tensor(x.tolist(), dtype=lib.float16, device=dev))

    check(program, device, rtol=0, atol=0)


_BINARY = {
    "add": lambda lib, a, b: a + b,
    "sub": lambda lib, a, b: a - b,
    "mul": lambda lib, a, b: a * b,
    "div": lambda lib, a, b: a / b,
    "pow": lambda lib, a, b: lib.abs(a) ** b,
    "maximum": lambda lib, a, b: lib.maximum(a, b),
    "minimum": lambda lib, a, b: lib.minimum(a, b),
    "eq": lambda lib, a, b: a == b,
    "lt": lambda lib, a, b: a < b,
    "where": lambda lib, a, b: lib.where(a > 0, a, b),
    "where_other": lambda lib, a, b: lib.where(b > 0, b, a),
}

# (dimensioned dtype, 0-dim dtype): same category (the dimensioned one decides), or a higher
# category in the 0-dim tensor (it decides).
_ZERO_DIM_PAIRS = [("float32", "float64"), ("float16", "float64"), ("int32", "int64"),
                   ("int64", "float64"), ("int32", "float32")]


def _zero_dim_program(op, dims, zero, zero_first, x, s):
    def program(lib, dev):
        a = lib.tensor(x.tolist(), dtype=getattr(lib, dims), device=dev)
        b = lib.tensor(s, dtype=getattr(lib, zero), device=dev)
        return _BINARY[op](lib, b, a) if zero_first else _BINARY[op](lib, a, b)
    return program


@pytest.mark.parametrize("dims,zero", _ZERO_DIM_PAIRS[:3])
@pytest.mark.parametrize("zero_first", [False, True])
def test_zero_dim_tensor_does_not_promote_in_where(device, rng, dims, zero, zero_first):
    x = rng.integers(1, 5, (2, 3)).astype(np.float64)
    s = float(rng.integers(1, 4))
    for op in ("where", "where_other"):
        check(_zero_dim_program(op, dims, zero, zero_first, x, s), device, rtol=1e-3)


def test_zero_dim_promotion_rule_holds_for_every_binary_op(device, rng):
    x = rng.integers(1, 5, (2, 3)).astype(np.float64)
    s = float(rng.integers(1, 4))
    for op in sorted(_BINARY):
        for dims, zero in _ZERO_DIM_PAIRS:
            for zero_first in (False, True):
                check(_zero_dim_program(op, dims, zero, zero_first, x, s), device, rtol=1e-3)


@pytest.mark.parametrize("case", ["mul", "add", "add_number", "mul_number", "add_zero_dim", "iadd",
                                  "imul", "sub", "sub_number", "rsub", "int_sub_bool",
                                  "float_sub_bool"])
def test_bool_arithmetic(device, rng, case):
    p = rng.random((3, 4)) < 0.5
    q = rng.random((3, 4)) < 0.5

    def program(lib, dev):
        a = lib.tensor(p.tolist(), device=dev)
        b = lib.tensor(q.tolist(), device=dev)
        ops = {
            "mul": lambda: a * b, "add": lambda: a + b, "add_number": lambda: (a + True, a + 1),
            "mul_number": lambda: (a * True, a * 1.5),
            "add_zero_dim": lambda: a + lib.tensor(True, device=dev),
            "iadd": lambda: a.clone().add_(b), "imul": lambda: a.clone().mul_(b),
            "sub": lambda: a - b, "sub_number": lambda: a - 1, "rsub": lambda: 1 - a,
            "int_sub_bool": lambda: a.long() - b, "float_sub_bool": lambda: a.float() - b,
        }
        return ops[case]()

    check(program, device)


@pytest.mark.parametrize("fn", ["max", "min"])
@pytest.mark.parametrize("dim,keepdim", [(0, False), (1, False), (-1, True)])
def test_bool_max_min_along_dim(device, rng, fn, dim, keepdim):
    p = rng.random((4, 5)) < 0.4
    p[2] = True
    p[3] = False

    def program(lib, dev):
        a = lib.tensor(p.tolist(), device=dev)
        values, indices = getattr(a, fn)(dim, keepdim=keepdim)
        return values, indices

    check(program, device)


# ---- item 6: shapes, layouts and errors -------------------------------------------------------


@pytest.mark.parametrize("reduce", ["sum", "sum1", "prod", "mean1", "amax0"])
def test_reduce_slice_with_zero_size_middle_dim(device, rng, reduce):
    x = rng.normal(size=(2, 3, 2))

    def program(lib, dev):
        a = lib.tensor(x.tolist(), device=dev)
        s = a[:, :0, 0]  # shape [2, 0]
        if reduce == "sum":
            return lib.ones(2, 3, 2, device=dev)[:, :0, 0].sum(), s.sum(), s.sum(0)
        if reduce == "sum1":
            return s.sum(1), a[:, 1:1].sum(1)
        if reduce == "prod":
            return s.prod(1), s.prod()
        if reduce == "mean1":
            return s.mean(1)
        return s.amax(0)

    check(program, device)


@pytest.mark.parametrize("case", ["column_of_scalars", "expanded_batch", "both_expanded",
                                  "expanded_batch_grad"])
def test_matmul_unusual_layouts(device, rng, case):
    a = rng.normal(size=(5, 4, 1, 1))
    v = rng.normal(size=(1,))
    m = rng.normal(size=(4, 4))
    w = rng.normal(size=(4, 3))
    w3 = rng.normal(size=(5, 4, 3))

    def program(lib, dev):
        if case == "column_of_scalars":
            return lib.tensor(a.tolist(), device=dev) @ lib.tensor(v.tolist(), device=dev)
        if case == "expanded_batch":
            return lib.tensor(m.tolist(), device=dev).expand(2, 5, 4, 4) @ lib.tensor(
                w.tolist(), device=dev)
        if case == "both_expanded":
            x = lib.tensor(m.tolist(), device=dev).expand(2, 5, 4, 4)
            return x @ lib.tensor(w3.tolist(), device=dev).expand(2, 5, 4, 3)
        x = leaf(lib, dev, m)
        y = leaf(lib, dev, w)
        out = x.expand(2, 5, 4, 4) @ y
        (out * out).sum().backward()
        return out, x.grad, y.grad

    check(program, device, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("pool", ["max", "avg", "avg_exclude_pad"])
@pytest.mark.parametrize("size,kernel,stride,padding", [
    ((2, 2), 3, 2, 0), ((3, 2), (4, 3), 3, 0), ((1, 1), 2, 2, 0), ((2, 3), (3, 4), 2, (1, 0))])
def test_pool_ceil_mode_partial_window(device, rng, pool, size, kernel, stride, padding):
    x = rng.normal(size=(2, 3) + size)

    def program(lib, dev):
        F = TF if lib is torch else LF
        t = leaf(lib, dev, x, lib.float64)
        if pool == "max":
            y = F.max_pool2d(t, kernel, stride, padding, ceil_mode=True)
        else:
            y = F.avg_pool2d(t, kernel, stride, padding, ceil_mode=True,
                             count_include_pad=pool == "avg")
        (y * y).sum().backward()
        return y, t.grad

    check(program, device)


@pytest.mark.parametrize("case", ["row_vs_matrix", "column_vs_matrix", "zero_dim_input",
                                  "tensor_value", "grad"])
def test_masked_fill_broadcasts_input_against_mask(device, rng, case):
    x = rng.normal(size=(3,))
    col = rng.normal(size=(2, 1))
    mask = rng.random((2, 3)) < 0.5

    def program(lib, dev):
        m = lib.tensor(mask.tolist(), device=dev)
        if case == "row_vs_matrix":
            return lib.tensor(x.tolist(), device=dev).masked_fill(m, -1.5)
        if case == "column_vs_matrix":
            return lib.tensor(col.tolist(), device=dev).masked_fill(m, 4.0)
        if case == "zero_dim_input":
            return lib.tensor(2.5, device=dev).masked_fill(m, 0.0)
        if case == "tensor_value":
            return lib.masked_fill(lib.tensor(x.tolist(), device=dev), m, lib.tensor(7.0, device=dev))
        if case == "grad":
            t = leaf(lib, dev, x, lib.float64)
            y = t.masked_fill(m, 0.0)
            (y * lib.tensor(col.tolist(), dtype=lib.float64, device=dev)).sum().backward()
        return y, t.grad

    check(program, device)


@pytest.mark.parametrize("call", ["cumsum(1)", "cumsum(-2)", "argmin(2)", "argmax(1)", "argmin(-2)"])
def test_zero_dim_tensor_dim_range(device, rng, call):
    v = float(rng.normal())

    def program(lib, dev):
        return eval(f"t.{call}", {"t": lib.tensor(v, device=dev)})

    check(program, device)


@pytest.mark.parametrize("dtype", ["int64", "int32", "uint8", "bool"])
@pytest.mark.parametrize("call", ["var()", "std()", "var(0)", "std(1, keepdim=True)"])
def test_var_std_of_integer_or_bool_raise(device, rng, dtype, call):
    x = rng.integers(0, 2, (3, 4))

    def program(lib, dev):
        t = lib.tensor(x.tolist(), device=dev).to(getattr(lib, dtype))
        return eval(f"t.{call}", {"t": t})

    check(program, device)
