"""The bridge's aten table (lazytensor/torch/aten_table.py) walked entry by entry against PyTorch
eager (torch 2.13, CPU) as the oracle.

Each aten overload in TABLE has samples here (random shapes up to 6 per dim, random values, the
dtypes the op takes). A sample calls the op itself inside a function compiled with
backend="lazytensor" (fullgraph, static shapes) and compares the result with the op called eagerly;
for float inputs that need gradients it also compares the gradients of (out * g).sum() for a
random g, which runs AOTAutograd's backward graph (the op's derivative, decomposed into other aten
ops of the table) through lazytensor too. Each sample must reach the op's builder (a spy counts
the calls) and must not fall back to PyTorch. Argument combinations a builder declares unsupported
(NotImplementedError) are checked separately: PyTorch's result through the fallback, counted.

Entries that are not aten ops (operator.*, math.*, getitem) and the size queries (sym_size,
sym_numel) run inside every graph with sizes and are not sampled one by one."""
import operator
import zlib

import pytest
import torch

import lazytensor as lt
import lazytensor.torch  # noqa: F401  (registers the backend)
import lazytensor.torch.backend  # noqa: F401  (loads Dynamo and Inductor's prims, e.g. prims.fma)
from lazytensor.torch.aten_table import TABLE
from lazytensor.torch.graph_program import LazyGraph

import aten_samples_creation  # noqa: F401,E402  (each registers its samples)
import aten_samples_elementwise  # noqa: F401,E402
import aten_samples_indexing  # noqa: F401,E402
import aten_samples_nn  # noqa: F401,E402
import aten_samples_reductions  # noqa: F401,E402
from aten_samples import F32, F64, GRAD_TOL, SAMPLES, TOL, Rand, S, _flat  # noqa: E402

aten = torch.ops.aten
prims = torch.ops.prims
pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

# Exercised by every graph that does size arithmetic; not sampled one by one.
IMPLICIT = {aten.sym_size.int, aten.sym_numel.default}
# Ops torch rewrites before a torch.compile backend sees them in these samples (reshape is
# CompositeImplicitAutograd: view/_unsafe_view by then; Dynamo drops lift_fresh_copy of an input).
# Their builders also run on a one-node FX graph handed to the backend's graph runner directly.
REWRITTEN = {aten.reshape.default, aten.lift_fresh_copy.default}


# ---- running a sample ---------------------------------------------------------------------------

def _copy_args(args, grad):
    """Fresh copies of the sample's tensors (a compiled call and an eager call each get their
    own), and the leaves that need a gradient."""
    leaves = []

    def copy(v, needs):
        if isinstance(v, torch.Tensor):
            t = v.detach().clone()
            if needs and t.is_floating_point():
                t.requires_grad_(True)
                leaves.append(t)
            return t
        if isinstance(v, (list, tuple)):
            return type(v)(copy(x, needs) for x in v)
        return v

    out = [copy(a, grad is True or (grad and i in grad)) for i, a in enumerate(args)]
    return out, leaves


def _assert_same(got, want, tol, what):
    got, want = _flat(got), _flat(want)
    assert len(got) == len(want), f"{what}: {len(got)} results, torch gives {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if not isinstance(w, torch.Tensor):
            assert g == w, f"{what}[{i}]: {g!r}, torch gives {w!r}"
            continue
        assert isinstance(g, torch.Tensor), f"{what}[{i}]: {type(g)}"
        assert g.dtype == w.dtype and g.shape == w.shape, \
            f"{what}[{i}]: {g.dtype} {list(g.shape)}, torch gives {w.dtype} {list(w.shape)}"
        if w.is_floating_point():
            rtol, atol = tol if w.dtype == F32 and tol else (TOL[w.dtype] if w.dtype in TOL else tol)
            torch.testing.assert_close(g.detach(), w.detach(), rtol=rtol, atol=atol, equal_nan=True,
                                       msg=lambda m: f"{what}[{i}]: {m}")
        else:
            torch.testing.assert_close(g, w, rtol=0, atol=0, msg=lambda m: f"{what}[{i}]: {m}")


def _compile(fn):
    return torch.compile(fn, backend="lazytensor", fullgraph=True, dynamic=False)


class _Spy:
    """Counts the calls of one op's builder while installed in TABLE."""

    def __init__(self, op):
        self.op, self.calls = op, 0

    def __enter__(self):
        self.builder = TABLE[self.op]

        def spy(*a, **k):
            self.calls += 1
            return self.builder(*a, **k)
        TABLE[self.op] = spy
        return self

    def __exit__(self, *exc):
        TABLE[self.op] = self.builder


def _sample_fn(op, s):
    return s.fn or (lambda *a: op(*a, **s.kwargs))


def run_samples(op, ss, seed):
    """Compiled vs eager forward (and gradients) of an op's samples, all in one compiled function
    (one Dynamo trace and one lazytensor graph per direction: compiling is what takes the time);
    returns lazytensor's counters and the number of times the op's builder ran."""
    def run_all(fns):
        def fn(*flat):
            outs, at = [], 0
            for f, s in zip(fns, ss):
                outs.append(f(*flat[at:at + len(s.args)]))
                at += len(s.args)
            return outs
        return fn

    fn = run_all([_sample_fn(op, s) for s in ss])
    ref = run_all([s.ref or _sample_fn(op, s) for s in ss])

    copies_c = [_copy_args(s.args, s.grad) for s in ss]
    copies_e = [_copy_args(s.args, s.grad) for s in ss]
    torch._dynamo.reset()
    lt.metrics.reset()
    with _Spy(op) as spy:
        torch.manual_seed(seed)
        outs_c = _compile(fn)(*[a for args, _ in copies_c for a in args])
        torch.manual_seed(seed)
        outs_e = ref(*[a for args, _ in copies_e for a in args])
        for n, (s, out_c, out_e) in enumerate(zip(ss, outs_c, outs_e)):
            what = f"{op} sample {n}"
            if callable(s.check):
                s.check(out_c, copies_c[n][0])
            elif s.check == "meta":
                _assert_same([(o.shape, o.dtype) for o in _flat(out_c)],
                             [(o.shape, o.dtype) for o in _flat(out_e)], None, what)
            else:
                _assert_same(out_c, out_e, s.tol, what)
        diff_e = [o for o in _flat(outs_e) if isinstance(o, torch.Tensor) and o.requires_grad]
        leaves_c = [x for _, leaves in copies_c for x in leaves]
        leaves_e = [x for _, leaves in copies_e for x in leaves]
        if leaves_e and diff_e:
            diff_c = [o for o in _flat(outs_c) if isinstance(o, torch.Tensor) and o.requires_grad]
            assert len(diff_c) == len(diff_e), f"{op}: differentiable outputs differ"
            gen = torch.Generator().manual_seed(seed)
            gs = [torch.rand(o.shape, generator=gen, dtype=F64).to(o.dtype) * 2 - 1 for o in diff_e]
            grads_c = torch.autograd.grad(sum((o * g).sum() for o, g in zip(diff_c, gs)), leaves_c,
                                          allow_unused=True)
            grads_e = torch.autograd.grad(sum((o * g).sum() for o, g in zip(diff_e, gs)), leaves_e,
                                          allow_unused=True)
            at = 0
            for n, (s, (_, leaves)) in enumerate(zip(ss, copies_e)):
                k = len(leaves)
                _assert_same(list(grads_c[at:at + k]), list(grads_e[at:at + k]),
                             s.grad_tol or GRAD_TOL[F32], f"{op} sample {n} grad")
                at += k
    return lt.metrics.counters(), spy.calls


def run_direct(op, s):
    """The op as the only node of an FX graph, run by the backend's graph runner (LazyGraph),
    against eager; returns the number of times the op's builder ran."""
    graph, inputs = torch.fx.Graph(), []

    def arg(v):
        if isinstance(v, torch.Tensor):
            inputs.append(v.clone())
            return graph.placeholder(f"a{len(inputs)}")
        return type(v)(arg(x) for x in v) if isinstance(v, (list, tuple)) else v

    node = graph.call_function(op, tuple(arg(a) for a in s.args),
                               {k: arg(v) for k, v in s.kwargs.items()})
    graph.output((node,))
    with _Spy(op) as spy:
        got = LazyGraph(torch.fx.GraphModule({}, graph), f"direct {op}")(inputs)
    _assert_same(got, [op(*s.args, **s.kwargs)], s.tol, f"{op} (FX graph)")
    return spy.calls


def _seed(op):
    return zlib.crc32(str(op).encode())


SAMPLED = sorted(SAMPLES, key=str)


@pytest.mark.parametrize("op", SAMPLED, ids=str)
def test_op_matches_torch(op):
    ss = SAMPLES[op](Rand(_seed(op)), op)
    counters, calls = run_samples(op, ss, _seed(op))
    assert counters["fallbacks"] == 0, f"{op}: {counters['fallbacks']} fallbacks"
    if op in REWRITTEN:
        calls = sum(run_direct(op, s) for s in ss)
    assert calls >= len(ss), f"{op}: the op reached its builder {calls} times for {len(ss)} samples"


def test_every_table_entry_has_samples():
    missing = [str(o) for o in TABLE if isinstance(o, torch._ops.OpOverload)
               and o not in IMPLICIT and o not in SAMPLES]
    assert not missing, f"aten table entries without samples in {__file__}: {missing}"
    helpers = [o for o in TABLE if not isinstance(o, torch._ops.OpOverload)]
    assert all(o is operator.getitem or getattr(o, "__module__", None) in ("_operator", "math")
               for o in helpers), helpers


# ---- what the table declines -------------------------------------------------------------------
# Argument combinations a builder declares unsupported (NotImplementedError): the graph is split
# around the op, which runs in PyTorch; results (and gradients) are still PyTorch's, and counted.

def _fallback_samples():
    r = Rand(1234)
    sh = r.shape(3)
    x = r.f(2, 3, 6, 5)
    return [
        (aten.convolution.default, S(r.f(1, 4, 5, 5), r.f(4, 2, 3, 3), r.f(2), [2, 2], [1, 1],
                                     [1, 1], True, [1, 0], 1)),  # transposed
        (aten.convolution.default, S(r.f(1, 2, 4, 4, 3), r.f(3, 2, 2, 2, 2), None, [1, 1, 1],
                                     [0, 0, 0], [1, 1, 1], False, [0, 0, 0], 1)),  # 3-d
        (aten._adaptive_avg_pool2d.default, S(x, [4, 3])),  # sizes that do not divide
        (aten._adaptive_avg_pool2d_backward.default, S(r.f(2, 3, 4, 3), x, grad=False)),
        (aten.div.Tensor_mode, S(r.f(*sh), r.nonzero(*sh), rounding_mode="trunc")),
        (aten.div.Tensor_mode, S(r.i(*sh), r.i(*sh, lo=1, hi=3), rounding_mode="floor")),
        (aten.div.Scalar_mode, S(r.i(*sh), 3, rounding_mode="trunc")),
        (aten.bitwise_and.Tensor, S(r.i(*sh, lo=0, hi=15), r.i(*sh, lo=0, hi=15))),
        (aten.bitwise_or.Tensor, S(r.i(*sh, lo=0, hi=15), r.i(*sh, lo=0, hi=15))),
        (aten.bitwise_xor.Tensor, S(r.i(*sh, lo=0, hi=15), r.i(*sh, lo=0, hi=15))),
        (aten.bitwise_not.default, S(r.i(*sh))),
        (aten.logical_and.default, S(r.sparse(*sh), r.sparse(*sh))),
        (aten.logical_not.default, S(r.i(*sh, lo=0, hi=1))),
        # A bool mask: its data-dependent size brings _assert_scalar nodes (run in PyTorch), so
        # the graph is split before the builder declines the mask.
        (aten.index.Tensor, S(r.f(*sh), [r.b(sh[0])])),
        (aten.index.Tensor, S(r.f(*sh), [r.i(3, lo=0, hi=sh[0] - 1), r.i(3, lo=0, hi=sh[1] - 1)])),
        (aten.index_put.default, S(r.f(*sh), [r.b(*sh)], r.f(), grad=[0])),
        (aten.embedding_dense_backward.default, S(r.f(4, 3), r.i(4, lo=0, hi=2), 3, -1, True)),
    ]


@pytest.mark.parametrize("n", range(len(_fallback_samples())))
def test_declined_arguments_fall_back_to_torch(n):
    op, s = _fallback_samples()[n]
    counters, calls = run_samples(op, [s], 99 + n)
    assert calls > 0, f"{op}: its builder never saw the arguments"
    assert counters["fallbacks"] > 0, f"{op}: expected the op to run in PyTorch"
