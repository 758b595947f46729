// The reference interpreter's rules. Elementwise rules are templates over an op's scalar forms
// (ir/scalar_ops.h; instantiated once per op in reference_ops.cc, so the per-element call
// inlines); leaves, random numbers, reductions and movement are plain functions in kernels.cc.
#pragma once
#include <cstddef>
#include <type_traits>

#include "backends/reference/interp.h"
#include "ir/scalar_ops.h"

namespace lt::ref {

// Leaves and random numbers.
void eval_param(Ctx& c);
void eval_scalar(Ctx& c);
void eval_constant(Ctx& c);
void eval_rand(Ctx& c);
void eval_iota(Ctx& c);
// Reductions over attrs.ints (negative axes allowed; keepdim only changes the shape).
void eval_reduce_sum(Ctx& c);
void eval_reduce_prod(Ctx& c);
void eval_reduce_max(Ctx& c);
void eval_reduce_min(Ctx& c);
// Movement.
void eval_reshape(Ctx& c);
void eval_permute(Ctx& c);
void eval_expand(Ctx& c);
void eval_slice(Ctx& c);
// Data-dependent indexing (out-of-range index values read 0 / add nothing).
void eval_gather(Ctx& c);
void eval_scatter_add(Ctx& c);
// Convolution (conv_kernels.cc): NCHW x OIHW, double accumulation.
void eval_conv2d(Ctx& c);
void eval_conv2d_grad_input(Ctx& c);
void eval_conv2d_grad_weight(Ctx& c);
// Attention (attention_kernels.cc): attention and attention_lse; the three gradients.
void eval_attention(Ctx& c);
// collective_kernels.cc: all_reduce, broadcast and all_gather through the default process group.
void eval_collective(Ctx& c);
void eval_concat(Ctx& c);
void eval_attention_grad(Ctx& c);
// Cast (any dtype in; its meaning is the dtype conversion, not a scalar function).
void eval_cast(Ctx& c);

[[noreturn]] void wrong_dtype(const Ctx& c, const Value& operand);

// Elementwise ops from their scalar forms (ir/scalar_ops.h), instantiated once per op through
// elementwise<op> so the per-element call inlines. A missing form (the op's shape rule rejects such
// operands) is an error if reached.

// Unary: FF on doubles, FI on int64, FB on bool where it differs from FI. Operand and result share
// a shape (and, but for predicates, a dtype).
// HF, HI, HB: whether FF, FI, FB are there (scalar_ops.h Form says why not a null test).
template <auto FF, auto FI, auto FB, bool HF, bool HI, bool HB>
void unary(Ctx& c) {
  const Value& a = *c.in[0];
  auto run = [&](const auto& av, auto& ov, auto fn) {
    ov.resize(av.size());
    for (size_t k = 0; k < av.size(); ++k) ov[k] = fn(av[k]);
  };
  if (a.floating()) {
    if constexpr (!HF)
      wrong_dtype(c, a);
    else if constexpr (std::is_same_v<decltype(FF(0.0)), bool>)
      run(a.f, c.out.i, FF);  // predicate
    else
      run(a.f, c.out.f, FF);
  } else if constexpr (HB) {
    run(a.i, c.out.i, a.dtype == DType::Bool ? FB : FI);
  } else if constexpr (HI) {
    run(a.i, c.out.i, FI);
  } else {
    wrong_dtype(c, a);
  }
}

// Binary with broadcasting. Floating operands and results live in .f, integer ones and every
// predicate's bool result in .i.
template <auto FF, auto FI, bool HF, bool HI>
void binary(Ctx& c) {
  const Value &a = *c.in[0], &b = *c.in[1];
  const Strides sa = broadcast_strides(a.shape, c.out.shape),
                sb = broadcast_strides(b.shape, c.out.shape);
  const int64_t n = numel(c.out.shape);
  auto run = [&](const auto& av, const auto& bv, auto& ov, auto fn) {
    ov.resize(static_cast<size_t>(n));
    strided_loop<2>(c.out.shape, {&sa, &sb}, [&](int64_t o, const std::array<int64_t, 2>& off) {
      ov[o] = fn(av[off[0]], bv[off[1]]);
    });
  };
  if (a.floating() != b.floating()) wrong_dtype(c, b);
  if (a.floating()) {
    if constexpr (!HF)
      wrong_dtype(c, a);
    else if constexpr (std::is_same_v<decltype(FF(0.0, 0.0)), bool>)
      run(a.f, b.f, c.out.i, FF);  // predicate
    else
      run(a.f, b.f, c.out.f, FF);
  } else if constexpr (HI) {
    run(a.i, b.i, c.out.i, FI);
  } else {
    wrong_dtype(c, a);
  }
}

template <Op kOp>
void elementwise(Ctx& c) {
  constexpr ScalarRule r = scalar_rule(kOp);
  if constexpr (r.f1.set || r.i1.set)
    unary<r.f1.fn, r.i1.fn, r.b1.fn, r.f1.set, r.i1.set, r.b1.set>(c);
  else if constexpr (r.pf1.set || r.pi1.set)
    unary<r.pf1.fn, r.pi1.fn, nullptr, r.pf1.set, r.pi1.set, false>(c);
  else if constexpr (r.f2.set || r.i2.set)
    binary<r.f2.fn, r.i2.fn, r.f2.set, r.i2.set>(c);
  else
    binary<r.pf2.fn, r.pi2.fn, r.pf2.set, r.pi2.set>(c);
}

// The reference rule of an op with scalar forms; nullptr for the others (and no instantiation).
template <Op kOp>
constexpr EvalFn scalar_eval() {
  if constexpr (scalar_rule(kOp).empty())
    return nullptr;
  else
    return &elementwise<kOp>;
}

// where(cond, a, b) with broadcasting of all three.
void eval_where(Ctx& c);

}  // namespace lt::ref
