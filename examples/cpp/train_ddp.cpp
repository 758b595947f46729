// train_mlp.cpp's MLP and task, data-parallel over processes: every rank draws the same global
// batch each step and trains on its shard of it with lt::nn::DistributedDataParallel, which starts
// every rank from rank 0's weights and averages the gradients over the ranks after each backward
// (on a lazy device inside the step's one compiled graph, with the forward, the backward and the
// AdamW update). Launch it under torchrun (or any launcher that sets RANK, WORLD_SIZE, MASTER_ADDR
// and MASTER_PORT):
//
//   torchrun --nproc-per-node 2 --no-python build/bin/train_ddp [--device lazy|cpu] [--steps 200]
//   torchrun --nproc-per-node 2 --no-python build/bin/train_ddp --device "lazy:cuda:{local_rank}"
//
// In --device, "{local_rank}" stands for the rank's LOCAL_RANK: each rank of a GPU host on its own
// GPU (the group is then NCCL's: lt::distributed picks it where a GPU is visible).
//
// Rank 0 prints the loss averaged over the ranks, the held-out accuracy and whether every rank
// ended with the same weights; each rank exits 1 unless the accuracy reaches 90% and the weights
// agree.
#include <lazytensor/lazytensor.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "teacher_task.h"

namespace {

using teacher_task::accuracy, teacher_task::Data, teacher_task::kClasses, teacher_task::kDim,
    teacher_task::make_data, teacher_task::make_teacher;
constexpr int kBatch = 120, kTest = 1024;  // 120: whole shards for 2 to 6 ranks

// Whether every rank holds the same values of `t` as rank 0 (all ranks must call it).
bool same_on_every_rank(const lt::Tensor& t, int world) {
  std::vector<lt::Tensor> all;
  for (int r = 0; r < world; ++r) all.push_back(lt::zeros(t.shape(), t.dtype(), t.device()));
  lt::distributed::all_gather(all, t);
  const std::vector<float> first = all[0].to_vector<float>();
  for (int r = 1; r < world; ++r)
    if (all[r].to_vector<float>() != first) return false;
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  teacher_task::Options options;
  if (!teacher_task::parse_options(argc, argv,
                                   "torchrun --nproc-per-node N --no-python train_ddp [--device "
                                   "lazy|cpu|lazy:cuda:{local_rank}] "
                                   "[--steps N]",
                                   options))
    return 2;
  std::string device = options.device;
  if (const size_t at = device.find("{local_rank}"); at != std::string::npos) {
    const char* local = std::getenv("LOCAL_RANK");
    device.replace(at, std::strlen("{local_rank}"), local && *local ? local : "0");
  }
  const int steps = options.steps;
  try {
    const lt::Device dev = lt::Device::parse(device);
    lt::distributed::init_process_group();
    const int rank = lt::distributed::get_rank(), world = lt::distributed::get_world_size();
    if (kBatch % world != 0) {
      std::fprintf(stderr, "train_ddp: a batch of %d rows does not split over %d ranks\n", kBatch,
                   world);
      return 2;
    }
    std::mt19937 rng(1234);  // the same on every rank: the same teacher and global batches
    const std::vector<float> teacher = make_teacher(rng);
    Data test = make_data(kTest, rng, teacher);

    lt::manual_seed(static_cast<uint64_t>(rank));  // own initial weights: DDP replaces them
    auto mlp = std::make_shared<lt::nn::Sequential>();
    mlp->add(std::make_shared<lt::nn::Linear>(kDim, 64, true, dev))
        .add(std::make_shared<lt::nn::ReLU>())
        .add(std::make_shared<lt::nn::Linear>(64, 64, true, dev))
        .add(std::make_shared<lt::nn::ReLU>())
        .add(std::make_shared<lt::nn::Linear>(64, kClasses, true, dev));
    lt::nn::DistributedDataParallel model(mlp);
    lt::optim::AdamW opt(model.parameters(), 1e-2);

    const int rows = kBatch / world, first_row = rank * rows;
    lt::metrics::reset();
    for (int step = 1; step <= steps; ++step) {
      Data b = make_data(kBatch, rng, teacher);
      lt::Tensor x =
          lt::from_host(b.x.data() + first_row * kDim, lt::DType::Float32, {rows, kDim}, dev);
      lt::Tensor y = lt::from_host(b.y.data() + first_row, lt::DType::Int64, {rows}, dev);
      lt::Tensor loss = lt::nn::cross_entropy(model(x), y);
      loss.backward();  // the gradients are averaged over the ranks here
      opt.step();       // on lazy: ends the step; forward, backward, averaging and AdamW: one graph
      opt.zero_grad();
      if (step == 1 || step % 20 == 0) {
        // Every rank syncs the same graphs: the average is read on each, not only where printed.
        lt::Tensor mean = loss.detach();
        lt::distributed::all_reduce(mean, lt::ReduceOp::Avg);
        const double value = mean.item();
        if (rank == 0) std::printf("step %4d  loss %.4f\n", step, value);
      }
    }

    const double acc = accuracy(model, test, dev);
    bool equal = true;
    for (const lt::Tensor& p : model.parameters()) equal = same_on_every_rank(p, world) && equal;
    if (rank == 0) {
      auto c = lt::metrics::counters();
      std::printf("%d ranks on %s: %d steps, held-out accuracy %.1f%% (target 90%%)\n", world,
                  dev.str().c_str(), steps, 100 * acc);
      std::printf("weights equal on every rank: %s\n", equal ? "true" : "false");
      std::printf("graph_compiles=%lld graph_cache_hits=%lld\n",
                  static_cast<long long>(c["graph_compiles"]),
                  static_cast<long long>(c["graph_cache_hits"]));
    }
    lt::distributed::destroy_process_group();
    return acc >= 0.9 && equal ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_ddp: %s\n", e.what());
    return 2;
  }
}
