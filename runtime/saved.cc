#include "runtime/saved.h"

#include "ir/pool.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {

// A value that movement ops make from device data alone (an index reshaped and expanded for a
// gather): free to recompute and carrying no history, so not worth a buffer of its own.
bool moved_data(const Node* n) {
  for (int depth = 0; depth < 8; ++depth) {
    if (n->inputs.empty()) return true;
    const bool movement = n->op == Op::Reshape || n->op == Op::Expand || n->op == Op::Permute ||
                          n->op == Op::Slice || n->op == Op::Cast;
    if (!movement || n->inputs.size() != 1) return false;
    n = n->inputs[0].get();
  }
  return false;
}

}  // namespace

Saved::Saved(const NodePtr& node, const Device& device, bool live) : device_(device) {
  if (!node) return;
  if (node->inputs.empty() || !device.is_lazy() || !live || moved_data(node.get())) {
    leaf_ = node;
    return;
  }
  value_ = make_pooled<TensorImpl>();
  value_->device = device;
  value_->dtype = node->dtype;
  value_->shape = node->shape;
  value_->pending = node;
  registry_add(value_.get());
}

Tensor Saved::get() const {
  if (value_) {
    if (value_->storage)
      return Tensor(make_data_tensor(value_->storage, value_->dtype, value_->shape, device_));
    return Tensor(make_tensor(value_->pending, device_));
  }
  if (!leaf_) return Tensor();
  if (leaf_->op == Op::Param) {
    auto s = std::static_pointer_cast<Storage>(leaf_->data);
    return Tensor(make_data_tensor(s, leaf_->dtype, leaf_->shape, device_));
  }
  return Tensor(make_tensor(leaf_, device_));
}

const Shape& Saved::shape() const { return value_ ? value_->shape : leaf_->shape; }
DType Saved::dtype() const { return value_ ? value_->dtype : leaf_->dtype; }

}  // namespace lt
