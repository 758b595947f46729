// Runtime: sync points and their reasons, the graph cache, runtime scalars, the pending registry.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "test_util.h"

namespace lt {
namespace {

using testing::random_tensor;

class Runtime : public ::testing::Test {
 protected:
  void SetUp() override {
    mark_step();
    metrics::reset();
  }
  Device lazy = Device::parse("lazy:cpu");
};

TEST_F(Runtime, TenStepsCompileOnceAsOneKernel) {
  Tensor x = random_tensor({32, 64}, 1, lazy), w = random_tensor({64}, 2, lazy),
         b = random_tensor({64}, 3, lazy);
  metrics::reset();
  for (int step = 0; step < 10; ++step) {
    Tensor y = ((x * w + b).sin() * 2).relu().sum({1});
    mark_step();
    EXPECT_FALSE(y.is_pending());
  }
  auto c = metrics::counters();
  EXPECT_EQ(c["graph_compiles"], 1);
  EXPECT_EQ(c["graph_cache_hits"], 9);
#ifdef LT_HAVE_LLVM  // the reference interpreter (cpu without LLVM) runs prims, not kernels
  EXPECT_EQ(metrics::last_graph().kernels, 1);
#endif
  EXPECT_EQ(metrics::syncs_by_reason()["mark_step"], 10);
}

TEST_F(Runtime, ChangingAScalarDoesNotRecompile) {
  Tensor x = random_tensor({100}, 4, lazy);
  auto xs = x.to_vector<float>();
  metrics::reset();
  for (int step = 1; step <= 5; ++step) {
    double scale = 0.1 * step;
    Tensor y = (x * scale).sum();
    double want = 0;
    for (float v : xs)
      want += static_cast<double>(static_cast<float>(v * static_cast<float>(scale)));
    EXPECT_NEAR(y.item(), want, 1e-4);
  }
  EXPECT_EQ(metrics::counters()["graph_compiles"], 1);
  EXPECT_EQ(metrics::counters()["graph_cache_hits"], 4);
}

// A cache hit binds the new step's data (never the data the graph was compiled with), and a
// change in which inputs are shared is a new graph, though every node hash stays the same.
TEST_F(Runtime, CacheHitBindsNewDataAndASharingChangeMisses) {
  auto expect_values = [](const Tensor& got, const std::vector<float>& a,
                          const std::vector<float>& b) {
    auto v = got.to_vector<float>();
    ASSERT_EQ(v.size(), a.size());
    for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], a[i] * 2.0f + b[i], 1e-5) << i;
  };
  for (int step = 0; step < 3; ++step) {
    Tensor a = random_tensor({257}, 10 + step, lazy), b = random_tensor({257}, 20 + step, lazy);
    Tensor y = a * 2 + b;
    mark_step();
    expect_values(y, a.to_vector<float>(), b.to_vector<float>());
  }
  EXPECT_EQ(metrics::counters()["graph_compiles"], 1);
  EXPECT_EQ(metrics::counters()["graph_cache_hits"], 2);
  Tensor a = random_tensor({257}, 30, lazy);
  Tensor y = a * 2 + a;  // same node hashes as a * 2 + b, one input instead of two
  mark_step();
  EXPECT_EQ(metrics::counters()["graph_compiles"], 2);
  expect_values(y, a.to_vector<float>(), a.to_vector<float>());
}

TEST_F(Runtime, ItemOnManyElementsIsAClearErrorAndTheSessionGoesOn) {
  Tensor x = random_tensor({4}, 5, lazy);
  EXPECT_THROW((x + 1).item(), Error);
  Tensor s = (x * 0 + 3).sum();
  EXPECT_NEAR(s.item(), 12.0, 1e-6);
}

TEST_F(Runtime, ReasonsPerSyncKind) {
  Tensor x = random_tensor({4}, 6, lazy);
  mark_step();
  metrics::reset();
  (x.sum()).item();
  std::vector<float> out(4);
  (x * 2).copy_to_host(out.data(), SyncReason::Numpy);
  (x * 3).to(kCPU);
  (x * 4).str();
  mark_step();
  auto r = metrics::syncs_by_reason();
  EXPECT_EQ(r["item"], 1);
  EXPECT_EQ(r["numpy"], 1);
  EXPECT_EQ(r["to_cpu"], 1);
  EXPECT_EQ(r["print"], 1);
  EXPECT_EQ(r["mark_step"], 1);
  EXPECT_EQ(metrics::counters()["syncs"], 5);
}

TEST_F(Runtime, OnlyTheRequestedTensorIsComputed) {
  Tensor x = random_tensor({8}, 7, lazy);
  Tensor a = x.sin().sum(), b = x.cos();
  ASSERT_EQ(pending_tensor_count(), 2u);
  a.item();
  EXPECT_FALSE(a.is_pending());
  EXPECT_TRUE(b.is_pending());
  EXPECT_EQ(pending_tensor_count(), 1u);
  mark_step();
  EXPECT_EQ(pending_tensor_count(), 0u);
}

TEST_F(Runtime, NothingGrowsAcrossSteps) {
  Tensor w = random_tensor({64}, 8, lazy);
  for (int i = 0; i < 50; ++i) {
    w = w - (w * 0.01).tanh();
    mark_step();
    EXPECT_EQ(pending_tensor_count(), 0u);
    EXPECT_EQ(w.node()->op, Op::Param);  // the IR was dropped: w is data again
  }
}

TEST_F(Runtime, MixingDevicesIsAClearError) {
  Tensor a = random_tensor({3}, 9, lazy), b = random_tensor({3}, 10, kCPU);
  try {
    (void)(a + b);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("same device"), std::string::npos) << e.what();
  }
}

TEST_F(Runtime, UnknownDeviceAndMissingCuda) {
  EXPECT_THROW(Device::parse("tpu"), Error);
  EXPECT_THROW(Device::parse("lazy:x"), Error);
  EXPECT_THROW(random_tensor({2}, 1, Device::cuda(0)), Error);
}

TEST_F(Runtime, EagerCpuCompilesEachOpOnce) {
  Tensor x = random_tensor({16}, 11, kCPU);
  metrics::reset();
  for (int i = 0; i < 5; ++i) x = x.sin() + 1.5;
  auto c = metrics::counters();
  EXPECT_EQ(c["graph_compiles"], 2);  // sin, add-scalar
  EXPECT_EQ(c["graph_cache_hits"], 8);
  EXPECT_FALSE(x.is_pending());
}

TEST_F(Runtime, SameSeedSameNumbersOnEveryDevice) {
  manual_seed(123);
  auto a = randn({1000}, DType::Float32, kCPU).to_vector<float>();
  manual_seed(123);
  auto b = randn({1000}, DType::Float32, lazy).to_vector<float>();
  manual_seed(123);
  auto c = randn({1000}, DType::Float32, Device::parse("lazy:reference")).to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_NEAR(a[i], b[i], 1e-5f);
    ASSERT_NEAR(a[i], c[i], 1e-5f);
  }
  double mean = 0, var = 0;
  for (float v : a) mean += v;
  mean /= a.size();
  for (float v : a) var += (v - mean) * (v - mean);
  var /= a.size();
  EXPECT_NEAR(mean, 0, 0.1);
  EXPECT_NEAR(var, 1, 0.15);
}

// Float scalars int64 cannot hold (1e30, inf, NaN) used to be cast to int64 for the Scalar's
// integer twin: undefined behaviour that UBSan reports (make test-asan runs this). Each now keeps
// its float value where float math reads it, and fills of integral tensors truncate in range.
TEST_F(Runtime, FloatScalarsBeyondInt64AreFine) {
  EXPECT_EQ(Scalar(1e30).i, 0);
  EXPECT_EQ(Scalar(std::nan("")).i, 0);
  EXPECT_EQ(Scalar(-2.9).i, -2);
  for (const Device& d : {kCPU, lazy}) {
    Tensor x = random_tensor({8}, 5, d);
    auto xs = x.to_vector<float>();
    auto big = (x * 1e30).to_vector<float>();
    auto inf = (x + std::numeric_limits<double>::infinity()).to_vector<float>();
    for (size_t k = 0; k < xs.size(); ++k) {
      EXPECT_FLOAT_EQ(big[k], xs[k] * 1e30f) << k;
      EXPECT_TRUE(std::isinf(inf[k]) && inf[k] > 0) << k;
    }
    // pad's fill on an int64 tensor: truncated, as PyTorch's constant_pad_nd converts it.
    Tensor i = cast(x * 10.0, DType::Int64);
    auto padded = pad(i, {1, 0}, -7.9).to_vector<int64_t>();
    ASSERT_EQ(padded.size(), 9u);
    EXPECT_EQ(padded[0], -7);
    EXPECT_THROW(pad(i, {1, 0}, 1e30),
                 Error);  // PyTorch: "cannot be converted ... without overflow"
    // full: bool takes any nonzero as true; int64 truncates.
    EXPECT_EQ(full({2}, Scalar(0.5), DType::Bool, d).to_vector<int64_t>(),
              (std::vector<int64_t>{1, 1}));
    EXPECT_EQ(full({2}, Scalar(-3.7), DType::Int64, d).to_vector<int64_t>(),
              (std::vector<int64_t>{-3, -3}));
  }
}

}  // namespace
}  // namespace lt
