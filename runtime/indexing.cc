#include "runtime/indexing.h"

#include <algorithm>
#include <list>
#include <map>
#include <mutex>
#include <string>
#include <tuple>

#include "ir/error.h"
#include "runtime/index_check.h"
#include "runtime/memory_views.h"
#include "runtime/ops.h"
#include "runtime/tape.h"
#include "runtime/tensor_impl.h"
#include "runtime/views.h"

namespace lt {
namespace {

int64_t norm_dim(int64_t dim, int64_t rank, const char* op) {
  return normalize_axis(dim, rank, op);
}

// Sums of one-hot selections run in a dtype that can be summed exactly (bool as int64).
DType sum_dtype(DType t) { return is_bool(t) ? DType::Int64 : t; }

void check_index_dtype(const char* op, const Tensor& index) {
  if (is_floating(index.dtype()) || is_bool(index.dtype()))
    fail(ErrorKind::Runtime, op, ": expected an integer index tensor, got ",
         dtype_name(index.dtype()), " (shape ", shape_str(index.shape()), ")");
}

// Range-checks the index (runtime/index_check.h): host values before the op, anything else after
// it, anchored on its result (deferred to the sync on a lazy device).
template <class F>
Tensor with_index_check(const char* op, const Tensor& index, int64_t bound, int64_t dim,
                        const Shape& of, F&& compute) {
  check_index_dtype(op, index);
  IndexCheckSpec spec{op, 0, bound, dim, of};
  const bool known = index_values_known(index);
  if (known) check_index_values(spec, index, Tensor());
  Tensor out = compute();
  if (!known) check_index_values(spec, index, out);
  return out;
}

// a with `dim` moved last.
Tensor dim_last(const Tensor& a, int64_t dim) {
  std::vector<int64_t> p;
  for (int64_t d = 0; d < a.dim(); ++d)
    if (d != dim) p.push_back(d);
  p.push_back(dim);
  return a.permute(p);
}
// Inverse of dim_last for a tensor of the same rank.
Tensor dim_back(const Tensor& a, int64_t dim) {
  std::vector<int64_t> p;
  int64_t r = a.dim();
  for (int64_t d = 0; d < r; ++d) p.push_back(d < dim ? d : d == dim ? r - 1 : d - 1);
  return a.permute(p);
}

// A position tensor shaped to broadcast along `dim` of a rank-`rank` tensor.
Tensor positions_along(int64_t n, int64_t dim, int64_t rank, const Device& d) {
  std::vector<int64_t> shape(static_cast<size_t>(rank), 1);
  shape[dim] = n;
  return positions(n, d).reshape(shape);
}

// x (n long along `dim`, n > 0) placed at [before, before + n) of a `total`-long result, whose
// other positions hold x's values tiled (pad masks them, cat's where chain never picks them): x
// tiled along dim and sliced from `shift`, result[i] = x[(i - before) mod n], every read in bounds
// and movement ops only.
Tensor placed_along(const Tensor& x, int64_t dim, int64_t before, int64_t total) {
  const int64_t n = x.shape()[dim];
  const int64_t shift = ((n - before % n) % n);
  const int64_t reps = (shift + total + n - 1) / n;
  std::vector<int64_t> exp_shape, tiled_shape;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d == dim) exp_shape.push_back(reps);
    exp_shape.push_back(x.shape()[d]);
    tiled_shape.push_back(d == dim ? reps * n : x.shape()[d]);
  }
  Tensor tiled = x.unsqueeze(dim).expand(exp_shape).reshape(tiled_shape);
  return slice(tiled, dim, shift, shift + total, 1);
}

}  // namespace

Tensor slice_prim(const Tensor& a, std::vector<int64_t> sss) {
  bool identity = sss.size() == 3 * a.shape().size();
  for (size_t d = 0; identity && d < a.shape().size(); ++d)
    identity = sss[3 * d] == 0 && sss[3 * d + 1] == 1 && sss[3 * d + 2] == a.shape()[d];
  if (identity) return a;
  return slice_node(a, std::move(sss));
}

namespace {

// 0, step, 2 step, ... (`count` of them) as int64 device data, one tensor per (count, step,
// device) kept for the process (leaked: device memory must not be freed during static
// destruction), so a runtime-start slice reads the same input every call.
Tensor slice_positions(int64_t count, int64_t step, const Device& device) {
  static std::mutex mu;
  static auto* cache = new std::map<std::tuple<int64_t, int64_t, std::string>, Tensor>();
  std::lock_guard<std::mutex> lock(mu);
  if (cache->size() >= 1024) cache->clear();  // a bound; they are rebuilt on the next use
  Tensor& t = (*cache)[{count, step, device.str()}];
  if (!t.defined()) {
    NoGradGuard no_grad;
    t = arange(0, static_cast<double>(count * step), static_cast<double>(step), DType::Int64,
               device);
  }
  return t;
}

// Whether a slice reads its start at run time instead of from the graph: a slice at a nonzero
// start of device data (a corpus sliced at a moving offset: get_batch's data[i:i+T], in eager
// `cpu` one graph per op) would otherwise make a new graph, and a compile, per offset (issue 26
// item 7: 229 kernels for 109 offsets). Then the start is a run-time scalar, like a Python
// number, and the slice a gather at positions + start: one graph for every offset. Slices of
// computed values (a fused q/k/v split) and of tensors that need a gradient keep the start in
// the graph: their offsets do not move, and the affine slice fuses better and differentiates to
// a pad rather than a scatter.
// On an eager host device, a slice that shares its base's memory (runtime/memory_views.h) costs
// nothing at any offset: it keeps the static form.
bool start_at_run_time(const Tensor& a, int64_t dim, int64_t start, int64_t step, int64_t count) {
  return start != 0 && count > 0 && !a.is_pending() && !a.requires_grad() &&
         !slice_shares_memory(*a.impl(), dim, step, count);
}

Tensor slice_with_run_time_start(const Tensor& a, int64_t dim, int64_t start, int64_t step,
                                 int64_t count) {
  // The start is a Scalar leaf, a run-time input of the graph like a Python number, not part of
  // its key. Nodes, not ops: on eager `cpu` each op runs at once, and the index arithmetic as ops
  // of its own made a[1:5] cost 4.6 us instead of 1.6.
  NodePtr index = make_node(Op::Add, {slice_positions(count, step, a.device()).node(),
                                      make_int_scalar(DType::Int64, start)});
  return gather_vector(a, dim, std::move(index));
}

}  // namespace

Tensor slice(const Tensor& a, int64_t dim, std::optional<int64_t> start, std::optional<int64_t> end,
             int64_t step) {
  if (a.dim() == 0) fail(ErrorKind::Index, "slice: cannot slice a 0-d tensor");
  dim = norm_dim(dim, a.dim(), "slice");
  if (step <= 0)
    fail(ErrorKind::Runtime, "slice: step must be positive, got ", step, " (shape ",
         shape_str(a.shape()), ")");
  const int64_t n = a.shape()[dim];
  auto clampi = [n](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t{0}, n); };
  int64_t s = start ? clampi(*start) : 0, e = end ? clampi(*end) : n;
  int64_t size = e > s ? (e - s + step - 1) / step : 0;
  if (!size) s = 0;
  Tensor value = start_at_run_time(a, dim, s, step, size)
                     ? slice_with_run_time_start(a, dim, s, step, size)
                     : slice_dim_prim(a, dim, s, step, size);
  return link_view(a, value, {ViewStep::Kind::Slice, {}, {dim, s, step, size}});
}

Tensor slice_dim_prim(const Tensor& a, int64_t dim, int64_t start, int64_t step, int64_t count) {
  std::vector<int64_t> sss;
  for (int64_t d = 0; d < a.dim(); ++d) {
    if (d == dim)
      sss.insert(sss.end(), {start, step, count});
    else
      sss.insert(sss.end(), {0, 1, a.shape()[d]});
  }
  return slice_prim(a, std::move(sss));
}

Tensor narrow(const Tensor& a, int64_t dim, int64_t start, int64_t length) {
  dim = norm_dim(dim, a.dim(), "narrow");
  const int64_t n = a.shape()[dim];
  if (start < 0) start += n;
  if (start < 0 || length < 0 || start + length > n)
    fail(ErrorKind::Index, "narrow: start ", start, " and length ", length, " exceed dimension ",
         dim, " of size ", n, " (shape ", shape_str(a.shape()), ")");
  return slice(a, dim, start, start + length, 1);
}

Tensor select(const Tensor& a, int64_t dim, int64_t index) {
  dim = norm_dim(dim, a.dim(), "select");
  const int64_t n = a.shape()[dim];
  if (index < -n || index >= n)
    fail(ErrorKind::Index, "select: index ", index, " is out of range for dimension ", dim,
         " with size ", n, " (shape ", shape_str(a.shape()), ")");
  if (index < 0) index += n;
  Tensor row = slice(a, dim, index, index + 1, 1);
  // A row that shares its base's memory (runtime/memory_views.h) drops the dimension as data over
  // the same storage: no second traced op (half of an eager x[i]'s cost).
  const TensorImpl& r = *row.impl();
  if (r.storage && !r.pending && !row.requires_grad()) {
    Shape shape = r.shape;
    shape.erase(shape.begin() + dim);
    return link_view(row, Tensor(make_data_tensor(r.storage, r.dtype, std::move(shape), r.device)),
                     {ViewStep::Kind::Reshape});
  }
  return row.squeeze(dim);
}

Tensor flip(const Tensor& a, std::vector<int64_t> dims) {
  std::vector<bool> f(static_cast<size_t>(a.dim()), false);
  for (auto d : dims) {
    d = norm_dim(d, a.dim(), "flip");
    if (f[d])
      fail(ErrorKind::Runtime, "flip: dim ", d, " appears multiple times in ", shape_str(dims));
    f[d] = true;
  }
  std::vector<int64_t> sss;
  for (int64_t d = 0; d < a.dim(); ++d) {
    int64_t n = a.shape()[d];
    if (f[d] && n > 1)
      sss.insert(sss.end(), {n - 1, -1, n});
    else
      sss.insert(sss.end(), {0, 1, n});
  }
  return slice_prim(a, std::move(sss));
}

Tensor pad_dim(const Tensor& a, int64_t dim, int64_t before, int64_t after, double value) {
  dim = norm_dim(dim, a.dim(), "pad");
  Tensor x = a;
  const int64_t n0 = a.shape()[dim];
  // Bounded so that the sums below cannot overflow; no tensor is 2^60 long anyway.
  constexpr int64_t kMaxPad = int64_t{1} << 60;
  if (before < -kMaxPad || before > kMaxPad || after < -kMaxPad || after > kMaxPad)
    fail(ErrorKind::Runtime, "pad: padding (", before, ", ", after, ") of dimension ", dim,
         " is out of range (shape ", shape_str(a.shape()), ")");
  if (before < 0 || after < 0) {  // negative padding crops first
    int64_t lo = std::max<int64_t>(0, -before), hi = std::max<int64_t>(0, -after);
    if (lo + hi > n0)
      fail(ErrorKind::Runtime, "pad: cropping ", lo, " + ", hi, " exceeds dimension ", dim,
           " of size ", n0, " (shape ", shape_str(a.shape()), ")");
    x = narrow(x, dim, lo, n0 - lo - hi);
    before = std::max<int64_t>(0, before);
    after = std::max<int64_t>(0, after);
  }
  if (before == 0 && after == 0) return x;
  EagerComposite composite;  // one graph on an eager device
  const int64_t n = x.shape()[dim], total = n + before + after;
  if (n == 0) {
    Shape s = x.shape();
    s[dim] = total;
    return composite.finish(full(s, fill_of(x.dtype(), value, "pad"), x.dtype(), x.device()) +
                            zeros_like(x).sum({dim}, true));  // keeps autograd/device
  }
  // Positions outside [before, before + n) are masked to `value`.
  Tensor shifted = placed_along(x, dim, before, total);
  Tensor inside = range_mask(total, dim, x.dim(), before, n, x.device());
  return composite.finish(where(inside, shifted, fill_of(x.dtype(), value, "pad")));
}

Tensor pad(const Tensor& a, const std::vector<int64_t>& pads, double value) {
  if (pads.size() % 2 || static_cast<int64_t>(pads.size() / 2) > a.dim())
    fail(ErrorKind::Runtime, "pad: padding length ", pads.size(),
         " must be even and at most 2 x rank of input ", shape_str(a.shape()));
  Tensor x = a;
  for (size_t i = 0; i < pads.size() / 2; ++i)
    x = pad_dim(x, a.dim() - 1 - static_cast<int64_t>(i), pads[2 * i], pads[2 * i + 1], value);
  return x;
}

Tensor cat(const std::vector<Tensor>& ts, int64_t dim) {
  if (ts.empty()) fail(ErrorKind::Runtime, "cat: expected a non-empty list of tensors");
  const Tensor& f = ts[0];
  if (f.dim() == 0)
    fail(ErrorKind::Runtime, "cat: zero-dimensional tensor (shape []) cannot be concatenated");
  dim = norm_dim(dim, f.dim(), "cat");
  DType t = f.dtype();
  int64_t total = 0;
  for (size_t i = 0; i < ts.size(); ++i) {
    const Tensor& x = ts[i];
    if (x.dim() != f.dim())
      fail(ErrorKind::Runtime, "cat: tensors must have the same number of dimensions: got ",
           shape_str(f.shape()), " and ", shape_str(x.shape()), " (tensor ", i, ")");
    for (int64_t d = 0; d < f.dim(); ++d)
      if (d != dim && x.shape()[d] != f.shape()[d])
        fail(ErrorKind::Runtime, "cat: sizes of tensors must match except in dimension ", dim,
             ": expected size ", f.shape()[d], " but got size ", x.shape()[d], " for tensor ", i,
             " (shapes ", shape_str(f.shape()), " and ", shape_str(x.shape()), ")");
    t = promote(t, x.dtype());
    total += x.shape()[dim];
  }
  if (ts.size() == 1) return f.to(t);
  EagerComposite composite;  // one graph on an eager device, not ~6 ops per piece
  Tensor out;
  {
    // One autograd node for the whole cat (below): through the rules of its ~6 ops per piece
    // (where, slice, expand, ...), a piece's gradient traced ~5 ops more than the one slice.
    NoGradGuard no_grad;
    // Each piece placed along the full length lands in its own range; a where chain picks it.
    Tensor pos = positions_along(total, dim, f.dim(), f.device());
    int64_t off = total;
    for (size_t i = ts.size(); i-- > 0;) {
      const Tensor x = ts[i].to(t);
      int64_t n = x.shape()[dim];
      off -= n;
      if (n == 0) continue;
      // Outside [off, off + n) `placed` holds tiled values: the where chain (later pieces picked
      // from off + n on, the first piece's range left) never picks them: no pad mask is needed.
      Tensor placed = placed_along(x, dim, off, total);
      out = out.defined() ? where(lt(pos, Scalar(off + n)), placed, out) : placed;
    }
    if (!out.defined()) {  // every piece empty
      Shape s = f.shape();
      s[dim] = 0;
      out = zeros(s, t, f.device());
    }
  }
  // Piece i's gradient is g's range of it (the engine casts it back to the piece's dtype).
  std::vector<int64_t> sizes;
  for (const Tensor& x : ts) sizes.push_back(x.shape()[dim]);
  record(out, ts, "CatBackward", [sizes, dim](const Tensor& g) {
    std::vector<Tensor> gs;
    int64_t off = 0;
    for (int64_t n : sizes) {
      gs.push_back(narrow(g, dim, off, n));
      off += n;
    }
    return gs;
  });
  return composite.finish(out);
}

Tensor concat(const std::vector<Tensor>& pieces) {
  if (pieces.empty()) fail(ErrorKind::Runtime, "concat: expected a non-empty list of tensors");
  NodeList ins;
  ins.reserve(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const Tensor& x = pieces[i];
    if (!x.defined()) fail(ErrorKind::Runtime, "concat: tensor ", i, " is undefined");
    if (x.dim() != 1 || x.dtype() != pieces[0].dtype() || !(x.device() == pieces[0].device()))
      fail(ErrorKind::Runtime, "concat: expected one-dimensional tensors of one dtype on one ",
           "device; tensor ", i, " is ", dtype_name(x.dtype()), " ", shape_str(x.shape()), " on ",
           x.device().str(), ", tensor 0 ", dtype_name(pieces[0].dtype()), " ",
           shape_str(pieces[0].shape()), " on ", pieces[0].device().str());
    ins.push_back(x.node());
  }
  Tensor out(make_tensor(make_node(Op::Concat, ins, Attrs{}), pieces[0].device()));
  record_op(Op::Concat, Attrs{}, out, ins, pieces);
  return out;
}

Tensor stack(const std::vector<Tensor>& ts, int64_t dim) {
  if (ts.empty()) fail(ErrorKind::Runtime, "stack: expected a non-empty list of tensors");
  dim = norm_dim(dim, ts[0].dim() + 1, "stack");
  std::vector<Tensor> u;
  for (size_t i = 0; i < ts.size(); ++i) {
    if (ts[i].shape() != ts[0].shape())
      fail(ErrorKind::Runtime, "stack: expects each tensor to be equal size, but got ",
           shape_str(ts[0].shape()), " at entry 0 and ", shape_str(ts[i].shape()), " at entry ", i);
    u.push_back(ts[i].unsqueeze(dim));
  }
  EagerComposite composite;
  return composite.finish(cat(u, dim));
}

std::vector<Tensor> split(const Tensor& a, int64_t size, int64_t dim) {
  dim = norm_dim(dim, a.dim(), "split");
  if (size <= 0) fail(ErrorKind::Runtime, "split: split_size must be positive, got ", size);
  std::vector<Tensor> r;
  const int64_t n = a.shape()[dim];
  for (int64_t s = 0; s < n || (n == 0 && r.empty()); s += size)
    r.push_back(slice(a, dim, s, std::min(n, s + size), 1));
  return r;
}

std::vector<Tensor> chunk(const Tensor& a, int64_t chunks, int64_t dim) {
  if (chunks <= 0) fail(ErrorKind::Runtime, "chunk: chunks must be positive, got ", chunks);
  dim = norm_dim(dim, a.dim(), "chunk");
  const int64_t n = a.shape()[dim];
  return split(a, std::max<int64_t>(1, (n + chunks - 1) / chunks), dim);
}

Tensor positions(int64_t n, const Device& device) {
  // On a lazy device an iota node: kernels compute the positions where they read them (a
  // materialized arange was read back per row: cross_entropy's one-hot gradient over a 50k
  // vocabulary streamed 400 KB of positions for each of its 8192 rows).
  if (device.is_lazy()) return Tensor(make_tensor(make_iota(n), device));
  // Elsewhere a small LRU of materialized aranges: the same (n, device) reuses one buffer, so
  // graphs see the same input data each step and nothing is uploaded again.
  static std::mutex mu;
  static std::list<std::pair<std::pair<int64_t, std::string>, Tensor>> lru;
  std::lock_guard<std::mutex> g(mu);
  auto key = std::make_pair(n, device.str());
  for (auto it = lru.begin(); it != lru.end(); ++it)
    if (it->first == key) {
      lru.splice(lru.begin(), lru, it);
      return it->second;
    }
  std::vector<int64_t> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[i] = i;
  Tensor t = from_host(v.data(), DType::Int64, {n}, device);
  lru.emplace_front(key, t);
  if (lru.size() > 64) lru.pop_back();
  return t;
}

Tensor range_mask(int64_t total, int64_t dim, int64_t rank, int64_t begin, int64_t n,
                  const Device& device) {
  // An LRU as positions()': a slice's gradient (a pad) each step reads the same input. Computed
  // in the graph instead (positions compared with both ends, and-ed), the mask was 4 of the 8 ops
  // traced per pad: an LSTM step's backward pads 5 times (its 4 gate chunks, its time step).
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, std::string>;
  static std::mutex mu;
  static std::list<std::pair<Key, Tensor>> lru;
  Key key{total, dim, rank, begin, n, device.str()};
  std::lock_guard<std::mutex> g(mu);
  for (auto it = lru.begin(); it != lru.end(); ++it)
    if (it->first == key) {
      lru.splice(lru.begin(), lru, it);
      return it->second;
    }
  std::vector<uint8_t> v(static_cast<size_t>(total), 0);
  for (int64_t i = std::max<int64_t>(begin, 0); i < std::min(begin + n, total); ++i) v[i] = 1;
  Shape shape(static_cast<size_t>(rank), 1);
  shape[dim] = total;
  Tensor t = from_host(v.data(), DType::Bool, shape, device);
  lru.emplace_front(key, t);
  if (lru.size() > 256) lru.pop_back();
  return t;
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  if (index.dtype() != DType::Int64)
    fail(ErrorKind::Runtime,
         "one_hot: one_hot is only applicable to index tensor of type int64, got ",
         dtype_name(index.dtype()));
  if (num_classes < 0) {
    auto v = index.to_vector<int64_t>();  // PyTorch reads the data too (a sync on lazy)
    num_classes = v.empty() ? 0 : size_add(*std::max_element(v.begin(), v.end()), 1, "one_hot");
  }
  Shape out = index.shape();
  out.push_back(num_classes);
  check_extent(out, "one_hot");  // before positions() makes num_classes values on the host
  return with_index_check("one_hot", index, num_classes, -1, index.shape(), [&] {
    return cast(eq(index.unsqueeze(-1), positions(num_classes, index.device())), DType::Int64);
  });
}

namespace {

// torch.gather/scatter_add take int64 indices only (index_select and embedding also take int32).
void require_int64(const char* op, const Tensor& a, const Tensor& index) {
  if (index.dtype() != DType::Int64)
    fail(ErrorKind::Runtime, op, "(): expected dtype int64 for index, got ",
         dtype_name(index.dtype()), " (input ", shape_str(a.shape()), ", index ",
         shape_str(index.shape()), ")");
}

}  // namespace

Tensor gather(const Tensor& a, int64_t dim, const Tensor& index) {
  if (a.dim() == 0 && index.dim() == 0) {  // PyTorch treats 0-d tensors as 1-element vectors here
    normalize_axis(dim, 1, "gather");
    return gather(a.reshape({1}), 0, index.reshape({1})).reshape({});
  }
  dim = norm_dim(dim, a.dim(), "gather");
  require_int64("gather", a, index);
  if (index.dim() != a.dim())
    fail(ErrorKind::Runtime,
         "gather: index tensor must have the same number of dimensions as input tensor (input ",
         shape_str(a.shape()), ", index ", shape_str(index.shape()), ")");
  for (int64_t d = 0; d < a.dim(); ++d)
    if (d != dim && index.shape()[d] > a.shape()[d])
      fail(ErrorKind::Runtime, "gather: size of index ", shape_str(index.shape()),
           " does not fit input ", shape_str(a.shape()), " at dimension ", d);
  return with_index_check("gather", index, a.shape()[dim], dim, a.shape(),
                          [&] { return gather_node(a, dim, index); });
}

Tensor scatter_add(const Tensor& a, int64_t dim, const Tensor& index, const Tensor& src) {
  if (a.dim() == 0 && index.dim() == 0 && src.dim() <= 1) {
    normalize_axis(dim, 1, "scatter_add");
    return scatter_add(a.reshape({1}), 0, index.reshape({1}), src.reshape({-1})).reshape({});
  }
  dim = norm_dim(dim, a.dim(), "scatter_add");
  require_int64("scatter_add", a, index);
  if (index.dim() != a.dim() || src.dim() != a.dim())
    fail(ErrorKind::Runtime, "scatter_add: index and src must have the rank of input (input ",
         shape_str(a.shape()), ", index ", shape_str(index.shape()), ", src ",
         shape_str(src.shape()), ")");
  for (int64_t d = 0; d < a.dim(); ++d)
    if (index.shape()[d] > src.shape()[d] || (d != dim && index.shape()[d] > a.shape()[d]))
      fail(ErrorKind::Runtime, "scatter_add: index ", shape_str(index.shape()),
           " does not fit input ", shape_str(a.shape()), " and src ", shape_str(src.shape()),
           " at dimension ", d);
  return with_index_check("scatter_add", index, a.shape()[dim], dim, a.shape(), [&] {
    // bool sums as int64 (any hit makes it true); other dtypes add in their own type.
    const DType wt = sum_dtype(a.dtype());
    return scatter_add_node(a.to(wt), dim, index, src.to(wt)).to(a.dtype());
  });
}

Tensor index_select(const Tensor& a, int64_t dim, const Tensor& index) {
  if (index.dim() > 1)
    fail(ErrorKind::Index, "index_select: index must be a vector, got shape ",
         shape_str(index.shape()));
  if (a.dim() == 0) {
    normalize_axis(dim, 1, "index_select");
    return index_select(a.reshape({1}), 0, index)
        .reshape(std::vector<int64_t>(static_cast<size_t>(index.dim()), 1));
  }
  dim = norm_dim(dim, a.dim(), "index_select");
  return with_index_check("index_select", index, a.shape()[dim], dim, a.shape(),
                          [&] { return gather_vector(a, dim, index.node()); });
}

Tensor embedding(const Tensor& weight, const Tensor& index) {
  if (weight.dim() != 2)
    fail(ErrorKind::Runtime, "embedding: weight must be 2-D, got ", shape_str(weight.shape()));
  return with_index_check("embedding", index, weight.shape()[0], 0, weight.shape(), [&] {
    // Rows of weight gathered by the flattened index; the gradient scatters back (gather's VJP).
    std::vector<int64_t> shape = to_vector(index.shape());
    shape.push_back(weight.shape()[1]);
    return gather_vector(weight, 0, index.node()).reshape(shape);
  });
}

Tensor masked_fill(const Tensor& a, const Tensor& mask, double value) {
  if (mask.dtype() != DType::Bool)
    fail(ErrorKind::Runtime, "masked_fill: expected a bool mask, got ", dtype_name(mask.dtype()));
  return where(mask, fill_of(a.dtype(), value, "masked_fill"), a);
}

namespace {
Tensor triangle(const Tensor& a, int64_t k, bool lower, const char* op) {
  if (a.dim() < 2)
    fail(ErrorKind::Runtime, op, ": input tensor must have at least 2 dimensions, got ",
         shape_str(a.shape()));
  const int64_t r = a.dim(), n = a.shape()[r - 2], m = a.shape()[r - 1];
  Tensor rows = positions(n, a.device()).reshape({n, 1});
  Tensor cols = positions(m, a.device()).reshape({1, m});
  Tensor diff = cols - rows;  // keep j - i <= k (lower) or >= k (upper)
  Tensor keep = lower ? le(diff, Scalar(k)) : ge(diff, Scalar(k));
  return where(keep, a, fill_of(a.dtype(), 0, op));
}
}  // namespace

Tensor tril(const Tensor& a, int64_t diagonal) { return triangle(a, diagonal, true, "tril"); }
Tensor triu(const Tensor& a, int64_t diagonal) { return triangle(a, diagonal, false, "triu"); }

Tensor cumsum(const Tensor& a, int64_t dim) {
  dim = norm_dim(dim, a.dim(), "cumsum");  // a 0-dim tensor takes dim 0 or -1 (PyTorch)
  if (a.dim() == 0) return a;
  const int64_t n = a.shape()[dim];
  DType t = is_floating(a.dtype()) ? a.dtype() : DType::Int64;
  // out[.., i] = sum_j a[.., j] * (j <= i): a masked row reduction, fused into one kernel.
  Tensor al = dim_last(a.to(t), dim).unsqueeze(-2);  // [..., 1, N]
  Tensor keep = le(positions(n, a.device()).reshape({1, n}),
                   positions(n, a.device()).reshape({n, 1}));     // [N(i), N(j)]
  Tensor s = where(keep, al, fill_of(t, 0, "cumsum")).sum({-1});  // [..., N]
  return dim_back(s, dim);
}

namespace {
// The first position where a equals its extreme along dim: min over positions of the hits.
Tensor arg_extreme(const Tensor& a, std::optional<int64_t> dim, bool keepdim, bool max,
                   const char* op) {
  if (is_bool(a.dtype()))
    fail(ErrorKind::Runtime, op, ": not implemented for bool (shape ", shape_str(a.shape()), ")");
  if (!dim) {
    Tensor flat = a.reshape({-1});
    Tensor r = arg_extreme(flat, 0, false, max, op);
    if (keepdim) return r.reshape(std::vector<int64_t>(static_cast<size_t>(a.dim()), 1));
    return r;
  }
  int64_t d = norm_dim(*dim, a.dim(), op);  // a 0-dim tensor takes dim 0 or -1 (PyTorch)
  if (a.dim() == 0) return zeros({}, DType::Int64, a.device());
  const int64_t n = a.shape()[d];
  if (n == 0)
    fail(ErrorKind::Index, op, ": expected reduction dim ", d, " to have non-zero size (shape ",
         shape_str(a.shape()), ")");
  Tensor ext = max ? a.amax({d}, true) : a.amin({d}, true);
  // NaN is the extreme, as in PyTorch: a NaN position counts as a hit.
  Tensor hit = is_floating(a.dtype()) ? logical_or(eq(a, ext), ne(a, a)) : eq(a, ext);
  Tensor pos = positions_along(n, d, a.dim(), a.device());
  return where(hit, pos, Scalar(n)).amin({d}, keepdim);
}
}  // namespace

Tensor argmax(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(a, dim, keepdim, true, "argmax");
}
Tensor argmin(const Tensor& a, std::optional<int64_t> dim, bool keepdim) {
  return arg_extreme(a, dim, keepdim, false, "argmin");
}

}  // namespace lt
