#include "runtime/sync.h"

#include <map>

#include "ir/error.h"
#include "runtime/executor.h"
#include "runtime/index_check.h"
#include "runtime/metrics_state.h"
#include "runtime/profile.h"
#include "runtime/shared_work.h"
#include "runtime/tensor_impl.h"
#include "runtime/trace_observer.h"

namespace lt {

const char* sync_reason_name(SyncReason r) {
  switch (r) {
    case SyncReason::MarkStep:
      return "mark_step";
    case SyncReason::Item:
      return "item";
    case SyncReason::Numpy:
      return "numpy";
    case SyncReason::Print:
      return "print";
    case SyncReason::ToCpu:
      return "to_cpu";
    case SyncReason::ToList:
      return "tolist";
    case SyncReason::Sync:
      return "sync";
    case SyncReason::Eager:
      return "eager";
    case SyncReason::ControlFlow:
      return "control_flow";
  }
  return "?";
}

namespace {

// Materializes the pending tensors among `ts`, one graph per backend.
void materialize(const std::vector<std::shared_ptr<TensorImpl>>& ts, SyncReason reason) {
  profile::end_trace_phase();
  std::lock_guard<std::recursive_mutex> lock(runtime_mutex());
  std::string index_error;  // the first failed index check, raised once every result is assigned
  std::map<std::string, std::vector<TensorImpl*>> by_backend;
  for (auto& t : ts)
    if (t) ensure_fresh(*t);  // a view whose base was written since: its value as of now
  for (auto& t : ts)
    if (t && t->pending) by_backend[t->device.backend_name()].push_back(t.get());
  for (auto& [backend, group] : by_backend) {
    std::vector<const Node*> roots;
    // The references this sync drops once it re-points the tensors: inputs that only these
    // roots' IR reads may be updated in place (runtime/donation.h).
    RootRefs refs;
    for (auto* t : group) {
      roots.push_back(t->pending.get());
      refs.use_count.push_back(t->pending.use_count());
      refs.released.push_back(1);
    }
    // Deferred index checks of ops this graph computes ride along as extra outputs.
    auto checks = index_checks::take_into(backend, roots);
    for (auto& c : checks) {
      refs.use_count.push_back(c.stats.use_count());
      refs.released.push_back(1);
    }
    auto outs = execute_graph(roots, backend, reason, nullptr, &refs);
    for (size_t i = 0; i < group.size(); ++i) {
      group[i]->storage = outs[i];
      group[i]->pending.reset();
      group[i]->leaf.reset();
      registry_remove(group[i]);
    }
    std::string bad = index_checks::after_run(backend, std::move(checks), outs, group.size());
    if (index_error.empty()) index_error = std::move(bad);
  }
  if (!index_error.empty()) fail(ErrorKind::Index, index_error);
}

}  // namespace

void mark_step() {
  // Each thread its own trace: materializing another thread's tensors would re-point them while
  // that thread reads them (a data race ThreadSanitizer found; tests/cpp/threads_stress_test.cc).
  auto ts = registry_snapshot(/*this_thread_only=*/true);
  if (ts.empty()) {
    index_checks::drop_dead();  // as a sync that ran would (take_into keeps only live anchors)
    metrics::record_sync(SyncReason::MarkStep);
    return;
  }
  materialize(ts, SyncReason::MarkStep);
}

void sync(const std::vector<Tensor>& tensors, SyncReason reason) {
  std::vector<std::shared_ptr<TensorImpl>> ts;
  for (auto& t : tensors)
    if (t.defined()) {
      ensure_fresh(*t.impl());
      ts.push_back(t.impl());
    }
  // Live tensors sharing work with these become data too (runtime/shared_work.h). Not while a trace
  // observer records (lt.compile's capture, runtime/trace_observer.h), whose replay must produce
  // exactly the values the traced call read, and not for eager tensors (pending eager views and
  // composites): only lazy ones are registered.
  bool lazy = false;
  for (const auto& t : ts) lazy = lazy || t->device.is_lazy();
  if (lazy && !trace_observer())
    for (auto& extra : tensors_sharing_work(ts)) ts.push_back(std::move(extra));
  materialize(ts, reason);
}

size_t pending_tensor_count() { return registry_snapshot().size(); }

}  // namespace lt
