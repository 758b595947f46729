"""SGD, Adam and AdamW with PyTorch's update rules (torch.optim's single-tensor forms)."""
from .. import _C
from .optimizer import Optimizer, required

Tensor = _C.Tensor


def _zeros_state(p):
    return _C.zeros_like(p)


def _step_tensor(p, value=0):
    """Adam's step count: a 0-d float64 tensor on the parameter's device (PyTorch also keeps
    state['step'] a tensor). Bias corrections computed from it in the graph stay right when
    lt.compile replays a step without running this Python code; float64 keeps them as exact as
    host arithmetic."""
    return _C.scalar_tensor(float(value), _C.float64, p.device)


class SGD(Optimizer):
    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False, *,
                 maximize=False, foreach=None, differentiable=False, fused=None):
        if lr is not required and lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _init_state(self, p, group):
        st = self.state[p]
        if group["momentum"] != 0 and "momentum_buffer" not in st:
            st["momentum_buffer"] = _zeros_state(p)
            st["step"] = 0

    def _update(self, p, grad, state, group):
        lr, wd, momentum = group["lr"], group["weight_decay"], group["momentum"]
        d_p = grad if wd == 0 else grad + p * wd
        if momentum != 0:
            if "momentum_buffer" not in state:  # momentum switched on after construction
                state["momentum_buffer"] = _zeros_state(p)
                state["step"] = 0
            buf = state["momentum_buffer"]
            # PyTorch's first step sets buf = d_p; later steps buf*m + (1-dampening)*d_p. With buf
            # starting at zero both are buf*m + c*d_p, with c a runtime scalar: one graph for both.
            c = 1.0 if state["step"] == 0 else 1.0 - group["dampening"]
            buf._assign(buf * momentum + d_p * c)
            state["step"] += 1
            d_p = d_p + buf * momentum if group["nesterov"] else buf
        p._assign(p - d_p * lr)

    def _compile_key(self):
        # PyTorch's first momentum step differs from later ones (see _update): a host-side choice.
        first = tuple(self.state[p].get("step", 0) == 0 for g in self.param_groups for p in g["params"]
                      if g["momentum"] != 0 and g["dampening"] != 0)
        return super()._compile_key(), first


class Adam(Optimizer):
    _decoupled = False

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, amsgrad=False,
                 *, foreach=None, maximize=False, capturable=False, differentiable=False, fused=None):
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize)
        super().__init__(params, defaults)

    def _init_state(self, p, group):
        st = self.state[p]
        if "exp_avg" not in st:
            st["step"] = _step_tensor(p)
            st["exp_avg"] = _zeros_state(p)
            st["exp_avg_sq"] = _zeros_state(p)
        if group["amsgrad"] and "max_exp_avg_sq" not in st:
            st["max_exp_avg_sq"] = _zeros_state(p)

    def _update(self, p, grad, state, group):
        if group["amsgrad"] and "max_exp_avg_sq" not in state:
            state["max_exp_avg_sq"] = _zeros_state(p)
        beta1, beta2 = group["betas"]
        # The C++ optimizer's rule (nn/optim.h adam_update): one definition for both.
        _C._adam_update(p, grad, state["exp_avg"], state["exp_avg_sq"],
                        state["max_exp_avg_sq"] if group["amsgrad"] else None, state["step"],
                        group["lr"], beta1, beta2, group["eps"], group["weight_decay"],
                        self._decoupled)

    def _update_group(self, group, params):
        # One native call for the group (nn/optim.h adam_update_many): a Python loop of per-
        # parameter calls was ~1 ms of GPT-2's 148-parameter step, and on a lazy device the
        # updates share their hyperparameters' scalar inputs. Same rule as _update.
        if type(self)._update is not Adam._update:  # a subclass's own rule
            return super()._update_group(group, params)
        amsgrad, maximize = group["amsgrad"], group.get("maximize", False)
        ps, grads, avgs, avg_sqs, maxes, steps = [], [], [], [], [], []
        state_of = self.state
        for p in params:
            grad = p.grad
            if grad is None:
                continue
            state = state_of[p]
            if amsgrad and "max_exp_avg_sq" not in state:
                state["max_exp_avg_sq"] = _zeros_state(p)
            ps.append(p)
            grads.append(-grad if maximize else grad)
            avgs.append(state["exp_avg"])
            avg_sqs.append(state["exp_avg_sq"])
            steps.append(state["step"])
            if amsgrad:
                maxes.append(state["max_exp_avg_sq"])
        if not ps:
            return
        beta1, beta2 = group["betas"]
        _C._adam_update_many(ps, grads, avgs, avg_sqs, maxes, steps, group["lr"], beta1, beta2,
                             group["eps"], group["weight_decay"], self._decoupled)

    def _load_step(self, v, p):
        return _step_tensor(p, v.item() if isinstance(v, Tensor) else v)


class AdamW(Adam):
    """Adam with decoupled weight decay (p *= 1 - lr * weight_decay before the Adam step)."""
    _decoupled = True

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False, foreach=None, capturable=False,
                 differentiable=False, fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize)
