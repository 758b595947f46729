// The int64 size fields of library steps and buffers in one fixed order, for symbolic sizes
// (issue 30): generalize_plan (lowering/generalize.h) finds which of them change with the size
// symbols and records them as (ordinal, size parameter) pairs (StepSizeParams); an executable
// instantiates a step for one binding with with_sizes. Loop kernels carry their size parameters
// in their own fields (lowering/loop_ir.h) instead, because code generators read them there.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "ir/error.h"
#include "lowering/plan.h"

namespace lt {

template <class F>
void for_each_size_field(Gemm& g, F&& f) {
  for (int64_t* v :
       {&g.M, &g.N, &g.K, &g.a_offset, &g.a_rs, &g.a_cs, &g.b_offset, &g.b_rs, &g.b_cs})
    f(*v);
  for (auto* list : {&g.batch, &g.a_batch_stride, &g.b_batch_stride})
    for (int64_t& v : *list) f(v);
}

template <class F>
void for_each_size_field(ConvStep& c, F&& f) {
  for (auto* s : {&c.x, &c.w, &c.y})
    for (int64_t& v : *s) f(v);
}

template <class F>
void for_each_size_field(AttentionStep& a, F&& f) {
  for (int64_t* v : {&a.batch, &a.L, &a.S, &a.E, &a.Ev}) f(*v);
}

// The step with its symbolic fields set from the parameter values `values` (PlanSymbols::values).
template <class Step>
Step with_sizes(Step s, const StepSizeParams& params, std::span<const int64_t> values) {
  if (params.empty()) return s;
  int ordinal = 0;
  size_t next = 0;
  for_each_size_field(s, [&](int64_t& v) {
    if (next < params.size() && params[next].first == ordinal) {
      v = values[static_cast<size_t>(params[next].second)];
      ++next;
    }
    ++ordinal;
  });
  LT_CHECK(next == params.size(), ErrorKind::Runtime,
           "internal: a step's size parameters name fields it does not have");
  return s;
}

// Checks that every size parameter the kernel names (loop_ir.h's `*param` fields) is one of the
// plan's `nparams` and that per-dim and per-stride lists have their dims' lengths; throws
// lt::Error.
void validate_kernel_params(const loop::Kernel& k, size_t nparams);

// Checks a plan's size parameters before a backend compiles it: a static plan names none; a
// symbolic plan's buffers, kernels and library steps name only its own, and its step tables have
// one entry per step. Throws lt::Error (a damaged or hand-built plan).
void validate_size_params(const Plan& plan);

// Plan buffer b's element count for the parameter values `values`.
inline int64_t numel_at(const BufferSpec& b, std::span<const int64_t> values) {
  return b.numel_param >= 0 ? values[static_cast<size_t>(b.numel_param)] : b.numel;
}

}  // namespace lt
