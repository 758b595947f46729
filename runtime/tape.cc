#include "runtime/tape.h"

#include <atomic>

#include "ir/error.h"
#include "ir/pool.h"
#include "runtime/tensor_impl.h"
#include "runtime/views.h"

namespace lt {
namespace {
// Initial-exec (see ir/pool.cc): read for every traced op.
[[gnu::tls_model("initial-exec")]] thread_local bool t_grad_enabled = true;
// Constant-initialized, so set before any static initializer (autograd/'s) can set it.
std::atomic<Tape*> g_tape{nullptr};

Tape& the_tape() {
  Tape* t = g_tape.load(std::memory_order_acquire);
  if (!t)
    fail(ErrorKind::Runtime,
         "autograd: no tape is registered (the library was built without autograd/'s objects, "
         "which register it when the library loads)");
  return *t;
}

AutogradMeta& meta(TensorImpl& t) {
  if (!t.autograd) t.autograd = std::make_unique<AutogradMeta>();
  return *t.autograd;
}

}  // namespace

bool grad_enabled() { return t_grad_enabled; }
void set_grad_enabled(bool on) { t_grad_enabled = on; }

Tape* tape() { return g_tape.load(std::memory_order_acquire); }
void set_tape(Tape* t) { g_tape.store(t, std::memory_order_release); }

bool any_requires_grad(const std::vector<Tensor>& ts) {
  for (auto& t : ts)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record_op(Op op, const Attrs& attrs, const Tensor& out, const NodeList& operands,
               const std::vector<Tensor>& sources) {
  if (!grad_enabled() || !any_requires_grad(sources)) return;
  the_tape().record_op(op, attrs, out, operands, sources);
}

void record(const Tensor& out, const std::vector<Tensor>& inputs, const char* name, VjpFn vjp) {
  if (!grad_enabled() || !any_requires_grad(inputs)) return;
  the_tape().record(out, inputs, name, std::move(vjp));
}

Tensor keep_overwritten_history(TensorImpl& t, const Tensor& value) {
  if (!grad_enabled() || !t.autograd || !t.autograd->grad_fn) return value;
  return the_tape().keep_overwritten_history(t, value);
}

// --- Tensor's autograd methods ---

bool Tensor::requires_grad() const {
  if (!impl_) return false;
  ensure_fresh(*impl_);
  return impl_->autograd && impl_->autograd->requires_grad;
}

Tensor& Tensor::requires_grad_(bool on) {
  if (!impl_) fail(ErrorKind::Runtime, "requires_grad_: undefined tensor");
  if (impl_->autograd && impl_->autograd->grad_fn && !on)
    fail(ErrorKind::Runtime,
         "you can only change requires_grad flags of leaf variables. If you want to use a "
         "computed variable in a subgraph that doesn't require differentiation use var_no_grad = "
         "var.detach().");
  if (on && !is_floating(dtype()))
    fail(ErrorKind::Runtime, "only Tensors of floating point dtype can require gradients (got ",
         dtype_name(dtype()), ")");
  meta(*impl_).requires_grad = on;
  return *this;
}

Tensor Tensor::grad() const { return impl_ && impl_->autograd ? impl_->autograd->grad : Tensor(); }
void Tensor::set_grad(const Tensor& g) {
  if (!impl_) fail(ErrorKind::Runtime, "set_grad: undefined tensor");
  if (g.defined() && g.shape() != shape())
    fail(ErrorKind::Runtime, "assigned grad has shape ", shape_str(g.shape()),
         " but the tensor has shape ", shape_str(shape()));
  meta(*impl_).grad = g;
}
bool Tensor::is_leaf() const {
  if (impl_) ensure_fresh(*impl_);
  return !(impl_ && impl_->autograd && impl_->autograd->grad_fn);
}
std::string Tensor::grad_fn_name() const {
  if (impl_) ensure_fresh(*impl_);
  if (!impl_ || !impl_->autograd || !impl_->autograd->grad_fn) return "";
  return the_tape().name(*impl_->autograd->grad_fn);
}
void Tensor::backward(const Tensor& g, bool retain_graph) const {
  the_tape().backward(*this, g, retain_graph);
}

// A tensor sharing this one's values (writes through either reach both), without its history.
Tensor Tensor::detach() const {
  if (!impl_) fail(ErrorKind::Runtime, "detach: undefined tensor");
  ensure_fresh(*impl_);
  Tensor out;
  if (impl_->pending) {
    auto t = make_pooled<TensorImpl>();
    t->device = impl_->device;
    t->dtype = impl_->dtype;
    t->shape = impl_->shape;
    t->pending = impl_->pending;
    registry_add(t.get());
    out = Tensor(t);
  } else {
    out = Tensor(make_data_tensor(impl_->storage, dtype(), shape(), device()));
  }
  return link_view(*this, out, {ViewStep::Kind::Alias});
}

}  // namespace lt
