// Linear, Conv2d, the pools and the losses (functional and module forms).
#include "nn/nn.h"

#include <cmath>

#include "ir/error.h"
#include "runtime/index_check.h"
#include "runtime/indexing.h"
#include "runtime/windows.h"

namespace lt::nn {

namespace {
void check_reduction(const std::string& r, const char* fn) {
  if (r != "mean" && r != "sum" && r != "none")
    fail(ErrorKind::Value, fn, ": \"", r,
         "\" is not a valid value for reduction (mean, sum or none)");
}

Tensor reduce_loss(const Tensor& loss, const std::string& r, const char* fn) {
  check_reduction(r, fn);
  return r == "mean" ? loss.mean() : r == "sum" ? loss.sum() : loss;
}

// (N, C, d1, ...) -> (N, d1, ..., C): class scores along the last dim.
Tensor classes_last(const Tensor& x) {
  if (x.dim() <= 2) return x;
  std::vector<int64_t> perm = {0};
  for (int64_t d = 2; d < x.dim(); ++d) perm.push_back(d);
  perm.push_back(1);
  return x.permute(perm);
}
}  // namespace

Tensor linear(const Tensor& x, const Tensor& weight, const Tensor& bias) {
  if (weight.dim() != 2 || x.dim() < 1 || x.shape().back() != weight.size(1))
    fail(ErrorKind::Runtime, "linear: input of shape ", shape_str(x.shape()),
         " does not match weight of shape ", shape_str(weight.shape()), " (expected input[..., ",
         weight.dim() == 2 ? weight.size(1) : -1, "])");
  Tensor y = matmul(x, weight.transpose(0, 1));
  return bias.defined() ? y + bias : y;
}

Linear::Linear(int64_t in, int64_t out, bool bias, const Device& device) {
  if (in <= 0 || out <= 0)
    fail(ErrorKind::Value, "Linear: in_features and out_features must be positive, got ", in,
         " and ", out);
  // PyTorch's default: kaiming_uniform(a = sqrt(5)) -> bound 1/sqrt(fan_in), for weight and bias.
  double bound = 1.0 / std::sqrt(static_cast<double>(in));
  w_ = &register_parameter("weight", uniform({out, in}, bound, device));
  if (bias) b_ = &register_parameter("bias", uniform({out}, bound, device));
}

Tensor Linear::forward(const Tensor& x) {
  if (x.dim() < 1 || x.shape().back() != w_->size(1))
    fail(ErrorKind::Runtime, "Linear: input of shape ", shape_str(x.shape()),
         " does not end in in_features=", w_->size(1));
  return linear(x, *w_, b_ ? *b_ : Tensor());
}

Conv2d::Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride,
               int64_t padding, bool bias, const Device& device)
    : stride_(stride), padding_(padding) {
  if (in_channels <= 0 || out_channels <= 0 || kernel_size <= 0)
    fail(ErrorKind::Value,
         "Conv2d: in_channels, out_channels and kernel_size must be positive, got ", in_channels,
         ", ", out_channels, " and ", kernel_size);
  // PyTorch's default: kaiming_uniform(a = sqrt(5)) -> bound 1/sqrt(fan_in), for weight and bias.
  double bound = 1.0 / std::sqrt(static_cast<double>(in_channels * kernel_size * kernel_size));
  w_ = &register_parameter(
      "weight", uniform({out_channels, in_channels, kernel_size, kernel_size}, bound, device));
  if (bias) b_ = &register_parameter("bias", uniform({out_channels}, bound, device));
}

Tensor Conv2d::forward(const Tensor& x) {
  return conv2d(x, *w_, b_ ? *b_ : Tensor(), {stride_, stride_}, {padding_, padding_});
}

Tensor MaxPool2d::forward(const Tensor& x) { return max_pool2d(x, {k_, k_}, {s_, s_}); }

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, {k_, k_}, {s_, s_}, {p_, p_}, ceil_, include_pad_, divisor_);
}

Tensor cross_entropy(const Tensor& input, const Tensor& target, const CrossEntropyOptions& opt) {
  constexpr const char* kFn = "cross_entropy";
  check_reduction(opt.reduction, kFn);
  if (!input.defined() || !target.defined())
    fail(ErrorKind::Type, kFn, ": input and target must be defined tensors");
  if (input.dim() == 0)
    fail(ErrorKind::Value, kFn, ": input must have at least one dimension, got a 0-d tensor");
  if (!is_floating(input.dtype()))
    fail(ErrorKind::Runtime, kFn, ": input must be floating point, got ",
         dtype_name(input.dtype()));
  if (!(opt.label_smoothing >= 0.0 && opt.label_smoothing <= 1.0))
    fail(ErrorKind::Value, kFn, ": label_smoothing must be between 0.0 and 1.0, got ",
         opt.label_smoothing);
  const int64_t C = input.size(input.dim() == 1 ? 0 : 1);
  if (opt.weight.defined() && opt.weight.shape() != Shape{C})
    fail(ErrorKind::Runtime, kFn, ": weight of shape ", shape_str(opt.weight.shape()),
         " should be [", C, "] for input of shape ", shape_str(input.shape()));
  Tensor logp = classes_last(log_softmax(input, input.dim() == 1 ? 0 : 1));
  const double smooth = opt.label_smoothing;
  if (is_floating(target.dtype())) {  // class probabilities, same shape as the scores
    if (target.shape() != input.shape())
      fail(ErrorKind::Runtime, kFn, ": probability target of shape ", shape_str(target.shape()),
           " does not match input of shape ", shape_str(input.shape()));
    Tensor p = classes_last(target);
    if (smooth > 0) p = p * (1 - smooth) + smooth / static_cast<double>(C);
    Tensor lp = opt.weight.defined() ? logp * opt.weight : logp;
    Tensor loss = -(lp * p).sum({-1});
    return reduce_loss(loss, opt.reduction, kFn);
  }
  if (target.dtype() == DType::Bool)
    fail(ErrorKind::Runtime, kFn,
         ": target must hold class indices (int64) or probabilities, got bool");
  Shape want(logp.shape().begin(), logp.shape().end() - 1);
  if (target.shape() != want)
    fail(ErrorKind::Value, kFn, ": expected target of shape ", shape_str(want),
         " for input of shape ", shape_str(input.shape()), ", got ", shape_str(target.shape()));
  // The target's class is an unchecked gather (an indexed load fused into the loss kernel), as in
  // the Python F.cross_entropy: `safe` is computed, so a deferred range check would cost a kernel
  // per step; targets already in host memory are checked here. Ignored positions pick class 0 and
  // are masked out.
  check_class_targets(target, logp.size(-1), opt.ignore_index, kFn, input.shape());
  Tensor valid_mask = ne(target, Scalar(opt.ignore_index));
  Tensor valid = cast(valid_mask, logp.dtype());
  Tensor safe = where(valid_mask, cast(target, DType::Int64), Scalar(int64_t{0}));
  Tensor picked = gather_node(logp, logp.dim() - 1, safe.unsqueeze(-1)).squeeze(-1);
  Tensor wt = opt.weight.defined()
                  ? reshape_to(gather_node(opt.weight, 0, safe.reshape({-1})), safe.shape()) * valid
                  : valid;
  Tensor loss = -picked * wt;
  if (smooth > 0) {
    Tensor all = opt.weight.defined() ? (logp * opt.weight).sum({-1}) : logp.sum({-1});
    loss = loss * (1 - smooth) - all * valid * (smooth / static_cast<double>(C));
  }
  // PyTorch's mean divides by the summed weights of the non-ignored targets.
  if (opt.reduction == "mean") return loss.sum() / wt.sum();
  return reduce_loss(loss, opt.reduction, kFn);
}

Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  check_reduction(reduction, "mse_loss");
  Tensor d = input - target;
  return reduce_loss(d * d, reduction, "mse_loss");
}

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyOptions opt) : opt_(std::move(opt)) {
  check_reduction(opt_.reduction, "CrossEntropyLoss");
  if (opt_.weight.defined()) weight_ = &register_buffer("weight", opt_.weight);
}

Tensor CrossEntropyLoss::forward(const Tensor& input, const Tensor& target) {
  if (weight_) opt_.weight = *weight_;  // the buffer, wherever to() moved it
  return cross_entropy(input, target, opt_);
}

MSELoss::MSELoss(std::string reduction) : reduction_(std::move(reduction)) {
  check_reduction(reduction_, "MSELoss");
}

}  // namespace lt::nn
