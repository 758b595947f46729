#include "ir/node.h"

#include <array>
#include <atomic>
#include <cstring>
#include <deque>
#include <mutex>
#include <unordered_map>

#include "ir/error.h"
#include "ir/half.h"
#include "ir/pool.h"

namespace lt {

std::string Hash128::hex() const {
  static const char* d = "0123456789abcdef";
  std::string s(32, '0');
  for (int i = 0; i < 16; ++i) {
    s[15 - i] = d[(hi >> (4 * i)) & 15];
    s[31 - i] = d[(lo >> (4 * i)) & 15];
  }
  return s;
}

namespace {
std::atomic<int64_t> g_live_nodes{0};
}  // namespace

int64_t live_nodes() { return g_live_nodes.load(std::memory_order_relaxed); }

Node::Node() { g_live_nodes.fetch_add(1, std::memory_order_relaxed); }

Node::Node(Op o, DType t, Shape&& s, Attrs&& a, NodeList&& in, int32_t src)
    : op(o),
      dtype(t),
      shape(std::move(s)),
      attrs(std::move(a)),
      inputs(std::move(in)),
      source(src) {
  g_live_nodes.fetch_add(1, std::memory_order_relaxed);
}

Node::Node(Op o, DType t, int32_t src) : op(o), dtype(t), source(src) {
  g_live_nodes.fetch_add(1, std::memory_order_relaxed);
}

Node::Node(const Node& o)
    : op(o.op),
      dtype(o.dtype),
      shape(o.shape),
      attrs(o.attrs),
      inputs(o.inputs),
      hash(o.hash),
      data(o.data),
      scalar(o.scalar),
      scalar_i(o.scalar_i),
      source(o.source) {
  g_live_nodes.fetch_add(1, std::memory_order_relaxed);
}

Node::~Node() {
  g_live_nodes.fetch_sub(1, std::memory_order_relaxed);
  if (inputs.empty()) return;  // a leaf (half the nodes of a trace with Python-number operands)
  NodeList stack = std::move(inputs);
  while (!stack.empty()) {
    NodePtr n = std::move(stack.back());
    stack.pop_back();
    if (n.use_count() == 1) {  // the last owner: detach its operands before it dies
      auto& in = const_cast<Node&>(*n).inputs;
      for (auto& c : in) stack.push_back(std::move(c));
      in.clear();
    }
  }
}

// Every field that tells nodes apart, with the small ones packed into one header word (each 64-bit
// word costs two dependent multiplies per lane, and a binary op's 12 words were ~9% of the per-op
// tracing cost): op, dtypes, keepdim and the two list lengths at fixed bit positions, and a flag
// bit for each of the constant value and the rand stream, which are hashed only where set. The
// packing is injective for ops < 256, dtypes < 128 and lists < 2^20 entries (checked).
static_assert(kNumDTypes <= 128, "node_hash packs a dtype into 7 bits");
static_assert(sizeof(Op) == 1, "node_hash packs an op into 8 bits");
static Hash128 node_hash(const Node& n) {
  const uint64_t ndim = n.shape.size(), nints = n.attrs.ints.size();
  uint64_t value_bits;
  std::memcpy(&value_bits, &n.attrs.value, 8);
  const bool has_value = value_bits != 0, has_stream = n.attrs.stream != 0;
  if (ndim >= (1u << 20) || nints >= (1u << 20))
    fail(ErrorKind::Value, op_name(n.op), ": too many dimensions or attributes (", ndim, ", ",
         nints, ")");
  const uint64_t header = static_cast<uint64_t>(n.op) | static_cast<uint64_t>(n.dtype) << 8 |
                          static_cast<uint64_t>(n.attrs.dtype) << 15 |
                          static_cast<uint64_t>(n.attrs.keepdim) << 22 |
                          static_cast<uint64_t>(has_value) << 23 |
                          static_cast<uint64_t>(has_stream) << 24 | ndim << 25 | nints << 45;
  Hasher h(0x6c74);
  h.add(header);
  for (auto d : n.shape) h.add(static_cast<uint64_t>(d));
  for (auto v : n.attrs.ints) h.add(static_cast<uint64_t>(v));
  if (has_value) h.add(value_bits);
  if (has_stream) h.add(static_cast<uint64_t>(n.attrs.stream));
  for (const auto& in : n.inputs) h.add(in->hash);
  return h.digest();
}

// A Scalar leaf's hash is a function of its dtype alone (the value is deliberately left out), so
// it is computed once per dtype rather than once per Python-number operand of every traced op.
static const Hash128& scalar_hash(DType dtype) {
  static const std::array<Hash128, kNumDTypes> table = [] {
    std::array<Hash128, kNumDTypes> t;
    for (int i = 0; i < kNumDTypes; ++i) {
      Node n;
      n.op = Op::Scalar;
      n.dtype = static_cast<DType>(i);
      t[i] = node_hash(n);
    }
    return t;
  }();
  return table[static_cast<size_t>(dtype)];
}

NodePtr make_node(Op op, NodeList inputs, Attrs attrs) {
  const OpInfo& info = op_info(op);
  if (info.arity >= 0 && static_cast<int>(inputs.size()) != info.arity)
    fail(ErrorKind::Runtime, op_name(op), ": expected ", info.arity, " operands, got ",
         inputs.size());
  for (const auto& in : inputs)
    if (!in) fail(ErrorKind::Runtime, op_name(op), ": null operand");
  Inferred r = infer(op, inputs, attrs);
  check_extent(r.shape, info.name);  // e.g. broadcasting [2^40, 1] with [1, 2^40]
  auto n = make_pooled<Node>(op, r.dtype, std::move(r.shape), std::move(attrs), std::move(inputs),
                             current_source());
  n->hash = node_hash(*n);
  return n;
}

NodePtr make_param(DType dtype, Shape shape, std::shared_ptr<LeafData> data) {
  check_extent(shape, "param");
  auto n = make_pooled<Node>(Op::Param, dtype, current_source());
  n->shape = std::move(shape);
  n->data = std::move(data);
  n->hash = node_hash(*n);
  return n;
}

NodePtr make_scalar(DType dtype, double value) {
  auto n = make_pooled<Node>(Op::Scalar, dtype, current_source());
  n->scalar = value;
  // Integral dtypes read scalar_i. A floating value outside int64's range (1e30, inf, NaN) has no
  // integer twin: double_to_int64 gives 0 where a plain cast would be undefined behaviour.
  n->scalar_i = double_to_int64(value);
  n->hash = scalar_hash(dtype);  // value deliberately not part of the hash
  return n;
}

NodePtr make_int_scalar(DType dtype, int64_t value) {
  NodePtr n = make_scalar(dtype, static_cast<double>(value));
  const_cast<Node&>(*n).scalar_i = value;  // still private to this function: safe
  return n;
}

NodePtr make_constant(DType dtype, double value, Shape shape) {
  check_extent(shape, "constant");
  auto n = make_pooled<Node>(Op::Constant, dtype, current_source());
  n->shape = std::move(shape);
  n->attrs.value = value;
  n->hash = node_hash(*n);
  return n;
}

NodePtr make_iota(int64_t n) {
  Shape shape = {n};
  check_extent(shape, "iota");
  auto node = make_pooled<Node>(Op::Iota, DType::Int64, current_source());
  node->shape = std::move(shape);
  node->hash = node_hash(*node);
  return node;
}

namespace {
std::mutex g_src_mu;
std::deque<std::string>& src_table() {  // deque: references stay valid
  static std::deque<std::string> t;
  return t;
}
std::unordered_map<std::string, int32_t>& src_index() {
  static std::unordered_map<std::string, int32_t> m;
  return m;
}
// Initial-exec (see ir/pool.cc): read for every traced node.
[[gnu::tls_model("initial-exec")]] thread_local int32_t t_current_source = -1;
}  // namespace

int32_t intern_source(const std::string& loc) {
  std::lock_guard<std::mutex> g(g_src_mu);
  auto it = src_index().find(loc);
  if (it != src_index().end()) return it->second;
  int32_t id = static_cast<int32_t>(src_table().size());
  src_table().push_back(loc);
  src_index().emplace(loc, id);
  return id;
}

const std::string& source_str(int32_t id) {
  static const std::string unknown;
  std::lock_guard<std::mutex> g(g_src_mu);
  if (id < 0 || id >= static_cast<int32_t>(src_table().size())) return unknown;
  return src_table()[id];
}

namespace {
std::atomic<SourceProvider> g_source_provider{nullptr};
}  // namespace

void set_current_source(int32_t id) { t_current_source = id; }
void set_source_provider(SourceProvider p) { g_source_provider.store(p); }
int32_t current_source() {
  if (t_current_source >= 0) return t_current_source;
  SourceProvider p = g_source_provider.load(std::memory_order_relaxed);
  return p ? p() : -1;
}

}  // namespace lt
