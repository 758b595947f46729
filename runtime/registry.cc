// The live pending-tensor registry: an intrusive doubly linked list in creation order, so graph
// roots come out in a deterministic order step after step (the graph key depends on it).
#include <vector>

#include "runtime/tensor_impl.h"

namespace lt {
namespace {
TensorImpl* g_head = nullptr;
TensorImpl* g_tail = nullptr;
}  // namespace

std::recursive_mutex& runtime_mutex() {
  static std::recursive_mutex mu;
  return mu;
}

void registry_add(TensorImpl* t) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  if (t->registered) return;
  t->registered = true;
  t->owner = std::this_thread::get_id();
  t->prev = g_tail;
  t->next = nullptr;
  if (g_tail) g_tail->next = t;
  else g_head = t;
  g_tail = t;
}

void registry_remove(TensorImpl* t) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  if (!t->registered) return;
  t->registered = false;
  if (t->prev) t->prev->next = t->next;
  else g_head = t->next;
  if (t->next) t->next->prev = t->prev;
  else g_tail = t->prev;
  t->prev = t->next = nullptr;
}

std::vector<std::shared_ptr<TensorImpl>> registry_snapshot(bool this_thread_only) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  std::vector<std::shared_ptr<TensorImpl>> out;
  const std::thread::id me = std::this_thread::get_id();
  for (TensorImpl* t = g_head; t; t = t->next) {
    if (this_thread_only && t->owner != me) continue;
    if (auto sp = t->weak_from_this().lock(); sp && sp->pending) out.push_back(std::move(sp));
  }
  return out;
}

TensorImpl::TensorImpl() = default;  // defined here: user-provided, see tensor_impl.h
TensorImpl::~TensorImpl() { registry_remove(this); }

}  // namespace lt
