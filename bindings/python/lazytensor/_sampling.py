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
