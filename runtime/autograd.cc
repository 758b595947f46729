#include "runtime/autograd.h"

#include <atomic>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "ir/error.h"
#include "ir/pool.h"
#include "runtime/ops.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {
// Initial-exec (see ir/pool.cc): read for every traced op.
[[gnu::tls_model("initial-exec")]] thread_local bool t_grad_enabled = true;
std::atomic<uint64_t> g_seq{0};

AutogradMeta& meta(TensorImpl& t) {
  if (!t.autograd) t.autograd = std::make_unique<AutogradMeta>();
  return *t.autograd;
}

GradEdge edge_of(const Tensor& t) {
  if (!t.defined() || !t.requires_grad()) return {};
  const auto& m = *t.impl()->autograd;
  if (m.grad_fn) return {m.grad_fn, nullptr};
  return {nullptr, t.impl()};
}

void accumulate(Tensor& slot, const Tensor& g) {
  if (!slot.defined())
    slot = g;
  else
    slot = add(slot, g);
}

}  // namespace

bool grad_enabled() { return t_grad_enabled; }
uint64_t grad_seq_now() { return g_seq.load(); }
void set_grad_enabled(bool on) { t_grad_enabled = on; }

bool any_requires_grad(const std::vector<Tensor>& ts) {
  for (auto& t : ts)
    if (t.defined() && t.requires_grad()) return true;
  return false;
}

void record(const Tensor& out, const std::vector<Tensor>& inputs, const char* name, VjpFn vjp) {
  if (!grad_enabled() || !any_requires_grad(inputs)) return;
  if (!is_floating(out.dtype()))
    return;  // integer/bool results carry no gradient (argmax, comparisons)
  auto n = std::make_shared<GradNode>();
  n->name = name;
  // Sized once: grown by push_back, a binary op's three vectors were six allocations, not three.
  n->next.reserve(inputs.size());
  n->input_shapes.reserve(inputs.size());
  n->input_dtypes.reserve(inputs.size());
  for (auto& t : inputs) {
    n->next.push_back(edge_of(t));
    n->input_shapes.push_back(t.defined() ? t.shape() : Shape{});
    n->input_dtypes.push_back(t.defined() ? t.dtype() : DType::Float32);
  }
  n->vjp = std::move(vjp);
  n->seq = g_seq.fetch_add(1);
  auto& m = meta(*out.impl());
  m.requires_grad = true;
  m.grad_fn = std::move(n);
}

Tensor unbroadcast(const Tensor& g, const Shape& shape) {
  if (g.shape() == shape) return g;
  size_t lead = g.shape().size() - shape.size();
  std::vector<int64_t> dims;
  for (size_t i = 0; i < g.shape().size(); ++i)
    if (i < lead || (shape[i - lead] == 1 && g.shape()[i] != 1))
      dims.push_back(static_cast<int64_t>(i));
  Tensor r = dims.empty() ? g : g.sum(dims, true);
  return reshape_to(r, shape);  // node level: a gradient is no view of the temporary sum
}

Tensor keep_overwritten_history(TensorImpl& t, const Tensor& value) {
  if (!grad_enabled() || !t.autograd || !t.autograd->grad_fn) return value;
  const TensorImpl& v = *value.impl();
  if (v.autograd && v.autograd->grad_fn)
    for (const GradEdge& e : v.autograd->grad_fn->next)
      if (e.fn == t.autograd->grad_fn) return value;  // already reads the old value
  auto old = make_pooled<TensorImpl>();               // t's old value and history, as an operand
  old->device = t.device;
  old->dtype = t.dtype;
  old->shape = t.shape;
  old->storage = t.storage;
  old->pending = t.pending;
  old->autograd = std::make_unique<AutogradMeta>();
  old->autograd->requires_grad = true;
  old->autograd->grad_fn = t.autograd->grad_fn;
  if (old->pending) registry_add(old.get());
  return where(scalar_tensor(true, DType::Bool, t.device), value, Tensor(old));
}

namespace {

// The engine. With `inputs` empty, gradients accumulate into leaves' .grad; otherwise they are
// returned for `inputs` and nothing is accumulated.
std::vector<Tensor> run(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_roots,
                        const std::vector<Tensor>& inputs, bool retain_graph, bool allow_unused,
                        bool stop_at_inputs) {
  NoGradGuard no_grad;  // VJP rules build plain (history-free) expressions
  // On an eager device the backward is traced and run as one graph, as on lazy, where each VJP op
  // was a kernel run of its own (and the intermediates an EagerComposite forward left as nodes
  // are computed once, inside that graph). The gradients are data when backward returns.
  std::optional<EagerComposite> composite;
  if (!roots.empty() && roots[0].defined() && !roots[0].device().is_lazy()) composite.emplace();
  // Leaves whose .grad this pass writes (once each: their final .grad is what runs, not the
  // partial sums of several contributions).
  std::vector<std::shared_ptr<TensorImpl>> touched;
  std::unordered_set<const TensorImpl*> touched_set;
  struct Later {
    bool operator()(const GradNode* a, const GradNode* b) const { return a->seq < b->seq; }
  };
  std::priority_queue<GradNode*, std::vector<GradNode*>, Later> ready;
  std::unordered_map<GradNode*, Tensor> pending;
  std::vector<std::shared_ptr<GradNode>> keep;
  std::unordered_map<const TensorImpl*, size_t> leaf_input;  // leaves among `inputs`
  std::unordered_map<const GradNode*, size_t> node_input;    // non-leaf tensors among `inputs`
  std::vector<Tensor> results(inputs.size());
  for (size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i].requires_grad())
      fail(ErrorKind::Runtime, "autograd.grad: input ", i, " does not require grad");
    const auto& m = *inputs[i].impl()->autograd;
    if (m.grad_fn)
      node_input[m.grad_fn.get()] = i;
    else
      leaf_input[inputs[i].impl().get()] = i;
  }
  auto deliver = [&](const GradEdge& e, const Tensor& g) {
    if (!g.defined()) return;
    if (e.fn) {
      auto [it, fresh] = pending.try_emplace(e.fn.get(), g);
      if (!fresh)
        it->second = add(it->second, g);
      else {
        keep.push_back(e.fn);
        ready.push(e.fn.get());
      }
    } else if (e.leaf) {
      if (!inputs.empty()) {
        auto it = leaf_input.find(e.leaf.get());
        if (it != leaf_input.end()) accumulate(results[it->second], g);
        return;
      }
      auto& m = meta(*e.leaf);
      Tensor gg = g.dtype() == e.leaf->dtype ? g : cast(g, e.leaf->dtype);
      accumulate(m.grad, gg);
      if (composite && touched_set.insert(e.leaf.get()).second) touched.push_back(e.leaf);
    }
  };
  for (size_t i = 0; i < roots.size(); ++i) {
    const Tensor& r = roots[i];
    if (!r.requires_grad())
      fail(ErrorKind::Runtime, "element ", i,
           " of tensors does not require grad and does not have a grad_fn");
    Tensor g = grad_roots.size() > i ? grad_roots[i] : Tensor();
    if (!g.defined()) {
      if (r.numel() != 1)
        fail(ErrorKind::Runtime,
             "grad can be implicitly created only for scalar outputs (got shape ",
             shape_str(r.shape()), ")");
      g = ones_like(r);
    } else if (g.shape() != r.shape()) {
      fail(ErrorKind::Runtime, "backward: grad_output of shape ", shape_str(g.shape()),
           " does not match the output shape ", shape_str(r.shape()));
    }
    deliver(edge_of(r), g);
  }
  while (!ready.empty()) {
    GradNode* n = ready.top();
    ready.pop();
    Tensor g = pending.at(n);
    pending.erase(n);
    if (auto it = node_input.find(n); it != node_input.end()) {
      accumulate(results[it->second], g);
      if (stop_at_inputs) continue;
    }
    if (!n->vjp)
      fail(ErrorKind::Runtime, "Trying to backward through the graph a second time (", n->name,
           "), but the saved intermediate values have already been freed. Specify "
           "retain_graph=True.");
    std::vector<Tensor> gs = n->vjp(g);
    if (!retain_graph) n->vjp = nullptr;
    for (size_t i = 0; i < n->next.size() && i < gs.size(); ++i) {
      if (!n->next[i].defined() || !gs[i].defined()) continue;
      Tensor gi = gs[i];
      if (gi.shape() != n->input_shapes[i]) gi = unbroadcast(gi, n->input_shapes[i]);
      if (gi.dtype() != n->input_dtypes[i] && is_floating(n->input_dtypes[i]))
        gi = cast(gi, n->input_dtypes[i]);
      deliver(n->next[i], gi);
    }
  }
  if (!inputs.empty() && !allow_unused)
    for (size_t i = 0; i < results.size(); ++i)
      if (!results[i].defined())
        fail(ErrorKind::Runtime, "autograd.grad: input ", i,
             " was not used in the graph (pass allow_unused=True to get None)");
  if (composite) {
    std::vector<Tensor> grads = results;
    for (const auto& leaf : touched) grads.push_back(leaf->autograd->grad);
    composite->finish(grads);
  }
  return results;
}

}  // namespace

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool allow_unused, bool stop_at_inputs) {
  if (inputs.empty()) fail(ErrorKind::Runtime, "autograd.grad: no inputs given");
  return run(outputs, grad_outputs, inputs, retain_graph, allow_unused, stop_at_inputs);
}

void backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) {
  run({root}, {grad_output}, {}, retain_graph, true, false);
}

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_outputs,
              bool retain_graph) {
  if (roots.empty()) fail(ErrorKind::Runtime, "backward: no tensors given");
  if (!grad_outputs.empty() && grad_outputs.size() != roots.size())
    fail(ErrorKind::Runtime, "backward: got ", grad_outputs.size(), " gradients for ", roots.size(),
         " tensors");
  run(roots, grad_outputs, {}, retain_graph, true, false);
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
  return impl_ && impl_->autograd && impl_->autograd->grad_fn ? impl_->autograd->grad_fn->name : "";
}
void Tensor::backward(const Tensor& g, bool retain_graph) const {
  lt::backward(*this, g, retain_graph);
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
