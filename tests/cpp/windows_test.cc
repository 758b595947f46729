// Sliding windows, conv2d and pooling against direct nested loops on eager cpu, lazy:cpu and
// lazy:reference; gradients flow to input, weight and bias; kernel counts pinned on lazy:cpu; the
// C++ nn layers train a tiny CNN step.
#include "runtime/windows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ir/error.h"
#include "nn/nn.h"
#include "nn/optim.h"
#include "runtime/metrics.h"
#include "runtime/sync.h"
#include "test_util.h"

namespace lt {
namespace {

Tensor rand_t(Shape s, uint32_t seed, const Device& d) {
  auto f = testing::random_floats(numel(s), seed);
  return from_host(f.data(), DType::Float32, s, d);
}

// Direct convolution: out[n,o,y,x] = b[o] + sum_{c,i,j} in[n,c,y*s+i*dl-p, x*s+j*dl-p] w[o,c,i,j].
std::vector<double> conv_loops(const std::vector<float>& in, Shape is, const std::vector<float>& w,
                               Shape ws, const std::vector<float>& b, int64_t s, int64_t p,
                               int64_t dl, Shape* os) {
  const int64_t N = is[0], C = is[1], H = is[2], W = is[3], O = ws[0], K = ws[2];
  const int64_t OH = (H + 2 * p - dl * (K - 1) - 1) / s + 1,
                OW = (W + 2 * p - dl * (K - 1) - 1) / s + 1;
  *os = {N, O, OH, OW};
  std::vector<double> out;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t y = 0; y < OH; ++y)
        for (int64_t x = 0; x < OW; ++x) {
          double acc = b[o];
          for (int64_t c = 0; c < C; ++c)
            for (int64_t i = 0; i < K; ++i)
              for (int64_t j = 0; j < K; ++j) {
                int64_t yy = y * s + i * dl - p, xx = x * s + j * dl - p;
                if (yy < 0 || yy >= H || xx < 0 || xx >= W) continue;
                acc += static_cast<double>(in[((n * C + c) * H + yy) * W + xx]) *
                       w[((o * C + c) * K + i) * K + j];
              }
          out.push_back(acc);
        }
  return out;
}

// `f` throws lt::Error whose message contains `needle`.
template <typename F>
void expect_error(F f, const std::string& needle) {
  try {
    f();
    ADD_FAILURE() << "no error; expected one containing: " << needle;
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(needle), std::string::npos) << e.what();
  }
}

class Windows : public ::testing::TestWithParam<const char*> {
 protected:
  Device dev() const { return Device::parse(GetParam()); }
};

TEST_P(Windows, SlidingWindowReadsTheRightElements) {
  for (auto [n, k, s, dl] : std::vector<std::array<int64_t, 4>>{
           {9, 3, 1, 1}, {9, 3, 2, 2}, {10, 2, 2, 1}, {8, 2, 5, 1}, {7, 1, 3, 1}}) {
    std::vector<float> v(static_cast<size_t>(2 * n));
    for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i);
    Tensor w = sliding_window(from_host(v.data(), DType::Float32, {2, n}, dev()), 1, k, s, dl);
    const int64_t out = (n - dl * (k - 1) - 1) / s + 1;
    ASSERT_EQ(w.shape(), (Shape{2, out, k}));
    auto got = w.to_vector<float>();
    for (int64_t r = 0; r < 2; ++r)
      for (int64_t o = 0; o < out; ++o)
        for (int64_t j = 0; j < k; ++j)
          EXPECT_EQ(got[(r * out + o) * k + j], static_cast<float>(r * n + o * s + j * dl))
              << n << " " << k << " " << s;
  }
}

TEST_P(Windows, Conv2dMatchesDirectLoops) {
  for (auto [s, p, dl] :
       std::vector<std::array<int64_t, 3>>{{1, 0, 1}, {1, 1, 1}, {2, 1, 1}, {2, 2, 2}}) {
    Shape is = {2, 3, 9, 8}, ws = {4, 3, 3, 3}, os;
    Tensor x = rand_t(is, 1, dev()), w = rand_t(ws, 2, dev()), b = rand_t({4}, 3, dev());
    auto want = conv_loops(x.to_vector<float>(), is, w.to_vector<float>(), ws, b.to_vector<float>(),
                           s, p, dl, &os);
    Tensor y = conv2d(x, w, b, {s, s}, {p, p}, {dl, dl});
    ASSERT_EQ(y.shape(), os);
    testing::expect_close(y.to_vector<double>(), want, 1e-4, 1e-4, "conv2d");
  }
}

TEST_P(Windows, MaxAndAvgPoolMatchDirectLoops) {
  Tensor x = rand_t({1, 2, 7, 6}, 4, dev());
  auto v = x.to_vector<float>();
  Tensor m = max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
  Tensor a = avg_pool2d(x, {3, 3}, {2, 2}, {1, 1}, false, false);
  ASSERT_EQ(m.shape(), (Shape{1, 2, 4, 3}));
  std::vector<double> wm, wa;
  for (int64_t c = 0; c < 2; ++c)
    for (int64_t y = 0; y < 4; ++y)
      for (int64_t xo = 0; xo < 3; ++xo) {
        double mx = -std::numeric_limits<double>::infinity(), sum = 0;
        int cnt = 0;
        for (int64_t i = 0; i < 3; ++i)
          for (int64_t j = 0; j < 3; ++j) {
            int64_t yy = y * 2 + i - 1, xx = xo * 2 + j - 1;
            if (yy < 0 || yy >= 7 || xx < 0 || xx >= 6) continue;
            double e = v[(c * 7 + yy) * 6 + xx];
            mx = std::max(mx, e);
            sum += e;
            ++cnt;
          }
        wm.push_back(mx);
        wa.push_back(sum / cnt);  // count_include_pad = false
      }
  testing::expect_close(m.to_vector<double>(), wm, 1e-6, 1e-6, "max_pool2d");
  testing::expect_close(a.to_vector<double>(), wa, 1e-5, 1e-6, "avg_pool2d");
}

TEST_P(Windows, GradientsReachInputWeightAndBias) {
  Tensor x = rand_t({2, 2, 6, 6}, 5, dev()).requires_grad_();
  Tensor w = rand_t({3, 2, 3, 3}, 6, dev()).requires_grad_();
  Tensor b = rand_t({3}, 7, dev()).requires_grad_();
  max_pool2d(conv2d(x, w, b, {1, 1}, {1, 1}).relu(), {2, 2}).sum().backward();
  ASSERT_TRUE(x.grad().defined() && w.grad().defined() && b.grad().defined());
  EXPECT_EQ(x.grad().shape(), x.shape());
  EXPECT_EQ(w.grad().shape(), w.shape());
  // d(sum)/d(bias[o]) = the number of pooled maxima that were positive in channel o.
  auto gb = b.grad().to_vector<double>();
  for (double g : gb) EXPECT_TRUE(g >= 0 && g <= 18 && g == std::floor(g)) << g;
}

TEST_P(Windows, BadInputIsAClearError) {
  Tensor x = rand_t({1, 3, 5, 5}, 8, dev());
  expect_error(
      [&] {
        conv2d(x, rand_t({4, 2, 3, 3}, 9, dev()));
      },
      "conv2d: input [1, 3, 5, 5] and weight [4, 2, 3, 3]");
  expect_error([&] { max_pool2d(x, {2, 2}, {}, {2, 2}); }, "pad should be at most half");
  expect_error([&] { sliding_window(x, 2, 7, 1, 1); }, "smaller than the kernel extent");
}

INSTANTIATE_TEST_SUITE_P(Devices, Windows, ::testing::Values("cpu", "lazy:cpu", "lazy:reference"));

TEST(WindowsLazy, ConvReluPoolForwardKernelCount) {
  Device d = Device::parse("lazy:cpu");
  Tensor x = rand_t({2, 3, 10, 10}, 10, d), w = rand_t({8, 3, 3, 3}, 11, d), b = rand_t({8}, 12, d);
  mark_step();
  Tensor y = max_pool2d(conv2d(x, w, b, {1, 1}, {1, 1}).relu(), {2, 2});
  mark_step();
  // im2col matrix (a copy kernel for the GEMM operand), the GEMM, bias + relu + pool fused.
  EXPECT_LE(metrics::last_graph().kernels, 3);
  EXPECT_EQ(y.shape(), (Shape{2, 8, 5, 5}));
}

TEST(WindowsLazy, CnnTrainStepIsOneGraphCompiledOnce) {
  Device d = Device::parse("lazy:cpu");
  manual_seed(0);
  nn::Sequential net;
  net.add(std::make_shared<nn::Conv2d>(1, 4, 3, 1, 1, true, d))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::MaxPool2d>(2))
      .add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::Linear>(4 * 4 * 4, 3, true, d));
  optim::SGD opt(net.parameters(), 0.1);
  Tensor x = rand_t({8, 1, 8, 8}, 13, d);
  std::vector<int64_t> labels = {0, 1, 2, 0, 1, 2, 0, 1};
  Tensor y = from_host(labels.data(), DType::Int64, {8}, d);
  mark_step();
  metrics::reset();
  double first = 0, last = 0;
  for (int step = 0; step < 15; ++step) {
    opt.zero_grad();
    Tensor loss = nn::cross_entropy(net(x), y);
    loss.backward();
    opt.step();
    mark_step();
    (step == 0 ? first : last) = loss.item();
  }
  auto c = metrics::counters();
  EXPECT_EQ(c.at("graph_compiles"), 1);  // every step is the same graph
  EXPECT_LT(last, first);
}

}  // namespace
}  // namespace lt
