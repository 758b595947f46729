// A training forward's compiled backward: lt.compile of a module in training, as AOTAutograd does.
//
// A captured call that returns tensors requiring grad, without running backward() itself (a
// compiled module's forward in training), could not replay: the returns' autograd history exists
// only for the call that traced it. So, when such a forward is captured, its backward is captured
// too: autograd runs once through the traced history from each such return (with a placeholder
// gradient) under a second capture, whose program takes the return's gradient and the forward's
// data the backward reads (the saved activations, as forward results or forward arguments) and
// returns the gradients of the tensors the history reaches (parameters, the call's arguments that
// require grad). Every call, the traced one included, then returns tensors whose autograd node runs
// that program: a replayed step traces no op, forward or backward.
//
// The forward's results that the backward reads become fresh tensors on each replay, held by that
// call's node (Dst::Saved): two forward calls before one backward (gradient accumulation over
// micro-batches) each keep their own activations, as in PyTorch.
#include <unordered_set>

#include "autograd/autograd.h"
#include "capture/capture_internal.h"
#include "ir/error.h"
#include "runtime/ops.h"

namespace lt::capture {
namespace {

// The tensors the returns' gradients reach: leaves requiring grad (parameters, leaf arguments) and,
// where the history goes on to before the call, the call's non-leaf arguments and the tensors from
// before it that the step read. Their order is the backward programs' gradient order.
struct Reached {
  std::vector<Tensor> tensors;
  std::vector<DiffInput> specs;
  std::string why_not;
};

Reached reached_inputs(const Session& s, const std::vector<Tensor>& args,
                       const std::vector<Tensor>& outs) {
  Reached r;
  auto arg_index = [&](const TensorImpl* t) {
    auto a = s.arg_of.find(t);
    return a == s.arg_of.end() ? -1 : a->second;
  };
  // Nodes where the history leaves the call: the grad_fn of a non-leaf argument or state tensor.
  std::unordered_map<const GradNode*, std::shared_ptr<TensorImpl>> boundary;
  for (const Tensor& a : args)
    if (a.impl()->autograd && a.impl()->autograd->grad_fn)
      boundary.try_emplace(a.impl()->autograd->grad_fn.get(), a.impl());
  for (const auto& [ptr, weak] : s.seen)
    if (auto t = weak.lock(); t && t->birth < s.start_birth && t->autograd && t->autograd->grad_fn)
      boundary.try_emplace(t->autograd->grad_fn.get(), t);
  std::unordered_set<const TensorImpl*> added;
  auto add = [&](const std::shared_ptr<TensorImpl>& t) {
    if (!added.insert(t.get()).second) return;
    int a = arg_index(t.get());
    r.tensors.emplace_back(t);
    r.specs.push_back(a >= 0 ? DiffInput{a, {}} : DiffInput{-1, t});
  };
  std::vector<const GradNode*> stack;
  std::unordered_set<const GradNode*> visited;
  for (const Tensor& o : outs) stack.push_back(o.impl()->autograd->grad_fn.get());
  while (!stack.empty()) {
    const GradNode* n = stack.back();
    stack.pop_back();
    if (!visited.insert(n).second) continue;
    for (const GradEdge& e : n->next) {
      if (e.leaf) {
        if (e.leaf->birth >= s.start_birth) {
          r.why_not =
              "its gradient reaches a tensor made in the call that requires grad (a new leaf)";
          return r;
        }
        add(e.leaf);
      } else if (e.fn) {
        if (auto b = boundary.find(e.fn.get()); b != boundary.end()) {
          add(b->second);
        } else if (e.fn->seq < s.start_seq) {
          r.why_not =
              "its gradient reaches autograd history from before the call through a tensor "
              "it did not read directly";
          return r;
        } else {
          stack.push_back(e.fn.get());
        }
      }
    }
  }
  return r;
}

}  // namespace

std::string attach_backward(Program& fwd, const Session& s, const std::vector<Tensor>& args,
                            const std::vector<Tensor>& rets,
                            const std::vector<std::shared_ptr<TensorImpl>>& roots,
                            const std::unordered_map<const LeafData*, InputSpec>& input_of) {
  // The returns that need a backward: results of the graph that carry history (once each).
  std::vector<std::pair<int, int>> todo;  // (return index, root index)
  std::unordered_set<int> root_done;
  for (size_t k = 0; k < rets.size(); ++k) {
    const Tensor& r = rets[k];
    if (r.impl()->birth < s.start_birth || !r.requires_grad()) continue;
    if (fwd.rets[k].kind != Ret::Root)
      return "it returns a tensor that requires grad but is not a result of its graph";
    if (!r.impl()->autograd->grad_fn)
      return "it returns a tensor made in the call that requires grad (a new leaf)";
    if (root_done.insert(fwd.rets[k].root).second)
      todo.emplace_back(static_cast<int>(k), fwd.rets[k].root);
  }
  std::vector<Tensor> outs;
  for (auto [k, j] : todo) outs.push_back(rets[static_cast<size_t>(k)]);
  Reached reach = reached_inputs(s, args, outs);
  if (!reach.why_not.empty()) return reach.why_not;

  // What of the forward call the backward may read: its results and its graph's inputs.
  auto saved = std::make_shared<SavedMap>();
  for (const auto& [d, spec] : input_of) saved->emplace(d, SavedSource{false, -1, spec});
  for (size_t j = 0; j < roots.size(); ++j)
    if (roots[j]->storage)
      (*saved)[roots[j]->storage.get()] = SavedSource{true, static_cast<int>(j), {}};

  std::vector<BackwardProgram> programs;
  for (auto [k, j] : todo) {
    const Tensor& r = rets[static_cast<size_t>(k)];
    // The return's gradient is the program's first argument: zeros here (this run's results are
    // dropped; the call's own backward runs the program like every later one).
    std::vector<unsigned char> zeros(static_cast<size_t>(r.numel()) * dtype_size(r.dtype()), 0);
    Tensor placeholder = from_host(zeros.data(), r.dtype(), r.shape(), r.device());
    begin_session({placeholder}, saved, s.start_birth);
    std::vector<Tensor> gs;
    try {
      gs = grad({r}, reach.tensors, {placeholder}, /*retain_graph=*/true, /*allow_unused=*/true,
                /*stop_at_inputs=*/true);
    } catch (...) {
      capture::abort();
      throw;
    }
    BackwardProgram bp;
    bp.ret = k;
    std::vector<Tensor> got;
    for (size_t m = 0; m < gs.size(); ++m)
      if (gs[m].defined()) {
        got.push_back(gs[m]);
        bp.grad_of.push_back(static_cast<int>(m));
      }
    Captured c = end_session({placeholder}, got, &bp.saved);
    if (!c.program) return "its backward cannot be compiled as one graph: " + c.why_not;
    for (const ReturnSpec& rs : c.program->rets)
      if (rs.kind == Ret::State || rs.kind == Ret::Data)
        return "its backward returns stored data as a gradient";
    Program& p = *c.program;
    for (const SavedRef& ref : bp.saved) {
      auto i = static_cast<size_t>(ref.index);
      p.arg_dtypes.push_back(ref.root ? fwd.root_dtypes[i] : fwd.arg_dtypes[i]);
      p.arg_shapes.push_back(ref.root ? fwd.root_shapes[i] : fwd.arg_shapes[i]);
      p.arg_devices.push_back(ref.root ? fwd.root_devices[i] : fwd.arg_devices[i]);
    }
    bp.program = std::move(c.program);
    programs.push_back(std::move(bp));
  }
  // Results the backward reads that the Python code does not hold as state: fresh on each replay.
  for (const BackwardProgram& bp : programs)
    for (const SavedRef& ref : bp.saved) {
      if (!ref.root) continue;
      OutputSpec& o = fwd.outputs[static_cast<size_t>(ref.index)];
      if (o.kind == Dst::State && roots[static_cast<size_t>(ref.index)]->birth >= s.start_birth) {
        o.kind = Dst::Saved;
        o.target.reset();
      }
    }
  fwd.diff_inputs = std::move(reach.specs);
  fwd.backward = std::move(programs);
  // This call's returns run the compiled backward too (over its own results), so its first
  // backward is the program every later step replays, and the history traced here is dropped.
  link_backward(
      fwd, rets, [&](int j) { return Tensor(roots[static_cast<size_t>(j)]); }, args);
  return "";
}

void link_backward(const Program& p, const std::vector<Tensor>& rets,
                   const std::function<Tensor(int)>& root, const std::vector<Tensor>& args) {
  if (!grad_enabled()) return;
  std::vector<Tensor> diff;
  diff.reserve(p.diff_inputs.size());
  for (const DiffInput& d : p.diff_inputs) {
    Tensor t = d.arg >= 0 ? args[static_cast<size_t>(d.arg)] : Tensor(d.state.lock());
    if (!t.defined() || !t.requires_grad())
      fail(ErrorKind::Runtime,
           "lt.compile: a tensor the compiled backward differentiates against no "
           "longer exists or no longer requires grad");
    diff.push_back(std::move(t));
  }
  for (const BackwardProgram& bp : p.backward) {
    std::vector<Tensor> saved;
    saved.reserve(bp.saved.size());
    for (const SavedRef& ref : bp.saved)
      saved.push_back(ref.root ? root(ref.index) : args[static_cast<size_t>(ref.index)]);
    const Tensor& out = rets[static_cast<size_t>(bp.ret)];
    auto vjp = [program = bp.program, saved = std::move(saved), grad_of = bp.grad_of,
                n = diff.size(), dtype = out.dtype()](const Tensor& g) {
      std::vector<Tensor> a;
      a.reserve(1 + saved.size());
      a.push_back(g.dtype() == dtype ? g : cast(g, dtype));
      a.insert(a.end(), saved.begin(), saved.end());
      auto r = replay(*program, a);
      if (!r)
        fail(ErrorKind::Runtime,
             "lt.compile: the compiled backward of this call cannot run any more (a parameter it "
             "reads was replaced or reshaped, or its executable left the graph cache); call the "
             "compiled module again");
      std::vector<Tensor> grads(n);
      for (size_t m = 0; m < grad_of.size(); ++m) grads[static_cast<size_t>(grad_of[m])] = (*r)[m];
      return grads;
    };
    record(out, diff, "CompiledFunctionBackward", std::move(vjp));
  }
}

}  // namespace lt::capture
