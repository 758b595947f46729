#include "lowering/fuse.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>

#include "ir/attention.h"
#include "ir/error.h"
#include "lowering/gemm_match.h"
#include "lowering/symbolic.h"

namespace lt {
namespace {

using loop::IKind;
using loop::Instr;
using loop::Stage;
using loop::StageKind;

// Thrown while building a kernel when reduction `node` cannot be hosted there.
struct Unhostable {
  int node;
};
// Thrown when realized reduction `node`, absorbed into the kernel being built (see absorb_targets),
// cannot be computed there after all; it gets its own kernel again (or a later reader's).
struct Unabsorbable {
  int node, host;
};

struct ReduceSig {
  Shape in_shape;
  std::vector<int64_t> axes;  // sorted, non-negative
  bool operator==(const ReduceSig& o) const { return in_shape == o.in_shape && axes == o.axes; }
};

ReduceSig sig_of(const PNode& r, const PNode& in) {
  ReduceSig s{in.shape, {}};
  int64_t rank = static_cast<int64_t>(in.shape.size());
  for (auto a : r.attrs.ints) s.axes.push_back(rank ? (a < 0 ? a + rank : a) : 0);
  if (!rank) s.axes.clear();
  std::sort(s.axes.begin(), s.axes.end());
  return s;
}

DType acc_dtype(DType t) {
  return (t == DType::Float16 || t == DType::BFloat16) ? DType::Float32 : t;
}

class KernelBuilder {
 public:
  // absorbed_into[r] == root: realized reduction r is computed by this kernel (not its own), which
  // writes its buffer as a second output when store_absorbed[r].
  KernelBuilder(const PrimGraph& g, const std::vector<bool>& realized, const std::vector<int>& buffer_of,
                const std::vector<BufferSpec>& buffers, int root, const std::vector<int>& absorbed_into,
                const std::vector<bool>& store_absorbed)
      : g_(g),
        realized_(realized),
        buffer_of_(buffer_of),
        buffers_(buffers),
        root_(root),
        absorbed_into_(absorbed_into),
        store_absorbed_(store_absorbed) {}

  loop::Kernel build(std::vector<int>* touched);
  // scatter_add's two kernels: `init` copies base into the output buffer; the other runs over the
  // index's shape and adds src into it at the indexed positions (accumulating stores).
  loop::Kernel build_scatter(bool init, std::vector<int>* touched);

 private:
  int emit(int stage, int node, const std::vector<Lin>& idx, bool compute_root = false);
  int push(int stage, Instr in) {
    auto& body = k_.stages[stage].body;
    body.push_back(std::move(in));
    return static_cast<int>(body.size()) - 1;
  }
  int cast_to(int stage, int v, DType t) {
    if (k_.stages[stage].body[v].dtype == t) return v;
    Instr c{IKind::Op, Op::Cast, t, v};
    return push(stage, c);
  }
  int arg_for(int buffer, bool output);
  // A data-dependent index (int64 instruction iv) checked against [0, hi]: returns the index
  // clamped into range (every address stays in bounds) and whether it was in range.
  std::pair<int, int> clamp_index(int stage, int iv, int64_t hi);
  std::string name_of(const char* suffix) const;
  std::vector<Lin> outer_vars();
  std::vector<Lin> reduce_input_index(const ReduceSig& s);
  void collect_reductions(int node, std::set<int>& out, std::set<int>& seen);
  int inline_cost(int node);
  bool in_loop_over_inner(int stage) const {
    return !k_.inner.empty() && k_.stages[stage].kind != StageKind::MapOuter;
  }
  bool broadcast_over_outer(const Lin& flat) const;
  bool absorbed(int node) const { return node != root_ && absorbed_into_[node] == root_; }

  const PrimGraph& g_;
  const std::vector<bool>& realized_;
  const std::vector<int>& buffer_of_;
  const std::vector<BufferSpec>& buffers_;
  int root_;
  const std::vector<int>& absorbed_into_;
  const std::vector<bool>& store_absorbed_;
  loop::Kernel k_;
  std::unique_ptr<SymCtx> sym_;
  ReduceSig sig_;
  std::map<int, int> stage_of_;  // hosted reduction -> its stage
  std::map<int, int> arg_of_;    // buffer -> kernel arg
  // Per node, the (index, instruction) pairs emitted in the current stage. A node is read at one
  // to a few indices, so a short list searched in place spares copying the index into a map key
  // on every lookup (those copies and their frees were a third of fuse's time on a GPT step).
  std::unordered_map<int, std::vector<std::pair<std::vector<Lin>, int>>> memo_;
  // The memoized instruction of `node` at `idx`, or null.
  int* memo_find(int node, const std::vector<Lin>& idx) {
    auto hit = memo_.find(node);
    if (hit == memo_.end()) return nullptr;
    for (auto& [at, instr] : hit->second)
      if (at == idx) return &instr;
    return nullptr;
  }
  std::set<int> touched_;
  std::map<int, int> cost_;
};

// Work of computing `node` inline: its ops down to realized nodes (transcendentals weigh more).
int KernelBuilder::inline_cost(int node) {
  auto it = cost_.find(node);
  if (it != cost_.end()) return it->second;
  const PNode& p = g_.nodes[node];
  int c = 0;
  if (node == root_ || !realized_[node]) {
    const OpClass cls = op_info(p.op).cls;
    if (is_elementwise(cls)) {
      switch (p.op) {
        case Op::Exp: case Op::Log: case Op::Sin: case Op::Cos: case Op::Tanh: case Op::Erf: case Op::Pow:
        case Op::Sqrt: case Op::Div: case Op::Recip: c = 4; break;
        default: c = 1;
      }
    }
    if (cls != OpClass::Reduce)
      for (int in : p.inputs) c += inline_cost(in);
  }
  return cost_[node] = c;
}

// An element index that stays the same along some outer loop of extent > 1: a value computed there
// inside an inner loop is recomputed once per point of that outer loop.
bool KernelBuilder::broadcast_over_outer(const Lin& flat) const {
  for (size_t o = 0; o < k_.outer.size(); ++o)
    if (k_.outer[o] > 1 && !sym_->depends_on(flat, static_cast<int>(o))) return true;
  return false;
}

int KernelBuilder::arg_for(int buffer, bool output) {
  auto it = arg_of_.find(buffer);
  if (it != arg_of_.end()) {
    k_.args[it->second].output |= output;
    return it->second;
  }
  const BufferSpec& b = buffers_[buffer];
  k_.args.push_back({buffer, b.dtype, b.numel, b.kind == BufferSpec::Kind::Scalar, output});
  int id = static_cast<int>(k_.args.size()) - 1;
  arg_of_.emplace(buffer, id);
  return id;
}

std::pair<int, int> KernelBuilder::clamp_index(int stage, int iv, int64_t hi) {
  Instr zero{IKind::Const, Op::Add, DType::Int64};
  Instr top{IKind::Const, Op::Add, DType::Int64};
  top.value = static_cast<double>(hi);
  const int z = push(stage, zero), t = push(stage, top);
  const int ge = push(stage, Instr{IKind::Op, Op::Ge, DType::Bool, iv, z});
  const int le = push(stage, Instr{IKind::Op, Op::Le, DType::Bool, iv, t});
  const int ok = push(stage, Instr{IKind::Op, Op::And, DType::Bool, ge, le});
  const int lo = push(stage, Instr{IKind::Op, Op::Maximum, DType::Int64, iv, z});
  return {push(stage, Instr{IKind::Op, Op::Minimum, DType::Int64, lo, t}), ok};
}

std::vector<Lin> KernelBuilder::outer_vars() {
  std::vector<Lin> v;
  for (size_t i = 0; i < k_.outer.size(); ++i) v.push_back(sym_->var(static_cast<int>(i)));
  return v;
}

// Index of reduction input element (outer point, inner point): reduced dims take inner vars.
std::vector<Lin> KernelBuilder::reduce_input_index(const ReduceSig& s) {
  std::vector<Lin> idx(s.in_shape.size());
  int o = 0, i = static_cast<int>(k_.outer.size());
  for (size_t d = 0; d < s.in_shape.size(); ++d) {
    bool red = std::binary_search(s.axes.begin(), s.axes.end(), static_cast<int64_t>(d));
    idx[d] = sym_->var(red ? i++ : o++);
  }
  return idx;
}

void KernelBuilder::collect_reductions(int node, std::set<int>& out, std::set<int>& seen) {
  if (!seen.insert(node).second) return;
  const PNode& p = g_.nodes[node];
  if (node != root_ && realized_[node] && !absorbed(node)) return;
  if (op_info(p.op).cls == OpClass::Reduce && node != root_) out.insert(node);
  for (int c : p.inputs) collect_reductions(c, out, seen);
}

int KernelBuilder::emit(int stage, int node, const std::vector<Lin>& idx, bool compute_root) {
  if (!compute_root)
    if (const int* hit = memo_find(node, idx)) return *hit;
  touched_.insert(node);
  const PNode& p = g_.nodes[node];
  const OpInfo& info = op_info(p.op);
  int result;
  if (!compute_root && realized_[node] && p.op != Op::Constant && !absorbed(node)) {
    int b = buffer_of_[node];
    if (buffers_[b].kind == BufferSpec::Kind::Scalar) {
      Instr in{IKind::LoadScalar, Op::Add, p.dtype};
      in.arg = arg_for(b, false);
      result = push(stage, in);
    } else {
      Instr in{IKind::Load, Op::Add, p.dtype};
      in.arg = arg_for(b, false);
      in.index = sym_->to_index(sym_->flatten(idx, p.shape), k_.iexprs);
      result = push(stage, in);
    }
  } else if (p.op == Op::Param || p.op == Op::Scalar) {
    // A leaf output (rare): its value is its input buffer.
    return emit(stage, node, idx, false);
  } else if (p.op == Op::Constant) {
    Instr in{IKind::Const, Op::Add, p.dtype};
    in.value = p.attrs.value;
    result = push(stage, in);
  } else if (is_elementwise(info.cls) && info.cls != OpClass::Rand) {
    // Inside a reduction loop, a costly value that does not vary with an outer loop (a matmul
    // operand broadcast along the other side) would be recomputed for every outer point:
    // realize it once instead (the retry gives it its own kernel).
    constexpr int kRecomputeBudget = 4;
    // (The memoized cost first: the flattened index costs allocations at every node.)
    if (!compute_root && node != root_ && in_loop_over_inner(stage) &&
        inline_cost(node) >= kRecomputeBudget && broadcast_over_outer(sym_->flatten(idx, p.shape)))
      throw Unhostable{node};
    std::vector<int> ops;
    for (int c : p.inputs) {
      const Shape& cs = g_.nodes[c].shape;
      std::vector<Lin> ci(cs.size());
      size_t off = p.shape.size() - cs.size();
      for (size_t d = 0; d < cs.size(); ++d) ci[d] = cs[d] == 1 ? SymCtx::constant(0) : idx[d + off];
      ops.push_back(emit(stage, c, ci));
    }
    Instr in{IKind::Op, p.op, p.dtype};
    if (ops.size() > 0) in.a = ops[0];
    if (ops.size() > 1) in.b = ops[1];
    if (ops.size() > 2) in.c = ops[2];
    result = push(stage, in);
  } else if (info.cls == OpClass::Rand) {
    int seed = emit(stage, p.inputs[0], {});
    int offset = emit(stage, p.inputs[1], {});
    Instr in{IKind::RandUniform, Op::Rand, p.dtype, seed, offset};
    in.index = sym_->to_index(sym_->flatten(idx, p.shape), k_.iexprs);
    in.stream = p.attrs.stream;
    result = push(stage, in);
  } else if (info.cls == OpClass::Reshape) {
    const PNode& in = g_.nodes[p.inputs[0]];
    result = emit(stage, p.inputs[0], sym_->unflatten(sym_->flatten(idx, p.shape), in.shape));
  } else if (info.cls == OpClass::Permute) {
    std::vector<Lin> ci(idx.size());
    for (size_t i = 0; i < idx.size(); ++i) ci[p.attrs.ints[i]] = idx[i];
    // A transposed operand read across the innermost reduction loop (B in a @ B): if it is reused
    // across an outer loop, a contiguous transposed copy turns every later read into a unit stride.
    const int inner_var = static_cast<int>(k_.outer.size() + k_.inner.size()) - 1;
    if (!compute_root && node != root_ && k_.stages[stage].kind == StageKind::Reduce && !k_.inner.empty() &&
        realized_[p.inputs[0]]) {
      Lin out_flat = sym_->flatten(idx, p.shape);
      auto out_stride = sym_->var_stride(out_flat, inner_var);
      auto in_stride = sym_->var_stride(sym_->flatten(ci, g_.nodes[p.inputs[0]].shape), inner_var);
      if (out_stride && *out_stride == 1 && (!in_stride || std::abs(*in_stride) > 1) && broadcast_over_outer(out_flat))
        throw Unhostable{node};
    }
    result = emit(stage, p.inputs[0], ci);
  } else if (info.cls == OpClass::Expand) {
    const Shape& cs = g_.nodes[p.inputs[0]].shape;
    std::vector<Lin> ci(cs.size());
    size_t off = p.shape.size() - cs.size();
    for (size_t d = 0; d < cs.size(); ++d) ci[d] = cs[d] == 1 ? SymCtx::constant(0) : idx[d + off];
    result = emit(stage, p.inputs[0], ci);
  } else if (info.cls == OpClass::Slice) {
    std::vector<Lin> ci(idx.size());
    for (size_t d = 0; d < idx.size(); ++d)
      ci[d] = sym_->add(sym_->mul(idx[d], p.attrs.ints[3 * d + 1]), SymCtx::constant(p.attrs.ints[3 * d]));
    result = emit(stage, p.inputs[0], ci);
  } else if (info.cls == OpClass::Gather) {
    // An indexed load: the index element is computed (or loaded) first, clamped, and becomes the
    // axis coordinate of the source read; an out-of-range index reads 0 (the runtime's index
    // check reports it at the sync). The source is emitted inline like any operand.
    const PNode& src = g_.nodes[p.inputs[0]];
    const auto axis = static_cast<size_t>(normalize_axis(p.attrs.ints[0], static_cast<int64_t>(src.shape.size()), "gather"));
    const int64_t hi = src.shape[axis] - 1;
    const int iv = cast_to(stage, emit(stage, p.inputs[1], idx), DType::Int64);
    auto [at, ok] = clamp_index(stage, iv, hi);
    std::vector<Lin> ci = idx;
    ci[axis] = sym_->value(stage, at, hi);
    const int v = emit(stage, p.inputs[0], ci);
    Instr zero{IKind::Const, Op::Add, p.dtype};
    result = push(stage, Instr{IKind::Op, Op::Where, p.dtype, ok, v, push(stage, zero)});
  } else if (info.cls == OpClass::Reduce) {
    auto st = stage_of_.find(node);
    if (st == stage_of_.end()) {
      if (absorbed(node)) throw Unabsorbable{node, root_};
      throw Unhostable{node};
    }
    // Hosted reductions are read only at the current row.
    Lin want = sym_->flatten(outer_vars(), k_.outer);
    if (!(sym_->flatten(idx, p.shape) == want)) {
      if (absorbed(node)) throw Unabsorbable{node, root_};
      throw Unhostable{node};
    }
    Instr in{IKind::ReduceResult, Op::Add, k_.stages[st->second].acc_dtype};
    in.arg = st->second;
    result = cast_to(stage, push(stage, in), p.dtype);
  } else {
    fail(ErrorKind::NotImplemented, "not implemented: fusion of ", info.name);
  }
  if (int* seen = memo_find(node, idx))
    *seen = result;
  else
    memo_[node].emplace_back(idx, result);
  return result;
}

std::string KernelBuilder::name_of(const char* suffix) const {
  // Built piecewise: GCC 12 at -O3 warns falsely (-Wrestrict, PR105329) on string literal assignment here.
  std::string name(1, 'k');
  name += std::to_string(root_);
  name += '_';
  name += op_name(g_.nodes[root_].op);
  name += suffix;
  return name;
}

loop::Kernel KernelBuilder::build_scatter(bool init, std::vector<int>* touched) {
  const PNode& root = g_.nodes[root_];
  const PNode& index = g_.nodes[root.inputs[1]];
  k_.name = name_of(init ? "_init" : "");
  k_.outer = init ? root.shape : index.shape;
  sym_ = std::make_unique<SymCtx>(k_.outer);
  k_.stages.push_back(Stage{StageKind::MapOuter});
  memo_.clear();
  const std::vector<Lin> idx = outer_vars();
  loop::Store store{arg_for(buffer_of_[root_], true), {}, -1};
  if (init) {
    store.value = cast_to(0, emit(0, root.inputs[0], idx), root.dtype);
    store.index = sym_->to_index(sym_->flatten(idx, root.shape), k_.iexprs);
  } else {
    // out[.., clamp(index[i]), ..] += index[i] in range ? src[i] : 0 (src is at least index's size).
    const auto axis = static_cast<size_t>(normalize_axis(root.attrs.ints[0], static_cast<int64_t>(root.shape.size()), "scatter_add"));
    const int64_t hi = root.shape[axis] - 1;
    const int iv = cast_to(0, emit(0, root.inputs[1], idx), DType::Int64);
    auto [at, ok] = clamp_index(0, iv, hi);
    const int v = cast_to(0, emit(0, root.inputs[2], idx), root.dtype);
    Instr zero{IKind::Const, Op::Add, root.dtype};
    store.value = push(0, Instr{IKind::Op, Op::Where, root.dtype, ok, v, push(0, zero)});
    std::vector<Lin> ci = idx;
    ci[axis] = sym_->value(0, at, hi);
    store.index = sym_->to_index(sym_->flatten(ci, root.shape), k_.iexprs);
    store.accumulate = true;
  }
  k_.stages[0].stores.push_back(std::move(store));
  touched->assign(touched_.begin(), touched_.end());
  return std::move(k_);
}

loop::Kernel KernelBuilder::build(std::vector<int>* touched) {
  const PNode& root = g_.nodes[root_];
  bool root_reduce = op_info(root.op).cls == OpClass::Reduce;
  std::set<int> hosted, seen;
  collect_reductions(root_, hosted, seen);
  if (root_reduce) hosted.insert(root_);
  k_.name = name_of("");

  enum { Plain, Row, Epilogue } shape_kind = Plain;
  if (!hosted.empty()) {
    // The reduction nearest the root sets the row; one with another shape that feeds it is
    // realized (realizing the consumer instead would only move the conflict into its own kernel).
    int first = root_reduce ? root_ : *hosted.rbegin();
    sig_ = sig_of(g_.nodes[first], g_.nodes[g_.nodes[first].inputs[0]]);
    for (int r : hosted)
      if (!(sig_of(g_.nodes[r], g_.nodes[g_.nodes[r].inputs[0]]) == sig_)) {
        if (absorbed(r)) throw Unabsorbable{r, root_};
        throw Unhostable{r};
      }
    for (size_t d = 0; d < sig_.in_shape.size(); ++d) {
      bool red = std::binary_search(sig_.axes.begin(), sig_.axes.end(), static_cast<int64_t>(d));
      (red ? k_.inner : k_.outer).push_back(sig_.in_shape[d]);
    }
    if (root_reduce) shape_kind = Epilogue;
    else if (root.shape == sig_.in_shape) shape_kind = Row;
    else if (numel(root.shape) == numel(k_.outer)) shape_kind = Epilogue;
    else {
      for (int r : hosted)
        if (absorbed(r)) throw Unabsorbable{r, root_};
      throw Unhostable{*hosted.begin()};
    }
  } else {
    k_.outer = root.shape;
  }
  // An absorbed reduction's value is stored once per row: only a store stage over the outer space
  // (MapOuter) has that shape.
  for (int r : hosted)
    if (absorbed(r) && store_absorbed_[r] && shape_kind != Epilogue) throw Unabsorbable{r, root_};
  std::vector<int64_t> extents = k_.outer;
  extents.insert(extents.end(), k_.inner.begin(), k_.inner.end());
  sym_ = std::make_unique<SymCtx>(extents);

  // Reduce stages, in topological order (node index), so a later one may read an earlier one.
  for (int r : hosted) {
    const PNode& rp = g_.nodes[r];
    Stage s{StageKind::Reduce};
    s.reduce_op = rp.op;
    s.acc_dtype = acc_dtype(rp.dtype);
    k_.stages.push_back(std::move(s));
    int si = static_cast<int>(k_.stages.size()) - 1;
    memo_.clear();
    int v = emit(si, rp.inputs[0], reduce_input_index(sig_));
    k_.stages[si].reduce_value = cast_to(si, v, k_.stages[si].acc_dtype);
    stage_of_[r] = si;
  }
  // The store stage.
  Stage st{shape_kind == Row ? StageKind::MapInner : StageKind::MapOuter};
  k_.stages.push_back(std::move(st));
  int si = static_cast<int>(k_.stages.size()) - 1;
  memo_.clear();
  std::vector<Lin> idx;
  if (shape_kind == Row) idx = reduce_input_index(sig_);
  else if (shape_kind == Epilogue) idx = sym_->unflatten(sym_->flatten(outer_vars(), k_.outer), root.shape);
  else idx = outer_vars();
  int v = emit(si, root_, idx, /*compute_root=*/true);
  v = cast_to(si, v, root.dtype);
  loop::Store store{arg_for(buffer_of_[root_], true), sym_->to_index(sym_->flatten(idx, root.shape), k_.iexprs), v};
  k_.stages[si].stores.push_back(std::move(store));
  for (int r : hosted) {
    if (!absorbed(r) || !store_absorbed_[r]) continue;
    const PNode& rp = g_.nodes[r];
    const std::vector<Lin> ri = sym_->unflatten(sym_->flatten(outer_vars(), k_.outer), rp.shape);
    const int rv = cast_to(si, emit(si, r, ri), rp.dtype);
    k_.stages[si].stores.push_back(
        {arg_for(buffer_of_[r], true), sym_->to_index(sym_->flatten(ri, rp.shape), k_.iexprs), rv});
  }
  touched->assign(touched_.begin(), touched_.end());
  return std::move(k_);
}

// A value read by several consumers is recomputed by each of them while that is cheap. What makes
// it costly is rarely arithmetic but loads: a residual stream x0 + a1 + b1 + ... recomputed in
// every kernel that reads it (layer norm statistics, its gradient's row and column reductions, the
// loss) re-reads every branch's buffer there, several times the traffic of reading it once.
// So a shared value whose computation reads kMaxSharedLoads or more distinct buffers is realized:
// one write, then one load per consumer. Reads of 1-2 buffers (softmax's exp(x - max), a
// 20-step x + sin(x) chain over one input) stay fused.
void realize_shared_wide_values(const PrimGraph& g, const std::vector<int>& users, std::vector<bool>& realized) {
  constexpr size_t kMaxSharedLoads = 3;
  const int n = static_cast<int>(g.nodes.size());
  // Per node: up to kMaxSharedLoads of the buffers its inline computation reads. A capped set is
  // enough: the union of two sets is at least kMaxSharedLoads exactly when the true union is.
  std::vector<std::vector<int>> loads(n);
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    auto& mine = loads[i];
    if (p.op == Op::Scalar || p.op == Op::Constant) continue;
    if (realized[i] || op_info(p.op).cls == OpClass::Reduce) {
      mine.push_back(i);  // a load (a reduction hosted here is computed once per kernel as well)
      continue;
    }
    // Only reads about as large as the value count: a broadcast vector (a layer norm's weight, a
    // row statistic) stays in cache whoever reads it.
    const int64_t size = numel(p.shape);
    for (int c : p.inputs)
      for (int b : loads[c])
        if (mine.size() < kMaxSharedLoads && 2 * numel(g.nodes[b].shape) > size &&
            std::find(mine.begin(), mine.end(), b) == mine.end())
          mine.push_back(b);
    if (users[i] >= 2 && mine.size() >= kMaxSharedLoads) {
      realized[i] = true;
      mine.assign(1, i);
    }
  }
}

// Multi-output row kernels. A reduction read by several kernels is realized, which costs it a
// kernel of its own (cross_entropy's row max: read by the sum of exp(x - max) and by the loss).
// Instead, the first kernel that reads it computes it as one more Reduce stage over the same rows
// and, when later kernels or the graph's outputs need it, also stores it: one pass over the rows
// yields both the max and the sum. Returns absorbed_into (-1: not absorbed) and whether each
// absorbed reduction must be stored. Candidates in no_absorb were tried and did not fit (another
// row shape, or a store in a kernel without a per-row store stage); the builder reports those.
// They are (reduction, host) pairs: realizing more nodes may give the reduction another first reader.
// blocks_others[r]: an earlier reduction was not absorbed into r's kernel because r is absorbed.
void absorb_targets(const PrimGraph& g, const std::vector<bool>& realized, const std::vector<int>& gemm_at,
                    const std::vector<int>& library_at, const std::set<std::pair<int, int>>& no_absorb,
                    std::vector<int>& absorbed_into, std::vector<bool>& store_absorbed,
                    std::vector<bool>& blocks_others) {
  const int n = static_cast<int>(g.nodes.size());
  absorbed_into.assign(n, -1);
  store_absorbed.assign(n, false);
  blocks_others.assign(n, false);
  auto candidate = [&](int r) {
    const PNode& p = g.nodes[r];
    return realized[r] && p.input_index < 0 && op_info(p.op).cls == OpClass::Reduce && gemm_at[r] < 0 &&
           numel(p.shape) > 0;
  };
  // Per candidate: the kernels (by root) that read it, in root order.
  std::vector<std::vector<int>> readers(n);
  std::vector<int> seen(n, -1);
  for (int j = 0; j < n; ++j) {
    if (!realized[j] || g.nodes[j].input_index >= 0) continue;
    std::vector<int> todo(g.nodes[j].inputs.begin(), g.nodes[j].inputs.end());
    while (!todo.empty()) {
      const int c = todo.back();
      todo.pop_back();
      if (seen[c] == j) continue;
      seen[c] = j;
      if (realized[c]) {
        if (candidate(c)) readers[c].push_back(j);
        continue;
      }
      todo.insert(todo.end(), g.nodes[c].inputs.begin(), g.nodes[c].inputs.end());
    }
  }
  std::vector<bool> is_output(n, false);
  for (int o : g.outputs) is_output[o] = true;
  // Latest first, so a kernel that is itself absorbed elsewhere is known not to host others.
  for (int r = n - 1; r >= 0; --r) {
    if (!candidate(r) || readers[r].empty()) continue;
    const int j = readers[r].front();
    const PNode& host = g.nodes[j];
    if (absorbed_into[j] >= 0) blocks_others[j] = true;  // r could have gone into j's kernel
    if (no_absorb.count({r, j}) || absorbed_into[j] >= 0 || gemm_at[j] >= 0 || library_at[j] >= 0 || host.op == Op::ScatterAdd ||
        numel(host.shape) == 0)
      continue;
    absorbed_into[r] = j;
    store_absorbed[r] = is_output[r] || readers[r].size() > 1;
  }
}

// The library step computing conv prim `node` into the buffer of `root` (node, or its ReLU).
ConvStep conv_step(const PrimGraph& g, int node, int root, bool relu, const std::vector<int>& buffer_of) {
  const PNode& p = g.nodes[node];
  ConvStep c;
  c.kind = ConvStep::kind_of(p.op);
  c.name = "c" + std::to_string(node) + "_" + std::string(op_name(p.op));
  c.dtype = p.dtype;
  c.params = ConvParams::from(p.op, p.attrs);
  const Shape &s0 = g.nodes[p.inputs[0]].shape, &s1 = g.nodes[p.inputs[1]].shape;
  switch (c.kind) {
    case ConvStep::Kind::Forward: c.x = s0, c.w = s1, c.y = p.shape; break;
    case ConvStep::Kind::GradInput: c.y = s0, c.w = s1, c.x = p.shape; break;
    case ConvStep::Kind::GradWeight: c.x = s0, c.y = s1, c.w = p.shape; break;
  }
  c.a = buffer_of[p.inputs[0]], c.b = buffer_of[p.inputs[1]], c.out = buffer_of[root];
  if (p.inputs.size() == 3) c.bias = buffer_of[p.inputs[2]];
  c.relu = relu;
  return c;
}

// Whether `p` is a permute of `of` that swaps its last two dims and keeps the others in place.
bool transposes_matrices(const PNode& p, const PNode& of) {
  const int64_t r = static_cast<int64_t>(of.shape.size());
  if (p.op != Op::Permute || r < 2 || static_cast<int64_t>(p.attrs.ints.size()) != r) return false;
  for (int64_t d = 0; d < r; ++d) {
    int64_t want = d == r - 2 ? r - 1 : d == r - 1 ? r - 2 : d;
    int64_t got = p.attrs.ints[static_cast<size_t>(d)];
    if (got < 0) got += r;
    if (got != want) return false;
  }
  return true;
}

bool forward_attention(Op op) { return op == Op::Attention || op == Op::AttentionLse; }

// The library step computing the attention prims `members` (one forward or one backward group
// over the same operands and attributes) into their buffers.
AttentionStep attention_step(const PrimGraph& g, const std::vector<int>& members,
                             const std::vector<int>& buffer_of) {
  const PNode& first = g.nodes[members.front()];
  const Shape &q = g.nodes[first.inputs[0]].shape, &k = g.nodes[first.inputs[1]].shape,
              &v = g.nodes[first.inputs[2]].shape;
  const AttentionParams params = AttentionParams::from(first.op, first.attrs);
  AttentionStep a;
  a.name = "a" + std::to_string(members.front()) + "_attention";
  a.kind = forward_attention(first.op) ? AttentionStep::Kind::Forward : AttentionStep::Kind::Backward;
  a.dtype = g.nodes[first.inputs[0]].dtype;
  a.causal = params.causal;
  a.scale = params.scale;
  a.L = q.end()[-2], a.E = q.back(), a.S = k.end()[-2], a.Ev = v.back();
  a.batch = 1;
  for (size_t d = 0; d + 2 < q.size(); ++d) a.batch *= q[d];
  a.q = buffer_of[first.inputs[0]], a.k = buffer_of[first.inputs[1]], a.v = buffer_of[first.inputs[2]];
  if (a.kind == AttentionStep::Kind::Backward) {
    a.dout = buffer_of[first.inputs[3]], a.lse = buffer_of[first.inputs[4]];
    a.dsum = buffer_of[first.inputs[5]];
  }
  for (int m : members) {
    const int b = buffer_of[m];
    switch (g.nodes[m].op) {
      case Op::Attention: a.out = b; break;
      case Op::AttentionLse: a.lse = b; break;
      case Op::AttentionGradQ: a.dq = b; break;
      case Op::AttentionGradK: a.dk = b; break;
      default: a.dv = b; break;
    }
  }
  return a;
}

// The match of C = A B turned into C^T = B^T A^T: each operand's row and column strides trade
// places, so the library writes the transposed product contiguously.
void transpose_product(GemmMatch& m) {
  Gemm& g = m.gemm;
  Gemm t = g;
  t.M = g.N, t.N = g.M;
  t.a_offset = g.b_offset, t.a_rs = g.b_cs, t.a_cs = g.b_rs, t.a_batch_stride = g.b_batch_stride;
  t.b_offset = g.a_offset, t.b_rs = g.a_cs, t.b_cs = g.a_rs, t.b_batch_stride = g.a_batch_stride;
  g = t;
  std::swap(m.a_node, m.b_node);
}

}  // namespace

Plan fuse(PrimGraph g, const LowerOptions& opts) {
  const int n = static_cast<int>(g.nodes.size());
  std::vector<int> users(n, 0);
  for (const auto& p : g.nodes)
    for (int c : p.inputs) users[c]++;
  std::vector<bool> realized(n, false);
  for (int o : g.outputs) realized[o] = true;
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    if (p.op == Op::Param || p.op == Op::Scalar) realized[i] = true;
    if (op_info(p.op).cls == OpClass::Reduce && users[i] != 1) realized[i] = true;
    if (p.op == Op::ScatterAdd) realized[i] = true;  // written by its own two kernels
  }
  // Matrix products the backend's library computes: the sum and its operands get buffers; the
  // GEMM writes the sum's buffer (or, when the sum only feeds an output reshape, that one's).
  std::vector<int> gemm_at(n, -1);
  std::vector<GemmMatch> gemms;
  for (int i = 0; i < n && !opts.gemm_dtypes.empty(); ++i) {
    if (g.nodes[i].op != Op::ReduceSum || !opts.gemm(g.nodes[i].dtype)) continue;
    auto m = match_gemm(g, i, realized);
    if (!m) continue;
    realized[m->a_node] = realized[m->b_node] = true;
    int root = i;
    if (users[i] == 1 && !realized[i]) {
      for (int u = i + 1; u < n; ++u) {
        const PNode& p = g.nodes[u];
        if (std::find(p.inputs.begin(), p.inputs.end(), i) == p.inputs.end()) continue;
        if (p.op == Op::Reshape && realized[u]) root = u;
        // A product read only transposed (a weight gradient x^T @ g, stored as [out, in]): the
        // GEMM writes the transpose, B^T A^T, instead of a kernel transposing its result.
        if (transposes_matrices(p, g.nodes[i]) && m->gemm.M == g.nodes[i].shape.end()[-2]) {
          transpose_product(*m);
          root = u;
        }
        break;
      }
    }
    realized[root] = true;
    gemm_at[root] = static_cast<int>(gemms.size());
    gemms.push_back(std::move(*m));
  }
  // Library convolutions: every operand gets a buffer. A forward conv whose only user is a ReLU
  // (maximum with 0) writes that node's buffer with the ReLU as a oneDNN post-op instead.
  std::vector<int> conv_at(n, -1), conv_node;
  std::vector<bool> conv_relu;
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    if (op_info(p.op).cls != OpClass::Conv) continue;
    if (!opts.conv(p.dtype))
      fail(ErrorKind::NotImplemented, "not implemented: ", op_name(p.op), " in ", dtype_name(p.dtype),
           " without a convolution library (the runtime expands it for such backends)");
    for (int c : p.inputs) realized[c] = true;
    int root = i;
    if (p.op == Op::Conv2d && users[i] == 1 && !realized[i]) {
      for (int u = i + 1; u < n; ++u) {
        const PNode& q = g.nodes[u];
        if (std::find(q.inputs.begin(), q.inputs.end(), i) == q.inputs.end()) continue;
        const int other = q.inputs.size() == 2 ? q.inputs[q.inputs[0] == i ? 1 : 0] : -1;
        if (q.op == Op::Maximum && other >= 0 && other != i && q.shape == p.shape &&
            g.nodes[other].op == Op::Constant && g.nodes[other].attrs.value == 0.0)
          root = u;
        break;
      }
    }
    realized[root] = true;
    conv_at[root] = static_cast<int>(conv_node.size());
    conv_node.push_back(i);
    conv_relu.push_back(root != i);
  }
  // Library attention: operands and the prims get buffers. The prims over the same (q, k, v)
  // and attributes, forward (output, logsumexp) or backward (dq, dk, dv), are one step, emitted
  // at the first of them (every operand comes before it, every reader after).
  std::vector<int> attn_at(n, -1);
  std::vector<std::vector<int>> attn_groups;
  for (int i = 0; i < n; ++i) {
    const PNode& p = g.nodes[i];
    if (op_info(p.op).cls != OpClass::Attention) continue;
    const PNode &q = g.nodes[p.inputs[0]], &v = g.nodes[p.inputs[2]];
    if (!opts.attention(q.dtype, q.shape.back(), v.shape.back()))
      fail(ErrorKind::NotImplemented, "not implemented: ", op_name(p.op), " in ", dtype_name(q.dtype),
           " with head dims ", q.shape.back(), " and ", v.shape.back(),
           " without an attention library (the runtime expands it for such backends)");
    for (int c : p.inputs) realized[c] = true;
    realized[i] = true;
    for (size_t gi = 0; gi < attn_groups.size() && attn_at[i] < 0; ++gi) {
      const PNode& f = g.nodes[attn_groups[gi].front()];
      if (forward_attention(f.op) != forward_attention(p.op) || f.inputs != p.inputs ||
          f.attrs.ints != p.attrs.ints || f.attrs.value != p.attrs.value)
        continue;
      bool repeated = false;
      for (int m : attn_groups[gi]) repeated |= g.nodes[m].op == p.op;
      if (repeated) continue;
      attn_at[i] = static_cast<int>(gi);
      attn_groups[gi].push_back(i);
    }
    if (attn_at[i] < 0) {
      attn_at[i] = static_cast<int>(attn_groups.size());
      attn_groups.push_back({i});
    }
  }
  std::vector<int> library_at = conv_at;  // nodes a library step writes: never kernel hosts
  for (int i = 0; i < n; ++i)
    if (attn_at[i] >= 0) library_at[i] = attn_at[i];
  realize_shared_wide_values(g, users, realized);
  // Kernel emission recurses through inlined operands: bound the inlined depth by materializing.
  // After GEMM matching (whose operands are realized already), and never at a broadcast: a node
  // bigger than its deepest operand (a matmul's [.., M, N, K] product) realizes that operand instead.
  constexpr int kMaxInlineDepth = 256;
  std::vector<int> depth(n, 0);
  for (int i = 0; i < n; ++i) {
    if (realized[i]) continue;
    int deepest = -1;
    for (int c : g.nodes[i].inputs)
      if (depth[c] + 1 > depth[i]) depth[i] = depth[c] + 1, deepest = c;
    if (depth[i] <= kMaxInlineDepth) continue;
    if (deepest >= 0 && numel(g.nodes[deepest].shape) < numel(g.nodes[i].shape) &&
        g.nodes[deepest].input_index < 0) {
      realized[deepest] = true;
      depth[i] = 1;
      for (int c : g.nodes[i].inputs)
        if (c != deepest) depth[i] = std::max(depth[i], depth[c] + 1);
    } else {
      realized[i] = true, depth[i] = 0;
    }
  }
  std::set<std::pair<int, int>> no_absorb;
  std::vector<int> absorbed_into;
  std::vector<bool> store_absorbed, blocks_others;
  for (int attempt = 0;; ++attempt) {
    if (attempt > 4 * n + 8) fail(ErrorKind::Runtime, "internal: fusion did not converge");
    absorb_targets(g, realized, gemm_at, library_at, no_absorb, absorbed_into, store_absorbed, blocks_others);
    Plan plan;
    std::vector<int> buffer_of(n, -1);
    // Graph inputs first, in input order, so BufferSpec::input lines up with RunInput.
    std::vector<int> input_node(g.num_inputs, -1);
    for (int i = 0; i < n; ++i)
      if (g.nodes[i].input_index >= 0) input_node.at(g.nodes[i].input_index) = i;
    for (int in = 0; in < g.num_inputs; ++in) {
      int i = input_node[in];
      if (i < 0) fail(ErrorKind::Runtime, "internal: graph input ", in, " has no leaf");
      const PNode& p = g.nodes[i];
      auto kind = p.op == Op::Scalar ? BufferSpec::Kind::Scalar : BufferSpec::Kind::Input;
      plan.buffers.push_back({kind, p.dtype, numel(p.shape), in});
    }
    for (int i = 0; i < n; ++i) {
      if (g.nodes[i].input_index >= 0) {
        buffer_of[i] = g.nodes[i].input_index;
      } else if (realized[i]) {
        bool out = std::find(g.outputs.begin(), g.outputs.end(), i) != g.outputs.end();
        plan.buffers.push_back({out ? BufferSpec::Kind::Output : BufferSpec::Kind::Temp, g.nodes[i].dtype,
                                numel(g.nodes[i].shape)});
        buffer_of[i] = static_cast<int>(plan.buffers.size()) - 1;
      }
    }
    std::ostringstream grouping;
    std::vector<int> unhostable;  // found in this pass; realized together before the next
    bool restart = false;
    try {
      for (int i = 0; i < n; ++i) {
        if (!realized[i] || g.nodes[i].input_index >= 0 || numel(g.nodes[i].shape) == 0) continue;
        if (absorbed_into[i] >= 0) continue;  // computed (and stored) by a later kernel
        if (gemm_at[i] >= 0) {
          const GemmMatch& m = gemms[gemm_at[i]];
          Gemm gm = m.gemm;
          gm.name = "g" + std::to_string(i) + "_matmul";
          gm.a = buffer_of[m.a_node], gm.b = buffer_of[m.b_node], gm.out = buffer_of[i];
          plan.steps.push_back({PlanStep::Kind::Gemm, static_cast<int>(plan.gemms.size())});
          plan.gemms.push_back(gm);
          grouping << gm.name << ": gemm " << dtype_name(gm.dtype) << " batch " << shape_str(gm.batch)
                   << " M " << gm.M << " N " << gm.N << " K " << gm.K << (gm.a_transposed() ? " A^T" : "")
                   << (gm.b_transposed() ? " B^T" : "") << ", nodes %" << m.reduce << " from %" << m.a_node
                   << " @ %" << m.b_node << "\n";
          continue;
        }
        if (conv_at[i] >= 0) {
          const int ci = conv_node[conv_at[i]];
          plan.steps.push_back({PlanStep::Kind::Conv, static_cast<int>(plan.convs.size())});
          plan.convs.push_back(conv_step(g, ci, i, conv_relu[conv_at[i]], buffer_of));
          const ConvStep& c = plan.convs.back();
          grouping << c.name << ": conv " << dtype_name(c.dtype) << " input " << shape_str(c.x) << " weight "
                   << shape_str(c.w) << " output " << shape_str(c.y) << (c.bias >= 0 ? " +bias" : "")
                   << (c.relu ? " +relu" : "") << ", nodes %" << ci << (ci != i ? " %" + std::to_string(i) : "")
                   << "\n";
          continue;
        }
        if (attn_at[i] >= 0) {
          const std::vector<int>& members = attn_groups[attn_at[i]];
          if (members.front() != i) continue;  // written by the step of the group's first prim
          plan.steps.push_back({PlanStep::Kind::Attention, static_cast<int>(plan.attentions.size())});
          plan.attentions.push_back(attention_step(g, members, buffer_of));
          const AttentionStep& a = plan.attentions.back();
          grouping << a.name << ": attention " << dtype_name(a.dtype)
                   << (a.kind == AttentionStep::Kind::Forward ? " forward" : " backward") << " batch "
                   << a.batch << " L " << a.L << " S " << a.S << " E " << a.E << " Ev " << a.Ev
                   << (a.causal ? " causal" : "") << ", nodes";
          for (int m : members) grouping << " %" << m << ":" << op_name(g.nodes[m].op);
          grouping << "\n";
          continue;
        }
        // A kernel (scatter_add: two) rooted at `root`, appended once built.
        auto add_kernels = [&](int root) {
          const bool scatter = g.nodes[root].op == Op::ScatterAdd;
          for (int part = scatter ? 0 : 1; part < 2; ++part) {
            std::vector<int> touched;
            KernelBuilder kb(g, realized, buffer_of, plan.buffers, root, absorbed_into, store_absorbed);
            loop::Kernel k = scatter ? kb.build_scatter(part == 0, &touched) : kb.build(&touched);
            grouping << k.name << ": outer " << shape_str(k.outer) << " inner " << shape_str(k.inner) << ", "
                     << k.stages.size() << " stage(s)" << (k.accumulates() ? ", accumulating" : "") << ", nodes";
            for (int t : touched) grouping << " %" << t << ":" << op_name(g.nodes[t].op);
            grouping << "\n";
            plan.steps.push_back({PlanStep::Kind::Kernel, static_cast<int>(plan.kernels.size())});
            plan.kernels.push_back(std::move(k));
          }
        };
        try {
          for (;;) {
            try {
              add_kernels(i);
              break;
            } catch (const Unabsorbable& u) {
              no_absorb.insert({u.node, u.host});
              // Had it not been absorbed, an earlier reduction might have gone into its kernel.
              if (blocks_others[u.node]) throw;
              // Else it gets its own kernel, placed right here: its readers are this kernel and
              // later ones, so no restart is needed.
              absorbed_into[u.node] = -1;
              add_kernels(u.node);
            }
          }
        } catch (const Unhostable& u) {
          // The pass goes on to find the other kernels' (each kernel's build depends on what is
          // realized, not on earlier kernels being built), so a graph needing k such values
          // restarts about once instead of k times (a GPT step: 66 passes over ~90 kernels).
          unhostable.push_back(u.node);
        }
      }
    } catch (const Unabsorbable&) {
      restart = true;  // no_absorb has grown
    }
    for (int u : unhostable) realized[u] = true;
    if (restart || !unhostable.empty()) continue;
    for (int o : g.outputs) {
      plan.output_buffers.push_back(buffer_of[o]);
      plan.output_shapes.push_back(g.nodes[o].shape);
    }
    plan.grouping = grouping.str();
    plan.prims = std::move(g);
    return plan;
  }
}

}  // namespace lt
