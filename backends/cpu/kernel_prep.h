// Normalizes a loop kernel before code generation: checks its structure and merges adjacent loop
// dims that every index walks contiguously (a contiguous [N, M] elementwise kernel becomes one
// [N*M] loop), so the innermost loops are as long as possible.
#pragma once
#include "lowering/loop_ir.h"

namespace lt::cpu {

// Throws lt::Error (Runtime for malformed kernels, NotImplemented for unsupported constructs).
void validate_kernel(const loop::Kernel& k);

// Returns an equivalent kernel with merged dims. Variables that a general (non-affine) index
// names are never merged; affine strides are padded to one per loop variable.
loop::Kernel merge_dims(const loop::Kernel& k);

}  // namespace lt::cpu
