#include "nn/recurrent.h"

#include "ir/error.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"

namespace lt {

LstmRun lstm_direction(const Tensor& gis, Tensor h, Tensor c, const Tensor& w_hh,
                       const Tensor& b_hh, bool reverse) {
  if (gis.dim() != 3 || w_hh.dim() != 2 || gis.size(2) != w_hh.size(0) ||
      w_hh.size(0) != 4 * w_hh.size(1))
    fail(ErrorKind::Runtime, "lstm: gates of shape ", shape_str(gis.shape()),
         " do not match w_hh of shape ", shape_str(w_hh.shape()),
         " (expected [L, N, 4H], [4H, H])");
  const int64_t L = gis.size(0);
  // Transposed once for every step (the Python loop's F.linear transposed it per step).
  const Tensor w_t = w_hh.transpose(0, 1);
  std::vector<Tensor> ys(static_cast<size_t>(L));
  for (int64_t k = 0; k < L; ++k) {
    const int64_t t = reverse ? L - 1 - k : k;
    Tensor hh = matmul(h, w_t);
    if (b_hh.defined()) hh = hh + b_hh;
    const std::vector<Tensor> gates = chunk(select(gis, 0, t) + hh, 4, -1);  // i, f, g, o
    c = gates[1].sigmoid() * c + gates[0].sigmoid() * gates[2].tanh();
    h = gates[3].sigmoid() * c.tanh();
    ys[static_cast<size_t>(t)] = h;
  }
  return {stack(ys, 0), h, c};
}

}  // namespace lt
