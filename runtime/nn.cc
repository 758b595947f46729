#include "runtime/nn.h"

#include <cmath>

#include "ir/error.h"
#include "runtime/autograd.h"
#include "runtime/indexing.h"
#include "runtime/sync.h"
#include "runtime/windows.h"

namespace lt::nn {

std::vector<std::pair<std::string, Tensor>> Module::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> r;
  for (auto& [n, p] : params_) r.emplace_back(n, *p);
  for (auto& [cn, c] : children_)
    for (auto& [n, p] : c->named_parameters()) r.emplace_back(cn + "." + n, p);
  return r;
}

std::vector<Tensor> Module::parameters() const {
  std::vector<Tensor> r;
  for (auto& [n, p] : named_parameters()) r.push_back(p);
  return r;
}

void Module::zero_grad() {
  for (auto& p : parameters()) p.set_grad(Tensor());
}

void Module::train(bool on) {
  training_ = on;
  for (auto& [n, c] : children_) c->train(on);
}

Module& Module::to(const Device& d) {
  for (auto& [n, p] : params_) {
    bool rg = p->requires_grad();
    *p = p->to(d);  // a new leaf on d with the same values
    if (rg) p->requires_grad_();
  }
  for (auto& [n, c] : children_) c->to(d);
  return *this;
}

Tensor& Module::register_parameter(const std::string& name, Tensor t) {
  t.requires_grad_();
  params_.emplace_back(name, std::make_shared<Tensor>(std::move(t)));
  return *params_.back().second;
}

Tensor uniform(Shape shape, double bound, const Device& device) {
  NoGradGuard ng;
  Tensor t = rand(std::move(shape), DType::Float32, device) * (2 * bound) - bound;
  sync({t}, SyncReason::Sync);
  return t.detach();
}

Linear::Linear(int64_t in, int64_t out, bool bias, const Device& device) {
  if (in <= 0 || out <= 0) fail(ErrorKind::Value, "Linear: in_features and out_features must be positive, got ", in, " and ", out);
  // PyTorch's default: kaiming_uniform(a = sqrt(5)) -> bound 1/sqrt(fan_in), for weight and bias.
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  w_ = &register_parameter("weight", uniform({out, in}, bound, device));
  if (bias) b_ = &register_parameter("bias", uniform({out}, bound, device));
}

Tensor Linear::forward(const Tensor& x) {
  if (x.dim() < 1 || x.shape().back() != w_->size(1))
    fail(ErrorKind::Runtime, "Linear: input of shape ", shape_str(x.shape()), " does not end in in_features=",
         w_->size(1));
  Tensor y = matmul(x, w_->transpose(0, 1));
  return b_ ? y + *b_ : y;
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride, int64_t padding,
               bool bias, const Device& device)
    : stride_(stride), padding_(padding) {
  if (in_channels <= 0 || out_channels <= 0 || kernel_size <= 0)
    fail(ErrorKind::Value, "Conv2d: in_channels, out_channels and kernel_size must be positive, got ", in_channels,
         ", ", out_channels, " and ", kernel_size);
  // PyTorch's default: kaiming_uniform(a = sqrt(5)) -> bound 1/sqrt(fan_in), for weight and bias.
  double bound = 1.0 / std::sqrt(static_cast<double>(in_channels * kernel_size * kernel_size));
  w_ = &register_parameter("weight", uniform({out_channels, in_channels, kernel_size, kernel_size}, bound, device));
  if (bias) b_ = &register_parameter("bias", uniform({out_channels}, bound, device));
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, *w_, b_ ? *b_ : Tensor(), {stride_, stride_}, {padding_, padding_});
}

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, {k_, k_}, {s_, s_}); }

Sequential& Sequential::add(std::shared_ptr<Module> m) {
  layers_.push_back(register_module(std::to_string(layers_.size()), std::move(m)));
  return *this;
}

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (auto& l : layers_) h = l->forward(h);
  return h;
}

Tensor cross_entropy(const Tensor& logits, const Tensor& target) {
  if (logits.dim() != 2 || target.dim() != 1 || target.size(0) != logits.size(0))
    fail(ErrorKind::Value, "cross_entropy: expected logits [N, C] and target [N], got ", shape_str(logits.shape()),
         " and ", shape_str(target.shape()));
  if (is_floating(target.dtype())) fail(ErrorKind::Type, "cross_entropy: target must hold class indices (int64), got ", dtype_name(target.dtype()));
  // The target's log-probability is gathered (an indexed load inside the loss kernel).
  Tensor picked = gather(log_softmax(logits, 1), 1, cast(target, DType::Int64).reshape({-1, 1}));
  return -picked.mean();
}

Tensor mse_loss(const Tensor& input, const Tensor& target) {
  Tensor d = input - target;
  return (d * d).mean();
}

}  // namespace lt::nn
