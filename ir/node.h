// IR nodes. A Node is immutable once made: op, attributes, output dtype and shape (inferred and
// checked at creation, so a bad shape fails where it was written), operands, and a Merkle hash of
// all of these. Leaves hash dtype and shape only, never data, so new data never forces a recompile.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/hash.h"
#include "ir/ops.h"
#include "ir/pool.h"
#include "ir/shape.h"

namespace lt {

struct Attrs {
  IntList ints;                  // axes (reduce), shape (reshape/expand), permutation (permute)
  bool keepdim = false;          // reduce
  DType dtype = DType::Float32;  // cast target
  double value = 0;              // constant value (hashed); for Scalar leaves see Node::scalar
  int64_t stream = 0;            // rand: independent stream id for decompositions needing several
};

// Opaque handle to the data behind a Param leaf; runtime/ subclasses it. ir/ never looks inside.
struct LeafData {
  virtual ~LeafData() = default;
};

struct Node;
using NodePtr = std::shared_ptr<const Node>;
// Operand lists (and other lists of nodes) in pooled blocks (ir/pool.h): every traced op makes
// one, and glibc's malloc for it was a tenth of the per-op tracing cost. Not a SmallVec: an
// operand list is moved three times on its way into its node, and moving inline shared_ptrs one
// by one cost more than the pooled block saved.
using NodeList = std::vector<NodePtr, PoolAllocator<NodePtr>>;

struct Node {
  Op op;
  DType dtype;
  Shape shape;
  Attrs attrs;
  NodeList inputs;
  Hash128 hash;
  std::shared_ptr<LeafData> data;  // Param leaves only
  double scalar = 0;               // Scalar leaves only: the runtime value (not hashed)
  int64_t scalar_i = 0;            // ... and its exact integer value for integral dtypes
  int32_t source = -1;             // index into the source-location table (ir/source.h)

  Node();
  // Built with its final fields in place rather than default-built and assigned field by field
  // (each list built empty, then moved into), on every traced op.
  Node(Op op, DType dtype, Shape&& shape, Attrs&& attrs, NodeList&& inputs, int32_t source);
  // A leaf (Param, Scalar, Constant): no operands, its other fields set by its maker.
  Node(Op op, DType dtype, int32_t source);
  Node(const Node&);
  // Releases long operand chains iteratively: a trace of 100k ops must not overflow the stack.
  ~Node();
};

// Nodes alive in the process: flat across training steps, or the IR is being retained somewhere.
int64_t live_nodes();

// Makes a node: validates operands, infers dtype and shape, computes the hash.
NodePtr make_node(Op op, NodeList inputs, Attrs attrs = {});
NodePtr make_param(DType dtype, Shape shape, std::shared_ptr<LeafData> data);
NodePtr make_scalar(DType dtype, double value);  // integral dtypes keep int64(value) exactly
NodePtr make_int_scalar(DType dtype, int64_t value);
NodePtr make_constant(DType dtype, double value, Shape shape = {});
// int64 [n] with element i = i: positions for the masks of lowering's expansions
// (lowering/expand_attention.h).
NodePtr make_iota(int64_t n);

// Shape/dtype inference for an op (ir/infer.cc); throws lt::Error naming op and shapes.
struct Inferred {
  DType dtype;
  Shape shape;
};
Inferred infer(Op op, const NodeList& inputs, const Attrs& attrs);

// Source locations: interned "file:line" strings; the thread's current one is stamped on new nodes.
int32_t intern_source(const std::string& loc);
const std::string& source_str(int32_t id);
void set_current_source(int32_t id);
int32_t current_source();
// Where new nodes come from when no thread-local source is set: the Python bindings install one
// that returns the user's file:line (the innermost frame outside the lazytensor package).
using SourceProvider = int32_t (*)();
void set_source_provider(SourceProvider p);

}  // namespace lt
