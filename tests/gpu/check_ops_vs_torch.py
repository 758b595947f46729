#!/usr/bin/env python3
"""GPU correctness: every op (and fused graphs of them) on lazytensor's `lazy:cuda` and eager
`cuda` devices against PyTorch on CUDA, in float32 and float64 (float16/bfloat16 where PyTorch
computes them the same way). Also: lazytensor's random numbers on `lazy:cuda` must equal those on
`lazy:cpu` bit for bit (one counter-based generator for every backend), and, where the Python
package has autograd, each op's gradient against PyTorch's.

Run by tests/gpu/run.sh:  PYTHONPATH=<build>/python python3 tests/gpu/check_ops_vs_torch.py --json out.json
Exit status 0 only when every check passed; an op that this build's Python API lacks is reported
as "missing" (listed loudly, not a failure); an op that exists but errors or differs is a failure.
"""
import argparse
import json
import sys
import traceback

import numpy as np
import torch

import lazytensor as lt

RTOL = {"float32": 1e-5, "float64": 1e-11, "float16": 2e-3, "bfloat16": 1.6e-2}
ATOL = {"float32": 1e-6, "float64": 1e-12, "float16": 1e-3, "bfloat16": 1e-2}
# Reductions and row kernels add in another order than PyTorch: a looser bound.
RED_RTOL = {"float32": 1e-4, "float64": 1e-10, "float16": 1e-2, "bfloat16": 5e-2}
RED_ATOL = {"float32": 1e-5, "float64": 1e-11, "float16": 1e-2, "bfloat16": 5e-2}

results = []
ONLY = []  # --only: run the checks whose names contain one of these


def skipped(name):
    return bool(ONLY) and not any(o in name for o in ONLY)


class Missing(Exception):
    """The Python API of this build lacks what the check needs."""


def api(obj, name):
    f = getattr(obj, name, None)
    if f is None:
        raise Missing(f"{getattr(obj, '__name__', type(obj).__name__)}.{name}")
    return f


def to_lt(a, dtype, device):
    t = lt.tensor(a, device=device)
    return t.to(getattr(lt, dtype)) if dtype in ("float16", "bfloat16") else t


def to_torch(a, dtype):
    t = torch.from_numpy(a).cuda()
    return t.to(getattr(torch, dtype)) if dtype in ("float16", "bfloat16") else t


def lt_numpy(y):
    if str(y.dtype).endswith(("float16", "bfloat16")):
        y = y.to(lt.float32)
    return np.asarray(y.numpy())


def torch_numpy(y):
    if y.dtype in (torch.float16, torch.bfloat16):
        y = y.float()
    return y.detach().cpu().numpy()


def compare(got, want, rtol, atol):
    got, want = np.asarray(got), np.asarray(want)
    if got.shape != want.shape:
        return False, f"shape {got.shape} != {want.shape}"
    if got.dtype == np.bool_ or want.dtype == np.bool_ or np.issubdtype(want.dtype, np.integer):
        bad = int(np.sum(got.astype(np.float64) != want.astype(np.float64)))
        return bad == 0, f"{bad} mismatches"
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan_ok = np.array_equal(np.isnan(g), np.isnan(w))
    fin = np.isfinite(w)
    inf_ok = np.array_equal(g[~fin & ~np.isnan(w)], w[~fin & ~np.isnan(w)])
    err = np.abs(g[fin] - w[fin])
    bound = atol + rtol * np.abs(w[fin])
    ok = nan_ok and inf_ok and bool(np.all(err <= bound))
    worst = float(np.max(err)) if err.size else 0.0
    return ok, f"max abs err {worst:.3g}" + ("" if nan_ok else ", NaN pattern differs") + \
        ("" if inf_ok else ", infinities differ")


def check(name, arrays, lt_fn, torch_fn, dtypes=("float32", "float64"), reduce=False,
          devices=("lazy:cuda", "cuda"), grad=True):
    if skipped(name):
        return
    for dtype in dtypes:
        cast = [a.astype(np.float64 if dtype == "float64" else np.float32)
                if np.issubdtype(a.dtype, np.floating) else a for a in arrays]
        rtol = (RED_RTOL if reduce else RTOL)[dtype]
        atol = (RED_ATOL if reduce else ATOL)[dtype]
        try:
            want = torch_numpy(torch_fn(*[to_torch(a, dtype) if np.issubdtype(a.dtype, np.floating)
                                          else torch.from_numpy(a).cuda() for a in cast]))
        except Exception as e:  # PyTorch itself does not do this op in this dtype
            results.append({"check": name, "dtype": dtype, "device": "torch", "status": "skip",
                            "detail": f"torch: {type(e).__name__}: {e}"})
            continue
        for dev in devices:
            row = {"check": name, "dtype": dtype, "device": dev}
            try:
                xs = [to_lt(a, dtype, dev) if np.issubdtype(a.dtype, np.floating)
                      else lt.tensor(a, device=dev) for a in cast]
                got = lt_numpy(lt_fn(*xs))
                ok, detail = compare(got, want, rtol, atol)
                row.update(status="pass" if ok else "FAIL", detail=detail)
                if ok and dev == "lazy:cuda":
                    row["backend"] = lt.metrics.last_graph().get("backend")
                    row["kernels"] = lt.metrics.last_graph().get("kernels")
            except Missing as e:
                row.update(status="missing", detail=str(e))
            except Exception as e:
                row.update(status="FAIL", detail=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                           trace=traceback.format_exc(limit=3))
            results.append(row)
        if grad and dtype in ("float32", "float64"):
            check_grad(name, cast, lt_fn, torch_fn, dtype, rtol * 10, atol * 10)


def check_grad(name, arrays, lt_fn, torch_fn, dtype, rtol, atol):
    """d(sum(f(x) * g))/dx against PyTorch, g a fixed random weight, on lazy:cuda."""
    row = {"check": name + " (grad)", "dtype": dtype, "device": "lazy:cuda"}
    floats = [i for i, a in enumerate(arrays) if np.issubdtype(a.dtype, np.floating)]
    try:
        if not floats:
            return
        xs_t = [torch.from_numpy(a).cuda().requires_grad_(i in floats) for i, a in enumerate(arrays)]
        y_t = torch_fn(*xs_t)
        if not y_t.dtype.is_floating_point:
            return
        g = np.random.default_rng(7).standard_normal(tuple(y_t.shape)).astype(arrays[floats[0]].dtype)
        (y_t * torch.from_numpy(g).cuda()).sum().backward()
        xs = [lt.tensor(a, device="lazy:cuda") for a in arrays]
        for i in floats:
            api(xs[i], "requires_grad_")(True)
        y = lt_fn(*xs)
        api(y * lt.tensor(g, device="lazy:cuda"), "sum")().backward()
        for i in floats:
            got = lt_numpy(xs[i].grad)
            ok, detail = compare(got, torch_numpy(xs_t[i].grad), rtol, atol)
            if not ok:
                row.update(status="FAIL", detail=f"input {i}: {detail}")
                break
        else:
            row.update(status="pass", detail="")
    except Missing as e:
        row.update(status="missing", detail=str(e))
    except AttributeError as e:  # no autograd in this build's Python API
        row.update(status="missing", detail=f"autograd: {e}")
    except Exception as e:
        row.update(status="FAIL", detail=f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    results.append(row)


def gelu_lt(x):
    f = getattr(lt, "gelu", None) or getattr(getattr(getattr(lt, "nn", None), "functional", None), "gelu", None)
    if f is None:
        raise Missing("lt.gelu")
    return f(x)


def layer_norm_lt(x, w, b, eps=1e-5):
    fn = getattr(getattr(getattr(lt, "nn", None), "functional", None), "layer_norm", None)
    if fn is not None:
        return fn(x, (x.shape[-1],), w, b, eps)
    # The same graph by hand: lowering fuses it into one row kernel either way.
    mean = x.mean(-1, keepdim=True)
    xc = x - mean
    var = (xc * xc).mean(-1, keepdim=True)
    return xc * (var + eps).rsqrt() * w + b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=None)
    ap.add_argument("--only", default="", help="comma-separated substrings of the check names to run")
    args = ap.parse_args()
    ONLY.extend(o for o in args.only.split(",") if o)
    if not lt._C.backend_available("cuda"):
        print("FAIL: lazytensor reports no CUDA device (lt._C.backend_available('cuda') is False)")
        return 1
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 300)).astype(np.float32)
    y = rng.standard_normal((64, 300)).astype(np.float32)
    pos = (np.abs(x) + 0.1).astype(np.float32)
    row = rng.standard_normal(300).astype(np.float32)
    col = rng.standard_normal((64, 1)).astype(np.float32)
    half = ("float32", "float64", "float16", "bfloat16")

    unary = {
        "neg": (lambda a: -a, lambda a: -a), "abs": (lambda a: a.abs(), torch.abs),
        "exp": (lambda a: a.exp(), torch.exp), "sin": (lambda a: a.sin(), torch.sin),
        "cos": (lambda a: a.cos(), torch.cos), "tanh": (lambda a: a.tanh(), torch.tanh),
        "sigmoid": (lambda a: a.sigmoid(), torch.sigmoid), "relu": (lambda a: a.relu(), torch.relu),
        "erf": (lambda a: a.erf(), torch.erf), "floor": (lambda a: a.floor(), torch.floor),
        "silu": (lambda a: api(lt.nn.functional, "silu")(a), torch.nn.functional.silu),
        "gelu": (gelu_lt, torch.nn.functional.gelu),
    }
    for name, (f, g) in unary.items():
        check(name, [x], f, g, dtypes=half, grad=name != "floor")
    for name, (f, g) in {"log": (lambda a: a.log(), torch.log), "sqrt": (lambda a: a.sqrt(), torch.sqrt),
                         "rsqrt": (lambda a: a.rsqrt(), torch.rsqrt),
                         "reciprocal": (lambda a: a.reciprocal(), torch.reciprocal)}.items():
        check(name, [pos], f, g, dtypes=half)
    binary = {
        "add": (lambda a, b: a + b, lambda a, b: a + b), "sub": (lambda a, b: a - b, lambda a, b: a - b),
        "mul": (lambda a, b: a * b, lambda a, b: a * b), "div": (lambda a, b: a / b, lambda a, b: a / b),
        "maximum": (lambda a, b: lt.maximum(a, b), torch.maximum),
        "minimum": (lambda a, b: lt.minimum(a, b), torch.minimum),
    }
    for name, (f, g) in binary.items():
        check(name, [x, y], f, g, dtypes=half)
        check(name + " broadcast row", [x, row], f, g)
        check(name + " broadcast col", [x, col], f, g)
    check("pow", [pos, y], lambda a, b: a ** b, lambda a, b: a ** b)
    for name, (f, g) in {"eq": (lambda a, b: a == b, lambda a, b: a == b),
                         "lt": (lambda a, b: a < b, lambda a, b: a < b),
                         "ge": (lambda a, b: a >= b, lambda a, b: a >= b)}.items():
        check(name, [x, np.where(rng.random(x.shape) < 0.3, x, y).astype(np.float32)], f, g)
    check("where", [x, y], lambda a, b: lt.where(a > b, a, b * 2), lambda a, b: torch.where(a > b, a, b * 2))
    check("clamp", [x], lambda a: a.clamp(-0.5, 0.7), lambda a: a.clamp(-0.5, 0.7))

    # Movement ops are index arithmetic inside kernels.
    check("permute+reshape", [x], lambda a: (a.permute(1, 0).reshape(300 * 64) * 2).sin(),
          lambda a: (a.permute(1, 0).reshape(300 * 64) * 2).sin())
    check("transpose add", [x, x.T.copy()], lambda a, b: a + b.transpose(0, 1), lambda a, b: a + b.transpose(0, 1))
    x3 = rng.standard_normal((6, 20, 7)).astype(np.float32)
    check("3d permute", [x3], lambda a: a.permute(2, 0, 1).exp(), lambda a: a.permute(2, 0, 1).exp())

    # cat: a chain of selects whose sides load their pieces inside branches (one load an element;
    # lowering/branch_regions.h), along either axis, pieces of odd lengths, a fused consumer.
    pieces = [rng.standard_normal((64, 37 + 11 * i)).astype(np.float32) for i in range(7)]
    check("cat dim=1, 7 pieces", pieces, lambda *a: lt.cat(list(a), 1),
          lambda *a: torch.cat(list(a), 1), dtypes=half)
    rows = [rng.standard_normal((5 + 3 * i, 300)).astype(np.float32) for i in range(12)]
    check("cat dim=0, 12 pieces, then exp", rows, lambda *a: lt.cat(list(a), 0).exp(),
          lambda *a: torch.cat(list(a), 0).exp())
    flat = [rng.standard_normal(n).astype(np.float32) for n in (768, 2304 * 768, 3, 50257)]
    check("cat of flattened gradients", flat, lambda *a: lt.cat(list(a)) * 0.5,
          lambda *a: torch.cat(list(a)) * 0.5, grad=False)
    check("where of permuted loads", [x, y], lambda a, b: lt.where(a > 0, (a * b).exp(), b.permute(1, 0).reshape(64, 300)),
          lambda a, b: torch.where(a > 0, (a * b).exp(), b.permute(1, 0).reshape(64, 300)))

    # Reductions along every axis, and the row kernels.
    for dim in (0, 1, None):
        kw = {} if dim is None else {"dim": dim}
        check(f"sum dim={dim}", [x], lambda a, kw=kw: a.sum(**kw), lambda a, kw=kw: a.sum(**kw), dtypes=half, reduce=True)
        check(f"mean dim={dim}", [x], lambda a, kw=kw: a.mean(**kw), lambda a, kw=kw: a.mean(**kw), reduce=True)
        check(f"amax dim={dim}", [x], lambda a, d=dim: a.amax(() if d is None else d),
              lambda a, d=dim: a.amax(() if d is None else d), reduce=True, grad=False)
        check(f"amin dim={dim}", [x], lambda a, d=dim: a.amin(() if d is None else d),
              lambda a, d=dim: a.amin(() if d is None else d), reduce=True, grad=False)
    small = (rng.random((16, 12)) + 0.5).astype(np.float32)
    check("prod dim=1", [small], lambda a: a.prod(1), lambda a: a.prod(1), reduce=True)
    check("var dim=1", [x], lambda a: a.var(1), lambda a: a.var(1), reduce=True)
    check("std dim=0", [x], lambda a: a.std(0), lambda a: a.std(0), reduce=True)
    check("logsumexp", [x], lambda a: a.logsumexp(1), lambda a: a.logsumexp(1), reduce=True)
    for shape in ((64, 300), (8, 5000), (4096, 16)):
        s = rng.standard_normal(shape).astype(np.float32)
        check(f"softmax {shape}", [s], lambda a: a.softmax(-1), lambda a: a.softmax(-1), dtypes=half, reduce=True)
        check(f"log_softmax {shape}", [s], lambda a: a.log_softmax(-1), lambda a: a.log_softmax(-1), reduce=True)
    w = rng.standard_normal(300).astype(np.float32)
    b = rng.standard_normal(300).astype(np.float32)
    check("layer_norm", [x, w, b], layer_norm_lt,
          lambda a, w, b: torch.nn.functional.layer_norm(a, (300,), w, b), dtypes=half, reduce=True)
    check("gelu(layer_norm)+r", [x, y, w, b], lambda a, r, w, b: gelu_lt(layer_norm_lt(a, w, b)) + r,
          lambda a, r, w, b: torch.nn.functional.gelu(torch.nn.functional.layer_norm(a, (300,), w, b)) + r,
          reduce=True)
    chain = rng.standard_normal(100_000).astype(np.float32)

    def sin_chain(a):
        for _ in range(20):
            a = a + a.sin()
        return a
    check("x + sin(x), 20 times", [chain], sin_chain, sin_chain, reduce=True)

    a2 = rng.standard_normal((64, 128)).astype(np.float32)
    b2 = rng.standard_normal((128, 48)).astype(np.float32)
    bias = rng.standard_normal(48).astype(np.float32)
    check("matmul", [a2, b2], lambda a, b: a @ b, lambda a, b: a @ b, reduce=True)
    check("relu(matmul + bias)", [a2, b2, bias], lambda a, b, c: (a @ b + c).relu(),
          lambda a, b, c: (a @ b + c).relu(), reduce=True)
    ba = rng.standard_normal((4, 16, 32)).astype(np.float32)
    bb = rng.standard_normal((4, 32, 8)).astype(np.float32)
    check("batched matmul", [ba, bb], lambda a, b: a @ b, lambda a, b: a @ b, reduce=True)

    # Integer and bool tensors, and casts.
    xi = rng.integers(-1000, 1000, (64, 300)).astype(np.int64)
    yi = rng.integers(-1000, 1000, (64, 300)).astype(np.int64)
    check("int64 add/mul", [xi, yi], lambda a, b: a * b + a, lambda a, b: a * b + a, grad=False)
    check("int64 sum", [xi], lambda a: a.sum(1), lambda a: a.sum(1), grad=False)
    check("int64 max", [xi], lambda a: a.amax(0), lambda a: a.amax(0), grad=False)
    check("int32 cast", [x], lambda a: (a * 100).to(lt.int32), lambda a: (a * 100).to(torch.int32), grad=False)
    check("uint8 cast", [pos], lambda a: (a * 50).to(lt.uint8), lambda a: (a * 50).to(torch.uint8), grad=False)
    check("bool logic", [x, y], lambda a, b: lt.logical_and(a > 0, b < 0) | (a > 1),
          lambda a, b: torch.logical_and(a > 0, b < 0) | (a > 1), grad=False)
    # Integer pow keeps int64 (wrap-around on overflow, as PyTorch's); bool + and * are or / and.
    xs = rng.integers(-20, 20, (64, 300)).astype(np.int64)
    es = rng.integers(0, 14, (64, 300)).astype(np.int64)
    check("int64 pow", [xs, es], lambda a, b: a ** b, lambda a, b: a ** b, grad=False)
    check("int64 pow scalar", [xs], lambda a: a ** 3 + 2 ** a.abs().clamp(0, 39),
          lambda a: a ** 3 + 2 ** a.abs().clamp(0, 39), grad=False)
    check("bool add/mul", [x, y], lambda a, b: (a > 0) + (b > 0) * (a < b),
          lambda a, b: (a > 0) + (b > 0) * (a < b), grad=False)
    check_int_ops(rng, x, y)
    # Back to the input's own float type: a float32 result of a float64 input was compared at
    # float64 tolerance, where PyTorch's CUDA division by a scalar (a multiplication by its
    # reciprocal) differs from a correctly rounded division by one float32 ulp.
    check("float -> int64 -> float", [x], lambda a: (a * 10).to(lt.int64).to(a.dtype) / 10,
          lambda a: (a * 10).to(torch.int64).to(a.dtype) / 10, grad=False)

    if not skipped("rand"):
        check_rand()

    failed = [r for r in results if r["status"] == "FAIL"]
    missing = sorted({r["detail"] for r in results if r["status"] == "missing"})
    passed = sum(r["status"] == "pass" for r in results)
    for r in failed:
        print(f"FAIL {r['check']} [{r['dtype']}] on {r['device']}: {r['detail']}")
    print(f"\n{passed} passed, {len(failed)} failed, "
          f"{sum(r['status'] == 'missing' for r in results)} missing from the API, "
          f"{sum(r['status'] == 'skip' for r in results)} skipped (torch lacks the op/dtype)")
    if missing:
        print("MISSING from this build's Python API (not failures): " + ", ".join(missing))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "device": torch.cuda.get_device_name(0),
                       "passed": passed, "failed": len(failed), "missing": missing, "results": results},
                      f, indent=1)
    return 1 if failed else 0


def check_int_ops(rng, x, y):
    """floor_divide (//), remainder (%), fmod, the bitwise ops and shifts of every integer dtype,
    a fused chain with numbers on either side, and the float forms. Divisors are nonzero where
    PyTorch is compared: its CUDA integer division by zero is undefined, while lazytensor's gives 0
    (ir/ops.def), checked against zeros."""
    ops = {
        "//": (lambda a, b: a // b, lambda a, b: a // b),
        "%": (lambda a, b: a % b, lambda a, b: a % b),
        "fmod": (lambda a, b: api(lt, "fmod")(a, b), torch.fmod),
        "&": (lambda a, b: a & b, lambda a, b: a & b),
        "|": (lambda a, b: a | b, lambda a, b: a | b),
        "^": (lambda a, b: a ^ b, lambda a, b: a ^ b),
        "<<": (lambda a, b: a << b, lambda a, b: a << b),
        ">>": (lambda a, b: a >> b, lambda a, b: a >> b),
    }
    for dt in ("int64", "int32", "int8", "uint8"):
        info, bits = np.iinfo(dt), np.dtype(dt).itemsize * 8
        a = rng.integers(info.min, info.max, (64, 300), endpoint=True, dtype=dt)
        a[:, :3] = [info.min, info.max, 0]
        b = rng.integers(max(info.min, -50), min(info.max, 50), (64, 300), endpoint=True).astype(dt)
        b[b == 0] = 7
        if info.min < 0:
            b[0, :2] = -1  # INT_MIN // -1 wraps (PyTorch's value on CUDA too)
        counts = np.clip(rng.integers(-2, bits + 3, (64, 300)), info.min, info.max).astype(dt)
        for name, (f, g) in ops.items():
            check(f"{dt} {name}", [a, counts if name in ("<<", ">>") else b], f, g, dtypes=("float32",),
                  grad=False)
        for name, arg in (("//", b[:1]), (">>", counts[:1])):
            check(f"{dt} {name} broadcast", [a, arg], *ops[name], dtypes=("float32",), grad=False)
        check(f"{dt} ~", [a], lambda t: ~t, lambda t: ~t, dtypes=("float32",), grad=False)
        check(f"{dt} fused chain with numbers", [a],
              lambda t: ((t // 3) % 5 << 2 | (t & 7)) ^ ~t >> 1 ^ (100 // (t | 1)) ^ (7 % (t | 1)),
              lambda t: ((t // 3) % 5 << 2 | (t & 7)) ^ ~t >> 1 ^ (100 // (t | 1)) ^ (7 % (t | 1)),
              dtypes=("float32",), grad=False)
        zero = np.zeros_like(b)
        check(f"{dt} // 0, % 0, fmod 0 are 0", [a, zero],
              lambda t, z: (t // z) | (t % z) | api(lt, "fmod")(t, z), lambda t, z: torch.zeros_like(t),
              dtypes=("float32",), grad=False)
    bf = y.copy()
    bf[0, :4] = [0.0, -0.0, np.inf, -np.inf]
    for name in ("//", "%", "fmod"):
        f, g = ops[name]
        check(f"float {name}", [x * 10, bf], f, g, grad=name != "//")


def check_rand():
    """One generator for every backend: lazy:cuda draws what lazy:cpu draws, bit for bit."""
    for dtype in ("float32", "float64", "float16", "bfloat16"):
        row = {"check": "rand equals lazy:cpu bit for bit", "dtype": dtype, "device": "lazy:cuda"}
        try:
            draws = {}
            for dev in ("lazy:cuda", "lazy:cpu"):
                lt.manual_seed(1234)
                r = lt.rand(257, 31, dtype=getattr(lt, dtype), device=dev)
                u = lt.rand(1000, dtype=getattr(lt, dtype), device=dev)  # the next draw (offset moves)
                draws[dev] = (lt_numpy(r), lt_numpy(u))
            same = all(np.array_equal(a, b) for a, b in zip(draws["lazy:cuda"], draws["lazy:cpu"]))
            r = draws["lazy:cuda"][0]
            in_range = bool(np.all((r >= 0) & (r <= 1)))  # float16/bfloat16 may round up to 1
            mean_ok = abs(float(np.mean(r)) - 0.5) < 0.02
            ok = same and in_range and mean_ok
            row.update(status="pass" if ok else "FAIL",
                       detail=f"equal={same} in_range={in_range} mean={float(np.mean(r)):.4f}")
        except Missing as e:
            row.update(status="missing", detail=str(e))
        except Exception as e:
            row.update(status="FAIL", detail=f"{type(e).__name__}: {e}")
        results.append(row)


if __name__ == "__main__":
    sys.exit(main())
