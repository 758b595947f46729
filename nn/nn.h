// lt::nn for C++ training loops: PyTorch's layers with its constructor defaults, initializations
// and train/eval behaviour, and the functional forms they are built on. Parameters are created
// materialized, so a training step's graph is the same from the first step on. Modules and
// containers: nn/nn_module.h; MultiheadAttention: nn/nn_attention.h.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "nn/nn_module.h"
#include "runtime/ops.h"

namespace lt::nn {

// ---- functional -------------------------------------------------------------------------------

// x @ weight^T + bias (bias may be undefined).
Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias = Tensor());
// Zeroes each element with probability p and scales the rest by 1/(1-p) when training; identity
// otherwise. The mask comes from lt's generator (same seed, same mask on every device).
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
// Normalizes over every dim but 1. Training: batch statistics, and running_mean/running_var (when
// defined) are updated in place with momentum, the variance unbiased, as PyTorch does. Eval: the
// running statistics.
Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  bool training = false, double momentum = 0.1, double eps = 1e-5);

struct CrossEntropyOptions {
  std::string reduction = "mean";  // "mean" | "sum" | "none"
  int64_t ignore_index = -100;     // class-index targets equal to it add nothing
  double label_smoothing = 0.0;
  Tensor weight;  // per-class rescaling [C] (undefined: none)
};
// PyTorch's cross_entropy: scores [N, C], [C] or [N, C, d1, ...]; target class indices (integer,
// the scores' shape without C) or class probabilities (float, the scores' shape).
Tensor cross_entropy(const Tensor& input, const Tensor& target,
                     const CrossEntropyOptions& opt = {});
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");

// ---- layers -----------------------------------------------------------------------------------

class Linear : public UnaryModule {
 public:
  Linear(int64_t in, int64_t out, bool bias = true, const Device& device = kCPU);
  Tensor forward(const Tensor& x) override;
  Tensor& weight() { return *w_; }
  Tensor& bias() { return *b_; }
  bool has_bias() const { return b_ != nullptr; }

 private:
  Tensor* w_ = nullptr;
  Tensor* b_ = nullptr;
};

// 2-D convolution (runtime/windows.h), PyTorch's default initialization.
class Conv2d : public UnaryModule {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, bool bias = true, const Device& device = kCPU);
  Tensor forward(const Tensor& x) override;
  Tensor& weight() { return *w_; }

 private:
  Tensor* w_ = nullptr;
  Tensor* b_ = nullptr;
  int64_t stride_, padding_;
};

// Lookup table [num_embeddings, embedding_dim] ~ N(0, 1). padding_idx (negative counts from the
// end): that row starts at zero and receives no gradient.
class Embedding : public UnaryModule {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt, const Device& device = kCPU);
  Tensor forward(const Tensor& indices) override;
  Tensor& weight() { return *w_; }

 private:
  Tensor* w_ = nullptr;
  std::optional<int64_t> padding_idx_;
};

// Normalizes the trailing normalized_shape dims; weight ones, bias zeros.
class LayerNorm : public UnaryModule {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5,
                     bool elementwise_affine = true, bool bias = true, const Device& device = kCPU);
  Tensor forward(const Tensor& x) override;
  Tensor& weight() { return *w_; }
  Tensor& bias() { return *b_; }

 private:
  std::vector<int64_t> shape_;
  double eps_;
  Tensor* w_ = nullptr;
  Tensor* b_ = nullptr;
};

// Input [N, C, H, W]. Buffers running_mean (zeros), running_var (ones), num_batches_tracked
// (int64); training normalizes with the batch statistics and updates the buffers, eval uses them.
class BatchNorm2d : public UnaryModule {
 public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5, double momentum = 0.1,
                       bool affine = true, bool track_running_stats = true,
                       const Device& device = kCPU);
  Tensor forward(const Tensor& x) override;
  Tensor& weight() { return *w_; }
  Tensor& bias() { return *b_; }
  Tensor& running_mean() { return *mean_; }
  Tensor& running_var() { return *var_; }
  Tensor& num_batches_tracked() { return *count_; }

 private:
  int64_t c_;
  double eps_, momentum_;
  Tensor* w_ = nullptr;
  Tensor* b_ = nullptr;
  Tensor* mean_ = nullptr;
  Tensor* var_ = nullptr;
  Tensor* count_ = nullptr;
};

class Dropout : public UnaryModule {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) override { return dropout(x, p_, is_training()); }

 private:
  double p_;
};

class MaxPool2d : public UnaryModule {
 public:
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0)
      : k_(kernel_size), s_(stride ? stride : kernel_size) {}
  Tensor forward(const Tensor& x) override;

 private:
  int64_t k_, s_;
};

// stride 0 means kernel_size (PyTorch's None).
class AvgPool2d : public UnaryModule {
 public:
  explicit AvgPool2d(int64_t kernel_size, int64_t stride = 0, int64_t padding = 0,
                     bool ceil_mode = false, bool count_include_pad = true,
                     std::optional<int64_t> divisor_override = std::nullopt)
      : k_(kernel_size),
        s_(stride ? stride : kernel_size),
        p_(padding),
        ceil_(ceil_mode),
        include_pad_(count_include_pad),
        divisor_(divisor_override) {}
  Tensor forward(const Tensor& x) override;

 private:
  int64_t k_, s_, p_;
  bool ceil_, include_pad_;
  std::optional<int64_t> divisor_;
};

// Flattens dims start_dim..end_dim (default: every dim from 1 on, [N, ...] -> [N, -1]).
class Flatten : public UnaryModule {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_(start_dim), end_(end_dim) {}
  Tensor forward(const Tensor& x) override { return x.flatten(start_, end_); }

 private:
  int64_t start_, end_;
};

class ReLU : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override { return x.relu(); }
};
class Tanh : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override { return x.tanh(); }
};
class Sigmoid : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override { return x.sigmoid(); }
};
class SiLU : public UnaryModule {
 public:
  Tensor forward(const Tensor& x) override { return silu(x); }
};
class GELU : public UnaryModule {
 public:
  explicit GELU(std::string approximate = "none") : approximate_(std::move(approximate)) {}
  Tensor forward(const Tensor& x) override { return gelu(x, approximate_); }

 private:
  std::string approximate_;
};
// The dim is required (PyTorch's implicit choice of dim is deprecated).
class Softmax : public UnaryModule {
 public:
  explicit Softmax(int64_t dim) : dim_(dim) {}
  Tensor forward(const Tensor& x) override { return softmax(x, dim_); }

 private:
  int64_t dim_;
};

// ---- losses: forward(input, target) -----------------------------------------------------------

class Loss : public Module {
 public:
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
};

// A class weight is registered as the buffer "weight" (PyTorch's _WeightedLoss), so to() moves it.
class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(CrossEntropyOptions opt = {});
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  CrossEntropyOptions opt_;
  Tensor* weight_ = nullptr;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(std::string reduction = "mean");
  Tensor forward(const Tensor& input, const Tensor& target) override {
    return mse_loss(input, target, reduction_);
  }

 private:
  std::string reduction_;
};

}  // namespace lt::nn
