#include "nn/optim.h"

#include <cmath>

#include "autograd/autograd.h"
#include "ir/error.h"
#include "runtime/ops.h"
#include "runtime/sync.h"

namespace lt::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  if (!(lr >= 0)) fail(ErrorKind::Value, "Invalid learning rate: ", lr);
  for (auto& p : params_)
    if (!p.defined() || !p.is_leaf())
      fail(ErrorKind::Value, "optimizer can only optimize defined leaf tensors");
}

namespace {
// Optimizer state starts as materialized zeros, so step 1 traces the same graph as step 100.
std::vector<Tensor> zero_state(const std::vector<Tensor>& params) {
  std::vector<Tensor> r;
  NoGradGuard ng;
  for (auto& p : params) r.push_back(zeros_like(p));
  sync(r, SyncReason::Sync);
  return r;
}
}  // namespace

void Optimizer::step() {
  ++steps_;
  {
    NoGradGuard ng;
    for (size_t i = 0; i < params_.size(); ++i) {
      Tensor g = params_[i].grad();
      if (g.defined()) update(i, params_[i], g);
    }
  }
  bool lazy = false;
  for (auto& p : params_) lazy |= p.device().is_lazy();
  if (lazy) mark_step();
}

void Optimizer::zero_grad(bool set_to_none) {
  for (auto& p : params_) {
    if (set_to_none || !p.grad().defined())
      p.set_grad(Tensor());
    else
      p.set_grad(zeros_like(p.grad()));
  }
}

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(std::move(params), lr),
      momentum_(momentum),
      weight_decay_(weight_decay),
      nesterov_(nesterov) {
  if (nesterov && momentum <= 0) fail(ErrorKind::Value, "Nesterov momentum requires a momentum");
  if (momentum != 0) buf_ = zero_state(params_);
}

void SGD::update(size_t i, Tensor& p, const Tensor& grad) {
  Tensor g = weight_decay_ != 0 ? grad + p * weight_decay_ : grad;
  if (momentum_ != 0) {
    buf_[i] = buf_[i] * momentum_ + g;  // zero-initialized: step 1 gives buf = g, as in PyTorch
    g = nesterov_ ? g + buf_[i] * momentum_ : buf_[i];
  }
  p.assign(p - g * lr_);
}

void adam_update(Tensor& p, Tensor grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 Tensor* max_exp_avg_sq, Tensor& step, const AdamConfig& c) {
  step.assign(step + 1.0);
  if (c.weight_decay != 0) {
    if (c.decoupled)
      p.assign(p * (1.0 - c.lr * c.weight_decay));
    else
      grad = grad + p * c.weight_decay;
  }
  exp_avg.assign(exp_avg + (grad - exp_avg) * (1.0 - c.beta1));  // lerp, as torch.optim.Adam
  exp_avg_sq.assign(exp_avg_sq * c.beta2 + grad * grad * (1.0 - c.beta2));
  // From the device step count, in float64 (0-d, so the update keeps the parameter's dtype).
  const Tensor bc1 = 1.0 - rpow(step, c.beta1);
  const Tensor bc2_sqrt = (1.0 - rpow(step, c.beta2)).sqrt();
  Tensor v = exp_avg_sq;
  if (max_exp_avg_sq) {
    max_exp_avg_sq->assign(maximum(*max_exp_avg_sq, exp_avg_sq));
    v = *max_exp_avg_sq;
  }
  const Tensor denom = v.sqrt() * (1.0 / bc2_sqrt) + c.eps;
  p.assign(p - exp_avg / denom * (c.lr / bc1));
}

Adam::Adam(std::vector<Tensor> params, double lr, double b1, double b2, double eps, double wd,
           bool decoupled)
    : Optimizer(std::move(params), lr), config_{lr, b1, b2, eps, wd, decoupled} {
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1))
    fail(ErrorKind::Value, "Invalid beta parameters: ", b1, ", ", b2);
  m_ = zero_state(params_);
  v_ = zero_state(params_);
  NoGradGuard ng;
  for (const Tensor& p : params_) step_.push_back(scalar_tensor(0.0, DType::Float64, p.device()));
  sync(step_, SyncReason::Sync);  // data from the start, as the moments are
}

void Adam::update(size_t i, Tensor& p, const Tensor& grad) {
  AdamConfig c = config_;
  c.lr = lr_;  // set_lr may have changed it
  adam_update(p, grad, m_[i], v_[i], nullptr, step_[i], c);
}

}  // namespace lt::optim
