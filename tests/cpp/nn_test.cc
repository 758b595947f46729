// lt::nn layers, losses and containers on eager cpu and lazy:cpu: forwards against nested loops
// over host data, parameter and input gradients against float64 central differences of those
// loops, train/eval behaviour (dropout's zeroing and scaling, BatchNorm2d's running statistics with
// PyTorch's unbiased running_var), PyTorch's initializations, state_dict/buffers/to(), and bad
// input raising lt::Error that names the layer and the shapes.
#include "nn/nn.h"

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "nn/optim.h"
#include "nn_test_util.h"
#include "runtime/metrics.h"
#include "runtime/sync.h"

namespace lt {
namespace {

using nntest::expect_error;
using nntest::fd_grad;
using nntest::host;
using nntest::int_tensor;
using nntest::tensor_of;
using nntest::to_double;
using testing::expect_close;
using testing::random_floats;

class NN : public ::testing::TestWithParam<const char*> {
 protected:
  Device dev() const { return Device::parse(GetParam()); }
  Tensor rnd(Shape s, uint32_t seed) const {
    return testing::random_tensor(std::move(s), seed, dev());
  }
};

// Sets a module's tensor `name` to `v` (through load_state_dict, non-strict).
void set(nn::Module& m, const std::string& name, const std::vector<float>& v, Shape s) {
  m.load_state_dict({{name, tensor_of(v, std::move(s), kCPU)}}, /*strict=*/false);
}

// Rows of length d normalized, then * w + b (LayerNorm's definition), in float64.
std::vector<double> layer_norm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, size_t d, double eps) {
  std::vector<double> y(x.size());
  for (size_t r = 0; r < x.size() / d; ++r) {
    double mean = 0, var = 0;
    for (size_t j = 0; j < d; ++j) mean += x[r * d + j] / static_cast<double>(d);
    for (size_t j = 0; j < d; ++j)
      var += (x[r * d + j] - mean) * (x[r * d + j] - mean) / static_cast<double>(d);
    for (size_t j = 0; j < d; ++j)
      y[r * d + j] = (x[r * d + j] - mean) / std::sqrt(var + eps) * w[j] + b[j];
  }
  return y;
}

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

TEST_P(NN, LayerNormForwardAndGradientsMatchFloat64Loops) {
  nn::LayerNorm ln({4, 5}, 1e-5, true, true, dev());
  auto wv = random_floats(20, 1), bv = random_floats(20, 2), xv = random_floats(3 * 20, 3),
       rv = random_floats(60, 4);
  set(ln, "weight", wv, {4, 5});
  set(ln, "bias", bv, {4, 5});
  Tensor x = tensor_of(xv, {3, 4, 5}, dev()).detach();
  x.requires_grad_();
  Tensor y = ln(x);
  auto X = to_double(xv), W = to_double(wv), B = to_double(bv), R = to_double(rv);
  expect_close(host(y), layer_norm_ref(X, W, B, 20, 1e-5), 1e-4, 1e-5, "LayerNorm forward");
  (y * tensor_of(rv, {3, 4, 5}, dev())).sum().backward();
  expect_close(host(ln.weight().grad()),
               fd_grad([&](auto w) { return dot(layer_norm_ref(X, w, B, 20, 1e-5), R); }, W), 1e-3,
               1e-4, "LayerNorm d weight");
  expect_close(host(ln.bias().grad()),
               fd_grad([&](auto b) { return dot(layer_norm_ref(X, W, b, 20, 1e-5), R); }, B), 1e-3,
               1e-4, "LayerNorm d bias");
  expect_close(host(x.grad()),
               fd_grad([&](auto xx) { return dot(layer_norm_ref(xx, W, B, 20, 1e-5), R); }, X),
               1e-3, 1e-3, "LayerNorm d input");
}

TEST_P(NN, EmbeddingGathersRowsAndScattersGradients) {
  nn::Embedding emb(10, 4, std::nullopt, dev());
  std::vector<int64_t> idx = {3, 0, 9, 3, 3, 7};
  Tensor y = emb(int_tensor(idx, {2, 3}, dev()));
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  auto W = host(emb.weight()), Y = host(y);
  for (size_t p = 0; p < idx.size(); ++p)
    for (size_t j = 0; j < 4; ++j) EXPECT_EQ(Y[p * 4 + j], W[static_cast<size_t>(idx[p]) * 4 + j]);
  auto rv = random_floats(24, 5);
  auto R = to_double(rv);
  (y * tensor_of(rv, {2, 3, 4}, dev())).sum().backward();
  auto f = [&](const std::vector<double>& w) {
    double s = 0;
    for (size_t p = 0; p < idx.size(); ++p)
      for (size_t j = 0; j < 4; ++j) s += w[static_cast<size_t>(idx[p]) * 4 + j] * R[p * 4 + j];
    return s;
  };
  expect_close(host(emb.weight().grad()), fd_grad(f, W), 1e-4, 1e-5, "Embedding d weight");
}

TEST_P(NN, EmbeddingPaddingRowStartsAtZeroAndGetsNoGradient) {
  nn::Embedding emb(6, 3, -1, dev());  // padding_idx 5
  auto W = host(emb.weight());
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(W[5 * 3 + j], 0.0);
  set(emb, "weight", random_floats(18, 6), {6, 3});
  Tensor y = emb(int_tensor({5, 1, 5}, {3}, dev()));
  auto Y = host(y), W2 = host(emb.weight());
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(Y[j], W2[5 * 3 + j]);  // the padding row's (set) value
  y.sum().backward();
  auto g = host(emb.weight().grad());
  for (size_t j = 0; j < 3; ++j) {
    EXPECT_EQ(g[5 * 3 + j], 0.0);  // used twice, no gradient
    EXPECT_EQ(g[1 * 3 + j], 1.0);
    EXPECT_EQ(g[0 * 3 + j], 0.0);
  }
}

// BatchNorm2d in training: per-channel batch mean and biased variance over (N, H, W).
std::vector<double> batch_norm_ref(const std::vector<double>& x, const std::vector<double>& w,
                                   const std::vector<double>& b, size_t N, size_t C, size_t HW,
                                   std::vector<double>* mean = nullptr,
                                   std::vector<double>* var = nullptr) {
  std::vector<double> y(x.size()), m(C, 0), v(C, 0);
  const double cnt = static_cast<double>(N * HW);
  for (size_t c = 0; c < C; ++c) {
    for (size_t n = 0; n < N; ++n)
      for (size_t i = 0; i < HW; ++i) m[c] += x[(n * C + c) * HW + i] / cnt;
    for (size_t n = 0; n < N; ++n)
      for (size_t i = 0; i < HW; ++i) v[c] += std::pow(x[(n * C + c) * HW + i] - m[c], 2) / cnt;
    for (size_t n = 0; n < N; ++n)
      for (size_t i = 0; i < HW; ++i) {
        size_t k = (n * C + c) * HW + i;
        y[k] = (x[k] - m[c]) / std::sqrt(v[c] + 1e-5) * w[c] + b[c];
      }
  }
  if (mean) *mean = m;
  if (var) *var = v;
  return y;
}

TEST_P(NN, BatchNorm2dTrainUsesBatchStatsAndUpdatesRunningStatsLikePyTorch) {
  const size_t N = 4, C = 3, HW = 6;
  nn::BatchNorm2d bn(3, 1e-5, 0.1, true, true, dev());
  auto wv = random_floats(3, 7), bv = random_floats(3, 8);
  set(bn, "weight", wv, {3});
  set(bn, "bias", bv, {3});
  auto W = to_double(wv), B = to_double(bv);
  std::vector<double> rm(C, 0.0), rv(C, 1.0);
  const double count = static_cast<double>(N * HW);
  for (uint32_t step = 0; step < 2; ++step) {
    auto xv = random_floats(static_cast<int64_t>(N * C * HW), 10 + step);
    Tensor y = bn(tensor_of(xv, {4, 3, 2, 3}, dev()));
    std::vector<double> m, v;
    expect_close(host(y), batch_norm_ref(to_double(xv), W, B, N, C, HW, &m, &v), 1e-4, 1e-5,
                 "train forward");
    for (size_t c = 0; c < C; ++c) {
      rm[c] = 0.9 * rm[c] + 0.1 * m[c];
      rv[c] = 0.9 * rv[c] + 0.1 * v[c] * count / (count - 1);  // unbiased, as PyTorch
    }
  }
  expect_close(host(bn.running_mean()), rm, 1e-5, 1e-6, "running_mean");
  expect_close(host(bn.running_var()), rv, 1e-5, 1e-6, "running_var");
  EXPECT_EQ(bn.num_batches_tracked().item(), 2);
  // eval: the running statistics, and no update.
  bn.eval();
  auto xv = random_floats(static_cast<int64_t>(N * C * HW), 20);
  auto Y = host(bn(tensor_of(xv, {4, 3, 2, 3}, dev())));
  for (size_t k = 0; k < Y.size(); ++k) {
    size_t c = (k / HW) % C;
    ASSERT_NEAR(Y[k], (xv[k] - rm[c]) / std::sqrt(rv[c] + 1e-5) * W[c] + B[c], 1e-4) << k;
  }
  expect_close(host(bn.running_mean()), rm, 1e-5, 1e-6, "running_mean after eval");
  EXPECT_EQ(bn.num_batches_tracked().item(), 2);
}

TEST_P(NN, BatchNorm2dGradientsMatchFloat64Loops) {
  const size_t N = 3, C = 2, HW = 4;
  nn::BatchNorm2d bn(2, 1e-5, 0.1, true, true, dev());
  auto wv = random_floats(2, 30), bv = random_floats(2, 31), xv = random_floats(24, 32),
       rv = random_floats(24, 33);
  set(bn, "weight", wv, {2});
  set(bn, "bias", bv, {2});
  Tensor x = tensor_of(xv, {3, 2, 2, 2}, dev()).detach();
  x.requires_grad_();
  (bn(x) * tensor_of(rv, {3, 2, 2, 2}, dev())).sum().backward();
  auto X = to_double(xv), W = to_double(wv), B = to_double(bv), R = to_double(rv);
  expect_close(host(bn.weight().grad()),
               fd_grad([&](auto w) { return dot(batch_norm_ref(X, w, B, N, C, HW), R); }, W), 1e-3,
               1e-4, "d weight");
  expect_close(host(bn.bias().grad()),
               fd_grad([&](auto b) { return dot(batch_norm_ref(X, W, b, N, C, HW), R); }, B), 1e-3,
               1e-4, "d bias");
  expect_close(host(x.grad()),
               fd_grad([&](auto xx) { return dot(batch_norm_ref(xx, W, B, N, C, HW), R); }, X),
               1e-3, 1e-3, "d input");
}

TEST_P(NN, DropoutZeroesAFractionPAndScalesTheRestInTrainingOnly) {
  const int64_t n = 200000;
  Tensor x = rnd({n}, 40);
  nn::Dropout drop(0.3);
  auto X = host(x), Y = host(drop(x));
  int64_t zeros = 0;
  for (size_t i = 0; i < X.size(); ++i) {
    if (Y[i] == 0.0) {
      ++zeros;
    } else {
      ASSERT_NEAR(Y[i], X[i] / 0.7, 1e-5 * (1 + std::fabs(X[i]))) << i;
    }
  }
  // Binomial(n, 0.3): the standard deviation of the fraction is about 0.001.
  EXPECT_NEAR(static_cast<double>(zeros) / static_cast<double>(n), 0.3, 0.006);
  drop.eval();
  expect_close(host(drop(x)), X, 0, 0, "eval is the identity");
  expect_close(host(nn::Dropout(1.0)(x)), std::vector<double>(X.size(), 0.0), 0, 0, "p = 1");
  expect_close(host(nn::Dropout(0.0)(x)), X, 0, 0, "p = 0");
}

TEST_P(NN, ActivationsAndSoftmaxMatchLoops) {
  auto xv = random_floats(15, 50, -4, 4);
  Tensor x = tensor_of(xv, {3, 5}, dev());
  std::vector<double> silu, sig, tanh, gelu, sm(15);
  for (float v : xv) {
    double s = 1 / (1 + std::exp(-static_cast<double>(v)));
    silu.push_back(v * s);
    sig.push_back(s);
    tanh.push_back(std::tanh(v));
    gelu.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
  }
  for (size_t j = 0; j < 5; ++j) {  // softmax over dim 0 (columns)
    double z = 0;
    for (size_t r = 0; r < 3; ++r) z += std::exp(xv[r * 5 + j]);
    for (size_t r = 0; r < 3; ++r) sm[r * 5 + j] = std::exp(xv[r * 5 + j]) / z;
  }
  expect_close(host(nn::SiLU()(x)), silu, 1e-5, 1e-6, "SiLU");
  expect_close(host(nn::Sigmoid()(x)), sig, 1e-5, 1e-6, "Sigmoid");
  expect_close(host(nn::Tanh()(x)), tanh, 1e-5, 1e-6, "Tanh");
  expect_close(host(nn::GELU()(x)), gelu, 1e-5, 1e-5, "GELU");
  expect_close(host(nn::Softmax(0)(x)), sm, 1e-5, 1e-6, "Softmax(0)");
}

TEST_P(NN, AvgPool2dMatchesLoops) {
  auto xv = random_floats(2 * 3 * 5 * 5, 60);
  Tensor x = tensor_of(xv, {2, 3, 5, 5}, dev());
  for (bool include_pad : {true, false}) {
    nn::AvgPool2d pool(3, 2, 1, false, include_pad);
    Tensor y = pool(x);
    ASSERT_EQ(y.shape(), (Shape{2, 3, 3, 3}));
    std::vector<double> want;
    for (int64_t p = 0; p < 6; ++p)
      for (int64_t oy = 0; oy < 3; ++oy)
        for (int64_t ox = 0; ox < 3; ++ox) {
          double s = 0;
          int64_t cnt = 0;
          for (int64_t i = 0; i < 3; ++i)
            for (int64_t j = 0; j < 3; ++j) {
              int64_t yy = oy * 2 + i - 1, xx = ox * 2 + j - 1;
              if (yy < 0 || yy >= 5 || xx < 0 || xx >= 5) continue;
              s += xv[static_cast<size_t>(p * 25 + yy * 5 + xx)];
              ++cnt;
            }
          want.push_back(s / static_cast<double>(include_pad ? 9 : cnt));
        }
    expect_close(host(y), want, 1e-5, 1e-6, include_pad ? "count_include_pad" : "exclude pad");
  }
}

// -log softmax(row)[t], per row of `c` scores.
std::vector<double> nll_rows(const std::vector<float>& logits, size_t c) {
  std::vector<double> out(logits.size());
  for (size_t r = 0; r < logits.size() / c; ++r) {
    double z = 0;
    for (size_t j = 0; j < c; ++j) z += std::exp(static_cast<double>(logits[r * c + j]));
    for (size_t j = 0; j < c; ++j) out[r * c + j] = std::log(z) - logits[r * c + j];
  }
  return out;
}

TEST_P(NN, CrossEntropyLossReductionsIgnoreIndexWeightAndSmoothing) {
  auto lv = random_floats(6 * 4, 70);
  auto nll = nll_rows(lv, 4);
  std::vector<int64_t> t = {2, 0, -100, 3, 1, 2};
  std::vector<float> wv = {0.5f, 1.0f, 2.0f, 1.5f};
  Tensor logits = tensor_of(lv, {6, 4}, dev()), target = int_tensor(t, {6}, dev());
  std::vector<double> none(6, 0.0);
  double sum = 0, wsum = 0, wtot = 0, smooth_sum = 0;
  for (size_t r = 0; r < 6; ++r) {
    if (t[r] == -100) continue;
    none[r] = nll[r * 4 + static_cast<size_t>(t[r])];
    sum += none[r];
    wsum += wv[static_cast<size_t>(t[r])] * none[r];
    wtot += wv[static_cast<size_t>(t[r])];
    double all = 0;
    for (size_t j = 0; j < 4; ++j) all += nll[r * 4 + j];
    smooth_sum += 0.8 * none[r] + 0.2 / 4 * all;
  }
  expect_close(host(nn::CrossEntropyLoss()(logits, target)), {sum / 5}, 1e-5, 1e-6,
               "mean over non-ignored");
  expect_close(host(nn::CrossEntropyLoss({.reduction = "sum"})(logits, target)), {sum}, 1e-5, 1e-6,
               "sum");
  expect_close(host(nn::CrossEntropyLoss({.reduction = "none"})(logits, target)), none, 1e-5, 1e-6,
               "none");
  nn::CrossEntropyLoss weighted({.weight = tensor_of(wv, {4}, dev())});
  expect_close(host(weighted(logits, target)), {wsum / wtot}, 1e-5, 1e-6, "weighted mean");
  expect_close(host(nn::CrossEntropyLoss({.label_smoothing = 0.2})(logits, target)),
               {smooth_sum / 5}, 1e-5, 1e-6, "label smoothing");
  EXPECT_EQ(weighted.named_buffers().at(0).first, "weight");
}

// Class indices in host memory are range-checked at the call (ignore_index excepted).
TEST_P(NN, CrossEntropyTargetOutOfRangeIsAnIndexError) {
  Tensor logits = tensor_of(random_floats(3 * 4, 71), {3, 4}, dev());
  for (int64_t bad : {4, -1}) {
    try {
      nn::CrossEntropyLoss()(logits, int_tensor({0, bad, 1}, {3}, dev()));
      ADD_FAILURE() << "target " << bad << " was accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::Index);
      EXPECT_NE(
          std::string(e.what()).find("target " + std::to_string(bad) + " is out of bounds for 4"),
          std::string::npos)
          << e.what();
    }
  }
  EXPECT_NO_THROW(nn::CrossEntropyLoss()(logits, int_tensor({0, -100, 3}, {3}, dev())));
}

TEST_P(NN, CrossEntropyLossSpatialAndProbabilityTargets) {
  // [N=2, C=3, d=4]: classes along dim 1.
  auto lv = random_floats(24, 71);
  std::vector<int64_t> t = {0, 2, 1, 1, 2, 2, 0, 1};
  double want = 0;
  for (size_t n = 0; n < 2; ++n)
    for (size_t d = 0; d < 4; ++d) {
      double z = 0;
      for (size_t c = 0; c < 3; ++c) z += std::exp(static_cast<double>(lv[(n * 3 + c) * 4 + d]));
      want += (std::log(z) - lv[(n * 3 + static_cast<size_t>(t[n * 4 + d])) * 4 + d]) / 8;
    }
  expect_close(
      host(nn::cross_entropy(tensor_of(lv, {2, 3, 4}, dev()), int_tensor(t, {2, 4}, dev()))),
      {want}, 1e-5, 1e-6, "spatial");
  auto pv = random_floats(24, 72, 0, 1);
  auto nll = nll_rows(lv, 4);  // rows of a [6, 4] view
  double soft = 0;
  for (size_t k = 0; k < 24; ++k) soft += pv[k] * nll[k] / 6;
  expect_close(
      host(nn::CrossEntropyLoss()(tensor_of(lv, {6, 4}, dev()), tensor_of(pv, {6, 4}, dev()))),
      {soft}, 1e-5, 1e-6, "probability target");
}

TEST_P(NN, MSELossReductions) {
  auto a = random_floats(12, 80), b = random_floats(12, 81);
  std::vector<double> sq;
  for (size_t i = 0; i < 12; ++i) sq.push_back(std::pow(static_cast<double>(a[i]) - b[i], 2));
  double s = std::accumulate(sq.begin(), sq.end(), 0.0);
  Tensor x = tensor_of(a, {3, 4}, dev()), y = tensor_of(b, {3, 4}, dev());
  expect_close(host(nn::MSELoss()(x, y)), {s / 12}, 1e-5, 1e-6, "mean");
  expect_close(host(nn::MSELoss("sum")(x, y)), {s}, 1e-5, 1e-6, "sum");
  expect_close(host(nn::MSELoss("none")(x, y)), sq, 1e-5, 1e-6, "none");
}

TEST_P(NN, ModuleToMovesParametersAndBuffers) {
  nn::Sequential net;
  net.add(std::make_shared<nn::Conv2d>(2, 3, 3)).add(std::make_shared<nn::BatchNorm2d>(3));
  net.to(dev());
  for (auto& [n, t] : net.state_dict()) EXPECT_EQ(t.device(), dev()) << n;
  for (auto& p : net.parameters()) EXPECT_TRUE(p.requires_grad() && p.is_leaf());
  Tensor y = net(rnd({2, 2, 5, 5}, 90));
  EXPECT_EQ(y.shape(), (Shape{2, 3, 3, 3}));
  EXPECT_EQ(host(net.named_buffers().at(2).second), std::vector<double>{1});  // num_batches_tracked
}

INSTANTIATE_TEST_SUITE_P(Devices, NN, ::testing::Values("cpu", "lazy:cpu"));

TEST(NNModules, StateDictOrderBuffersAndContainers) {
  auto list = std::make_shared<nn::ModuleList>();
  list->push_back(std::make_shared<nn::Linear>(3, 4))
      .push_back(std::make_shared<nn::BatchNorm2d>(4, 1e-5, 0.1, false));
  nn::ModuleDict dict;
  dict.insert("blocks", list)
      .insert("norm", std::make_shared<nn::LayerNorm>(std::vector<int64_t>{4}));
  std::vector<std::string> names;
  for (auto& [n, t] : dict.state_dict()) names.push_back(n);
  EXPECT_EQ(names,
            (std::vector<std::string>{"blocks.0.weight", "blocks.0.bias", "blocks.1.running_mean",
                                      "blocks.1.running_var", "blocks.1.num_batches_tracked",
                                      "norm.weight", "norm.bias"}));
  EXPECT_EQ(dict.parameters().size(), 4u);
  EXPECT_EQ(dict.buffers().size(), 3u);
  EXPECT_EQ(dict.keys(), (std::vector<std::string>{"blocks", "norm"}));
  EXPECT_NE(dict.at<nn::ModuleList>("blocks")->at<nn::Linear>(0), nullptr);
  // Inserting an existing key replaces the module in place.
  dict.insert("norm", std::make_shared<nn::ReLU>());
  EXPECT_EQ(dict.size(), 2u);
  EXPECT_EQ(dict.parameters().size(), 2u);
  expect_error([&] { dict.at<nn::Linear>("norm"); }, {"ModuleDict", "norm"});
  expect_error([&] { dict["nope"]; }, {"ModuleDict", "nope"});
  expect_error([&] { (*list)[2]; }, {"ModuleList", "2"});
  // train/eval reaches every descendant.
  dict.eval();
  EXPECT_FALSE((*list)[1]->is_training());
}

TEST(NNModules, LoadStateDictWritesInPlaceAndChecksKeysAndShapes) {
  nn::Linear a(3, 2), b(3, 2);
  Tensor w = b.weight();  // a handle an optimizer would hold
  b.load_state_dict(a.state_dict());
  EXPECT_EQ(host(w), host(a.weight()));
  EXPECT_TRUE(w.requires_grad());
  expect_error([&] { b.load_state_dict({{"weight", a.weight()}}); }, {"missing key", "bias"});
  auto sd = a.state_dict();
  sd.emplace_back("extra", a.bias());
  expect_error([&] { b.load_state_dict(sd); }, {"unexpected key", "extra"});
  expect_error(
      [&] {
        b.load_state_dict({{"weight", zeros({2, 4})}, {"bias", zeros({2})}});
      },
      {"weight", "[2, 4]", "[2, 3]"});
}

TEST(NNInit, FollowsPyTorchDefaults) {
  manual_seed(1);
  nn::Linear lin(256, 64);
  auto w = host(lin.weight());
  double bound = 1.0 / 16, mx = 0, mean = 0;
  for (double v : w) {
    mx = std::max(mx, std::fabs(v));
    mean += v / static_cast<double>(w.size());
  }
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.99 * bound);
  EXPECT_NEAR(mean, 0, 0.02 * bound);
  nn::Embedding emb(1000, 64);
  auto e = host(emb.weight());
  double m = std::accumulate(e.begin(), e.end(), 0.0) / static_cast<double>(e.size()), var = 0;
  for (double v : e) var += (v - m) * (v - m) / static_cast<double>(e.size());
  EXPECT_NEAR(m, 0, 0.02);  // 64000 samples of N(0, 1): the mean's std is 0.004
  EXPECT_NEAR(std::sqrt(var), 1, 0.02);
  nn::LayerNorm ln({8});
  EXPECT_EQ(host(ln.weight()), std::vector<double>(8, 1));
  EXPECT_EQ(host(ln.bias()), std::vector<double>(8, 0));
  nn::BatchNorm2d bn(5);
  EXPECT_EQ(host(bn.weight()), std::vector<double>(5, 1));
  EXPECT_EQ(host(bn.bias()), std::vector<double>(5, 0));
  EXPECT_EQ(host(bn.running_mean()), std::vector<double>(5, 0));
  EXPECT_EQ(host(bn.running_var()), std::vector<double>(5, 1));
  EXPECT_EQ(bn.num_batches_tracked().dtype(), DType::Int64);
  EXPECT_EQ(bn.parameters().size(), 2u);
  EXPECT_EQ(nn::BatchNorm2d(5, 1e-5, 0.1, false, false).state_dict().size(), 0u);
}

TEST(NNErrors, BadInputsRaiseNamingTheLayerAndShapes) {
  nn::Linear lin(4, 3);
  expect_error([&] { lin(zeros({2, 5})); }, {"Linear", "[2, 5]", "4"});
  nn::Embedding emb(10, 3);
  expect_error([&] { emb(zeros({2, 2})); }, {"Embedding", "float32", "[2, 2]"});
  expect_error([&] { emb(full({2}, Scalar(int64_t{10}), DType::Int64)); }, {"embedding", "10"});
  expect_error([] { nn::Embedding(4, 2, 4); }, {"padding_idx", "4"});
  nn::LayerNorm ln({4, 5});
  expect_error([&] { ln(zeros({3, 5, 4})); }, {"LayerNorm", "[3, 5, 4]", "[4, 5]"});
  nn::BatchNorm2d bn(3);
  expect_error([&] { bn(zeros({2, 3, 4})); }, {"BatchNorm2d", "4D", "[2, 3, 4]"});
  expect_error([&] { bn(zeros({2, 4, 2, 2})); }, {"BatchNorm2d", "[2, 4, 2, 2]", "3"});
  expect_error([&] { bn(zeros({1, 3, 1, 1})); }, {"more than 1 value per channel", "[1, 3, 1, 1]"});
  expect_error([] { nn::Dropout(1.5); }, {"Dropout", "1.5"});
  expect_error([] { nn::MSELoss("avg"); }, {"MSELoss", "avg"});
  expect_error([] { nn::CrossEntropyLoss({.reduction = "max"}); }, {"CrossEntropyLoss", "max"});
  nn::CrossEntropyLoss ce;
  expect_error(
      [&] {
        ce(zeros({4, 3}), zeros({5}, DType::Int64));
      },
      {"cross_entropy", "[4]", "[5]"});
  expect_error([&] { ce(zeros({4, 3}), zeros({4}, DType::Bool)); }, {"cross_entropy", "bool"});
  expect_error([&] { ce(zeros({4, 3}), zeros({4, 2})); }, {"cross_entropy", "[4, 2]", "[4, 3]"});
  expect_error([&] { nn::Sequential()[0]; }, {"Sequential", "0"});
}

// BatchNorm2d's buffer updates and Dropout's masks are part of the step graph: the same graph
// every step, compiled once, and the running statistics advance each step.
TEST(NNLazy, ConvBatchNormDropoutTrainStepIsOneGraphCompiledOnce) {
  const Device d = Device::parse("lazy:cpu");
  manual_seed(5);
  auto bn = std::make_shared<nn::BatchNorm2d>(4, 1e-5, 0.1, true, true, d);
  nn::Sequential net;
  net.add(std::make_shared<nn::Conv2d>(1, 4, 3, 1, 1, true, d))
      .add(bn)
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::AvgPool2d>(2))
      .add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::Dropout>(0.2))
      .add(std::make_shared<nn::Linear>(4 * 4 * 4, 3, true, d));
  optim::SGD opt(net.parameters(), 0.05, 0.9);
  nn::CrossEntropyLoss ce;
  Tensor x = testing::random_tensor({8, 1, 8, 8}, 91, d);
  Tensor y = int_tensor({0, 1, 2, 0, 1, 2, 0, 1}, {8}, d);
  mark_step();
  metrics::reset();
  double first = 0, last = 0;
  std::vector<double> means;
  for (int step = 0; step < 12; ++step) {
    opt.zero_grad();
    Tensor loss = ce(net(x), y);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item();
    means.push_back(host(bn->running_mean())[0]);
  }
  EXPECT_EQ(metrics::counters().at("graph_compiles"), 1);
  EXPECT_LT(last, first);
  EXPECT_EQ(bn->num_batches_tracked().item(), 12);
  EXPECT_NE(means.front(), means.back());
  net.eval();
  Tensor a = net(x), b = net(x);  // eval: no dropout, fixed statistics
  EXPECT_EQ(host(a), host(b));
}

}  // namespace
}  // namespace lt
