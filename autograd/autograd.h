// Reverse-mode autograd over runtime tensors: the tape and the engine. An op whose operand requires
// grad reaches the tape through the core's interface (runtime/tape.h: record_op, record); the tape
// keeps a GradNode holding the op's VJP rule (autograd/vjp.h). Rules are written with tensor ops,
// so on the lazy device the backward pass is more IR, and forward + backward + optimizer update
// compile into one graph at mark_step().
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "runtime/tape.h"
#include "runtime/tensor.h"

namespace lt {

// Where a gradient flows: into another node's input slot, or into a leaf's .grad.
struct GradEdge {
  std::shared_ptr<GradNode> fn;
  std::shared_ptr<TensorImpl> leaf;  // set for leaves that require grad
  bool defined() const { return fn || leaf; }
};

struct GradNode {
  const char* name = "";       // "MulBackward", ...: static storage (a literal, a table's)
  std::vector<GradEdge> next;  // one per differentiable input
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  VjpFn vjp;         // released after backward unless retain_graph
  uint64_t seq = 0;  // creation order: a later node runs first in backward
};

// The tape's record (runtime/tape.h's, past its check): a node holding `vjp`, with an edge per
// input; nothing for a result that is not floating (argmax, comparisons).
void record_node(const Tensor& out, const std::vector<Tensor>& inputs, const char* name, VjpFn vjp);

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

// Runs fn once, after the calling thread's next backward has accumulated every gradient (PyTorch's
// Variable._execution_engine.queue_callback; DistributedDataParallel averages gradients there).
// Callbacks run in queue order, including ones queued while they run; then the queue is empty. A
// callback that throws, or a backward that fails, empties the queue and the error reaches the
// backward's caller: a later backward never runs callbacks meant for a pass that did not finish.
// On a lazy device the callbacks' ops are traced into the same graph as the backward. Each thread
// has its own queue, as it has its own trace and grad mode; lt::grad does not run them.
void queue_callback(std::function<void()> fn);

}  // namespace lt
