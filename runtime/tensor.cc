#include "runtime/tensor.h"

#include <cstring>
#include <functional>
#include <sstream>

#include "ir/error.h"
#include "ir/half.h"
#include "runtime/index_check.h"
#include "runtime/ops.h"
#include "runtime/profile.h"
#include "runtime/sync.h"
#include "runtime/tape.h"
#include "runtime/tensor_impl.h"
#include "runtime/trace_observer.h"
#include "runtime/views.h"

namespace lt {
namespace {
const TensorImpl& impl_or_throw(const std::shared_ptr<TensorImpl>& p) {
  if (!p) fail(ErrorKind::Runtime, "use of an undefined tensor");
  return *p;
}
}  // namespace

const Shape& Tensor::shape() const { return impl_or_throw(impl_).shape; }
DType Tensor::dtype() const { return impl_or_throw(impl_).dtype; }
Device Tensor::device() const { return impl_or_throw(impl_).device; }
int64_t Tensor::numel() const { return lt::numel(shape()); }
bool Tensor::is_pending() const {
  if (!impl_) return false;
  ensure_fresh(*impl_);
  return impl_->pending != nullptr;
}
int64_t Tensor::size(int64_t d) const { return shape()[normalize_axis(d, dim(), "size")]; }
NodePtr Tensor::node() const {
  impl_or_throw(impl_);
  return node_of(*impl_);
}

void Tensor::copy_to_host(void* dst, SyncReason reason) const {
  impl_or_throw(impl_);
  ensure_fresh(*impl_);
  if (impl_->pending) sync({*this}, reason);
  if (TraceObserver* o = trace_observer()) o->on_host_read(reason);  // Python now depends on it
  size_t bytes = static_cast<size_t>(numel()) * dtype_size(dtype());
  if (!bytes) return;
  profile::Scope transfer(profile::Phase::Transfer, "to host");
  const Storage& s = *impl_->storage;
  if (s.buffer->on_host()) {
    std::memcpy(dst, s.buffer->data(), bytes);
  } else {
    get_backend(s.backend).copy_to_host(dst, *s.buffer, bytes);
    index_checks::check_unread();  // the device has caught up: a bad index of a step raises here
  }
}

double Tensor::item(SyncReason reason) const {
  if (numel() != 1)
    fail(ErrorKind::Runtime, "a Tensor with ", numel(),
         " elements cannot be converted to Scalar (shape ", shape_str(shape()), ")");
  uint64_t raw = 0;
  copy_to_host(&raw, reason);
  return load_as_double(&raw, dtype());
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  std::vector<unsigned char> raw(static_cast<size_t>(numel()) * dtype_size(dtype()));
  copy_to_host(raw.data(), SyncReason::ToList);
  std::vector<T> out(static_cast<size_t>(numel()));
  for (size_t i = 0; i < out.size(); ++i) {
    const void* p = raw.data() + i * dtype_size(dtype());
    if constexpr (std::is_floating_point_v<T>)
      out[i] = static_cast<T>(load_as_double(p, dtype()));
    else
      out[i] = static_cast<T>(load_as_int(p, dtype()));
  }
  return out;
}
template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<int64_t> Tensor::to_vector<int64_t>() const;
template std::vector<int32_t> Tensor::to_vector<int32_t>() const;
template std::vector<uint8_t> Tensor::to_vector<uint8_t>() const;

Tensor Tensor::to(const Device& d) const {
  impl_or_throw(impl_);
  ensure_fresh(*impl_);
  if (impl_->device == d) return *this;
  if (impl_->pending) sync({*this}, d.is_lazy() ? SyncReason::Sync : SyncReason::ToCpu);
  ObservedTransfer transfer(*impl_);  // lt.compile redoes this copy on replay
  const Storage& s = *impl_->storage;
  std::string target = d.backend_name();
  bool host_src = s.buffer->on_host(), host_dst = target == "cpu" || target == "reference";
  // Host to host: one copy, no staging. Not shared: cpu memory can be written through NumPy views
  // (Tensor.numpy(), lt.from_numpy) and DLPack, which must not reach another device's tensor.
  if (host_src && host_dst) return transfer.done(from_host(s.buffer->data(), dtype(), shape(), d));
  std::vector<unsigned char> tmp(static_cast<size_t>(numel()) * dtype_size(dtype()));
  copy_to_host(tmp.data());
  return transfer.done(from_host(tmp.data(), dtype(), shape(), d));
}

Tensor Tensor::to(DType t) const { return cast(*this, t); }

Tensor Tensor::operator-() const { return unary(Op::Neg, *this); }
Tensor Tensor::exp() const { return unary(Op::Exp, *this); }
Tensor Tensor::log() const { return unary(Op::Log, *this); }
Tensor Tensor::sqrt() const { return unary(Op::Sqrt, *this); }
Tensor Tensor::rsqrt() const { return unary(Op::Rsqrt, *this); }
Tensor Tensor::sin() const { return unary(Op::Sin, *this); }
Tensor Tensor::cos() const { return unary(Op::Cos, *this); }
Tensor Tensor::tanh() const { return unary(Op::Tanh, *this); }
Tensor Tensor::sigmoid() const { return unary(Op::Sigmoid, *this); }
Tensor Tensor::relu() const { return unary(Op::Relu, *this); }
Tensor Tensor::abs() const { return unary(Op::Abs, *this); }
Tensor Tensor::erf() const { return unary(Op::Erf, *this); }
Tensor Tensor::log1p() const { return unary(Op::Log1p, *this); }
Tensor Tensor::expm1() const { return unary(Op::Expm1, *this); }
Tensor Tensor::floor() const {
  if (!is_floating(dtype())) return *this;  // floor of an integer is itself, as in PyTorch
  return unary(Op::Floor, *this);
}
Tensor Tensor::neg() const { return unary(Op::Neg, *this); }
Tensor Tensor::reciprocal() const { return unary(Op::Recip, *this); }
Tensor Tensor::pow(const Tensor& e) const { return lt::pow(*this, e); }
Tensor Tensor::pow(Scalar e) const { return lt::pow(*this, e); }
Tensor Tensor::clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const {
  return lt::clamp(*this, lo, hi);
}

Tensor Tensor::sum(std::vector<int64_t> dims, bool keepdim) const {
  return reduce(Op::ReduceSum, *this, dims, keepdim);
}
Tensor Tensor::mean(std::vector<int64_t> dims, bool keepdim) const {
  return reduce(Op::Mean, *this, dims, keepdim);
}
Tensor Tensor::amax(std::vector<int64_t> dims, bool keepdim) const {
  return reduce(Op::ReduceMax, *this, dims, keepdim);
}
Tensor Tensor::amin(std::vector<int64_t> dims, bool keepdim) const {
  return reduce(Op::ReduceMin, *this, dims, keepdim);
}
Tensor Tensor::prod(std::vector<int64_t> dims, bool keepdim) const {
  return reduce(Op::ReduceProd, *this, dims, keepdim);
}

Tensor Tensor::reshape(std::vector<int64_t> s) const {
  return link_view(*this, lt::reshape(*this, std::move(s)), {ViewStep::Kind::Reshape});
}
Tensor Tensor::view(std::vector<int64_t> s) const {
  Tensor out = lt::reshape(*this, std::move(s));
  if (!can_view_as(*impl_, out.shape()))
    fail(ErrorKind::Runtime,
         "view size is not compatible with input tensor's size and stride (at least one dimension "
         "spans across two contiguous subspaces): shape ",
         shape_str(shape()), " to ", shape_str(out.shape()), ". Use .reshape(...) instead.");
  return link_view(*this, out, {ViewStep::Kind::Reshape});
}
Tensor Tensor::permute(std::vector<int64_t> d) const {
  IntList perm;
  for (int64_t x : d) perm.push_back(normalize_axis(x, dim(), "permute"));
  return link_view(*this, lt::permute(*this, std::move(d)),
                   {ViewStep::Kind::Permute, {}, std::move(perm)});
}
Tensor Tensor::transpose(int64_t a, int64_t b) const {
  std::vector<int64_t> p(static_cast<size_t>(dim()));
  for (size_t i = 0; i < p.size(); ++i) p[i] = static_cast<int64_t>(i);
  if (dim() == 0) {
    normalize_axis(a, 0, "transpose");
    normalize_axis(b, 0, "transpose");
    return *this;
  }
  std::swap(p[normalize_axis(a, dim(), "transpose")], p[normalize_axis(b, dim(), "transpose")]);
  return permute(p);
}
Tensor Tensor::expand(std::vector<int64_t> s) const {
  return link_view(*this, lt::expand(*this, std::move(s)), {ViewStep::Kind::Expand});
}
Tensor Tensor::unsqueeze(int64_t d) const {
  int64_t at = normalize_axis(d, dim() + 1, "unsqueeze");
  Shape s = shape();
  s.insert(s.begin() + at, 1);
  Tensor out = link_view(*this, lt::reshape_to(*this, std::move(s)), {ViewStep::Kind::Reshape});
  if (out.impl()->view && out.impl() != impl_) {  // PyTorch's stride for the new size-1 dim
    IntList st = view_strides(*impl_);
    out.impl()->view->strides[at] = at < dim() ? shape()[at] * st[at] : 1;
  }
  return out;
}
Tensor Tensor::squeeze(std::optional<int64_t> d) const {
  Shape s;
  if (d) {
    int64_t at = normalize_axis(*d, dim(), "squeeze");
    s = shape();
    if (!s.empty() && s[at] == 1) s.erase(s.begin() + at);
  } else {
    for (auto x : shape())
      if (x != 1) s.push_back(x);
  }
  return link_view(*this, lt::reshape_to(*this, std::move(s)), {ViewStep::Kind::Reshape});
}
Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (dim() == 0) return reshape({1});
  int64_t a = normalize_axis(start, dim(), "flatten"), b = normalize_axis(end, dim(), "flatten");
  if (a > b)
    fail(ErrorKind::Runtime, "flatten() has invalid args: start_dim cannot come after end_dim");
  Shape s(shape().begin(), shape().begin() + a);
  int64_t m = 1;
  for (int64_t i = a; i <= b; ++i) m *= shape()[i];
  s.push_back(m);
  s.insert(s.end(), shape().begin() + b + 1, shape().end());
  return link_view(*this, lt::reshape_to(*this, std::move(s)), {ViewStep::Kind::Reshape});
}
Tensor Tensor::matmul(const Tensor& o) const { return lt::matmul(*this, o); }

void Tensor::assign(const Tensor& v) {
  impl_or_throw(impl_);
  if (v.shape() != shape())
    fail(ErrorKind::Runtime, "in-place update: result shape ", shape_str(v.shape()),
         " does not match tensor shape ", shape_str(shape()),
         " (broadcasting cannot grow the destination)");
  TensorImpl& t = *impl_;
  if (grad_enabled() && requires_grad() && is_leaf())
    fail(ErrorKind::Runtime,
         "a leaf Variable that requires grad is being used in an in-place operation (shape ",
         shape_str(shape()), "); wrap it in no_grad() or use a non-leaf copy");
  Tensor c = v.dtype() == t.dtype ? v : cast(v, t.dtype);
  if (t.view) {                // a view, or a tensor that once was one (runtime/views.h)
    write_through_view(t, c);  // the base and its other views change too (runtime/views.h)
    return;
  }
  // The tensor now continues the history of its new value.
  rebind(t, keep_overwritten_history(t, c), /*history=*/true);
  ++t.version;
}

void Tensor::assign_result(const Tensor& v, const char* op) {
  DType src = v.dtype(), dst = dtype();
  if (src != dst && ((is_floating(src) && !is_floating(dst)) || (is_bool(dst) && !is_bool(src))))
    fail(ErrorKind::Runtime, op, ": result type ", dtype_name(src),
         " can't be cast to the desired output type ", dtype_name(dst), " (in-place on shape ",
         shape_str(shape()), ")");
  assign(v);
}

Tensor& Tensor::operator+=(const Tensor& o) {
  assign_result(add(*this, o), "add_");
  return *this;
}
Tensor& Tensor::operator+=(Scalar o) {
  assign_result(add(*this, o), "add_");
  return *this;
}
Tensor& Tensor::operator-=(const Tensor& o) {
  assign_result(sub(*this, o), "sub_");
  return *this;
}
Tensor& Tensor::operator-=(Scalar o) {
  assign_result(sub(*this, o), "sub_");
  return *this;
}
Tensor& Tensor::operator*=(const Tensor& o) {
  assign_result(mul(*this, o), "mul_");
  return *this;
}
Tensor& Tensor::operator*=(Scalar o) {
  assign_result(mul(*this, o), "mul_");
  return *this;
}
Tensor& Tensor::operator/=(const Tensor& o) {
  assign_result(div(*this, o), "div_");
  return *this;
}
Tensor& Tensor::operator/=(Scalar o) {
  assign_result(div(*this, o), "div_");
  return *this;
}

std::string Tensor::str() const {
  std::vector<double> v;
  {
    std::vector<unsigned char> raw(static_cast<size_t>(numel()) * dtype_size(dtype()));
    copy_to_host(raw.data(), SyncReason::Print);
    for (int64_t i = 0; i < numel(); ++i)
      v.push_back(load_as_double(raw.data() + i * dtype_size(dtype()), dtype()));
  }
  std::ostringstream os;
  os << "tensor(";
  const Shape& s = shape();
  // Nested brackets, row-major.
  std::function<void(size_t, int64_t)> rec = [&](size_t d, int64_t off) {
    if (d == s.size()) {
      if (is_floating(dtype()))
        os << v[off];
      else if (is_bool(dtype()))
        os << (v[off] != 0 ? "True" : "False");
      else
        os << static_cast<int64_t>(v[off]);
      return;
    }
    int64_t stride = 1;
    for (size_t k = d + 1; k < s.size(); ++k) stride *= s[k];
    os << "[";
    for (int64_t i = 0; i < s[d]; ++i) {
      if (i) os << ", ";
      rec(d + 1, off + i * stride);
    }
    os << "]";
  };
  if (numel() == 0)
    os << "[]";
  else
    rec(0, 0);
  if (device() != kCPU) os << ", device='" << device().str() << "'";
  if (dtype() != DType::Float32 && dtype() != DType::Int64 && dtype() != DType::Bool)
    os << ", dtype=" << dtype_name(dtype());
  os << ")";
  return os.str();
}

}  // namespace lt
