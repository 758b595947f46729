// The CPU symbolic-plan tests' driver (cpu_symbolic_test.cc, cpu_symbolic_gemm_test.cc): a plan
// built symbolically at its first binding, compiled once and run at every binding against the same
// plan built and compiled statically there, and a reference check of each binding's outputs.
#pragma once
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "cpu_codegen_util.h"

namespace lt::cpu_symbolic_util {

using Builder = std::function<Plan(std::span<const int64_t> sizes, bool sym)>;
// Inputs for one binding; the reference check of its outputs.
using Inputs = std::function<std::vector<std::vector<float>>(std::span<const int64_t> sizes)>;
using Check =
    std::function<void(std::span<const int64_t> sizes, const std::vector<std::vector<float>>& in,
                       const std::vector<std::vector<float>>& out)>;

inline std::vector<RunInput> run_inputs(const std::vector<BufferPtr>& bufs) {
  std::vector<RunInput> r;
  for (const auto& b : bufs) r.push_back({b.get()});
  return r;
}

// Compiles build(first binding, sym) once and runs it for every binding; per binding also compiles
// build(binding, static) and expects the `outputs` buffers equal (within `ulp` float32 ulps, or
// `atol` apart when atol >= 0) and check() to hold.
inline void check_bindings(const Builder& build, const Inputs& inputs,
                           const std::vector<int>& outputs,
                           const std::vector<std::vector<int64_t>>& bindings, const Check& check,
                           int64_t ulp = 0, double atol = -1) {
  using cpu_codegen_test::cpu_backend;
  Plan sp = build(bindings.front(), true);
  ASSERT_TRUE(sp.sym.symbolic());
  bool any_symbolic = false;
  for (const auto& k : sp.kernels) any_symbolic = any_symbolic || k.symbolic();
  EXPECT_TRUE(any_symbolic || !sp.sym.gemms.empty());
  auto exe = cpu_backend().compile(sp);
  for (const auto& sizes : bindings) {
    SCOPED_TRACE("binding " + ::testing::PrintToString(sizes));
    Plan st = build(sizes, false);
    ASSERT_FALSE(st.sym.symbolic());
    const auto in = inputs(sizes);
    std::vector<BufferPtr> bufs;
    for (const auto& v : in) bufs.push_back(cpu_codegen_test::host(v));
    auto sym_out = exe->run_symbolic(run_inputs(bufs), nullptr, sizes);
    auto static_out = cpu_backend().compile(st)->run(run_inputs(bufs), nullptr);
    std::vector<std::vector<float>> got;
    for (int o : outputs) {
      const size_t n = static_cast<size_t>(st.buffers[o].numel);
      ASSERT_TRUE(sym_out[o]);
      auto a = cpu_codegen_test::read<float>(sym_out[o], n);
      auto b = cpu_codegen_test::read<float>(static_out[o], n);
      for (size_t i = 0; i < n; ++i)
        ASSERT_TRUE(cpu_codegen_test::ulps(a[i], b[i], true) <= ulp ||
                    (atol >= 0 && std::fabs(a[i] - b[i]) <= atol))
            << "output " << o << " [" << i << "]: symbolic " << a[i] << " static " << b[i];
      got.push_back(std::move(a));
    }
    check(sizes, in, got);
  }
}

inline void expect_close(float got, double want, double rel, const std::string& where) {
  ASSERT_NEAR(got, want, rel * (1 + std::fabs(want))) << where;
}

}  // namespace lt::cpu_symbolic_util
