// Tensor creation: host data, filled tensors, ranges, and the counter-based generator.
#include <cmath>
#include <cstring>
#include <numbers>

#include "ir/error.h"
#include "ir/half.h"
#include "runtime/ops.h"
#include "runtime/profile.h"
#include "runtime/rng.h"
#include "runtime/tensor_impl.h"

namespace lt {
namespace {

void check_shape(const Shape& s, const char* op) {
  for (auto d : s)
    if (d < 0)
      fail(ErrorKind::Runtime, op, ": trying to create tensor with negative dimension ", d, ": ",
           shape_str(s));
  check_extent(s, op);
}

Tensor traced(NodePtr n, const Device& d) { return Tensor(make_tensor(std::move(n), d)); }

NodePtr broadcast_to(NodePtr n, const Shape& s) {
  if (n->shape == s) return n;
  Attrs a;
  a.ints = s;
  return make_node(Op::Expand, {std::move(n)}, a);
}

// Generator state: the seed and a counter offset; each draw reserves 2*numel counters.
struct Generator {
  uint64_t seed = 67280421310721ull;  // PyTorch's default seed
  int64_t offset = 0;
};
Generator& gen() {
  static Generator g;
  return g;
}

NodePtr uniform_node(const Shape& s, DType t, int64_t stream, NodePtr seed, NodePtr offset) {
  Attrs a;
  a.ints = s;
  a.dtype = t;
  a.stream = stream;
  return make_node(Op::Rand, {std::move(seed), std::move(offset)}, a);
}

// Seed and offset enter as runtime scalars: new draws never recompile.
std::pair<NodePtr, NodePtr> next_draw(int64_t n) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  auto seed =
      make_int_scalar(DType::Int64, static_cast<int64_t>(gen().seed & 0x7fffffffffffffffull));
  auto off = make_int_scalar(DType::Int64, gen().offset);
  gen().offset += 2 * std::max<int64_t>(n, 1);
  return {seed, off};
}

}  // namespace

Scalar fill_of(DType t, double v, const char* op) {
  if (is_bool(t)) return Scalar(v != 0);
  if (is_floating(t)) return Scalar(v);
  if (!(std::fabs(v) < 0x1p63))
    fail(ErrorKind::Runtime, op, ": value ", v, " cannot be converted to type ", dtype_name(t),
         " without overflow");
  return Scalar(double_to_int64(v));  // truncates
}

void manual_seed(uint64_t seed) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  gen().seed = seed;
  gen().offset = 0;
}

RngState rng_state() {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  return {gen().seed, gen().offset};
}

void rng_advance(int64_t counters) {
  std::lock_guard<std::recursive_mutex> g(runtime_mutex());
  gen().offset += counters;
}

Tensor from_host(const void* data, DType dtype, Shape shape, const Device& device) {
  check_shape(shape, "tensor");
  size_t bytes = static_cast<size_t>(numel(shape)) * dtype_size(dtype);
  std::string backend = device.backend_name();
  Backend& b = get_backend(backend);
  auto s = std::make_shared<Storage>();
  s->buffer = b.allocate(bytes);
  s->backend = backend;
  if (bytes) {
    profile::Scope transfer(profile::Phase::Transfer, "from host");
    b.copy_from_host(*s->buffer, data, bytes);
  }
  return Tensor(make_data_tensor(std::move(s), dtype, std::move(shape), device));
}

namespace {

// full() under the name the user called (zeros, ones, empty), which its errors carry.
Tensor fill(Shape shape, Scalar value, std::optional<DType> dtype, const Device& device,
            const char* op) {
  check_shape(shape, op);
  DType t = dtype                             ? *dtype
            : value.kind == ScalarKind::Float ? default_float()
            : value.kind == ScalarKind::Int   ? DType::Int64
                                              : DType::Bool;
  // A float value for an integral dtype, or any value for bool, takes t's kind as fills do.
  if (!is_floating(t) && (value.kind == ScalarKind::Float || is_bool(t)))
    value = fill_of(t, value.f, op);
  // 0 and 1 are baked (they enable simplification); other values are runtime scalars.
  double v = is_floating(t) ? value.f : static_cast<double>(value.i);
  NodePtr leaf = (v == 0 || v == 1) ? make_constant(t, v)
                 : is_floating(t)   ? make_scalar(t, value.f)
                                    : make_int_scalar(t, value.i);
  return traced(broadcast_to(leaf, shape), device);
}

}  // namespace

Tensor empty(Shape shape, DType dtype, const Device& device) {
  return fill(std::move(shape), Scalar(0.0), dtype, device, "empty");
}

Tensor full(Shape shape, Scalar value, std::optional<DType> dtype, const Device& device) {
  return fill(std::move(shape), value, dtype, device, "full");
}

Tensor zeros(Shape shape, DType dtype, const Device& device) {
  return fill(std::move(shape), Scalar(0.0), dtype, device, "zeros");
}
Tensor ones(Shape shape, DType dtype, const Device& device) {
  return fill(std::move(shape), Scalar(1.0), dtype, device, "ones");
}

Tensor scalar_tensor(Scalar value, std::optional<DType> dtype, const Device& device) {
  return full({}, value, dtype, device);
}

Tensor arange(double start, double end, double step, std::optional<DType> dtype,
              const Device& device) {
  if (step == 0) fail(ErrorKind::Runtime, "arange: step must be nonzero");
  if (!std::isfinite(start) || !std::isfinite(end))
    fail(ErrorKind::Runtime, "arange: unsupported range: ", start, " -> ", end);
  if ((step > 0 && end < start) || (step < 0 && end > start))
    fail(ErrorKind::Runtime, "arange: upper bound and larger bound inconsistent with step sign");
  // In double first: a tiny step or a huge range would overflow the integer count.
  const double count = std::ceil((end - start) / step);
  if (!(count <= 0x1p60))
    fail(ErrorKind::Runtime, "arange: invalid size ", count, " for the range ", start, " -> ", end,
         " by ", step);
  const int64_t n = static_cast<int64_t>(count);
  bool integral = start == std::floor(start) && end == std::floor(end) && step == std::floor(step);
  DType t = dtype ? *dtype : integral ? DType::Int64 : default_float();
  // Computed on the host in double (exact for integers), then placed on the device.
  std::vector<unsigned char> buf(static_cast<size_t>(n) * dtype_size(t));
  for (int64_t i = 0; i < n; ++i) {
    double v = start + static_cast<double>(i) * step;
    store_from_double(buf.data() + i * dtype_size(t), t, v);
  }
  return from_host(buf.data(), t, {n}, device);
}

Tensor linspace(double start, double end, int64_t steps, DType dtype, const Device& device) {
  if (steps < 0)
    fail(ErrorKind::Runtime, "linspace: number of steps must be non-negative, got ", steps);
  check_extent(Shape{steps}, "linspace");
  std::vector<unsigned char> buf(static_cast<size_t>(steps) * dtype_size(dtype));
  double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0;
  for (int64_t i = 0; i < steps; ++i) {
    // Symmetric evaluation as in PyTorch: the second half counts back from `end`. One step is
    // `start` alone (PyTorch), which the second half's formula would make `end`.
    double v = i < steps / 2 || steps == 1 ? start + step * static_cast<double>(i)
                                           : end - step * static_cast<double>(steps - 1 - i);
    store_from_double(buf.data() + i * dtype_size(dtype), dtype, v);
  }
  return from_host(buf.data(), dtype, {steps}, device);
}

Tensor eye(int64_t n, std::optional<int64_t> m_opt, DType dtype, const Device& device) {
  int64_t m = m_opt ? *m_opt : n;
  if (n < 0 || m < 0)
    fail(ErrorKind::Runtime, "eye: n and m must be non-negative, got ", n, " and ", m);
  check_extent(Shape{n, m}, "eye");
  std::vector<unsigned char> buf(static_cast<size_t>(n * m) * dtype_size(dtype), 0);
  for (int64_t i = 0; i < std::min(n, m); ++i) {
    store_from_double(buf.data() + (i * m + i) * dtype_size(dtype), dtype, 1.0);
  }
  return from_host(buf.data(), dtype, {n, m}, device);
}

Tensor rand(Shape shape, DType dtype, const Device& device) {
  check_shape(shape, "rand");
  if (!is_floating(dtype))
    fail(ErrorKind::Type, "rand: expected a floating dtype, got ", dtype_name(dtype));
  auto [seed, off] = next_draw(numel(shape));
  DType gen_t = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor u = traced(uniform_node(shape, gen_t, 0, seed, off), device);
  return dtype == gen_t ? u : cast(u, dtype);
}

Tensor randn(Shape shape, DType dtype, const Device& device) {
  check_shape(shape, "randn");
  if (!is_floating(dtype))
    fail(ErrorKind::Type, "randn: expected a floating dtype, got ", dtype_name(dtype));
  // Box-Muller over two independent streams of the same counters.
  auto [seed, off] = next_draw(numel(shape));
  DType t = dtype == DType::Float64 ? DType::Float64 : DType::Float32;
  Tensor u1 = traced(uniform_node(shape, t, 0, seed, off), device);
  Tensor u2 = traced(uniform_node(shape, t, 1, seed, off), device);
  Tensor r = lt::mul(rsub(u1, 1.0).log(), -2.0).sqrt();  // 1 - u1 lies in (0, 1]: log is finite
  Tensor z = r * (u2 * (2.0 * std::numbers::pi)).cos();
  return dtype == t ? z : cast(z, dtype);
}

Tensor randint(int64_t low, int64_t high, Shape shape, DType dtype, const Device& device) {
  if (high <= low)
    fail(ErrorKind::Runtime, "randint: expected low < high, got low=", low, " high=", high);
  Tensor u = rand(std::move(shape), DType::Float64, device);
  // The range in double: high - low in int64 overflows for ranges wider than 2^63.
  Tensor v = (u * (static_cast<double>(high) - static_cast<double>(low))).floor() +
             static_cast<double>(low);
  return cast(v, dtype);
}

Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), t.dtype(), t.device()); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), t.dtype(), t.device()); }
Tensor full_like(const Tensor& t, Scalar v) { return full(t.shape(), v, t.dtype(), t.device()); }
Tensor rand_like(const Tensor& t) { return rand(t.shape(), t.dtype(), t.device()); }
Tensor randn_like(const Tensor& t) { return randn(t.shape(), t.dtype(), t.device()); }

}  // namespace lt
