// The op registry. Every op is declared once in ir/ops.def, with the facts several stages read
// (arity, class, primitive, cost tier); an elementwise op's scalar meaning is ir/scalar_ops.h,
// which constant folding and the reference interpreter share. Each other stage keeps its own rule
// table keyed by Op, and tests/cpp/registry_test.cc fails when a stage lacks a rule.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/dtype.h"

namespace lt {

enum class Op : uint8_t {
#define LT_OP(N, name, arity, cls, prim, cost) N,
#include "ir/ops.def"
#undef LT_OP
};

enum class OpClass : uint8_t {
  Leaf,
  Rand,
  Unary,
  Predicate1,
  Binary,
  Compare,
  Logical,
  Where,
  Cast,
  Reduce,
  Reshape,
  Permute,
  Expand,
  Matmul,
  AxisUnary,
  LayerNorm,
  Slice,
  Gather,
  ScatterAdd,
  Conv,
  Attention,
  Collective,
  Concat
};

// The work of one element of an op inside a kernel, in tiers ordered by cost. Three heuristics
// weigh ops, and each cuts this one order in a different place (so the ops are sorted once, here,
// and each reader keeps its own cut, with its reason, beside its use):
//  - fusion's recompute budget (lowering/kernel_builder.cc, inline_cost): from Divide up, an op
//    costs several cheap ones on a CPU core;
//  - the CUDA generator's vector-width choice (backends/cuda, cuda_point_cost): Divide is about
//    one instruction on a GPU, DivideLoop and Transcendental are math-library calls, Trig adds
//    a range reduction;
//  - the CPU's row reuse (backends/cpu/row_reuse.cc): only a Transcendental or Trig value is
//    worth keeping in a scratch row instead of computing it again.
enum class OpCost : uint8_t {
  Cheap,           // one ALU instruction or a few (add, compare, select, cast, ...)
  Divide,          // division or square root (div, reciprocal, sqrt)
  DivideLoop,      // a helper around fmod or a 64-bit division (floor_divide, remainder, fmod)
  Transcendental,  // a math-library function (exp, log, tanh, erf, pow)
  Trig,            // sin and cos: a transcendental with an argument range reduction first
};

struct OpInfo {
  Op op;
  std::string_view name;
  int arity;
  OpClass cls;
  bool primitive;
  OpCost cost;
};

// The table itself, constexpr and inline: op_info() is read several times per traced op, and a
// function-local static behind a call cost ~3% of the per-op tracing time.
inline constexpr OpInfo kOpTable[] = {
#define LT_OP(N, name, arity, cls, prim, cost) \
  {Op::N, name, arity, OpClass::cls, prim, OpCost::cost},
#include "ir/ops.def"
#undef LT_OP
};
inline const OpInfo& op_info(Op op) { return kOpTable[static_cast<size_t>(op)]; }
const std::vector<OpInfo>& all_ops();
// Looks an op up by its name; returns false when unknown.
bool op_from_name(std::string_view name, Op* out);
inline std::string_view op_name(Op op) { return op_info(op).name; }

inline bool is_elementwise(OpClass c) {
  return c == OpClass::Unary || c == OpClass::Predicate1 || c == OpClass::Binary ||
         c == OpClass::Compare || c == OpClass::Logical || c == OpClass::Where ||
         c == OpClass::Cast || c == OpClass::Rand;
}
inline bool is_movement(OpClass c) {
  return c == OpClass::Reshape || c == OpClass::Permute || c == OpClass::Expand ||
         c == OpClass::Slice;
}

}  // namespace lt
