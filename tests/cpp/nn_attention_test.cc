// lt::nn::MultiheadAttention on eager cpu and lazy:cpu against a float64 loop implementation of
// PyTorch's definition (projections, per-head softmax(q k^T / sqrt(hd) + mask) v, out_proj):
// layouts (batch_first, [L, N, E], unbatched), masks (bool/float attn_mask and key_padding_mask),
// separate kdim/vdim weights, returned weights, gradients against float64 central differences,
// PyTorch's initialization, bad input; and a small Embedding + LayerNorm + MHA + Linear model that
// trains on lazy as one graph compiled once.
#include "nn/nn_attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "nn/optim.h"
#include "nn_test_util.h"
#include "runtime/metrics.h"
#include "runtime/sync.h"

namespace lt {
namespace {

using nntest::expect_error;
using nntest::fd_grad;
using nntest::host;
using nntest::tensor_of;
using nntest::to_double;
using testing::expect_close;
using testing::random_floats;
using Vec = std::vector<double>;

constexpr size_t N = 2, L = 3, S = 4, E = 8, H = 2, HD = E / H;
const double kInf = std::numeric_limits<double>::infinity();

struct Params {  // PyTorch's parameters, row-major
  Vec wq, wk, wv, b, wo,
      bo;  // wq [E, E], wk [E, kd], wv [E, vd], b = in_proj_bias [3E], wo [E, E], bo [E]
};

// y[n, t, :] = W x[n, t, :] + bias: [N, T, in] -> [N, T, out].
Vec project(const Vec& x, const Vec& w, const double* bias, size_t T, size_t in, size_t out) {
  Vec y(N * T * out);
  for (size_t r = 0; r < N * T; ++r)
    for (size_t o = 0; o < out; ++o) {
      double s = bias ? bias[o] : 0;
      for (size_t i = 0; i < in; ++i) s += w[o * in + i] * x[r * in + i];
      y[r * out + o] = s;
    }
  return y;
}

// PyTorch's MultiheadAttention over batch-first q [N, L, E], k [N, S, kd], v [N, S, vd]; `add` is
// the additive mask [N, H, L, S] (-inf where not allowed). Returns out [N, L, E]; probs [N, H, L,
// S].
Vec mha_ref(const Vec& q, const Vec& k, const Vec& v, const Params& p, const Vec& add, size_t kd,
            size_t vd, Vec* probs = nullptr) {
  Vec Q = project(q, p.wq, p.b.data(), L, E, E), K = project(k, p.wk, p.b.data() + E, S, kd, E),
      V = project(v, p.wv, p.b.data() + 2 * E, S, vd, E), ctx(N * L * E, 0), P(N * H * L * S);
  for (size_t n = 0; n < N; ++n)
    for (size_t h = 0; h < H; ++h)
      for (size_t i = 0; i < L; ++i) {
        Vec sc(S);
        double mx = -kInf, z = 0;
        for (size_t j = 0; j < S; ++j) {
          double s = 0;
          for (size_t d = 0; d < HD; ++d)
            s += Q[(n * L + i) * E + h * HD + d] * K[(n * S + j) * E + h * HD + d];
          sc[j] = s / std::sqrt(static_cast<double>(HD)) + add[((n * H + h) * L + i) * S + j];
          mx = std::max(mx, sc[j]);
        }
        for (size_t j = 0; j < S; ++j) z += std::exp(sc[j] - mx);
        for (size_t j = 0; j < S; ++j) {
          double pr = std::exp(sc[j] - mx) / z;
          P[((n * H + h) * L + i) * S + j] = pr;
          for (size_t d = 0; d < HD; ++d)
            ctx[(n * L + i) * E + h * HD + d] += pr * V[(n * S + j) * E + h * HD + d];
        }
      }
  if (probs) *probs = P;
  return project(ctx, p.wo, p.bo.data(), L, E, E);
}

// [N, T, C] <-> [T, N, C].
Vec swap01(const Vec& x, size_t a, size_t b, size_t c) {
  Vec y(x.size());
  for (size_t i = 0; i < a; ++i)
    for (size_t j = 0; j < b; ++j)
      for (size_t k = 0; k < c; ++k) y[(j * a + i) * c + k] = x[(i * b + j) * c + k];
  return y;
}

class MHA : public ::testing::TestWithParam<const char*> {
 protected:
  Device dev() const { return Device::parse(GetParam()); }

  // Random parameters loaded into `m` (through load_state_dict) and returned as host copies.
  Params randomize(nn::MultiheadAttention& m, size_t kd, size_t vd, uint32_t seed) {
    Params p;
    auto f = [&](size_t n, uint32_t s) {
      return random_floats(static_cast<int64_t>(n), seed + s, -0.7f, 0.7f);
    };
    auto wq = f(E * E, 1), wk = f(E * kd, 2), wv = f(E * vd, 3), b = f(3 * E, 4), wo = f(E * E, 5),
         bo = f(E, 6);
    nn::NamedTensors sd = {{"in_proj_bias", tensor_of(b, {3 * E}, kCPU)},
                           {"out_proj.weight", tensor_of(wo, {E, E}, kCPU)},
                           {"out_proj.bias", tensor_of(bo, {E}, kCPU)}};
    if (kd == E && vd == E) {
      std::vector<float> w = wq;
      w.insert(w.end(), wk.begin(), wk.end());
      w.insert(w.end(), wv.begin(), wv.end());
      sd.emplace_back("in_proj_weight", tensor_of(w, {3 * E, E}, kCPU));
    } else {
      sd.emplace_back("q_proj_weight", tensor_of(wq, {E, E}, kCPU));
      sd.emplace_back("k_proj_weight", tensor_of(wk, {E, static_cast<int64_t>(kd)}, kCPU));
      sd.emplace_back("v_proj_weight", tensor_of(wv, {E, static_cast<int64_t>(vd)}, kCPU));
    }
    m.load_state_dict(sd);
    p.wq = to_double(wq), p.wk = to_double(wk), p.wv = to_double(wv), p.b = to_double(b);
    p.wo = to_double(wo), p.bo = to_double(bo);
    return p;
  }
};

TEST_P(MHA, BatchFirstWithMasksMatchesLoops) {
  nn::MultiheadAttention mha(E, H, {.batch_first = true}, dev());
  Params p = randomize(mha, E, E, 10);
  auto qv = random_floats(N * L * E, 1), kv = random_floats(N * S * E, 2),
       vv = random_floats(N * S * E, 3);
  auto am = random_floats(L * S, 4);
  std::vector<uint8_t> kpm = {0, 1, 0, 0, 0, 0, 0, 1};  // [N, S], true = ignore
  Vec add(N * H * L * S);
  for (size_t n = 0; n < N; ++n)
    for (size_t h = 0; h < H; ++h)
      for (size_t i = 0; i < L; ++i)
        for (size_t j = 0; j < S; ++j)
          add[((n * H + h) * L + i) * S + j] = am[i * S + j] + (kpm[n * S + j] ? -kInf : 0);
  Vec probs;
  Vec want = mha_ref(to_double(qv), to_double(kv), to_double(vv), p, add, E, E, &probs);
  nn::MultiheadAttentionArgs args;
  args.attn_mask = tensor_of(am, {L, S}, dev());
  args.key_padding_mask = from_host(kpm.data(), DType::Bool, {N, S}, dev());
  Tensor q = tensor_of(qv, {N, L, E}, dev()), k = tensor_of(kv, {N, S, E}, dev()),
         v = tensor_of(vv, {N, S, E}, dev());
  auto [out, weights] = mha(q, k, v, args);
  ASSERT_EQ(out.shape(), (Shape{N, L, E}));
  expect_close(host(out), want, 1e-4, 1e-5, "output");
  Vec avg(N * L * S, 0);
  for (size_t n = 0; n < N; ++n)
    for (size_t h = 0; h < H; ++h)
      for (size_t r = 0; r < L * S; ++r) avg[n * L * S + r] += probs[(n * H + h) * L * S + r] / H;
  ASSERT_EQ(weights.shape(), (Shape{N, L, S}));
  expect_close(host(weights), avg, 1e-4, 1e-6, "averaged weights");
  args.average_attn_weights = false;
  expect_close(host(mha(q, k, v, args).weights), probs, 1e-4, 1e-6, "per-head weights");
  args.need_weights = false;
  EXPECT_FALSE(mha(q, k, v, args).weights.defined());
}

TEST_P(MHA, SequenceFirstUnbatchedBoolMaskAndSeparateKVDims) {
  const size_t kd = 5, vd = 6;
  nn::MultiheadAttention mha(E, H, {.kdim = kd, .vdim = vd}, dev());  // batch_first = false
  EXPECT_EQ(mha.named_parameters().at(0).first, "q_proj_weight");
  Params p = randomize(mha, kd, vd, 20);
  auto qv = random_floats(N * L * E, 5), kv = random_floats(N * S * kd, 6),
       vv = random_floats(N * S * vd, 7);
  // 3-D bool attn_mask [N * H, L, S], true = not allowed (one position per row, never a full row).
  std::vector<uint8_t> bm(N * H * L * S, 0);
  Vec add(N * H * L * S, 0);
  for (size_t r = 0; r < N * H * L; ++r) bm[r * S + r % S] = 1, add[r * S + r % S] = -kInf;
  Vec want = mha_ref(to_double(qv), to_double(kv), to_double(vv), p, add, kd, vd);
  nn::MultiheadAttentionArgs args;
  args.attn_mask = from_host(bm.data(), DType::Bool, {N * H, L, S}, dev());
  // [L, N, E] inputs and output.
  auto T = [&](const std::vector<float>& x, size_t t, size_t c) {
    auto y = swap01(to_double(x), N, t, c);
    return tensor_of(std::vector<float>(y.begin(), y.end()),
                     {static_cast<int64_t>(t), N, static_cast<int64_t>(c)}, dev());
  };
  Tensor out = mha(T(qv, L, E), T(kv, S, kd), T(vv, S, vd), args).output;
  ASSERT_EQ(out.shape(), (Shape{L, N, E}));
  expect_close(host(out), swap01(want, N, L, E), 1e-4, 1e-5, "sequence-first output");
  // Unbatched [L, E]: the first batch element, no mask.
  Vec add0(N * H * L * S, 0);
  Vec want0 = mha_ref(to_double(qv), to_double(kv), to_double(vv), p, add0, kd, vd);
  auto first = [&](const std::vector<float>& x, size_t t, size_t c) {
    return tensor_of(std::vector<float>(x.begin(), x.begin() + static_cast<long>(t * c)),
                     {static_cast<int64_t>(t), static_cast<int64_t>(c)}, dev());
  };
  auto [o0, w0] = mha(first(qv, L, E), first(kv, S, kd), first(vv, S, vd));
  ASSERT_EQ(o0.shape(), (Shape{L, E}));
  ASSERT_EQ(w0.shape(), (Shape{L, S}));
  expect_close(host(o0), Vec(want0.begin(), want0.begin() + L * E), 1e-4, 1e-5, "unbatched output");
}

TEST_P(MHA, GradientsMatchFloat64CentralDifferences) {
  nn::MultiheadAttention mha(E, H, {.batch_first = true}, dev());
  Params p = randomize(mha, E, E, 30);
  auto qv = random_floats(N * L * E, 8), kv = random_floats(N * S * E, 9),
       rv = random_floats(N * L * E, 10);
  Vec Q = to_double(qv), K = to_double(kv), R = to_double(rv), add(N * H * L * S, 0);
  Tensor q = tensor_of(qv, {N, L, E}, dev()).detach(), k = tensor_of(kv, {N, S, E}, dev());
  q.requires_grad_();
  (mha(q, k, k, {.need_weights = false}).output * tensor_of(rv, {N, L, E}, dev())).sum().backward();
  auto loss = [&](const Params& pp, const Vec& qq) {
    Vec o = mha_ref(qq, K, K, pp, add, E, E);
    double s = 0;
    for (size_t i = 0; i < o.size(); ++i) s += o[i] * R[i];
    return s;
  };
  Vec w_in = p.wq;  // in_proj_weight = [wq; wk; wv]
  w_in.insert(w_in.end(), p.wk.begin(), p.wk.end());
  w_in.insert(w_in.end(), p.wv.begin(), p.wv.end());
  auto fd_in = fd_grad(
      [&](const Vec& w) {
        Params pp = p;
        pp.wq.assign(w.begin(), w.begin() + E * E);
        pp.wk.assign(w.begin() + E * E, w.begin() + 2 * E * E);
        pp.wv.assign(w.begin() + 2 * E * E, w.end());
        return loss(pp, Q);
      },
      w_in);
  auto g = [&](const char* name) {
    for (auto& [n, t] : mha.named_parameters())
      if (n == name) return host(t.grad());
    ADD_FAILURE() << "no parameter " << name;
    return Vec();
  };
  expect_close(g("in_proj_weight"), fd_in, 1e-3, 1e-4, "d in_proj_weight");
  // The other parameters: float64 differences of the loss in one field of Params.
  const std::pair<const char*, Vec Params::*> fields[] = {{"in_proj_bias", &Params::b},
                                                          {"out_proj.weight", &Params::wo},
                                                          {"out_proj.bias", &Params::bo}};
  for (auto [name, field] : fields) {
    auto f = [&, field = field](const Vec& x) {
      Params pp = p;
      pp.*field = x;
      return loss(pp, Q);
    };
    expect_close(g(name), fd_grad(f, p.*field), 1e-3, 1e-4, std::string("d ") + name);
  }
  expect_close(host(q.grad()), fd_grad([&](const Vec& qq) { return loss(p, qq); }, Q), 1e-3, 1e-4,
               "d query");
}

TEST_P(MHA, DropoutActsInTrainingOnly) {
  nn::MultiheadAttention mha(E, H, {.dropout = 0.5, .batch_first = true}, dev());
  Tensor x = testing::random_tensor({N, L, E}, 11, dev());
  auto eval_a = (mha.eval(), host(mha(x, x, x).output)), eval_b = host(mha(x, x, x).output);
  EXPECT_EQ(eval_a, eval_b);
  mha.train();
  EXPECT_NE(host(mha(x, x, x).output), eval_a);
}

INSTANTIATE_TEST_SUITE_P(Devices, MHA, ::testing::Values("cpu", "lazy:cpu"));

TEST(MHAInit, XavierInProjZeroBiasesLinearOutProj) {
  manual_seed(3);
  nn::MultiheadAttention mha(64, 4);
  std::vector<std::string> names;
  for (auto& [n, t] : mha.named_parameters()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"in_proj_weight", "in_proj_bias", "out_proj.weight",
                                             "out_proj.bias"}));
  auto check_uniform = [](const Vec& w, double bound, const char* what) {
    double mx = 0, mean = 0;
    for (double v : w) mx = std::max(mx, std::fabs(v)), mean += v / static_cast<double>(w.size());
    EXPECT_LE(mx, bound) << what;
    EXPECT_GT(mx, 0.99 * bound) << what;
    EXPECT_NEAR(mean, 0, 0.03 * bound) << what;
  };
  auto sd = mha.state_dict();
  check_uniform(host(sd[0].second), std::sqrt(6.0 / (64 + 192)),
                "in_proj_weight");  // fans of [192, 64]
  EXPECT_EQ(host(sd[1].second), Vec(192, 0));
  check_uniform(host(sd[2].second), 1.0 / 8,
                "out_proj.weight");  // Linear's kaiming_uniform(a=sqrt(5))
  EXPECT_EQ(host(sd[3].second), Vec(64, 0));
  nn::MultiheadAttention sep(64, 4, {.bias = false, .kdim = 32});
  EXPECT_EQ(sep.parameters().size(), 4u);  // q/k/v_proj_weight and out_proj.weight
  check_uniform(host(sep.state_dict()[1].second), std::sqrt(6.0 / (64 + 32)), "k_proj_weight");
}

TEST(MHAErrors, BadInputsRaiseNamingTheLayerAndShapes) {
  expect_error([] { nn::MultiheadAttention(10, 3); }, {"MultiheadAttention", "10", "3"});
  nn::MultiheadAttention mha(8, 2, {.batch_first = true});
  Tensor x = zeros({2, 3, 8});
  expect_error([&] { mha(zeros({2, 3, 6}), x, x); }, {"MultiheadAttention", "[2, 3, 6]"});
  expect_error([&] { mha(x, zeros({2, 8}), x); }, {"MultiheadAttention", "[2, 8]"});
  expect_error(
      [&] {
        mha(zeros({2, 3, 8}, DType::Int64), x, x);
      },
      {"MultiheadAttention", "query", "int64"});
  expect_error(
      [&] {
        mha(x, x, x, {.key_padding_mask = zeros({2, 4}, DType::Bool)});
      },
      {"key_padding_mask", "[2, 3]", "[2, 4]"});
  expect_error(
      [&] {
        mha(x, x, x, {.attn_mask = zeros({3, 4})});
      },
      {"attn_mask", "[3, 4]", "[3, 3]"});
  expect_error(
      [&] {
        mha(x, x, x, {.attn_mask = zeros({3, 3, 3})});
      },
      {"attn_mask", "[3, 3, 3]", "[4, 3, 3]"});
  expect_error([&] { mha(x, x, x, {.is_causal = true}); }, {"MultiheadAttention", "is_causal"});
}

// A tiny sequence model: embed, normalize, self-attend (causal), classify each position's token
// as the previous position's one. Every step is the same graph: compiled once.
TEST(MHATrain, SmallModelTrainsOnLazyAsOneGraph) {
  const Device d = Device::parse("lazy:cpu");
  manual_seed(7);
  const int64_t V = 12, D = 16, B = 4, T = 6;
  nn::Embedding emb(V, D, std::nullopt, d);
  nn::LayerNorm ln({D}, 1e-5, true, true, d);
  nn::MultiheadAttention att(D, 2, {.batch_first = true}, d);
  nn::Linear head(D, V, true, d);
  nn::CrossEntropyLoss ce;
  std::vector<Tensor> params;
  for (nn::Module* m : std::vector<nn::Module*>{&emb, &ln, &att, &head})
    for (auto& t : m->parameters()) params.push_back(t);
  optim::SGD opt(params, 0.3, 0.9);
  std::vector<int64_t> tok(B * T), tgt(B * T);
  for (int64_t i = 0; i < B * T; ++i) tok[static_cast<size_t>(i)] = (i * 7 + i / T) % V;
  for (int64_t i = 0; i < B * T; ++i)
    tgt[static_cast<size_t>(i)] = i % T ? tok[static_cast<size_t>(i - 1)] : 0;
  Tensor x = nntest::int_tensor(tok, {B, T}, d), y = nntest::int_tensor(tgt, {B * T}, d);
  std::vector<uint8_t> causal(T * T);
  for (int64_t i = 0; i < T; ++i)
    for (int64_t j = 0; j < T; ++j) causal[static_cast<size_t>(i * T + j)] = j > i;
  Tensor mask = from_host(causal.data(), DType::Bool, {T, T}, d);
  mark_step();
  metrics::reset();
  double first = 0, last = 0;
  for (int step = 0; step < 40; ++step) {
    opt.zero_grad();
    Tensor h = ln(emb(x));
    h = h + att(h, h, h, {.need_weights = false, .attn_mask = mask}).output;
    Tensor loss = ce(head(h).reshape({B * T, V}), y);
    loss.backward();
    opt.step();
    (step == 0 ? first : last) = loss.item();
  }
  EXPECT_EQ(metrics::counters().at("graph_compiles"), 1);
  EXPECT_LT(last, 0.5 * first) << "first " << first << " last " << last;
}

}  // namespace
}  // namespace lt
