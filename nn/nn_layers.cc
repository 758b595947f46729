// Embedding, LayerNorm, BatchNorm2d and Dropout, with the functional dropout and batch_norm.
#include <cmath>

#include "autograd/autograd.h"
#include "ir/error.h"
#include "nn/nn.h"
#include "runtime/indexing.h"
#include "runtime/sync.h"

namespace lt::nn {

Tensor dropout(const Tensor& x, double p, bool training) {
  if (!(p >= 0.0 && p <= 1.0))
    fail(ErrorKind::Value, "dropout: probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0.0) return x;
  if (p == 1.0) return x * 0;
  Tensor keep = cast(ge(rand_like(x), Scalar(p)), x.dtype());
  return x * keep * (1.0 / (1.0 - p));
}

Tensor batch_norm(const Tensor& x, Tensor running_mean, Tensor running_var, const Tensor& weight,
                  const Tensor& bias, bool training, double momentum, double eps) {
  if (!x.defined()) fail(ErrorKind::Type, "batch_norm: input must be a defined tensor");
  if (x.dim() < 2)
    fail(ErrorKind::Value, "batch_norm: expected at least 2-D input, got shape ",
         shape_str(x.shape()));
  if (!is_floating(x.dtype()))
    fail(ErrorKind::Runtime, "batch_norm: input must be floating point, got ",
         dtype_name(x.dtype()));
  const int64_t c = x.size(1);
  const std::pair<const char*, const Tensor*> named[] = {{"running_mean", &running_mean},
                                                         {"running_var", &running_var},
                                                         {"weight", &weight},
                                                         {"bias", &bias}};
  for (auto& [name, t] : named)
    if (t->defined() && t->shape() != Shape{c})
      fail(ErrorKind::Runtime, "batch_norm: ", name, " of shape ", shape_str(t->shape()),
           " should be [", c, "] for input of shape ", shape_str(x.shape()));
  std::vector<int64_t> axes = {0}, bshape = {1, c};
  for (int64_t d = 2; d < x.dim(); ++d) {
    axes.push_back(d);
    bshape.push_back(1);
  }
  Tensor mean, v;
  if (training) {
    const int64_t count = x.numel() / c;
    if (count <= 1)
      fail(ErrorKind::Value,
           "batch_norm: expected more than 1 value per channel when training, got input of shape ",
           shape_str(x.shape()));
    mean = x.mean(axes);
    v = var(x, axes, /*correction=*/0);
    NoGradGuard ng;
    // PyTorch's update: the running variance takes the unbiased batch variance.
    if (running_mean.defined())
      running_mean.assign(running_mean * (1 - momentum) + mean.detach() * momentum);
    if (running_var.defined())
      running_var.assign(
          running_var * (1 - momentum) +
          v.detach() * (momentum * static_cast<double>(count) / static_cast<double>(count - 1)));
  } else {
    if (!running_mean.defined() || !running_var.defined())
      fail(ErrorKind::Runtime,
           "batch_norm: running_mean and running_var must be defined in evaluation mode");
    mean = running_mean;
    v = running_var;
  }
  Tensor out = (x - mean.reshape(bshape)) * (v.reshape(bshape) + eps).rsqrt();
  if (weight.defined()) out = out * weight.reshape(bshape);
  if (bias.defined()) out = out + bias.reshape(bshape);
  return out;
}

Embedding::Embedding(int64_t num_embeddings, int64_t embedding_dim,
                     std::optional<int64_t> padding_idx, const Device& device) {
  if (num_embeddings <= 0 || embedding_dim <= 0)
    fail(ErrorKind::Value, "Embedding: num_embeddings and embedding_dim must be positive, got ",
         num_embeddings, " and ", embedding_dim);
  if (padding_idx) {
    if (*padding_idx < -num_embeddings || *padding_idx >= num_embeddings)
      fail(ErrorKind::Value, "Embedding: padding_idx ", *padding_idx,
           " must be within num_embeddings=", num_embeddings);
    padding_idx_ = *padding_idx < 0 ? *padding_idx + num_embeddings : *padding_idx;
  }
  Tensor w = normal({num_embeddings, embedding_dim}, 1.0, device);  // PyTorch: N(0, 1)
  if (padding_idx_) {
    NoGradGuard ng;
    Tensor keep = cast(ne(positions(num_embeddings, device), Scalar(*padding_idx_)), DType::Float32)
                      .unsqueeze(-1);
    w = w * keep;
    sync({w}, SyncReason::Sync);
  }
  w_ = &register_parameter("weight", w);
}

Tensor Embedding::forward(const Tensor& indices) {
  if (!indices.defined()) fail(ErrorKind::Type, "Embedding: input must be a defined tensor");
  if (is_floating(indices.dtype()) || indices.dtype() == DType::Bool)
    fail(ErrorKind::Runtime, "Embedding: expected integer indices (int64 or int32), got ",
         dtype_name(indices.dtype()), " of shape ", shape_str(indices.shape()));
  Tensor w = *w_;
  if (padding_idx_ && w.requires_grad()) {
    // The padding row's value with no path back to the parameter: it receives no gradient.
    Tensor pad_row = eq(positions(w.size(0), w.device()), Scalar(*padding_idx_)).unsqueeze(-1);
    w = where(pad_row, w.detach(), w);
  }
  return embedding(w, indices.device() == w.device() ? indices : indices.to(w.device()));
}

LayerNorm::LayerNorm(std::vector<int64_t> normalized_shape, double eps, bool elementwise_affine,
                     bool bias, const Device& device)
    : shape_(std::move(normalized_shape)), eps_(eps) {
  if (shape_.empty()) fail(ErrorKind::Value, "LayerNorm: normalized_shape must not be empty");
  for (int64_t s : shape_)
    if (s <= 0)
      fail(ErrorKind::Value, "LayerNorm: normalized_shape ", shape_str(shape_),
           " must be positive");
  if (elementwise_affine) {
    w_ = &register_parameter("weight", filled(to_ints(shape_), 1.0, device));
    if (bias) b_ = &register_parameter("bias", filled(to_ints(shape_), 0.0, device));
  }
}

Tensor LayerNorm::forward(const Tensor& x) {
  if (!x.defined()) fail(ErrorKind::Type, "LayerNorm: input must be a defined tensor");
  const int64_t k = static_cast<int64_t>(shape_.size());
  if (x.dim() < k || !same_ints(std::span(x.shape()).last(static_cast<size_t>(k)), shape_))
    fail(ErrorKind::Runtime, "LayerNorm: input of shape ", shape_str(x.shape()),
         " does not end in normalized_shape ", shape_str(shape_));
  return layer_norm(x, shape_, w_ ? *w_ : Tensor(), b_ ? *b_ : Tensor(), eps_);
}

BatchNorm2d::BatchNorm2d(int64_t num_features, double eps, double momentum, bool affine,
                         bool track_running_stats, const Device& device)
    : c_(num_features), eps_(eps), momentum_(momentum) {
  if (num_features <= 0)
    fail(ErrorKind::Value, "BatchNorm2d: num_features must be positive, got ", num_features);
  if (affine) {
    w_ = &register_parameter("weight", filled({c_}, 1.0, device));
    b_ = &register_parameter("bias", filled({c_}, 0.0, device));
  }
  if (track_running_stats) {
    mean_ = &register_buffer("running_mean", filled({c_}, 0.0, device));
    var_ = &register_buffer("running_var", filled({c_}, 1.0, device));
    count_ = &register_buffer("num_batches_tracked", filled({}, 0.0, device, DType::Int64));
  }
}

Tensor BatchNorm2d::forward(const Tensor& x) {
  if (!x.defined() || x.dim() != 4)
    fail(ErrorKind::Value, "BatchNorm2d: expected 4D input, got ",
         x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
  if (x.size(1) != c_)
    fail(ErrorKind::Runtime, "BatchNorm2d: input of shape ", shape_str(x.shape()), " has ",
         x.size(1), " channels, expected num_features=", c_);
  const bool track = mean_ != nullptr;
  if (is_training() && track) {
    NoGradGuard ng;
    count_->assign(*count_ + 1);
  }
  // Batch statistics in training or without running stats; the buffers only update in training.
  const bool use_batch = is_training() || !track;
  return batch_norm(x, track ? *mean_ : Tensor(), track ? *var_ : Tensor(), w_ ? *w_ : Tensor(),
                    b_ ? *b_ : Tensor(), use_batch, momentum_, eps_);
}

Dropout::Dropout(double p) : p_(p) {
  if (!(p >= 0.0 && p <= 1.0))
    fail(ErrorKind::Value, "Dropout: probability has to be between 0 and 1, but got ", p);
}

}  // namespace lt::nn
