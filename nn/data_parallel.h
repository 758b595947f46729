// lt::nn::DistributedDataParallel: data parallelism over the default process group
// (lt::distributed), the C++ face of lazytensor.nn.parallel.DistributedDataParallel. Each rank runs
// the whole module on its shard of the batch; the parameters and buffers start as rank 0's, and
// after each backward pass through this module's forward the gradients are averaged over the
// ranks, in buckets of about bucket_cap_mb in reverse parameter order (the order backward produces
// them): each bucket and dtype one engine call, over the gradients flattened on NCCL, packed by
// the backend on Gloo (lt::distributed::ddp_reduce_mode says the ways, LT_DDP_REDUCE chooses
// one). On a
// lazy device the averaging is traced right after the backward (autograd's queue_callback), so
// forward, backward, the collectives and the optimizer's update are one graph.
#pragma once
#include <memory>
#include <utility>
#include <vector>

#include "nn/nn_module.h"

namespace lt::nn {

// Averages the gradients of `buckets` (parameters, in the order DDP averages them) over the
// default process group, as DistributedDataParallel does after each backward pass (Python's DDP
// calls it too): each bucket and dtype one engine call, as lt::distributed::ddp_reduce_mode says.
// The mean is written into each gradient tensor (Tensor::assign); parameters without a gradient
// are skipped.
void average_gradients(const std::vector<std::vector<Tensor>>& buckets);

struct DistributedDataParallelOptions {
  double bucket_cap_mb = 25;  // a parameter larger than this is a bucket alone
};

class DistributedDataParallel : public UnaryModule {
 public:
  // Needs an initialized process group (lt::distributed::init_process_group), as in PyTorch.
  // Broadcasts the module's parameters and buffers from rank 0 and materializes them, so every
  // rank's first step is the same graph as its later ones. The module is registered as the child
  // "module" (state_dict keys gain "module.", as PyTorch's do). Like an optimizer, it holds the
  // parameters it was built with: move the module (Module::to) before wrapping it.
  explicit DistributedDataParallel(std::shared_ptr<Module> module,
                                   const DistributedDataParallelOptions& options = {});

  // The wrapped module's forward (it must be a UnaryModule); queues the gradient averaging for the
  // next backward when grad mode is on and sync is on.
  Tensor forward(const Tensor& x) override;
  // Any other call shape: queues the averaging as forward does, then returns fn(module()), e.g.
  // ddp.call([&](nn::Module& m) { return static_cast<MultiheadAttention&>(m).forward(q, k, v); }).
  template <typename Fn>
  decltype(auto) call(Fn&& fn) {
    prepare_for_backward();
    return std::forward<Fn>(fn)(*module_);
  }

  const std::shared_ptr<Module>& module() const { return module_; }

  // Whether a forward queues the averaging (PyTorch's require_backward_grad_sync). Off: backward
  // passes accumulate local gradients only (gradient accumulation); the first backward after it is
  // back on averages the sum.
  void set_require_backward_grad_sync(bool on) { sync_ = on; }
  bool require_backward_grad_sync() const { return sync_; }

  // Turns sync off for its lifetime: { auto guard = ddp.no_sync(); ... } (PyTorch's no_sync()).
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(ddp), prev_(ddp.sync_) {
      ddp.sync_ = false;
    }
    ~NoSync() { ddp_.sync_ = prev_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel& ddp_;
    bool prev_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  // The gradient buckets, in the order they are averaged (tests and diagnostics).
  std::vector<std::vector<Tensor>> buckets() const;

 private:
  struct Reducer;
  void prepare_for_backward();

  std::shared_ptr<Module> module_;
  std::shared_ptr<UnaryModule> unary_;  // module_ when it is one
  // Held by the queued callbacks weakly: a wrapper destroyed before the backward averages nothing.
  std::shared_ptr<Reducer> reducer_;
  bool sync_ = true;
};

}  // namespace lt::nn
