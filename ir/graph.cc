#include "ir/graph.h"


namespace lt {

Graph collect_graph(const std::vector<const Node*>& roots) {
  Graph g;
  g.roots = roots;
  std::unordered_map<const Node*, uint64_t> seen;  // node -> discovery number
  std::unordered_map<const LeafData*, int> by_data;
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
        auto [it, fresh] = seen.emplace(c, seen.size());
        if (fresh) stack.push_back({c, 0});
        else h.add(0x5eeull ^ (it->second << 16));  // back-reference: the key encodes DAG sharing
        continue;
      }
      if (n->op == Op::Param || n->op == Op::Scalar) {
        int idx;
        auto it = n->op == Op::Param ? by_data.find(n->data.get()) : by_data.end();
        if (it != by_data.end()) {
          idx = it->second;
        } else {
          idx = static_cast<int>(g.inputs.size());
          g.inputs.push_back(n);
          if (n->op == Op::Param) by_data.emplace(n->data.get(), idx);
        }
        g.input_of.emplace(n, idx);
        h.add(static_cast<uint64_t>(idx));
      }
      g.order.push_back(n);
      stack.pop_back();
    }
  }
  // Which roots are the same node matters to the executable's outputs.
  for (size_t i = 0; i < roots.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (roots[i] == roots[j]) {
        h.add(0xa11a5ull).add(i).add(j);
        break;
      }
  g.key = h.digest();
  return g;
}

}  // namespace lt
