// The live pending-tensor registry: an intrusive doubly linked list in creation order, so graph
// roots come out in a deterministic order step after step (the graph key depends on it).
#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "runtime/tape.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {
// The list's own lock, not runtime_mutex(): every traced op takes it twice (its new tensor is
// added, the tensor it replaces removed), and the uncontended recursive pthread mutex cost ~8% of
// the per-op tracing time. It guards the few pointer updates below and nothing inside calls out (a
// tensor dropped while it is held would re-enter through ~TensorImpl), so a spin lock suffices.
class ListLock {
 public:
  void lock() {
    while (held_.exchange(true, std::memory_order_acquire))
      while (held_.load(std::memory_order_relaxed)) std::this_thread::yield();
  }
  void unlock() { held_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> held_{false};
};
ListLock g_list_lock;
TensorImpl* g_head = nullptr;  // guarded by g_list_lock
TensorImpl* g_tail = nullptr;
}  // namespace

std::recursive_mutex& runtime_mutex() {
  static std::recursive_mutex mu;
  return mu;
}

void registry_add(TensorImpl* t) {
  std::lock_guard<ListLock> g(g_list_lock);
  if (t->registered) return;
  t->registered = true;
  t->owner = std::this_thread::get_id();
  t->prev = g_tail;
  t->next = nullptr;
  if (g_tail)
    g_tail->next = t;
  else
    g_head = t;
  g_tail = t;
}

void registry_remove(TensorImpl* t) {
  std::lock_guard<ListLock> g(g_list_lock);
  if (!t->registered) return;
  t->registered = false;
  if (t->prev)
    t->prev->next = t->next;
  else
    g_head = t->next;
  if (t->next)
    t->next->prev = t->prev;
  else
    g_tail = t->prev;
  t->prev = t->next = nullptr;
}

std::vector<std::shared_ptr<TensorImpl>> registry_snapshot(bool this_thread_only) {
  // runtime_mutex() as before: `pending` changes under it (sync.cc). The references are taken
  // under the list lock and filtered after it, where dropping the last one may run ~TensorImpl.
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  std::vector<std::shared_ptr<TensorImpl>> live;
  const std::thread::id me = std::this_thread::get_id();
  {
    std::lock_guard<ListLock> l(g_list_lock);
    for (TensorImpl* t = g_head; t; t = t->next) {
      if (this_thread_only && t->owner != me) continue;
      if (auto sp = t->weak_from_this().lock()) live.push_back(std::move(sp));
    }
  }
  std::vector<std::shared_ptr<TensorImpl>> out;
  out.reserve(live.size());
  for (auto& sp : live)
    if (sp->pending) out.push_back(std::move(sp));
  return out;
}

TensorImpl::TensorImpl() = default;  // defined here: user-provided, see tensor_impl.h
TensorImpl::~TensorImpl() { registry_remove(this); }

}  // namespace lt
