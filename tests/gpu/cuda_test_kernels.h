// Hand-built loop-IR plans shared by the CUDA tests: tests/cpp/cuda_codegen_test.cc compiles them
// with NVRTC (CI, no GPU) and tests/gpu/cuda_backend_gpu_test.cc runs them on a GPU and compares
// with host computations. Each builder documents what its plan computes.
#pragma once
#include <string>
#include <utility>
#include <vector>

#include "lowering/complete_plan.h"
#include "lowering/plan.h"

namespace lt::cudatest {

using loop::IKind;
using loop::Instr;
using loop::Stage;
using loop::StageKind;

inline loop::Index aff(int64_t offset, std::vector<int64_t> strides) {
  loop::Index ix;
  ix.offset = offset;
  ix.strides = std::move(strides);
  return ix;
}
inline loop::Index gen(int root, size_t nvars) {
  loop::Index ix;
  ix.strides.assign(nvars, 0);
  ix.general = root;
  return ix;
}
inline Instr load(DType t, int arg, loop::Index ix) {
  Instr in{IKind::Load, Op::Add, t};
  in.arg = arg;
  in.index = std::move(ix);
  return in;
}
inline Instr load_scalar(DType t, int arg) {
  Instr in{IKind::LoadScalar, Op::Add, t};
  in.arg = arg;
  return in;
}
inline Instr cnst(DType t, double v) {
  Instr in{IKind::Const, Op::Add, t};
  in.value = v;
  return in;
}
inline Instr op(Op o, DType t, int a, int b = -1, int c = -1) {
  return Instr{IKind::Op, o, t, a, b, c};
}
inline Instr reduce_result(DType t, int stage) {
  Instr in{IKind::ReduceResult, Op::Add, t};
  in.arg = stage;
  return in;
}
inline Instr rand_instr(DType t, int seed, int offset, loop::Index counter, int64_t stream) {
  Instr in{IKind::RandUniform, Op::Rand, t, seed, offset};
  in.index = std::move(counter);
  in.stream = stream;
  return in;
}

// Appends to a stage body and returns the instruction's id.
inline int push(Stage& s, Instr in) {
  s.body.push_back(std::move(in));
  return static_cast<int>(s.body.size()) - 1;
}
// Appends a cast of value v to t (or returns v when it already has t).
inline int cast_to(Stage& s, int v, DType t) {
  if (s.body[static_cast<size_t>(v)].dtype == t) return v;
  return push(s, op(Op::Cast, t, v));
}

// Buffers of a plan: graph inputs (and scalars) get consecutive input numbers.
struct PlanBuilder {
  Plan plan;
  int inputs = 0;
  int input(DType t, int64_t n) {
    plan.buffers.push_back({BufferSpec::Kind::Input, t, n, inputs++});
    return static_cast<int>(plan.buffers.size()) - 1;
  }
  int scalar(DType t) {
    plan.buffers.push_back({BufferSpec::Kind::Scalar, t, 1, inputs++});
    return static_cast<int>(plan.buffers.size()) - 1;
  }
  int output(DType t, int64_t n) {
    plan.buffers.push_back({BufferSpec::Kind::Output, t, n});
    plan.output_buffers.push_back(static_cast<int>(plan.buffers.size()) - 1);
    plan.output_shapes.push_back({n});
    return static_cast<int>(plan.buffers.size()) - 1;
  }
  int temp(DType t, int64_t n) {
    plan.buffers.push_back({BufferSpec::Kind::Temp, t, n});
    return static_cast<int>(plan.buffers.size()) - 1;
  }
  // Adds buffer b as an argument of kernel k; returns the argument number.
  int arg(loop::Kernel& k, int b, bool out = false) {
    const BufferSpec& s = plan.buffers[static_cast<size_t>(b)];
    k.args.push_back({b, s.dtype, s.numel, s.kind == BufferSpec::Kind::Scalar, out});
    return static_cast<int>(k.args.size()) - 1;
  }
};

// out[n, m] = x[n, m] + b[m] (float32): a broadcast; x and out are flat (vectorizable).
inline Plan bias_add(int64_t n, int64_t m) {
  PlanBuilder pb;
  int x = pb.input(DType::Float32, n * m), b = pb.input(DType::Float32, m),
      o = pb.output(DType::Float32, n * m);
  loop::Kernel k;
  k.name = "bias_add";
  k.outer = {n, m};
  int ax = pb.arg(k, x), ab = pb.arg(k, b), ao = pb.arg(k, o, true);
  Stage s{StageKind::MapOuter};
  int lx = push(s, load(DType::Float32, ax, aff(0, {m, 1})));
  int lb = push(s, load(DType::Float32, ab, aff(0, {0, 1})));
  int v = push(s, op(Op::Add, DType::Float32, lx, lb));
  s.stores.push_back({ao, aff(0, {m, 1}), v});
  k.stages.push_back(std::move(s));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// out[i] = sin(x[i]) * 2.5 + x[i] in dtype t (float64 has no vector path; the others do).
inline Plan scale_1d(int64_t n, DType t) {
  PlanBuilder pb;
  int x = pb.input(t, n), o = pb.output(t, n);
  loop::Kernel k;
  k.name = "scale_" + std::string(dtype_name(t));
  k.outer = {n};
  int ax = pb.arg(k, x), ao = pb.arg(k, o, true);
  Stage s{StageKind::MapOuter};
  int lx = push(s, load(t, ax, aff(0, {1})));
  int sn = push(s, op(Op::Sin, t, lx));
  int c = push(s, cnst(t, 2.5));
  int m = push(s, op(Op::Mul, t, sn, c));
  int v = push(s, op(Op::Add, t, m, lx));
  s.stores.push_back({ao, aff(0, {1}), v});
  k.stages.push_back(std::move(s));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// out[f] = x[(f % r) * c + f / r] for f < r*c: the [r, c] float32 x transposed to [c, r] and
// flattened, through a general (div/mod) index.
inline Plan transpose_general(int64_t r, int64_t c) {
  PlanBuilder pb;
  int x = pb.input(DType::Float32, r * c), o = pb.output(DType::Float32, r * c);
  loop::Kernel k;
  k.name = "transpose";
  k.outer = {r * c};
  using K = loop::IExpr::Kind;
  k.iexprs = {{K::Var, 0},       {K::Const, r},          {K::Mod, 0, 0, 1}, {K::Const, c},
              {K::Mul, 0, 2, 3}, {K::FloorDiv, 0, 0, 1}, {K::Add, 0, 4, 5}};
  int ax = pb.arg(k, x), ao = pb.arg(k, o, true);
  Stage s{StageKind::MapOuter};
  int lx = push(s, load(DType::Float32, ax, gen(6, 1)));
  s.stores.push_back({ao, aff(0, {1}), lx});
  k.stages.push_back(std::move(s));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// y[i] = reduce_{j} (x[i, j] * 2) + s for x[n, m] of dtype t (accumulated in acc = float32 for
// 16-bit floats), s a float32 runtime scalar; y has dtype t.
inline Plan row_reduce(int64_t n, int64_t m, Op rop, DType t = DType::Float32) {
  PlanBuilder pb;
  int x = pb.input(t, n * m), sc = pb.scalar(DType::Float32), y = pb.output(t, n);
  DType acc = (t == DType::Float16 || t == DType::BFloat16) ? DType::Float32 : t;
  loop::Kernel k;
  k.name = "row_" + std::string(op_name(rop));
  k.outer = {n};
  k.inner = {m};
  int ax = pb.arg(k, x), as = pb.arg(k, sc), ay = pb.arg(k, y, true);
  Stage r{StageKind::Reduce};
  r.reduce_op = rop;
  r.acc_dtype = acc;
  int lx = push(r, load(t, ax, aff(0, {m, 1})));
  int two = push(r, cnst(t, 2));
  int v = push(r, op(Op::Mul, t, lx, two));
  r.reduce_value = cast_to(r, v, acc);
  Stage e{StageKind::MapOuter};
  int rr = push(e, reduce_result(acc, 0));
  int ls = push(e, load_scalar(DType::Float32, as));
  int lsa = cast_to(e, ls, acc);
  int sum = push(e, op(Op::Add, acc, rr, lsa));
  int out = cast_to(e, sum, t);
  e.stores.push_back({ay, aff(0, {1, 0}), out});
  k.stages.push_back(std::move(r));
  k.stages.push_back(std::move(e));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// y[j] = sum_i x[i, j] for float32 x[n, m]: a reduction down columns.
inline Plan column_sum(int64_t n, int64_t m) {
  PlanBuilder pb;
  int x = pb.input(DType::Float32, n * m), y = pb.output(DType::Float32, m);
  loop::Kernel k;
  k.name = "column_sum";
  k.outer = {m};
  k.inner = {n};
  int ax = pb.arg(k, x), ay = pb.arg(k, y, true);
  Stage r{StageKind::Reduce};
  r.reduce_op = Op::ReduceSum;
  r.reduce_value = push(r, load(DType::Float32, ax, aff(0, {1, m})));
  Stage e{StageKind::MapOuter};
  int rr = push(e, reduce_result(DType::Float32, 0));
  e.stores.push_back({ay, aff(0, {1, 0}), rr});
  k.stages.push_back(std::move(r));
  k.stages.push_back(std::move(e));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// y = softmax(x, dim=1) for x[n, m] of dtype t, in one 3-stage row kernel: max, sum of exp, store.
inline Plan softmax_rows(int64_t n, int64_t m, DType t = DType::Float32) {
  PlanBuilder pb;
  int x = pb.input(t, n * m), y = pb.output(t, n * m);
  DType acc = DType::Float32;
  loop::Kernel k;
  k.name = "softmax";
  k.outer = {n};
  k.inner = {m};
  int ax = pb.arg(k, x), ay = pb.arg(k, y, true);
  Stage s0{StageKind::Reduce};
  s0.reduce_op = Op::ReduceMax;
  s0.reduce_value = cast_to(s0, push(s0, load(t, ax, aff(0, {m, 1}))), acc);
  Stage s1{StageKind::Reduce};
  s1.reduce_op = Op::ReduceSum;
  {
    int l = cast_to(s1, push(s1, load(t, ax, aff(0, {m, 1}))), acc);
    int mx = push(s1, reduce_result(acc, 0));
    int d = push(s1, op(Op::Sub, acc, l, mx));
    s1.reduce_value = push(s1, op(Op::Exp, acc, d));
  }
  Stage s2{StageKind::MapInner};
  {
    int l = cast_to(s2, push(s2, load(t, ax, aff(0, {m, 1}))), acc);
    int mx = push(s2, reduce_result(acc, 0));
    int d = push(s2, op(Op::Sub, acc, l, mx));
    int e = push(s2, op(Op::Exp, acc, d));
    int sum = push(s2, reduce_result(acc, 1));
    int q = push(s2, op(Op::Div, acc, e, sum));
    s2.stores.push_back({ay, aff(0, {m, 1}), cast_to(s2, q, t)});
  }
  k.stages.push_back(std::move(s0));
  k.stages.push_back(std::move(s1));
  k.stages.push_back(std::move(s2));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// y = layer_norm(x) over rows of float32 x[n, m] (no affine, eps 1e-5) as two kernels through a
// temp: mean_and_rstd writes t[i] = mean, t[n + i] = rstd; normalize reads them.
inline Plan layer_norm_two_kernels(int64_t n, int64_t m) {
  PlanBuilder pb;
  int x = pb.input(DType::Float32, n * m), t = pb.temp(DType::Float32, 2 * n),
      y = pb.output(DType::Float32, n * m);
  const DType F = DType::Float32;
  loop::Kernel k1;
  k1.name = "mean_rstd";
  k1.outer = {n};
  k1.inner = {m};
  int ax = pb.arg(k1, x), at = pb.arg(k1, t, true);
  Stage s0{StageKind::Reduce};
  s0.reduce_value = push(s0, load(F, ax, aff(0, {m, 1})));
  Stage s1{StageKind::Reduce};
  {
    int l = push(s1, load(F, ax, aff(0, {m, 1})));
    int sum = push(s1, reduce_result(F, 0));
    int inv = push(s1, cnst(F, 1.0 / static_cast<double>(m)));
    int mean = push(s1, op(Op::Mul, F, sum, inv));
    int d = push(s1, op(Op::Sub, F, l, mean));
    s1.reduce_value = push(s1, op(Op::Mul, F, d, d));
  }
  Stage s2{StageKind::MapOuter};
  {
    int sum = push(s2, reduce_result(F, 0));
    int inv = push(s2, cnst(F, 1.0 / static_cast<double>(m)));
    int mean = push(s2, op(Op::Mul, F, sum, inv));
    int sq = push(s2, reduce_result(F, 1));
    int var = push(s2, op(Op::Mul, F, sq, inv));
    int eps = push(s2, cnst(F, 1e-5));
    int ve = push(s2, op(Op::Add, F, var, eps));
    int sd = push(s2, op(Op::Sqrt, F, ve));
    int rstd = push(s2, op(Op::Recip, F, sd));
    s2.stores.push_back({at, aff(0, {1, 0}), mean});
    s2.stores.push_back({at, aff(n, {1, 0}), rstd});
  }
  k1.stages = {std::move(s0), std::move(s1), std::move(s2)};
  loop::Kernel k2;
  k2.name = "normalize";
  k2.outer = {n, m};
  int bx = pb.arg(k2, x), bt = pb.arg(k2, t), by = pb.arg(k2, y, true);
  Stage s{StageKind::MapOuter};
  int l = push(s, load(F, bx, aff(0, {m, 1})));
  int mean = push(s, load(F, bt, aff(0, {1, 0})));
  int rstd = push(s, load(F, bt, aff(n, {1, 0})));
  int d = push(s, op(Op::Sub, F, l, mean));
  int v = push(s, op(Op::Mul, F, d, rstd));
  s.stores.push_back({by, aff(0, {m, 1}), v});
  k2.stages.push_back(std::move(s));
  pb.plan.kernels.push_back(std::move(k1));
  pb.plan.kernels.push_back(std::move(k2));
  return completed(pb.plan);
}

inline const std::vector<DType>& all_dtypes() {
  static const std::vector<DType> v = {DType::Bool,     DType::UInt8,   DType::Int8,
                                       DType::Int32,    DType::Int64,   DType::Float16,
                                       DType::BFloat16, DType::Float32, DType::Float64};
  return v;
}

// out_k[i] = cast<all_dtypes()[k]>(x[i]) for x of dtype `from`: one output per dtype.
inline Plan cast_all(DType from, int64_t n) {
  PlanBuilder pb;
  int x = pb.input(from, n);
  std::vector<int> outs;
  for (DType t : all_dtypes()) outs.push_back(pb.output(t, n));
  loop::Kernel k;
  k.name = "cast_from_" + std::string(dtype_name(from));
  k.outer = {n};
  int ax = pb.arg(k, x);
  Stage s{StageKind::MapOuter};
  int lx = push(s, load(from, ax, aff(0, {1})));
  for (size_t i = 0; i < outs.size(); ++i) {
    int a = pb.arg(k, outs[i], true);
    s.stores.push_back({a, aff(0, {1}), cast_to(s, lx, all_dtypes()[i])});
  }
  k.stages.push_back(std::move(s));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// Uniform random numbers: out_k[i] = rand_uniform(seed, offset, counter = i, stream = k % 2) in
// float32, float64, float16, bfloat16 (k = 0..3); seed and offset are int64 runtime scalars.
inline Plan rand_all(int64_t n) {
  PlanBuilder pb;
  int seed = pb.scalar(DType::Int64), offset = pb.scalar(DType::Int64);
  const DType ts[4] = {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16};
  std::vector<int> outs;
  for (DType t : ts) outs.push_back(pb.output(t, n));
  loop::Kernel k;
  k.name = "rand";
  k.outer = {n};
  int as = pb.arg(k, seed), ao = pb.arg(k, offset);
  Stage s{StageKind::MapOuter};
  int ls = push(s, load_scalar(DType::Int64, as));
  int lo = push(s, load_scalar(DType::Int64, ao));
  for (int i = 0; i < 4; ++i) {
    int a = pb.arg(k, outs[static_cast<size_t>(i)], true);
    int r = push(s, rand_instr(ts[i], ls, lo, aff(0, {1}), i % 2));
    s.stores.push_back({a, aff(0, {1}), r});
  }
  k.stages.push_back(std::move(s));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// out[i] = where(flag, x[i] * a + float(b), x[i]) with runtime scalars a (float32), b (int32) and
// flag (bool) passed by value, x float32.
inline Plan scalar_args(int64_t n) {
  PlanBuilder pb;
  int x = pb.input(DType::Float32, n), a = pb.scalar(DType::Float32), b = pb.scalar(DType::Int32),
      f = pb.scalar(DType::Bool), o = pb.output(DType::Float32, n);
  const DType F = DType::Float32;
  loop::Kernel k;
  k.name = "scalars";
  k.outer = {n};
  int ax = pb.arg(k, x), aa = pb.arg(k, a), ab = pb.arg(k, b), af = pb.arg(k, f),
      ao = pb.arg(k, o, true);
  Stage s{StageKind::MapOuter};
  int lx = push(s, load(F, ax, aff(0, {1})));
  int la = push(s, load_scalar(F, aa));
  int lb = cast_to(s, push(s, load_scalar(DType::Int32, ab)), F);
  int lf = push(s, load_scalar(DType::Bool, af));
  int m = push(s, op(Op::Mul, F, lx, la));
  int p = push(s, op(Op::Add, F, m, lb));
  int w = push(s, op(Op::Where, F, lf, p, lx));
  s.stores.push_back({ao, aff(0, {1}), w});
  k.stages.push_back(std::move(s));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// The unary ops of a floating dtype t, one output each, in this order.
inline const std::vector<Op>& float_unary_ops() {
  static const std::vector<Op> v = {Op::Neg,  Op::Exp, Op::Log, Op::Sqrt,  Op::Sin,  Op::Cos,
                                    Op::Tanh, Op::Erf, Op::Abs, Op::Floor, Op::Recip};
  return v;
}
// out_k[i] = op_k(x[i]) for x of floating dtype t.
inline Plan unary_ops(int64_t n, DType t) {
  PlanBuilder pb;
  int x = pb.input(t, n);
  std::vector<int> outs;
  for (size_t i = 0; i < float_unary_ops().size(); ++i) outs.push_back(pb.output(t, n));
  int onot = pb.output(DType::Bool, n);
  loop::Kernel k;
  k.name = "unary_" + std::string(dtype_name(t));
  k.outer = {n};
  int ax = pb.arg(k, x);
  Stage s{StageKind::MapOuter};
  int lx = push(s, load(t, ax, aff(0, {1})));
  for (size_t i = 0; i < outs.size(); ++i) {
    int a = pb.arg(k, outs[i], true);
    s.stores.push_back({a, aff(0, {1}), push(s, op(float_unary_ops()[i], t, lx))});
  }
  int an = pb.arg(k, onot, true);
  s.stores.push_back({an, aff(0, {1}), push(s, op(Op::Not, DType::Bool, lx))});
  k.stages.push_back(std::move(s));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// Binary ops of dtype t over x[i], y[i]: arithmetic outputs (dtype t) then comparisons (bool).
inline std::vector<Op> binary_ops_for(DType t) {
  if (is_floating(t))
    return {Op::Add, Op::Sub, Op::Mul, Op::Div, Op::Pow, Op::Maximum, Op::Minimum};
  if (t == DType::Bool) return {Op::Maximum, Op::Minimum};
  return {Op::Add, Op::Sub, Op::Mul, Op::Maximum, Op::Minimum};
}
inline const std::vector<Op>& compare_ops() {
  static const std::vector<Op> v = {Op::Eq, Op::Ne, Op::Lt, Op::Le, Op::Gt, Op::Ge};
  return v;
}
// Outputs in order: binary_ops_for(t) (dtype t), compare_ops() (bool), then for integer t neg and
// abs (dtype t), for bool t logical and/or (bool).
inline Plan binary_ops(int64_t n, DType t) {
  PlanBuilder pb;
  int x = pb.input(t, n), y = pb.input(t, n);
  loop::Kernel k;
  k.name = "binary_" + std::string(dtype_name(t));
  k.outer = {n};
  int ax = pb.arg(k, x), ay = pb.arg(k, y);
  Stage s{StageKind::MapOuter};
  int lx = push(s, load(t, ax, aff(0, {1})));
  int ly = push(s, load(t, ay, aff(0, {1})));
  auto out = [&](DType ot, int v) {
    int a = pb.arg(k, pb.output(ot, n), true);
    s.stores.push_back({a, aff(0, {1}), v});
  };
  for (Op o : binary_ops_for(t)) out(t, push(s, op(o, t, lx, ly)));
  for (Op o : compare_ops()) out(DType::Bool, push(s, op(o, DType::Bool, lx, ly)));
  if (!is_floating(t) && t != DType::Bool) {
    out(t, push(s, op(Op::Neg, t, lx)));
    out(t, push(s, op(Op::Abs, t, lx)));
  }
  if (t == DType::Bool) {
    out(DType::Bool, push(s, op(Op::And, DType::Bool, lx, ly)));
    out(DType::Bool, push(s, op(Op::Or, DType::Bool, lx, ly)));
  }
  k.stages.push_back(std::move(s));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

// y[i] = reduce_j x[i, j] of dtype t with op rop, accumulated in t (float32 for 16-bit floats),
// stored as t: integer sums/products wrap, max/min propagate NaN.
inline Plan plain_reduce(int64_t n, int64_t m, Op rop, DType t) {
  PlanBuilder pb;
  int x = pb.input(t, n * m), y = pb.output(t, n);
  DType acc = (t == DType::Float16 || t == DType::BFloat16) ? DType::Float32 : t;
  loop::Kernel k;
  k.name = "reduce_" + std::string(op_name(rop)) + "_" + std::string(dtype_name(t));
  k.outer = {n};
  k.inner = {m};
  int ax = pb.arg(k, x), ay = pb.arg(k, y, true);
  Stage r{StageKind::Reduce};
  r.reduce_op = rop;
  r.acc_dtype = acc;
  r.reduce_value = cast_to(r, push(r, load(t, ax, aff(0, {m, 1}))), acc);
  Stage e{StageKind::MapOuter};
  int rr = push(e, reduce_result(acc, 0));
  e.stores.push_back({ay, aff(0, {1, 0}), cast_to(e, rr, t)});
  k.stages.push_back(std::move(r));
  k.stages.push_back(std::move(e));
  pb.plan.kernels.push_back(std::move(k));
  return completed(pb.plan);
}

}  // namespace lt::cudatest
