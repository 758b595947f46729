// lt::optim: SGD (momentum, nesterov, weight decay), Adam, AdamW. Updates run under no_grad and
// re-point each parameter at its new value; hyperparameters enter the trace as runtime scalars, so
// changing the learning rate never recompiles. On a lazy device step() ends the training step
// (it calls mark_step), so forward, backward and update compile into one graph.
#pragma once
#include <vector>

#include "runtime/tensor.h"

namespace lt::optim {

// Adam's hyperparameters for one update (PyTorch's names).
struct AdamConfig {
  double lr = 1e-3, beta1 = 0.9, beta2 = 0.999, eps = 1e-8, weight_decay = 0;
  bool decoupled = false;  // AdamW: p *= 1 - lr * weight_decay before the step
};

// One parameter's Adam/AdamW step as torch.optim.Adam computes it (single-tensor form): the step
// count advances on the device, the moments update in place (the first by lerp), and the bias
// corrections come from the device step count (a 0-d float64 tensor), so a step that lt.compile
// replays without running this code still advances them. `max_exp_avg_sq` non-null: AMSGrad.
// Shared by lt::optim::Adam and lazytensor.optim.Adam (one rule for both languages). Call under
// no_grad.
void adam_update(Tensor& p, Tensor grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 Tensor* max_exp_avg_sq, Tensor& step, const AdamConfig& c);

// adam_update for each parameter i of a group, in order (max_exp_avg_sqs empty: no AMSGrad). On a
// lazy device, where every Python number of an update becomes a runtime-scalar input of the
// step's graph, the group's updates share one scalar leaf per hyperparameter and dtype instead of
// making their own (GPT-2's 148 parameters: ~1,500 fewer graph inputs to collect, bind and free
// each step); the values and ops are the same. One call per group is also one crossing from
// Python instead of one per parameter.
void adam_update_many(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      std::vector<Tensor>& exp_avgs, std::vector<Tensor>& exp_avg_sqs,
                      std::vector<Tensor>& max_exp_avg_sqs, std::vector<Tensor>& steps,
                      const AdamConfig& c);

class Optimizer {
 public:
  explicit Optimizer(std::vector<Tensor> params, double lr);
  virtual ~Optimizer() = default;
  void step();
  void zero_grad(bool set_to_none = true);
  double lr() const { return lr_; }
  void set_lr(double lr) { lr_ = lr; }

 protected:
  virtual void update(size_t i, Tensor& p, const Tensor& g) = 0;
  std::vector<Tensor> params_;
  double lr_;
  int64_t steps_ = 0;
};

class SGD : public Optimizer {
 public:
  SGD(std::vector<Tensor> params, double lr, double momentum = 0, double weight_decay = 0,
      bool nesterov = false);

 private:
  void update(size_t i, Tensor& p, const Tensor& g) override;
  double momentum_, weight_decay_;
  bool nesterov_;
  std::vector<Tensor> buf_;
};

class Adam : public Optimizer {
 public:
  Adam(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
       double eps = 1e-8, double weight_decay = 0, bool decoupled = false);

 private:
  void update(size_t i, Tensor& p, const Tensor& g) override;
  AdamConfig config_;
  std::vector<Tensor> m_, v_, step_;  // step_: per parameter, a 0-d float64 count on its device
};

class AdamW : public Adam {
 public:
  AdamW(std::vector<Tensor> params, double lr = 1e-3, double beta1 = 0.9, double beta2 = 0.999,
        double eps = 1e-8, double weight_decay = 1e-2)
      : Adam(std::move(params), lr, beta1, beta2, eps, weight_decay, true) {}
};

}  // namespace lt::optim
