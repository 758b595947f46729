// lt::Tensor: a handle to a TensorImpl. On an eager device it always holds data; on a lazy device
// it holds pending IR until a sync point materializes it.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/half.h"
#include "ir/node.h"
#include "ir/shape.h"
#include "runtime/device.h"

namespace lt {

struct TensorImpl;

// Why a sync happened (lt.metrics.syncs_by_reason keys are these names in snake_case).
enum class SyncReason { MarkStep, Item, Numpy, Print, ToCpu, ToList, Sync, Eager, ControlFlow };

// A Python-style scalar operand: keeps its kind so promotion follows PyTorch's wrapped numbers.
struct Scalar {
  double f = 0;
  int64_t i = 0;
  ScalarKind kind = ScalarKind::Float;
  // i: the integer an integral op reads (truncated; 0 for NaN, inf and values int64 cannot hold,
  // where a plain cast would be undefined behaviour: x * 1e30 makes such a Scalar).
  Scalar(double v) : f(v), i(double_to_int64(v)), kind(ScalarKind::Float) {}     // NOLINT
  Scalar(float v) : Scalar(static_cast<double>(v)) {}                            // NOLINT
  Scalar(int64_t v) : f(static_cast<double>(v)), i(v), kind(ScalarKind::Int) {}  // NOLINT
  Scalar(int v) : Scalar(static_cast<int64_t>(v)) {}                             // NOLINT
  Scalar(bool v) : f(v), i(v), kind(ScalarKind::Bool) {}                         // NOLINT
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  const Shape& shape() const;
  DType dtype() const;
  Device device() const;
  int64_t dim() const { return static_cast<int64_t>(shape().size()); }
  int64_t size(int64_t d) const;
  int64_t numel() const;
  bool is_pending() const;  // lazy tensor with IR not yet materialized

  // Host access (sync points).
  // numel()*dtype_size bytes in this tensor's dtype, row-major.
  void copy_to_host(void* dst, SyncReason reason = SyncReason::ToCpu) const;
  double item(SyncReason reason = SyncReason::Item) const;  // one-element tensors only
  template <typename T>
  std::vector<T> to_vector() const;  // converted to T
  Tensor to(const Device& d) const;
  Tensor to(DType t) const;
  Tensor cpu() const { return to(kCPU); }

  // Elementwise math (methods mirror the free functions in runtime/ops.h).
  Tensor operator-() const;
  Tensor exp() const;
  Tensor log() const;
  Tensor sqrt() const;
  Tensor rsqrt() const;
  Tensor sin() const;
  Tensor cos() const;
  Tensor tanh() const;
  Tensor sigmoid() const;
  Tensor relu() const;
  Tensor abs() const;
  Tensor erf() const;
  Tensor log1p() const;
  Tensor expm1() const;
  Tensor floor() const;
  Tensor neg() const;
  Tensor reciprocal() const;
  Tensor pow(const Tensor& e) const;
  Tensor pow(Scalar e) const;
  Tensor clamp(std::optional<Scalar> lo, std::optional<Scalar> hi) const;

  // Reductions (empty dims = all dims).
  Tensor sum(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor mean(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor amax(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor amin(std::vector<int64_t> dims = {}, bool keepdim = false) const;
  Tensor prod(std::vector<int64_t> dims = {}, bool keepdim = false) const;

  // Movement.
  Tensor reshape(std::vector<int64_t> shape) const;  // one -1 allowed
  // A view sharing this tensor's values (in-place writes reach both); PyTorch's view rule, an
  // error where the strides cannot express the shape (reshape copies there instead).
  Tensor view(std::vector<int64_t> shape) const;
  Tensor permute(std::vector<int64_t> dims) const;
  Tensor transpose(int64_t a, int64_t b) const;
  Tensor expand(std::vector<int64_t> shape) const;  // -1 keeps a dim
  Tensor unsqueeze(int64_t d) const;
  Tensor squeeze(std::optional<int64_t> d = std::nullopt) const;
  Tensor flatten(int64_t start = 0, int64_t end = -1) const;
  Tensor matmul(const Tensor& o) const;

  // In-place forms rebind this tensor to the new value (functional underneath).
  Tensor& operator+=(const Tensor& o);
  Tensor& operator+=(Scalar o);
  Tensor& operator-=(const Tensor& o);
  Tensor& operator-=(Scalar o);
  Tensor& operator*=(const Tensor& o);
  Tensor& operator*=(Scalar o);
  Tensor& operator/=(const Tensor& o);
  Tensor& operator/=(Scalar o);
  void assign(const Tensor& value);  // this tensor now holds value's data/IR (same shape)
  // An in-place op's result written back under PyTorch's cast rule: within its dtype category or
  // upwards only (a float result into an integer tensor, or a number into bool, raises).
  void assign_result(const Tensor& value, const char* op = "in-place operation");

  // Autograd (runtime/tape.h; the engine is autograd/autograd.h).
  bool requires_grad() const;
  Tensor& requires_grad_(bool on = true);  // leaves only
  Tensor grad() const;                     // undefined until a backward reaches this leaf
  void set_grad(const Tensor& g);
  bool is_leaf() const;
  std::string grad_fn_name() const;  // "" for leaves
  void backward(const Tensor& grad_output = Tensor(), bool retain_graph = false) const;
  Tensor detach() const;  // same value, no history

  std::string str() const;  // PyTorch-like repr; a sync point ("print")
  const std::shared_ptr<TensorImpl>& impl() const { return impl_; }
  // The IR node standing for this tensor (its pending IR, or a leaf over its data).
  NodePtr node() const;

 private:
  std::shared_ptr<TensorImpl> impl_;
};

}  // namespace lt
