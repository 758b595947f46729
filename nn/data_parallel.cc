#include "nn/data_parallel.h"

#include <algorithm>

#include "autograd/autograd.h"
#include "ir/error.h"
#include "runtime/distributed.h"
#include "runtime/indexing.h"
#include "runtime/ops.h"
#include "runtime/sync.h"

namespace lt::nn {

struct DistributedDataParallel::Reducer {
  std::vector<std::vector<Tensor>> buckets;
  bool queued = false;  // an averaging waits in autograd's queue (one per backward, however
                        // many forwards ran before it)
  void average() const;
};

namespace {

// Buckets of at most `cap_mb` (a larger parameter alone) in reverse parameter order: backward
// finishes the last layers' gradients first.
std::vector<std::vector<Tensor>> make_buckets(const std::vector<Tensor>& params, double cap_mb) {
  const int64_t cap = std::max<int64_t>(1, static_cast<int64_t>(cap_mb * 1024 * 1024));
  std::vector<std::vector<Tensor>> buckets;
  std::vector<Tensor> bucket;
  int64_t size = 0;
  for (auto it = params.rbegin(); it != params.rend(); ++it) {
    const int64_t nbytes = it->numel() * static_cast<int64_t>(dtype_size(it->dtype()));
    if (!bucket.empty() && size + nbytes > cap) {
      buckets.push_back(std::move(bucket));
      bucket.clear();
      size = 0;
    }
    bucket.push_back(*it);
    size += nbytes;
  }
  if (!bucket.empty()) buckets.push_back(std::move(bucket));
  return buckets;
}

// The averaged gradients of `params` (one dtype), in order, as `mode` says (runtime/distributed.h):
// each gradient alone, or several flattened into one all_reduce and sliced back. New tensors are
// reduced, never a gradient in place, and every result is made before any gradient is set: one
// gradient tensor may be several parameters' (add's rule hands the same gradient to both operands).
std::vector<Tensor> averaged(const std::vector<Tensor>& params, distributed::DdpReduce mode,
                             int64_t group) {
  const int world = distributed::get_world_size();
  std::vector<Tensor> out(params.size());
  std::vector<size_t> flat;
  if (mode == distributed::DdpReduce::Bucket) {
    for (size_t i = 0; i < params.size(); ++i)
      out[i] = all_reduce(params[i].grad(), ReduceOp::Avg, world, group);
    return out;
  }
  for (size_t i = 0; i < params.size(); ++i) {
    const bool alone = mode == distributed::DdpReduce::PerTensor ||
                       (mode == distributed::DdpReduce::Mixed &&
                        params[i].numel() >= distributed::kDdpAloneElements);
    if (alone)
      out[i] = all_reduce(params[i].grad(), ReduceOp::Avg, world);
    else
      flat.push_back(i);
  }
  if (flat.size() == 1) out[flat[0]] = all_reduce(params[flat[0]].grad(), ReduceOp::Avg, world);
  if (flat.size() < 2) return out;
  std::vector<Tensor> pieces;
  pieces.reserve(flat.size());
  for (size_t i : flat) pieces.push_back(reshape(params[i].grad(), {-1}));
  // concat, not cat: lowering writes each gradient straight into its range of the bucket.
  const Tensor sum = all_reduce(concat(pieces), ReduceOp::Avg, world);
  int64_t offset = 0;
  for (size_t i : flat) {
    const int64_t n = params[i].numel();
    out[i] = reshape_to(narrow(sum, 0, offset, n), params[i].shape());
    offset += n;
  }
  return out;
}

}  // namespace

// Every rank averages the same buckets in the same order: the parameters with a gradient, by
// dtype in order of first appearance (a parameter unused on one rank only is a mismatch, which
// the collectives' check between ranks reports).
void average_gradients(const std::vector<std::vector<Tensor>>& buckets) {
  NoGradGuard no_grad;
  const distributed::DdpReduce mode = distributed::ddp_reduce_mode();
  int64_t group = 0;  // Bucket mode: each bucket and dtype its own call group, 1, 2, ...
  for (const auto& bucket : buckets) {
    std::vector<std::pair<DType, std::vector<Tensor>>> by_dtype;
    for (const Tensor& p : bucket) {
      if (!p.grad().defined()) continue;
      auto it = std::find_if(by_dtype.begin(), by_dtype.end(),
                             [&](const auto& g) { return g.first == p.dtype(); });
      if (it == by_dtype.end()) it = by_dtype.insert(by_dtype.end(), {p.dtype(), {}});
      it->second.push_back(p);
    }
    for (auto& [dtype, params] : by_dtype) {
      const std::vector<Tensor> avg = averaged(params, mode, ++group);
      // Into the gradient tensor itself, as PyTorch's DDP does: a reference to it sees the mean.
      for (size_t i = 0; i < params.size(); ++i) params[i].grad().assign(avg[i]);
    }
  }
}

void DistributedDataParallel::Reducer::average() const { average_gradients(buckets); }

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 const DistributedDataParallelOptions& options)
    : module_(std::move(module)), reducer_(std::make_shared<Reducer>()) {
  if (!distributed::is_initialized())
    fail(ErrorKind::Value,
         "Default process group has not been initialized, please make sure to call "
         "init_process_group.");
  if (!module_) fail(ErrorKind::Type, "DistributedDataParallel: the module is null");
  if (!(options.bucket_cap_mb > 0))
    fail(ErrorKind::Value, "DistributedDataParallel: bucket_cap_mb must be positive, got ",
         options.bucket_cap_mb);
  register_module("module", module_);
  unary_ = std::dynamic_pointer_cast<UnaryModule>(module_);
  std::vector<Tensor> state = module_->parameters(), trainable;
  for (const Tensor& p : state)
    if (p.requires_grad()) trainable.push_back(p);
  for (const Tensor& b : module_->buffers()) state.push_back(b);
  {
    NoGradGuard no_grad;
    for (Tensor& t : state) distributed::broadcast(t, 0);  // the handles share the module's
  }
  sync(state);  // on lazy: rank 0's values now, not a broadcast inside the first step's graph
  reducer_->buckets = make_buckets(trainable, options.bucket_cap_mb);
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  if (!unary_)
    fail(ErrorKind::Type,
         "DistributedDataParallel.forward: the wrapped module is not a UnaryModule (one tensor "
         "in, one out); call it through ddp.call([&](nn::Module& m) { ... })");
  prepare_for_backward();
  return unary_->forward(x);
}

std::vector<std::vector<Tensor>> DistributedDataParallel::buckets() const {
  return reducer_->buckets;
}

void DistributedDataParallel::prepare_for_backward() {
  if (!sync_ || !grad_enabled() || reducer_->buckets.empty() || reducer_->queued) return;
  // Clears the mark when the callback has run or was dropped (a backward that failed).
  struct Mark {
    std::weak_ptr<Reducer> reducer;
    ~Mark() {
      if (auto r = reducer.lock()) r->queued = false;
    }
  };
  auto mark = std::make_shared<Mark>();
  mark->reducer = reducer_;
  reducer_->queued = true;
  queue_callback([reducer = std::weak_ptr<Reducer>(reducer_), mark] {
    if (auto r = reducer.lock()) r->average();
  });
}

}  // namespace lt::nn
