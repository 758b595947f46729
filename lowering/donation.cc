#include "lowering/donation.h"

#include <algorithm>
#include <deque>
#include <limits>
#include <tuple>

namespace lt {
namespace {

// The loop variables a stage runs over: the outer dims, and for MapInner the inner dims too
// (MapOuter runs once per outer point with the inner variables at 0).
std::vector<int64_t> stage_extents(const loop::Kernel& k, const loop::Stage& st) {
  std::vector<int64_t> e(k.outer.begin(), k.outer.end());
  if (st.kind == loop::StageKind::MapInner) e.insert(e.end(), k.inner.begin(), k.inner.end());
  return e;
}

int64_t stride_of(const loop::Index& ix, size_t v) {
  return v < ix.strides.size() ? ix.strides[v] : 0;
}

// Whether two affine indices address the same element at every point of the stage.
bool same_index(const loop::Index& a, const loop::Index& b, const std::vector<int64_t>& extents) {
  if (!a.affine() || !b.affine() || a.offset != b.offset) return false;
  for (size_t v = 0; v < extents.size(); ++v)
    if (extents[v] > 1 && stride_of(a, v) != stride_of(b, v)) return false;
  return true;
}

// Whether an affine index visits each of `numel` elements exactly once over the stage's points:
// its strides, sorted, are those of a row-major layout of the extents in some order.
bool visits_each_once(const loop::Index& ix, const std::vector<int64_t>& extents, int64_t numel) {
  if (!ix.affine() || ix.offset != 0) return false;
  std::vector<std::pair<int64_t, int64_t>> dims;  // (stride, extent) of the dims that move
  for (size_t v = 0; v < extents.size(); ++v) {
    if (extents[v] == 0) return false;
    if (extents[v] == 1) continue;
    if (stride_of(ix, v) <= 0) return false;
    dims.push_back({stride_of(ix, v), extents[v]});
  }
  std::sort(dims.begin(), dims.end());
  int64_t expect = 1;
  for (auto [stride, extent] : dims) {
    if (stride != expect) return false;
    expect *= extent;
  }
  return expect == numel;
}

// Distances (in prim edges) from an output's prim node to the Param leaves of `inputs` (graph
// input indices), by one breadth-first walk that stops once all are found or beyond kMaxDepth
// (an optimizer update reads its own state within a few ops; farther leaves rank last). `seen`
// is scratch shared across calls: stamps of the walk that last visited each node.
constexpr int64_t kMaxDepth = 32;
constexpr int64_t kUnreached = std::numeric_limits<int64_t>::max();

std::vector<int64_t> leaf_distances(const PrimGraph& g, int from, const std::vector<int>& inputs,
                                    std::vector<std::pair<int, int64_t>>& seen, int stamp) {
  std::vector<int64_t> out(inputs.size(), kUnreached);
  const int nn = static_cast<int>(g.nodes.size());
  if (from < 0 || from >= nn) return out;
  seen.resize(g.nodes.size(), {-1, 0});
  size_t found = 0;
  std::deque<int> q{from};
  seen[from] = {stamp, 0};
  while (!q.empty() && found < inputs.size()) {
    const int n = q.front();
    q.pop_front();
    const PNode& p = g.nodes[n];
    const int64_t d = seen[n].second;
    if (p.op == Op::Param)
      for (size_t k = 0; k < inputs.size(); ++k)
        if (inputs[k] == p.input_index && out[k] == kUnreached) {
          out[k] = d;
          ++found;
        }
    if (d >= kMaxDepth) continue;
    for (int i : p.inputs)
      if (i >= 0 && i < nn && seen[i].first != stamp) {
        seen[i] = {stamp, d + 1};
        q.push_back(i);
      }
  }
  return out;
}

}  // namespace

bool same_index_update(const loop::Kernel& k, int in, int out) {
  const int nargs = static_cast<int>(k.args.size());
  if (in < 0 || out < 0 || in >= nargs || out >= nargs || in == out) return false;
  const loop::Arg &ai = k.args[in], &ao = k.args[out];
  if (ai.output || !ao.output || ai.scalar || ao.scalar || ai.dtype != ao.dtype ||
      ai.numel != ao.numel)
    return false;
  const loop::Stage* writer = nullptr;
  const loop::Store* store = nullptr;
  for (const loop::Stage& st : k.stages) {
    for (const loop::Store& s : st.stores) {
      if (s.arg != out) continue;
      if (store) return false;  // written twice: the second write could follow a read of the first
      writer = &st;
      store = &s;
    }
    for (const loop::Instr& i : st.body)
      if ((i.kind == loop::IKind::Load || i.kind == loop::IKind::LoadScalar) && i.arg == out)
        return false;
  }
  if (!store || writer->kind == loop::StageKind::Reduce) return false;
  const std::vector<int64_t> extents = stage_extents(k, *writer);
  if (!visits_each_once(store->index, extents, ao.numel)) return false;
  for (const loop::Stage& st : k.stages)
    for (const loop::Instr& i : st.body) {
      if (i.arg != in || (i.kind != loop::IKind::Load && i.kind != loop::IKind::LoadScalar))
        continue;
      if (&st != writer || i.kind != loop::IKind::Load ||
          !same_index(i.index, store->index, extents))
        return false;
    }
  return true;
}

void defer_updates_past_readers(Plan& plan) {
  if (plan.steps.empty()) return;  // kernels only: nothing reads an input behind a library call
  const int nb = static_cast<int>(plan.buffers.size());
  const int ns = static_cast<int>(plan.steps.size());
  std::vector<std::vector<int>> reads(ns), writes(ns);
  std::vector<int> readers(nb, 0), writers(nb, 0);
  for (int s = 0; s < ns; ++s) {
    step_buffers(plan, plan.steps[s], reads[s], writes[s]);
    std::sort(reads[s].begin(), reads[s].end());
    reads[s].erase(std::unique(reads[s].begin(), reads[s].end()), reads[s].end());
    for (int b : reads[s])
      if (b >= 0 && b < nb) ++readers[b];
    for (int b : writes[s])
      if (b >= 0 && b < nb) ++writers[b];
  }
  // Sinks: kernels whose every output is a graph output that no step reads.
  std::vector<char> sink(ns, 0);
  for (int s = 0; s < ns; ++s) {
    if (plan.steps[s].kind != PlanStep::Kind::Kernel || writes[s].empty()) continue;
    bool ok = true;
    for (int b : writes[s])
      ok = ok && b >= 0 && b < nb && plan.buffers[b].kind == BufferSpec::Kind::Output &&
           readers[b] == 0 && writers[b] == 1;
    sink[s] = ok;
  }
  // Per input buffer, the last step reading it that is not a sink (two sinks reading one input
  // keep their order: either may take it).
  std::vector<int> last_other(nb, -1);
  for (int s = 0; s < ns; ++s)
    if (!sink[s])
      for (int b : reads[s])
        if (b >= 0 && b < nb) last_other[b] = s;
  std::vector<std::vector<int>> due(ns);  // per step: the sinks that now run right after it
  std::vector<char> moved(ns, 0);
  bool any = false;
  for (int s = 0; s < ns; ++s) {
    if (!sink[s]) continue;
    int after = -1;
    for (int b : reads[s])
      if (b >= 0 && b < nb && plan.buffers[b].kind == BufferSpec::Kind::Input)
        after = std::max(after, last_other[b]);
    if (after > s) due[after].push_back(s), moved[s] = 1, any = true;
  }
  if (!any) return;
  std::vector<PlanStep> order;
  order.reserve(plan.steps.size());
  for (int s = 0; s < ns; ++s) {
    if (!moved[s]) order.push_back(plan.steps[s]);
    for (int k : due[s]) order.push_back(plan.steps[k]);
  }
  plan.steps = std::move(order);
}

void find_donations(Plan& plan) {
  plan.donations.clear();
  for (auto& k : plan.kernels) k.inplace.clear();
  defer_updates_past_readers(plan);
  const int nb = static_cast<int>(plan.buffers.size());
  const std::vector<PlanStep> steps = plan.ordered_steps();
  // Per buffer: the last step that reads it, and the steps that write it.
  std::vector<int> last_read(nb, -1), writes(nb, 0), writer(nb, -1);
  auto read = [&](int b, int s) {
    if (b >= 0 && b < nb) last_read[b] = std::max(last_read[b], s);
  };
  auto write = [&](int b, int s) {
    if (b < 0 || b >= nb) return;
    ++writes[b];
    writer[b] = s;
  };
  std::vector<int> reads, writes_of;
  for (int s = 0; s < static_cast<int>(steps.size()); ++s) {
    step_buffers(plan, steps[s], reads, writes_of);
    for (int b : reads) read(b, s);
    for (int b : writes_of) {
      write(b, s);
      // Counted twice for a library step (GEMM, convolution, attention): its output is never
      // donated (libraries assume no alias).
      if (steps[s].kind != PlanStep::Kind::Kernel) write(b, s);
    }
  }
  std::vector<bool> is_root(nb, false);
  for (int b : plan.output_buffers)
    if (b >= 0 && b < nb) is_root[b] = true;
  // Root index of each output buffer, for distances in the prim graph.
  std::vector<int> root_of(nb, -1);
  for (size_t r = 0; r < plan.output_buffers.size(); ++r)
    if (root_of[plan.output_buffers[r]] < 0) root_of[plan.output_buffers[r]] = static_cast<int>(r);

  struct Pair {
    int64_t distance;
    int output, input;
  };
  std::vector<Pair> pairs;
  std::vector<std::pair<int, int64_t>> seen;  // leaf_distances' scratch
  for (int o = 0; o < nb; ++o) {
    if (plan.buffers[o].kind != BufferSpec::Kind::Output || !is_root[o] || writes[o] != 1) continue;
    const int s = writer[o];
    const loop::Kernel& k = plan.kernels.at(steps[s].index);
    std::vector<int> feasible;  // input buffers
    for (int i = 0; i < nb; ++i) {
      const BufferSpec& in = plan.buffers[i];
      // An input that is itself a result of the graph keeps its values (another tensor gets them).
      if (in.kind != BufferSpec::Kind::Input || is_root[i] || in.dtype != plan.buffers[o].dtype ||
          in.numel != plan.buffers[o].numel || last_read[i] > s)
        continue;
      bool ok = true;
      for (size_t ia = 0; ia < k.args.size() && ok; ++ia)
        if (k.args[ia].buffer == i)
          for (size_t oa = 0; oa < k.args.size() && ok; ++oa)
            if (k.args[oa].buffer == o)
              ok = same_index_update(k, static_cast<int>(ia), static_cast<int>(oa));
      if (ok) feasible.push_back(i);
    }
    if (feasible.empty()) continue;
    std::vector<int> indices;
    for (int i : feasible) indices.push_back(plan.buffers[i].input);
    const int root = root_of[o];
    std::vector<int64_t> dist(feasible.size(), 0);  // hand-built plans have no prims: ids decide
    if (root < static_cast<int>(plan.prims.outputs.size()))
      dist = leaf_distances(plan.prims, plan.prims.outputs[root], indices, seen, o);
    for (size_t f = 0; f < feasible.size(); ++f) pairs.push_back({dist[f], o, feasible[f]});
  }
  std::sort(pairs.begin(), pairs.end(), [](const Pair& a, const Pair& b) {
    return std::tie(a.distance, a.output, a.input) < std::tie(b.distance, b.output, b.input);
  });
  std::vector<bool> out_taken(nb, false), in_taken(nb, false);
  for (const Pair& p : pairs) {
    if (out_taken[p.output] || in_taken[p.input]) continue;
    out_taken[p.output] = in_taken[p.input] = true;
    plan.donations.push_back({p.output, p.input});
    loop::Kernel& k = plan.kernels.at(steps[writer[p.output]].index);
    for (size_t ia = 0; ia < k.args.size(); ++ia)
      if (k.args[ia].buffer == p.input)
        for (size_t oa = 0; oa < k.args.size(); ++oa)
          if (k.args[oa].buffer == p.output)
            k.inplace.push_back({static_cast<int>(ia), static_cast<int>(oa)});
  }
  std::sort(plan.donations.begin(), plan.donations.end(),
            [](const Donation& a, const Donation& b) { return a.output < b.output; });
}

}  // namespace lt
