"""Adadelta, Adagrad and RMSprop with PyTorch's update rules (torch.optim's single-tensor forms).

As Adam, each keeps state['step'] as a 0-d float64 tensor on the parameter's device: Adagrad's
learning-rate decay is computed from it in the graph, so a step that lt.compile replays without
running this Python code still decays, and state_dict()'s step count stays right for all three.
foreach, fused, capturable and differentiable are accepted and ignored, as by SGD and Adam here:
every update already compiles into the step's fused graph.
"""
from .. import _C
from .optimizer import Optimizer
from .sgd_adam import _step_tensor, _zeros_state

Tensor = _C.Tensor


class _DeviceStepOptimizer(Optimizer):
    """An optimizer whose state['step'] lives on the parameter's device (see the module doc)."""

    def _advance_step(self, state):
        step = state["step"]
        step._assign(step + 1)
        return step

    def _load_step(self, v, p):
        return _step_tensor(p, v.item() if isinstance(v, Tensor) else v)


def _check_non_negative(**values):
    labels = {"lr": "learning rate", "eps": "epsilon value"}
    for name, v in values.items():
        if not 0.0 <= v:
            raise ValueError(f"Invalid {labels.get(name, name + ' value')}: {v}")


class Adadelta(_DeviceStepOptimizer):
    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, foreach=None, *,
                 capturable=False, maximize=False, differentiable=False):
        _check_non_negative(lr=lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        _check_non_negative(eps=eps, weight_decay=weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _init_state(self, p, group):
        st = self.state[p]
        if "square_avg" not in st:
            st["step"] = _step_tensor(p)
            st["square_avg"] = _zeros_state(p)
            st["acc_delta"] = _zeros_state(p)

    def _update(self, p, grad, state, group):
        lr, rho, eps, wd = group["lr"], group["rho"], group["eps"], group["weight_decay"]
        self._advance_step(state)
        if wd != 0:
            grad = grad + p * wd
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg._assign(square_avg * rho + grad * grad * (1.0 - rho))
        std = (square_avg + eps).sqrt()
        delta = (acc_delta + eps).sqrt() / std * grad
        acc_delta._assign(acc_delta * rho + delta * delta * (1.0 - rho))
        p._assign(p - delta * lr)


class Adagrad(_DeviceStepOptimizer):
    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, foreach=None, *, maximize=False, differentiable=False, fused=None):
        _check_non_negative(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                            initial_accumulator_value=initial_accumulator_value, eps=eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults)

    def _init_state(self, p, group):
        st = self.state[p]
        if "sum" not in st:
            st["step"] = _step_tensor(p)
            st["sum"] = _C.full_like(p, group["initial_accumulator_value"])

    def _update(self, p, grad, state, group):
        lr, lr_decay, eps, wd = group["lr"], group["lr_decay"], group["eps"], group["weight_decay"]
        step = self._advance_step(state)
        if wd != 0:
            grad = grad + p * wd
        # 0-d float64 from the device step (the float32 update's dtype is unchanged by it).
        clr = lr / ((step - 1.0) * lr_decay + 1.0)
        state_sum = state["sum"]
        state_sum._assign(state_sum + grad * grad)
        std = state_sum.sqrt() + eps
        p._assign(p - grad / std * clr)


class RMSprop(_DeviceStepOptimizer):
    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, capturable=False, foreach=None, maximize=False,
                 differentiable=False):
        _check_non_negative(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay,
                            alpha=alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _init_state(self, p, group):
        st = self.state[p]
        if "square_avg" not in st:
            st["step"] = _step_tensor(p)
            st["square_avg"] = _zeros_state(p)
        # Created now rather than at the first step, so the first step's graph is every step's.
        if group["momentum"] > 0 and "momentum_buffer" not in st:
            st["momentum_buffer"] = _zeros_state(p)
        if group["centered"] and "grad_avg" not in st:
            st["grad_avg"] = _zeros_state(p)

    def _update(self, p, grad, state, group):
        lr, alpha, eps, wd = group["lr"], group["alpha"], group["eps"], group["weight_decay"]
        momentum = group["momentum"]
        self._init_state(p, group)  # momentum or centered switched on after construction
        self._advance_step(state)
        if wd != 0:
            grad = grad + p * wd
        square_avg = state["square_avg"]
        square_avg._assign(square_avg * alpha + grad * grad * (1.0 - alpha))
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg._assign(grad_avg + (grad - grad_avg) * (1.0 - alpha))  # lerp, as torch
            avg = (square_avg - grad_avg * grad_avg).sqrt()
        else:
            avg = square_avg.sqrt()
        avg = avg + eps
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf._assign(buf * momentum + grad / avg)
            p._assign(p - buf * lr)
        else:
            p._assign(p - grad / avg * lr)
