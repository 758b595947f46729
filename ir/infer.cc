// Shape and dtype inference, one rule per op class. Errors name the op and the shapes involved.
#include <algorithm>

#include "ir/attention.h"
#include "ir/conv.h"
#include "ir/error.h"
#include "ir/node.h"

namespace lt {
namespace {

std::string shapes_of(const NodeList& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i) s += (i ? " and " : "") + shape_str(in[i]->shape);
  return s;
}

std::string dtypes_of(const NodeList& in) {
  std::string s;
  for (size_t i = 0; i < in.size(); ++i)
    s += (i ? ", " : "") + std::string(dtype_name(in[i]->dtype));
  return s;
}

void same_dtype(Op op, const NodeList& in, size_t from) {
  for (size_t i = from + 1; i < in.size(); ++i)
    if (in[i]->dtype != in[from]->dtype)
      fail(ErrorKind::Type, op_name(op), ": operand dtypes differ (", dtypes_of(in),
           "); the runtime promotes before tracing");
}

Shape reduce_shape(Op op, const Shape& s, const Attrs& a) {
  std::vector<bool> red(s.size(), false);
  for (auto ax : a.ints) {
    int64_t n =
        normalize_axis(ax, static_cast<int64_t>(s.size()), std::string(op_name(op)).c_str());
    if (s.empty()) continue;
    if (red[n])
      fail(ErrorKind::Runtime, op_name(op), ": dim ", n, " appears multiple times in ",
           shape_str(a.ints));
    red[n] = true;
  }
  Shape r;
  for (size_t i = 0; i < s.size(); ++i) {
    if (!red[i])
      r.push_back(s[i]);
    else if (a.keepdim)
      r.push_back(1);
  }
  return r;
}

// gather/scatter_add: one normalized axis, an int64 index of the data's rank that fits it in every
// other dim (and, along the axis, a non-empty dim to index whenever there is an index).
int64_t check_indexed(Op op, const Attrs& a, const Node& data, const Node& index,
                      const std::string& shapes) {
  const std::string name(op_name(op));
  const auto rank = static_cast<int64_t>(data.shape.size());
  if (a.ints.size() != 1)
    fail(ErrorKind::Runtime, name, ": expected one axis attribute, got ", a.ints.size());
  if (index.dtype != DType::Int64)
    fail(ErrorKind::Runtime, name, ": expected an int64 index, got ", dtype_name(index.dtype), " (",
         shapes, ")");
  if (rank == 0 || static_cast<int64_t>(index.shape.size()) != rank)
    fail(ErrorKind::Runtime, name,
         ": index must have the rank of the input, which must be at least 1 (", shapes, ")");
  if (a.ints[0] < -rank || a.ints[0] >= rank)
    fail(ErrorKind::Index, name, ": dimension out of range (expected to be in range of [", -rank,
         ", ", rank - 1, "], but got ", a.ints[0], ") (", shapes, ")");
  const int64_t axis = a.ints[0] < 0 ? a.ints[0] + rank : a.ints[0];
  for (int64_t d = 0; d < rank; ++d)
    if (d != axis && index.shape[d] > data.shape[d])
      fail(ErrorKind::Runtime, name, ": index ", shape_str(index.shape), " is larger than input ",
           shape_str(data.shape), " at dimension ", d, " (", shapes, ")");
  if (data.shape[axis] == 0 && numel(index.shape) > 0)
    fail(ErrorKind::Index, name, ": index into dimension ", axis, " of size 0 (", shapes, ")");
  return axis;
}

}  // namespace

Inferred infer(Op op, const NodeList& in, const Attrs& a) {
  const OpInfo& info = op_info(op);
  // A view, not a copy: this runs once per traced op. Op names are string literals (ir/ops.def),
  // so name.data() is NUL-terminated where a C string is needed.
  const std::string_view name = info.name;
  switch (info.cls) {
    case OpClass::Leaf:
      fail(ErrorKind::Runtime, name,
           ": leaves are made with make_param/make_scalar/make_constant/make_iota");
    case OpClass::Rand:
      for (auto& i : in)
        if (i->dtype != DType::Int64 || !i->shape.empty())
          fail(ErrorKind::Type, name, ": seed and offset must be 0-d int64, got ", dtypes_of(in));
      if (!is_floating(a.dtype))
        fail(ErrorKind::Type, name, ": dtype must be floating, got ", dtype_name(a.dtype));
      for (auto d : a.ints)
        if (d < 0) fail(ErrorKind::Value, name, ": negative dimension in ", shape_str(a.ints));
      return {a.dtype, a.ints};
    case OpClass::Unary:
      if (op == Op::BitNot) {  // integers, and bool as logical not
        if (is_floating(in[0]->dtype))
          fail(ErrorKind::Type, name, ": expected an integer or bool tensor, got ",
               dtype_name(in[0]->dtype), " with shape ", shape_str(in[0]->shape));
        return {in[0]->dtype, in[0]->shape};
      }
      if (!is_floating(in[0]->dtype) && op != Op::Neg && op != Op::Abs && op != Op::Relu)
        fail(ErrorKind::Type, name, ": expected a floating-point tensor, got ",
             dtype_name(in[0]->dtype), " with shape ", shape_str(in[0]->shape));
      if (is_bool(in[0]->dtype)) fail(ErrorKind::Type, name, ": not supported for bool tensors");
      return {in[0]->dtype, in[0]->shape};
    case OpClass::Predicate1:
      return {DType::Bool, in[0]->shape};
    case OpClass::Binary: {
      same_dtype(op, in, 0);
      if (op == Op::Div && !is_floating(in[0]->dtype))
        fail(ErrorKind::Type, name, ": expected floating operands, got ", dtypes_of(in));
      const bool bitwise = op == Op::BitAnd || op == Op::BitOr || op == Op::BitXor;
      if ((bitwise || op == Op::Shl || op == Op::Shr) && is_floating(in[0]->dtype))
        fail(ErrorKind::Type, name, ": expected integer", bitwise ? " or bool" : "",
             " operands, got ", dtypes_of(in));
      // On bool, add is logical or, mul logical and and the bitwise ops logical (PyTorch); the
      // rest (sub, floor_divide, remainder, shifts, ...) have no bool meaning.
      if (is_bool(in[0]->dtype) && op != Op::Maximum && op != Op::Minimum && op != Op::Add &&
          op != Op::Mul && !bitwise)
        fail(ErrorKind::Type, name, ": not supported for bool tensors (got ", dtypes_of(in), ")");
      return {in[0]->dtype, broadcast_shapes(in[0]->shape, in[1]->shape, name.data())};
    }
    case OpClass::Compare:
      same_dtype(op, in, 0);
      return {DType::Bool, broadcast_shapes(in[0]->shape, in[1]->shape, name.data())};
    case OpClass::Logical:
      for (auto& i : in)
        if (!is_bool(i->dtype))
          fail(ErrorKind::Type, name, ": expected bool operands, got ", dtypes_of(in));
      return {DType::Bool, broadcast_shapes(in[0]->shape, in[1]->shape, name.data())};
    case OpClass::Where: {
      if (!is_bool(in[0]->dtype))
        fail(ErrorKind::Type, name, ": condition must be bool, got ", dtype_name(in[0]->dtype));
      same_dtype(op, in, 1);
      Shape s = broadcast_shapes(in[0]->shape, in[1]->shape, name.data());
      return {in[1]->dtype, broadcast_shapes(s, in[2]->shape, name.data())};
    }
    case OpClass::Cast:
      return {a.dtype, in[0]->shape};
    case OpClass::Reduce: {
      DType t = in[0]->dtype;
      if ((op == Op::Mean || op == Op::Var || op == Op::LogSumExp) && !is_floating(t))
        fail(ErrorKind::Runtime, name,
             ": could not infer output dtype; input dtype must be floating, got ", dtype_name(t));
      Shape out = reduce_shape(op, in[0]->shape, a);  // checks the axes
      // No identity: an empty group cannot be reduced, though an empty tensor can be along a
      // non-empty dim (a [2, 0] amax over dim 0 is [0], as in PyTorch).
      const Shape& s = in[0]->shape;
      if ((op == Op::ReduceMax || op == Op::ReduceMin) && numel(s) == 0 &&
          std::any_of(a.ints.begin(), a.ints.end(), [&](int64_t ax) {
            return s.empty() ||
                   s[normalize_axis(ax, static_cast<int64_t>(s.size()), "reduce")] == 0;
          }))
        fail(ErrorKind::Index, name, ": cannot reduce an empty tensor of shape ",
             shape_str(in[0]->shape), " (the operation has no identity)");
      if (op == Op::ReduceSum && is_bool(t))
        fail(ErrorKind::Type, name, ": cast bool to an integer type first");
      return {t, std::move(out)};
    }
    case OpClass::Reshape: {
      for (auto d : a.ints)
        if (d < 0)
          fail(ErrorKind::Runtime, name, ": invalid shape ", shape_str(a.ints),
               " (resolve -1 before tracing)");
      check_extent(a.ints, name);  // so numel() below cannot overflow
      if (numel(a.ints) != numel(in[0]->shape))
        fail(ErrorKind::Runtime, name, ": shape ", shape_str(a.ints),
             " is invalid for input of size ", numel(in[0]->shape), " (shape ",
             shape_str(in[0]->shape), ")");
      return {in[0]->dtype, a.ints};
    }
    case OpClass::Permute: {
      const Shape& s = in[0]->shape;
      if (a.ints.size() != s.size())
        fail(ErrorKind::Runtime, name, ": number of dims in permutation ", shape_str(a.ints),
             " does not match input shape ", shape_str(s));
      std::vector<bool> seen(s.size(), false);
      Shape r(s.size());
      for (size_t i = 0; i < a.ints.size(); ++i) {
        int64_t p = a.ints[i];
        if (p < 0 || p >= static_cast<int64_t>(s.size()) || seen[p])
          fail(ErrorKind::Runtime, name, ": ", shape_str(a.ints),
               " is not a permutation of the dims of ", shape_str(s));
        seen[p] = true;
        r[i] = s[p];
      }
      return {in[0]->dtype, r};
    }
    case OpClass::Expand: {
      const Shape& s = in[0]->shape;
      const Shape& t = a.ints;
      if (t.size() < s.size())
        fail(ErrorKind::Runtime, name, ": target shape ", shape_str(t),
             " has fewer dims than input ", shape_str(s));
      size_t off = t.size() - s.size();
      for (size_t i = 0; i < t.size(); ++i) {
        if (t[i] < 0)
          fail(ErrorKind::Runtime, name, ": negative size in target shape ", shape_str(t));
        if (i >= off && s[i - off] != 1 && s[i - off] != t[i])
          fail(ErrorKind::Runtime, name, ": the expanded size (", t[i],
               ") must match the existing size (", s[i - off], ") at non-singleton dimension ", i,
               ". Target sizes: ", shape_str(t), ". Tensor sizes: ", shape_str(s));
      }
      return {in[0]->dtype, t};
    }
    case OpClass::Slice: {
      const Shape& s = in[0]->shape;
      if (a.ints.size() != 3 * s.size())
        fail(ErrorKind::Runtime, name, ": expected (start, step, size) for each of the ", s.size(),
             " dims of ", shape_str(s), ", got ", a.ints.size(), " values");
      Shape r(s.size());
      for (size_t d = 0; d < s.size(); ++d) {
        int64_t start = a.ints[3 * d], step = a.ints[3 * d + 1], size = a.ints[3 * d + 2];
        if (step == 0 || size < 0)
          fail(ErrorKind::Runtime, name, ": dim ", d, " has step ", step, " and size ", size);
        const int64_t last =
            size > 0 ? size_add(start, size_mul(step, size - 1, name), name) : start;
        if (size > 0 && (start < 0 || start >= s[d] || last < 0 || last >= s[d]))
          fail(ErrorKind::Index, name, ": dim ", d, " reads [", start, " .. ", last, "] (step ",
               step, ") outside 0..", s[d] - 1, " of input ", shape_str(s));
        r[d] = size;
      }
      return {in[0]->dtype, r};
    }
    case OpClass::Gather: {
      check_indexed(op, a, *in[0], *in[1],
                    "input " + shape_str(in[0]->shape) + ", index " + shape_str(in[1]->shape));
      return {in[0]->dtype, in[1]->shape};
    }
    case OpClass::ScatterAdd: {
      const std::string shapes = "input " + shape_str(in[0]->shape) + ", index " +
                                 shape_str(in[1]->shape) + ", src " + shape_str(in[2]->shape);
      check_indexed(op, a, *in[0], *in[1], shapes);
      if (in[2]->dtype != in[0]->dtype)
        fail(ErrorKind::Runtime, name, ": src dtype ", dtype_name(in[2]->dtype),
             " differs from input dtype ", dtype_name(in[0]->dtype), " (", shapes, ")");
      if (is_bool(in[0]->dtype))
        fail(ErrorKind::Type, name, ": bool is summed as int64 by the runtime (", shapes, ")");
      if (in[2]->shape.size() != in[1]->shape.size())
        fail(ErrorKind::Runtime, name, ": src must have the rank of the index (", shapes, ")");
      for (size_t d = 0; d < in[1]->shape.size(); ++d)
        if (in[1]->shape[d] > in[2]->shape[d])
          fail(ErrorKind::Runtime, name, ": index is larger than src at dimension ", d, " (",
               shapes, ")");
      return {in[0]->dtype, in[0]->shape};
    }
    case OpClass::AxisUnary: {
      if (!is_floating(in[0]->dtype))
        fail(ErrorKind::Type, name, ": expected a floating-point tensor, got ",
             dtype_name(in[0]->dtype));
      if (a.ints.size() != 1) fail(ErrorKind::Runtime, name, ": expected exactly one dim");
      normalize_axis(a.ints[0], static_cast<int64_t>(in[0]->shape.size()), name.data());
      return {in[0]->dtype, in[0]->shape};
    }
    case OpClass::LayerNorm: {
      const Shape& x = in[0]->shape;
      if (!is_floating(in[0]->dtype))
        fail(ErrorKind::Type, name, ": expected a floating-point input, got ",
             dtype_name(in[0]->dtype));
      if (a.ints.size() != 3 || a.ints[1] < 0 || a.ints[1] > 1 || a.ints[2] < 0 || a.ints[2] > 1 ||
          in.size() != static_cast<size_t>(1 + a.ints[1] + a.ints[2]))
        fail(ErrorKind::Runtime, name, ": malformed attributes");
      int64_t k = a.ints[0];
      if (k < 1 || k > static_cast<int64_t>(x.size()))
        fail(ErrorKind::Runtime, name, ": normalized_shape of ", k,
             " dims does not fit input of shape ", shape_str(x));
      Shape tail(x.end() - k, x.end());
      for (size_t i = 1; i < in.size(); ++i) {
        if (in[i]->shape != tail)
          fail(ErrorKind::Runtime, name, ": weight/bias of shape ", shape_str(in[i]->shape),
               " do not match normalized_shape ", shape_str(tail), " of input ", shape_str(x));
        if (in[i]->dtype != in[0]->dtype)
          fail(ErrorKind::Type, name, ": dtypes differ (", dtypes_of(in), ")");
      }
      return {in[0]->dtype, x};
    }
    case OpClass::Conv:
      return infer_conv(op, in, a);
    case OpClass::Attention:
      return infer_attention(op, in, a);
    case OpClass::Concat: {
      if (in.empty()) fail(ErrorKind::Runtime, name, ": expected at least one operand");
      same_dtype(op, in, 0);
      int64_t total = 0;
      for (const auto& x : in) {
        if (x->shape.size() != 1)
          fail(ErrorKind::Runtime, name, ": every operand must be one-dimensional, got ",
               shapes_of(in));
        total = size_add(total, x->shape[0], name);
      }
      return {in[0]->dtype, Shape{total}};
    }
    case OpClass::Collective: {
      const size_t most = op == Op::AllReduce ? 3 : 2;  // all_reduce's optional group
      if (a.ints.size() < 2 || a.ints.size() > most || a.ints[1] < 1 ||
          (a.ints.size() == 3 && a.ints[2] < 0))
        fail(ErrorKind::Runtime, name, ": attributes {", op == Op::AllReduce ? "reduce" : "root",
             ", world size", op == Op::AllReduce ? "[, group >= 0]" : "", "} expected, got ",
             shape_str(a.ints));
      if (op == Op::AllReduce && (a.ints[0] < 0 || a.ints[0] > 2))
        fail(ErrorKind::Runtime, name, ": reduce op ", a.ints[0],
             " is not one of 0 (sum), 1 (avg), 2 (max)");
      if (op == Op::AllReduce && a.ints[0] == 1 && !is_floating(in[0]->dtype))
        fail(ErrorKind::Type, name, ": op avg needs a floating dtype, got ",
             dtype_name(in[0]->dtype), " of shape ", shape_str(in[0]->shape));
      if (op == Op::Broadcast && (a.ints[0] < 0 || a.ints[0] >= a.ints[1]))
        fail(ErrorKind::Index, name, ": root ", a.ints[0], " is not a rank of a group of ",
             a.ints[1]);
      if (op != Op::AllGather) return {in[0]->dtype, in[0]->shape};
      Shape s{a.ints[1]};
      s.insert(s.end(), in[0]->shape.begin(), in[0]->shape.end());
      return {in[0]->dtype, s};
    }
    case OpClass::Matmul: {
      same_dtype(op, in, 0);
      const Shape &x = in[0]->shape, &y = in[1]->shape;
      if (x.empty() || y.empty())
        fail(ErrorKind::Runtime, name, ": both arguments need at least 1 dimension, got ",
             shapes_of(in));
      if (is_bool(in[0]->dtype))
        fail(ErrorKind::Runtime, name, ": not implemented for bool (shapes ", shapes_of(in), ")");
      int64_t kx = x.back(), ky = y.size() == 1 ? y[0] : y[y.size() - 2];
      if (kx != ky)
        fail(ErrorKind::Runtime, name, ": mat1 and mat2 shapes cannot be multiplied (",
             shapes_of(in), ": ", kx, " != ", ky, ")");
      Shape bx(x.begin(), x.end() - std::min<size_t>(x.size(), 2));
      Shape by(y.begin(), y.end() - std::min<size_t>(y.size(), 2));
      Shape r = broadcast_shapes(bx, by, name.data());
      if (x.size() >= 2) r.push_back(x[x.size() - 2]);
      if (y.size() >= 2) r.push_back(y.back());
      return {in[0]->dtype, r};
    }
  }
  fail(ErrorKind::Runtime, name, ": no shape rule");
}

}  // namespace lt
