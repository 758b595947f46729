// Helpers of the lt::nn tests: host copies, float64 central differences, error expectations.
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "test_util.h"

namespace lt::nntest {

inline std::vector<double> host(const Tensor& t) { return t.to_vector<double>(); }

inline Tensor tensor_of(const std::vector<float>& v, Shape s, const Device& d) {
  return from_host(v.data(), DType::Float32, std::move(s), d);
}

inline Tensor int_tensor(const std::vector<int64_t>& v, Shape s, const Device& d) {
  return from_host(v.data(), DType::Int64, std::move(s), d);
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// d f / d x at x by float64 central differences.
inline std::vector<double> fd_grad(const std::function<double(const std::vector<double>&)>& f,
                                   std::vector<double> x, double h = 1e-6) {
  std::vector<double> g(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double x0 = x[i];
    x[i] = x0 + h;
    const double up = f(x);
    x[i] = x0 - h;
    const double down = f(x);
    x[i] = x0;
    g[i] = (up - down) / (2 * h);
  }
  return g;
}

// `f` throws lt::Error whose message contains every one of `needles`.
template <typename F>
void expect_error(F f, const std::vector<std::string>& needles) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << needles.front();
  } catch (const Error& e) {
    for (auto& n : needles) EXPECT_NE(std::string(e.what()).find(n), std::string::npos) << e.what();
  }
}

}  // namespace lt::nntest
