#include "runtime/symbolic_compile.h"

#include <chrono>
#include <cstdio>
#include <set>
#include <unordered_map>

#include "ir/debug_level.h"
#include "ir/symbolic_graph.h"
#include "lowering/generalize.h"
#include "runtime/dynamic_shapes.h"
#include "runtime/profile.h"

namespace lt {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxFailedBindings = 2;

// One compile under a symbolic key: where it is cached, and the sizes it serves.
struct Variant {
  Hash128 cache_key;
  std::vector<ShapeEnv::Guard> guards;
  std::vector<std::pair<int64_t, int64_t>> ranges;
  bool serves(const std::vector<int64_t>& symbols) const {
    if (!PlanSymbols::in_ranges(ranges, symbols)) return false;
    for (const auto& g : guards)
      if (!g.holds(symbols)) return false;
    return true;
  }
};

struct KeyState {
  std::vector<Variant> variants;
  std::set<std::vector<int64_t>> failed;  // bindings at which generalizing failed: stay static
};

std::unordered_map<Hash128, KeyState, Hash128Hasher>& keys() {
  static std::unordered_map<Hash128, KeyState, Hash128Hasher> k;
  return k;
}

// Per call site, the symbolic view its last symbolic run used and that view's key: a trace whose
// own view guessed an attribute otherwise may still be that program (bind_to).
struct SiteRef {
  SymbolicGraph sg;
  Hash128 skey;
};
std::unordered_map<int32_t, SiteRef>& site_refs() {
  static std::unordered_map<int32_t, SiteRef> r;
  return r;
}

// A cached compile under skey that serves `symbols` (and its cache key), or null.
CachedGraph* find_variant(GraphCache& cache, const Hash128& skey,
                          const std::vector<int64_t>& symbols, Hash128* cache_key) {
  auto it = keys().find(skey);
  if (it == keys().end()) return nullptr;
  for (const Variant& v : it->second.variants)
    if (v.serves(symbols))
      if (CachedGraph* e = cache.find(v.cache_key)) {
        *cache_key = v.cache_key;
        return e;
      }
  return nullptr;
}

std::vector<SymbolicDimSize> dims_of(const SymbolicGraph& sg, const Graph& g) {
  std::vector<SymbolicDimSize> dims;
  for (const DynamicDim& d : sg.symbol_dims)
    dims.push_back({d.input, d.dim, g.inputs[d.input]->shape[d.dim]});
  return dims;
}

void debug(const std::string& msg) {
  if (debug_level() > 0) std::fprintf(stderr, "[lazytensor] dynamic shapes: %s\n", msg.c_str());
}

}  // namespace

void forget_symbolic_compiles() {
  keys().clear();
  site_refs().clear();
}

std::unique_ptr<CachedGraph> make_cached_graph(const Plan& plan, std::unique_ptr<Executable> exe,
                                               int64_t nodes) {
  auto cg = std::make_unique<CachedGraph>();
  cg->exe = std::move(exe);
  cg->output_buffers = plan.output_buffers;
  for (int b : plan.output_buffers) cg->output_kinds.push_back(plan.buffers[b].kind);
  if (!plan.output_offsets.empty()) {
    for (size_t r = 0; r < plan.output_buffers.size(); ++r) {
      const BufferSpec& b = plan.buffers[static_cast<size_t>(plan.output_buffers[r])];
      const int64_t n = numel(plan.output_shapes.at(r));
      const size_t t = dtype_size(b.dtype);
      cg->output_views.emplace_back(
          static_cast<size_t>(plan.output_offsets.at(r)) * t,
          plan.output_offsets[r] == 0 && n == b.numel ? int64_t{-1} : n * static_cast<int64_t>(t));
    }
  }
  cg->nodes = nodes;
  cg->grouping = plan.grouping;
  // A symbolic plan's buffer sizes change with the binding; donation (which matches an output to
  // an input of its size) is left to static plans.
  if (!plan.sym.symbolic()) cg->donations = donation_candidates(plan);
  cg->symbolic = plan.sym.symbolic();
  return cg;
}

std::optional<SymbolicRun> symbolic_entry(const Graph& g, Backend& backend,
                                          const LowerOptions& opts, const Hash128& prefix,
                                          GraphCache& cache, int32_t site) {
  if (!backend.symbolic_sizes()) return std::nullopt;
  const DynamicChoice choice = dynamic_dims(site, g);
  if (choice.dims.empty()) return std::nullopt;
  if (!choice.why.empty() && choice.why != "marked dynamic") debug(choice.why);
  const auto t0 = Clock::now();
  SymbolicGraph sg = symbolic_graph(g, choice.dims);
  if (!sg.symbolic()) return std::nullopt;
  const Hash128 skey = Hasher(prefix.lo ^ 0x73796d).add(prefix).add(sg.key).digest();
  const std::vector<int64_t> symbols(sg.env.hints().begin(), sg.env.hints().end());
  SymbolicRun run;
  run.dims = dims_of(sg, g);
  run.symbols = symbols;
  if ((run.entry = find_variant(cache, skey, symbols, &run.cache_key))) {
    if (site_refs().count(site) == 0 || site_refs()[site].skey != skey)
      site_refs()[site] = {sg, skey};
    return run;
  }
  // What this site ran symbolically before may describe this trace too.
  if (auto ref = site_refs().find(site); ref != site_refs().end() && ref->second.skey != skey)
    if (auto values = bind_to(ref->second.sg, g))
      if ((run.entry = find_variant(cache, ref->second.skey, *values, &run.cache_key))) {
        run.symbols = *values;
        run.dims = dims_of(ref->second.sg, g);
        return run;
      }
  KeyState& ks = keys()[skey];
  // A program that failed to generalize at two bindings is not tried again: each attempt lowers it
  // several times before its static compile.
  if (ks.failed.count(symbols) || ks.failed.size() >= kMaxFailedBindings) return std::nullopt;
  const auto tl = Clock::now();
  GeneralizedPlan gp = generalize_plan(g, sg, opts);
  profile::record(profile::Phase::Lower, skey.hex().substr(0, 12), tl, Clock::now());
  if (!gp.plan) {
    ks.failed.insert(symbols);
    debug("graph " + skey.hex().substr(0, 12) + " stays static: " + gp.why_not);
    return std::nullopt;
  }
  std::unique_ptr<Executable> exe;
  {
    profile::Scope s(profile::Phase::Compile, skey.hex().substr(0, 12) + " " + backend.name());
    exe = backend.compile(*gp.plan);
  }
  Variant v;
  v.cache_key = Hasher(skey.lo).add(skey).add(static_cast<uint64_t>(ks.variants.size())).digest();
  v.guards = sg.env.guards();
  v.ranges = gp.plan->sym.ranges;
  const int64_t nodes = static_cast<int64_t>(gp.plan->prims.nodes.size());
  run.entry = cache.insert(v.cache_key, make_cached_graph(*gp.plan, std::move(exe), nodes));
  run.cache_key = v.cache_key;
  run.entry->symbol_dims = sg.symbol_dims;
  run.compiled = true;
  run.compile_ms = std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
  if (debug_level() > 0) {
    std::string ranges;
    for (size_t i = 0; i < v.ranges.size(); ++i)
      if (v.ranges[i].second != INT64_MAX)
        ranges += (ranges.empty() ? "" : ", ") + std::string("s") + std::to_string(i) + " in [" +
                  std::to_string(v.ranges[i].first) + ", " + std::to_string(v.ranges[i].second) +
                  "]";
    std::string d = describe(sg);
    if (!d.empty() && d.back() == '\n') d.pop_back();
    for (char& ch : d)
      if (ch == '\n') ch = ';';
    debug("graph " + skey.hex().substr(0, 12) + " compiled symbolic (" + d + "), serving " +
          ranges + ", " + std::to_string(gp.lowerings) + " lowerings" +
          (gp.narrowed.empty() ? "" : " (a wider range did not hold: " + gp.narrowed + ")"));
  }
  ks.variants.push_back(std::move(v));
  site_refs()[site] = {std::move(sg), skey};
  return run;
}

}  // namespace lt
