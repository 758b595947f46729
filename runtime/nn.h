// lt::nn for C++ training loops: modules with named parameters, PyTorch's default initializations,
// and the functional losses. Parameters are created materialized, so a training step's graph is
// the same from the first step on.
#pragma once
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/ops.h"

namespace lt::nn {

class Module {
 public:
  virtual ~Module() = default;
  virtual Tensor forward(const Tensor& x) = 0;
  Tensor operator()(const Tensor& x) { return forward(x); }

  std::vector<std::pair<std::string, Tensor>> named_parameters() const;
  std::vector<Tensor> parameters() const;
  void zero_grad();
  void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  // Moves every parameter to `d` (same values); returns this module.
  Module& to(const Device& d);

 protected:
  Tensor& register_parameter(const std::string& name, Tensor t);
  template <typename M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    children_.emplace_back(name, m);
    return m;
  }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<Tensor>>> params_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

class Linear : public Module {
 public:
  Linear(int64_t in, int64_t out, bool bias = true, const Device& device = kCPU);
  Tensor forward(const Tensor& x) override;
  Tensor& weight() { return *w_; }
  Tensor& bias() { return *b_; }

 private:
  Tensor* w_ = nullptr;
  Tensor* b_ = nullptr;
};

// 2-D convolution (runtime/windows.h), PyTorch's default initialization.
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1, int64_t padding = 0,
         bool bias = true, const Device& device = kCPU);
  Tensor forward(const Tensor& x) override;
  Tensor& weight() { return *w_; }

 private:
  Tensor* w_ = nullptr;
  Tensor* b_ = nullptr;
  int64_t stride_, padding_;
};

class MaxPool2d : public Module {
 public:
  explicit MaxPool2d(int64_t kernel_size, int64_t stride = 0) : k_(kernel_size), s_(stride ? stride : kernel_size) {}
  Tensor forward(const Tensor& x) override;

 private:
  int64_t k_, s_;
};

// Flattens every dim from 1 on ([N, ...] -> [N, -1]).
class Flatten : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.flatten(1); }
};

class ReLU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.relu(); }
};
class Tanh : public Module {
 public:
  Tensor forward(const Tensor& x) override { return x.tanh(); }
};
class GELU : public Module {
 public:
  Tensor forward(const Tensor& x) override { return gelu(x); }
};

class Sequential : public Module {
 public:
  Sequential() = default;
  Sequential& add(std::shared_ptr<Module> m);
  Tensor forward(const Tensor& x) override;

 private:
  std::vector<std::shared_ptr<Module>> layers_;
};

// Uniform(-bound, bound) of `shape`, drawn from lt's generator and materialized.
Tensor uniform(Shape shape, double bound, const Device& device);

// Mean cross entropy of logits [N, C] against int64 class indices [N].
Tensor cross_entropy(const Tensor& logits, const Tensor& target);
Tensor mse_loss(const Tensor& input, const Tensor& target);

}  // namespace lt::nn
