// Normalizes a loop kernel before code generation: checks its structure and merges adjacent loop
// dims that every index walks contiguously (a contiguous [N, M] elementwise kernel becomes one
// [N*M] loop), so the innermost loops are as long as possible.
#pragma once
#include <vector>

#include "ir/size_expr.h"
#include "lowering/loop_ir.h"

namespace lt::cpu {

// Throws lt::Error (Runtime for malformed kernels, NotImplemented for unsupported constructs).
void validate_kernel(const loop::Kernel& k);

// Returns an equivalent kernel with merged dims. Variables that a general (non-affine) index
// names are never merged; affine strides (and stride_params) are padded to one per loop variable.
//
// Symbolic kernels (loop::Kernel::symbolic): `params` is the plan's size parameter list
// (PlanSymbols::params). Dims merge when every affine index walks them contiguously at every
// binding, decided on the polynomials (stride[d] == stride[d+1] * extent[d+1]); the merged extent
// is the product of the two, which names an existing parameter equal to it or one appended to
// `params` (so callers evaluate the extended list per binding). Without `params`, no dim with a
// symbolic extent or stride merges.
loop::Kernel merge_dims(const loop::Kernel& k, std::vector<SizeExpr>* params = nullptr);

}  // namespace lt::cpu
