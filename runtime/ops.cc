// The op layer: checks devices, applies PyTorch's promotion rules with explicit casts (so every
// primitive sees operands of one dtype), and traces a node.
#include "runtime/ops.h"

#include <algorithm>
#include <initializer_list>
#include <utility>

#include "ir/error.h"
#include "runtime/saved.h"
#include "runtime/tape.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {

// Operand lists built by moving: a braced list of NodePtr would copy each pointer out of its
// initializer_list (an atomic increment and decrement per operand, on every traced op).
template <class... N>
NodeList nodes(N&&... n) {
  NodeList v;
  v.reserve(sizeof...(n));
  (v.push_back(std::forward<N>(n)), ...);
  return v;
}

const Device& common_device(const char* op, std::initializer_list<const Tensor*> ts) {
  const Tensor* first = nullptr;
  for (const Tensor* t : ts) {
    if (!t->defined()) fail(ErrorKind::Runtime, op, ": undefined tensor operand");
    if (!first)
      first = t;
    else if (t->impl()->device != first->impl()->device)
      fail(ErrorKind::Runtime, op,
           ": expected all tensors to be on the same device, but found at least two devices, ",
           first->device().str(), " and ", t->device().str(), " (shapes ",
           shape_str(first->shape()), " and ", shape_str(t->shape()), ")");
  }
  return first->impl()->device;
}

NodePtr cast_node(NodePtr n, DType t) {
  if (n->dtype == t) return n;
  Attrs a;
  a.dtype = t;
  return make_node(Op::Cast, nodes(std::move(n)), a);
}

NodePtr scalar_node(Scalar s, DType t) {
  return is_floating(t) ? make_scalar(t, s.f) : make_int_scalar(t, s.i);  // s.i: a float truncated
}

Tensor traced(NodePtr n, const Device& d) { return Tensor(make_tensor(std::move(n), d)); }

// Traces op(ins) and records it for autograd; srcs[i] is the tensor operand i continues (null: an
// operand that gets no gradient). Pointers, not Tensor copies, so the untaped path touches no
// reference counts. Operands and attributes are copied for the tape only when it records (a tensor
// requires grad): otherwise they move into the node, saving two allocations per traced op.
Tensor op_out(Op op, NodeList ins, Attrs at, const Device& d,
              std::initializer_list<const Tensor*> srcs) {
  bool taped = false;
  if (grad_enabled())
    for (const Tensor* s : srcs) taped = taped || (s && s->requires_grad());
  if (!taped) return traced(make_node(op, std::move(ins), std::move(at)), d);
  Tensor out = traced(make_node(op, ins, at), d);
  std::vector<Tensor> tape_srcs;
  tape_srcs.reserve(srcs.size());
  for (const Tensor* s : srcs) tape_srcs.push_back(s ? *s : Tensor());
  record_op(op, at, out, ins, tape_srcs);
  return out;
}
Tensor op_out(Op op, NodeList ins, Attrs at, const Device& d, const std::vector<Tensor>& srcs) {
  Tensor out = traced(make_node(op, ins, at), d);
  record_op(op, at, out, ins, srcs);
  return out;
}

// PyTorch's result_type of two tensors: a zero-dim operand only decides the dtype when its
// category (bool < int < float) is higher than the dimensioned operand's.
DType result_type(const Tensor& a, const Tensor& b) {
  auto cat = [](DType x) { return is_bool(x) ? 0 : is_floating(x) ? 2 : 1; };
  if (a.dim() == 0 && b.dim() > 0 && cat(a.dtype()) <= cat(b.dtype())) return b.dtype();
  if (b.dim() == 0 && a.dim() > 0 && cat(b.dtype()) <= cat(a.dtype())) return a.dtype();
  return promote(a.dtype(), b.dtype());
}

// PyTorch's checks before promotion: bool has no subtraction (not even against a number), and
// pow has no bool form nor, for an integer base, a negative integer exponent that is a number.
void check_operands(Op op, DType a, DType b, DType t, const Tensor& shown, const Scalar* s) {
  if (op == Op::Sub && (is_bool(a) || is_bool(b)))
    fail(ErrorKind::Runtime,
         "sub: subtraction, the `-` operator, with a bool tensor is not "
         "supported (shape ",
         shape_str(shown.shape()),
         "); use the `^` or logical_xor() operator, "
         "or logical_not() to invert a mask");
  if (op == Op::Pow && is_bool(t))
    fail(ErrorKind::NotImplemented, "pow: not implemented for bool tensors (shape ",
         shape_str(shown.shape()), ")");
  // Bitwise ops and shifts take integers (bitwise ops also bool), the division family no bool:
  // PyTorch raises NotImplementedError for the dtypes its kernels lack.
  const bool bitwise = op == Op::BitAnd || op == Op::BitOr || op == Op::BitXor;
  if ((bitwise || op == Op::Shl || op == Op::Shr) && is_floating(t))
    fail(ErrorKind::NotImplemented, op_name(op), ": not implemented for floating-point operands (",
         dtype_name(a), " and ", dtype_name(b), " promote to ", dtype_name(t), ", shape ",
         shape_str(shown.shape()), "); it takes integer", bitwise ? " or bool" : "", " tensors");
  if ((op == Op::FloorDiv || op == Op::Remainder || op == Op::Fmod || op == Op::Shl ||
       op == Op::Shr) &&
      is_bool(t))
    fail(ErrorKind::NotImplemented, op_name(op), ": not implemented for bool tensors (",
         dtype_name(a), " and ", dtype_name(b), ", shape ", shape_str(shown.shape()), ")");
  if (op == Op::Pow && s && !is_floating(t) && s->kind == ScalarKind::Int && s->i < 0)
    fail(ErrorKind::Runtime, "pow: integers to negative integer powers are not allowed (base ",
         dtype_name(t), " of shape ", shape_str(shown.shape()), ", exponent ", s->i, ")");
}

DType scalar_kind_dtype(ScalarKind k) {
  return k == ScalarKind::Bool  ? DType::Bool
         : k == ScalarKind::Int ? DType::Int64
                                : default_float();
}

Tensor binary(Op op, const Tensor& a, const Tensor& b) {
  const Device& d = common_device(op_name(op).data(), {&a, &b});
  DType t = result_type(a, b);
  check_operands(op, a.dtype(), b.dtype(), t, a, nullptr);
  if (op == Op::Div && !is_floating(t)) t = default_float();
  return op_out(op, nodes(cast_node(a.node(), t), cast_node(b.node(), t)), {}, d, {&a, &b});
}

Tensor binary(Op op, const Tensor& a, Scalar s, bool reflected = false) {
  const Device& d = common_device(op_name(op).data(), {&a});
  DType t = promote_with_scalar(a.dtype(), s.kind);
  // A reflected pow's number is the base: only an exponent that is a number is checked.
  check_operands(op, a.dtype(), scalar_kind_dtype(s.kind), t, a, reflected ? nullptr : &s);
  if (op == Op::Div && !is_floating(t)) t = default_float();
  NodePtr x = cast_node(a.node(), t), y = scalar_node(s, t);
  return reflected ? op_out(op, nodes(std::move(y), std::move(x)), {}, d, {nullptr, &a})
                   : op_out(op, nodes(std::move(x), std::move(y)), {}, d, {&a, nullptr});
}

Tensor compare(Op op, const Tensor& a, Scalar s) {
  const Device& d = common_device(op_name(op).data(), {&a});
  DType t = promote_with_scalar(a.dtype(), s.kind);
  return traced(make_node(op, nodes(cast_node(a.node(), t), scalar_node(s, t))), d);
}

std::vector<int64_t> all_dims(const Tensor& a, std::vector<int64_t> dims) {
  if (!dims.empty()) return dims;
  std::vector<int64_t> r(a.shape().size());
  for (size_t i = 0; i < r.size(); ++i) r[i] = static_cast<int64_t>(i);
  return r;
}

}  // namespace

Tensor add(const Tensor& a, const Tensor& b) { return binary(Op::Add, a, b); }
Tensor add(const Tensor& a, Scalar b) { return binary(Op::Add, a, b); }
Tensor sub(const Tensor& a, const Tensor& b) { return binary(Op::Sub, a, b); }
Tensor sub(const Tensor& a, Scalar b) { return binary(Op::Sub, a, b); }
Tensor rsub(const Tensor& a, Scalar b) { return binary(Op::Sub, a, b, true); }
Tensor mul(const Tensor& a, const Tensor& b) { return binary(Op::Mul, a, b); }
Tensor mul(const Tensor& a, Scalar b) { return binary(Op::Mul, a, b); }
Tensor div(const Tensor& a, const Tensor& b) { return binary(Op::Div, a, b); }
Tensor div(const Tensor& a, Scalar b) { return binary(Op::Div, a, b); }
Tensor rdiv(const Tensor& a, Scalar b) { return binary(Op::Div, a, b, true); }
Tensor pow(const Tensor& a, const Tensor& b) { return binary(Op::Pow, a, b); }
Tensor pow(const Tensor& a, Scalar b) { return binary(Op::Pow, a, b); }
Tensor rpow(const Tensor& a, Scalar b) { return binary(Op::Pow, a, b, true); }
Tensor maximum(const Tensor& a, const Tensor& b) { return binary(Op::Maximum, a, b); }
Tensor minimum(const Tensor& a, const Tensor& b) { return binary(Op::Minimum, a, b); }
Tensor eq(const Tensor& a, const Tensor& b) { return binary(Op::Eq, a, b); }
Tensor eq(const Tensor& a, Scalar b) { return compare(Op::Eq, a, b); }
Tensor ne(const Tensor& a, const Tensor& b) { return binary(Op::Ne, a, b); }
Tensor ne(const Tensor& a, Scalar b) { return compare(Op::Ne, a, b); }
Tensor lt(const Tensor& a, const Tensor& b) { return binary(Op::Lt, a, b); }
Tensor lt(const Tensor& a, Scalar b) { return compare(Op::Lt, a, b); }
Tensor le(const Tensor& a, const Tensor& b) { return binary(Op::Le, a, b); }
Tensor le(const Tensor& a, Scalar b) { return compare(Op::Le, a, b); }
Tensor gt(const Tensor& a, const Tensor& b) { return binary(Op::Gt, a, b); }
Tensor gt(const Tensor& a, Scalar b) { return compare(Op::Gt, a, b); }
Tensor ge(const Tensor& a, const Tensor& b) { return binary(Op::Ge, a, b); }
Tensor ge(const Tensor& a, Scalar b) { return compare(Op::Ge, a, b); }

Tensor floor_divide(const Tensor& a, const Tensor& b) { return binary(Op::FloorDiv, a, b); }
Tensor floor_divide(const Tensor& a, Scalar b) { return binary(Op::FloorDiv, a, b); }
Tensor rfloor_divide(const Tensor& a, Scalar b) { return binary(Op::FloorDiv, a, b, true); }
Tensor remainder(const Tensor& a, const Tensor& b) { return binary(Op::Remainder, a, b); }
Tensor remainder(const Tensor& a, Scalar b) { return binary(Op::Remainder, a, b); }
Tensor rremainder(const Tensor& a, Scalar b) { return binary(Op::Remainder, a, b, true); }
Tensor fmod(const Tensor& a, const Tensor& b) { return binary(Op::Fmod, a, b); }
Tensor fmod(const Tensor& a, Scalar b) { return binary(Op::Fmod, a, b); }
Tensor bitwise_and(const Tensor& a, const Tensor& b) { return binary(Op::BitAnd, a, b); }
Tensor bitwise_and(const Tensor& a, Scalar b) { return binary(Op::BitAnd, a, b); }
Tensor bitwise_or(const Tensor& a, const Tensor& b) { return binary(Op::BitOr, a, b); }
Tensor bitwise_or(const Tensor& a, Scalar b) { return binary(Op::BitOr, a, b); }
Tensor bitwise_xor(const Tensor& a, const Tensor& b) { return binary(Op::BitXor, a, b); }
Tensor bitwise_xor(const Tensor& a, Scalar b) { return binary(Op::BitXor, a, b); }
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b) { return binary(Op::Shl, a, b); }
Tensor bitwise_left_shift(const Tensor& a, Scalar b) { return binary(Op::Shl, a, b); }
Tensor rbitwise_left_shift(const Tensor& a, Scalar b) { return binary(Op::Shl, a, b, true); }
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b) { return binary(Op::Shr, a, b); }
Tensor bitwise_right_shift(const Tensor& a, Scalar b) { return binary(Op::Shr, a, b); }
Tensor rbitwise_right_shift(const Tensor& a, Scalar b) { return binary(Op::Shr, a, b, true); }
Tensor bitwise_not(const Tensor& a) {
  const Device& d = common_device("bitwise_not", {&a});
  if (is_floating(a.dtype()))
    fail(ErrorKind::NotImplemented, "bitwise_not: not implemented for ", dtype_name(a.dtype()),
         " tensors (shape ", shape_str(a.shape()), "); it takes integer or bool tensors");
  return traced(make_node(Op::BitNot, nodes(a.node())), d);  // integers and bools get no gradient
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  const Device& d = common_device("logical_and", {&a, &b});
  NodePtr x = cast_node(a.node(), DType::Bool), y = cast_node(b.node(), DType::Bool);
  return traced(make_node(Op::And, nodes(std::move(x), std::move(y))), d);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  const Device& d = common_device("logical_or", {&a, &b});
  NodePtr x = cast_node(a.node(), DType::Bool), y = cast_node(b.node(), DType::Bool);
  return traced(make_node(Op::Or, nodes(std::move(x), std::move(y))), d);
}
Tensor logical_not(const Tensor& a) {
  return traced(make_node(Op::Not, nodes(cast_node(a.node(), DType::Bool))),
                common_device("logical_not", {&a}));
}

Tensor where(const Tensor& c, const Tensor& a, const Tensor& b) {
  const Device& d = common_device("where", {&c, &a, &b});
  if (c.dtype() != DType::Bool)
    fail(ErrorKind::Runtime,
         "where: expected condition to be a boolean tensor, but got a tensor with dtype ",
         dtype_name(c.dtype()));
  DType t = result_type(a, b);
  return op_out(Op::Where, nodes(c.node(), cast_node(a.node(), t), cast_node(b.node(), t)), {}, d,
                {nullptr, &a, &b});
}
Tensor where(const Tensor& c, const Tensor& a, Scalar b) {
  DType t = promote_with_scalar(a.dtype(), b.kind);
  return where(c, a.dtype() == t ? a : cast(a, t), scalar_tensor(b, t, a.device()));
}
Tensor where(const Tensor& c, Scalar a, const Tensor& b) {
  DType t = promote_with_scalar(b.dtype(), a.kind);
  return where(c, scalar_tensor(a, t, b.device()), b.dtype() == t ? b : cast(b, t));
}

Tensor unary(Op op, const Tensor& a) {
  const Device& d = common_device(op_name(op).data(), {&a});
  NodePtr x = a.node();
  bool keeps_int = op == Op::Neg || op == Op::Abs || op == Op::Relu;
  if (!keeps_int && !is_floating(x->dtype)) x = cast_node(x, default_float());
  if (keeps_int && is_bool(x->dtype))
    fail(ErrorKind::Runtime, op_name(op), ": not supported for bool tensors (shape ",
         shape_str(a.shape()), ")");
  return op_out(op, nodes(std::move(x)), {}, d, {&a});
}

Tensor clamp(const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi) {
  if (!lo && !hi)
    fail(ErrorKind::Runtime, "clamp: at least one of 'min' or 'max' must not be None");
  Tensor r = a;
  // Bounds keep their kind: an integer tensor clamped by ints stays integer, by floats promotes.
  if (lo) r = binary(Op::Maximum, r, *lo);
  if (hi) r = binary(Op::Minimum, r, *hi);
  return r;
}

Tensor cast(const Tensor& a, DType t) {
  const Device& d = common_device("to", {&a});
  if (a.dtype() == t) return a;
  Attrs at;
  at.dtype = t;
  return op_out(Op::Cast, nodes(a.node()), std::move(at), d, {&a});
}

Tensor reduce(Op op, const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  const Device& d = common_device(op_name(op).data(), {&a});
  NodePtr x = a.node();
  if ((op == Op::ReduceSum || op == Op::ReduceProd) && is_integral(x->dtype))
    x = cast_node(x, DType::Int64);
  Attrs at;
  at.ints = to_ints(all_dims(a, std::move(dims)));
  at.keepdim = keepdim;
  return op_out(op, nodes(std::move(x)), std::move(at), d, {&a});
}

namespace {
// Float-only composites compute integer inputs in the default float dtype, as PyTorch does.
NodePtr float_node(const Tensor& a) {
  NodePtr x = a.node();
  return is_floating(x->dtype) ? x : cast_node(x, default_float());
}
}  // namespace

Tensor softmax(const Tensor& a, int64_t dim) {
  Attrs at;
  at.ints = {dim};
  return op_out(Op::Softmax, nodes(float_node(a)), std::move(at), common_device("softmax", {&a}),
                {&a});
}
Tensor log_softmax(const Tensor& a, int64_t dim) {
  Attrs at;
  at.ints = {dim};
  return op_out(Op::LogSoftmax, nodes(float_node(a)), std::move(at),
                common_device("log_softmax", {&a}), {&a});
}
Tensor logsumexp(const Tensor& a, std::vector<int64_t> dims, bool keepdim) {
  Attrs at;
  at.ints = to_ints(all_dims(a, std::move(dims)));
  at.keepdim = keepdim;
  return op_out(Op::LogSumExp, nodes(float_node(a)), std::move(at),
                common_device("logsumexp", {&a}), {&a});
}
Tensor var(const Tensor& a, std::vector<int64_t> dims, double correction, bool keepdim) {
  const Device& d = common_device("var", {&a});
  if (!is_floating(a.dtype()))  // PyTorch computes no spread of integers (nor of bools)
    fail(ErrorKind::Runtime, "var/std: only floating point dtypes are supported, got ",
         dtype_name(a.dtype()), " (shape ", shape_str(a.shape()), ")");
  Attrs at;
  at.ints = to_ints(all_dims(a, std::move(dims)));
  at.keepdim = keepdim;
  at.value = correction;
  return op_out(Op::Var, nodes(a.node()), std::move(at), d, {&a});
}
Tensor std(const Tensor& a, std::vector<int64_t> dims, double correction, bool keepdim) {
  Tensor v = var(a, std::move(dims), correction, keepdim);
  if (!grad_enabled() || !v.requires_grad()) return v.sqrt();
  Tensor s;
  {
    NoGradGuard no_grad;  // one node: the rule recorded below is the gradient
    s = v.sqrt();
  }
  // sqrt's own gradient is infinite at 0, and 0 * inf is nan where the input is constant; the
  // gradient of std is taken as 0 there (PyTorch's std_backward masks result == 0 the same way).
  Saved out(s.node(), s.device());
  record(s, {v}, "StdBackward", [out](const Tensor& g) {
    Tensor y = out.get();
    return std::vector<Tensor>{where(eq(y, 0.0), Scalar(0.0), g / (y * 2.0))};
  });
  return s;
}
Tensor layer_norm(const Tensor& x, std::vector<int64_t> normalized_shape, const Tensor& w,
                  const Tensor& b, double eps) {
  const Device& d = common_device("layer_norm", {&x});
  int64_t k = static_cast<int64_t>(normalized_shape.size());
  Shape tail = k <= x.dim() ? Shape(x.shape().end() - k, x.shape().end()) : Shape{};
  if (k == 0 || k > x.dim() || !same_ints(tail, normalized_shape))
    fail(ErrorKind::Runtime, "layer_norm: normalized_shape ", shape_str(normalized_shape),
         " does not match the trailing dims of input of shape ", shape_str(x.shape()));
  NodeList in = {x.node()};
  std::vector<Tensor> srcs = {x};
  for (const Tensor* t : {&w, &b})
    if (t->defined()) {
      common_device("layer_norm", {&x, t});
      in.push_back(t->node());
      srcs.push_back(*t);
    }
  Attrs at;
  at.ints = {k, w.defined() ? 1 : 0, b.defined() ? 1 : 0};
  at.value = eps;
  return op_out(Op::LayerNorm, std::move(in), at, d, srcs);
}
Tensor gelu(const Tensor& a, const std::string& approximate) {
  if (approximate != "none" && approximate != "tanh")
    fail(ErrorKind::Runtime, "gelu: approximate argument must be either none or tanh, got '",
         approximate, "'");
  Attrs at;
  at.stream = approximate == "tanh" ? 1 : 0;
  return op_out(Op::Gelu, nodes(float_node(a)), std::move(at), common_device("gelu", {&a}), {&a});
}
Tensor silu(const Tensor& a) {
  return op_out(Op::Silu, nodes(float_node(a)), {}, common_device("silu", {&a}), {&a});
}

Tensor reshape(const Tensor& a, std::vector<int64_t> shape) {
  return reshape_to(a, to_ints(shape));
}

Tensor reshape_to(const Tensor& a, IntList shape) {
  const Device& d = common_device("reshape", {&a});
  int64_t known = 1, infer_at = -1;
  for (size_t i = 0; i < shape.size(); ++i) {
    if (shape[i] == -1) {
      if (infer_at >= 0)
        fail(ErrorKind::Runtime, "reshape: only one dimension can be inferred in ",
             shape_str(shape));
      infer_at = static_cast<int64_t>(i);
    } else if (shape[i] < 0) {
      fail(ErrorKind::Runtime, "reshape: invalid shape dimension ", shape[i], " in ",
           shape_str(shape));
    } else {
      known = size_mul(known, shape[i], "reshape");
    }
  }
  if (infer_at >= 0) {
    if (known == 0 || a.numel() % known != 0)
      fail(ErrorKind::Runtime, "reshape: shape ", shape_str(shape),
           " is invalid for input of size ", a.numel());
    shape[infer_at] = a.numel() / known;
  }
  if (same_ints(shape, a.shape())) return a;
  Attrs at;
  at.ints = std::move(shape);
  return op_out(Op::Reshape, nodes(a.node()), std::move(at), d, {&a});
}

Tensor unbroadcast(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  size_t lead = g.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < g.shape().size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1))
      dims.push_back(static_cast<int64_t>(i));
  Tensor r = dims.empty() ? g : g.sum(dims, true);
  return reshape_to(r, shape);  // node level: a gradient is no view of the temporary sum
}

Tensor permute(const Tensor& a, std::vector<int64_t> dims) {
  const Device& d = common_device("permute", {&a});
  int64_t r = a.dim();
  for (auto& x : dims) x = normalize_axis(x, r, "permute");
  Attrs at;
  at.ints = to_ints(dims);
  return op_out(Op::Permute, nodes(a.node()), std::move(at), d, {&a});
}

Tensor expand(const Tensor& a, std::vector<int64_t> shape) {
  const Device& d = common_device("expand", {&a});
  size_t off = shape.size() >= a.shape().size() ? shape.size() - a.shape().size() : 0;
  for (size_t i = off; i < shape.size(); ++i)
    if (shape[i] == -1) shape[i] = a.shape()[i - off];
  if (same_ints(shape, a.shape())) return a;
  Attrs at;
  at.ints = to_ints(shape);
  return op_out(Op::Expand, nodes(a.node()), std::move(at), d, {&a});
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  const Device& d = common_device("matmul", {&a, &b});
  if (a.dtype() != b.dtype())
    fail(ErrorKind::Runtime, "matmul: expected both operands to have the same dtype, but got ",
         dtype_name(a.dtype()), " and ", dtype_name(b.dtype()), " (shapes ", shape_str(a.shape()),
         " and ", shape_str(b.shape()), ")");
  return op_out(Op::Matmul, nodes(a.node(), b.node()), {}, d, {&a, &b});
}

Tensor gather_node(const Tensor& src, int64_t axis, const Tensor& index) {
  const Device& d = common_device("gather", {&src, &index});
  Attrs at;
  at.ints = {axis};
  return op_out(Op::Gather, nodes(src.node(), index.node()), std::move(at), d, {&src, nullptr});
}

Tensor gather_vector(const Tensor& src, int64_t axis, NodePtr index) {
  const Device& d = common_device("gather", {&src});
  // The J positions spread to the selection's shape (src's with J at axis) by a reshape and an
  // expand: a view, so the gather reads each position once per element. Built as nodes, so that
  // eager devices run the index arithmetic inside the gather's graph, not as ops of its own.
  index = cast_node(std::move(index), DType::Int64);  // index_select and embedding take int32 too
  int64_t j = 1;
  for (int64_t e : index->shape) j *= e;
  std::vector<int64_t> one(static_cast<size_t>(src.dim()), 1), full = to_vector(src.shape());
  one[static_cast<size_t>(axis)] = full[static_cast<size_t>(axis)] = j;
  if (!same_ints(one, index->shape)) {
    Attrs r;
    r.ints = to_ints(one);
    index = make_node(Op::Reshape, nodes(std::move(index)), std::move(r));
  }
  if (!same_ints(full, one)) {
    Attrs e;
    e.ints = to_ints(full);
    index = make_node(Op::Expand, nodes(std::move(index)), std::move(e));
  }
  Attrs at;
  at.ints = {axis};
  return op_out(Op::Gather, nodes(src.node(), std::move(index)), std::move(at), d, {&src, nullptr});
}

Tensor scatter_add_node(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src) {
  const Device& d = common_device("scatter_add", {&base, &index, &src});
  Attrs at;
  at.ints = {axis};
  return op_out(Op::ScatterAdd, nodes(base.node(), index.node(), src.node()), std::move(at), d,
                {&base, nullptr, &src});
}

Tensor slice_node(const Tensor& a, std::vector<int64_t> start_step_size) {
  const Device& d = common_device("slice", {&a});
  Attrs at;
  at.ints = to_ints(start_step_size);
  return op_out(Op::Slice, nodes(a.node()), std::move(at), d, {&a});
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return rdiv(b, a); }

}  // namespace lt
