// The reference interpreter's rules. Elementwise rules are templates over the scalar function
// (instantiated once per op in reference_ops.cc, so the per-element call inlines); leaves,
// random numbers, reductions and movement are plain functions in kernels.cc.
#pragma once
#include <cstddef>
#include <type_traits>

#include "backends/reference/interp.h"

namespace lt::ref {

// Leaves and random numbers.
void eval_param(Ctx& c);
void eval_scalar(Ctx& c);
void eval_constant(Ctx& c);
void eval_rand(Ctx& c);
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
void eval_attention_grad(Ctx& c);
// Cast and logical_not (any dtype in; no scalar function to plug in).
void eval_cast(Ctx& c);
void eval_not(Ctx& c);

[[noreturn]] void wrong_dtype(const Ctx& c, const Value& operand);

// Integer arithmetic wraps (two's complement) instead of overflowing: computed in uint64, the
// interpreter then wraps the result to the node's width.
inline int64_t wrap_add(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
}
inline int64_t wrap_sub(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) - static_cast<uint64_t>(b));
}
inline int64_t wrap_mul(int64_t a, int64_t b) {
  return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
}

// Marks a rule as having no integer form (the op's shape rule only admits floating dtypes).
inline constexpr std::nullptr_t kFloatOnly = nullptr;
// Marks a binary rule as having no floating form (bitwise ops, shifts).
inline constexpr std::nullptr_t kIntOnly = nullptr;

// Unary: FF on doubles, FI on int64 (or kFloatOnly). Operand and result share a shape.
template <auto FF, auto FI = kFloatOnly>
void unary(Ctx& c) {
  const Value& a = *c.in[0];
  if (a.floating()) {
    c.out.f.resize(a.f.size());
    for (size_t k = 0; k < a.f.size(); ++k) c.out.f[k] = FF(a.f[k]);
  } else if constexpr (!std::is_null_pointer_v<decltype(FI)>) {
    c.out.i.resize(a.i.size());
    for (size_t k = 0; k < a.i.size(); ++k) c.out.i[k] = FI(a.i[k]);
  } else {
    wrong_dtype(c, a);
  }
}

// Binary with broadcasting. kBool: the result is bool (comparisons, logical ops) whatever the
// operands' dtype, else it has the operands' dtype. F is generic over double and int64 unless FI
// is given for integers; FF = kIntOnly: no floating form.
template <bool kBool, auto FF, auto FI>
void binary(Ctx& c) {
  const Value &a = *c.in[0], &b = *c.in[1];
  const Strides sa = broadcast_strides(a.shape, c.out.shape), sb = broadcast_strides(b.shape, c.out.shape);
  const int64_t n = numel(c.out.shape);
  auto run = [&](const auto& av, const auto& bv, auto& ov, auto fn) {
    ov.resize(static_cast<size_t>(n));
    strided_loop<2>(c.out.shape, {&sa, &sb},
                    [&](int64_t o, const std::array<int64_t, 2>& off) { ov[o] = fn(av[off[0]], bv[off[1]]); });
  };
  if (a.floating() != b.floating()) wrong_dtype(c, b);
  if (a.floating()) {
    if constexpr (std::is_null_pointer_v<decltype(FF)>) wrong_dtype(c, a);
    else if constexpr (kBool) run(a.f, b.f, c.out.i, FF);
    else run(a.f, b.f, c.out.f, FF);
  } else if constexpr (!std::is_null_pointer_v<decltype(FI)>) {
    run(a.i, b.i, c.out.i, FI);
  } else {
    wrong_dtype(c, a);
  }
}

template <auto F>
void arith(Ctx& c) { binary<false, F, F>(c); }
template <auto FF, auto FI>
void arith2(Ctx& c) { binary<false, FF, FI>(c); }
template <auto FF>
void arith_float(Ctx& c) { binary<false, FF, kFloatOnly>(c); }
template <auto FI>
void arith_int(Ctx& c) { binary<false, kIntOnly, FI>(c); }
template <auto F>
void predicate(Ctx& c) { binary<true, F, F>(c); }

// where(cond, a, b) with broadcasting of all three.
void eval_where(Ctx& c);

}  // namespace lt::ref
