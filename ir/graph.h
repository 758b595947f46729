// Collects the graph under a set of roots: a post-order of distinct nodes, the distinct inputs
// (Param leaves deduplicated by their data, each Scalar leaf its own input), and the graph key:
// root hashes combined with the pattern of which leaf maps to which input. Two traces with the
// same key compute the same function of their inputs, so one compiled executable serves both.
#pragma once
#include <vector>

#include "ir/node.h"
#include "ir/ptr_map.h"

namespace lt {

struct Graph {
  std::vector<const Node*> order;   // post order, operands before users, each node once
  std::vector<const Node*> roots;   // as given (may repeat)
  std::vector<const Node*> inputs;  // first leaf seen for each distinct input
  PtrMap<Node, int> input_of;       // every Param/Scalar leaf -> its input index
  Hash128 key;
};

Graph collect_graph(const std::vector<const Node*>& roots);

}  // namespace lt
