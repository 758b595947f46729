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

// One all_reduce(avg) over the gradients of `params` (one dtype), flattened into one tensor; each
// parameter's gradient becomes its slice of the result. A new tensor is reduced, never a gradient
// in place: one gradient tensor may be several parameters' (add's rule hands the same gradient to
// both operands), and an in-place reduction would reach them all.
void average_flat(std::vector<Tensor>& params) {
  std::vector<Tensor> flats;
  flats.reserve(params.size());
  for (const Tensor& p : params) flats.push_back(reshape(p.grad(), {-1}));
  Tensor flat = flats.size() > 1 ? cat(flats, 0) : flats[0] * 1;
  distributed::all_reduce(flat, ReduceOp::Avg);
  int64_t offset = 0;
  for (Tensor& p : params) {
    const int64_t n = p.numel();
    p.set_grad(reshape_to(narrow(flat, 0, offset, n), p.shape()));
    offset += n;
  }
}

// One all_reduce(avg) per gradient (distributed::ddp_reduce_per_tensor). Every result is made
// before any is set: one gradient tensor may be several parameters' (see average_flat).
void average_each(std::vector<Tensor>& params) {
  const int world = distributed::get_world_size();
  std::vector<Tensor> averaged;
  averaged.reserve(params.size());
  for (const Tensor& p : params) averaged.push_back(all_reduce(p.grad(), ReduceOp::Avg, world));
  for (size_t i = 0; i < params.size(); ++i) params[i].set_grad(averaged[i]);
}

}  // namespace

// Every rank averages the same buckets in the same order: the parameters with a gradient, by
// dtype in order of first appearance (a parameter unused on one rank only is a mismatch, which
// the collectives' check between ranks reports).
void DistributedDataParallel::Reducer::average() const {
  NoGradGuard no_grad;
  const bool each = distributed::ddp_reduce_per_tensor();
  for (const auto& bucket : buckets) {
    std::vector<std::pair<DType, std::vector<Tensor>>> by_dtype;
    for (const Tensor& p : bucket) {
      if (!p.grad().defined()) continue;
      auto it = std::find_if(by_dtype.begin(), by_dtype.end(),
                             [&](const auto& g) { return g.first == p.dtype(); });
      if (it == by_dtype.end()) it = by_dtype.insert(by_dtype.end(), {p.dtype(), {}});
      it->second.push_back(p);
    }
    for (auto& [dtype, params] : by_dtype) each ? average_each(params) : average_flat(params);
  }
}

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
