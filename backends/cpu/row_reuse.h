// Row reuse: a costly value that a Reduce stage and the last (MapInner) stage of a row kernel both
// compute at each inner point of the row. Softmax's exp(x - max) is summed by its second stage and
// computed again to scale by 1 / sum in its output stage: two exps per element, which bound the
// kernel. The code generator (codegen.cc) then has the Reduce stage also keep the value in a
// row-sized scratch array (L1, private to the kernel body), and the last stage load it instead of
// computing it again: softmax 2048 x 2048 2.5 -> 2.0 ms on the development machine.
#pragma once
#include <cstdint>

#include "lowering/loop_ir.h"

namespace lt::cpu {

struct RowReuse {
  int stage = -1;  // the Reduce stage that computes the value first (-1: no reuse)
  int src = -1;    // the value's instruction in that stage's body
  int dst = -1;    // the same value's instruction in the last stage's body
};

// The largest costly value (a Transcendental or Trig op of ir/ops.h in its subtree) of the last
// stage that an earlier Reduce stage computes too, for rows of at most max_row elements.
// any_row: whatever the row's length (a symbolic row, whose length is known at run time only:
// the code generator then checks it against max_row per call).
RowReuse find_row_reuse(const loop::Kernel& k, int64_t max_row, bool any_row = false);

}  // namespace lt::cpu
