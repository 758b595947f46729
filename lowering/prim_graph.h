// The primitive graph: a graph after decomposition, flattened into an index-based list. It is what
// the reference interpreter executes and what fusion groups into kernels.
#pragma once
#include <vector>

#include "ir/node.h"

namespace lt {

struct PNode {
  Op op;  // always a primitive (op_info(op).primitive)
  DType dtype;
  Shape shape;
  Attrs attrs;
  std::vector<int> inputs;  // indices into PrimGraph::nodes, each smaller than this node's index
  int input_index = -1;     // Param/Scalar leaves: which graph input (Graph::inputs order)
  int32_t source = -1;      // source location id of the traced node this came from
};

struct PrimGraph {
  std::vector<PNode> nodes;  // topologically ordered
  std::vector<int> outputs;  // one per graph root, in root order (may repeat)
  int num_inputs = 0;
};

}  // namespace lt
