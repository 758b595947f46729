"""Drawing indices from weights: `lt.multinomial` / `Tensor.multinomial`, as PyTorch's (a
sampling loop's `torch.multinomial(probs, num_samples=1)` in nanoGPT, minGPT and makemore).

Draws come from lazytensor's generator (`lt.manual_seed`), so they are not PyTorch's numbers; the
distribution is. With replacement, each draw is an inverse-CDF lookup of a uniform number (the
count of cumulative weights at or below it); without, k such draws one after another, each drawn
category's weight set to zero before the next.
"""
from . import _C
from ._creation import _check_generator

Tensor = _C.Tensor


def _check_weights_on_host(input):
    """PyTorch's value errors, where the values are on the host already (eager cpu); on a lazy or
    GPU device reading them would be a sync per draw, so there, as in PyTorch's CUDA kernel, a
    row with negative or zero-sum weights gives undefined indices instead."""
    if input.device.is_lazy or input.device.type != "cpu" or input.numel() == 0:
        return
    w = input.numpy()
    if not (w >= 0).all() or not (abs(w) < float("inf")).all():
        raise RuntimeError("multinomial: probability tensor contains either `inf`, `nan` or "
                           "element < 0")
    if (w.reshape(-1, w.shape[-1]).sum(-1) <= 0).any():
        raise RuntimeError("multinomial: invalid multinomial distribution (sum of probabilities "
                           "<= 0)")


def multinomial(input, num_samples, replacement=False, *, generator=None):
    _check_generator(generator)
    if not isinstance(input, Tensor):
        raise TypeError(f"multinomial(): argument 'input' must be Tensor, not {type(input).__name__}")
    if input.ndim not in (1, 2):
        raise RuntimeError(f"multinomial: prob_dist must be 1 or 2 dim (got shape "
                           f"{list(input.shape)})")
    if not input.dtype.is_floating_point:
        raise RuntimeError(f"multinomial only supports floating-point dtypes for input, got: "
                           f"{str(input.dtype).split('.')[-1].capitalize()}")
    n = input.shape[-1]
    if not isinstance(num_samples, int) or num_samples <= 0:
        raise RuntimeError(f"multinomial: cannot sample n_sample <= 0 samples (got {num_samples})")
    if not replacement and num_samples > n:
        raise RuntimeError("multinomial: cannot sample n_sample > prob_dist.size(-1) samples "
                           f"without replacement (got {num_samples} > {n})")
    _check_weights_on_host(input)
    w = input if input.ndim == 2 else input.unsqueeze(0)
    rows = w.shape[0]
    wf = w.to(_C.float64 if w.dtype == _C.float64 else _C.float32)
    if replacement:
        cdf = wf.cumsum(-1)
        u = _C.rand([rows, num_samples, 1], wf.dtype, w.device) * cdf[:, -1:].unsqueeze(1)
        # The number of categories whose cumulative weight is at or below u: the drawn index
        # (a zero-weight category adds nothing to the cumulative sum, so it is never drawn).
        idx = (cdf.unsqueeze(1) <= u).to(_C.int64).sum(-1).clamp(0, n - 1)
    else:
        # One draw at a time, each from the weights left after removing the earlier draws.
        categories = _C.arange(0, n, 1, _C.int64, w.device)
        zero = _C.full([], 0, wf.dtype, w.device)
        columns = []
        for _ in range(num_samples):
            cdf = wf.cumsum(-1)
            u = _C.rand([rows, 1], wf.dtype, w.device) * cdf[:, -1:]
            pick = (cdf <= u).to(_C.int64).sum(-1, keepdim=True).clamp(0, n - 1)
            columns.append(pick)
            wf = _C.where(categories == pick, zero, wf)
        idx = _C.cat(columns, 1)
    return idx if input.ndim == 2 else idx.squeeze(0)


def _tensor_multinomial(self, num_samples, replacement=False, *, generator=None):
    return multinomial(self, num_samples, replacement, generator=generator)


Tensor.multinomial = _tensor_multinomial


_RANDPERM_MAX = {_C.int8: 2**7, _C.uint8: 2**8, _C.int32: 2**31, _C.int64: 2**63,
                 _C.float16: 2**11, _C.bfloat16: 2**8, _C.float32: 2**24, _C.float64: 2**53}


def randperm(n, *, generator=None, dtype=None, layout=None, device=None, pin_memory=False,
             requires_grad=False):
    """A random permutation of 0 .. n-1, as PyTorch's (int64 unless `dtype` says otherwise).

    The order is drawn on the host from a PCG64 stream: seeded from `generator` (an
    lt.Generator) when given, else from the global generator, so `lt.manual_seed` makes it
    reproducible and each call advances the global stream, as in PyTorch. The numbers are not
    PyTorch's; the distribution (uniform over permutations) is."""
    import operator

    import numpy as np

    from ._generator import default_seed
    from ._utils import as_device, as_dtype
    if isinstance(n, bool) or not isinstance(n, int):
        try:
            n = operator.index(n)
        except TypeError:
            raise TypeError(f"randperm(): argument 'n' (position 1) must be int, not "
                            f"{type(n).__name__}") from None
    if n < 0:
        raise RuntimeError(f"Trying to create tensor with negative dimension {n}: [{n}]")
    dtype = as_dtype(dtype) or _C.int64
    if dtype == _C.bool:
        raise NotImplementedError("\"randperm\" not implemented for 'Bool'")
    if n > _RANDPERM_MAX.get(dtype, 2**63):
        raise RuntimeError(f"randperm: n = {n} is too large for a tensor of {dtype}: its values "
                           f"0 .. n-1 cannot all be represented")
    if requires_grad and not dtype.is_floating_point:
        raise RuntimeError("Only Tensors of floating point dtype can require gradients")
    order = np.random.Generator(np.random.PCG64(default_seed(generator))).permutation(n)
    out = _C.from_numpy(np.ascontiguousarray(order, dtype=np.int64), _C.device("cpu"))
    out = (out if dtype == _C.int64 else _C.cast(out, dtype)).to(as_device(device))
    return out.requires_grad_(True) if requires_grad else out
