#include "ir/conv.h"

#include <string>

#include "ir/error.h"

namespace lt {

IntList ConvParams::ints(std::vector<int64_t> extra) const {
  IntList r = {stride[0], stride[1], padding[0], padding[1], dilation[0], dilation[1], groups};
  r.insert(r.end(), extra.begin(), extra.end());
  return r;
}

ConvParams ConvParams::from(Op op, const Attrs& a) {
  const size_t want = op == Op::Conv2d ? 7 : 9;
  if (a.ints.size() != want)
    fail(ErrorKind::Runtime, op_name(op), ": expected ", want, " integer attributes, got ",
         shape_str(a.ints));
  ConvParams p;
  for (int i = 0; i < 2; ++i) {
    p.stride[i] = a.ints[i], p.padding[i] = a.ints[2 + i], p.dilation[i] = a.ints[4 + i];
    if (p.stride[i] < 1 || p.padding[i] < 0 || p.dilation[i] < 1)
      fail(ErrorKind::Runtime, op_name(op), ": stride ", shape_str({p.stride[0], p.stride[1]}),
           " and dilation must be positive and padding non-negative, got attrs ",
           shape_str(a.ints));
  }
  p.groups = a.ints[6];
  if (p.groups < 1)
    fail(ErrorKind::Runtime, op_name(op), ": groups must be positive, got ", p.groups);
  return p;
}

std::array<int64_t, 2> conv_extra(Op op, const Attrs& a) {
  if (a.ints.size() != 9) fail(ErrorKind::Runtime, op_name(op), ": malformed attributes");
  if (a.ints[7] < 1 || a.ints[8] < 1)
    fail(ErrorKind::Runtime, op_name(op), ": sizes ", shape_str({a.ints[7], a.ints[8]}),
         " must be positive");
  return {a.ints[7], a.ints[8]};
}

Shape conv_output_shape(Op op, const Shape& x, const Shape& w, const ConvParams& p) {
  const std::string name(op_name(op));
  auto shapes = [&] { return "input " + shape_str(x) + " and weight " + shape_str(w); };
  if (x.size() != 4 || w.size() != 4)
    fail(ErrorKind::Runtime, name, ": expected a 4-D input [N, C, H, W] and a 4-D weight ",
         "[out_channels, in_channels/groups, kH, kW], got ", shapes());
  const int64_t C = x[1], O = w[0], Cg = w[1];
  const int64_t channels = size_mul(Cg, p.groups, name);  // groups is a user attribute
  if (C != channels || O % p.groups != 0 || O < 1)
    fail(ErrorKind::Runtime, name, ": ", shapes(), " do not match with groups=", p.groups,
         " (expected input channels = weight.size(1) * groups = ", channels,
         " and out_channels divisible by groups)");
  Shape y = {x[0], O, 0, 0};
  for (int i = 0; i < 2; ++i) {
    if (w[2 + i] < 1)
      fail(ErrorKind::Runtime, name, ": ", shapes(), ": empty kernel (dim ", 2 + i, ")");
    const int64_t span = size_add(size_mul(p.dilation[i], w[2 + i] - 1, name), 1, name);
    const int64_t padded = size_add(x[2 + i], size_mul(2, p.padding[i], name), name);
    if (padded < span)
      fail(ErrorKind::Runtime, name, ": ", shapes(), ": input size ", x[2 + i], " with padding ",
           p.padding[i], " is smaller than the kernel extent ", span, " (dim ", 2 + i, ")");
    y[2 + i] = (padded - span) / p.stride[i] + 1;
  }
  return y;
}

Inferred infer_conv(Op op, const NodeList& in, const Attrs& a) {
  const std::string name(op_name(op));
  if (in.size() < 2 || in.size() > (op == Op::Conv2d ? 3u : 2u))
    fail(ErrorKind::Runtime, name, ": wrong number of operands (", in.size(), ")");
  const DType t = in[0]->dtype;
  for (const auto& i : in)
    if (i->dtype != t || !is_floating(t))
      fail(ErrorKind::Runtime, name, ": operands must be floating tensors of one dtype, got ",
           dtype_name(in[0]->dtype), " and ", dtype_name(i->dtype));
  const ConvParams p = ConvParams::from(op, a);
  if (op == Op::Conv2d) {
    Shape y = conv_output_shape(op, in[0]->shape, in[1]->shape, p);
    if (in.size() == 3 && in[2]->shape != Shape{y[1]})
      fail(ErrorKind::Runtime, name, ": expected bias of shape [", y[1], "] for weight ",
           shape_str(in[1]->shape), ", got ", shape_str(in[2]->shape));
    return {t, y};
  }
  const auto extra = conv_extra(op, a);
  // The forward shapes the gradient belongs to: (x, w) -> dy.
  Shape x, w, dy;
  if (op == Op::Conv2dGradInput) {
    dy = in[0]->shape, w = in[1]->shape;
    if (dy.size() != 4 || w.size() != 4)
      fail(ErrorKind::Runtime, name, ": expected 4-D grad_output and weight, got ", shape_str(dy),
           " and ", shape_str(w));
    x = {dy[0], size_mul(w[1], p.groups, name), extra[0], extra[1]};
  } else {
    x = in[0]->shape, dy = in[1]->shape;
    if (x.size() != 4 || dy.size() != 4)
      fail(ErrorKind::Runtime, name, ": expected 4-D input and grad_output, got ", shape_str(x),
           " and ", shape_str(dy));
    if (p.groups < 1 || x[1] % p.groups != 0)
      fail(ErrorKind::Runtime, name, ": input ", shape_str(x),
           " channels not divisible by groups=", p.groups);
    w = {dy[1], x[1] / p.groups, extra[0], extra[1]};
  }
  if (conv_output_shape(op, x, w, p) != dy)
    fail(ErrorKind::Runtime, name, ": grad_output ", shape_str(dy), " is not the output of input ",
         shape_str(x), " and weight ", shape_str(w));
  return {t, op == Op::Conv2dGradInput ? x : w};
}

}  // namespace lt
