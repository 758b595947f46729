// The autograd tape as the tensor core sees it. An op whose operand requires grad hands itself to
// the one registered lt::Tape, which keeps the node and its VJP rule; the tape, the backward engine
// and the rules are autograd/ (a folder above this one, autograd/README.md), which registers its
// tape when the library loads. The core names nothing of it: a tensor's node is an opaque GradNode
// here, as lt.compile's capture is an opaque TraceObserver (runtime/trace_observer.h).
//
// Grad mode and each tensor's AutogradMeta are the core's own: an op reads them to decide whether
// to record at all, so an op on tensors that need no gradient (inference, an optimizer's update,
// every op of bench_trace_cost) makes no call through the interface.
#pragma once
#include <functional>
#include <memory>
#include <vector>

#include "ir/node.h"
#include "runtime/tensor.h"

namespace lt {

struct GradNode;  // a recorded op, defined by the tape: the core holds it and tests it for null

// A tensor's autograd state (TensorImpl::autograd, null until grad is involved).
struct AutogradMeta {
  bool requires_grad = false;
  Tensor grad;
  std::shared_ptr<GradNode> grad_fn;  // null for a leaf
};

// Grad mode, per thread (on by default).
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

bool any_requires_grad(const std::vector<Tensor>& ts);

// An op's gradient rule: the gradients of its inputs from the gradient of its output.
using VjpFn = std::function<std::vector<Tensor>(const Tensor& grad_out)>;

class Tape {
 public:
  virtual ~Tape() = default;
  // The entry points below, called once grad mode is on and some input requires grad.
  virtual void record_op(Op op, const Attrs& attrs, const Tensor& out, const NodeList& operands,
                         const std::vector<Tensor>& sources) = 0;
  virtual void record(const Tensor& out, const std::vector<Tensor>& inputs, const char* name,
                      VjpFn vjp) = 0;
  // Called once grad mode is on and t has history.
  virtual Tensor keep_overwritten_history(TensorImpl& t, const Tensor& value) = 0;
  // Tensor::backward.
  virtual void backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) = 0;
  // The node's name ("MulBackward", ...), for Tensor::grad_fn_name.
  virtual const char* name(const GradNode& node) const = 0;
};

// The registered tape, or null. Not an inline variable: the Python extension is a separate shared
// object with hidden symbols and would get its own copy.
Tape* tape();
// Sets the tape (autograd/autograd.cc, at static initialization); it lives as long as the process.
void set_tape(Tape* t);

// Records `out = op(operands)` for autograd when grad mode is on and some source requires grad;
// `sources[i]` is the tensor whose history operand i continues (undefined for scalars and
// constants). The tape applies the op's VJP rule (autograd/vjp.h) to values it saves.
void record_op(Op op, const Attrs& attrs, const Tensor& out, const NodeList& operands,
               const std::vector<Tensor>& sources);
// Records `out = f(inputs)` with its own rule, under the same condition: an op built from other
// ops (traced under NoGradGuard) that is one node with a cheaper gradient than its parts'. `name`
// must outlive the node (a literal): a std::string per node was two of a recorded op's ~10
// allocations.
void record(const Tensor& out, const std::vector<Tensor>& inputs, const char* name, VjpFn vjp);

// `value` about to overwrite t in place, joined to t's old history (with a zero gradient) when it
// does not read t already: PyTorch's in-place backward always reaches the overwritten tensor's
// history, so `c = x * 2; c.fill_(1)` gives x a zero gradient, not none.
Tensor keep_overwritten_history(TensorImpl& t, const Tensor& value);

}  // namespace lt
