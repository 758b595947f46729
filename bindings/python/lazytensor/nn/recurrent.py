"""`lazytensor.nn` recurrent layers: PyTorch's RNN / LSTM / GRU and their cells (parameter names,
shapes, initialization, gate order, argument checks and return values), built from F.linear and
elementwise ops.

The time loop is unrolled in Python: on "lazy" a whole sequence (forward and backward) becomes one
graph, which is compiled once per (sequence length, batch) and replayed afterwards. As in ATen's CPU
path, each direction of a layer projects the whole input sequence with W_ih in one matmul before
the loop; the loop only adds h @ W_hh^T."""
import math
import numbers
import warnings

from .. import _C
from .._eager_graph import one_graph as _one_graph
from . import functional as F
from . import init
from .layers import _new_param
from .module import Module

Tensor = _C.Tensor

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _autocast_on():
    """torch skips the input/weight dtype check under any autocast region; so do we."""
    from .. import amp
    return any(amp.is_autocast_enabled(d) for d in amp.DEVICE_TYPES)


def _zeros(shape, like):
    return _C.zeros(list(shape), like.dtype, like.device)


def _reject_packed(input, name):
    if not isinstance(input, Tensor):
        if hasattr(input, "batch_sizes"):
            raise NotImplementedError(f"not implemented: PackedSequence input to {name} on "
                                      "lazytensor (pad the batch and pass a tensor)")
        raise TypeError(f"{name}: expected a Tensor as input, got {type(input).__name__}")


# ---- one time step (shared by the cells and the sequence layers) --------------------------------
# `gi` is the input projection x @ W_ih^T + b_ih, computed by the caller (for a whole sequence at
# once in the sequence layers).

def _rnn_step(gi, h, w_hh, b_hh, relu):
    pre = gi + F.linear(h, w_hh, b_hh)
    return pre.relu() if relu else pre.tanh()


def _lstm_step(gi, h, c, w_hh, b_hh, w_hr=None):
    i, f, g, o = (gi + F.linear(h, w_hh, b_hh)).chunk(4, -1)  # torch's gate order: i, f, g, o
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    if w_hr is not None:  # proj_size > 0: h is projected to proj_size features
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(gi, h, w_hh, b_hh):
    i_r, i_z, i_n = gi.chunk(3, -1)  # torch's gate order: r, z, n
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    r = (i_r + h_r).sigmoid()
    z = (i_z + h_z).sigmoid()
    n = (i_n + r * h_n).tanh()  # b_hn sits inside r * (...), as in torch (and cuDNN)
    return n + z * (h - n)  # (1 - z) * n + z * h, written as ATen does


# ---- sequence layers -----------------------------------------------------------------------------

class RNNBase(Module):
    """The common part of RNN, LSTM and GRU: parameters weight_ih_l{k}[_reverse], weight_hh_l{k},
    bias_ih_l{k}, bias_hh_l{k} (and weight_hr_l{k} for an LSTM with proj_size), all ~
    U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)) as in PyTorch."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False,
                 dropout=0.0, bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool)
                or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so "
                          "non-zero dropout expects num_layers greater than 1, but got "
                          f"dropout={dropout} and num_layers={num_layers}", stacklevel=2)
        for name, v, typ in (("bias", bias, bool), ("batch_first", batch_first, bool),
                             ("input_size", input_size, int), ("hidden_size", hidden_size, int)):
            if not isinstance(v, typ):
                raise TypeError(f"{name} should be of type {typ.__name__}, got: {type(v).__name__}")
        if input_size <= 0:
            raise ValueError("input_size must be greater than zero")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if mode not in _GATES:
            raise ValueError("Unrecognized RNN mode: " + mode)
        self.mode = mode
        self.input_size, self.hidden_size, self.num_layers = input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        D = 2 if bidirectional else 1
        self._flat_weights_names, self._all_weights = [], []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * D
            for direction in range(D):
                shapes = [("weight_ih_l{}{}", (gate_size, layer_input)),
                          ("weight_hh_l{}{}", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih_l{}{}", (gate_size,)), ("bias_hh_l{}{}", (gate_size,))]
                if proj_size > 0:
                    shapes += [("weight_hr_l{}{}", (proj_size, hidden_size))]
                suffix = "_reverse" if direction == 1 else ""
                names = []
                for fmt, shape in shapes:  # registration order = torch's state_dict order
                    name = fmt.format(layer, suffix)
                    setattr(self, name, _new_param(shape, device, dtype))
                    names.append(name)
                self._flat_weights_names.extend(names)
                self._all_weights.append(names)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """No-op: there is no cuDNN weight buffer to compact (scripts call this after .to())."""

    @property
    def _flat_weights(self):
        return [getattr(self, n, None) for n in self._flat_weights_names]

    @property
    def all_weights(self):
        return [[getattr(self, n) for n in names] for names in self._all_weights]

    def _direction_weights(self, layer, direction):
        suffix = "_reverse" if direction == 1 else ""
        get = lambda fmt: getattr(self, fmt.format(layer, suffix), None)  # noqa: E731
        return (get("weight_ih_l{}{}"), get("weight_hh_l{}{}"), get("bias_ih_l{}{}"),
                get("bias_hh_l{}{}"), get("weight_hr_l{}{}"))

    # -- argument handling (torch's checks and messages) --

    def _name(self):
        return {"RNN_TANH": "RNN", "RNN_RELU": "RNN"}.get(self.mode, self.mode)

    def check_input(self, input):
        w = self.weight_ih_l0
        if input.dtype != w.dtype and not _autocast_on():
            raise ValueError(f"RNN input dtype ({input.dtype}) does not match weight dtype "
                             f"({w.dtype}). Convert input: input.to({w.dtype}), or convert model: "
                             f"model.to({input.dtype})")
        if input.ndim != 3:
            raise RuntimeError(f"input must have 3 dimensions, got {input.ndim}")
        if self.input_size != input.shape[-1]:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {input.shape[-1]}")
        if input.shape[0 if not self.batch_first else 1] == 0:
            raise RuntimeError(f"Expected sequence length to be larger than 0 in {self._name()}")

    def _expected_hidden(self, x, features):  # x time-major [L, N, I]
        return (self.num_layers * (2 if self.bidirectional else 1), x.shape[1], features)

    @staticmethod
    def check_hidden_size(hx, expected, msg="Expected hidden size {}, got {}"):
        if tuple(hx.shape) != tuple(expected):
            raise RuntimeError(msg.format(tuple(expected), list(hx.shape)))

    def _prepare(self, input, hx, n_states):
        """Checks input and hx, makes both batched and time-major; returns (x [L, N, I], list of
        n_states initial states, each [layers * D, N, *] or None, is_batched)."""
        _reject_packed(input, self._name())
        if input.ndim not in (2, 3):
            raise ValueError(f"{self._name()}: Expected input to be 2D or 3D, got {input.ndim}D "
                             f"{'tensor instead' if self._name() == 'RNN' else 'instead'}")
        batched = input.ndim == 3
        states = None if hx is None else (list(hx) if n_states == 2 else [hx])
        if states is not None:
            dims = [s.ndim for s in states]
            want = 3 if batched else 2
            if any(d != want for d in dims):
                what = "hx and cx" if n_states == 2 else "hx"
                got = (f"({dims[0]}-D, {dims[1]}-D) tensors" if n_states == 2
                       else f"{dims[0]}-D tensor")
                kind = "batched 3-D" if batched else "unbatched 2-D"
                raise RuntimeError(f"For {kind} input, {what} should also be {want}-D but got "
                                   f"{got}")
        if not batched:
            input = input.unsqueeze(0 if self.batch_first else 1)
            if states is not None:
                states = [s.unsqueeze(1) for s in states]
        self.check_input(input)
        return (input.transpose(0, 1) if self.batch_first else input), states, batched

    def _finish(self, output, finals, batched):
        if self.batch_first:
            output = output.transpose(0, 1)
        if not batched:
            output = output.squeeze(0 if self.batch_first else 1)
            finals = [f.squeeze(1) for f in finals]
        return output, finals

    # -- the recurrence --

    @_one_graph
    def _run(self, x, h0, c0=None):
        """x: [L, N, I] time-major; h0 (and c0 for LSTM): [layers * D, N, *]. Returns the last
        layer's outputs [L, N, D * H_out] and the final states stacked as torch orders them
        (layer-major, forward direction before reverse)."""
        D = 2 if self.bidirectional else 1
        L = x.shape[0]
        h0s = h0.unbind(0)
        c0s = c0.unbind(0) if c0 is not None else None
        h_n, c_n = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outs = []
            for d in range(D):
                k = layer * D + d
                w_ih, w_hh, b_ih, b_hh, w_hr = self._direction_weights(layer, d)
                gis = F.linear(layer_input, w_ih, b_ih)  # all time steps in one matmul
                h = h0s[k]
                c = c0s[k] if c0s is not None else None
                if self.mode == "LSTM" and w_hr is None and not _autocast_on():
                    # The same steps traced from C++ (nn/recurrent.h): no interpreter work
                    # per op, most of an eager layer's cost.
                    y, h, c = _C._lstm_direction(gis, h, c, w_hh, b_hh, d == 1)
                    outs.append(y)
                    h_n.append(h)
                    c_n.append(c)
                    continue
                gis = gis.unbind(0)
                ys = [None] * L
                for t in (range(L - 1, -1, -1) if d == 1 else range(L)):
                    if self.mode == "LSTM":
                        h, c = _lstm_step(gis[t], h, c, w_hh, b_hh, w_hr)
                    elif self.mode == "GRU":
                        h = _gru_step(gis[t], h, w_hh, b_hh)
                    else:
                        h = _rnn_step(gis[t], h, w_hh, b_hh, self.mode == "RNN_RELU")
                    ys[t] = h
                outs.append(_C.stack(ys, 0))
                h_n.append(h)
                c_n.append(c)
            layer_input = outs[0] if D == 1 else _C.cat(outs, -1)
            if self.dropout > 0 and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)  # between layers only
        return layer_input, _C.stack(h_n, 0), (_C.stack(c_n, 0) if c0 is not None else None)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


class RNN(RNNBase):
    """Elman RNN: h_t = tanh|relu(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh). Positional order as
    torch: (input_size, hidden_size, num_layers, nonlinearity, bias, batch_first, dropout,
    bidirectional)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if len(args) > 3:
            self.nonlinearity = args[3]
            args = args[:3] + args[4:]
        else:
            self.nonlinearity = kwargs.pop("nonlinearity", "tanh")
        modes = {"tanh": "RNN_TANH", "relu": "RNN_RELU"}
        if self.nonlinearity not in modes:
            raise ValueError(f"Unknown nonlinearity '{self.nonlinearity}'. Select from 'tanh' or "
                             "'relu'.")
        super().__init__(modes[self.nonlinearity], *args, **kwargs)

    def forward(self, input, hx=None):
        x, states, batched = self._prepare(input, hx, 1)
        expected = self._expected_hidden(x, self.hidden_size)
        h0 = _zeros(expected, x) if states is None else states[0]
        self.check_hidden_size(h0, expected)
        out, h_n, _ = self._run(x, h0)
        out, (h_n,) = self._finish(out, [h_n], batched)
        return out, h_n


class LSTM(RNNBase):
    """LSTM with torch's gates (i, f, g, o) and optional projection (proj_size); returns
    (output, (h_n, c_n))."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", *args, **kwargs)

    def forward(self, input, hx=None):
        x, states, batched = self._prepare(input, hx, 2)
        real_hidden = self.proj_size if self.proj_size > 0 else self.hidden_size
        exp_h = self._expected_hidden(x, real_hidden)
        exp_c = self._expected_hidden(x, self.hidden_size)
        if states is None:
            states = [_zeros(exp_h, x), _zeros(exp_c, x)]
        self.check_hidden_size(states[0], exp_h, "Expected hidden[0] size {}, got {}")
        self.check_hidden_size(states[1], exp_c, "Expected hidden[1] size {}, got {}")
        out, h_n, c_n = self._run(x, states[0], states[1])
        out, (h_n, c_n) = self._finish(out, [h_n, c_n], batched)
        return out, (h_n, c_n)


class GRU(RNNBase):
    """GRU with torch's gates (r, z, n), b_hn inside r * (W_hn h + b_hn)."""

    def __init__(self, *args, **kwargs):
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", *args, **kwargs)

    forward = RNN.forward


# ---- cells ---------------------------------------------------------------------------------------

class RNNCellBase(Module):
    """weight_ih [chunks * hidden, input], weight_hh [chunks * hidden, hidden], bias_ih, bias_hh
    [chunks * hidden], all ~ U(-1/sqrt(hidden), 1/sqrt(hidden))."""

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        self.weight_ih = _new_param((num_chunks * hidden_size, input_size), device, dtype)
        self.weight_hh = _new_param((num_chunks * hidden_size, hidden_size), device, dtype)
        if bias:
            self.bias_ih = _new_param((num_chunks * hidden_size,), device, dtype)
            self.bias_hh = _new_param((num_chunks * hidden_size,), device, dtype)
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def _batched(self, input, states, what):
        """Checks ranks (torch's messages); returns (input [N, I], states [N, *] or None,
        is_batched)."""
        name = type(self).__name__
        if input.ndim not in (1, 2):
            raise ValueError(f"{name}: Expected input to be 1D or 2D, got {input.ndim}D instead")
        if states is not None:
            for label, s in zip(what, states):
                if s.ndim not in (1, 2):
                    raise ValueError(f"{name}: Expected {label} to be 1D or 2D, got {s.ndim}D "
                                     "instead")
        batched = input.ndim == 2
        if not batched:
            input = input.unsqueeze(0)
            if states is not None:
                states = [s.unsqueeze(0) for s in states]
        return input, states, batched

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)
        self.nonlinearity = nonlinearity

    @_one_graph
    def forward(self, input, hx=None):
        x, states, batched = self._batched(input, None if hx is None else [hx], ["hidden"])
        if self.nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {self.nonlinearity}")
        h = _zeros((x.shape[0], self.hidden_size), x) if states is None else states[0]
        h = _rnn_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh,
                      self.nonlinearity == "relu")
        return h if batched else h.squeeze(0)


class LSTMCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    @_one_graph
    def forward(self, input, hx=None):
        x, states, batched = self._batched(input, None if hx is None else list(hx),
                                           ["hx[0]", "hx[1]"])
        if states is None:
            zeros = _zeros((x.shape[0], self.hidden_size), x)
            states = [zeros, zeros]
        h, c = _lstm_step(F.linear(x, self.weight_ih, self.bias_ih), states[0], states[1],
                          self.weight_hh, self.bias_hh)
        return (h, c) if batched else (h.squeeze(0), c.squeeze(0))


class GRUCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    @_one_graph
    def forward(self, input, hx=None):
        x, states, batched = self._batched(input, None if hx is None else [hx], ["hidden"])
        h = _zeros((x.shape[0], self.hidden_size), x) if states is None else states[0]
        h = _gru_step(F.linear(x, self.weight_ih, self.bias_ih), h, self.weight_hh, self.bias_hh)
        return h if batched else h.squeeze(0)
