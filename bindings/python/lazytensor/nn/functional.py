"""`lazytensor.nn.functional` (PyTorch's torch.nn.functional): activations, normalization, losses.

Each function is built from the runtime's ops and composites (softmax, log_softmax, layer_norm and
gelu are single composites with their own VJP rules), so on "lazy" it is traced and fuses with its
neighbours. Functions the runtime cannot express yet raise NotImplementedError naming themselves.
"""

from .. import _C, amp
from .._eager_graph import one_graph

Tensor = _C.Tensor

__all__ = ["linear", "relu", "relu_", "leaky_relu", "gelu", "silu", "tanh", "sigmoid", "softmax",
           "log_softmax", "softplus", "elu", "mish", "hardtanh", "relu6", "cross_entropy",
           "nll_loss", "mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss",
           "binary_cross_entropy", "binary_cross_entropy_with_logits", "layer_norm", "normalize",
           "dropout", "one_hot", "embedding", "conv2d", "max_pool2d", "avg_pool2d",
           "scaled_dot_product_attention", "pad", "batch_norm", "conv1d", "adaptive_avg_pool2d"]


def _check_tensor(x, fn, name="input"):
    if not isinstance(x, Tensor):
        raise TypeError(f"{fn}(): argument '{name}' must be Tensor, not {type(x).__name__}")


@amp.lower_precision
def linear(input, weight, bias=None):
    """input @ weight.T + bias."""
    _check_tensor(input, "linear")
    if input.ndim < 1 or input.shape[-1] != weight.shape[-1]:
        raise RuntimeError(f"linear: input of shape {tuple(input.shape)} does not match weight of "
                           f"shape {tuple(weight.shape)} (expected input[..., {weight.shape[-1]}])")
    out = input.matmul(weight.T)
    return out if bias is None else out + bias


def relu(input, inplace=False):
    out = input.relu()
    return input._set(out) if inplace else out


def relu_(input):
    return relu(input, inplace=True)


def leaky_relu(input, negative_slope=0.01, inplace=False):
    out = _C.where(input > 0, input, input * negative_slope)
    return input._set(out) if inplace else out


def relu6(input, inplace=False):
    return hardtanh(input, 0.0, 6.0, inplace)


def hardtanh(input, min_val=-1.0, max_val=1.0, inplace=False):
    out = input.clamp(min_val, max_val)
    return input._set(out) if inplace else out


def elu(input, alpha=1.0, inplace=False):
    out = _C.where(input > 0, input, (input.clamp(max=0).exp() - 1) * alpha)
    return input._set(out) if inplace else out


@amp.float32
def softplus(input, beta=1.0, threshold=20.0):
    bx = input * beta
    soft = (bx.clamp(max=threshold).exp() + 1).log() / beta
    return _C.where(bx > threshold, input, soft)


def mish(input, inplace=False):
    out = input * softplus(input).tanh()
    return input._set(out) if inplace else out


def gelu(input, approximate="none"):
    if approximate not in ("none", "tanh"):
        raise RuntimeError(f"approximate argument must be either none or tanh, got {approximate!r}")
    return _C.gelu(input, approximate)


def silu(input, inplace=False):
    out = _C.silu(input)
    return input._set(out) if inplace else out


def tanh(input):
    return input.tanh()


def sigmoid(input):
    return input.sigmoid()


def _softmax_dim(ndim):
    # PyTorch's legacy rule for dim=None.
    return 0 if ndim in (0, 1, 3) else 1


@amp.float32
def softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.ndim)
    return input.softmax(dim, dtype=dtype)


@amp.float32
def log_softmax(input, dim=None, _stacklevel=3, dtype=None):
    if dim is None:
        dim = _softmax_dim(input.ndim)
    return input.log_softmax(dim, dtype=dtype)


def one_hot(tensor, num_classes=-1):
    """int64 [..., num_classes] with a 1 at each index of an int64 tensor. num_classes=-1 reads the
    largest index (a sync point on lazy, as PyTorch reads it from the device)."""
    _check_tensor(tensor, "one_hot", "tensor")
    if tensor.dtype != _C.int64:
        raise RuntimeError("one_hot is only applicable to index tensor of type int64 (LongTensor), "
                           f"got {tensor.dtype}")
    if num_classes == -1 and tensor.numel() == 0:
        raise RuntimeError("Can not infer total number of classes from empty tensor.")
    host = tensor._host_int_values()
    if host is not None and host.size:
        if host.min() < 0:
            raise RuntimeError("Class values must be non-negative.")
        if num_classes != -1 and host.max() >= num_classes:
            raise RuntimeError("Class values must be smaller than num_classes.")
    return _C.one_hot(tensor, num_classes)


def embedding(input, weight, padding_idx=None, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
              sparse=False):
    """Rows of `weight` picked by `input` (the runtime's embedding: a gather, an indexed load that
    fuses with elementwise neighbours; its backward is one scatter_add). Host indices are
    range-checked (IndexError). With padding_idx, that row is returned as it is but receives no
    gradient, as in PyTorch."""
    _check_tensor(input, "embedding")
    _check_tensor(weight, "embedding", "weight")
    if max_norm is not None or scale_grad_by_freq or sparse:
        raise NotImplementedError("not implemented: embedding(max_norm / scale_grad_by_freq / sparse) "
                                  "on lazytensor")
    if input.dtype.is_floating_point or input.dtype == _C.bool:
        raise RuntimeError(f"Expected tensor for argument #1 'indices' to have one of the following "
                           f"scalar types: Long, Int; but got {input.dtype} instead")
    if weight.ndim != 2:
        raise RuntimeError(f"'weight' must be 2-D, got shape {list(weight.shape)}")
    if input.device != weight.device:
        input = input.to(weight.device)
    num = weight.shape[0]
    if padding_idx is not None:
        if padding_idx < 0:
            padding_idx += num
        if weight.requires_grad:
            # The padding row's value, with no path back to the parameter.
            pad_row = _C.eq(_C.positions(num, weight.device), padding_idx).unsqueeze(-1)
            weight = _C.where(pad_row, weight.detach(), weight)
    return _C.embedding(weight, input)


def _reduce(loss, reduction, fn):
    if reduction == "mean":
        return loss.mean()
    if reduction == "sum":
        return loss.sum()
    if reduction == "none":
        return loss
    raise ValueError(f"{fn}: {reduction!r} is not a valid value for reduction")


def _classes_last(input):
    """(N, C, d1, ...) -> (N, d1, ..., C): class scores along the last dim."""
    if input.ndim <= 2:
        return input
    perm = [0] + list(range(2, input.ndim)) + [1]
    return input.permute(*perm)


@one_graph  # ~10 ops (gather, masks, weights, reduction): one graph on an eager device
def _nll_core(logp, target, weight, ignore_index, reduction, label_smoothing, fn):
    """logp: class log-probabilities with classes along the last dim (and matching target dims)."""
    C = logp.shape[-1]
    if target.dtype.is_floating_point:
        # Class probabilities as the target (same shape as the scores).
        if tuple(target.shape) != tuple(logp.shape):
            raise RuntimeError(f"{fn}: probability target of shape {tuple(target.shape)} does not "
                               f"match input of shape {tuple(logp.shape)}")
        if label_smoothing > 0:
            target = target * (1 - label_smoothing) + label_smoothing / C
        w = 1 if weight is None else weight
        loss = -(logp * target * w).sum(-1)
        if reduction == "mean":
            return loss.sum() / (loss.numel() if loss.ndim else 1)
        return _reduce(loss, reduction, fn)
    if tuple(target.shape) != tuple(logp.shape[:-1]):
        raise ValueError(f"{fn}: expected target of shape {tuple(logp.shape[:-1])}, got "
                         f"{tuple(target.shape)}")
    # The target's class is picked with a gather (an indexed load fused into the loss kernel);
    # ignored positions pick class 0 and are masked out. The primitive is used unchecked: `safe`
    # is computed, so a deferred range check would cost a kernel per step; a target computed in a
    # lazy graph outside [0, C) picks 0 (generated code clamps, never reading outside logp).
    # Targets already in host memory are range-checked now (no kernel): IndexError like PyTorch.
    _C._check_class_targets(target, C, ignore_index, fn, list(logp.shape))
    valid_mask = _C.ne(target, ignore_index)
    valid = valid_mask.to(logp.dtype)
    safe = _C.where(valid_mask, target.to(_C.int64), 0)
    picked = _C._gather_prim(logp, logp.ndim - 1, safe.unsqueeze(-1)).squeeze(-1)
    if weight is None:
        wt = valid
    else:
        wt = _C._gather_prim(weight, 0, safe.reshape(-1)).reshape(safe.shape) * valid
    loss = -picked * wt
    if label_smoothing > 0:
        if weight is None:
            smooth = -logp.sum(-1) * valid
        else:
            smooth = -(logp * weight).sum(-1) * valid
        loss = loss * (1 - label_smoothing) + smooth * (label_smoothing / C)
    if reduction == "mean":
        return loss.sum() / wt.sum()
    return _reduce(loss, reduction, fn)


@amp.float32
def cross_entropy(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
                  reduction="mean", label_smoothing=0.0):
    """log_softmax over dim 1 of (N, C) or (N, C, d1, ...) scores, then nll_loss; targets are
    class indices (int) or class probabilities (float)."""
    _check_tensor(input, "cross_entropy")
    _check_tensor(target, "cross_entropy", "target")
    if size_average is not None or reduce is not None:
        raise NotImplementedError("not implemented: size_average/reduce (deprecated); use reduction=")
    if input.ndim == 0:
        raise ValueError("cross_entropy: input must have at least one dimension")
    if not 0.0 <= label_smoothing <= 1.0:
        raise ValueError(f"label_smoothing must be between 0.0 and 1.0. Got: {label_smoothing}")
    dim = 0 if input.ndim == 1 else 1
    logp = _classes_last(input.log_softmax(dim))
    tgt = _classes_last(target) if target.dtype.is_floating_point else target
    return _nll_core(logp, tgt, weight, ignore_index, reduction, label_smoothing, "cross_entropy")


@amp.float32
def nll_loss(input, target, weight=None, size_average=None, ignore_index=-100, reduce=None,
             reduction="mean"):
    """Negative log-likelihood of class-index targets, given log-probabilities (N, C[, d1, ...])."""
    _check_tensor(input, "nll_loss")
    if size_average is not None or reduce is not None:
        raise NotImplementedError("not implemented: size_average/reduce (deprecated); use reduction=")
    if target.dtype.is_floating_point:
        raise RuntimeError(f"nll_loss: expected an integer target, got {target.dtype}")
    return _nll_core(_classes_last(input), target, weight, ignore_index, reduction, 0.0, "nll_loss")


def _same_shape(input, target, fn):
    if tuple(input.shape) != tuple(target.shape):
        import warnings
        warnings.warn(f"{fn}: using a target size ({tuple(target.shape)}) that is different to the "
                      f"input size ({tuple(input.shape)}); it will be broadcast.", stacklevel=3)


@amp.float32
def mse_loss(input, target, size_average=None, reduce=None, reduction="mean", weight=None):
    _same_shape(input, target, "mse_loss")
    d = input - target
    return _reduce(d * d, reduction, "mse_loss")


@amp.float32
def l1_loss(input, target, size_average=None, reduce=None, reduction="mean"):
    _same_shape(input, target, "l1_loss")
    return _reduce((input - target).abs(), reduction, "l1_loss")


@amp.float32
def huber_loss(input, target, reduction="mean", delta=1.0, weight=None):
    d = (input - target).abs()
    loss = _C.where(d < delta, d * d * 0.5, (d - 0.5 * delta) * delta)
    return _reduce(loss, reduction, "huber_loss")


@amp.float32
def smooth_l1_loss(input, target, size_average=None, reduce=None, reduction="mean", beta=1.0):
    d = (input - target).abs()
    if beta == 0:
        return _reduce(d, reduction, "smooth_l1_loss")
    loss = _C.where(d < beta, d * d * (0.5 / beta), d - 0.5 * beta)
    return _reduce(loss, reduction, "smooth_l1_loss")


def binary_cross_entropy(input, target, weight=None, size_average=None, reduce=None, reduction="mean"):
    loss = -(target * input.log().clamp(min=-100) + (1 - target) * (1 - input).log().clamp(min=-100))
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy")


@amp.float32
def binary_cross_entropy_with_logits(input, target, weight=None, size_average=None, reduce=None,
                                     reduction="mean", pos_weight=None):
    # log(sigmoid(x)) = -softplus(-x), computed stably.
    log_sig = -((-input.abs()).exp() + 1).log() + input.clamp(max=0)
    log_one_minus = log_sig - input
    if pos_weight is not None:
        loss = -(pos_weight * target * log_sig + (1 - target) * log_one_minus)
    else:
        loss = -(target * log_sig + (1 - target) * log_one_minus)
    if weight is not None:
        loss = loss * weight
    return _reduce(loss, reduction, "binary_cross_entropy_with_logits")


@amp.float32
def layer_norm(input, normalized_shape, weight=None, bias=None, eps=1e-5):
    if isinstance(normalized_shape, int):
        normalized_shape = [normalized_shape]
    return _C.layer_norm(input, list(normalized_shape), weight, bias, float(eps))


@amp.float32
def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    if p == 2:
        n = (input * input).sum(dim, keepdim=True).sqrt()
    else:
        n = input.abs().pow(p).sum(dim, keepdim=True).pow(1.0 / p)
    return input / n.clamp(min=eps)


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes each element with probability p and scales the rest by 1/(1-p) (training only). The
    mask comes from lazytensor's generator (same seed, same mask on every device)."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0
    else:
        keep = _C.ge(_C.rand_like(input), p).to(input.dtype)
        out = input * keep * (1.0 / (1.0 - p))
    return input._set(out) if inplace else out


def _missing(name):
    """An API of torch.nn.functional the runtime cannot express yet: raises when called."""
    def fn(*args, **kwargs):
        raise NotImplementedError(f"not implemented: {name} on lazytensor")
    fn.__name__ = fn.__qualname__ = name
    fn.__doc__ = f"Not implemented on lazytensor yet: raises NotImplementedError."
    return fn


def pad(input, pad, mode="constant", value=None):
    """torch.nn.functional.pad: `pad` = (last_lo, last_hi, second_last_lo, ...); negative amounts
    crop. Only mode="constant" exists on lazytensor."""
    _check_tensor(input, "pad")
    if mode != "constant":
        raise NotImplementedError(f"not implemented: pad(mode={mode!r}) on lazytensor (only "
                                  "mode='constant')")
    if not isinstance(pad, (list, tuple)):
        raise TypeError(f"pad(): argument 'pad' must be tuple of ints, not {type(pad).__name__}")
    pads = [int(p) for p in pad]
    if len(pads) % 2:
        raise RuntimeError(f"Padding length must be divisible by 2, got {len(pads)}")
    if len(pads) // 2 > input.ndim:
        raise RuntimeError(f"Padding length should be less than or equal to two times the input "
                           f"dimension but got padding length {len(pads)} and input of dimension "
                           f"{input.ndim}")
    from .._indexing import exact
    v = 0.0 if value is None else float(value)
    return exact(lambda a: _C.pad(a, pads, v), input.dtype, input)


def _pair(v, name, fn):
    if isinstance(v, int):
        return [v, v]
    v = [int(x) for x in v]
    if len(v) == 1:
        return v * 2
    if len(v) != 2:
        raise RuntimeError(f"{fn}: {name} must be an int or a pair of ints, got {v}")
    return v


def _string_padding(fn, input, weight, padding, stride, dilation):
    """PyTorch's padding='valid' / 'same' as (input, numeric padding): 'same' pads
    dilation * (k - 1) in total per spatial dim, the odd one at the end (with F.pad, before the
    convolution), as PyTorch does."""
    if not isinstance(padding, str):
        return input, padding
    if padding == "valid":
        return input, 0
    if padding != "same":
        raise ValueError(f"Invalid padding string {padding!r}, should be one of ('valid', 'same')")
    if any(s != 1 for s in stride):
        raise ValueError("padding='same' is not supported for strided convolutions")
    if weight.ndim != len(dilation) + 2:  # its kernel sizes are weight.shape[2:]
        raise RuntimeError(f"{fn}: expected a {len(dilation) + 2}-D weight, got shape {list(weight.shape)}")
    pads = []
    for k, d in reversed(list(zip(weight.shape[2:], dilation))):
        total = d * (k - 1)
        pads += [total // 2, total - total // 2]
    return _C.pad(input, pads, 0.0), 0


@amp.lower_precision
def conv2d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """2-D convolution (cross-correlation, as PyTorch): an im2col window view (movement ops only,
    fused as index arithmetic) times the weight as a GEMM step; the backward is the movement ops'
    VJPs (col2im as one fused reduction) and two GEMMs."""
    _check_tensor(input, "conv2d")
    _check_tensor(weight, "conv2d", "weight")
    stride, dilation = _pair(stride, "stride", "conv2d"), _pair(dilation, "dilation", "conv2d")
    input, padding = _string_padding("conv2d", input, weight, padding, stride, dilation)
    return _C.conv2d(input, weight, bias, stride, _pair(padding, "padding", "conv2d"), dilation, int(groups))


@amp.lower_precision
def conv1d(input, weight, bias=None, stride=1, padding=0, dilation=1, groups=1):
    """1-D convolution (the runtime's conv1d: conv2d over a height-1 image)."""
    _check_tensor(input, "conv1d")
    _check_tensor(weight, "conv1d", "weight")
    one = lambda v: int(v) if isinstance(v, int) else int(v[0])
    stride, dilation = one(stride), one(dilation)
    input, padding = _string_padding("conv1d", input, weight, padding, [stride], [dilation])
    return _C.conv1d(input, weight, bias, stride, one(padding), dilation, int(groups))


def max_pool2d(input, kernel_size, stride=None, padding=0, dilation=1, ceil_mode=False,
               return_indices=False):
    """The maximum over each window (a reduction over the window view). Gradient ties (equal
    maxima in a window) share the gradient evenly; PyTorch gives it to one of them."""
    _check_tensor(input, "max_pool2d")
    if return_indices:
        raise NotImplementedError("not implemented: max_pool2d(return_indices=True) on lazytensor")
    k = _pair(kernel_size, "kernel_size", "max_pool2d")
    st = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _pair(stride, "stride", "max_pool2d")
    return _C.max_pool2d(input, k, st, _pair(padding, "padding", "max_pool2d"),
                         _pair(dilation, "dilation", "max_pool2d"), bool(ceil_mode))


def avg_pool2d(input, kernel_size, stride=None, padding=0, ceil_mode=False, count_include_pad=True,
               divisor_override=None):
    _check_tensor(input, "avg_pool2d")
    k = _pair(kernel_size, "kernel_size", "avg_pool2d")
    st = k if stride is None or (not isinstance(stride, int) and len(stride) == 0) else \
        _pair(stride, "stride", "avg_pool2d")
    return _C.avg_pool2d(input, k, st, _pair(padding, "padding", "avg_pool2d"), bool(ceil_mode),
                         bool(count_include_pad), divisor_override)


def adaptive_avg_pool2d(input, output_size):
    _check_tensor(input, "adaptive_avg_pool2d")
    if isinstance(output_size, int):
        output_size = (output_size, output_size)
    out = [input.shape[-2 + i] if o is None else int(o) for i, o in enumerate(output_size)]
    return _C.adaptive_avg_pool2d(input, out)


def batch_norm(input, running_mean, running_var, weight=None, bias=None, training=False,
               momentum=0.1, eps=1e-5):
    """Normalizes over every dim but 1 (the channels). In training the batch statistics are used
    and the running buffers updated in place (unbiased variance, as PyTorch), so on "lazy" the
    update is part of the step graph; in eval the running statistics are used."""
    _check_tensor(input, "batch_norm")
    if input.ndim < 2:
        raise ValueError(f"batch_norm: expected at least 2-D input (got {input.ndim}-D input)")
    c = input.shape[1]
    for name, t in (("running_mean", running_mean), ("running_var", running_var),
                    ("weight", weight), ("bias", bias)):
        if t is not None and list(t.shape) != [c]:
            raise RuntimeError(f"batch_norm: {name} should contain {c} elements not "
                               f"{t.numel()} (input shape {list(input.shape)})")
    axes = [0] + list(range(2, input.ndim))
    bshape = [1, c] + [1] * (input.ndim - 2)
    if training:
        count = input.numel() // c
        if count <= 1:
            raise ValueError(f"Expected more than 1 value per channel when training, got input size "
                             f"{list(input.shape)}")
        mean = input.mean(axes)
        var = input.var(axes, unbiased=False)
        if running_mean is not None or running_var is not None:
            from ..autograd import no_grad
            m = 0.1 if momentum is None else momentum  # (cumulative averaging is not supported)
            with no_grad():
                if running_mean is not None:
                    running_mean._set(running_mean * (1 - m) + mean.detach() * m)
                if running_var is not None:
                    running_var._set(running_var * (1 - m) + var.detach() * (m * count / (count - 1)))
    else:
        if running_mean is None or running_var is None:
            raise RuntimeError("batch_norm: running_mean and running_var must be defined in "
                               "evaluation mode")
        mean, var = running_mean, running_var
    out = (input - mean.reshape(bshape)) * (var.reshape(bshape) + eps).rsqrt()
    if weight is not None:
        out = out * weight.reshape(bshape)
    if bias is not None:
        out = out + bias.reshape(bshape)
    return out


@amp.lower_precision
def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False,
                                 scale=None, enable_gqa=False):
    """softmax(q @ k^T * scale + mask) @ v, PyTorch's semantics: a bool mask keeps True
    positions, a float mask is added; is_causal keeps the lower triangle (top-left aligned).
    One autograd node in the runtime (runtime/attention.h) with the flash-attention backward."""
    for n, t in (("query", query), ("key", key), ("value", value)):
        _check_tensor(t, "scaled_dot_product_attention", n)
    if attn_mask is not None:
        _check_tensor(attn_mask, "scaled_dot_product_attention", "attn_mask")
    return _C.scaled_dot_product_attention(query, key, value, attn_mask, float(dropout_p),
                                           bool(is_causal), None if scale is None else float(scale),
                                           bool(enable_gqa))


interpolate = _missing("interpolate")
