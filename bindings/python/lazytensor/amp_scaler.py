"""`lt.amp.GradScaler`: PyTorch's dynamic loss scaling for float16 training.

    scaler = lt.amp.GradScaler("cuda")
    scaler.scale(loss).backward()   # loss * scale: small float16 gradients do not underflow
    scaler.step(optimizer)          # gradients / scale; the step is skipped if any is inf or nan
    scaler.update()                 # scale * backoff_factor after a skip, * growth_factor after
                                    # growth_interval clean steps in a row

PyTorch's API, defaults and arithmetic (torch.amp.GradScaler). The scale lives on the host, as a
Python float rounded to float32 as PyTorch's float32 scale tensor is; it enters each graph as a
0-d float32 device scalar, so a changing scale never recompiles a lazy step. Deciding whether to
skip the step reads the inf/nan check on the host, as PyTorch does (`.item()` in step()); on a lazy
device that read also materializes the gradients, so backward runs once.
"""
import math
import warnings
from collections import defaultdict
from enum import Enum

import numpy as np

from . import _C
from .autograd import no_grad

Tensor = _C.Tensor

__all__ = ["GradScaler", "OptState"]


class OptState(Enum):
    READY = 0
    UNSCALED = 1
    STEPPED = 2


def _fresh_optimizer_state():
    return {"stage": OptState.READY, "found_inf_per_device": {}}


def _float32(x):
    """x rounded to float32, as PyTorch's float32 scale tensor stores it."""
    return float(np.float32(x))


def _scalar(value, device):
    return _C.scalar_tensor(value, _C.float32, device)


class GradScaler:
    def __init__(self, device="cuda", init_scale=2.0**16, growth_factor=2.0, backoff_factor=0.5,
                 growth_interval=2000, enabled=True):
        self._device = device
        self._enabled = enabled
        if device == "cuda" and enabled:
            from . import cuda  # here: lazytensor.cuda imports this module for its amp namespace
            if not cuda.is_available():
                warnings.warn("lazytensor.amp.GradScaler is enabled for device 'cuda', but CUDA is "
                              "not available.  Disabling.", stacklevel=2)
                self._enabled = False
        if self._enabled:
            if growth_factor <= 1.0:
                raise AssertionError("The growth factor must be > 1.0.")
            if backoff_factor >= 1.0:
                raise AssertionError("The backoff factor must be < 1.0.")
            self._init_scale = init_scale
            self._scale = None  # set by the first scale(), as PyTorch creates its tensor there
            self._growth_factor = growth_factor
            self._backoff_factor = backoff_factor
            self._growth_interval = growth_interval
            self._init_growth_tracker = 0
            self._growth_tracker = None
            self._per_optimizer_states = defaultdict(_fresh_optimizer_state)

    def _check_scale_growth_tracker(self, funcname):
        fix = ("This may indicate your script did not use scaler.scale(loss or outputs) earlier in "
               "the iteration.")
        if self._scale is None:
            raise AssertionError(f"Attempted {funcname} but _scale is None.  " + fix)
        if self._growth_tracker is None:
            raise AssertionError(f"Attempted {funcname} but _growth_tracker is None.  " + fix)

    def _lazy_init_scale_growth_tracker(self):
        self._scale = _float32(self._init_scale)
        self._growth_tracker = self._init_growth_tracker

    # ---- the training-loop API ---------------------------------------------------------------

    def scale(self, outputs):
        """outputs * scale (a tensor, or a list/tuple/iterable of them); unchanged when disabled.
        The scale is a 0-d float32 tensor, as PyTorch's: a 0-d float16 loss scales to float32."""
        if not self._enabled:
            return outputs
        if self._scale is None:
            self._lazy_init_scale_growth_tracker()
        if isinstance(outputs, Tensor):
            return outputs * _scalar(self._scale, outputs.device)

        def apply_scale(val):
            if isinstance(val, Tensor):
                return val * _scalar(self._scale, val.device)
            if isinstance(val, (list, tuple)):
                return type(val)(map(apply_scale, val))
            if hasattr(val, "__iter__"):
                return map(apply_scale, val)
            raise ValueError("outputs must be a Tensor or an iterable of Tensors")

        return apply_scale(outputs)

    def _unscale_grads_(self, optimizer, inv_scale, allow_fp16):
        """Multiplies every gradient of `optimizer` by inv_scale; returns {device: 0-d count of
        non-finite gradient elements} (checked before the multiplication, as PyTorch's kernel)."""
        grads_by_device = defaultdict(list)
        with no_grad():
            for group in optimizer.param_groups:
                for param in group["params"]:
                    grad = param.grad
                    if grad is None:
                        continue
                    if not allow_fp16 and grad.dtype == _C.float16:
                        raise ValueError("Attempting to unscale FP16 gradients.")
                    grads_by_device[str(grad.device)].append(grad)
            found_inf_per_device = {}
            for device, grads in grads_by_device.items():
                # |g| < inf is False exactly for inf and nan: no isfinite op is needed, and unlike
                # g * 0 != 0 it cannot be folded away by an algebraic simplification.
                counts = [(g.abs() < math.inf).logical_not().sum() for g in grads]
                found = counts[0]
                for c in counts[1:]:
                    found = found + c
                found_inf_per_device[device] = found
                if inv_scale != 1.0:
                    for g in grads:
                        g.mul_(_scalar(inv_scale, g.device))
        return found_inf_per_device

    def unscale_(self, optimizer):
        """Divides the optimizer's gradients by the scale (before clipping them, say); step()
        then does not divide again. Once per optimizer between update()s."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("unscale_")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.UNSCALED:
            raise RuntimeError("unscale_() has already been called on this optimizer since the "
                               "last update().")
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("unscale_() is being called after step().")
        # PyTorch: scale.double().reciprocal().float()
        inv_scale = _float32(1.0 / self._scale)
        optimizer_state["found_inf_per_device"] = self._unscale_grads_(optimizer, inv_scale, False)
        optimizer_state["stage"] = OptState.UNSCALED

    def _maybe_opt_step(self, optimizer, optimizer_state, *args, **kwargs):
        found = list(optimizer_state["found_inf_per_device"].values())
        # One graph for the check and the gradients it read: on a lazy device, reading the check
        # alone would leave the gradients pending, and optimizer.step() would run backward again.
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        pending = [t for t in found + grads if t.is_lazy]
        if pending:
            _C.sync(pending, _C.SyncReason.item)
        if not sum(v.item() for v in found):
            return optimizer.step(*args, **kwargs)
        return None

    def step(self, optimizer, *args, **kwargs):
        """unscale_(optimizer) unless done already, then optimizer.step(*args, **kwargs) unless a
        gradient is inf or nan. Returns what optimizer.step returned (None when skipped)."""
        if not self._enabled:
            return optimizer.step(*args, **kwargs)
        if "closure" in kwargs:
            raise RuntimeError("Closure use is not currently supported if GradScaler is enabled.")
        self._check_scale_growth_tracker("step")
        optimizer_state = self._per_optimizer_states[id(optimizer)]
        if optimizer_state["stage"] is OptState.STEPPED:
            raise RuntimeError("step() has already been called since the last update().")
        if optimizer_state["stage"] is OptState.READY:
            self.unscale_(optimizer)
        if len(optimizer_state["found_inf_per_device"]) == 0:
            raise AssertionError("No inf checks were recorded for this optimizer.")
        retval = self._maybe_opt_step(optimizer, optimizer_state, *args, **kwargs)
        optimizer_state["stage"] = OptState.STEPPED
        return retval

    def update(self, new_scale=None):
        """Backs the scale off if any step since the last update saw inf/nan, grows it after
        growth_interval clean updates in a row (PyTorch's _amp_update_scale_), or sets new_scale."""
        if not self._enabled:
            return
        self._check_scale_growth_tracker("update")
        if new_scale is not None:
            if isinstance(new_scale, Tensor):
                reason = ("new_scale should be a float or a 1-element lazytensor.Tensor with "
                          "requires_grad=False.")
                if new_scale.numel() != 1 or new_scale.requires_grad:
                    raise AssertionError(reason)
                new_scale = new_scale.item()
            self._scale = _float32(new_scale)
        else:
            found_infs = [found for state in self._per_optimizer_states.values()
                          for found in state["found_inf_per_device"].values()]
            if len(found_infs) == 0:
                raise AssertionError("No inf checks were recorded prior to update.")
            if sum(f.item() for f in found_infs):
                self._scale = _float32(self._scale * self._backoff_factor)
                self._growth_tracker = 0
            else:
                successful = self._growth_tracker + 1
                if successful == self._growth_interval:
                    grown = _float32(self._scale * self._growth_factor)
                    if math.isfinite(grown):  # a scale that overflows float32 is not taken
                        self._scale = grown
                    self._growth_tracker = 0
                else:
                    self._growth_tracker = successful
        self._per_optimizer_states = defaultdict(_fresh_optimizer_state)

    # ---- accessors ---------------------------------------------------------------------------

    def get_scale(self):
        """The current scale (the initial one before the first scale()), or 1.0 when disabled."""
        if self._enabled:
            return self._init_scale if self._scale is None else self._scale
        return 1.0

    def get_growth_factor(self):
        return self._growth_factor

    def set_growth_factor(self, new_factor):
        self._growth_factor = new_factor

    def get_backoff_factor(self):
        return self._backoff_factor

    def set_backoff_factor(self, new_factor):
        self._backoff_factor = new_factor

    def get_growth_interval(self):
        return self._growth_interval

    def set_growth_interval(self, new_interval):
        self._growth_interval = new_interval

    def _get_growth_tracker(self):
        if self._enabled:
            tracker = self._growth_tracker
            return self._init_growth_tracker if tracker is None else tracker
        return 0

    def is_enabled(self):
        return self._enabled

    def state_dict(self):
        """scale, growth_factor, backoff_factor, growth_interval and _growth_tracker; {} when
        disabled."""
        if self._enabled:
            return {"scale": self.get_scale(), "growth_factor": self._growth_factor,
                    "backoff_factor": self._backoff_factor,
                    "growth_interval": self._growth_interval,
                    "_growth_tracker": self._get_growth_tracker()}
        return {}

    def load_state_dict(self, state_dict):
        if not self._enabled:
            return
        if len(state_dict) == 0:
            raise RuntimeError("The source state dict is empty, possibly because it was saved "
                               "from a disabled instance of GradScaler.")
        self._init_scale = state_dict["scale"]
        if self._scale is not None:
            self._scale = _float32(state_dict["scale"])
        self._growth_factor = state_dict["growth_factor"]
        self._backoff_factor = state_dict["backoff_factor"]
        self._growth_interval = state_dict["growth_interval"]
        self._init_growth_tracker = state_dict["_growth_tracker"]
        if self._growth_tracker is not None:
            self._growth_tracker = state_dict["_growth_tracker"]
