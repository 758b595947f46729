// Range checks of the inline float32 sin/cos (llvm_ops.h) moved from the arguments to the loads
// they come from. A fused kernel's fast body must find out whether any sin/cos argument reached
// kInlineTrigLimit; folding each argument into a running maximum costs two vector instructions per
// sin and, worse, one register per interleaved vector for the whole loop (`x = x + sin(x)` x20 has
// 20 arguments per element and 8 vectors in flight on AVX2's 16 registers: the spills made its
// loop ~15% slower). When every argument is built from loads by operations whose result
// magnitudes can be bounded (+, -, *, max, where, sin, ...), the bound is a monotone function of
// the largest |load|, so tracking the loads (one per element there) against a threshold is
// equivalent.
#pragma once
#include <vector>

#include "lowering/loop_ir.h"

namespace lt::cpu {

struct TrigLoadBound {
  // Every sin/cos argument is bounded by the loads below; false: track the arguments.
  bool usable = false;
  // Every argument stays below kInlineTrigLimit while the tracked loads stay at or below this
  // magnitude (a float32, compared by its bits; NaN and inf loads exceed it).
  float max_load = 0;
  // Per stage and body instruction: a load that a sin/cos argument depends on.
  std::vector<std::vector<bool>> tracked;
};

// Bounds are computed in float64 with a margin for each operation's rounding; a value that may
// overflow its dtype (float16 past 65504, ...) counts as unbounded, so inf and NaN cannot appear
// inside a bounded argument's computation.
TrigLoadBound trig_load_bound(const loop::Kernel& k);

}  // namespace lt::cpu
