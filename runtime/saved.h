// A value saved for a gradient rule: a snapshot of the operand's value, so a later in-place
// rebinding of the tensor cannot change it, and no reference cycle runs through the output's own
// history. A computed (pending) value that the rule reads is held by a tensor of its own in the
// live registry: a sync that computes work it shares (`loss.item()` before `backward()`)
// materializes it too (runtime/shared_work.h), so the backward reads data, computes the forward
// once, and holds no history of earlier steps. Values a rule never reads (only their shapes) stay
// plain IR snapshots (`live` false), so they never become extra outputs of a sync. Used by the
// tape's rules (autograd/vjp.h) and by the core's ops that record a rule of their own.
#pragma once
#include <memory>

#include "ir/node.h"
#include "runtime/tensor.h"

namespace lt {

class Saved {
 public:
  Saved() = default;
  Saved(const NodePtr& node, const Device& device, bool live = true);
  Tensor get() const;
  const Shape& shape() const;
  DType dtype() const;
  bool defined() const { return leaf_ || value_; }

 private:
  NodePtr leaf_;                       // device data, scalars, constants, eager or unread values
  std::shared_ptr<TensorImpl> value_;  // a computed lazy value (see above)
  Device device_;
};

}  // namespace lt
