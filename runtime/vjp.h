// VJP rules, one per op, keyed by Op (DESIGN.md "Ops are data"). A rule maps the gradient of an
// op's output to gradients of its operands, using tensor ops (so on lazy they are traced too).
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "ir/node.h"
#include "runtime/tensor.h"

namespace lt {

// A value saved for backward: a snapshot of the operand's value, so a later in-place rebinding of
// the tensor cannot change it, and no reference cycle runs through the output's own history. A
// computed (pending) value that the rule reads is held by a tensor of its own in the live
// registry: a sync that computes work it shares (`loss.item()` before `backward()`) materializes
// it too (runtime/shared_work.h), so the backward reads data, computes the forward once, and
// holds no history of earlier steps. Values a rule never reads (only their shapes) stay plain
// IR snapshots (`live` false), so they never become extra outputs of a sync.
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

struct VjpCtx {
  Op op;
  Attrs attrs;
  std::vector<Saved> inputs;  // the operands as the op saw them (after promotion casts)
  Saved output;
  std::vector<bool> needs_grad;  // per operand: whether its source requires grad
  Tensor x(size_t i) const { return inputs.at(i).get(); }
  // Whether operand i's gradient is used: a rule may skip a costly one (a conv's grad_input for
  // the network's input) that eager execution would otherwise compute and discard.
  bool needs(size_t i) const { return i >= needs_grad.size() || needs_grad[i]; }
  Tensor y() const { return output.get(); }
};

using VjpRule = std::function<std::vector<Tensor>(const VjpCtx& ctx, const Tensor& g)>;
const VjpRule* vjp_rule(Op op);  // nullptr when the op has none (leaves, bool-valued ops)
// Ops whose outputs are never differentiable (comparisons, logical ops, rand).
bool non_differentiable(Op op);

// Records the op that produced `out` from operand nodes `operands`; `sources[i]` is the tensor
// whose history operand i continues (undefined for scalars and constants).
void record_op(Op op, const Attrs& attrs, const Tensor& out, const NodeList& operands,
               const std::vector<Tensor>& sources);

}  // namespace lt
