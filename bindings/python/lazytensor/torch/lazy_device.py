"""The `lazy` device inside PyTorch (DESIGN.md, "Under PyTorch 2"): an unchanged script that says
`device = "lazy"` runs on lazytensor's lazy runtime.

How it is wired, in pure Python (nothing built against torch's headers):
  * tensors are LazyTensor wrappers (lazy_tensor.py) on torch's `lazy` device type, whose dispatch
    key is PyTorch's LazyTensor Core's `Lazy`; their ops reach __torch_dispatch__ (lazy_dispatch.py);
  * factory functions given device="lazy" (torch.empty/zeros/ones/full/randn/rand/arange, and the
    `empty` inside `.to("lazy")`) reach the `Lazy` dispatch key, where torch.library kernels
    registered here make LazyTensors; torch's composite factories fill them in place (fill_,
    normal_, ...), which dispatch as above;
  * steps end as on our own `lazy` device: `optimizer.step()` on lazy parameters ends the step (a
    global optimizer step hook), `lazytensor.torch.mark_step()` and `torch._lazy.mark_step()`
    (LazyTensor Core's name) sync explicitly, and host reads sync what they read;
  * `torch.manual_seed` also seeds lazytensor's generator, so random draws on `lazy` repeat.
Installed once: by torch's device-backend autoload (`import torch` with lazytensor installed;
TORCH_DEVICE_BACKEND_AUTOLOAD=0 turns it off), or when `lazytensor.torch` is imported.
"""
import importlib
import sys


def autoload():
    """torch's device-backend autoload entry point (`torch.backends` group): `import torch` with
    lazytensor installed gives the `lazy` device, without importing the torch.compile backend.
    Defined before this module imports torch: when `import lazytensor.torch` comes first, that
    import of torch runs the entry point while this module is still half made, and the device is
    then installed by lazytensor.torch's own import when it finishes."""
    if getattr(sys.modules[__name__], "_module_ready", False):
        install()


import torch  # noqa: E402  (after autoload, which torch's import may call)

from .. import _C
from .lazy_tensor import LazyTensor, lt_device, rebuild_lazy, wrap
from .interop import lt_dtype

_library = None
_installed = False


def mark_step():
    """Ends the step: every pending lazy tensor of this thread is computed (one graph)."""
    _C.mark_step()


def _empty(size, *, dtype=None, layout=None, device=None, pin_memory=None, memory_format=None):
    dt = lt_dtype(dtype or torch.get_default_dtype())
    return wrap(_C.full(list(size), 0, dt, lt_device()))


def _empty_strided(size, stride, *, dtype=None, layout=None, device=None, pin_memory=None):
    return _empty(size, dtype=dtype)


def _from_table(op):
    """A `Lazy` key kernel for factory `op` (no tensor operands): the aten table's builder, looked
    up at the first call (the table imports torch._dynamo's world; `import torch` must not)."""
    def kernel(*args, **kwargs):
        from .aten_table import TABLE
        from .lazy_dispatch import _Context
        return wrap(TABLE[op](_Context(lt_device()), *args, **kwargs))
    return kernel


def _random(fill):
    def kernel(*args, dtype=None, layout=None, device=None, pin_memory=None, generator=None, **kw):
        size = args[-1]
        dt = lt_dtype(dtype or (torch.int64 if fill == "randint" else torch.get_default_dtype()))
        if fill == "randint":
            low, high = (0, args[0]) if len(args) == 2 else (args[0], args[1])
            return wrap(_C.randint(low, high, list(size), dt, lt_device()))
        return wrap(getattr(_C, fill)(list(size), dt, lt_device()))
    return kernel


def _randperm(n, *, generator=None, dtype=None, layout=None, device=None, pin_memory=None):
    """torch.randperm on the device: lazytensor's (the global stream lt.manual_seed and
    torch.manual_seed both seed here; a torch.Generator is not ours and is not read)."""
    from .._sampling import randperm
    return wrap(randperm(n, dtype=lt_dtype(dtype or torch.int64), device=lt_device()))


# Factories whose composite form would fill a tensor of the wrong size (arange's out= resizes its
# output; a wrapper's size is fixed), or would draw from torch's generator instead of ours.
_FACTORIES = {
    "arange": "arange.default", "arange.start": "arange.start", "arange.start_step": "arange.start_step",
    "full": "full.default", "zeros": "zeros.default", "ones": "ones.default",
    "scalar_tensor": "scalar_tensor.default",
}


def _copy_from(src, dst, non_blocking=False):
    """A copy that reaches the `Lazy` key itself: torch.tensor(data, device="lazy") copies with the
    Python dispatch key excluded (torch/csrc/utils/tensor_new.cpp), so LazyTensor's
    __torch_dispatch__ does not see it."""
    from .lazy_dispatch import _copy_
    return _copy_(dst, src)


def _optimizer_step_ends_the_step(optimizer, args, kwargs):
    for group in optimizer.param_groups:
        for p in group["params"]:
            if isinstance(p, LazyTensor):
                mark_step()
                return


def _module_to(original):
    """nn.Module.to for moves onto or off the `lazy` device: each parameter converted once, so
    parameters shared between modules (nanoGPT's tied embedding and head) stay shared. torch's own
    _apply keeps a shared parameter's identity only for tensors of one kind (set_data) or traceable
    subclasses (swap_tensors); across the CPU/lazy boundary it would make one copy per module."""
    def to(self, *args, **kwargs):
        device, dtype, non_blocking, memory_format = torch._C._nn._parse_to(*args, **kwargs)
        onto = device is not None and torch.device(device).type == "lazy"
        off = device is not None and not onto and any(isinstance(p, LazyTensor) for p in self.parameters())
        if not (onto or off):
            return original(self, *args, **kwargs)
        done = {}

        def convert(t):
            if id(t) not in done:
                moved = t.detach().to(device, dtype if dtype is not None and t.is_floating_point() else None)
                if isinstance(t, torch.nn.Parameter):
                    moved = torch.nn.Parameter(moved, requires_grad=t.requires_grad)
                    if t.grad is not None:
                        moved.grad = t.grad.to(device)
                done[id(t)] = moved
            return done[id(t)]

        for module in self.modules():
            for key, p in module._parameters.items():
                if p is not None:
                    module._parameters[key] = convert(p)
            for key, b in module._buffers.items():
                if b is not None:
                    module._buffers[key] = convert(b)
        return self
    to._lazytensor = True
    return to


def _lazy_mark_step(device="", wait=False):
    mark_step()


def _sdpa_on_device(*args, **kwargs):
    """F.scaled_dot_product_attention on `lazy`: lazytensor's fused attention and its VJP (the
    custom op the torch.compile backend uses, attention.sdpa_or), registered above autograd because
    the aten op is composite and would otherwise reach the device as its math decomposition
    (a dozen ops forward and more backward, each a Python dispatch). Dropout, enable_gqa and a
    mask that needs a gradient take PyTorch's decomposition, as before."""
    attention = importlib.import_module("lazytensor.torch.attention")  # defines lazytensor::sdpa
    return attention.sdpa_or(torch.ops.aten.scaled_dot_product_attention.default.decompose,
                             *args, **kwargs)


def install():
    """Registers the `Lazy` dispatch key's factory kernels and the step hooks (idempotent)."""
    global _library, _installed
    if _installed:
        return
    _library = torch.library.Library("aten", "IMPL")
    _library.impl("empty.memory_format", _empty, "Lazy")
    _library.impl("empty_strided", _empty_strided, "Lazy")
    _library.impl("_copy_from", _copy_from, "Lazy")
    _library.impl("_copy_from_and_resize", _copy_from, "Lazy")
    aten = torch.ops.aten
    for name, overload in _FACTORIES.items():
        packet, _, which = overload.partition(".")
        _library.impl(name, _from_table(getattr(getattr(aten, packet), which)), "Lazy")
    _library.impl("randn", _random("randn"), "Lazy")
    _library.impl("rand", _random("rand"), "Lazy")
    _library.impl("randint", _random("randint"), "Lazy")
    _library.impl("randint.low", _random("randint"), "Lazy")
    _library.impl("randperm", _randperm, "Lazy")
    _library.impl("randperm.generator", _randperm, "Lazy")
    _library.impl("scaled_dot_product_attention", _sdpa_on_device, "AutogradLazy")
    importlib.import_module("torch.optim.optimizer").register_optimizer_step_post_hook(
        _optimizer_step_ends_the_step)
    importlib.import_module("torch._lazy").mark_step = _lazy_mark_step
    if not getattr(torch.nn.Module.to, "_lazytensor", False):
        torch.nn.Module.to = _module_to(torch.nn.Module.to)
    _take_foreach_paths()
    torch.serialization.add_safe_globals([rebuild_lazy])  # torch.load(weights_only=True) of lazy tensors
    _seed_both()
    _installed = True


def _take_foreach_paths():
    """torch.optim and clip_grad_norm_ default to their foreach paths on `lazy` as on CUDA (the
    ops expand per tensor into the step's graph, lazy_foreach.py): the device joins torch's
    foreach-capable devices and LazyTensor its foreach-capable types, as DTensor does."""
    utils = importlib.import_module("torch.utils._foreach_utils")
    optimizer = importlib.import_module("torch.optim.optimizer")
    original = utils._get_foreach_kernels_supported_devices
    if not getattr(original, "_lazytensor", False):
        def supported_devices():
            return original() + ["lazy"]
        supported_devices._lazytensor = True
        utils._get_foreach_kernels_supported_devices = supported_devices
        optimizer._get_foreach_kernels_supported_devices = supported_devices
    for types in (utils._foreach_supported_types, optimizer._foreach_supported_types):
        if LazyTensor not in types:
            types.append(LazyTensor)


def _seed_both():
    """torch.manual_seed(s) seeds lazytensor's generator too (random draws on `lazy`)."""
    original = torch.manual_seed
    if getattr(original, "_seeds_lazytensor", False):
        return

    def manual_seed(seed):
        _C.manual_seed(int(seed))
        return original(seed)

    manual_seed._seeds_lazytensor = True
    manual_seed.__doc__ = original.__doc__
    torch.manual_seed = manual_seed
    torch.random.manual_seed = manual_seed


_module_ready = True  # autoload() may install from here on
