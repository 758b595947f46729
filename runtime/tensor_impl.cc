#include <cstdlib>

#include "ir/error.h"
#include "ir/pool.h"
#include "runtime/executor.h"
#include "runtime/memory_views.h"
#include "runtime/metrics_state.h"
#include "runtime/profile.h"
#include "runtime/sync.h"
#include "runtime/tape.h"
#include "runtime/tensor_impl.h"
#include "runtime/trace_observer.h"

namespace lt {

namespace {
[[gnu::tls_model("initial-exec")]] thread_local int t_composite_depth = 0;

// LT_EAGER_FUSE=0 runs composites op by op again (every internal op a kernel run): no whole-graph
// compile at an eager backward's first step, at the price of the per-step cost.
const bool g_eager_fuse = [] {
  const char* e = std::getenv("LT_EAGER_FUSE");
  return !(e && e[0] == '0' && e[1] == '\0');
}();

// What closing the outermost composite does: its pending eager results run as one graph.
void compute_eager_results(const std::vector<Tensor>& results) {
  if (t_composite_depth != 1) return;  // an enclosing composite finishes
  std::vector<Tensor> eager;
  for (const Tensor& t : results)
    if (t.defined() && t.impl()->pending && !t.device().is_lazy()) eager.push_back(t);
  if (!eager.empty()) sync(eager, SyncReason::Eager);
}
}  // namespace

EagerComposite::EagerComposite() { t_composite_depth += g_eager_fuse; }
EagerComposite::~EagerComposite() { t_composite_depth -= g_eager_fuse; }

void eager_composite_enter() { t_composite_depth += g_eager_fuse; }
void eager_composite_exit(const std::vector<Tensor>& results) {
  if (!g_eager_fuse) return;
  if (t_composite_depth <= 0)
    fail(ErrorKind::Runtime, "internal: eager composite exit without enter");
  struct Leave {
    ~Leave() { --t_composite_depth; }
  } leave;
  compute_eager_results(results);
}

void EagerComposite::finish(const std::vector<Tensor>& results) { compute_eager_results(results); }

Tensor EagerComposite::finish(Tensor result) {
  finish(std::vector<Tensor>{result});
  return result;
}

std::shared_ptr<TensorImpl> make_tensor(NodePtr node, const Device& device) {
  metrics::bump(metrics::Counter::TracedOps);
  auto t = make_pooled<TensorImpl>();
  t->device = device;
  t->dtype = node->dtype;
  t->shape = node->shape;
  if (device.is_lazy()) {
    profile::note_traced_op();
    t->pending = std::move(node);
    registry_add(t.get());
  } else if (auto shared = shared_view_storage(*node)) {  // a view of host data: no kernel
    t->storage = std::move(shared);
  } else if (t_composite_depth > 0 || deferred_view(*node)) {  // computed where it is read
    t->pending = std::move(node);
  } else {
    t->storage = execute_graph({node.get()}, device.backend_name(), SyncReason::Eager).at(0);
  }
  return t;
}

std::shared_ptr<TensorImpl> make_data_tensor(std::shared_ptr<Storage> s, DType dtype, Shape shape,
                                             const Device& d) {
  auto t = make_pooled<TensorImpl>();
  t->device = d;
  t->dtype = dtype;
  t->shape = std::move(shape);
  t->storage = std::move(s);
  return t;
}

NodePtr node_of(TensorImpl& t) {
  ensure_fresh(t);
  if (t.pending) return t.pending;
  if (!t.leaf) t.leaf = make_param(t.dtype, t.shape, t.storage);
  if (TraceObserver* o = trace_observer()) o->on_leaf(t);
  return t.leaf;
}

void rebind(TensorImpl& t, const Tensor& v, bool history) {
  TensorImpl& src = *v.impl();
  if (history) {
    if (v.requires_grad() && grad_enabled()) {
      if (!t.autograd) t.autograd = std::make_unique<AutogradMeta>();
      t.autograd->requires_grad = true;
      t.autograd->grad_fn = src.autograd->grad_fn;
    } else if (t.autograd && t.autograd->grad_fn) {
      t.autograd->grad_fn.reset();
      t.autograd->requires_grad = false;
    }
  }
  if (&src == &t) return;
  t.storage = src.storage;
  t.pending = src.pending;
  t.leaf.reset();
  if (t.pending)
    registry_add(&t);
  else
    registry_remove(&t);
}

}  // namespace lt
