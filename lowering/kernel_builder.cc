#include "lowering/kernel_builder.h"

#include <algorithm>

#include "ir/error.h"

namespace lt::fusion {
namespace {

ReduceSig sig_of(const PNode& r, const PNode& in) {
  ReduceSig s{in.shape, {}};
  int64_t rank = static_cast<int64_t>(in.shape.size());
  for (auto a : r.attrs.ints) s.axes.push_back(rank ? (a < 0 ? a + rank : a) : 0);
  if (!rank) s.axes.clear();
  std::sort(s.axes.begin(), s.axes.end());
  return s;
}

}  // namespace

// Work of computing `node` inline: its ops down to realized nodes (transcendentals weigh more).
int KernelBuilder::inline_cost(int node) {
  auto it = cost_.find(node);
  if (it != cost_.end()) return it->second;
  const PNode& p = g_.nodes[node];
  int c = 0;
  if (node == root_ || !realized(node)) {
    const OpClass cls = op_info(p.op).cls;
    // On a CPU core a division, square root or math-library call costs several cheap ops.
    if (is_elementwise(cls)) c = op_info(p.op).cost >= OpCost::Divide ? 4 : 1;
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
  if (node != root_ && realized(node) && !absorbed(node)) return;
  if (op_info(p.op).cls == OpClass::Reduce && node != root_) out.insert(node);
  for (int c : p.inputs) collect_reductions(c, out, seen);
}

// The instruction computing `node` at element `idx` in `stage`, or kRefused.
int KernelBuilder::emit(int stage, int node, const std::vector<Lin>& idx, bool compute_root) {
  if (!compute_root)
    if (const int* hit = memo_find(node, idx)) return *hit;
  touched_.insert(node);
  const PNode& p = g_.nodes[node];
  const OpInfo& info = op_info(p.op);
  // An absorbed elementwise value is computed at the root's own point of the store stage only.
  if (absorbed_value(node) &&
      (stage != store_stage_ || !(sym_->flatten(idx, p.shape) == store_flat_)))
    return unabsorbable(node);
  int result;
  if (!compute_root && realized(node) && p.op != Op::Constant && p.op != Op::Iota &&
      !absorbed(node)) {
    int b = nodes_[node].buffer;
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
  } else if (p.op == Op::Iota) {  // computed where it is read, like a constant
    Instr in{IKind::Position, Op::Iota, p.dtype};
    in.index = sym_->to_index(sym_->flatten(idx, p.shape), k_.iexprs);
    result = push(stage, in);
  } else if (is_elementwise(info.cls) && info.cls != OpClass::Rand) {
    // Inside a reduction loop, a costly value that does not vary with an outer loop (a matmul
    // operand broadcast along the other side) would be recomputed for every outer point:
    // realize it once instead (the retry gives it its own kernel).
    constexpr int kRecomputeBudget = 4;
    // (The memoized cost first: the flattened index costs allocations at every node.)
    if (!compute_root && node != root_ && in_loop_over_inner(stage) &&
        inline_cost(node) >= kRecomputeBudget && broadcast_over_outer(sym_->flatten(idx, p.shape)))
      return unhostable(node);
    std::vector<int> ops;
    for (int c : p.inputs) {
      const Shape& cs = g_.nodes[c].shape;
      std::vector<Lin> ci(cs.size());
      size_t off = p.shape.size() - cs.size();
      for (size_t d = 0; d < cs.size(); ++d)
        ci[d] = cs[d] == 1 ? SymCtx::constant(0) : idx[d + off];
      ops.push_back(emit(stage, c, ci));
      if (ops.back() == kRefused) return kRefused;
    }
    Instr in{IKind::Op, p.op, p.dtype};
    if (ops.size() > 0) in.a = ops[0];
    if (ops.size() > 1) in.b = ops[1];
    if (ops.size() > 2) in.c = ops[2];
    result = push(stage, in);
  } else if (info.cls == OpClass::Rand) {
    const int seed = emit(stage, p.inputs[0], {});
    if (seed == kRefused) return kRefused;
    const int offset = emit(stage, p.inputs[1], {});
    if (offset == kRefused) return kRefused;
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
    if (!compute_root && node != root_ && k_.stages[stage].kind == StageKind::Reduce &&
        !k_.inner.empty() && realized(p.inputs[0])) {
      Lin out_flat = sym_->flatten(idx, p.shape);
      auto out_stride = sym_->var_stride(out_flat, inner_var);
      auto in_stride = sym_->var_stride(sym_->flatten(ci, g_.nodes[p.inputs[0]].shape), inner_var);
      if (out_stride && *out_stride == 1 && (!in_stride || std::abs(*in_stride) > 1) &&
          broadcast_over_outer(out_flat))
        return unhostable(node);
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
      ci[d] = sym_->add(sym_->mul(idx[d], p.attrs.ints[3 * d + 1]),
                        SymCtx::constant(p.attrs.ints[3 * d]));
    result = emit(stage, p.inputs[0], ci);
  } else if (info.cls == OpClass::Gather) {
    // An indexed load: the index element is computed (or loaded) first, clamped, and becomes the
    // axis coordinate of the source read; an out-of-range index reads 0 (the runtime's index
    // check reports it at the sync). The source is emitted inline like any operand.
    const PNode& src = g_.nodes[p.inputs[0]];
    const auto axis = static_cast<size_t>(
        normalize_axis(p.attrs.ints[0], static_cast<int64_t>(src.shape.size()), "gather"));
    const int64_t hi = src.shape[axis] - 1;
    const int index = emit(stage, p.inputs[1], idx);
    if (index == kRefused) return kRefused;
    const int iv = cast_to(stage, index, DType::Int64);
    auto [at, ok] = clamp_index(stage, iv, hi);
    std::vector<Lin> ci = idx;
    ci[axis] = sym_->value(stage, at, hi);
    const int v = emit(stage, p.inputs[0], ci);
    if (v == kRefused) return kRefused;
    Instr zero{IKind::Const, Op::Add, p.dtype};
    result = push(stage, Instr{IKind::Op, Op::Where, p.dtype, ok, v, push(stage, zero)});
  } else if (info.cls == OpClass::Reduce) {
    auto st = stage_of_.find(node);
    if (st == stage_of_.end()) return refuse_reduction(node);
    // Hosted reductions are read only at the current row.
    Lin want = sym_->flatten(outer_vars(), k_.outer);
    if (!(sym_->flatten(idx, p.shape) == want)) return refuse_reduction(node);
    Instr in{IKind::ReduceResult, Op::Add, k_.stages[st->second].acc_dtype};
    in.arg = st->second;
    result = cast_to(stage, push(stage, in), p.dtype);
  } else {
    fail(ErrorKind::NotImplemented, "not implemented: fusion of ", info.name);
  }
  if (result == kRefused) return kRefused;  // a view of a value that cannot be computed here
  if (absorbed_value(node)) absorbed_values_.push_back({node, result});
  if (int* seen = memo_find(node, idx))
    *seen = result;
  else
    memo_[node].emplace_back(idx, result);
  return result;
}

std::string KernelBuilder::name_of(const char* suffix) const {
  // Built piecewise: GCC 12 at -O3 warns falsely (-Wrestrict, PR105329) on string literal
  // assignment here.
  std::string name(1, 'k');
  name += std::to_string(root_);
  name += '_';
  name += op_name(g_.nodes[root_].op);
  name += suffix;
  return name;
}

std::optional<loop::Kernel> KernelBuilder::build_scatter(bool init, std::vector<int>* touched) {
  const PNode& root = g_.nodes[root_];
  const PNode& index = g_.nodes[root.inputs[1]];
  k_.name = name_of(init ? "_init" : "");
  k_.outer = init ? root.shape : index.shape;
  sym_ = std::make_unique<SymCtx>(k_.outer);
  k_.stages.push_back(Stage{StageKind::MapOuter});
  memo_.clear();
  const std::vector<Lin> idx = outer_vars();
  loop::Store store{arg_for(nodes_[root_].buffer, true), {}, -1};
  if (init) {
    const int base = emit(0, root.inputs[0], idx);
    if (base == kRefused) return std::nullopt;
    store.value = cast_to(0, base, root.dtype);
    store.index = sym_->to_index(sym_->flatten(idx, root.shape), k_.iexprs);
  } else {
    // out[.., clamp(index[i]), ..] += index[i] in range ? src[i] : 0 (src is at least index's
    // size).
    const auto axis = static_cast<size_t>(
        normalize_axis(root.attrs.ints[0], static_cast<int64_t>(root.shape.size()), "scatter_add"));
    const int64_t hi = root.shape[axis] - 1;
    const int index = emit(0, root.inputs[1], idx);
    if (index == kRefused) return std::nullopt;
    const int iv = cast_to(0, index, DType::Int64);
    auto [at, ok] = clamp_index(0, iv, hi);
    const int src = emit(0, root.inputs[2], idx);
    if (src == kRefused) return std::nullopt;
    const int v = cast_to(0, src, root.dtype);
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

std::optional<loop::Kernel> KernelBuilder::build(std::vector<int>* touched,
                                                 const std::vector<int>& absorbed_values) {
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
        refuse_reduction(r);
        return std::nullopt;
      }
    for (size_t d = 0; d < sig_.in_shape.size(); ++d) {
      bool red = std::binary_search(sig_.axes.begin(), sig_.axes.end(), static_cast<int64_t>(d));
      (red ? k_.inner : k_.outer).push_back(sig_.in_shape[d]);
    }
    if (root_reduce)
      shape_kind = Epilogue;
    else if (root.shape == sig_.in_shape)
      shape_kind = Row;
    else if (numel(root.shape) == numel(k_.outer))
      shape_kind = Epilogue;
    else {
      // The root is neither a row nor a row's value: the first absorbed reduction is given back,
      // else the first hosted one realized.
      auto r = std::find_if(hosted.begin(), hosted.end(), [&](int h) { return absorbed(h); });
      if (r != hosted.end())
        unabsorbable(*r);
      else
        unhostable(*hosted.begin());
      return std::nullopt;
    }
  } else {
    k_.outer = root.shape;
  }
  // An absorbed reduction's value is stored once per row: only a store stage over the outer space
  // (MapOuter) has that shape.
  for (int r : hosted)
    if (absorbed(r) && nodes_[r].store_absorbed && shape_kind != Epilogue) {
      unabsorbable(r);
      return std::nullopt;
    }
  IntList extents = k_.outer;
  extents.insert(extents.end(), k_.inner.begin(), k_.inner.end());
  sym_ = std::make_unique<SymCtx>(extents);

  // Reduce stages, in topological order (node index), so a later one may read an earlier one.
  for (int r : hosted) {
    const PNode& rp = g_.nodes[r];
    Stage s{StageKind::Reduce};
    s.reduce_op = rp.op;
    s.acc_dtype = opmath_dtype(rp.dtype);
    k_.stages.push_back(std::move(s));
    int si = static_cast<int>(k_.stages.size()) - 1;
    memo_.clear();
    int v = emit(si, rp.inputs[0], reduce_input_index(sig_));
    if (v == kRefused) return std::nullopt;
    k_.stages[si].reduce_value = cast_to(si, v, k_.stages[si].acc_dtype);
    stage_of_[r] = si;
  }
  // The store stage.
  Stage st{shape_kind == Row ? StageKind::MapInner : StageKind::MapOuter};
  k_.stages.push_back(std::move(st));
  int si = static_cast<int>(k_.stages.size()) - 1;
  memo_.clear();
  std::vector<Lin> idx;
  if (shape_kind == Row)
    idx = reduce_input_index(sig_);
  else if (shape_kind == Epilogue)
    idx = sym_->unflatten(sym_->flatten(outer_vars(), k_.outer), root.shape);
  else
    idx = outer_vars();
  store_stage_ = si;
  store_flat_ = sym_->flatten(idx, root.shape);
  int v = emit(si, root_, idx, /*compute_root=*/true);
  if (v == kRefused) return std::nullopt;
  for (int a : absorbed_values)  // siblings the root does not read
    if (!touched_.count(a) && g_.nodes[a].shape == root.shape && emit(si, a, idx) == kRefused)
      return std::nullopt;
  v = cast_to(si, v, root.dtype);
  loop::Store store{arg_for(nodes_[root_].buffer, true),
                    sym_->to_index(sym_->flatten(idx, root.shape), k_.iexprs), v};
  k_.stages[si].stores.push_back(std::move(store));
  for (int r : hosted) {
    if (!absorbed(r) || !nodes_[r].store_absorbed) continue;
    const PNode& rp = g_.nodes[r];
    const std::vector<Lin> ri = sym_->unflatten(sym_->flatten(outer_vars(), k_.outer), rp.shape);
    const int value = emit(si, r, ri);
    if (value == kRefused) return std::nullopt;
    const int rv = cast_to(si, value, rp.dtype);
    k_.stages[si].stores.push_back({arg_for(nodes_[r].buffer, true),
                                    sym_->to_index(sym_->flatten(ri, rp.shape), k_.iexprs), rv});
  }
  for (auto [node, value] : absorbed_values_) {
    const PNode& ep = g_.nodes[node];
    k_.stages[si].stores.push_back({arg_for(nodes_[node].buffer, true),
                                    sym_->to_index(store_flat_, k_.iexprs),
                                    cast_to(si, value, ep.dtype)});
  }
  touched->assign(touched_.begin(), touched_.end());
  return std::move(k_);
}

}  // namespace lt::fusion
