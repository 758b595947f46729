// Identical kernels in one graph (a stack of equal layers) compile once: the CPU backend emits one
// function per distinct loop IR and aliases the repeats, so results stay right and the module
// holds one definition.
#include <gtest/gtest.h>

#include <cmath>

#include "runtime/executor.h"
#include "runtime/metrics.h"
#include "runtime/ops.h"
#include "runtime/sync.h"
#include "test_util.h"

namespace lt {
namespace {

size_t count(const std::string& s, const std::string& needle) {
  size_t n = 0;
  for (size_t at = s.find(needle); at != std::string::npos; at = s.find(needle, at + 1)) ++n;
  return n;
}

TEST(KernelDedup, RepeatedLayersCompileOneFunction) {
  Device d = Device::parse("lazy:cpu");
  auto va = testing::random_floats(4096, 1), vb = testing::random_floats(4096, 2),
       vc = testing::random_floats(4096, 3);
  Tensor a = from_host(va.data(), DType::Float32, {64, 64}, d),
         b = from_host(vb.data(), DType::Float32, {64, 64}, d);
  Tensor c = from_host(vc.data(), DType::Float32, {64, 64}, d);
  mark_step();
  // Three separate outputs of the same shape of computation: three kernels, one code.
  Tensor ya = softmax(a.sin() * 2.0, 1), yb = softmax(b.sin() * 2.0, 1),
         yc = softmax(c.sin() * 2.0, 1);
  mark_step();
  EXPECT_EQ(metrics::last_graph().kernels, 3);
  std::string src;
  for (const auto& s : last_kernel_sources()) src += s;
  EXPECT_EQ(count(src, "define "), 1u) << src.substr(0, 2000);
  for (auto [t, v] : {std::pair{ya, va}, std::pair{yb, vb}, std::pair{yc, vc}}) {
    auto got = t.to_vector<double>();
    for (int r = 0; r < 64; ++r) {
      double mx = -1e30, sum = 0;
      for (int j = 0; j < 64; ++j) mx = std::max(mx, 2.0 * std::sin(v[r * 64 + j]));
      for (int j = 0; j < 64; ++j) sum += std::exp(2.0 * std::sin(v[r * 64 + j]) - mx);
      for (int j = 0; j < 64; ++j)
        EXPECT_NEAR(got[r * 64 + j], std::exp(2.0 * std::sin(v[r * 64 + j]) - mx) / sum, 1e-6);
    }
  }
}

}  // namespace
}  // namespace lt
