// Non-template rules of the reference interpreter: leaves, rand, cast, logical_not, where,
// reductions and movement.
#include "backends/reference/kernels.h"

#include <cmath>
#include <limits>
#include <string>

#include "ir/half.h"
#include "lowering/loop_ir.h"

namespace lt::ref {
namespace {

std::string where_am_i(const Ctx& c) {
  return "reference: node " + std::to_string(c.index) + " (" + std::string(op_name(c.node.op)) +
         ")";
}

// Fills the output with one value, as the node's dtype.
void fill(Ctx& c, double fv, int64_t iv) {
  auto n = static_cast<size_t>(numel(c.out.shape));
  if (c.out.floating())
    c.out.f.assign(n, fv);
  else
    c.out.i.assign(n, iv);
}

const RunInput& run_input(const Ctx& c) {
  int k = c.node.input_index;
  if (k < 0 || static_cast<size_t>(k) >= c.inputs.size())
    fail(ErrorKind::Runtime, where_am_i(c), ": input_index ", k, " is out of range (the run has ",
         c.inputs.size(), " inputs)");
  return c.inputs[static_cast<size_t>(k)];
}

// Copies (gathers) `a` into the output through per-output-dimension strides.
void gather(Ctx& c, const Value& a, const Strides& st) {
  const auto n = static_cast<size_t>(numel(c.out.shape));
  auto run = [&](const auto& src, auto& dst) {
    dst.resize(n);
    strided_loop<1>(c.out.shape, {&st},
                    [&](int64_t o, const std::array<int64_t, 1>& off) { dst[o] = src[off[0]]; });
  };
  if (a.floating())
    run(a.f, c.out.f);
  else
    run(a.i, c.out.i);
}

// Accumulates `a` into acc (one entry per output element) over the axes in attrs.ints.
template <class T, class Combine>
void reduce(const Ctx& c, const std::vector<T>& a, std::vector<T>& acc, T init, Combine combine) {
  const Shape& s = c.in[0]->shape;
  const auto r = static_cast<int64_t>(s.size());
  std::vector<bool> red(s.size(), false);
  const std::string name(op_name(c.node.op));
  for (int64_t ax : c.node.attrs.ints)
    if (r > 0) red[static_cast<size_t>(normalize_axis(ax, r, name.c_str()))] = true;
  // Output strides over the input's dims: 0 along reduced dims (keepdim does not move elements).
  Strides ost(s.size(), 0);
  int64_t stride = 1, out_n = 1;
  for (size_t d = s.size(); d-- > 0;) {
    if (red[d]) continue;
    ost[d] = stride;
    stride *= s[d];
    out_n *= s[d];
  }
  if (out_n != numel(c.out.shape))
    fail(ErrorKind::Runtime, where_am_i(c), ": output shape ", shape_str(c.out.shape),
         " does not match axes ", shape_str(c.node.attrs.ints), " of input ", shape_str(s));
  acc.assign(static_cast<size_t>(out_n), init);
  strided_loop<1>(s, {&ost}, [&](int64_t o, const std::array<int64_t, 1>& off) {
    acc[off[0]] = combine(acc[off[0]], a[o]);
  });
}

// NaN-propagating max/min (PyTorch): a NaN anywhere makes the result NaN.
double fmax_nan(double a, double b) { return (std::isnan(a) || a > b) ? a : b; }
double fmin_nan(double a, double b) { return (std::isnan(a) || a < b) ? a : b; }

}  // namespace

[[noreturn]] void wrong_dtype(const Ctx& c, const Value& operand) {
  fail(ErrorKind::Type, where_am_i(c), ": no rule for operand dtype ", dtype_name(operand.dtype),
       " (result ", dtype_name(c.out.dtype), ")");
}

Strides broadcast_strides(const Shape& in, const Shape& out) {
  if (in.size() > out.size())
    fail(ErrorKind::Runtime, "reference: shape ", shape_str(in), " does not broadcast to ",
         shape_str(out));
  const Strides cs = contiguous_strides(in);
  const size_t lead = out.size() - in.size();
  Strides st(out.size(), 0);
  for (size_t d = 0; d < in.size(); ++d) {
    if (in[d] == out[lead + d])
      st[lead + d] = in[d] == 1 ? 0 : cs[d];
    else if (in[d] != 1)
      fail(ErrorKind::Runtime, "reference: shape ", shape_str(in), " does not broadcast to ",
           shape_str(out));
  }
  return st;
}

void eval_param(Ctx& c) {
  const RunInput& ri = run_input(c);
  if (!ri.buffer)
    fail(ErrorKind::Runtime, where_am_i(c), ": input ", c.node.input_index, " has no buffer");
  load_buffer(*ri.buffer, c.out);
}

// A runtime scalar: `scalar` for floating dtypes, the exact `scalar_i` for integral ones; broadcast
// if the node is not 0-d.
void eval_scalar(Ctx& c) {
  const RunInput& ri = run_input(c);
  fill(c, ri.scalar, ri.scalar_i);
}

void eval_constant(Ctx& c) {
  double v = c.node.attrs.value;
  fill(c, v, c.out.dtype == DType::Bool ? int64_t{v != 0} : double_to_int64(v));
}

void eval_iota(Ctx& c) {
  const auto n = static_cast<size_t>(numel(c.out.shape));
  c.out.i.resize(n);
  for (size_t k = 0; k < n; ++k) c.out.i[k] = static_cast<int64_t>(k);
}

// Element i (row-major) is the shared counter-based generator at counter i.
void eval_rand(Ctx& c) {
  const Value &seed = *c.in[0], &offset = *c.in[1];
  if (seed.floating() || offset.floating() || seed.i.size() != 1 || offset.i.size() != 1)
    fail(ErrorKind::Type, where_am_i(c), ": seed and offset must be 0-d integers");
  if (!c.out.floating()) wrong_dtype(c, c.out);
  const auto n = static_cast<size_t>(numel(c.out.shape));
  c.out.f.resize(n);
  for (size_t k = 0; k < n; ++k)
    c.out.f[k] = loop::rand_uniform(seed.i[0], offset.i[0], static_cast<int64_t>(k),
                                    c.node.attrs.stream, c.out.dtype);
}

// Floating -> integer truncates toward zero (NaN/out of range -> 0) and wraps to the width;
// anything -> bool is x != 0 (so 0.5 and NaN are true).
void eval_cast(Ctx& c) {
  const Value& a = *c.in[0];
  const size_t n = a.floating() ? a.f.size() : a.i.size();
  const DType t = c.out.dtype;
  if (c.out.floating()) {
    c.out.f.resize(n);
    for (size_t k = 0; k < n; ++k) c.out.f[k] = a.floating() ? a.f[k] : static_cast<double>(a.i[k]);
  } else {
    c.out.i.resize(n);
    for (size_t k = 0; k < n; ++k) {
      if (!a.floating())
        c.out.i[k] = a.i[k];
      else
        c.out.i[k] = t == DType::Bool ? int64_t{a.f[k] != 0} : double_to_int64(a.f[k]);
    }
  }
}

void eval_where(Ctx& c) {
  const Value &cond = *c.in[0], &a = *c.in[1], &b = *c.in[2];
  if (cond.floating()) wrong_dtype(c, cond);
  if (a.floating() != b.floating() || a.floating() != c.out.floating()) wrong_dtype(c, b);
  const Strides sc = broadcast_strides(cond.shape, c.out.shape),
                sa = broadcast_strides(a.shape, c.out.shape),
                sb = broadcast_strides(b.shape, c.out.shape);
  const auto n = static_cast<size_t>(numel(c.out.shape));
  auto run = [&](const auto& av, const auto& bv, auto& ov) {
    ov.resize(n);
    strided_loop<3>(c.out.shape, {&sc, &sa, &sb},
                    [&](int64_t o, const std::array<int64_t, 3>& off) {
                      ov[o] = cond.i[off[0]] ? av[off[1]] : bv[off[2]];
                    });
  };
  if (a.floating())
    run(a.f, b.f, c.out.f);
  else
    run(a.i, b.i, c.out.i);
}

// Floats accumulate in double, integers in int64 with wrap-around (finalize wraps to the width).
void eval_reduce_sum(Ctx& c) {
  const Value& a = *c.in[0];
  if (a.floating())
    reduce<double>(c, a.f, c.out.f, 0.0, [](double x, double y) { return x + y; });
  else
    reduce<int64_t>(c, a.i, c.out.i, 0, wrap_add);
}

void eval_reduce_prod(Ctx& c) {
  const Value& a = *c.in[0];
  if (a.floating())
    reduce<double>(c, a.f, c.out.f, 1.0, [](double x, double y) { return x * y; });
  else
    reduce<int64_t>(c, a.i, c.out.i, 1, wrap_mul);
}

// Max/min start from -inf/+inf (the lowest/highest int64); the shape rule rejects empty inputs.
void eval_reduce_max(Ctx& c) {
  const Value& a = *c.in[0];
  if (a.floating())
    reduce<double>(c, a.f, c.out.f, -std::numeric_limits<double>::infinity(), fmax_nan);
  else
    reduce<int64_t>(c, a.i, c.out.i, std::numeric_limits<int64_t>::min(),
                    [](int64_t x, int64_t y) { return x > y ? x : y; });
}

void eval_reduce_min(Ctx& c) {
  const Value& a = *c.in[0];
  if (a.floating())
    reduce<double>(c, a.f, c.out.f, std::numeric_limits<double>::infinity(), fmin_nan);
  else
    reduce<int64_t>(c, a.i, c.out.i, std::numeric_limits<int64_t>::max(),
                    [](int64_t x, int64_t y) { return x < y ? x : y; });
}

// Row-major order is kept: the elements are the operand's, in the same order.
void eval_reshape(Ctx& c) {
  const Value& a = *c.in[0];
  if (numel(a.shape) != numel(c.out.shape))
    fail(ErrorKind::Runtime, where_am_i(c), ": cannot reshape ", shape_str(a.shape), " to ",
         shape_str(c.out.shape));
  c.out.f = a.f;
  c.out.i = a.i;
}

// Output dim d is input dim perm[d].
void eval_permute(Ctx& c) {
  const Value& a = *c.in[0];
  const Shape& perm = c.node.attrs.ints;
  if (perm.size() != a.shape.size() || perm.size() != c.out.shape.size())
    fail(ErrorKind::Runtime, where_am_i(c), ": permutation ", shape_str(perm), " does not fit ",
         shape_str(a.shape));
  const Strides cs = contiguous_strides(a.shape);
  Strides st(perm.size());
  for (size_t d = 0; d < perm.size(); ++d) {
    if (perm[d] < 0 || perm[d] >= static_cast<int64_t>(perm.size()) ||
        a.shape[perm[d]] != c.out.shape[d])
      fail(ErrorKind::Runtime, where_am_i(c), ": bad permutation ", shape_str(perm), " of ",
           shape_str(a.shape));
    st[d] = cs[perm[d]];
  }
  gather(c, a, st);
}

// Right-aligned; size-1 and new leading dims repeat.
void eval_expand(Ctx& c) {
  const Value& a = *c.in[0];
  gather(c, a, broadcast_strides(a.shape, c.out.shape));
}

// out[i] = a[start + step*i] per dim; bounds are re-checked here (the oracle trusts no one).
void eval_slice(Ctx& c) {
  const Value& a = *c.in[0];
  const auto& s = c.node.attrs.ints;
  if (s.size() != 3 * a.shape.size() || c.out.shape.size() != a.shape.size())
    fail(ErrorKind::Runtime, where_am_i(c), ": slice attrs ", shape_str(s), " do not fit ",
         shape_str(a.shape));
  const Strides cs = contiguous_strides(a.shape);
  Strides st(a.shape.size());
  int64_t base = 0;
  for (size_t d = 0; d < a.shape.size(); ++d) {
    int64_t start = s[3 * d], step = s[3 * d + 1], size = s[3 * d + 2];
    int64_t last = start + step * (size - 1);
    if (size != c.out.shape[d] ||
        (size > 0 && (start < 0 || start >= a.shape[d] || last < 0 || last >= a.shape[d])))
      fail(ErrorKind::Runtime, where_am_i(c), ": slice ", shape_str(s), " reads outside ",
           shape_str(a.shape));
    st[d] = cs[d] * step;
    base += cs[d] * start;
  }
  const auto n = static_cast<size_t>(numel(c.out.shape));
  auto run = [&](const auto& src, auto& dst) {
    dst.resize(n);
    strided_loop<1>(c.out.shape, {&st}, [&](int64_t o, const std::array<int64_t, 1>& off) {
      dst[o] = src[base + off[0]];
    });
  };
  if (a.floating())
    run(a.f, c.out.f);
  else
    run(a.i, c.out.i);
}

void eval_concat(Ctx& c) {
  auto run = [&](auto member) {
    auto& dst = c.out.*member;
    dst.clear();
    dst.reserve(static_cast<size_t>(numel(c.out.shape)));
    for (const Value* x : c.in) dst.insert(dst.end(), (x->*member).begin(), (x->*member).end());
    if (static_cast<int64_t>(dst.size()) != numel(c.out.shape))
      fail(ErrorKind::Runtime, where_am_i(c), ": concat operands hold ", dst.size(),
           " elements, the result ", shape_str(c.out.shape));
  };
  if (c.out.floating())
    run(&Value::f);
  else
    run(&Value::i);
}

}  // namespace lt::ref

namespace lt::ref {
namespace {

// Walks the index of gather/scatter_add in row-major order, calling f(o, data_off, other_off, ok):
// o the index element, data_off the offset in `data` (the indexed tensor) of o's coordinates with
// the axis coordinate replaced by the index value (clamped, as the compiled kernels do), other_off
// the offset of o's own coordinates in `other` (src of scatter_add; gather passes the index's own
// shape), ok whether the value was in
// range. Out-of-range values never reach memory: the runtime's index check reports them.
template <class F>
void for_each_indexed(const Ctx& c, const Value& index, const Shape& data, const Shape& other,
                      F&& f) {
  const auto rank = static_cast<int64_t>(data.size());
  if (c.node.attrs.ints.size() != 1 || static_cast<int64_t>(index.shape.size()) != rank ||
      static_cast<int64_t>(other.size()) != rank || index.floating())
    fail(ErrorKind::Runtime, where_am_i(c), ": malformed index ", shape_str(index.shape), " for ",
         shape_str(data));
  const int64_t axis = normalize_axis(c.node.attrs.ints[0], rank, "gather");
  const Strides ds = contiguous_strides(data), os = contiguous_strides(other);
  for (int64_t d = 0; d < rank; ++d)
    if (index.shape[d] > other[d] || (d != axis && index.shape[d] > data[d]))
      fail(ErrorKind::Runtime, where_am_i(c), ": index ", shape_str(index.shape), " does not fit ",
           shape_str(data));
  const int64_t n = numel(index.shape), hi = data[axis] - 1;
  std::vector<int64_t> at(static_cast<size_t>(rank), 0);
  for (int64_t o = 0; o < n; ++o) {
    const int64_t v = index.i[o];
    const bool ok = v >= 0 && v <= hi;
    int64_t doff = 0, ooff = 0;
    for (int64_t d = 0; d < rank; ++d) {
      doff += (d == axis ? (ok ? v : 0) : at[d]) * ds[d];
      ooff += at[d] * os[d];
    }
    f(o, doff, ooff, ok);
    for (int64_t d = rank; d-- > 0;)
      if (++at[d] < index.shape[d])
        break;
      else
        at[d] = 0;
  }
}

}  // namespace

void eval_gather(Ctx& c) {
  const Value &src = *c.in[0], &index = *c.in[1];
  auto run = [&](const auto& s, auto& out) {
    out.assign(static_cast<size_t>(numel(index.shape)), 0);
    for_each_indexed(c, index, src.shape, index.shape,
                     [&](int64_t o, int64_t at, int64_t, bool ok) {
                       if (ok) out[o] = s[at];
                     });
  };
  if (src.floating())
    run(src.f, c.out.f);
  else
    run(src.i, c.out.i);
}

void eval_scatter_add(Ctx& c) {
  const Value &base = *c.in[0], &index = *c.in[1], &src = *c.in[2];
  if (base.floating() != src.floating()) wrong_dtype(c, src);
  // Sums in double (floats, rounded once by the interpreter) or wrapping int64.
  if (base.floating()) {
    c.out.f.assign(base.f.begin(), base.f.end());
    for_each_indexed(c, index, base.shape, src.shape,
                     [&](int64_t, int64_t at, int64_t from, bool ok) {
                       if (ok) c.out.f[at] += src.f[from];
                     });
  } else {
    c.out.i.assign(base.i.begin(), base.i.end());
    for_each_indexed(c, index, base.shape, src.shape,
                     [&](int64_t, int64_t at, int64_t from, bool ok) {
                       if (ok) c.out.i[at] = wrap_add(c.out.i[at], src.i[from]);
                     });
  }
}

}  // namespace lt::ref
