// Hand-built symbolic plans (issue 30) for the backends' symbolic-size tests: each builder makes
// the plan at concrete sizes `z` (one per size symbol), and with `sym` also annotates its size
// fields with size parameters (lowering/loop_ir.h, Plan::sym), so the static plan at z and the
// symbolic plan differ only in the annotations. Used by tests/cpp/cpu_symbolic_test.cc,
// tests/cpp/cuda_symbolic_codegen_test.cc and tests/gpu/cuda_symbolic_gpu_test.cc; the reference
// checks stay in the tests (plain loops, never backend code).
#pragma once
#include <span>
#include <utility>
#include <vector>

#include "ir/size_expr.h"
#include "loop_builder.h"
#include "lowering/complete_plan.h"

namespace lt::symbolic_plans {

using namespace cpu_codegen_test;  // NOLINT: the loop IR builders

inline constexpr auto F = DType::Float32;
inline const SizeExpr s0 = SizeExpr::symbol(0), s1 = SizeExpr::symbol(1);

// A plan built at concrete sizes; with `sym`, its size fields also name parameters (the same
// builder code makes the static plan when !sym, so the two differ only in the annotations).
struct SymPlan : PlanBuilder {
  bool sym;
  int num_symbols;
  std::vector<SizeExpr> params;
  SymPlan(bool symbolic, int nsym) : sym(symbolic), num_symbols(nsym) {}
  // The parameter index of `e` (added on first use), or -1 in a static plan.
  int P(const SizeExpr& e) {
    if (!sym) return -1;
    for (size_t i = 0; i < params.size(); ++i)
      if (params[i] == e) return static_cast<int>(i);
    params.push_back(e);
    return static_cast<int>(params.size()) - 1;
  }
  int buf(K kind, DType t, int64_t n, const SizeExpr& e) {
    int b = add(kind, t, n);
    p.buffers[b].numel_param = e.is_const() ? -1 : P(e);
    return b;
  }
  loop::Arg sarg(int buffer, bool output = false) const {
    loop::Arg a = arg(buffer, output);
    a.numel_param = p.buffers[buffer].numel_param;
    return a;
  }
  // An affine index; stride_ps / offset_p from P() (-1 static).
  Index idx(std::vector<int64_t> strides, std::vector<int> stride_ps, int64_t offset = 0,
            int offset_p = -1) const {
    Index ix = aff(std::move(strides), offset);
    if (sym) {
      bool any = offset_p >= 0;
      for (int q : stride_ps) any = any || q >= 0;
      if (any) ix.stride_params = std::move(stride_ps);
      ix.offset_param = offset_p;
    }
    return ix;
  }
  void dims(std::vector<int> outer_ps, std::vector<int> inner_ps) {
    if (!sym) return;
    p.kernels.back().outer_params = std::move(outer_ps);
    p.kernels.back().inner_params = std::move(inner_ps);
  }
  Plan finish() {
    if (sym) {
      p.sym.num_symbols = num_symbols;
      p.sym.params = params;
    }
    return completed(p);
  }
};

// A Const instruction whose value is size parameter `param` (or its reciprocal).
inline int sym_const(Body& b, DType t, double value, int param, bool reciprocal = false) {
  int c = b.cnst(t, value);
  b.st.body[c].param = param;
  b.st.body[c].param_reciprocal = param >= 0 && reciprocal;
  return c;
}

// out (buffer 2) = x * y + x over a contiguous [s0, 7].
inline Plan elementwise_plan(std::span<const int64_t> z, bool sym) {
  const int64_t n = z[0];
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, n * 7, s0 * 7), y = pb.buf(K::Input, F, n * 7, s0 * 7);
  int o = pb.buf(K::Output, F, n * 7, s0 * 7);
  Body b(StageKind::MapOuter);
  int lx = b.load(F, 0, aff({7, 1})), ly = b.load(F, 1, aff({7, 1}));
  b.store(2, aff({7, 1}), b.op(Op::Add, F, b.op(Op::Mul, F, lx, ly), lx));
  pb.kernel({n, 7}, {}, {pb.sarg(x), pb.sarg(y), pb.sarg(o, true)}, {b.st});
  pb.dims({pb.P(s0), -1}, {});
  return pb.finish();
}

// out (buffer 2) = x - b over [s0, s1, 3] with b [3] broadcast.
inline Plan merged_extent_plan(std::span<const int64_t> z, bool sym) {
  const int64_t n = z[0], m = z[1];
  SymPlan pb(sym, 2);
  int x = pb.buf(K::Input, F, n * m * 3, s0 * s1 * 3), b = pb.buf(K::Input, F, 3, 3);
  int o = pb.buf(K::Output, F, n * m * 3, s0 * s1 * 3);
  const int rs = pb.P(s1 * 3);
  Body e(StageKind::MapOuter);
  int v = e.op(Op::Sub, F, e.load(F, 0, pb.idx({3 * m, 3, 1}, {rs, -1, -1})),
               e.load(F, 1, aff({0, 0, 1})));
  e.store(2, pb.idx({3 * m, 3, 1}, {rs, -1, -1}), v);
  pb.kernel({n, m, 3}, {}, {pb.sarg(x), pb.sarg(b), pb.sarg(o, true)}, {e.st});
  pb.dims({pb.P(s0), pb.P(s1), -1}, {});
  return pb.finish();
}

// out[r, c] (buffer 2) = a[r, c] + b[c] for a [s0, 5] (a static last dim) or, with
// last_symbolic, a [5, s0] (a symbolic last dim and row stride).
inline Plan broadcast_plan(std::span<const int64_t> z, bool sym, bool last_symbolic) {
  const int64_t n = z[0];
  SymPlan pb(sym, 1);
  const int64_t R = last_symbolic ? 5 : n, C = last_symbolic ? n : 5;
  int a = pb.buf(K::Input, F, R * C, s0 * 5);
  int bb = pb.buf(K::Input, F, C, last_symbolic ? s0 : SizeExpr(5));
  int o = pb.buf(K::Output, F, R * C, s0 * 5);
  const int rs = last_symbolic ? pb.P(s0) : -1;
  Body b(StageKind::MapOuter);
  int v = b.op(Op::Add, F, b.load(F, 0, pb.idx({C, 1}, {rs, -1})), b.load(F, 1, aff({0, 1})));
  b.store(2, pb.idx({C, 1}, {rs, -1}), v);
  pb.kernel({R, C}, {}, {pb.sarg(a), pb.sarg(bb), pb.sarg(o, true)}, {b.st});
  if (last_symbolic)
    pb.dims({-1, pb.P(s0)}, {});
  else
    pb.dims({pb.P(s0), -1}, {});
  return pb.finish();
}

// out [3, s0] (buffer 1) = -x.T for x [s0, 3]: the output's row stride is symbolic, the read
// strided.
inline Plan transpose_plan(std::span<const int64_t> z, bool sym) {
  const int64_t n = z[0];
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, n * 3, s0 * 3), o = pb.buf(K::Output, F, n * 3, s0 * 3);
  Body b(StageKind::MapOuter);
  b.store(1, pb.idx({n, 1}, {pb.P(s0), -1}), b.op(Op::Neg, F, b.load(F, 0, aff({1, 3}))));
  pb.kernel({3, n}, {}, {pb.sarg(x), pb.sarg(o, true)}, {b.st});
  pb.dims({-1, pb.P(s0)}, {});
  return pb.finish();
}

// Rows of x [5, s0]: sum and max over the symbolic inner dim (buffers 1, 2), and sum and max over
// its first s0 - 2 columns (buffers 3, 4; none at s0 = 2: the identities), each stored by an
// epilogue.
inline Plan row_reductions_plan(std::span<const int64_t> z, bool sym) {
  const int64_t n = z[0];
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, 5 * n, s0 * 5);
  int os = pb.buf(K::Output, F, 5, 5), om = pb.buf(K::Output, F, 5, 5);
  int ps = pb.buf(K::Output, F, 5, 5), pm = pb.buf(K::Output, F, 5, 5);
  const int rs = pb.P(s0);
  for (bool part : {false, true}) {
    Body r0(StageKind::Reduce), r1(StageKind::Reduce), ep(StageKind::MapOuter);
    Stage st0 = r0.reduce(Op::ReduceSum, F, r0.load(F, 0, pb.idx({n, 1}, {rs, -1})));
    Stage st1 = r1.reduce(Op::ReduceMax, F, r1.load(F, 0, pb.idx({n, 1}, {rs, -1})));
    ep.store(1, aff({1, 0}), ep.result(F, 0));
    ep.store(2, aff({1, 0}), ep.result(F, 1));
    pb.kernel({5}, {part ? n - 2 : n},
              {pb.sarg(x), pb.sarg(part ? ps : os, true), pb.sarg(part ? pm : om, true)},
              {st0, st1, ep.st});
    pb.dims({-1}, {part ? pb.P(s0 - 2) : pb.P(s0)});
  }
  return pb.finish();
}

// softmax over rows of x [rows, s0] (buffer 1): Reduce max, Reduce sum(exp(x - max)), MapInner
// store.
inline constexpr int64_t kSoftmaxRows = 6;
inline Plan softmax_plan(std::span<const int64_t> z, bool sym, int64_t rows = kSoftmaxRows) {
  const int64_t R = rows;
  const int64_t n = z[0];
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, R * n, s0 * R), o = pb.buf(K::Output, F, R * n, s0 * R);
  const int rs = pb.P(s0);
  Body mx(StageKind::Reduce), sm(StageKind::Reduce), out(StageKind::MapInner);
  Stage st0 = mx.reduce(Op::ReduceMax, F, mx.load(F, 0, pb.idx({n, 1}, {rs, -1})));
  int e = sm.op(Op::Exp, F,
                sm.op(Op::Sub, F, sm.load(F, 0, pb.idx({n, 1}, {rs, -1})), sm.result(F, 0)));
  Stage st1 = sm.reduce(Op::ReduceSum, F, e);
  int e2 = out.op(Op::Exp, F,
                  out.op(Op::Sub, F, out.load(F, 0, pb.idx({n, 1}, {rs, -1})), out.result(F, 0)));
  out.store(1, pb.idx({n, 1}, {rs, -1}), out.op(Op::Div, F, e2, out.result(F, 1)));
  pb.kernel({R}, {n}, {pb.sarg(x), pb.sarg(o, true)}, {st0, st1, out.st});
  pb.dims({-1}, {pb.P(s0)});
  return pb.finish();
}

// out (buffer 1) = sin(x) * s0 + x over [s0, 3] (s0 a float32 size constant).
inline Plan sin_scaled_plan(std::span<const int64_t> z, bool sym) {
  const int64_t n = z[0];
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, n * 3, s0 * 3), o = pb.buf(K::Output, F, n * 3, s0 * 3);
  Body b(StageKind::MapOuter);
  int lx = b.load(F, 0, aff({3, 1}));
  int v = b.op(Op::Mul, F, b.op(Op::Sin, F, lx), sym_const(b, F, static_cast<double>(n), pb.P(s0)));
  b.store(1, aff({3, 1}), b.op(Op::Add, F, v, lx));
  pb.kernel({n, 3}, {}, {pb.sarg(x), pb.sarg(o, true)}, {b.st});
  pb.dims({pb.P(s0), -1}, {});
  return pb.finish();
}

// mean over rows of x [s0, s1] as sum * (1/s1) (a reciprocal size constant) into buffer 1
// (float32), and into buffer 2 (float64) mean + s0 + 1/s1 (the size itself and its reciprocal as
// float64 constants).
inline Plan mean_plan(std::span<const int64_t> z, bool sym) {
  const int64_t r = z[0], c = z[1];
  SymPlan pb(sym, 2);
  int x = pb.buf(K::Input, F, r * c, s0 * s1), o = pb.buf(K::Output, F, r, s0);
  int o2 = pb.buf(K::Output, DType::Float64, r, s0);
  Body red(StageKind::Reduce), ep(StageKind::MapOuter);
  Stage st0 = red.reduce(Op::ReduceSum, F, red.load(F, 0, pb.idx({c, 1}, {pb.P(s1), -1})));
  int mean = ep.op(Op::Mul, F, ep.result(F, 0), sym_const(ep, F, 1.0 / c, pb.P(s1), true));
  ep.store(1, aff({1, 0}), mean);
  int plus = ep.op(Op::Add, DType::Float64, ep.op(Op::Cast, DType::Float64, mean),
                   sym_const(ep, DType::Float64, static_cast<double>(r), pb.P(s0)));
  int recip64 = sym_const(ep, DType::Float64, 1.0 / c, pb.P(s1), true);
  ep.store(2, aff({1, 0}), ep.op(Op::Add, DType::Float64, plus, recip64));
  pb.kernel({r}, {c}, {pb.sarg(x), pb.sarg(o, true), pb.sarg(o2, true)}, {st0, ep.st});
  pb.dims({pb.P(s0)}, {pb.P(s1)});
  return pb.finish();
}

// A reshape read: out [3*s0] (buffer 1) is the flat view of a [3, s0] transpose of x [s0, 3]
// plus 0.5, so out[k] = x[(k mod s0) * 3 + k floordiv s0] + 0.5: a general index whose divisor
// is the size s0.
inline Plan floordiv_mod_plan(std::span<const int64_t> z, bool sym) {
  const int64_t n = z[0];
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, 3 * n, s0 * 3), o = pb.buf(K::Output, F, 3 * n, s0 * 3);
  // iexprs: 0 = var 0, 1 = const s0, 2 = var0 mod s0, 3 = const 3, 4 = (var0 mod s0) * 3,
  // 5 = var0 floordiv s0, 6 = 4 + 5.
  using IK = loop::IExpr::Kind;
  std::vector<loop::IExpr> ie(7);
  ie[0] = {IK::Var, 0};
  ie[1] = {IK::Const, n};
  ie[1].param = pb.P(s0);
  ie[2] = {IK::Mod, 0, 0, 1};
  ie[3] = {IK::Const, 3};
  ie[4] = {IK::Mul, 0, 2, 3};
  ie[5] = {IK::FloorDiv, 0, 0, 1};
  ie[6] = {IK::Add, 0, 4, 5};
  Body b(StageKind::MapOuter);
  b.store(1, aff({1}), b.op(Op::Add, F, b.load(F, 0, general(6)), b.cnst(F, 0.5)));
  pb.kernel({3 * n}, {}, {pb.sarg(x), pb.sarg(o, true)}, {b.st}, ie);
  pb.dims({pb.P(s0 * 3)}, {});
  return pb.finish();
}

// Affine indices with symbolic offsets into x [2*s0]: out[i] (buffer 1) = x[s0 + i] * 2 (its
// second half) and out2[i] (buffer 2) = x[(s0 - 2) + i] + x[i] (an offset that is 0 at s0 = 2).
inline Plan offset_plan(std::span<const int64_t> z, bool sym) {
  const int64_t n = z[0];
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, 2 * n, s0 * 2);
  int o = pb.buf(K::Output, F, n, s0), o2 = pb.buf(K::Output, F, n, s0);
  Body b(StageKind::MapOuter);
  int h = b.load(F, 0, pb.idx({1}, {-1}, n, pb.P(s0)));
  b.store(1, aff({1}), b.op(Op::Mul, F, h, b.cnst(F, 2)));
  int l = b.load(F, 0, pb.idx({1}, {-1}, n - 2, pb.P(s0 - 2)));
  b.store(2, aff({1}), b.op(Op::Add, F, l, b.load(F, 0, aff({1}))));
  pb.kernel({n}, {}, {pb.sarg(x), pb.sarg(o, true), pb.sarg(o2, true)}, {b.st});
  pb.dims({pb.P(s0)}, {});
  return pb.finish();
}

// y [s0, 16] (buffer 4) = relu(A [s0, s1] @ B [s1, 16] + bias[16]): a GEMM step with symbolic M,
// K and row stride of A, then a symbolic elementwise kernel over its output.
inline constexpr int64_t kGemmN = 16;
inline Plan gemm_plan(std::span<const int64_t> z, bool sym) {
  constexpr int64_t N = kGemmN;
  const int64_t m = z[0], k = z[1];
  SymPlan pb(sym, 2);
  int a = pb.buf(K::Input, F, m * k, s0 * s1), b = pb.buf(K::Input, F, k * N, s1 * N);
  int bias = pb.buf(K::Input, F, N, N);
  int t = pb.buf(K::Temp, F, m * N, s0 * N), y = pb.buf(K::Output, F, m * N, s0 * N);
  Gemm g;
  g.name = "mm";
  g.a = a, g.b = b, g.out = t;
  g.M = m, g.N = N, g.K = k;
  g.a_rs = k, g.a_cs = 1, g.b_rs = N, g.b_cs = 1;
  pb.p.gemms.push_back(g);
  if (sym) pb.p.sym.gemms.push_back({{0, pb.P(s0)}, {2, pb.P(s1)}, {4, pb.P(s1)}});
  Body e(StageKind::MapOuter);
  int v = e.op(Op::Add, F, e.load(F, 0, aff({N, 1})), e.load(F, 1, aff({0, 1})));
  e.store(2, aff({N, 1}), e.op(Op::Maximum, F, v, e.cnst(F, 0)));
  pb.kernel({m, N}, {}, {pb.sarg(t), pb.sarg(bias), pb.sarg(y, true)}, {e.st});
  pb.dims({pb.P(s0), -1}, {});
  pb.p.steps = {{PlanStep::Kind::Gemm, 0}, {PlanStep::Kind::Kernel, 0}};
  return pb.finish();
}

// Column sums of x [s0, 2048] (buffer 1 [2048]): rows down a symbolic inner dim, contiguous along
// the outer one (the tile-of-columns mode on CUDA).
inline constexpr int64_t kColumns = 2048;
inline Plan column_sum_plan(std::span<const int64_t> z, bool sym) {
  const int64_t n = z[0];
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, n * kColumns, s0 * kColumns);
  int o = pb.buf(K::Output, F, kColumns, kColumns);
  Body r(StageKind::Reduce), ep(StageKind::MapOuter);
  Stage st0 = r.reduce(Op::ReduceSum, F, r.load(F, 0, aff({1, kColumns})));
  ep.store(1, aff({1, 0}), ep.result(F, 0));
  pb.kernel({kColumns}, {n}, {pb.sarg(x), pb.sarg(o, true)}, {st0, ep.st});
  pb.dims({-1}, {pb.P(s0)});
  return pb.finish();
}

// out (buffer 1) = x - rowmean(x) over s0 rows of `width` (a static row: 4096 is a block per row
// with vector accesses and the row in registers on CUDA, 9 a thread per row), with 1/width a
// static constant.
inline Plan centered_rows_plan(std::span<const int64_t> z, bool sym, int64_t width) {
  const int64_t n = z[0];
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, n * width, s0 * width);
  int o = pb.buf(K::Output, F, n * width, s0 * width);
  Body r(StageKind::Reduce), out(StageKind::MapInner);
  Stage st0 = r.reduce(Op::ReduceSum, F, r.load(F, 0, aff({width, 1})));
  int mean = out.op(Op::Mul, F, out.result(F, 0), out.cnst(F, 1.0 / static_cast<double>(width)));
  out.store(1, aff({width, 1}), out.op(Op::Sub, F, out.load(F, 0, aff({width, 1})), mean));
  pb.kernel({n}, {width}, {pb.sarg(x), pb.sarg(o, true)}, {st0, out.st});
  pb.dims({pb.P(s0)}, {-1});
  return pb.finish();
}

// Two kernels over one temporary: t = 3 * x over [4*s0], then out (buffer 1) = t - rowsum(t) over
// rows of t [4, s0] (a Reduce and a MapInner stage).
inline Plan two_kernels_plan(int64_t n, bool sym) {
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, 4 * n, s0 * 4);
  int o = pb.buf(K::Output, F, 4 * n, s0 * 4), t = pb.buf(K::Temp, F, 4 * n, s0 * 4);
  Body b(StageKind::MapOuter);
  b.store(1, aff({1}), b.op(Op::Mul, F, b.load(F, 0, aff({1})), b.cnst(F, 3)));
  pb.kernel({4 * n}, {}, {pb.sarg(x), pb.sarg(t, true)}, {b.st});
  pb.dims({pb.P(s0 * 4)}, {});
  Body r(StageKind::Reduce), ep(StageKind::MapInner);
  Stage st0 = r.reduce(Op::ReduceSum, F, r.load(F, 0, pb.idx({n, 1}, {pb.P(s0), -1})));
  ep.store(1, pb.idx({n, 1}, {pb.P(s0), -1}),
           ep.op(Op::Sub, F, ep.load(F, 0, pb.idx({n, 1}, {pb.P(s0), -1})), ep.result(F, 0)));
  pb.kernel({4}, {n}, {pb.sarg(t), pb.sarg(o, true)}, {st0, ep.st});
  pb.dims({-1}, {pb.P(s0)});
  return pb.finish();
}

// out [s0 - 2] (buffer 1) = -x[2:] for x [s0].
inline Plan tail_plan(int64_t n, bool sym) {
  SymPlan pb(sym, 1);
  int x = pb.buf(K::Input, F, n, s0), o = pb.buf(K::Output, F, n - 2, s0 - 2);
  Body b(StageKind::MapOuter);
  b.store(1, aff({1}), b.op(Op::Neg, F, b.load(F, 0, pb.idx({1}, {-1}, 2))));
  pb.kernel({n - 2}, {}, {pb.sarg(x), pb.sarg(o, true)}, {b.st});
  pb.dims({pb.P(s0 - 2)}, {});
  return pb.finish();
}

}  // namespace lt::symbolic_plans
