#include "ir/pool.h"
#include "runtime/capture.h"
#include "runtime/executor.h"
#include "runtime/metrics_state.h"
#include "runtime/profile.h"
#include "runtime/tensor_impl.h"

namespace lt {

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
  } else {
    t->storage = execute_graph({node.get()}, device.backend_name(), SyncReason::Eager).at(0);
  }
  return t;
}

std::shared_ptr<TensorImpl> make_data_tensor(std::shared_ptr<Storage> s, DType dtype, Shape shape, const Device& d) {
  auto t = make_pooled<TensorImpl>();
  t->device = d;
  t->dtype = dtype;
  t->shape = std::move(shape);
  t->storage = std::move(s);
  return t;
}

NodePtr node_of(TensorImpl& t) {
  if (t.pending) return t.pending;
  if (!t.leaf) t.leaf = make_param(t.dtype, t.shape, t.storage);
  if (capture::active()) capture::note_leaf(t);
  return t.leaf;
}

}  // namespace lt
