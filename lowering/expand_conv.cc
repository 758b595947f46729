#include "lowering/expand_conv.h"

#include <algorithm>
#include <initializer_list>

#include "ir/conv.h"
#include "lowering/node_builders.h"

namespace lt {
namespace conv_expansion {
namespace {

// `s` with dim `d` replaced by the dims `mid`.
Shape with(const Shape& s, int64_t d, std::initializer_list<int64_t> mid) {
  Shape r(s.begin(), s.begin() + d);
  r.insert(r.end(), mid.begin(), mid.end());
  r.insert(r.end(), s.begin() + d + 1, s.end());
  return r;
}
// `s` with dims d and d + 1 merged into one.
Shape merged(const Shape& s, int64_t d) {
  Shape r = s;
  r[static_cast<size_t>(d)] *= r[static_cast<size_t>(d) + 1];
  r.erase(r.begin() + d + 1);
  return r;
}

// `count` elements from `start` every `step` along dim d (runtime slice_dim_prim).
NodePtr slice_dim(NodePtr x, int64_t d, int64_t start, int64_t step, int64_t count) {
  const Shape& s = x->shape;
  if (start == 0 && step == 1 && count == s[static_cast<size_t>(d)]) return x;
  IntList sss;
  for (size_t i = 0; i < s.size(); ++i) {
    if (static_cast<int64_t>(i) == d)
      sss.insert(sss.end(), {start, step, count});
    else
      sss.insert(sss.end(), {0, 1, s[i]});
  }
  return nb::with_ints(Op::Slice, std::move(x), std::move(sss));
}

// x (n > 0 long along d) at [before, before + n) of a `total`-long result whose other positions
// hold x tiled (runtime placed_along): movement only, every read in bounds.
NodePtr placed_along(const NodePtr& x, int64_t d, int64_t before, int64_t total) {
  const int64_t n = x->shape[static_cast<size_t>(d)];
  const int64_t shift = (n - before % n) % n, reps = (shift + total + n - 1) / n;
  const Shape& s = x->shape;
  NodePtr tiled = nb::reshape(nb::expand(nb::reshape(x, with(s, d, {1, n})), with(s, d, {reps, n})),
                              with(s, d, {reps * n}));
  return slice_dim(tiled, d, shift, 1, total);
}

// x with `before` and `after` (>= 0) elements of `value` around it along d (runtime pad_dim): the
// placement masked by positions, which come from an iota.
NodePtr pad_dim(const NodePtr& x, int64_t d, int64_t before, int64_t after, double value) {
  if (before == 0 && after == 0) return x;
  const int64_t n = x->shape[static_cast<size_t>(d)], total = n + before + after;
  if (n == 0) return make_constant(x->dtype, value, with(x->shape, d, {total}));
  Shape along(x->shape.size(), 1);
  along[static_cast<size_t>(d)] = total;
  NodePtr pos = nb::reshape(make_iota(total), along);
  auto at = [](int64_t v) { return make_constant(DType::Int64, static_cast<double>(v)); };
  NodePtr inside =
      nb::bin(Op::And, nb::bin(Op::Ge, pos, at(before)), nb::bin(Op::Lt, pos, at(before + n)));
  return make_node(Op::Where,
                   {inside, placed_along(x, d, before, total), make_constant(x->dtype, value)});
}

// The gradient of slice_dim(x, d, start, step, size) for an x n long along d: g in its place,
// zeros elsewhere (runtime slice_vjp).
NodePtr slice_grad(NodePtr g, int64_t d, int64_t start, int64_t step, int64_t size, int64_t n) {
  // Dilate: step - 1 zeros after every element, then drop the trailing ones (one element needs
  // none: a stride past the input makes one window, and its step may be huge).
  if (step > 1 && size > 1) {
    const Shape s = g->shape;
    NodePtr spread = pad_dim(nb::reshape(g, with(s, d, {size, 1})), d + 1, 0, step - 1, 0.0);
    g = slice_dim(nb::reshape(spread, with(s, d, {size * step})), d, 0, 1, step * (size - 1) + 1);
  }
  return pad_dim(g, d, start, n - start - g->shape[static_cast<size_t>(d)], 0.0);
}

struct Window {
  int64_t kernel, stride, dilation;
  int64_t count(int64_t n) const { return (n - dilation * (kernel - 1) - 1) / stride + 1; }
};

// How the general sliding window reads x (runtime sliding_window): x repeated `reps` times along
// the dim, the first `total` elements read as `kernel` rows of length `row`, so row j starts at
// j * dilation (mod n) and window o of row j is column o * stride.
struct Tiling {
  int64_t row, total, reps;
};
Tiling tiling(int64_t n, int64_t out, const Window& w) {
  const int64_t m = std::max<int64_t>(1, ((out - 1) * w.stride + 1 - w.dilation + n - 1) / n);
  const int64_t row = m * n + w.dilation, total = w.kernel * row;
  return {row, total, (total + n - 1) / n};
}

// Dim d (n long) of x replaced by (windows, kernel): result[.., o, j, ..] = x[.., o * stride +
// j * dilation, ..]. Movement only.
NodePtr sliding_window(const NodePtr& x, int64_t d, const Window& w) {
  const Shape& s = x->shape;
  const int64_t n = s[static_cast<size_t>(d)], out = w.count(n);
  if (w.kernel == 1) return nb::reshape(slice_dim(x, d, 0, w.stride, out), with(s, d, {out, 1}));
  if (w.dilation == 1 && w.stride == w.kernel)  // non-overlapping windows: a plain reshape
    return nb::reshape(slice_dim(x, d, 0, 1, out * w.kernel), with(s, d, {out, w.kernel}));
  const Tiling t = tiling(n, out, w);
  NodePtr r = nb::reshape(nb::expand(nb::reshape(x, with(s, d, {1, n})), with(s, d, {t.reps, n})),
                          with(s, d, {t.reps * n}));
  r = nb::reshape(slice_dim(r, d, 0, 1, t.total), with(s, d, {w.kernel, t.row}));
  return nb::transpose(slice_dim(r, d + 1, 0, w.stride, out), d, d + 1);
}

// The gradient of sliding_window(x, d, w) for an x n long along d, from g [.., out, kernel, ..]:
// the view's movement ops taken back, the repeat's gradient a sum over the copies (col2im).
NodePtr sliding_window_grad(const NodePtr& g, int64_t d, const Window& w, int64_t n) {
  const int64_t out = g->shape[static_cast<size_t>(d)];
  if (w.kernel == 1) return slice_grad(nb::reshape(g, merged(g->shape, d)), d, 0, w.stride, out, n);
  if (w.dilation == 1 && w.stride == w.kernel)
    return slice_grad(nb::reshape(g, merged(g->shape, d)), d, 0, 1, out * w.kernel, n);
  const Tiling t = tiling(n, out, w);
  NodePtr r = slice_grad(nb::transpose(g, d, d + 1), d + 1, 0, w.stride, out, t.row);
  r = slice_grad(nb::reshape(r, merged(r->shape, d)), d, 0, 1, t.total, t.reps * n);
  Attrs sum;
  sum.ints = {d};
  return make_node(Op::ReduceSum, {nb::reshape(r, with(r->shape, d, {t.reps, n}))}, sum);
}

// The sizes of one convolution: input [N, C, H, W], weight [O, Cg = C / G, kh, kw], output
// [N, O, oh, ow], and the GEMM's K = Cg * kh * kw.
struct Conv {
  ConvParams p;
  int64_t N, C, H, W, O, G, Cg, Og, kh, kw, oh, ow, K;
  Window along_h() const { return {kh, p.stride[0], p.dilation[0]}; }
  Window along_w() const { return {kw, p.stride[1], p.dilation[1]}; }
};
Conv sizes(const Node& n) {
  Conv c;
  c.p = ConvParams::from(n.op, n.attrs);
  const Shape& a = n.inputs[0]->shape;
  const Shape& b = n.inputs[1]->shape;
  const Shape& x = n.op == Op::Conv2dGradInput ? n.shape : a;
  const Shape& y = n.op == Op::Conv2d ? n.shape : n.op == Op::Conv2dGradInput ? a : b;
  const Shape& w = n.op == Op::Conv2dGradWeight ? n.shape : b;
  c.N = x[0], c.C = x[1], c.H = x[2], c.W = x[3];
  c.O = w[0], c.Cg = w[1], c.kh = w[2], c.kw = w[3];
  c.oh = y[2], c.ow = y[3];
  c.G = c.p.groups, c.Og = c.O / c.G, c.K = c.Cg * c.kh * c.kw;
  return c;
}

// The [N, C, oh, kh, ow, kw] window view of the zero-padded input.
NodePtr windows(const NodePtr& x, const Conv& c) {
  NodePtr xp = pad_dim(pad_dim(x, 3, c.p.padding[1], c.p.padding[1], 0.0), 2, c.p.padding[0],
                       c.p.padding[0], 0.0);
  return sliding_window(sliding_window(xp, 2, c.along_h()), 4, c.along_w());
}
// Its gradient: [N, C, oh, kh, ow, kw] back to the input [N, C, H, W].
NodePtr windows_grad(const NodePtr& g, const Conv& c) {
  const int64_t hp = c.H + 2 * c.p.padding[0], wp = c.W + 2 * c.p.padding[1];
  NodePtr r = sliding_window_grad(sliding_window_grad(g, 4, c.along_w(), wp), 2, c.along_h(), hp);
  return slice_dim(slice_dim(r, 2, c.p.padding[0], 1, c.H), 3, c.p.padding[1], 1, c.W);
}

// The window view as im2col rows [N*oh*ow, K] (groups: [G, N*oh*ow, K]), and back.
NodePtr im2col(const NodePtr& win, const Conv& c) {
  const int64_t rows = c.N * c.oh * c.ow;
  if (c.G == 1) return nb::reshape(nb::permute(win, {0, 2, 4, 1, 3, 5}), {rows, c.K});
  return nb::reshape(nb::permute(nb::reshape(win, {c.N, c.G, c.Cg, c.oh, c.kh, c.ow, c.kw}),
                                 {1, 0, 3, 5, 2, 4, 6}),
                     {c.G, rows, c.K});
}
NodePtr col2im(const NodePtr& cols, const Conv& c) {
  if (c.G == 1)
    return nb::permute(nb::reshape(cols, {c.N, c.oh, c.ow, c.C, c.kh, c.kw}), {0, 3, 1, 4, 2, 5});
  return nb::reshape(nb::permute(nb::reshape(cols, {c.G, c.N, c.oh, c.ow, c.Cg, c.kh, c.kw}),
                                 {1, 0, 4, 2, 5, 3, 6}),
                     {c.N, c.C, c.oh, c.kh, c.ow, c.kw});
}
// The weight as the GEMM's right operand: [K, O] (groups: [G, K, Og]).
NodePtr weight_matrix(const NodePtr& w, const Conv& c) {
  return nb::transposed(c.G == 1 ? nb::reshape(w, {c.O, c.K}) : nb::reshape(w, {c.G, c.Og, c.K}));
}
// The GEMM's output rows [N*oh*ow, O] (groups: [G, N*oh*ow, Og]) as [N, O, oh, ow], and back.
NodePtr from_rows(const NodePtr& y, const Conv& c) {
  if (c.G == 1) return nb::permute(nb::reshape(y, {c.N, c.oh, c.ow, c.O}), {0, 3, 1, 2});
  return nb::reshape(nb::permute(nb::reshape(y, {c.G, c.N, c.oh, c.ow, c.Og}), {1, 0, 4, 2, 3}),
                     {c.N, c.O, c.oh, c.ow});
}
NodePtr to_rows(const NodePtr& dy, const Conv& c) {
  const int64_t rows = c.N * c.oh * c.ow;
  if (c.G == 1) return nb::reshape(nb::permute(dy, {0, 2, 3, 1}), {rows, c.O});
  return nb::reshape(nb::permute(nb::reshape(dy, {c.N, c.G, c.Og, c.oh, c.ow}), {1, 0, 3, 4, 2}),
                     {c.G, rows, c.Og});
}

bool expands(const Node& n, const LowerOptions& opts) {
  if (op_info(n.op).cls != OpClass::Conv) return false;
  return !opts.conv(n.dtype) || n.inputs.at(0)->shape.at(0) == 0;
}

NodePtr expansion(const Node& n, const NodeList& in) {
  const Conv c = sizes(n);
  if (n.op == Op::Conv2d) {
    NodePtr y = from_rows(nb::matmul(im2col(windows(in[0], c), c), weight_matrix(in[1], c)), c);
    return in.size() == 3 ? nb::bin(Op::Add, y, nb::reshape(in[2], {1, c.O, 1, 1})) : y;
  }
  if (n.op == Op::Conv2dGradInput) {  // (dy, w): the product's gradient through the view
    NodePtr cols = nb::matmul(to_rows(in[0], c), nb::transposed(weight_matrix(in[1], c)));
    return windows_grad(col2im(cols, c), c);
  }
  // conv2d_grad_weight (x, dy): im2col^T times the output gradient, in the weight's layout.
  NodePtr wm = nb::matmul(nb::transposed(im2col(windows(in[0], c), c)), to_rows(in[1], c));
  return nb::reshape(nb::transposed(wm), {c.O, c.Cg, c.kh, c.kw});
}

}  // namespace
}  // namespace conv_expansion

bool expands_conv(const Node& n, const LowerOptions& opts) {
  return conv_expansion::expands(n, opts);
}

NodePtr expand_conv(const Node& n, const NodeList& in) { return conv_expansion::expansion(n, in); }

}  // namespace lt
