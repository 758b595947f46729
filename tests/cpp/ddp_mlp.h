// The model and data of the DistributedDataParallel tests: the ranks (dist_worker_ddp.cc) train it
// with lt::nn::DistributedDataParallel on their shards of each step's batch, and
// distributed_test.cc trains it in one process on the whole batch as the reference. Everything
// comes from seeds, so both sides draw the same batches and rank 0's initial weights.
#pragma once
#include <cstdint>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include <lazytensor/lazytensor.h>

namespace lt_ddp_test {

using lt::Tensor;

// 12 rows: whole shards for 2 and 3 ranks.
constexpr int64_t kIn = 6, kHidden = 16, kOut = 3, kBatch = 12;
constexpr double kLr = 0.1;

// A small MLP with what DDP must handle besides float32 weights: a float64 parameter (its own
// dtype group in a bucket) and a buffer (broadcast from rank 0, never averaged).
class Mlp : public lt::nn::UnaryModule {
 public:
  // Initial weights and buffer from `seed` (lt's generator for the layers, std::mt19937 for the
  // rest): each rank passes its own, and DDP must replace them with rank 0's.
  Mlp(uint32_t seed, const lt::Device& dev) {
    lt::manual_seed(seed);
    fc1_ = register_module("fc1", std::make_shared<lt::nn::Linear>(kIn, kHidden, true, dev));
    fc2_ = register_module("fc2", std::make_shared<lt::nn::Linear>(kHidden, kOut, true, dev));
    std::mt19937 gen(seed);
    std::uniform_real_distribution<double> u(0.5, 1.5);
    std::vector<double> scale(kOut);
    for (auto& v : scale) v = u(gen);
    std::vector<float> shift(kIn);
    for (auto& v : shift) v = static_cast<float>(u(gen) - 1.0);
    scale_ =
        &register_parameter("scale", lt::from_host(scale.data(), lt::DType::Float64, {kOut}, dev));
    shift_ = &register_buffer("shift", lt::from_host(shift.data(), lt::DType::Float32, {kIn}, dev));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = fc1_->forward(x - *shift_).relu();
    return fc2_->forward(h).to(lt::DType::Float64) * *scale_;
  }

 private:
  std::shared_ptr<lt::nn::Linear> fc1_, fc2_;
  Tensor* scale_ = nullptr;
  Tensor* shift_ = nullptr;
};

// Rows [lo, hi) of step `step`'s batch (inputs float32, targets float64).
inline std::pair<Tensor, Tensor> batch(uint32_t seed, int step, int64_t lo, int64_t hi,
                                       const lt::Device& dev) {
  std::mt19937 gen(seed * 7919u + static_cast<uint32_t>(step));
  std::normal_distribution<float> nd;
  std::vector<float> x(kBatch * kIn);
  std::vector<double> y(kBatch * kOut);
  for (auto& v : x) v = nd(gen);
  for (auto& v : y) v = nd(gen);
  return {lt::from_host(x.data() + lo * kIn, lt::DType::Float32, {hi - lo, kIn}, dev),
          lt::from_host(y.data() + lo * kOut, lt::DType::Float64, {hi - lo, kOut}, dev)};
}

// The seed of rank `rank`'s initial weights in a run drawn from `seed`.
inline uint32_t init_seed(uint32_t seed, int rank) {
  return seed + 1u + 101u * static_cast<uint32_t>(rank);
}

// Rank `rank`'s rows of a batch split over `world` ranks.
inline std::pair<int64_t, int64_t> shard(int rank, int world) {
  return {kBatch * rank / world, kBatch * (rank + 1) / world};
}

// Mean squared error of `model` on rows [lo, hi) of step `step`'s batch, backward included: the
// mean over a shard, so the average of the ranks' gradients is the whole batch's gradient.
inline Tensor loss_backward(lt::nn::UnaryModule& model, uint32_t data_seed, int step, int64_t lo,
                            int64_t hi, const lt::Device& dev) {
  auto [x, y] = batch(data_seed, step, lo, hi, dev);
  Tensor loss = lt::nn::mse_loss(model(x), y);
  loss.backward();
  return loss;
}

// `steps` SGD steps on rows [lo, hi) of each step's batch.
inline void train(lt::nn::UnaryModule& model, uint32_t data_seed, int steps, int64_t lo, int64_t hi,
                  const lt::Device& dev) {
  lt::optim::SGD opt(model.parameters(), kLr);
  for (int step = 0; step < steps; ++step) {
    loss_backward(model, data_seed, step, lo, hi, dev);
    opt.step();  // on lazy: ends the step (forward, backward, averaging and update: one graph)
    opt.zero_grad();
  }
}

// "<tag> <name> v0 v1 ...": each value as a hexadecimal float (exact), one line per tensor.
inline void print_tensors(const char* tag, const lt::nn::NamedTensors& named) {
  for (const auto& [name, t] : named) {
    std::string line = std::string(tag) + " " + name;
    char buf[64];
    for (double v : t.to_vector<double>()) {
      std::snprintf(buf, sizeof buf, " %a", v);
      line += buf;
    }
    std::fprintf(stderr, "%s\n", line.c_str());
  }
}

inline lt::nn::NamedTensors grads_of(const lt::nn::Module& m) {
  lt::nn::NamedTensors g;
  for (const auto& [name, p] : m.named_parameters()) g.emplace_back(name, p.grad());
  return g;
}

}  // namespace lt_ddp_test
