#include "runtime/donation.h"

#include <cstdio>

#include "ir/debug_level.h"
#include "ir/ptr_map.h"
#include "runtime/storage.h"

namespace lt {

std::vector<DonationCandidate> donation_candidates(const Plan& plan) {
  std::vector<DonationCandidate> out;
  for (const Donation& d : plan.donations) {
    const BufferSpec& o = plan.buffers.at(static_cast<size_t>(d.output));
    out.push_back({d.output, plan.buffers.at(static_cast<size_t>(d.input)).input,
                   static_cast<size_t>(o.numel) * dtype_size(o.dtype)});
  }
  return out;
}

std::vector<int> choose_donations(const Graph& g, const std::vector<DonationCandidate>& candidates,
                                  const RootRefs& roots) {
  std::vector<int> choice(g.inputs.size(), -1);
  if (candidates.empty() || roots.use_count.size() != g.roots.size() ||
      roots.released.size() != g.roots.size())
    return choice;
  // The data: held by the one leaf, the memory by that Storage alone and owned by the runtime.
  // Leaf nodes of this graph per device data: a value saved for a gradient rule comes back as a
  // leaf of its own over the same data (runtime/saved.cc; a convolution's weight read by its
  // backward-data step), which collect_graph maps to the same graph input. Holders that are all
  // leaves of this graph do not keep the data alive past the sync.
  PtrMap<LeafData, long> leaves_of(g.order.size());
  for (const Node* n : g.order)
    if (n->op == Op::Param && n->data) {
      auto [it, fresh] = leaves_of.emplace(n->data.get(), 0);
      (void)fresh;
      ++*it;
    }
  std::vector<const DonationCandidate*> viable;
  // LT_DEBUG=2: why candidates were refused, counted per reason (one line per sync).
  size_t not_leaf = 0, data_shared = 0, buffer_shared = 0, not_owned = 0, held_nodes = 0;
  for (const DonationCandidate& c : candidates) {
    if (c.input < 0 || c.input >= static_cast<int>(g.inputs.size())) continue;
    const Node* leaf = g.inputs[static_cast<size_t>(c.input)];
    if (leaf->op != Op::Param || !leaf->data) {
      ++not_leaf;
      continue;
    }
    const long* graph_leaves = leaves_of.find(leaf->data.get());
    if (leaf->data.use_count() != (graph_leaves ? *graph_leaves : 1)) {
      ++data_shared;
      continue;
    }
    const auto* s = static_cast<const Storage*>(leaf->data.get());
    if (!s->buffer || s->buffer.use_count() != 1) {
      ++buffer_shared;
      continue;
    }
    if (!s->buffer->runtime_owned()) {
      ++not_owned;
      continue;
    }
    viable.push_back(&c);
  }
  auto report = [&] {
    if (debug_level() >= 2)
      std::fprintf(stderr,
                   "lazytensor: donation: %zu candidates, %zu refused: %zu not a leaf with data, "
                   "%zu data held elsewhere, %zu buffer held elsewhere, %zu not runtime-owned, "
                   "%zu under a node held elsewhere\n",
                   candidates.size(),
                   not_leaf + data_shared + buffer_shared + not_owned + held_nodes, not_leaf,
                   data_shared, buffer_shared, not_owned, held_nodes);
  };
  if (viable.empty()) {
    report();
    return choice;
  }
  // The nodes: each held only by its users in this graph and by the tensors this sync re-points.
  // A node held elsewhere (a pending tensor not in this sync, a deferred index check) may be
  // evaluated later, so every leaf under it must keep its values.
  const size_t n = g.order.size();
  // A flat map (ir/ptr_map.h): an unordered_map's heap node per graph node made this lookup 6% of
  // an eager LSTM step's forward and backward (whose backward graph donates its .grad buffers).
  PtrMap<Node, size_t> pos(n);
  for (size_t i = 0; i < n; ++i) pos.emplace(g.order[i], i);
  std::vector<long> use_count(n, 0), expected(n, 0);
  for (size_t i = 0; i < n; ++i)
    for (const NodePtr& e : g.order[i]->inputs) {
      const size_t p = pos.at(e.get());
      use_count[p] = e.use_count();
      ++expected[p];
    }
  for (size_t r = 0; r < g.roots.size(); ++r) {
    const size_t p = pos.at(g.roots[r]);
    use_count[p] = roots.use_count[r];
    expected[p] += roots.released[r];
  }
  std::vector<char> held(n, 0);
  for (size_t i = n; i-- > 0;) {  // users before their operands
    if (use_count[i] != expected[i]) held[i] = 1;
    if (held[i])
      for (const NodePtr& e : g.order[i]->inputs) held[pos.at(e.get())] = 1;
  }
  // Data is held when any leaf over it is (the input's own or a saved value's).
  PtrMap<LeafData, char> data_held(g.order.size());
  for (size_t i = 0; i < n; ++i)
    if (held[i] && g.order[i]->op == Op::Param && g.order[i]->data)
      data_held.emplace(g.order[i]->data.get(), 1);
  for (const DonationCandidate* c : viable) {
    const Node* leaf = g.inputs[static_cast<size_t>(c->input)];
    if (!held[pos.at(leaf)] && !data_held.find(leaf->data.get()))
      choice[static_cast<size_t>(c->input)] = c->output;
    else
      ++held_nodes;
  }
  report();
  return choice;
}

}  // namespace lt
