// Helpers shared by the C++ tests: random host data and tolerance checks.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include <lazytensor/lazytensor.h>

namespace lt::testing {

inline const Device kLazyCpu = Device::parse("lazy:cpu");

inline std::vector<float> random_floats(int64_t n, uint32_t seed, float lo = -2.f, float hi = 2.f) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(rng);
  return v;
}

inline Tensor random_tensor(Shape s, uint32_t seed, const Device& dev, float lo = -2.f,
                            float hi = 2.f) {
  auto v = random_floats(numel(s), seed, lo, hi);
  return from_host(v.data(), DType::Float32, std::move(s), dev);
}

inline void expect_close(const std::vector<double>& got, const std::vector<double>& want,
                         double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " at " << i;
      continue;
    }
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " at " << i;
  }
}

}  // namespace lt::testing
