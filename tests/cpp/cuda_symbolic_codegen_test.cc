// Symbolic sizes on the CUDA code generator (issue 30), without a GPU: the hand-built symbolic
// plans of tests/cpp/symbolic_plans.h (the CPU backend's symbolic tests run them) and a GPT
// block's symbolic training plan (lowering/generalize.h) generate CUDA C that NVRTC compiles for
// sm_90; a symbolic kernel's source is the same whatever binding the plan was made at and holds
// none of that binding's sizes; the static plans' kernels take no size parameters. Values on a
// GPU: tests/gpu/cuda_symbolic_gpu_test.cc.
#include <gtest/gtest.h>

#ifdef LT_HAVE_CUDA

#include <cstdio>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_expr.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "ir/symbolic_graph.h"
#include "lowering/generalize.h"
#include "lowering/lower.h"
#include "symbolic_plans.h"
#include "symbolic_util.h"

namespace lt::cuda_symbolic_codegen_test {
namespace {

using symbolic_plans::SymPlan;

using PlanFn = std::function<Plan(std::span<const int64_t>, bool)>;

struct Case {
  std::string name;
  PlanFn build;
  int symbols;
};

std::vector<Case> cases() {
  using namespace symbolic_plans;  // NOLINT: the plans
  return {
      {"elementwise [s0, 7]", elementwise_plan, 1},
      {"merged extent [s0, s1, 3]", merged_extent_plan, 2},
      {"broadcast [s0, 5] + [5]",
       [](std::span<const int64_t> z, bool sym) { return broadcast_plan(z, sym, false); }, 1},
      {"broadcast [5, s0] + [s0]",
       [](std::span<const int64_t> z, bool sym) { return broadcast_plan(z, sym, true); }, 1},
      {"transposed read", transpose_plan, 1},
      {"row reductions", row_reductions_plan, 1},
      {"softmax rows", [](std::span<const int64_t> z, bool sym) { return softmax_plan(z, sym); },
       1},
      {"softmax of many rows",
       [](std::span<const int64_t> z, bool sym) { return softmax_plan(z, sym, 5000); }, 1},
      {"sin times s0", sin_scaled_plan, 1},
      {"mean with 1/s1", mean_plan, 2},
      {"floordiv/mod by s0", floordiv_mod_plan, 1},
      {"symbolic offsets", offset_plan, 1},
      {"gemm epilogue", gemm_plan, 2},
      {"two kernels",
       [](std::span<const int64_t> z, bool sym) { return two_kernels_plan(z[0], sym); }, 1},
      {"tail", [](std::span<const int64_t> z, bool sym) { return tail_plan(z[0], sym); }, 1},
      {"column sums", column_sum_plan, 1},
      {"wide rows",
       [](std::span<const int64_t> z, bool sym) { return centered_rows_plan(z, sym, 4096); }, 1},
      {"short rows",
       [](std::span<const int64_t> z, bool sym) { return centered_rows_plan(z, sym, 9); }, 1},
  };
}

// Hints: primes whose sizes (and the products, sums and reciprocals the plans make of them)
// appear nowhere else in the source, and small ones where a static choice would differ (rows of
// 5 take the thread-per-row mode when static).
const std::vector<int64_t> kHintA = {1009, 1013}, kHintB = {5, 7}, kHintC = {37, 41};

std::vector<char> nvrtc_ok(const std::string& source, const std::string& what) {
  std::vector<char> cubin;
  try {
    cubin = nvrtc_compile_cubin(source, "sm_90");
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": " << e.what() << "\n---- source ----\n" << source;
  }
  EXPECT_GT(cubin.size(), 64u) << what;
  return cubin;
}

std::span<const int64_t> hint(const std::vector<int64_t>& h, int symbols) {
  return std::span<const int64_t>(h.data(), static_cast<size_t>(symbols));
}

TEST(CudaSymbolicCodegen, HandBuiltPlansCompileWithNvrtc) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Plan p = c.build(hint(kHintA, c.symbols), true);
    ASSERT_TRUE(p.sym.symbolic());
    const CudaModuleSource m = generate_cuda(p.kernels);
    ASSERT_EQ(m.kernels.size(), p.kernels.size());
    for (size_t i = 0; i < p.kernels.size(); ++i) {
      const loop::Kernel& k = p.kernels[i];
      const CudaKernelLaunch& l = m.kernels[i];
      ASSERT_TRUE(k.symbolic());
      // The parameters passed: ascending, each one the plan has, each in the signature.
      ASSERT_FALSE(l.size_params.empty());
      for (size_t j = 0; j < l.size_params.size(); ++j) {
        EXPECT_GE(l.size_params[j], 0);
        EXPECT_LT(l.size_params[j], static_cast<int>(p.sym.params.size()));
        if (j) {
          EXPECT_LT(l.size_params[j - 1], l.size_params[j]);
        }
        EXPECT_NE(m.source.find("const long long p" + std::to_string(l.size_params[j])),
                  std::string::npos);
      }
    }
    nvrtc_ok(m.source, c.name);
  }
}

// The symbolic kernels' source does not depend on the binding the plan was made for, and holds
// no size of it: every size parameter's value at hint A (all >= 1000 there) is absent, and so is
// every reciprocal size constant's float32 and float64 literal.
TEST(CudaSymbolicCodegen, NoHintIsBakedIn) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Plan a = c.build(hint(kHintA, c.symbols), true);
    const std::string src = generate_cuda(a.kernels).source;
    EXPECT_EQ(src, generate_cuda(c.build(hint(kHintB, c.symbols), true).kernels).source);
    EXPECT_EQ(src, generate_cuda(c.build(hint(kHintC, c.symbols), true).kernels).source);
    const std::vector<int64_t> values = a.sym.values(hint(kHintA, c.symbols));
    for (int64_t v : values) {
      ASSERT_GE(v, 1000);  // the premise: these numbers mean the binding
      EXPECT_EQ(src.find(std::to_string(v)), std::string::npos) << "size " << v << "\n" << src;
    }
    for (const auto& k : a.kernels)
      for (const auto& st : k.stages)
        for (const auto& in : st.body) {
          if (in.param < 0) continue;
          for (const std::string& lit : {cudagen::fmt_float(static_cast<float>(in.value), true),
                                         cudagen::fmt_float(in.value, false)})
            EXPECT_EQ(src.find(lit), std::string::npos) << lit << "\n" << src;
        }
  }
}

// What the symbolic generator chooses where a static one looks at sizes: a symbolic row of 5 is
// not a thread-per-row kernel (a long row at another binding would be one thread's loop), a
// symbolic row has no vector accesses (its length may not be a multiple of 4), a contiguous
// symbolic elementwise space still has them (the tail loop takes any rest), and indices are
// 64-bit.
TEST(CudaSymbolicCodegen, ChoicesHoldAtEveryBinding) {
  using namespace symbolic_plans;  // NOLINT: the plans
  const std::vector<int64_t> five = {5};
  const CudaModuleSource st = generate_cuda(softmax_plan(five, false).kernels);
  const CudaModuleSource sy = generate_cuda(softmax_plan(five, true).kernels);
  EXPECT_EQ(st.kernels[0].mode, CudaKernelMode::Thread);
  EXPECT_EQ(sy.kernels[0].mode, CudaKernelMode::Warp);
  const std::vector<int64_t> n4096 = {4096};
  const CudaModuleSource row_static = generate_cuda(softmax_plan(n4096, false).kernels);
  const CudaModuleSource row_sym = generate_cuda(softmax_plan(n4096, true).kernels);
  EXPECT_NE(row_static.source.find("lt_ld4<"), std::string::npos);  // the premise
  EXPECT_EQ(row_sym.source.find("lt_ld4<"), std::string::npos);
  EXPECT_EQ(row_sym.source.find("unsigned row"), std::string::npos);
  EXPECT_NE(row_sym.source.find("long long row"), std::string::npos);
  const CudaModuleSource ew = generate_cuda(elementwise_plan(five, true).kernels);
  EXPECT_TRUE(ew.kernels[0].vectorized);
  EXPECT_NE(ew.source.find("float4"), std::string::npos);
  // Where only the outer space is symbolic the row's own choices stand: columns in tiles, a wide
  // static row a block per row with vectors and the row in registers, a short one a thread per
  // row.
  EXPECT_EQ(generate_cuda(column_sum_plan(five, true).kernels).kernels[0].mode,
            CudaKernelMode::Tile);
  const CudaModuleSource wide = generate_cuda(centered_rows_plan(five, true, 4096).kernels);
  EXPECT_EQ(wide.kernels[0].mode, CudaKernelMode::Block);
  EXPECT_NE(wide.source.find("lt_ld4<"), std::string::npos);
  EXPECT_NE(wide.source.find("row cached in registers"), std::string::npos);
  EXPECT_EQ(generate_cuda(centered_rows_plan(five, true, 9).kernels).kernels[0].mode,
            CudaKernelMode::Thread);
  // A symbolic offset is not known to be a multiple of 4: no vector load at it.
  const CudaModuleSource off = generate_cuda(offset_plan(n4096, true).kernels);
  EXPECT_EQ(off.source.find("reinterpret_cast<const float4*>(a0 + "), std::string::npos);
}

// The static plans' kernels: no size parameters, and their launch sizes are what
// cuda_launch_blocks computes from their outer extent (the rule symbolic launches use).
TEST(CudaSymbolicCodegen, StaticKernelsTakeNoSizes) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    for (const auto* h : {&kHintA, &kHintB, &kHintC}) {
      const Plan p = c.build(hint(*h, c.symbols), false);
      ASSERT_FALSE(p.sym.symbolic());
      const CudaModuleSource m = generate_cuda(p.kernels);
      EXPECT_EQ(m.source.find("const long long p"), std::string::npos);
      for (size_t i = 0; i < p.kernels.size(); ++i) {
        EXPECT_TRUE(m.kernels[i].size_params.empty());
        EXPECT_EQ(cuda_launch_blocks(m.kernels[i], p.kernels[i].outer_numel()),
                  m.kernels[i].max_blocks);
      }
    }
  }
}

// The symbolic plan's launches at its hint: the same grid as the hint's own static compile when
// both chose the same mode.
TEST(CudaSymbolicCodegen, LaunchBlocksAtTheHint) {
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const Plan sp = c.build(hint(kHintA, c.symbols), true);
    const CudaModuleSource m = generate_cuda(sp.kernels);
    for (size_t i = 0; i < sp.kernels.size(); ++i)
      EXPECT_EQ(cuda_launch_blocks(m.kernels[i], sp.kernels[i].outer_numel()),
                m.kernels[i].max_blocks);
  }
}

// A GPT block's training graph lowered symbolically in its sequence length with the CUDA
// backend's library steps (GEMMs; the flash attention's head dim 64 with C = 128, H = 2):
// generate and compile every distinct kernel.
TEST(CudaSymbolicCodegen, GptBlockTrainingPlanCompiles) {
  using namespace symbolic_test;  // NOLINT: the shared programs
  LowerOptions o;                 // what CudaBackend::lower_options offers on an sm_90 device
  o.gemm_dtypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16};
  o.attention_dtypes = {DType::Float32, DType::BFloat16, DType::Float16};
  o.attention_head_dim = 64;
  for (int64_t C : {32, 128}) {
    SCOPED_TRACE("C " + std::to_string(C));
    const Block at = gpt_block(2, 37, 1, C, C / 64 ? C / 64 : 4);
    GeneralizedPlan gp = generalize_plan(at.traced.graph, sym_of(at), o);  // over T
    ASSERT_TRUE(gp.plan) << gp.why_not;
    const Plan& p = *gp.plan;
    // The lengths tests/gpu/cuda_symbolic_gpu_test.cc runs this plan at are in its range.
    const SymbolicGraph sg = sym_of(at);
    for (int64_t T : {37, 38, 40, 41, 64, 97, 130, 200, 300, 593}) {
      if (C == 128 && T > 300) continue;
      std::vector<int64_t> v(sg.env.num_symbols(), 0);
      for (SymId s = 0; s < v.size(); ++s)
        if (sg.env.simplify(SizeExpr::symbol(s)) == SizeExpr::symbol(s)) v[s] = T;
      EXPECT_TRUE(p.sym.in_range(all_symbol_values(sg, v))) << "T " << T;
    }
    EXPECT_FALSE(p.gemms.empty());
    if (C == 128) {
      EXPECT_FALSE(p.attentions.empty());
    }
    std::vector<loop::Kernel> distinct;
    int symbolic = 0;
    for (size_t i : p.distinct.first) {
      distinct.push_back(p.kernels[i]);
      symbolic += p.kernels[i].symbolic();
    }
    EXPECT_GT(symbolic, 0);
    const CudaModuleSource m = generate_cuda(distinct);
    std::map<std::string, int> modes;  // of the symbolic kernels, for the log
    for (size_t i = 0; i < distinct.size(); ++i) {
      EXPECT_EQ(m.kernels[i].size_params.empty(), !distinct[i].symbolic()) << distinct[i].name;
      if (distinct[i].symbolic())
        ++modes[std::string(cuda_kernel_mode_name(m.kernels[i].mode)) +
                (m.kernels[i].vectorized ? " (vector)" : "")];
    }
    std::printf("C %lld: %zu distinct kernels, %d symbolic:", static_cast<long long>(C),
                distinct.size(), symbolic);
    for (const auto& [mode, n] : modes) std::printf(" %s %d,", mode.c_str(), n);
    std::printf("\n");
    nvrtc_ok(m.source, "gpt block");
  }
}

}  // namespace
}  // namespace lt::cuda_symbolic_codegen_test

#endif  // LT_HAVE_CUDA
