#include "ir/graph.h"

namespace lt {

Graph collect_graph(const std::vector<const Node*>& roots) {
  Graph g;
  g.roots = roots;
  // Sized like this thread's previous graph: a training loop collects the same graph every step,
  // and growing the maps by rehashing cost as much as filling them.
  static thread_local size_t t_last_nodes = 64, t_last_leaves = 16;
  PtrMap<Node, uint64_t> seen(t_last_nodes);  // node -> discovery number
  PtrMap<LeafData, int> by_data;
  int null_data = -1;  // Param leaves without data (IR built by hand) share one input, as before
  g.input_of.reserve(t_last_leaves);
  Hasher h(0x6c74);
  // Iterative post-order DFS: deep chains (thousands of ops) must not overflow the stack.
  std::vector<std::pair<const Node*, size_t>> stack;
  for (const Node* r : roots) {
    h.add(r->hash);
    if (!seen.emplace(r, seen.size()).second) continue;
    stack.push_back({r, 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->inputs.size()) {
        const Node* c = n->inputs[i++].get();
        auto [number, fresh] = seen.emplace(c, seen.size());
        if (fresh)
          stack.push_back({c, 0});
        else
          h.add(0x5eeull ^ (*number << 16));  // back-reference: the key encodes DAG sharing
        continue;
      }
      if (n->op == Op::Param || n->op == Op::Scalar) {
        int idx;
        const bool param = n->op == Op::Param;
        const int* known = !param           ? nullptr
                           : n->data        ? by_data.find(n->data.get())
                           : null_data >= 0 ? &null_data
                                            : nullptr;
        if (known) {
          idx = *known;
        } else {
          idx = static_cast<int>(g.inputs.size());
          g.inputs.push_back(n);
          if (param && n->data)
            by_data.emplace(n->data.get(), idx);
          else if (param)
            null_data = idx;
        }
        g.input_of.emplace(n, idx);
        h.add(static_cast<uint64_t>(idx));
      }
      g.order.push_back(n);
      stack.pop_back();
    }
  }
  // Which roots are the same node matters to the executable's outputs: root i repeating root j
  // (its first occurrence). A map, not a scan of the earlier roots: a training step has a root per
  // parameter, gradient and optimizer state (741 for GPT-2), and the scan was quadratic.
  if (roots.size() > 1) {
    PtrMap<Node, size_t> first(roots.size());
    for (size_t i = 0; i < roots.size(); ++i)
      if (auto [j, fresh] = first.emplace(roots[i], i); !fresh) h.add(0xa11a5ull).add(i).add(*j);
  }
  g.key = h.digest();
  t_last_nodes = seen.size();
  t_last_leaves = g.input_of.size();
  return g;
}

}  // namespace lt
