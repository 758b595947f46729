// The time loop of one direction of an LSTM layer, in C++. lazytensor.nn.LSTM unrolled it in
// Python, where each of a step's ~17 ops cost about a microsecond of interpreter work on top of
// its trace: on the eager device, where a layer's forward runs as one graph, that Python was most
// of the layer's cost (word_language_model's 2-layer LSTM over 8 steps: 0.48 ms a forward). The
// ops traced, and so the values, gradients and graphs, are the Python step's.
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace lt {

struct LstmRun {
  Tensor ys;    // [L, N, H]: h after each step, in time order
  Tensor h, c;  // [N, H]: the states after the last step taken
};

// gis: [L, N, 4H], the input projection x_t W_ih^T + b_ih of every step (torch's gate order i, f,
// g, o); h0, c0: [N, H]; w_hh [4H, H]; b_hh [4H] or undefined. `reverse` walks t = L-1 .. 0.
LstmRun lstm_direction(const Tensor& gis, Tensor h, Tensor c, const Tensor& w_hh,
                       const Tensor& b_hh, bool reverse);

}  // namespace lt
