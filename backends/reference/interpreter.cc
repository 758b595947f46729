// Validation and node-by-node evaluation of a prim graph, and host buffer <-> value conversion.
#include "backends/reference/interpreter.h"

#include <algorithm>
#include <string>

#include "backends/reference/reference_ops.h"
#include "ir/half.h"
#include "ir/node.h"

namespace lt::ref {
namespace {

// Elements a value may have: well below the point where byte counts overflow.
constexpr int64_t kMaxElements = int64_t{1} << 56;

std::string node_str(const PrimGraph& g, size_t i) {
  const PNode& n = g.nodes[i];
  return "reference: node " + std::to_string(i) + " (" + std::string(op_name(n.op)) + " -> " +
         std::string(dtype_name(n.dtype)) + shape_str(n.shape) + ")";
}

void check_shape(const PrimGraph& g, size_t i) {
  int64_t n = 1;
  for (int64_t d : g.nodes[i].shape) {
    if (d < 0) fail(ErrorKind::Runtime, node_str(g, i), ": negative dimension");
    if (d != 0 && n > kMaxElements / d)
      fail(ErrorKind::Runtime, node_str(g, i), ": shape is too large");
    n *= d;
  }
}

// Ops whose elements are copies of operand elements of the same dtype (or 0/1 for bool results),
// so they are already exact in the node's dtype and need no rounding pass.
bool copies_operands(Op op) {
  switch (op_info(op).cls) {
    case OpClass::Leaf:
      return op == Op::Param;
    case OpClass::Reshape:
    case OpClass::Permute:
    case OpClass::Expand:
    case OpClass::Slice:
    case OpClass::Gather:
    case OpClass::Where:
    case OpClass::Compare:
    case OpClass::Logical:
    case OpClass::Predicate1:
      return true;
    default:
      return op == Op::Maximum || op == Op::Minimum || op == Op::ReduceMax || op == Op::ReduceMin;
  }
}

}  // namespace

void validate_graph(const PrimGraph& g) {
  const size_t num_ops = all_ops().size();
  // Stand-ins for IR nodes, so ir/infer.cc's rules check each node (only dtype and shape are read).
  NodeList shadow(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const PNode& n = g.nodes[i];
    if (static_cast<size_t>(n.op) >= num_ops)
      fail(ErrorKind::Runtime, "reference: node ", i, " has an unknown op code ",
           static_cast<int>(n.op));
    if (static_cast<int>(n.dtype) >= kNumDTypes)
      fail(ErrorKind::Runtime, "reference: node ", i, " has an unknown dtype code ",
           static_cast<int>(n.dtype));
    const OpInfo& info = op_info(n.op);
    if (!reference_rule(n.op))
      fail(ErrorKind::NotImplemented, "not implemented: ", info.name, " on reference (node ", i,
           info.primitive ? ")" : "; composites must be decomposed before execution)");
    check_shape(g, i);
    if (info.arity >= 0 && n.inputs.size() != static_cast<size_t>(info.arity))
      fail(ErrorKind::Runtime, node_str(g, i), ": expected ", info.arity, " operands, got ",
           n.inputs.size());
    NodeList operands;
    for (int j : n.inputs) {
      if (j < 0 || static_cast<size_t>(j) >= i)
        fail(ErrorKind::Runtime, node_str(g, i), ": operand index ", j,
             " is invalid (operands must be earlier nodes, 0..", static_cast<int64_t>(i) - 1, ")");
      operands.push_back(shadow[static_cast<size_t>(j)]);
    }
    if (n.op == Op::Param || n.op == Op::Scalar) {
      if (n.input_index < 0 || (g.num_inputs > 0 && n.input_index >= g.num_inputs))
        fail(ErrorKind::Runtime, node_str(g, i), ": input_index ", n.input_index,
             " is out of range (graph has ", g.num_inputs, " inputs)");
    } else if (info.cls != OpClass::Leaf) {
      Inferred r;
      try {
        r = infer(n.op, operands, n.attrs);
      } catch (const Error& e) {
        throw Error(e.kind(), node_str(g, i) + ": " + e.what());
      }
      if (r.dtype != n.dtype || r.shape != n.shape)
        fail(ErrorKind::Runtime, node_str(g, i), ": the shape rule gives ", dtype_name(r.dtype),
             shape_str(r.shape), " for these operands");
    }
    auto s = std::make_shared<Node>();
    s->op = n.op;
    s->dtype = n.dtype;
    s->shape = n.shape;
    shadow[i] = std::move(s);
  }
  for (int o : g.outputs)
    if (o < 0 || static_cast<size_t>(o) >= g.nodes.size())
      fail(ErrorKind::Runtime, "reference: graph output refers to node ", o, " but the graph has ",
           g.nodes.size(), " nodes");
}

namespace {
template <class T, class F>
void apply(std::vector<T>& v, F f) {
  for (T& x : v) x = f(x);
}
}  // namespace

void finalize(Value& v, bool exact) {
  const auto n = static_cast<size_t>(numel(v.shape));
  if ((v.floating() ? v.f.size() : v.i.size()) != n)
    fail(ErrorKind::Runtime,
         "reference: internal error: a rule produced the wrong number of elements for ",
         dtype_name(v.dtype), shape_str(v.shape));
  if (exact) return;
  switch (v.dtype) {  // one loop per dtype, so the common ones vectorize
    case DType::Float64:
    case DType::Int64:
      break;
    case DType::Float32:
      apply(v.f, [](double x) { return static_cast<double>(static_cast<float>(x)); });
      break;
    case DType::Int32:
      apply(v.i, [](int64_t x) { return int64_t{static_cast<int32_t>(x)}; });
      break;
    case DType::Bool:
      apply(v.i, [](int64_t x) { return int64_t{x != 0}; });
      break;
    default:
      if (v.floating())
        apply(v.f, [t = v.dtype](double x) { return round_to_dtype(x, t); });
      else
        apply(v.i, [t = v.dtype](int64_t x) { return wrap_to_dtype(x, t); });
  }
}

void load_buffer(const Buffer& b, Value& v) {
  const int64_t n = numel(v.shape);
  const DType t = v.dtype;
  const size_t w = dtype_size(t);
  if (!b.on_host()) fail(ErrorKind::Runtime, "reference: input buffer is not host memory");
  if (b.bytes() < static_cast<size_t>(n) * w)
    fail(ErrorKind::Runtime, "reference: input buffer of ", b.bytes(), " bytes is too small for ",
         dtype_name(t), shape_str(v.shape));
  const auto* p = static_cast<const unsigned char*>(b.data());
  if (t == DType::Float32) {  // the common case, without a per-element dtype switch
    v.f.resize(static_cast<size_t>(n));
    const auto* q = static_cast<const float*>(b.data());
    for (int64_t k = 0; k < n; ++k) v.f[k] = q[k];
  } else if (v.floating()) {
    v.f.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) v.f[k] = load_as_double(p + k * w, t);
  } else {
    v.i.resize(static_cast<size_t>(n));
    for (int64_t k = 0; k < n; ++k) v.i[k] = load_as_int(p + k * w, t);
  }
}

void value_to_memory(const Value& v, void* dst) {
  const int64_t n = numel(v.shape);
  const size_t w = dtype_size(v.dtype);
  auto* p = static_cast<unsigned char*>(dst);
  if (v.dtype == DType::Float32)
    for (int64_t k = 0; k < n; ++k) static_cast<float*>(dst)[k] = static_cast<float>(v.f[k]);
  else if (v.floating())
    for (int64_t k = 0; k < n; ++k) store_from_double(p + k * w, v.dtype, v.f[k]);
  else
    for (int64_t k = 0; k < n; ++k) store_from_int(p + k * w, v.dtype, v.i[k]);
}

BufferPtr value_to_buffer(const Value& v) {
  auto b = std::make_shared<HostBuffer>(static_cast<size_t>(numel(v.shape)) * dtype_size(v.dtype));
  value_to_memory(v, b->data());
  return b;
}

std::vector<std::unique_ptr<Value>> evaluate(const PrimGraph& g,
                                             const std::vector<RunInput>& inputs,
                                             const std::vector<bool>& keep,
                                             const std::function<void(int, const Value&)>& sink) {
  const size_t n = g.nodes.size();
  std::vector<size_t> last_use(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (int j : g.nodes[i].inputs) last_use[static_cast<size_t>(j)] = i;
  std::vector<std::unique_ptr<Value>> vals(n);
  for (size_t i = 0; i < n; ++i) {
    const PNode& node = g.nodes[i];
    auto out = std::make_unique<Value>();
    out->dtype = node.dtype;
    out->shape = node.shape;
    const auto count = static_cast<size_t>(numel(node.shape));
    if (out->floating())
      out->f = take_doubles(count);
    else
      out->i = take_ints(count);
    Ctx c{node, static_cast<int>(i), {}, inputs, *out};
    for (int j : node.inputs) c.in.push_back(vals[static_cast<size_t>(j)].get());
    reference_rule(node.op)(c);
    finalize(*out, copies_operands(node.op));
    if (sink) sink(static_cast<int>(i), *out);
    vals[i] = std::move(out);
    // Operands whose last consumer this was are no longer needed.
    for (int j : node.inputs)
      if (last_use[static_cast<size_t>(j)] == i && !keep[static_cast<size_t>(j)])
        vals[static_cast<size_t>(j)].reset();
    if (!keep[i] && last_use[i] <= i) vals[i].reset();
  }
  return vals;
}

}  // namespace lt::ref
