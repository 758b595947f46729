// The op registry. Every op is declared once in ir/ops.def; each pipeline stage keeps its own
// rule table keyed by Op, and tests/cpp/registry_test.cc fails when a stage lacks a rule.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "ir/dtype.h"

namespace lt {

enum class Op : uint8_t {
#define LT_OP(N, name, arity, cls, prim) N,
#include "ir/ops.def"
#undef LT_OP
};

enum class OpClass : uint8_t {
  Leaf, Rand, Unary, Predicate1, Binary, Compare, Logical, Where, Cast, Reduce, Reshape, Permute,
  Expand, Matmul, AxisUnary, LayerNorm, Slice, Gather, ScatterAdd, Conv, Attention
};

struct OpInfo {
  Op op;
  std::string_view name;
  int arity;
  OpClass cls;
  bool primitive;
};

// The table itself, constexpr and inline: op_info() is read several times per traced op, and a
// function-local static behind a call cost ~3% of the per-op tracing time.
inline constexpr OpInfo kOpTable[] = {
#define LT_OP(N, name, arity, cls, prim) {Op::N, name, arity, OpClass::cls, prim},
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
  return c == OpClass::Reshape || c == OpClass::Permute || c == OpClass::Expand || c == OpClass::Slice;
}

}  // namespace lt
