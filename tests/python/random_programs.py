"""Random programs for the differential tester (tests/python/test_random_programs.py): short
compositions of the contract's ops with views, in-place writes through them, dtypes and gradients.
A recipe is plain data drawn from a seed, so the same program runs in torch and in lazytensor and a
failure is reproduced from its seed alone (`recipe(seed)` prints as a readable list of steps)."""
import random

import numpy as np

SHAPES = [(3, 4), (2, 3, 4), (5,), (4, 4), (2, 1, 3), (1, 6)]
FLOAT_UNARY = ["tanh", "sigmoid", "sin", "neg", "exp", "square", "abs"]
INT_UNARY = ["neg", "abs", "square"]


def _view_step(r, shape):
    """A random view op valid for `shape`: (step, result shape, whether it may be written)."""
    nd = len(shape)
    options = ["detach", "flatten", "unsqueeze"]
    if nd >= 1:
        options += ["slice", "select", "narrow", "chunk", "expand"]
    if nd >= 2:
        options += ["transpose", "permute"]
    if nd == 2:
        options.append("t")
    if 1 in shape:
        options.append("squeeze")
    if nd >= 1 and len(shape) <= 3:
        options.append("unflatten")
    kind = r.choice(options)
    s = list(shape)
    if kind == "detach":
        return ("detach",), tuple(s), True
    if kind == "flatten":
        n = 1
        for x in s:
            n *= x
        return ("flatten",), (n,), True
    if kind == "unflatten":
        n = 1
        for x in s:
            n *= x
        divisors = [d for d in range(1, n + 1) if n % d == 0]
        a = r.choice(divisors)
        return ("reshape", (a, n // a)), (a, n // a), True
    if kind == "unsqueeze":
        d = r.randint(0, nd)
        return ("unsqueeze", d), tuple(s[:d] + [1] + s[d:]), True
    if kind == "squeeze":
        d = r.choice([i for i, x in enumerate(s) if x == 1])
        return ("squeeze", d), tuple(s[:d] + s[d + 1:]), True
    if kind == "expand":
        out = [2 if x == 1 else x for x in s]
        return ("expand", tuple(out)), tuple(out), False  # overlapping elements: read only
    if kind == "transpose":
        a, b = r.sample(range(nd), 2)
        s[a], s[b] = s[b], s[a]
        return ("transpose", a, b), tuple(s), True
    if kind == "t":
        return ("t",), (s[1], s[0]), True
    if kind == "permute":
        p = list(range(nd))
        r.shuffle(p)
        return ("permute", tuple(p)), tuple(s[i] for i in p), True
    d = r.randrange(nd)
    n = s[d]
    if kind == "select":
        i = r.randrange(-n, n)
        return ("select", d, i), tuple(s[:d] + s[d + 1:]), True
    if kind == "narrow":
        start = r.randrange(n)
        length = r.randint(1, n - start)
        s[d] = length
        return ("narrow", d, start, length), tuple(s), True
    if kind == "chunk":
        chunks = r.randint(1, max(1, n))
        pieces = [len(range(n)[i:i + -(-n // chunks)]) for i in range(0, n, -(-n // chunks))]
        k = r.randrange(len(pieces))
        s[d] = pieces[k]
        # PyTorch forbids in-place writes to outputs of multi-view functions under autograd.
        return ("chunk", chunks, d, k), tuple(s), False
    start = r.randrange(n)
    step = r.randint(1, 3)
    stop = r.randint(start + 1, n)
    s[d] = len(range(start, stop, step))
    return ("slice", d, start, stop, step), tuple(s), True


def _index_for(r, shape):
    """A basic index (ints and slices) into `shape`, as a tuple of ("i", k) / ("s", a, b, c)."""
    idx = []
    for n in shape[: r.randint(1, len(shape))]:
        if r.random() < 0.4:
            idx.append(("i", r.randrange(-n, n)))
        else:
            a = r.randrange(n)
            idx.append(("s", a, r.randint(a + 1, n), r.randint(1, 2)))
    return tuple(idx)


def recipe(seed):
    """The program drawn from `seed`: {"dtype", "shape", "steps", "weights_seed"}."""
    r = random.Random(seed)
    dtype = r.choice(["float32", "float32", "float32", "float64", "int64"])
    shape = r.choice(SHAPES)
    # Per value: (shape, may be written in place). Values 0 and 1 come from the two inputs.
    vals = [(shape, True), (shape, True)]
    steps = []
    for _ in range(r.randint(4, 10)):
        i = r.randrange(len(vals))
        vshape, writable = vals[i]
        roll = r.random()
        if roll < 0.35:
            step, out, ok = _view_step(r, vshape)
            steps.append(("view", i) + (step,))
            vals.append((out, writable and ok))
        elif roll < 0.5:
            op = r.choice(INT_UNARY if dtype == "int64" else FLOAT_UNARY)
            steps.append(("unary", i, op))
            vals.append((vshape, True))
        elif roll < 0.62:
            same = [j for j, (s, _) in enumerate(vals) if s == vshape]
            steps.append(("binary", i, r.choice(same), r.choice(["add", "sub", "mul"])))
            vals.append((vshape, True))
        elif roll < 0.68 and vshape:
            d = r.randrange(len(vshape))
            keep = r.random() < 0.5
            steps.append(("sum", i, d, keep))
            vals.append((vshape[:d] + ((1,) if keep else ()) + vshape[d + 1:], True))
        elif writable:
            same = [j for j, (s, _) in enumerate(vals) if s == vshape and j != i]
            ops = ["add_s", "mul_s", "zero_", "fill_", "clamp_", "neg_", "setitem"]
            if same:
                ops += ["add_t", "mul_t", "copy_"]
            op = r.choice(ops)
            if op == "setitem" and not vshape:
                op = "fill_"
            arg = None
            if op in ("add_t", "mul_t", "copy_"):
                arg = r.choice(same)
            elif op == "setitem":
                arg = _index_for(r, vshape)
            elif op == "clamp_":
                arg = (-r.randint(0, 2) - 0.5, r.randint(0, 2) + 0.5)
            elif op in ("add_s", "mul_s", "fill_"):
                arg = r.choice([2, -3, 0.5, 1.5]) if dtype != "int64" else r.choice([2, -3, 4])
            steps.append(("inplace", i, op, arg))
    return {"dtype": dtype, "shape": shape, "steps": steps, "weights_seed": r.randrange(1 << 30)}


def _view(lib, x, step):
    kind, args = step[0], step[1:]
    if kind == "detach":
        return x.detach()
    if kind == "flatten":
        return x.flatten()
    if kind == "reshape":
        return x.reshape(*args[0])
    if kind == "unsqueeze":
        return x.unsqueeze(args[0])
    if kind == "squeeze":
        return x.squeeze(args[0])
    if kind == "expand":
        return x.expand(*args[0])
    if kind == "transpose":
        return x.transpose(*args)
    if kind == "t":
        return x.t()
    if kind == "permute":
        return x.permute(*args[0])
    if kind == "select":
        return x.select(*args)
    if kind == "narrow":
        return x.narrow(*args)
    if kind == "chunk":
        chunks, d, k = args
        return x.chunk(chunks, d)[k]
    d, a, b, c = args
    index = [slice(None)] * d + [slice(a, b, c)]
    return x[tuple(index)]


def _index(spec):
    return tuple(e[1] if e[0] == "i" else slice(e[1], e[2], e[3]) for e in spec)


def inputs(program):
    """The two input arrays of `program` (random normals, or small integers for int64)."""
    rng = np.random.default_rng(program["weights_seed"])
    if program["dtype"] == "int64":
        return [rng.integers(-5, 6, program["shape"]) for _ in range(2)]
    return [rng.standard_normal(program["shape"]).astype(program["dtype"]) for _ in range(2)]


def run(program, lib, dev, backward, clone_operands=False):
    """Runs `program` with `lib` (torch or lazytensor) on `dev`; returns every value it made, then
    the inputs' gradients of a random weighting of them when `backward`. With `clone_operands`,
    tensor operands of in-place ops are cloned first (torch refuses an operand that partly
    overlaps the written tensor's memory, where lazytensor computes as if it were copied)."""
    dtype = getattr(lib, program["dtype"])
    grad = program["dtype"] != "int64"
    leaves = [lib.tensor(a.tolist(), dtype=dtype, device=dev, requires_grad=grad) for a in inputs(program)]
    vals = [leaves[0] * 1, leaves[1] + 0]  # not leaves: in-place writes are allowed on them
    for st in program["steps"]:
        kind, i = st[0], st[1]
        x = vals[i]
        if kind == "view":
            vals.append(_view(lib, x, st[2]))
        elif kind == "unary":
            vals.append(x * x if st[2] == "square" else getattr(x, st[2])())
        elif kind == "binary":
            vals.append(getattr(x, st[3])(vals[st[2]]))
        elif kind == "sum":
            vals.append(x.sum(st[2], keepdim=st[3]))
        else:
            op, arg = st[2], st[3]
            if op in ("add_t", "mul_t", "copy_"):
                arg = vals[arg].clone() if clone_operands else vals[arg]
            if op == "add_s":
                x.add_(arg)
            elif op == "mul_s":
                x.mul_(arg)
            elif op == "add_t":
                x.add_(arg)
            elif op == "mul_t":
                x.mul_(arg)
            elif op == "copy_":
                x.copy_(arg)
            elif op == "zero_":
                x.zero_()
            elif op == "fill_":
                x.fill_(arg)
            elif op == "clamp_":
                x.clamp_(*arg) if program["dtype"] != "int64" else x.clamp_(int(arg[0]), int(arg[1]))
            elif op == "neg_":
                x.neg_()
            else:
                x[_index(arg)] = 1.25 if program["dtype"] != "int64" else 5
    if not backward:
        return vals
    loss = None
    wrng = np.random.default_rng(program["weights_seed"] + 1)
    for v in vals:
        w = wrng.standard_normal(v.numel())
        if v.requires_grad:
            term = (v * lib.tensor(w.tolist(), dtype=dtype, device=dev).reshape(tuple(v.shape))).sum()
            loss = term if loss is None else loss + term
    if loss is not None:
        loss.backward()
    return vals + [leaves[0].grad, leaves[1].grad]
