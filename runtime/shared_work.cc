#include "runtime/shared_work.h"

#include <unordered_map>
#include <unordered_set>

#include "runtime/tensor_impl.h"

namespace lt {
namespace {

bool computed(const Node* n) { return !n->inputs.empty(); }

}  // namespace

std::vector<std::shared_ptr<TensorImpl>> tensors_sharing_work(
    const std::vector<std::shared_ptr<TensorImpl>>& requested) {
  // The computed nodes of the requested graphs (iterative walks: traces can be 100k nodes deep).
  std::unordered_set<const Node*> work;
  std::unordered_set<const TensorImpl*> asked;
  std::vector<const Node*> stack;
  for (const auto& t : requested) {
    if (!t || !t->pending) continue;
    asked.insert(t.get());
    stack.push_back(t->pending.get());
  }
  if (stack.empty()) return {};
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!computed(n) || !work.insert(n).second) continue;
    for (const auto& in : n->inputs) stack.push_back(in.get());
  }
  // Whether each other live graph reaches that work; `reaches` memoizes across tensors, so every
  // node of every live graph is visited once per sync.
  std::unordered_map<const Node*, bool> reaches;
  std::vector<std::pair<const Node*, bool>> frames;  // (node, inputs already pushed)
  auto reaches_work = [&](const Node* root) {
    frames.push_back({root, false});
    while (!frames.empty()) {
      auto [n, expanded] = frames.back();
      if (reaches.count(n)) {
        frames.pop_back();
        continue;
      }
      if (work.count(n) || !computed(n)) {
        reaches[n] = work.count(n) > 0;
        frames.pop_back();
        continue;
      }
      if (!expanded) {
        frames.back().second = true;
        for (const auto& in : n->inputs)
          if (!reaches.count(in.get())) frames.push_back({in.get(), false});
        continue;
      }
      bool any = false;
      for (const auto& in : n->inputs) any = any || reaches[in.get()];
      reaches[n] = any;
      frames.pop_back();
    }
    return reaches[root];
  };
  std::vector<std::shared_ptr<TensorImpl>> out;
  for (auto& t : registry_snapshot(/*this_thread_only=*/true)) {
    // A base only its views hold (`out.reshape(...)` returned, its base a temporary): the views
    // carry the values; the base is computed from its graph only if a view is ever written.
    if (asked.count(t.get()) || t.use_count() == 1 + t->view_refs.load(std::memory_order_relaxed))
      continue;
    ensure_fresh(*t);
    if (t->pending && reaches_work(t->pending.get())) out.push_back(std::move(t));
  }
  return out;
}

}  // namespace lt
