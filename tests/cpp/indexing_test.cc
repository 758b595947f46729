// Slicing, padding, cat/stack, flip, gather/scatter_add/index_select/embedding/one_hot, tril/triu
// and cumsum against plain host loops, on eager cpu, lazy:cpu and lazy:reference; gradients of the
// Slice primitive (strided, flipped, empty) against central differences; kernel counts pinned.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "runtime/executor.h"
#include "test_util.h"

namespace lt {
namespace {

// A host tensor of doubles with a shape, for the oracles.
struct H {
  Shape s;
  std::vector<double> v;
  int64_t at(std::vector<int64_t> i) const {
    int64_t o = 0;
    for (size_t d = 0; d < s.size(); ++d) o = o * s[d] + i[d];
    return o;
  }
};

H rand_h(Shape s, uint32_t seed) {
  auto f = testing::random_floats(numel(s), seed);
  return {s, std::vector<double>(f.begin(), f.end())};
}
Tensor dev_t(const H& h, const Device& d) {
  std::vector<float> f(h.v.begin(), h.v.end());
  return from_host(f.data(), DType::Float32, h.s, d);
}
Tensor idx_t(const std::vector<int64_t>& v, Shape s, const Device& d) {
  return from_host(v.data(), DType::Int64, s, d);
}
void expect(const Tensor& t, const H& want, const std::string& what) {
  ASSERT_EQ(t.shape(), want.s) << what;
  testing::expect_close(t.to_vector<double>(), want.v, 1e-5, 1e-5, what);
}

// Visits every multi-index of `s`.
void each(const Shape& s, const std::function<void(const std::vector<int64_t>&)>& f) {
  std::vector<int64_t> i(s.size(), 0);
  if (numel(s) == 0) return;
  while (true) {
    f(i);
    int d = static_cast<int>(s.size()) - 1;
    while (d >= 0 && ++i[d] == s[d]) i[d--] = 0;
    if (d < 0) return;
  }
}

class Indexing : public ::testing::TestWithParam<const char*> {
 protected:
  Device dev() const { return Device::parse(GetParam()); }
};

TEST_P(Indexing, SliceNarrowSelectFlip) {
  H a = rand_h({5, 7}, 1);
  Tensor t = dev_t(a, dev());
  struct S {
    int64_t dim;
    std::optional<int64_t> b, e;
    int64_t step;
  };
  for (S s : std::vector<S>{{1, 1, 6, 2},
                            {0, -3, std::nullopt, 1},
                            {1, std::nullopt, -2, 3},
                            {0, 4, 2, 1},
                            {1, -100, 100, 4}}) {
    int64_t n = a.s[s.dim];
    auto cl = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t{0}, n); };
    int64_t b = s.b ? cl(*s.b) : 0, e = s.e ? cl(*s.e) : n;
    std::vector<int64_t> picks;
    for (int64_t i = b; i < e; i += s.step) picks.push_back(i);
    H want{a.s, {}};
    want.s[s.dim] = static_cast<int64_t>(picks.size());
    each(want.s, [&](auto& i) {
      auto j = i;
      j[s.dim] = picks[i[s.dim]];
      want.v.push_back(a.v[a.at(j)]);
    });
    expect(slice(t, s.dim, s.b, s.e, s.step) * 1.0, want, "slice dim " + std::to_string(s.dim));
  }
  H sel{{7}, {}};
  for (int64_t j = 0; j < 7; ++j) sel.v.push_back(a.v[a.at({3, j})]);
  expect(select(t, 0, -2), sel, "select");
  H fl{a.s, {}};
  each(a.s, [&](auto& i) { fl.v.push_back(a.v[a.at({4 - i[0], 6 - i[1]})]); });
  expect(flip(t, {0, -1}), fl, "flip");
  EXPECT_THROW(narrow(t, 1, 5, 3), Error);
  EXPECT_THROW(select(t, 0, 5), Error);
}

TEST_P(Indexing, PadCatStackSplit) {
  H a = rand_h({3, 4}, 2), b = rand_h({3, 2}, 3);
  Tensor ta = dev_t(a, dev()), tb = dev_t(b, dev());
  H p{{3, 9}, {}};
  each(p.s, [&](auto& i) {
    int64_t j = i[1] - 2;
    p.v.push_back(j >= 0 && j < 4 ? a.v[a.at({i[0], j})] : -1.5);
  });
  expect(pad(ta, {2, 3}, -1.5), p, "pad last dim");
  H crop{{3, 2}, {}};
  each(crop.s, [&](auto& i) { crop.v.push_back(a.v[a.at({i[0], i[1] + 1})]); });
  expect(pad(ta, {-1, -1}), crop, "negative pad crops");
  H c{{3, 6}, {}};
  each(c.s, [&](auto& i) {
    c.v.push_back(i[1] < 4 ? a.v[a.at({i[0], i[1]})] : b.v[b.at({i[0], i[1] - 4})]);
  });
  expect(cat({ta, tb}, 1), c, "cat dim 1");
  H c3{{3, 10}, {}};
  each(c3.s, [&](auto& i) {
    int64_t j = i[1];
    c3.v.push_back(j < 2   ? b.v[b.at({i[0], j})]
                   : j < 6 ? a.v[a.at({i[0], j - 2})]
                           : a.v[a.at({i[0], j - 6})]);
  });
  expect(cat({tb, ta, ta}, -1), c3, "cat of three");
  H st{{2, 3, 4}, {}};
  each(st.s, [&](auto& i) { st.v.push_back(a.v[a.at({i[1], i[2]})] * (i[0] ? 2 : 1)); });
  expect(stack({ta, ta * 2.0}, 0), st, "stack");
  auto parts = split(cat({ta, tb}, 1), 4, 1);
  ASSERT_EQ(parts.size(), 2u);
  expect(parts[1], b, "split tail");
  EXPECT_THROW(cat({ta, dev_t(rand_h({2, 4}, 9), dev())}, 1), Error);
}

TEST_P(Indexing, GatherScatterIndexSelectEmbeddingOneHot) {
  H a = rand_h({3, 5}, 4);
  Tensor ta = dev_t(a, dev());
  std::vector<int64_t> iv = {4, 0, 2, 2, 1, 3};
  Tensor ti = idx_t(iv, {3, 2}, dev());
  H g{{3, 2}, {}};
  each(g.s, [&](auto& i) { g.v.push_back(a.v[a.at({i[0], iv[i[0] * 2 + i[1]]})]); });
  expect(gather(ta, 1, ti), g, "gather dim 1");
  H src = rand_h({3, 2}, 5);
  H sa = a;
  each(src.s, [&](auto& i) { sa.v[sa.at({i[0], iv[i[0] * 2 + i[1]]})] += src.v[src.at(i)]; });
  expect(scatter_add(ta, 1, ti, dev_t(src, dev())), sa, "scatter_add dim 1");
  std::vector<int64_t> sv = {2, 0, 2};
  H is{{3, 3}, {}};
  each(is.s, [&](auto& i) { is.v.push_back(a.v[a.at({i[0], sv[i[1]]})]); });
  expect(index_select(ta, 1, idx_t(sv, {3}, dev())), is, "index_select");
  H w = rand_h({6, 4}, 6);
  std::vector<int64_t> tok = {5, 1, 1, 0};
  H e{{2, 2, 4}, {}};
  each(e.s, [&](auto& i) { e.v.push_back(w.v[w.at({tok[i[0] * 2 + i[1]], i[2]})]); });
  expect(embedding(dev_t(w, dev()), idx_t(tok, {2, 2}, dev())), e, "embedding");
  auto oh = one_hot(idx_t(tok, {4}, dev()), 6).to_vector<int64_t>();
  for (int r = 0; r < 4; ++r)
    for (int k = 0; k < 6; ++k) EXPECT_EQ(oh[r * 6 + k], k == tok[r] ? 1 : 0);
  // Out-of-range indices in host data are an IndexError naming the op.
  try {
    gather(ta, 1, idx_t({0, 5, 1, 1, 1, 1}, {3, 2}, dev())).to_vector<double>();
    ADD_FAILURE() << "no error";
  } catch (const Error& err) {
    EXPECT_EQ(err.kind(), ErrorKind::Index);
    EXPECT_NE(std::string(err.what()).find("gather"), std::string::npos);
  }
  EXPECT_THROW(embedding(dev_t(w, dev()), idx_t({-1}, {1}, dev())), Error);
}

TEST_P(Indexing, TrilTriuCumsumMaskedFill) {
  H a = rand_h({2, 3, 4}, 7);
  Tensor ta = dev_t(a, dev());
  for (int64_t k : {-1, 0, 2}) {
    H lo{a.s, {}}, up{a.s, {}};
    each(a.s, [&](auto& i) {
      lo.v.push_back(i[2] - i[1] <= k ? a.v[a.at(i)] : 0);
      up.v.push_back(i[2] - i[1] >= k ? a.v[a.at(i)] : 0);
    });
    expect(tril(ta, k), lo, "tril " + std::to_string(k));
    expect(triu(ta, k), up, "triu " + std::to_string(k));
  }
  for (int64_t d : {0, 1, 2}) {
    H cs{a.s, {}};
    each(a.s, [&](auto& i) {
      double s = 0;
      auto j = i;
      for (j[d] = 0; j[d] <= i[d]; ++j[d]) s += a.v[a.at(j)];
      cs.v.push_back(s);
    });
    expect(cumsum(ta, d), cs, "cumsum dim " + std::to_string(d));
  }
  H mf{a.s, {}};
  for (double x : a.v) mf.v.push_back(x > 0.5 ? 9.0 : x);
  expect(masked_fill(ta, gt(ta, 0.5), 9.0), mf, "masked_fill");
}

INSTANTIATE_TEST_SUITE_P(Devices, Indexing, ::testing::Values("cpu", "lazy:cpu", "lazy:reference"));

// d/dx sum(f(x) * w) against float64 central differences.
void gradcheck(const std::string& what, Shape s, const std::function<Tensor(const Tensor&)>& f) {
  SCOPED_TRACE(what);
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> x(static_cast<size_t>(numel(s)));
  for (auto& v : x) v = u(rng);
  Tensor xt = from_host(x.data(), DType::Float64, s, kLazy).requires_grad_();
  Tensor y = f(xt);
  std::vector<double> w(static_cast<size_t>(y.numel()));
  for (auto& v : w) v = u(rng) + 2;
  Tensor wt = from_host(w.data(), DType::Float64, y.shape(), kLazy);
  (y * wt).sum().backward();
  auto got = xt.grad().to_vector<double>();
  for (size_t k = 0; k < x.size(); ++k) {
    auto p = x, m = x;
    p[k] += 1e-6;
    m[k] -= 1e-6;
    NoGradGuard ng;
    double fp = (f(from_host(p.data(), DType::Float64, s, kLazy)) * wt).sum().item();
    double fm = (f(from_host(m.data(), DType::Float64, s, kLazy)) * wt).sum().item();
    ASSERT_NEAR(got[k], (fp - fm) / 2e-6, 1e-5) << what << " element " << k;
  }
}

TEST(IndexingGrad, SlicePrimitiveAndWhatIsBuiltOnIt) {
  gradcheck("strided slice", {4, 7}, [](const Tensor& x) { return slice(x, 1, 1, 7, 3); });
  gradcheck("flip", {3, 4}, [](const Tensor& x) { return flip(x, {0, 1}) * x; });
  gradcheck("narrow rows", {5, 2}, [](const Tensor& x) { return narrow(x, 0, 1, 3).sin(); });
  gradcheck("pad", {2, 3}, [](const Tensor& x) { return pad(x, {1, 2, 0, 1}, 0.5).exp(); });
  gradcheck("cat", {2, 3}, [](const Tensor& x) {
    return cat({x, x * x, slice(x, 1, 0, 1, 1)}, 1);
  });
  gradcheck("gather", {3, 4}, [](const Tensor& x) {
    std::vector<int64_t> i = {3, 0, 1, 1, 2, 2};
    return gather(x, 1, from_host(i.data(), DType::Int64, {3, 2}, kLazy));
  });
  gradcheck("embedding", {5, 3}, [](const Tensor& x) {
    std::vector<int64_t> i = {4, 4, 0, 2};
    return embedding(x, from_host(i.data(), DType::Int64, {4}, kLazy));
  });
  gradcheck("cumsum", {3, 4}, [](const Tensor& x) { return cumsum(x, 1) * x; });
  gradcheck("tril", {4, 4}, [](const Tensor& x) { return tril(x, -1).tanh(); });
}

TEST(IndexingKernels, MovementStaysInsideOneKernel) {
  // pad and cat are index arithmetic plus a select: one fused kernel, no copies.
  Tensor a = testing::random_tensor({64, 32}, 3, kLazy),
         b = testing::random_tensor({64, 16}, 4, kLazy);
  mark_step();
  Tensor y = (cat({a, b}, 1) * 2.0 + 1.0).relu();
  mark_step();
  EXPECT_EQ(metrics::last_graph().kernels, 1);
  Tensor z = flip(slice(a, 0, 1, 64, 2), {1}) + pad(slice(b, 0, 0, 32, 1), {8, 8});
  mark_step();
  EXPECT_EQ(metrics::last_graph().kernels, 1);
  (void)y;
  (void)z;
}

}  // namespace
}  // namespace lt

namespace lt {
namespace {

TEST_P(Indexing, ArgmaxArgminFirstOccurrence) {
  std::vector<float> v = {1, 5, 5, -2, 0, 3, 3, -7, 2, 2, 2, 2};
  Tensor t = from_host(v.data(), DType::Float32, {3, 4}, dev());
  EXPECT_EQ(argmax(t, 1).to_vector<int64_t>(), (std::vector<int64_t>{1, 1, 0}));
  EXPECT_EQ(argmin(t, 1).to_vector<int64_t>(), (std::vector<int64_t>{3, 3, 0}));
  EXPECT_EQ(argmax(t, 0, true).to_vector<int64_t>(), (std::vector<int64_t>{2, 0, 0, 2}));
  EXPECT_EQ(argmax(t, 0, true).shape(), (Shape{1, 4}));
  EXPECT_EQ(argmin(t).item(), 7);
  EXPECT_EQ(argmax(t).item(), 1);
}

}  // namespace
}  // namespace lt

namespace lt {
namespace {

TEST_P(Indexing, IntegerTensorsStayExactAndKeepTheirDtype) {
  const int64_t big = (int64_t{1} << 40) + 3;
  std::vector<int64_t> v = {big, -big, 7, 1, -(int64_t{1} << 33), 5};
  Tensor t = from_host(v.data(), DType::Int64, {2, 3}, dev());
  Tensor p = pad(t, {1, 0}, 9);
  EXPECT_EQ(p.dtype(), DType::Int64);
  EXPECT_EQ(p.to_vector<int64_t>(),
            (std::vector<int64_t>{9, big, -big, 7, 9, 1, -(int64_t{1} << 33), 5}));
  EXPECT_EQ(cat({t, t}, 0).dtype(), DType::Int64);
  std::vector<int64_t> iv = {2, 0, 1, 1};
  EXPECT_EQ(gather(t, 1, from_host(iv.data(), DType::Int64, {2, 2}, dev())).to_vector<int64_t>(),
            (std::vector<int64_t>{7, big, -(int64_t{1} << 33), -(int64_t{1} << 33)}));
  EXPECT_EQ(cumsum(t, 1).to_vector<int64_t>(),
            (std::vector<int64_t>{big, 0, 7, 1, 1 - (int64_t{1} << 33), 6 - (int64_t{1} << 33)}));
  EXPECT_EQ(tril(t).to_vector<int64_t>(),
            (std::vector<int64_t>{big, 0, 0, 1, -(int64_t{1} << 33), 0}));
  Tensor b = gt(t, int64_t{2});
  EXPECT_EQ(index_select(b, 1, from_host(iv.data(), DType::Int64, {2}, dev())).dtype(),
            DType::Bool);
}

}  // namespace
}  // namespace lt
