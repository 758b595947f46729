// The reference interpreter's rule table, keyed by Op: elementwise ops from their scalar forms
// (ir/scalar_ops.h), one line per other primitive. Floating ops compute in double (the
// interpreter rounds to the node's dtype afterwards); integer ops compute in int64 with
// wrap-around. Semantics follow PyTorch.
#include <array>
#include <utility>

#include "backends/reference/kernels.h"
#include "backends/reference/reference_ops.h"

namespace lt {
namespace ref {
namespace {

constexpr size_t kNumOps = 0
#define LT_OP(N, name, arity, cls, prim, cost) +1
#include "ir/ops.def"
#undef LT_OP
    ;

// Every op with scalar forms (ir/scalar_ops.h: unary, binary, comparison and logical ops) runs
// them through elementwise<op>, so a new elementwise op needs no line here.
constexpr EvalFn kScalarRules[kNumOps] = {
#define LT_OP(N, name, arity, cls, prim, cost) scalar_eval<Op::N>(),
#include "ir/ops.def"
#undef LT_OP
};

// The ops whose meaning is more than a function of operand elements.
const std::pair<Op, EvalFn> kRules[] = {
    // Leaves and random numbers.
    {Op::Param, eval_param},
    {Op::Scalar, eval_scalar},
    {Op::Constant, eval_constant},
    {Op::Rand, eval_rand},
    {Op::Iota, eval_iota},
    // Selection and dtype conversion.
    {Op::Where, eval_where},
    {Op::Cast, eval_cast},
    // Reductions.
    {Op::ReduceSum, eval_reduce_sum},
    {Op::ReduceMax, eval_reduce_max},
    {Op::ReduceMin, eval_reduce_min},
    {Op::ReduceProd, eval_reduce_prod},
    // Movement.
    {Op::Reshape, eval_reshape},
    {Op::Permute, eval_permute},
    {Op::Expand, eval_expand},
    {Op::Slice, eval_slice},
    // Data-dependent indexing.
    {Op::Gather, eval_gather},
    {Op::ScatterAdd, eval_scatter_add},
    {Op::Conv2d, eval_conv2d},
    {Op::Conv2dGradInput, eval_conv2d_grad_input},
    {Op::Conv2dGradWeight, eval_conv2d_grad_weight},
    {Op::Attention, eval_attention},
    {Op::AttentionLse, eval_attention},
    {Op::AttentionGradQ, eval_attention_grad},
    {Op::AttentionGradK, eval_attention_grad},
    {Op::AttentionGradV, eval_attention_grad},
    {Op::AllReduce, eval_collective},
    {Op::Broadcast, eval_collective},
    {Op::AllGather, eval_collective},
    {Op::Concat, eval_concat},
};

const std::array<EvalFn, kNumOps>& table() {
  static const std::array<EvalFn, kNumOps> t = [] {
    std::array<EvalFn, kNumOps> r{};
    for (size_t k = 0; k < kNumOps; ++k) r[k] = kScalarRules[k];
    for (const auto& [op, fn] : kRules) r[static_cast<size_t>(op)] = fn;
    return r;
  }();
  return t;
}

}  // namespace

EvalFn reference_rule(Op op) {
  auto k = static_cast<size_t>(op);
  return k < kNumOps ? table()[k] : nullptr;
}

}  // namespace ref

bool reference_supports(Op op) { return ref::reference_rule(op) != nullptr; }

}  // namespace lt
