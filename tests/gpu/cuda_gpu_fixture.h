// The CUDA backend tests' shared fixture and host oracles (tests/gpu/cuda_backend_gpu_test.cc,
// cuda_graphs_gpu_test.cc): host arrays, float64 math rounded to the output dtype, and a fixture
// that compiles and runs a plan on the CUDA backend, skipping loudly without a GPU. Included by one
// source file per test executable.
#pragma once
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>

#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/driver_api.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/half.h"
#include "lowering/lower.h"
#include "tests/cpp/graph_util.h"
#include "tests/gpu/cuda_test_kernels.h"

namespace lt::cudagpu {

using namespace cudatest;

// ---- host data ----

struct HostArray {
  DType t = DType::Float32;
  int64_t n = 0;
  std::vector<char> bytes;
};

inline HostArray make_array(DType t, const std::vector<double>& v) {
  HostArray a{t, static_cast<int64_t>(v.size()), std::vector<char>(v.size() * dtype_size(t))};
  for (size_t i = 0; i < v.size(); ++i) {
    void* p = a.bytes.data() + i * dtype_size(t);
    if (is_floating(t))
      store_from_double(p, t, v[i]);
    else
      store_from_int(p, t, static_cast<int64_t>(v[i]));
  }
  return a;
}

inline std::vector<double> to_doubles(const HostArray& a) {
  std::vector<double> v(static_cast<size_t>(a.n));
  for (size_t i = 0; i < v.size(); ++i)
    v[i] = load_as_double(a.bytes.data() + i * dtype_size(a.t), a.t);
  return v;
}

// v rounded to dtype t as the device stores it (PyTorch's rounding: nearest even).
inline double round_to(DType t, double v) {
  char buf[8];
  if (is_floating(t))
    store_from_double(buf, t, v);
  else
    store_from_int(buf, t, static_cast<int64_t>(v));
  return load_as_double(buf, t);
}

// An integer v wrapped to integer dtype t (two's complement), as a double.
inline double wrap_int(DType t, int64_t v) {
  char buf[8];
  store_from_int(buf, t, v);
  return load_as_double(buf, t);
}

inline std::vector<double> random_values(DType t, int64_t n, uint32_t seed, double lo = -2,
                                         double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) {
    if (t == DType::Bool)
      x = rng() % 2;
    else if (t == DType::UInt8)
      x = rng() % 256;
    else if (t == DType::Int8)
      x = static_cast<int>(rng() % 256) - 128;
    else if (t == DType::Int32)
      x = static_cast<int32_t>(rng());
    else if (t == DType::Int64)
      x = static_cast<double>(static_cast<int64_t>(rng()) - (1ll << 31)) * 1024;
    else
      x = round_to(t, d(rng));
  }
  return v;
}

// ---- running a plan ----

struct Input {
  HostArray array;    // for Input buffers
  double scalar = 0;  // for Scalar buffers
  int64_t scalar_i = 0;
};
inline Input scalar_in(double v) { return Input{{}, v, static_cast<int64_t>(v)}; }

class CudaGpu : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (cuda_device_available()) backend_ = make_cuda_backend();
  }
  static void TearDownTestSuite() { backend_.reset(); }
  void SetUp() override {
    if (!backend_) GTEST_SKIP() << "no CUDA device: " << cuda_driver().error;
  }
  CudaBackend& cuda() { return dynamic_cast<CudaBackend&>(*backend_); }

  // Runs `plan` with graph inputs `in` (indexed like BufferSpec::input); returns each output
  // buffer's values (in plan.output_buffers order) as doubles.
  std::vector<std::vector<double>> run(const Plan& plan, const std::vector<Input>& in,
                                       int* launches = nullptr,
                                       std::unique_ptr<Executable>* keep = nullptr) {
    auto exe = backend_->compile(plan);
    std::vector<BufferPtr> dev(in.size());
    std::vector<RunInput> ri(in.size());
    for (const auto& b : plan.buffers) {
      if (b.input < 0) continue;
      const Input& x = in.at(static_cast<size_t>(b.input));
      if (b.kind == BufferSpec::Kind::Scalar) {
        ri[b.input].scalar = x.scalar;
        ri[b.input].scalar_i = x.scalar_i;
      } else {
        EXPECT_EQ(x.array.t, b.dtype);
        EXPECT_EQ(x.array.n, b.numel);
        dev[b.input] = backend_->allocate(x.array.bytes.size());
        backend_->copy_from_host(*dev[b.input], x.array.bytes.data(), x.array.bytes.size());
        ri[b.input].buffer = dev[b.input].get();
      }
    }
    RunStats stats;
    auto outs = exe->run(ri, &stats);
    if (launches) *launches = stats.kernel_launches;
    std::vector<std::vector<double>> result;
    for (int ob : plan.output_buffers) {
      const BufferSpec& b = plan.buffers[static_cast<size_t>(ob)];
      HostArray h{b.dtype, b.numel,
                  std::vector<char>(static_cast<size_t>(b.numel) * dtype_size(b.dtype))};
      EXPECT_TRUE(outs.at(static_cast<size_t>(ob)));
      if (!outs[ob]) continue;
      EXPECT_FALSE(outs[ob]->on_host());
      backend_->copy_to_host(h.bytes.data(), *outs[ob], h.bytes.size());
      result.push_back(to_doubles(h));
    }
    if (keep) *keep = std::move(exe);
    return result;
  }

  static std::unique_ptr<Backend> backend_;
};
inline std::unique_ptr<Backend> CudaGpu::backend_;

// got == want within atol + rtol*|want|; NaN matches NaN, infinities must match exactly.
inline void expect_near(const std::vector<double>& got, const std::vector<double>& want,
                        double rtol, double atol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i) {
    bool ok;
    if (std::isnan(want[i]))
      ok = std::isnan(got[i]);
    else if (std::isinf(want[i]))
      ok = got[i] == want[i];
    else
      ok = std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i]);
    if (!ok) {
      ++bad;
      ADD_FAILURE() << what << " at " << i << ": got " << got[i] << ", want " << want[i];
    }
  }
}

inline double rtol_of(DType t) {
  switch (t) {
    case DType::Float16:
      return 2e-3;
    case DType::BFloat16:
      return 1.6e-2;
    case DType::Float32:
      return 1e-5;
    case DType::Float64:
      return 1e-12;
    default:
      return 0;
  }
}

inline std::vector<double> host_softmax(const std::vector<double>& x, int64_t n, int64_t m) {
  std::vector<double> y(x.size());
  for (int64_t i = 0; i < n; ++i) {
    double mx = -INFINITY, sum = 0;
    for (int64_t j = 0; j < m; ++j) mx = std::max(mx, x[i * m + j]);
    for (int64_t j = 0; j < m; ++j) sum += std::exp(x[i * m + j] - mx);
    for (int64_t j = 0; j < m; ++j) y[i * m + j] = std::exp(x[i * m + j] - mx) / sum;
  }
  return y;
}

}  // namespace lt::cudagpu
