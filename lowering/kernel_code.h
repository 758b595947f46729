// The byte encoding of a loop kernel (ir/bytes.h), shared by the on-disk plan format
// (plan_serialize.cc) and by kernel identity: two kernels whose encodings are equal but for name
// and buffer ids (kernel_code) compile to the same code.
#pragma once
#include <string>

#include "ir/bytes.h"
#include "lowering/loop_ir.h"

namespace lt {

template <class Ints>  // Shape or std::vector<int64_t>
inline void put_shape(ByteWriter& w, const Ints& s) {
  w.u64(s.size());
  for (int64_t e : s) w.i64(e);
}

// Appends all of k: name, loop dims, args, index expressions, stages, in-place pairs.
void put_kernel(ByteWriter& w, const loop::Kernel& k);

// k's encoding without its name, with each argument's buffer id replaced by its position: equal
// codes mean equal generated code (backends compile one function for them).
std::string kernel_code(const loop::Kernel& k);

}  // namespace lt
