// Buffer donation: which graph outputs may be written into the memory of a graph input, so an
// optimizer step updates its parameters and their state (momentum, Adam's moments) in the buffers
// it read them from, with no new allocation and no copy (XLA's buffer donation; what PyTorch's
// foreach/fused optimizers do by writing in place).
//
// Lowering finds where this is possible from the plan alone: an output O may take input I's
// buffer when both have one dtype and size, O is written by one loop kernel K (once per element:
// its store index is a permutation of O's elements), every read of I in K is in the stage that
// writes O at exactly O's index (so each element is read before it is overwritten, by the same
// iteration, whatever the thread split), and no step after K reads I. Reads of I in earlier
// steps (the forward and backward passes reading a weight) are fine: they have finished.
//
// Whether a candidate is used is decided at each run by the runtime (runtime/donation.h): only
// when nothing else can see I's memory afterwards. So K's code must be correct both ways: each
// pair is recorded on K (loop::Kernel::inplace) and code generators drop their no-alias promises
// for it.
#pragma once
#include <vector>

#include "lowering/plan.h"

namespace lt {

// True when kernel k reads arg `in` only in the stage that stores arg `out`, at the index of that
// store, and stores `out` exactly once per element (and never reads it): writing `out` into
// `in`'s memory then computes the same values.
bool same_index_update(const loop::Kernel& k, int in, int out);

// Moves each kernel whose outputs no later step reads (a graph output only: an optimizer's update
// p' = p - lr * u) to just after the last other step that reads one of its input buffers, when
// that step comes later. Such a kernel may run any time after its operands exist, and until the
// readers of p are done p cannot take p': a convolution's backward-data step reads its weight
// after the weight's gradient, and so its update, is ready. Without the move p' went to another
// input's memory (the momentum buffer's), the parameters' addresses changed every step, and a
// CUDA graph captured every convolution again at each replay (ResNet-18, H200). find_donations
// calls it first.
void defer_updates_past_readers(Plan& plan);

// Fills plan.donations and each kernel's `inplace` pairs. An input goes to at most one output and
// an output takes at most one input; where several pairings are possible the input closest to
// the output in the prim graph wins (p' = p - lr*u takes p, not Adam's moment that u reads), so
// a parameter keeps its own memory. Deterministic: the same plan gives the same candidates.
void find_donations(Plan& plan);

}  // namespace lt
