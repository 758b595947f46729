// The CPU backend's fused kernels vectorize (issue 5): the optimized LLVM IR of a fused elementwise
// chain, of a chain through vector math (libmvec or inline sin/cos) and of a row reduction holds
// vector operations.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "runtime/executor.h"
#include "runtime/ops.h"
#include "test_util.h"

namespace lt {
namespace {

std::string sources_of_last_graph() {
  std::string all;
  for (const auto& s : last_kernel_sources()) all += s;
  return all;
}

bool has_vector_float_ops(const std::string& ir) {
  return std::regex_search(
      ir, std::regex(R"(f(add|mul|sub) (fast |reassoc |contract )*<[0-9]+ x float>)"));
}

#ifdef LT_HAVE_LLVM
TEST(Vectorization, FusedElementwiseChainUsesVectorInstructions) {
  Tensor x = testing::random_tensor({4096}, 1, Device::parse("lazy:cpu"));
  mark_step();
  Tensor y = (x * 2.0 + 1.0) * x - 0.5;
  mark_step();
  ASSERT_EQ(metrics::last_graph().kernels, 1);
  EXPECT_TRUE(has_vector_float_ops(sources_of_last_graph()))
      << sources_of_last_graph().substr(0, 4000);
  (void)y;
}

TEST(Vectorization, TranscendentalsGoThroughVectorMath) {
  Tensor x = testing::random_tensor({4096}, 2, Device::parse("lazy:cpu"));
  mark_step();
  Tensor y = x.sin() + x.abs().log();
  mark_step();
  const std::string ir = sources_of_last_graph();
  // glibc libmvec's vector variants are named _ZGV<isa><mask><width>v_<fn>.
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(_ZGV[a-z]N[0-9]+v_sinf)"))) << ir.substr(0, 4000);
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(_ZGV[a-z]N[0-9]+v_logf)"))) << ir.substr(0, 4000);
  (void)y;
}

// float32 sin/cos are inline FMA code in a kernel's fast body (backends/cpu/llvm_ops.cc), with the
// libmvec body kept for arguments beyond the inline code's range.
TEST(Vectorization, Float32SinIsInlineVectorFmaCode) {
  Tensor x = testing::random_tensor({4096}, 4, Device::parse("lazy:cpu"));
  mark_step();
  Tensor y = x.sin().cos() + x;
  mark_step();
  const std::string ir = sources_of_last_graph();
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(@llvm\.fma\.v[0-9]+f32)"))) << ir.substr(0, 4000);
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(_ZGV[a-z]N[0-9]+v_cosf)"))) << ir.substr(0, 4000);
  (void)y;
}

// float32 erf is inline FMA code too (llvm_ops.cc): no division, no libm call, no float64 detour.
TEST(Vectorization, Float32ErfIsInlineVectorFmaCode) {
  Tensor x = testing::random_tensor({4096}, 5, Device::parse("lazy:cpu"));
  mark_step();
  Tensor y = x.erf() + x;
  mark_step();
  const std::string ir = sources_of_last_graph();
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(@llvm\.fma\.v[0-9]+f32)"))) << ir.substr(0, 4000);
  EXPECT_FALSE(std::regex_search(ir, std::regex(R"(fdiv|[@_]erff|x double>)")))
      << ir.substr(0, 4000);
  (void)y;
}

// The table erf has a vector form for each width the loop vectorizer may choose (erf_table.cc):
// 8 lanes with AVX2, 16 with AVX-512. Without the 16-lane one, a host whose target prefers 512-bit
// vectors (AMD Zen 4/5) ran the whole gelu(layer_norm) output loop at 8 lanes while its reductions
// ran at 16 (0.84 -> 0.46 ms for the 2048 x 1024 bench workload on Zen 5). So the lookups are as
// wide as the widest float vector in the kernel.
TEST(Vectorization, ErfLookupsAreAsWideAsTheKernelsVectors) {
  Device cpu = Device::parse("lazy:cpu");
  Tensor x = testing::random_tensor({64, 1024}, 11, cpu),
         r = testing::random_tensor({64, 1024}, 12, cpu);
  Tensor w = testing::random_tensor({1024}, 13, cpu), b = testing::random_tensor({1024}, 14, cpu);
  mark_step();
  Tensor y = gelu(layer_norm(x, {1024}, w, b)) + r;
  mark_step();
  const std::string ir = sources_of_last_graph();
  int widest = 0;
  const std::regex vec(R"(<([0-9]+) x float>)");
  for (auto it = std::sregex_iterator(ir.begin(), ir.end(), vec); it != std::sregex_iterator();
       ++it)
    widest = std::max(widest, std::stoi((*it)[1].str()));
  const bool lookups8 = ir.find("vpermilvar.ps.256") != std::string::npos;
  const bool lookups16 = ir.find("permvar.sf.512") != std::string::npos;
  if (!lookups8 && !lookups16)
    GTEST_SKIP() << "host without AVX2 and FMA: erf is the polynomial form";
  if (widest >= 16)
    EXPECT_TRUE(lookups16) << "widest vector " << widest << " but no 16-lane erf lookup";
  else
    EXPECT_TRUE(lookups8) << "widest vector " << widest << " but no 8-lane erf lookup";
  EXPECT_EQ(ir.find("lt_erf_f32"), std::string::npos) << "an erf call was left out of line";
  (void)y;
}

// A kernel with more scalar arguments than vector registers (sink_broadcasts.h): LICM hoists each
// scalar's load and broadcast out of the vector loop, and sink_hoisted_broadcasts loads them
// again inside it, so they are not all live across the loop (spilled, and register allocation
// ~70% of the compile). So the vector loop loads the scalars, and the values are right (float64
// reference with the same float32 rounding per step).
TEST(Vectorization, KernelWithManyScalarsLoadsThemInTheVectorLoop) {
  const int64_t n = 4096;
  const int steps = 60;  // 120 scalars, 2 per step
  std::vector<float> x0 = testing::random_floats(n, 21, -1.f, 1.f);
  std::vector<float> a = testing::random_floats(steps, 22, 0.5f, 1.5f);
  std::vector<float> c = testing::random_floats(steps, 23, -0.5f, 0.5f);
  Tensor y = from_host(x0.data(), DType::Float32, {n}, Device::parse("lazy:cpu"));
  mark_step();
  for (int i = 0; i < steps; ++i) y = y * static_cast<double>(a[i]) + static_cast<double>(c[i]);
  mark_step();
  const std::string ir = sources_of_last_graph();
  const size_t body = ir.find("\nvector.body");
  ASSERT_NE(body, std::string::npos) << ir.substr(0, 2000);
  const size_t end = ir.find("\n\n", body);
  const std::string loop =
      ir.substr(body, end == std::string::npos ? std::string::npos : end - body);
  const std::regex scalar_load(R"(load float, ptr)");
  const auto loads = std::distance(std::sregex_iterator(loop.begin(), loop.end(), scalar_load),
                                   std::sregex_iterator());
  EXPECT_GE(loads, 2 * steps) << loop.substr(0, 3000);
  std::vector<float> got(static_cast<size_t>(n));
  y.copy_to_host(got.data());
  for (int64_t j = 0; j < n; ++j) {
    float want = x0[static_cast<size_t>(j)];
    for (int i = 0; i < steps; ++i) want = want * a[i] + c[i];
    ASSERT_NEAR(got[static_cast<size_t>(j)], want, 1e-5f + 1e-5f * std::fabs(want)) << j;
  }
}

// float32 exp is inline FMA code (llvm_ops.cc exp_f32), and softmax multiplies by the row's
// reciprocal: its row kernel has no call and no per-element divide.
TEST(Vectorization, Float32ExpAndSoftmaxAreInlineVectorCode) {
  Tensor x = testing::random_tensor({64, 1024}, 6, Device::parse("lazy:cpu"));
  mark_step();
  Tensor y = softmax(x, -1);
  mark_step();
  const std::string ir = sources_of_last_graph();
  EXPECT_TRUE(std::regex_search(ir, std::regex(R"(@llvm\.fma\.v[0-9]+f32)"))) << ir.substr(0, 4000);
  EXPECT_FALSE(std::regex_search(ir, std::regex(R"([@_]expf|fdiv <)"))) << ir.substr(0, 4000);
  (void)y;
}

TEST(Vectorization, RowReductionVectorizes) {
  Tensor x = testing::random_tensor({64, 1024}, 3, Device::parse("lazy:cpu"));
  mark_step();
  Tensor s = (x * x).sum({1});
  mark_step();
  EXPECT_TRUE(std::regex_search(sources_of_last_graph(), std::regex(R"(<[0-9]+ x float>)")));
  (void)s;
}

// Softmax computes exp once per element: its output stage reads the values its sum stage kept
// (codegen.cc find_row_reuse) instead of a second inline exp. Counted by a coefficient of the
// inline exp (Cephes' P0, once per vector lane): as many copies as in the row sum of exps alone.
TEST(Vectorization, SoftmaxComputesExpOncePerElement) {
  Tensor x = testing::random_tensor({64, 1024}, 8, Device::parse("lazy:cpu"));
  mark_step();
  auto exp_copies = [] {
    const std::string ir = sources_of_last_graph();
    size_t n = 0;
    for (size_t at = ir.find("0x3F2A0D2CE0000000"); at != std::string::npos;
         at = ir.find("0x3F2A0D2CE0000000", at + 1))
      ++n;
    return n;
  };
  Tensor y = softmax(x, -1);
  mark_step();
  ASSERT_EQ(metrics::last_graph().kernels, 1);
  const size_t in_softmax = exp_copies();
  Tensor s =
      reduce(Op::ReduceSum, unary(Op::Exp, x - reduce(Op::ReduceMax, x, {1}, true)), {1}, false);
  mark_step();
  ASSERT_EQ(metrics::last_graph().kernels, 1);
  const size_t in_sum = exp_copies();
  EXPECT_GT(in_sum, 0u);
  EXPECT_EQ(in_softmax, in_sum);
  (void)y, (void)s;
}

// A sum down columns (a bias gradient) loads whole vectors across neighbouring outputs
// (codegen.cc emit_column_segment), where one output at a time gathered its column from scalar
// loads 1,024 floats apart (about 10x slower on [128, 1024]).
TEST(Vectorization, ColumnReductionLoadsVectorsAcrossOutputs) {
  Tensor x = testing::random_tensor({128, 1024}, 7, Device::parse("lazy:cpu"));
  mark_step();
  Tensor s = (x * x).sum({0});
  mark_step();
  ASSERT_EQ(metrics::last_graph().kernels, 1);
  EXPECT_TRUE(std::regex_search(sources_of_last_graph(), std::regex(R"(load <[0-9]+ x float>)")))
      << sources_of_last_graph().substr(0, 4000);
  const auto got = s.to_vector<float>();
  const auto xv = x.to_vector<float>();
  for (int64_t j = 0; j < 1024; j += 97) {
    double want = 0;
    for (int64_t i = 0; i < 128; ++i) want += double(xv[i * 1024 + j]) * xv[i * 1024 + j];
    EXPECT_NEAR(got[j], want, 1e-4 * want) << "column " << j;
  }
}
#endif

}  // namespace
}  // namespace lt
