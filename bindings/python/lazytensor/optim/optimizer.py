"""`Optimizer`: PyTorch's param_groups / state / state_dict protocol.

Updates run under no_grad as tensor ops and rebind each parameter to its new value (in place for
every Python reference). Hyperparameters (lr, betas, bias corrections, ...) are Python floats, which
enter the trace as runtime scalars: changing them (a scheduler) never recompiles. Optimizer state
is created as materialized zeros when the optimizer is built, so step 1 traces the same graph as
every later step. On a lazy device step() ends the training step as lt.mark_step() does: forward,
backward and update are one compiled graph. Inside a step that lt.compile is capturing, that sync
is deferred to the end of the capture (the whole step is one graph either way), and the optimizer
tells the capture it ran, so its hyperparameters become part of the compiled step's guard.
"""
from collections import defaultdict

from .. import _C
from ..autograd import enable_grad, no_grad

Tensor = _C.Tensor


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

# Called with the optimizer at the start of each step() (lt.compile's capture listens here).
_step_observers = []


def _guard_value(v):
    """A hashable stand-in for a hyperparameter: numbers and tuples by value, tensors by identity."""
    if isinstance(v, Tensor):
        return ("tensor", id(v))
    if isinstance(v, (list, tuple)):
        return tuple(_guard_value(x) for x in v)
    try:
        hash(v)
        return v
    except TypeError:
        return ("object", id(v))


class Optimizer:
    def __init__(self, params, defaults):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of Tensors "
                            f"or dicts, but got {type(params).__name__}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, g in enumerate(self.param_groups):
            s += f"\nParameter Group {i}"
            for k in sorted(g):
                if k != "params":
                    s += f"\n    {k}: {g[k]}"
        return s + "\n)"

    def add_param_group(self, param_group):
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group).__name__}")
        params = param_group["params"]
        params = [params] if isinstance(params, Tensor) else list(params)
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        group = dict(param_group, params=params)
        for k, v in self.defaults.items():
            if v is required and k not in group:
                raise ValueError(f"parameter group didn't specify a value of required optimization "
                                 f"parameter {k}")
            group.setdefault(k, v)
        seen = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in seen for p in params) or len({id(p) for p in params}) != len(params):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)
        with no_grad():
            for p in params:
                self._init_state(p, group)
        # Parameters and state start materialized: the first step's graph is every step's graph.
        pending = [t for p in params for t in [p] + [v for v in self.state[p].values()
                                                      if isinstance(v, Tensor)] if t.is_lazy]
        if pending:
            _C.sync(pending, _C.SyncReason.sync)

    def _init_state(self, p, group):
        """Creates the per-parameter state (materialized zeros) of this optimizer."""

    def _load_step(self, v, p):
        """state['step'] from a state dict: a host int here; optimizers that keep it on the device
        (Adam) override this."""
        return int(v.item()) if isinstance(v, Tensor) else int(v)

    def zero_grad(self, set_to_none=True):
        for g in self.param_groups:
            for p in g["params"]:
                grad = p.grad
                if grad is None:
                    continue
                p.grad = None if set_to_none else _C.zeros_like(grad)

    def _update(self, p, grad, state, group):
        raise NotImplementedError

    def _update_group(self, group, params):
        """Updates the group's parameters that have a gradient, in order (under no_grad).
        Optimizers with a native rule for a whole group override this (Adam)."""
        maximize = group.get("maximize", False)
        for p in params:
            grad = p.grad
            if grad is None:
                continue
            if maximize:
                grad = -grad
            self._update(p, grad, self.state[p], group)

    def step(self, closure=None):
        for observer in _step_observers:  # before the update: it sees the settings the step uses
            observer(self)
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        lazy = False
        with no_grad():
            for group in self.param_groups:
                params = group["params"]
                lazy = lazy or any(p.is_lazy for p in params)
                self._update_group(group, params)
        if lazy and not _C._capture_active():
            _C.mark_step()  # the end of the training step: one graph for forward, backward, update
        return loss

    def _compile_key(self):
        """The Python-side values a traced step() bakes into its graph (lt.compile's guard): every
        group's hyperparameters and parameter identities. A change (an lr scheduler) re-traces; the
        graph cache still hits, so nothing recompiles."""
        return tuple(tuple((k, tuple(map(id, v)) if k == "params" else _guard_value(v))
                           for k, v in sorted(g.items(), key=lambda kv: kv[0]))
                     for g in self.param_groups)

    # ---- state dict ----------------------------------------------------------------------------

    def state_dict(self):
        """{'state': {index: {name: value}}, 'param_groups': [{..., 'params': [indices]}]}, with
        parameters numbered in order across groups, as in PyTorch."""
        index = {}
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            ids = []
            for p in g["params"]:
                index.setdefault(id(p), len(index))
                ids.append(index[id(p)])
            packed["params"] = ids
            groups.append(packed)
        state = {}
        for g in self.param_groups:
            for p in g["params"]:
                if p in self.state and self.state[p]:
                    state[index[id(p)]] = {k: (v.detach() if isinstance(v, Tensor) else v)
                                           for k, v in self.state[p].items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        for mine, theirs in zip(self.param_groups, groups):
            if len(mine["params"]) != len(theirs["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match the "
                                 "size of optimizer's group")
        id_map = {}
        for mine, theirs in zip(self.param_groups, groups):
            for p, i in zip(mine["params"], theirs["params"]):
                id_map[i] = p
        synced = []
        with no_grad():
            for i, st in state_dict["state"].items():
                p = id_map.get(int(i))
                if p is None:
                    continue
                mine = self.state[p]
                for k, v in st.items():
                    if k == "step":
                        mine[k] = self._load_step(v, p)
                        continue
                    if isinstance(v, Tensor):
                        v = v.detach().to(device=p.device, dtype=p.dtype if v.dtype.is_floating_point
                                          else v.dtype)
                        if k in mine and isinstance(mine[k], Tensor):
                            if tuple(v.shape) != tuple(mine[k].shape):
                                raise ValueError(f"state '{k}' of parameter {i} has shape "
                                                 f"{tuple(v.shape)}, expected {tuple(mine[k].shape)}")
                            mine[k]._set_data(v)
                        else:
                            mine[k] = Tensor(v)
                        if v.is_lazy:
                            synced.append(mine[k])
                    else:
                        mine[k] = v
        if synced:
            _C.sync(synced, _C.SyncReason.sync)
        for mine, theirs in zip(self.param_groups, groups):
            for k, v in theirs.items():
                if k != "params":
                    mine[k] = v
