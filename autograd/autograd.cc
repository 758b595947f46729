#include "autograd/autograd.h"

#include <atomic>
#include <deque>
#include <optional>
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/vjp.h"
#include "ir/error.h"
#include "ir/pool.h"
#include "runtime/ops.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {
std::atomic<uint64_t> g_seq{0};
thread_local std::deque<std::function<void()>> t_callbacks;  // queue_callback's

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

void record_node(const Tensor& out, const std::vector<Tensor>& inputs, const char* name,
                 VjpFn vjp) {
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

namespace {

// The tape's keep_overwritten_history (runtime/tape.h), for a t with history.
Tensor join_overwritten_history(TensorImpl& t, const Tensor& value) {
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

uint64_t grad_seq_now() { return g_seq.load(); }

std::vector<Tensor> grad(const std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs,
                         const std::vector<Tensor>& grad_outputs, bool retain_graph,
                         bool allow_unused, bool stop_at_inputs) {
  if (inputs.empty()) fail(ErrorKind::Runtime, "autograd.grad: no inputs given");
  return run(outputs, grad_outputs, inputs, retain_graph, allow_unused, stop_at_inputs);
}

void queue_callback(std::function<void()> fn) {
  if (!fn) fail(ErrorKind::Type, "queue_callback: the callback is empty");
  t_callbacks.push_back(std::move(fn));
}

namespace {

// Runs `pass` (a backward pass), then the queued callbacks; the queue is emptied either way.
template <typename Pass>
void then_callbacks(Pass&& pass) {
  try {
    pass();
    while (!t_callbacks.empty()) {
      std::function<void()> fn = std::move(t_callbacks.front());
      t_callbacks.pop_front();
      fn();
    }
  } catch (...) {
    t_callbacks.clear();
    throw;
  }
}

}  // namespace

void backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) {
  then_callbacks([&] { run({root}, {grad_output}, {}, retain_graph, true, false); });
}

void backward(const std::vector<Tensor>& roots, const std::vector<Tensor>& grad_outputs,
              bool retain_graph) {
  then_callbacks([&] {
    if (roots.empty()) fail(ErrorKind::Runtime, "backward: no tensors given");
    if (!grad_outputs.empty() && grad_outputs.size() != roots.size())
      fail(ErrorKind::Runtime, "backward: got ", grad_outputs.size(), " gradients for ",
           roots.size(), " tensors");
    run(roots, grad_outputs, {}, retain_graph, true, false);
  });
}

namespace {

// The tape the core records through (runtime/tape.h), registered when the library loads: the
// shared library holds every object of autograd/ (CMakeLists.txt), so this initializer runs in
// every process that can trace an op.
class Recorder final : public Tape {
 public:
  void record_op(Op op, const Attrs& attrs, const Tensor& out, const NodeList& operands,
                 const std::vector<Tensor>& sources) override {
    record_rule(op, attrs, out, operands, sources);
  }
  void record(const Tensor& out, const std::vector<Tensor>& inputs, const char* name,
              VjpFn vjp) override {
    record_node(out, inputs, name, std::move(vjp));
  }
  Tensor keep_overwritten_history(TensorImpl& t, const Tensor& value) override {
    return join_overwritten_history(t, value);
  }
  void backward(const Tensor& root, const Tensor& grad_output, bool retain_graph) override {
    lt::backward(root, grad_output, retain_graph);
  }
  const char* name(const GradNode& node) const override { return node.name; }
};

[[maybe_unused]] const bool g_registered = [] {
  set_tape(new Recorder);  // never freed: a tensor may record or run backward at exit
  return true;
}();

}  // namespace
}  // namespace lt
