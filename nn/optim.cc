#include "nn/optim.h"

#include <cmath>
#include <tuple>

#include "autograd/autograd.h"
#include "ir/error.h"
#include "runtime/ops.h"
#include "runtime/sync.h"
#include "runtime/tensor_impl.h"

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

namespace {

// The Python numbers of an Adam update, by role. Each enters the trace as a runtime scalar of the
// dtype of the tensor it meets.
enum Role { kOne, kDecay, kOneMinusB1, kB2, kOneMinusB2, kB1, kEps, kLr, kRoles };

// Per-parameter numbers: plain Scalars, one scalar leaf per use (adam_update).
struct OwnNumbers {
  Scalar operator()(Role, double v, const Tensor&) const { return Scalar(v); }
};

// Numbers shared by a group's updates (adam_update_many on a lazy device): one 0-d tensor per
// role and dtype, holding the same Scalar leaf that the Scalar operand would have made. The ops
// below then trace exactly the nodes of the per-parameter form, with the leaves shared.
class SharedNumbers {
 public:
  explicit SharedNumbers(const Device& d) : device_(d) {}
  const Tensor& operator()(Role r, double v, const Tensor& meets) {
    const DType t = promote_with_scalar(meets.dtype(), ScalarKind::Float);
    for (auto& [role, dtype, tensor] : made_)
      if (role == r && dtype == t) return tensor;
    made_.push_back({r, t, Tensor(make_tensor(make_scalar(t, v), device_))});
    return std::get<2>(made_.back());
  }

 private:
  Device device_;
  std::vector<std::tuple<Role, DType, Tensor>> made_;
};

Tensor pow_of(Scalar base, const Tensor& e) { return rpow(e, base); }
Tensor pow_of(const Tensor& base, const Tensor& e) { return pow(base, e); }

template <typename Numbers>
void adam_rule(Tensor& p, Tensor grad, Tensor& exp_avg, Tensor& exp_avg_sq, Tensor* max_exp_avg_sq,
               Tensor& step, const AdamConfig& c, Numbers& num) {
  step.assign(step + num(kOne, 1.0, step));
  if (c.weight_decay != 0) {
    if (c.decoupled)
      p.assign(p * num(kDecay, 1.0 - c.lr * c.weight_decay, p));
    else
      grad = grad + p * num(kDecay, c.weight_decay, p);
  }
  Tensor diff = grad - exp_avg;
  exp_avg.assign(exp_avg + diff * num(kOneMinusB1, 1.0 - c.beta1, diff));  // lerp, as torch
  Tensor sq = grad * grad;
  exp_avg_sq.assign(exp_avg_sq * num(kB2, c.beta2, exp_avg_sq) +
                    sq * num(kOneMinusB2, 1.0 - c.beta2, sq));
  // From the device step count, in float64 (0-d, so the update keeps the parameter's dtype).
  const Tensor bc1 = num(kOne, 1.0, step) - pow_of(num(kB1, c.beta1, step), step);
  const Tensor bc2_sqrt = (num(kOne, 1.0, step) - pow_of(num(kB2, c.beta2, step), step)).sqrt();
  Tensor v = exp_avg_sq;
  if (max_exp_avg_sq) {
    max_exp_avg_sq->assign(maximum(*max_exp_avg_sq, exp_avg_sq));
    v = *max_exp_avg_sq;
  }
  Tensor root = v.sqrt();
  const Tensor denom = root * (num(kOne, 1.0, bc2_sqrt) / bc2_sqrt) + num(kEps, c.eps, root);
  p.assign(p - exp_avg / denom * (num(kLr, c.lr, bc1) / bc1));
}

}  // namespace

void adam_update(Tensor& p, Tensor grad, Tensor& exp_avg, Tensor& exp_avg_sq,
                 Tensor* max_exp_avg_sq, Tensor& step, const AdamConfig& c) {
  OwnNumbers num;
  adam_rule(p, std::move(grad), exp_avg, exp_avg_sq, max_exp_avg_sq, step, c, num);
}

void adam_update_many(std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      std::vector<Tensor>& exp_avgs, std::vector<Tensor>& exp_avg_sqs,
                      std::vector<Tensor>& max_exp_avg_sqs, std::vector<Tensor>& steps,
                      const AdamConfig& c) {
  const size_t n = params.size();
  if (grads.size() != n || exp_avgs.size() != n || exp_avg_sqs.size() != n || steps.size() != n ||
      (!max_exp_avg_sqs.empty() && max_exp_avg_sqs.size() != n))
    fail(ErrorKind::Value, "adam_update_many: ", n, " parameters but ", grads.size(),
         " gradients, ", exp_avgs.size(), "/", exp_avg_sqs.size(), "/", max_exp_avg_sqs.size(),
         " moments and ", steps.size(), " step counts");
  // Shared numbers where every tensor of the group is on one lazy device (the graph's inputs);
  // otherwise (eager devices run each op at once) the per-parameter form.
  bool share = n > 0;
  for (size_t i = 0; i < n && share; ++i) {
    const Device& d = params[0].device();
    share = d.is_lazy() && params[i].device() == d && grads[i].device() == d &&
            exp_avgs[i].device() == d && exp_avg_sqs[i].device() == d && steps[i].device() == d;
  }
  if (!share) {
    OwnNumbers num;
    for (size_t i = 0; i < n; ++i)
      adam_rule(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
                max_exp_avg_sqs.empty() ? nullptr : &max_exp_avg_sqs[i], steps[i], c, num);
    return;
  }
  SharedNumbers num(params[0].device());
  for (size_t i = 0; i < n; ++i)
    adam_rule(params[i], grads[i], exp_avgs[i], exp_avg_sqs[i],
              max_exp_avg_sqs.empty() ? nullptr : &max_exp_avg_sqs[i], steps[i], c, num);
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
