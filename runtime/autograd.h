// Reverse-mode autograd over runtime tensors. An op whose operand requires grad records a GradNode
// holding its VJP rule; rules are written with tensor ops, so on the lazy device the backward pass
// is more IR, and forward + backward + optimizer update compile into one graph at mark_step().
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace lt {

struct GradNode;

// Where a gradient flows: into another node's input slot, or into a leaf's .grad.
struct GradEdge {
  std::shared_ptr<GradNode> fn;
  std::shared_ptr<TensorImpl> leaf;  // set for leaves that require grad
  bool defined() const { return fn || leaf; }
};

using VjpFn = std::function<std::vector<Tensor>(const Tensor& grad_out)>;

struct GradNode {
  const char* name = "";       // "MulBackward", ...: static storage (a literal, a table's)
  std::vector<GradEdge> next;  // one per differentiable input
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  VjpFn vjp;         // released after backward unless retain_graph
  uint64_t seq = 0;  // creation order: a later node runs first in backward
};

struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<GradNode> grad_fn;
};

bool grad_enabled();
void set_grad_enabled(bool on);
struct NoGradGuard {
  bool prev;
  NoGradGuard() : prev(grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev); }
};
struct EnableGradGuard {
  bool prev;
  EnableGradGuard() : prev(grad_enabled()) { set_grad_enabled(true); }
  ~EnableGradGuard() { set_grad_enabled(prev); }
};

// Records `out = op(inputs)` when grad mode is on and some input requires grad. `name` must
// outlive the node (a literal): a std::string per node was two of a recorded op's ~10 allocations.
void record(const Tensor& out, const std::vector<Tensor>& inputs, const char* name, VjpFn vjp);
bool any_requires_grad(const std::vector<Tensor>& ts);

// Gradients of `outputs` w.r.t. `inputs` (not accumulated into .grad). With stop_at_inputs, the
// gradient of a non-leaf input is its own (what reaches it directly): the engine does not go on
// into its history, where other inputs could be reached through it.
std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs = {}, bool retain_graph = false,
                         bool allow_unused = false, bool stop_at_inputs = false);
// The seq the next GradNode will get: nodes made before this call have smaller ones.
uint64_t grad_seq_now();
// Accumulates d(root)/d(leaf) into every leaf's .grad.
void backward(const Tensor& root, const Tensor& grad_output = Tensor(), bool retain_graph = false);
// Several roots at once (PyTorch's torch.autograd.backward(tensors, grad_tensors)); an undefined
// entry of `grad_outputs` means "ones" for a one-element root.
void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_outputs,
              bool retain_graph = false);

// `value` about to overwrite t in place, joined to t's old history (with a zero gradient) when it
// does not read t already: PyTorch's in-place backward always reaches the overwritten tensor's
// history, so `c = x * 2; c.fill_(1)` gives x a zero gradient, not none.
Tensor keep_overwritten_history(TensorImpl& t, const Tensor& value);

// Sums `g` down to `shape` (the reverse of broadcasting).
Tensor unbroadcast(const Tensor& g, const Shape& shape);

}  // namespace lt
