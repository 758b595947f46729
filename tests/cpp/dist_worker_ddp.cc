// dist_worker's DistributedDataParallel scenarios: each rank trains tests/cpp/ddp_mlp.h's model
// from its own initial weights on its shard of each batch, on lazy:cpu, and prints what it ends
// with (hexadecimal floats); distributed_test.cc compares that with one process's training on the
// whole batch.
//
//   ddp_train <seed> <steps> <bucket_cap_mb>   SGD steps; prints BUCKETS, COMPILES, PARAM lines
//   ddp_no_sync <seed>                         a backward under no_sync, then one with sync;
//                                              prints GA (local) and GB (averaged) gradient lines
#include "dist_worker_ddp.h"

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "ddp_mlp.h"

namespace lt_ddp_test {
namespace {

const lt::Device kDev = lt::Device::parse("lazy:cpu");

// The model with the rank's own initial weights, wrapped (which replaces them with rank 0's).
struct Wrapped {
  std::shared_ptr<Mlp> model;
  std::unique_ptr<lt::nn::DistributedDataParallel> ddp;
};
Wrapped wrap(uint32_t seed, double bucket_cap_mb = 25) {
  Wrapped w;
  w.model = std::make_shared<Mlp>(init_seed(seed, lt::distributed::get_rank()), kDev);
  w.ddp = std::make_unique<lt::nn::DistributedDataParallel>(
      w.model, lt::nn::DistributedDataParallelOptions{bucket_cap_mb});
  return w;
}

int ddp_train(uint32_t seed, int steps, double bucket_cap_mb) {
  lt::distributed::init_process_group();
  auto [lo, hi] = shard(lt::distributed::get_rank(), lt::distributed::get_world_size());
  Wrapped w = wrap(seed, bucket_cap_mb);
  std::fprintf(stderr, "BUCKETS %zu\n", w.ddp->buckets().size());
  lt::metrics::reset();  // the training's graphs only
  train(*w.ddp, seed, steps, lo, hi, kDev);
  auto c = lt::metrics::counters();
  std::fprintf(stderr, "COMPILES %lld HITS %lld\n", static_cast<long long>(c["graph_compiles"]),
               static_cast<long long>(c["graph_cache_hits"]));
  print_tensors("PARAM", w.model->state_dict());
  lt::distributed::destroy_process_group();
  return 0;
}

int ddp_no_sync(uint32_t seed) {
  lt::distributed::init_process_group();
  auto [lo, hi] = shard(lt::distributed::get_rank(), lt::distributed::get_world_size());
  Wrapped w = wrap(seed);
  {
    auto guard = w.ddp->no_sync();
    if (w.ddp->require_backward_grad_sync()) {
      std::fprintf(stderr, "no_sync() left sync on\n");
      return 1;
    }
    loss_backward(*w.ddp, seed, 0, lo, hi, kDev);
  }
  if (!w.ddp->require_backward_grad_sync()) {
    std::fprintf(stderr, "sync stayed off after no_sync()\n");
    return 1;
  }
  print_tensors("GA", grads_of(*w.model));
  loss_backward(*w.ddp, seed, 1, lo, hi, kDev);  // averages the sum of both passes' gradients
  print_tensors("GB", grads_of(*w.model));
  lt::distributed::destroy_process_group();
  return 0;
}

}  // namespace

int run_ddp_scenario(const std::string& name, const std::vector<std::string>& args) {
  auto arg = [&](size_t i) { return i < args.size() ? args[i].c_str() : "0"; };
  const auto seed = static_cast<uint32_t>(std::strtoul(arg(0), nullptr, 10));
  if (name == "ddp_train") return ddp_train(seed, std::atoi(arg(1)), std::strtod(arg(2), nullptr));
  if (name == "ddp_no_sync") return ddp_no_sync(seed);
  return -1;
}

}  // namespace lt_ddp_test
