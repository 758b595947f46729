#include "lowering/channels_last.h"

#include <algorithm>
#include <map>
#include <numeric>
#include <optional>
#include <sstream>
#include <tuple>

#include "ir/error.h"

namespace lt {
namespace {

// One kernel access to a buffer: a load's or a store's index.
struct Access {
  int buffer;
  loop::Index* index;
};

std::vector<Access> accesses(loop::Kernel& k) {
  std::vector<Access> out;
  for (auto& st : k.stages) {
    for (auto& in : st.body)
      if (in.kind == loop::IKind::Load) out.push_back({k.args[in.arg].buffer, &in.index});
    for (auto& s : st.stores) out.push_back({k.args[s.arg].buffer, &s.index});
  }
  return out;
}

std::vector<int64_t> var_ranges(const loop::Kernel& k) {
  std::vector<int64_t> r(k.outer.begin(), k.outer.end());
  r.insert(r.end(), k.inner.begin(), k.inner.end());
  return r;
}

bool same_index(const loop::Index& a, const loop::Index& b) {
  if (!a.affine() || !b.affine() || a.offset != b.offset) return false;
  const size_t n = std::max(a.strides.size(), b.strides.size());
  for (size_t v = 0; v < n; ++v)
    if ((v < a.strides.size() ? a.strides[v] : 0) != (v < b.strides.size() ? b.strides[v] : 0))
      return false;
  return true;
}

// The NHWC form of `ix`, an index into an [N,C,H,W] value stored NCHW: the same elements at their
// NHWC offsets. Only a walk whose every loop variable steps along one dim without carrying into
// the next converts (each variable's stride a multiple of one dim's stride, and the offset plus
// every variable's furthest step inside each dim); otherwise nullopt.
std::optional<loop::Index> to_channels_last(const loop::Index& ix, const Shape& s,
                                            const std::vector<int64_t>& range) {
  if (!ix.affine() || ix.symbolic()) return std::nullopt;
  const int64_t dims[4] = {s[0], s[1], s[2], s[3]};
  const int64_t nchw[4] = {s[1] * s[2] * s[3], s[2] * s[3], s[3], 1};
  const int64_t nhwc[4] = {s[2] * s[3] * s[1], 1, s[3] * s[1], s[1]};
  if (ix.offset < 0 || ix.offset >= numel(s)) return std::nullopt;
  int64_t reach[4], rem = ix.offset;
  loop::Index out;
  for (int d = 0; d < 4; ++d) {
    reach[d] = rem / nchw[d];
    rem %= nchw[d];
    out.offset += reach[d] * nhwc[d];
  }
  out.strides.assign(ix.strides.size(), 0);
  for (size_t v = 0; v < ix.strides.size(); ++v) {
    const int64_t st = ix.strides[v], extent = v < range.size() ? range[v] : 1;
    if (st == 0 || extent <= 1) continue;
    if (st < 0) return std::nullopt;
    int d = 0;
    while (st % nchw[d] != 0) ++d;  // nchw[3] == 1 divides every stride
    const int64_t q = st / nchw[d];
    reach[d] += q * (extent - 1);
    out.strides[v] = q * nhwc[d];
  }
  for (int d = 0; d < 4; ++d)
    if (reach[d] >= dims[d]) return std::nullopt;
  return out;
}

// The data operands of conv step c as (buffer, its [N,C,H,W] shape, its channels_last bit).
std::vector<std::tuple<int, Shape, uint8_t>> data_operands(const ConvStep& c) {
  switch (c.kind) {
    case ConvStep::Kind::Forward:
      return {{c.a, c.x, ConvStep::kLastA}, {c.out, c.y, ConvStep::kLastOut}};
    case ConvStep::Kind::GradInput:
      return {{c.a, c.y, ConvStep::kLastA}, {c.out, c.x, ConvStep::kLastOut}};
    case ConvStep::Kind::GradWeight:
      break;
  }
  return {{c.a, c.x, ConvStep::kLastA}, {c.b, c.y, ConvStep::kLastB}};
}

// A shape whose NCHW strides strictly decrease (C, H, W all > 1), so a stride names one dim.
bool layout_matters(const Shape& s) { return s.size() == 4 && s[1] > 1 && s[2] > 1 && s[3] > 1; }

// Renumbers the outer loop variables of k: new variable i is old variable perm[i].
void permute_outer(loop::Kernel& k, const std::vector<int>& perm) {
  const size_t n = perm.size();
  std::vector<int> inv(n);
  for (size_t i = 0; i < n; ++i) inv[perm[i]] = static_cast<int>(i);
  auto permute = [&](auto& v) {
    if (v.size() < n) return;
    auto old = v;
    for (size_t i = 0; i < n; ++i) v[i] = old[perm[i]];
  };
  permute(k.outer);
  permute(k.outer_params);
  auto fix = [&](loop::Index& ix) {
    if (ix.strides.size() < n) ix.strides.resize(n, 0);
    permute(ix.strides);
    permute(ix.stride_params);
  };
  for (auto& st : k.stages) {
    for (auto& in : st.body)
      if (loop::has_index(in)) fix(in.index);
    for (auto& s : st.stores) fix(s.index);
  }
  for (auto& e : k.iexprs)
    if (e.kind == loop::IExpr::Kind::Var && e.value < static_cast<int64_t>(n))
      e.value = inv[static_cast<size_t>(e.value)];
}

// An elementwise kernel (one outer space, no inner loops) storing an NHWC buffer walks its outer
// space in that store's memory order (largest stride outermost), so neighbouring threads store
// and load neighbouring elements. Returns whether the order changed.
bool iterate_in_store_order(loop::Kernel& k, const std::vector<char>& last) {
  if (!k.inner.empty() || k.symbolic()) return false;
  for (const auto& st : k.stages)
    if (st.kind != loop::StageKind::MapOuter) return false;
  for (const auto& st : k.stages)
    for (const auto& s : st.stores) {
      if (!last[k.args[s.arg].buffer] || !s.index.affine()) continue;
      const size_t n = k.outer.size();
      auto stride = [&](int v) {
        return static_cast<size_t>(v) < s.index.strides.size() ? s.index.strides[v] : 0;
      };
      std::vector<int> perm(n);
      std::iota(perm.begin(), perm.end(), 0);
      std::stable_sort(perm.begin(), perm.end(),
                       [&](int a, int b) { return stride(a) > stride(b); });
      if (std::is_sorted(perm.begin(), perm.end())) return false;
      permute_outer(k, perm);
      return true;
    }
  return false;
}

// Adds a kernel copying buffer `src` into a new temporary (dir OihwToOhwi) or a new temporary
// into `dst` (OhwiToOihw): the [O, C/g, kH, kW] values of a conv weight or its gradient between
// PyTorch's OIHW order and cuDNN's NHWC filter order (OHWI), run as plan step `at`. The copy walks
// the stored side's memory order, so its stores coalesce. Returns the temporary.
enum class Copy { OihwToOhwi, OhwiToOihw };
int add_weight_copy(Plan& plan, int buffer, const Shape& w, Copy dir, const std::string& name,
                    size_t at) {
  const BufferSpec spec = plan.buffers[buffer];
  const int temp = static_cast<int>(plan.buffers.size());
  plan.buffers.push_back({BufferSpec::Kind::Temp, spec.dtype, spec.numel});
  const bool to_ohwi = dir == Copy::OihwToOhwi;
  loop::Kernel k;
  k.name = name;
  k.outer = w;
  k.args = {{to_ohwi ? buffer : temp, spec.dtype, spec.numel},
            {to_ohwi ? temp : buffer, spec.dtype, spec.numel}};
  k.args[1].output = true;
  loop::Index oihw;
  oihw.strides = {w[1] * w[2] * w[3], w[2] * w[3], w[3], 1};
  const loop::Index ohwi = *to_channels_last(oihw, w, {w.begin(), w.end()});
  loop::Stage st{loop::StageKind::MapOuter};
  loop::Instr load{loop::IKind::Load};
  load.dtype = spec.dtype;
  load.arg = 0;
  load.index = to_ohwi ? oihw : ohwi;
  st.body.push_back(load);
  st.stores.push_back({1, to_ohwi ? ohwi : oihw, 0});
  k.stages.push_back(std::move(st));
  std::vector<char> stored(plan.buffers.size(), 0);
  stored[to_ohwi ? temp : buffer] = 1;
  iterate_in_store_order(k, stored);
  plan.steps.insert(plan.steps.begin() + static_cast<std::ptrdiff_t>(at),
                    {PlanStep::Kind::Kernel, static_cast<int>(plan.kernels.size())});
  plan.kernels.push_back(std::move(k));
  return temp;
}

// A conv over NHWC data reads and writes its weights in the NHWC filter format too: on Hopper,
// cuDNN 9 offers no algorithm for NHWC data with an OIHW filter in some shapes (ResNet-18's
// 512-channel 4x4 layers, both gradients). Where OHWI is the same memory as OIHW (1x1 kernels, one
// input channel per group) only the bit changes. Otherwise a forward or grad-input conv reads an
// OHWI copy of its weight, made once per weight buffer by a kernel before its first reader, and a
// grad-weight conv writes a new temporary that a kernel right after it copies into dw's buffer
// in OIHW order (weights are small: ResNet-18's 11M parameters take ~30 us a step each way).
// Returns the kernels added.
int weights_channels_last(Plan& plan) {
  std::map<int, int> ohwi_of;  // an OIHW weight buffer -> its OHWI copy
  int added = 0;
  for (size_t at = 0; at < plan.steps.size(); ++at) {
    if (plan.steps[at].kind != PlanStep::Kind::Conv) continue;
    const int conv = plan.steps[at].index;
    ConvStep& c = plan.convs[conv];
    if (!c.channels_last) continue;
    const Shape w = c.w;
    const bool same_memory = w[1] == 1 || w[2] * w[3] == 1;
    if (c.kind == ConvStep::Kind::GradWeight) {
      c.channels_last |= ConvStep::kLastOut;
      if (same_memory) continue;
      c.out = add_weight_copy(plan, c.out, w, Copy::OhwiToOihw, "k" + c.name + "_to_oihw", at + 1);
      ++added, ++at;
      continue;
    }
    c.channels_last |= ConvStep::kLastB;
    if (same_memory) continue;
    auto it = ohwi_of.find(c.b);
    if (it == ohwi_of.end()) {
      const int copy =
          add_weight_copy(plan, c.b, w, Copy::OihwToOhwi, "k" + c.name + "_to_ohwi", at);
      it = ohwi_of.emplace(c.b, copy).first;
      ++added, ++at;
    }
    c.b = it->second;
  }
  return added;
}

}  // namespace

void choose_channels_last(Plan& plan) {
  if (plan.convs.empty()) return;
  const size_t nbuf = plan.buffers.size();
  std::vector<char> last(nbuf, 0), banned(nbuf, 0);
  std::vector<Shape> shape(nbuf);
  auto ban = [&](int b) {
    if (b < 0) return;
    banned[b] = 1;
    last[b] = 0;
  };
  auto temp = [&](int b) { return plan.buffers[b].kind == BufferSpec::Kind::Temp; };
  // A concat's operands and result (BufferSpec::alias) are ranges of one row-major buffer.
  for (size_t b = 0; b < nbuf; ++b)
    if (plan.buffers[b].alias >= 0) ban(static_cast<int>(b)), ban(plan.buffers[b].alias);

  // Buffers some step other than a kernel or a conv's data operand touches keep their layout.
  std::vector<int> reads, writes;
  for (const PlanStep& st : plan.ordered_steps()) {
    if (st.kind == PlanStep::Kind::Kernel) continue;
    if (st.kind == PlanStep::Kind::Conv) {
      const ConvStep& c = plan.convs[st.index];
      ban(c.bias);
      ban(c.kind == ConvStep::Kind::GradWeight ? c.out : c.b);
      continue;
    }
    reads.clear(), writes.clear();
    step_buffers(plan, st, reads, writes);
    for (int b : reads) ban(b);
    for (int b : writes) ban(b);
  }
  // Seeds: every conv's data operands, when they can all be NHWC.
  for (const ConvStep& c : plan.convs) {
    const auto ops = data_operands(c);
    bool ok = true;
    for (const auto& [b, s, bit] : ops)
      ok = ok && b >= 0 && temp(b) && !banned[b] && layout_matters(s) &&
           (shape[b].empty() || shape[b] == s);
    if (!ok) continue;
    for (const auto& [b, s, bit] : ops) last[b] = 1, shape[b] = s;
  }
  // Spread to temporaries a kernel accesses at the same index as an NHWC buffer, and take back
  // every buffer some access cannot follow, until nothing changes.
  for (bool changed = true; changed;) {
    changed = false;
    for (auto& k : plan.kernels) {
      const auto acc = accesses(k);
      const auto range = var_ranges(k);
      const bool symbolic = k.symbolic();
      for (const Access& a : acc) {
        if (!last[a.buffer]) continue;
        if (symbolic || !to_channels_last(*a.index, shape[a.buffer], range)) {
          ban(a.buffer);
          changed = true;
          continue;
        }
        for (const Access& b : acc)
          if (!last[b.buffer] && !banned[b.buffer] && temp(b.buffer) &&
              plan.buffers[b.buffer].numel == plan.buffers[a.buffer].numel &&
              same_index(*a.index, *b.index)) {
            last[b.buffer] = 1, shape[b.buffer] = shape[a.buffer];
            changed = true;
          }
      }
    }
    for (const ConvStep& c : plan.convs) {
      const auto ops = data_operands(c);
      bool all = true, any = false;
      for (const auto& [b, s, bit] : ops) {
        all = all && last[b] && shape[b] == s;
        any = any || last[b];
      }
      if (any && !all) {
        for (const auto& [b, s, bit] : ops) ban(b);
        changed = true;
      }
    }
  }
  // Rewrite: kernel accesses, conv operands, then the elementwise kernels' iteration order.
  int nlast = 0, nkernels = 0, nconvs = 0;
  std::ostringstream which;
  for (size_t b = 0; b < nbuf; ++b)
    if (last[b]) which << (nlast++ ? " " : "") << "b" << b << shape_str(shape[b]);
  if (!nlast) return;
  for (auto& k : plan.kernels) {
    const auto range = var_ranges(k);
    for (const Access& a : accesses(k))
      if (last[a.buffer]) *a.index = *to_channels_last(*a.index, shape[a.buffer], range);
    nkernels += iterate_in_store_order(k, last);
  }
  for (ConvStep& c : plan.convs) {
    for (const auto& [b, s, bit] : data_operands(c))
      if (last[b]) c.channels_last |= bit;
    nconvs += c.channels_last != 0;
  }
  const int ncopies = weights_channels_last(plan);
  plan.grouping += "channels-last: " + std::to_string(nlast) + " buffers, " +
                   std::to_string(nconvs) + " convs, " + std::to_string(nkernels) +
                   " kernels iterating NHWC, " + std::to_string(ncopies) +
                   " weight copies between OIHW and OHWI: " + which.str() + "\n";
}

}  // namespace lt
