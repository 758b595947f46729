#include "runtime/optim.h"

#include <cmath>

#include "ir/error.h"
#include "runtime/autograd.h"
#include "runtime/ops.h"
#include "runtime/sync.h"

namespace lt::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  if (!(lr >= 0)) fail(ErrorKind::Value, "Invalid learning rate: ", lr);
  for (auto& p : params_)
    if (!p.defined() || !p.is_leaf()) fail(ErrorKind::Value, "optimizer can only optimize defined leaf tensors");
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
    if (set_to_none || !p.grad().defined()) p.set_grad(Tensor());
    else p.set_grad(zeros_like(p.grad()));
  }
}

SGD::SGD(std::vector<Tensor> params, double lr, double momentum, double weight_decay, bool nesterov)
    : Optimizer(std::move(params), lr), momentum_(momentum), weight_decay_(weight_decay), nesterov_(nesterov) {
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

Adam::Adam(std::vector<Tensor> params, double lr, double b1, double b2, double eps, double wd, bool decoupled)
    : Optimizer(std::move(params), lr), b1_(b1), b2_(b2), eps_(eps), wd_(wd), decoupled_(decoupled) {
  if (!(b1 >= 0 && b1 < 1) || !(b2 >= 0 && b2 < 1)) fail(ErrorKind::Value, "Invalid beta parameters: ", b1, ", ", b2);
  m_ = zero_state(params_);
  v_ = zero_state(params_);
}

void Adam::update(size_t i, Tensor& p, const Tensor& grad) {
  Tensor g = grad;
  if (wd_ != 0) {
    if (decoupled_) p.assign(p * (1.0 - lr_ * wd_));
    else g = g + p * wd_;
  }
  m_[i] = m_[i] * b1_ + g * (1.0 - b1_);
  v_[i] = v_[i] * b2_ + g * g * (1.0 - b2_);
  // Bias corrections are host scalars: they change every step without changing the graph.
  double bc1 = 1.0 - std::pow(b1_, static_cast<double>(steps_));
  double bc2 = 1.0 - std::pow(b2_, static_cast<double>(steps_));
  Tensor denom = (v_[i] * (1.0 / bc2)).sqrt() + eps_;
  p.assign(p - m_[i] / denom * (lr_ / bc1));
}

}  // namespace lt::optim
