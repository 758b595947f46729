#include "capture/capture.h"

#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "autograd/autograd.h"
#include "capture/capture_internal.h"
#include "ir/error.h"
#include "runtime/executor.h"
#include "runtime/sync.h"
#include "runtime/trace_observer.h"

namespace lt::capture {

namespace {

std::unique_ptr<Session> g_session;  // guarded by runtime_mutex()

void mark_broken(Session& s, std::string why) {
  if (s.broken.empty()) s.broken = std::move(why);
}

void repoint(TensorImpl& t, std::shared_ptr<Storage> s) {
  t.storage = std::move(s);
  t.pending.reset();
  t.leaf.reset();
  registry_remove(&t);
}

// The capture as the tensor core's trace observer (runtime/trace_observer.h): set while
// g_session is, so the core reports to it only while a capture runs.
class Observer final : public TraceObserver {
 public:
  void on_leaf(TensorImpl& t) override;
  void on_host_read(SyncReason reason) override;
  void on_execution(SyncReason reason) override;
  void on_index_check(const IndexCheckSpec& spec, const Tensor& index) override;
  bool on_transfer_begin(const TensorImpl& src) override;
  void on_transfer_end(const TensorImpl& src, const Tensor* result) override;
};
// Never destroyed: the core may still hold it while the process exits.
Observer& observer() {
  static Observer* o = new Observer;
  return *o;
}

void observe(bool on) { set_trace_observer(on ? &observer() : nullptr); }

}  // namespace

bool active() { return trace_observer() == &observer(); }

size_t program_inputs(const Program& p) { return p.inputs.size(); }
size_t program_outputs(const Program& p) { return p.outputs.size(); }

// ---- observer -----------------------------------------------------------------------------------

void Observer::on_leaf(TensorImpl& t) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  if (!g_session || !t.storage) return;
  Session& s = *g_session;
  s.seen.try_emplace(&t, t.weak_from_this());
  auto [it, fresh] = s.leaf_owner.try_emplace(t.storage.get(), t.weak_from_this());
  if (!fresh && t.birth < s.start_birth) {  // prefer a tensor from before the step as the owner
    auto cur = it->second.lock();
    if (!cur || cur->birth >= s.start_birth) it->second = t.weak_from_this();
  }
}

void Observer::on_host_read(SyncReason reason) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  if (!g_session || g_session->transfer_depth > 0) return;
  mark_broken(*g_session, std::string("it reads a tensor's value on the host (") +
                              sync_reason_name(reason) + "), so its trace depends on data");
}

void Observer::on_execution(SyncReason reason) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  if (!g_session) return;
  if (reason == SyncReason::Eager)
    mark_broken(*g_session,
                "it runs eager ops (tensors on a non-lazy device), which a replay would not redo");
  else
    mark_broken(*g_session, std::string("it syncs in the middle of the step (") +
                                sync_reason_name(reason) + ")");
}

bool Observer::on_transfer_begin(const TensorImpl& src) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  if (!g_session) return false;
  ++g_session->transfer_depth;
  return true;
}

void Observer::on_transfer_end(const TensorImpl& src, const Tensor* result) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  if (!g_session) return;
  --g_session->transfer_depth;
  if (!result || !result->impl()->storage) return;
  auto& source = const_cast<TensorImpl&>(src);
  g_session->transfers[result->impl()->storage.get()] = {source.weak_from_this(), source.birth,
                                                         &src, result->device()};
}

// ---- capture ----------------------------------------------------------------------------------

void begin(const std::vector<Tensor>& args) { begin_session(args, nullptr, 0); }

void begin_session(const std::vector<Tensor>& args, std::shared_ptr<const SavedMap> saved,
                   uint64_t window_birth) {
  mark_step();  // the step starts with nothing pending: everything pending after it is its work
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  if (g_session)
    fail(ErrorKind::Runtime, "lt.compile: a capture is already running (nested capture)");
  auto s = std::make_unique<Session>();
  s->start_birth = next_birth();
  s->rng_start = rng_state();
  s->start_seq = grad_seq_now();
  s->arg_count = args.size();
  s->saved = std::move(saved);
  s->window_birth = window_birth;
  for (size_t i = 0; i < args.size(); ++i) {
    if (!args[i].defined())
      fail(ErrorKind::Runtime, "lt.compile: argument tensor ", i, " is undefined");
    const auto& impl = args[i].impl();
    s->arg_of.try_emplace(impl.get(), static_cast<int>(i));
    if (impl->storage) s->arg_storage.try_emplace(impl->storage.get(), static_cast<int>(i));
  }
  g_session = std::move(s);
  observe(true);
}

void abort() {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  observe(false);
  g_session.reset();
}

namespace {

// Where the data `d` (a Param leaf's, or a returned tensor's) comes from on a replay; nullopt when
// its origin is unknown (data from before the step that no tensor read during it owns).
// A backward capture's read of its forward call's data: a saved argument of the backward program
// (a forward result, a forward argument), or the forward's own source (state, a constant).
InputSpec saved_input(Session& s, const LeafData* d, const SavedSource& src, DType dtype,
                      const Shape& shape) {
  InputSpec in = src.root ? InputSpec{} : src.spec;
  in.dtype = dtype;
  in.shape = shape;
  if (!src.root && src.spec.kind != Src::Arg && src.spec.kind != Src::ArgTo) return in;
  auto [it, fresh] = s.saved_slot.try_emplace(d, static_cast<int>(s.saved_used.size()));
  if (fresh)
    s.saved_used.push_back(src.root ? SavedRef{true, src.index} : SavedRef{false, src.spec.arg});
  in.kind = src.root || src.spec.kind == Src::Arg ? Src::Arg : Src::ArgTo;
  in.arg = static_cast<int>(s.arg_count) + it->second;
  return in;
}

std::optional<InputSpec> classify_data(Session& s, const std::shared_ptr<LeafData>& d, DType dtype,
                                       const Shape& shape) {
  if (s.saved)
    if (auto m = s.saved->find(d.get()); m != s.saved->end())
      return saved_input(s, d.get(), m->second, dtype, shape);
  // State is what existed before the step; a backward capture's step starts at its forward call.
  const uint64_t state_before = s.saved ? s.window_birth : s.start_birth;
  InputSpec in;
  in.dtype = dtype;
  in.shape = shape;
  if (auto t = s.transfers.find(d.get()); t != s.transfers.end()) {
    const TransferSource& src = t->second;
    in.device = src.device;
    if (auto a = s.arg_of.find(src.src_ptr); a != s.arg_of.end()) {
      in.kind = Src::ArgTo;
      in.arg = a->second;
      return in;
    }
    if (src.src_birth < state_before) {
      in.kind = Src::StateTo;
      in.state = src.src;
      return in;
    }
    in.kind = Src::Const;
    in.constant = std::static_pointer_cast<Storage>(d);
    return in;
  }
  if (auto a = s.arg_storage.find(d.get()); a != s.arg_storage.end()) {
    in.kind = Src::Arg;
    in.arg = a->second;
    return in;
  }
  if (auto o = s.leaf_owner.find(d.get()); o != s.leaf_owner.end()) {
    if (auto owner = o->second.lock(); owner && owner->birth < state_before) {
      if (auto a = s.arg_of.find(owner.get()); a != s.arg_of.end()) {
        in.kind = Src::Arg;
        in.arg = a->second;
      } else {
        in.kind = Src::State;
        in.state = owner;
      }
      return in;
    }
  }
  auto storage = std::static_pointer_cast<Storage>(d);
  if (storage->birth >= s.start_birth) {  // made during the step from host data: a constant
    in.kind = Src::Const;
    in.constant = std::move(storage);
    return in;
  }
  return std::nullopt;
}

}  // namespace

void Observer::on_index_check(const IndexCheckSpec& spec, const Tensor& index) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  if (!g_session) return;
  Session& s = *g_session;
  TensorImpl& t = *index.impl();
  on_leaf(t);  // the op reads it as a leaf anyway: classify it as the graph input will be
  auto in = classify_data(s, t.storage, t.dtype, t.shape);
  if (!in)
    mark_broken(s, "it indexes with host data from before the step that no tensor it read owns");
  else if (in->kind != Src::Const)  // a constant's values cannot change: checked once, at the op
    s.data_checks.push_back({std::move(*in), spec});
}

Captured end(const std::vector<Tensor>& args, const std::vector<Tensor>& rets) {
  return end_session(args, rets, nullptr);
}

Captured end_session(const std::vector<Tensor>& args, const std::vector<Tensor>& rets,
                     std::vector<SavedRef>* saved_used) {
  std::unique_lock<std::recursive_mutex> lock(runtime_mutex());
  observe(false);
  std::unique_ptr<Session> session = std::move(g_session);
  if (!session) fail(ErrorKind::Runtime, "lt.compile: no capture is running");
  Session& s = *session;
  auto not_replayable = [&](std::string why) {
    mark_step();
    return Captured{nullptr, std::move(why)};
  };
  if (!s.broken.empty()) return not_replayable(s.broken);
  RngState rng_now = rng_state();
  if (rng_now.seed != s.rng_start.seed) return not_replayable("it calls manual_seed");

  std::vector<std::shared_ptr<TensorImpl>> pending = registry_snapshot();
  auto prog = std::make_shared<Program>();
  for (const Tensor& a : args) {
    prog->arg_dtypes.push_back(a.dtype());
    prog->arg_shapes.push_back(a.shape());
    prog->arg_devices.push_back(a.device());
  }
  prog->rng_advance = rng_now.offset - s.rng_start.offset;
  for (auto& t : pending)
    if (t->device.backend_name() != pending[0]->device.backend_name())
      return not_replayable("its pending tensors live on several backends");
  // Which returned tensors are which.
  std::unordered_map<const TensorImpl*, int> root_of;
  for (size_t j = 0; j < pending.size(); ++j)
    root_of.emplace(pending[j].get(), static_cast<int>(j));
  std::unordered_set<const TensorImpl*> returned;
  bool ret_requires_grad = false;
  for (const Tensor& r : rets) {
    if (!r.defined()) fail(ErrorKind::Runtime, "lt.compile: a returned tensor is undefined");
    returned.insert(r.impl().get());
    if (r.impl()->birth >= s.start_birth && r.requires_grad()) ret_requires_grad = true;
  }

  // Run the step's work as one graph, keeping the IR alive until its leaves are classified.
  NodeList hold;
  std::vector<const Node*> roots;
  for (auto& t : pending) {
    hold.push_back(t->pending);
    roots.push_back(t->pending.get());
  }
  GraphRecord rec;
  std::vector<index_checks::Taken> checks;  // their stats IR stays alive with the graph's
  if (!pending.empty()) {
    prog->has_graph = true;
    prog->device = pending[0]->device;
    prog->backend = prog->device.backend_name();
    // Range checks of indices computed in the step ride along as extra outputs, as in a sync.
    checks = index_checks::take_into(prog->backend, roots);
    auto outs = execute_graph(roots, prog->backend, SyncReason::MarkStep, &rec);
    for (size_t j = 0; j < pending.size(); ++j) repoint(*pending[j], outs[j]);
    prog->key = rec.key;
    // A bad index fails the traced call as the sync would have (results assigned); there is no
    // program: the next call captures again.
    std::string bad = index_checks::first_failure(checks, outs, pending.size());
    if (!bad.empty()) fail(ErrorKind::Index, bad);
    for (const auto& c : checks)
      prog->graph_checks.push_back({nullptr, c.spec, c.index_shape, c.source});
  }
  prog->data_checks = std::move(s.data_checks);

  // Inputs.
  std::unordered_map<const Node*, Src> rng_scalar;
  for (const Node* n : rec.graph.order)
    if (n->op == Op::Rand && n->inputs.size() == 2) {
      rng_scalar[n->inputs[0].get()] = Src::Seed;
      rng_scalar[n->inputs[1].get()] = Src::Offset;
    }
  std::unordered_map<const LeafData*, InputSpec>
      input_of;  // a training forward's, for its backward
  for (const Node* n : rec.graph.inputs) {
    if (n->op == Op::Scalar) {
      InputSpec in;
      in.kind = Src::Scalar;
      in.dtype = n->dtype;
      in.scalar = n->scalar;
      in.scalar_i = n->scalar_i;
      if (auto r = rng_scalar.find(n); r != rng_scalar.end()) {
        in.kind = r->second;
        if (in.kind == Src::Offset) in.scalar_i = n->scalar_i - s.rng_start.offset;
      }
      prog->inputs.push_back(std::move(in));
      continue;
    }
    auto in = classify_data(s, n->data, n->dtype, n->shape);
    if (!in)
      return Captured{nullptr,
                      "a graph input holds data from before the step that no tensor it read owns"};
    if (ret_requires_grad) input_of.emplace(n->data.get(), *in);
    prog->inputs.push_back(std::move(*in));
  }

  // Outputs: gradients of the tensors the step read, by the tensor that holds them.
  std::unordered_map<const TensorImpl*, std::shared_ptr<TensorImpl>> grad_owner;
  for (auto& [ptr, weak] : s.seen)
    if (auto t = weak.lock(); t && t->autograd && t->autograd->grad.defined())
      grad_owner.emplace(t->autograd->grad.impl().get(), t);
  bool has_grads = false;
  for (auto& t : pending) {
    OutputSpec o;
    prog->root_dtypes.push_back(t->dtype);
    prog->root_shapes.push_back(t->shape);
    prog->root_devices.push_back(t->device);
    if (auto a = s.arg_of.find(t.get()); a != s.arg_of.end()) {
      o.kind = Dst::Arg;
      o.arg = a->second;
    } else if (t->birth < s.start_birth) {
      o.kind = Dst::State;
      o.target = t;
    } else if (auto g = grad_owner.find(t.get());
               g != grad_owner.end() && g->second->birth < s.start_birth) {
      has_grads = true;
      if (auto a = s.arg_of.find(g->second.get()); a != s.arg_of.end()) {
        o.kind = Dst::GradOfArg;
        o.arg = a->second;
      } else {
        o.kind = Dst::GradOfState;
        o.target = g->second;
      }
    } else if (returned.count(t.get())) {
      o.kind = Dst::Fresh;
    } else {
      o.kind = Dst::State;  // kept by the Python code (a module attribute, a list): re-pointed
      o.target = t;
    }
    prog->outputs.push_back(std::move(o));
  }

  // Return values.
  for (const Tensor& r : rets) {
    const auto& impl = r.impl();
    ReturnSpec rs;
    if (auto a = s.arg_of.find(impl.get()); a != s.arg_of.end()) {
      rs.kind = Ret::Arg;
      rs.arg = a->second;
    } else if (impl->birth < s.start_birth) {
      rs.kind = Ret::State;
      rs.state = impl;
    } else if (auto j = root_of.find(impl.get()); j != root_of.end()) {
      rs.kind = Ret::Root;
      rs.root = j->second;
    } else {
      auto in = classify_data(s, impl->storage, impl->dtype, impl->shape);
      if (!in)
        return Captured{nullptr,
                        "it returns data from before the step that no tensor it read owns"};
      rs.kind = Ret::Data;
      rs.data = std::move(*in);
      rs.data.device = impl->device;
    }
    prog->rets.push_back(std::move(rs));
  }
  // A training forward (returns that require grad, no backward run in the step): its backward is
  // compiled too, as AOTAutograd does, so replays return tensors whose backward replays.
  if (ret_requires_grad && !has_grads) {
    std::string why = attach_backward(*prog, s, args, rets, pending, input_of);
    if (!why.empty()) return Captured{nullptr, std::move(why)};
  }
  if (saved_used) *saved_used = std::move(s.saved_used);
  return Captured{std::move(prog), ""};
}

// ---- replay -----------------------------------------------------------------------------------

std::optional<std::vector<Tensor>> replay(Program& p, const std::vector<Tensor>& args) {
  std::unique_lock<std::recursive_mutex> lock(runtime_mutex());
  if (g_session)
    fail(ErrorKind::Runtime, "lt.compile: cannot replay a step while a capture is running");
  if (args.size() != p.arg_dtypes.size()) return std::nullopt;
  for (size_t i = 0; i < args.size(); ++i)
    if (!args[i].defined() || args[i].dtype() != p.arg_dtypes[i] ||
        args[i].shape() != p.arg_shapes[i] || args[i].device() != p.arg_devices[i])
      return std::nullopt;
  if (p.has_graph && p.device.backend_name() != p.backend) return std::nullopt;  // set_lazy_backend

  // Resolve the tensors the program reads and writes; a dead or reshaped one makes it stale.
  auto source_of = [&](const InputSpec& in) -> std::shared_ptr<TensorImpl> {
    if (in.kind == Src::Arg || in.kind == Src::ArgTo) return args[in.arg].impl();
    if (in.kind == Src::State || in.kind == Src::StateTo) return in.state.lock();
    return nullptr;
  };
  std::vector<Tensor> to_sync;
  // The tensor whose data `in` binds, null when it is gone or changed dtype or shape. Pending
  // ones are synced once each (one tensor can feed several inputs and checks).
  auto live_source = [&](const InputSpec& in) -> std::shared_ptr<TensorImpl> {
    auto t = source_of(in);
    if (!t || t->dtype != in.dtype || t->shape != in.shape) return nullptr;
    if (t->pending && std::none_of(to_sync.begin(), to_sync.end(),
                                   [&](const Tensor& q) { return q.impl() == t; }))
      to_sync.emplace_back(t);
    return t;
  };
  std::vector<std::shared_ptr<TensorImpl>> src(p.inputs.size());
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const InputSpec& in = p.inputs[i];
    if (in.kind != Src::State && in.kind != Src::StateTo && in.kind != Src::Arg &&
        in.kind != Src::ArgTo)
      continue;
    if (!(src[i] = live_source(in))) return std::nullopt;
  }
  std::vector<std::shared_ptr<TensorImpl>> checked(p.data_checks.size());
  for (size_t k = 0; k < p.data_checks.size(); ++k)
    if (!(checked[k] = live_source(p.data_checks[k].data))) return std::nullopt;
  std::vector<std::shared_ptr<TensorImpl>> targets(p.outputs.size());
  for (size_t j = 0; j < p.outputs.size(); ++j) {
    const OutputSpec& o = p.outputs[j];
    if (o.kind == Dst::Arg || o.kind == Dst::GradOfArg)
      targets[j] = args[o.arg].impl();
    else if (o.kind == Dst::State || o.kind == Dst::GradOfState)
      targets[j] = o.target.lock();
    if (!targets[j]) continue;  // a state tensor nobody holds any more: its value is dropped
    if ((o.kind == Dst::Arg || o.kind == Dst::State) &&
        (targets[j]->dtype != p.root_dtypes[j] || targets[j]->shape != p.root_shapes[j]))
      return std::nullopt;
    if ((o.kind == Dst::GradOfArg || o.kind == Dst::GradOfState) &&
        !(targets[j]->autograd && targets[j]->autograd->requires_grad))
      return std::nullopt;
  }
  std::vector<std::shared_ptr<TensorImpl>> ret_src(p.rets.size());  // Ret::State, Ret::Data
  for (size_t k = 0; k < p.rets.size(); ++k) {
    const ReturnSpec& r = p.rets[k];
    if (r.kind == Ret::State && !(ret_src[k] = r.state.lock())) return std::nullopt;
    if (r.kind == Ret::Data && (r.data.kind == Src::State || r.data.kind == Src::StateTo) &&
        !(ret_src[k] = source_of(r.data)))
      return std::nullopt;
    if (r.kind == Ret::Data && (r.data.kind == Src::Arg || r.data.kind == Src::ArgTo))
      ret_src[k] = source_of(r.data);
  }
  if (!to_sync.empty()) sync(to_sync, SyncReason::Sync);  // the user left work pending on them
  // Indices among the new data are checked before anything runs, as the step checks them at the op.
  for (size_t k = 0; k < p.data_checks.size(); ++k)
    index_checks::check_stored(p.data_checks[k].spec, *checked[k]);

  // Bind.
  RngState rng = rng_state();
  auto resolve = [&](const InputSpec& in,
                     const std::shared_ptr<TensorImpl>& impl) -> std::shared_ptr<Storage> {
    switch (in.kind) {
      case Src::Arg:
      case Src::State:
        return impl->storage;
      case Src::ArgTo:
      case Src::StateTo:
        return Tensor(impl).to(in.device).impl()->storage;
      case Src::Const:
        return in.constant;
      default:
        return nullptr;
    }
  };
  std::vector<BoundInput> bound(p.inputs.size());
  for (size_t i = 0; i < p.inputs.size(); ++i) {
    const InputSpec& in = p.inputs[i];
    BoundInput& b = bound[i];
    b.dtype = in.dtype;
    switch (in.kind) {
      case Src::Scalar:
        b.scalar = in.scalar;
        b.scalar_i = in.scalar_i;
        break;
      case Src::Seed:
        b.scalar_i = static_cast<int64_t>(rng.seed & 0x7fffffffffffffffull);
        b.scalar = static_cast<double>(b.scalar_i);
        break;
      case Src::Offset:
        b.scalar_i = in.scalar_i + rng.offset;
        b.scalar = static_cast<double>(b.scalar_i);
        break;
      default: {
        b.storage = resolve(in, src[i]);
        if (!b.storage || !b.storage->buffer) return std::nullopt;
        if (b.storage->backend != p.backend &&
            !(backend_host_memory(b.storage->backend) && backend_host_memory(p.backend)))
          return std::nullopt;  // moved to another device since the capture
      }
    }
  }
  // Donation: a state or argument tensor that this replay re-points at a result may have that
  // result written into its memory, when its storage has no holder but the tensor and `bound`
  // (no view, export or leaf) and the memory is the runtime's own.
  for (size_t j = 0; j < p.outputs.size(); ++j) {
    const OutputSpec& o = p.outputs[j];
    if ((o.kind != Dst::Arg && o.kind != Dst::State) || !targets[j]) continue;
    for (size_t i = 0; i < p.inputs.size(); ++i) {
      BoundInput& b = bound[i];
      if (src[i] != targets[j] ||
          (p.inputs[i].kind != Src::Arg && p.inputs[i].kind != Src::State) || !b.storage ||
          b.storage != src[i]->storage || b.storage.use_count() != 2 ||
          b.storage->buffer.use_count() != 1 || !b.storage->buffer->runtime_owned())
        continue;
      b.owner_root = static_cast<int>(j);
    }
  }
  std::vector<std::shared_ptr<Storage>> outs;
  if (p.has_graph) {
    auto r = run_cached(p.key, p.backend, bound, p.outputs.size() + p.graph_checks.size());
    if (!r) return std::nullopt;
    outs = std::move(*r);
  }
  rng_advance(p.rng_advance);

  // Write back: the same state tensors re-pointed, new gradients, fresh return tensors.
  std::vector<std::shared_ptr<TensorImpl>> fresh(p.outputs.size());
  auto fresh_root = [&](size_t j) {
    if (!fresh[j])
      fresh[j] = make_data_tensor(outs[j], p.root_dtypes[j], p.root_shapes[j], p.root_devices[j]);
    return fresh[j];
  };
  for (size_t j = 0; j < p.outputs.size(); ++j) {
    const OutputSpec& o = p.outputs[j];
    if (o.kind == Dst::Fresh || o.kind == Dst::Saved || !targets[j]) continue;
    if (o.kind == Dst::Arg || o.kind == Dst::State) {
      repoint(*targets[j], outs[j]);
    } else {
      if (!targets[j]->autograd) targets[j]->autograd = std::make_unique<AutogradMeta>();
      targets[j]->autograd->grad = Tensor(fresh_root(j));
    }
  }
  std::vector<Tensor> result;
  result.reserve(p.rets.size());
  for (size_t k = 0; k < p.rets.size(); ++k) {
    const ReturnSpec& r = p.rets[k];
    switch (r.kind) {
      case Ret::Arg:
        result.push_back(args[r.arg]);
        break;
      case Ret::State:
        result.emplace_back(ret_src[k]);
        break;
      case Ret::Root:
        result.emplace_back(fresh_root(static_cast<size_t>(r.root)));
        break;
      case Ret::Data: {
        auto storage = resolve(r.data, ret_src[k]);
        result.emplace_back(make_data_tensor(storage, r.data.dtype, r.data.shape, r.data.device));
        break;
      }
    }
  }
  if (!p.backward.empty())
    link_backward(
        p, result, [&](int j) { return Tensor(fresh_root(static_cast<size_t>(j))); }, args);
  // Indices computed in the step: raised once everything is assigned, as a sync raises them; on a
  // device backend by the next call, sync, host read or synchronize (index_checks::after_run).
  std::string bad = index_checks::after_run(p.backend, p.graph_checks, outs, p.outputs.size());
  if (!bad.empty()) fail(ErrorKind::Index, bad);
  return result;
}

}  // namespace lt::capture
