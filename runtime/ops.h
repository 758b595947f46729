// Tensor operations as free functions. Binary ops broadcast and promote like PyTorch; a Scalar
// operand is a wrapped number (it enters the trace as a runtime parameter, never a baked constant,
// so changing it never recompiles).
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "runtime/tensor.h"

namespace lt {

// Creation. `device` defaults to cpu; dtype to float32 unless noted.
Tensor from_host(const void* data, DType dtype, Shape shape, const Device& device = kCPU);
Tensor empty(Shape shape, DType dtype = DType::Float32, const Device& device = kCPU);
Tensor zeros(Shape shape, DType dtype = DType::Float32, const Device& device = kCPU);
Tensor ones(Shape shape, DType dtype = DType::Float32, const Device& device = kCPU);
Tensor full(Shape shape, Scalar value, std::optional<DType> dtype = std::nullopt,
            const Device& device = kCPU);
Tensor scalar_tensor(Scalar value, std::optional<DType> dtype = std::nullopt,
                     const Device& device = kCPU);
Tensor arange(double start, double end, double step = 1, std::optional<DType> dtype = std::nullopt,
              const Device& device = kCPU);  // int64 when start/end/step are integral and no dtype
Tensor linspace(double start, double end, int64_t steps, DType dtype = DType::Float32,
                const Device& device = kCPU);
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, DType dtype = DType::Float32,
           const Device& device = kCPU);
Tensor rand(Shape shape, DType dtype = DType::Float32, const Device& device = kCPU);
Tensor randn(Shape shape, DType dtype = DType::Float32, const Device& device = kCPU);
Tensor randint(int64_t low, int64_t high, Shape shape, DType dtype = DType::Int64,
               const Device& device = kCPU);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);
Tensor full_like(const Tensor& t, Scalar value);
Tensor rand_like(const Tensor& t);
Tensor randn_like(const Tensor& t);
// The counter-based generator: same seed, same numbers on every device.
void manual_seed(uint64_t seed);

// Elementwise.
Tensor add(const Tensor& a, const Tensor& b);
Tensor add(const Tensor& a, Scalar b);
Tensor sub(const Tensor& a, const Tensor& b);
Tensor sub(const Tensor& a, Scalar b);
Tensor rsub(const Tensor& a, Scalar b);  // b - a
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, Scalar b);
Tensor rdiv(const Tensor& a, Scalar b);  // b / a
Tensor pow(const Tensor& a, const Tensor& b);
Tensor pow(const Tensor& a, Scalar b);
Tensor rpow(const Tensor& a, Scalar b);  // b ** a
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, Scalar b);
// Python's // and % (PyTorch's floor_divide, remainder) and C's truncating fmod. int op int stays
// integer, a float operand promotes as add does; bool operands raise, as in PyTorch. Integer
// division by zero gives 0 and INT_MIN // -1 wraps (ir/ops.def): nothing traps.
Tensor floor_divide(const Tensor& a, const Tensor& b);
Tensor floor_divide(const Tensor& a, Scalar b);
Tensor rfloor_divide(const Tensor& a, Scalar b);  // b // a
Tensor remainder(const Tensor& a, const Tensor& b);
Tensor remainder(const Tensor& a, Scalar b);
Tensor rremainder(const Tensor& a, Scalar b);  // b % a
Tensor fmod(const Tensor& a, const Tensor& b);
Tensor fmod(const Tensor& a, Scalar b);
// Bitwise ops of integer tensors; of bool tensors they are logical (and, or, xor, not). Shifts take
// integers only; a count outside [0, bits) gives 0 for << and the sign fill for >> (PyTorch's).
Tensor bitwise_and(const Tensor& a, const Tensor& b);
Tensor bitwise_and(const Tensor& a, Scalar b);
Tensor bitwise_or(const Tensor& a, const Tensor& b);
Tensor bitwise_or(const Tensor& a, Scalar b);
Tensor bitwise_xor(const Tensor& a, const Tensor& b);
Tensor bitwise_xor(const Tensor& a, Scalar b);
Tensor bitwise_not(const Tensor& a);
Tensor bitwise_left_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_left_shift(const Tensor& a, Scalar b);
Tensor rbitwise_left_shift(const Tensor& a, Scalar b);  // b << a
Tensor bitwise_right_shift(const Tensor& a, const Tensor& b);
Tensor bitwise_right_shift(const Tensor& a, Scalar b);
Tensor rbitwise_right_shift(const Tensor& a, Scalar b);  // b >> a
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& a);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor unary(Op op, const Tensor& a);  // exp, log, sin, ...: integer inputs compute in float32
Tensor clamp(const Tensor& a, std::optional<Scalar> lo, std::optional<Scalar> hi);
Tensor cast(const Tensor& a, DType t);

// Reductions (empty dims = all dims). sum/prod of integers give int64, as in PyTorch.
Tensor reduce(Op op, const Tensor& a, std::vector<int64_t> dims, bool keepdim);

// Composites: one op in the trace, decomposed into primitives (and fused) by lowering.
Tensor softmax(const Tensor& a, int64_t dim);
Tensor log_softmax(const Tensor& a, int64_t dim);
Tensor logsumexp(const Tensor& a, std::vector<int64_t> dims, bool keepdim = false);
Tensor var(const Tensor& a, std::vector<int64_t> dims = {}, double correction = 1,
           bool keepdim = false);
Tensor std(const Tensor& a, std::vector<int64_t> dims = {}, double correction = 1,
           bool keepdim = false);
Tensor layer_norm(const Tensor& x, std::vector<int64_t> normalized_shape,
                  const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  double eps = 1e-5);
Tensor gelu(const Tensor& a, const std::string& approximate = "none");  // "none" | "tanh"
Tensor silu(const Tensor& a);

// Movement.
Tensor reshape(const Tensor& a, std::vector<int64_t> shape);
// reshape from a pooled list (unsqueeze, squeeze, flatten build theirs from the tensor's shape):
// no heap allocation, as for every other traced op (tests/cpp/trace_alloc_test.cc).
Tensor reshape_to(const Tensor& a, IntList shape);
Tensor permute(const Tensor& a, std::vector<int64_t> dims);
Tensor expand(const Tensor& a, std::vector<int64_t> shape);
// Sums `g` down to `shape` (the reverse of broadcasting): a gradient brought back to its operand.
Tensor unbroadcast(const Tensor& g, const Shape& shape);
Tensor matmul(const Tensor& a, const Tensor& b);
// The Slice primitive ({start, step, size} per dim); runtime/indexing.h builds the PyTorch forms.
Tensor slice_node(const Tensor& a, std::vector<int64_t> start_step_size);
// The Gather/ScatterAdd primitives (int64 index of the data's rank, axis normalized; no range
// check): runtime/indexing.h builds gather, scatter_add, index_select and embedding on them.
Tensor gather_node(const Tensor& src, int64_t axis, const Tensor& index);
// src's entries at J positions along `axis` (`index`: an integer node of J positions, any shape
// holding them in order; no range check): src's shape with J at axis.
Tensor gather_vector(const Tensor& src, int64_t axis, NodePtr index);
Tensor scatter_add_node(const Tensor& base, int64_t axis, const Tensor& index, const Tensor& src);

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator/(Scalar a, const Tensor& b);

}  // namespace lt
