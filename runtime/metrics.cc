#include <array>
#include <cstdio>
#include <iterator>
#include <mutex>
#include <sstream>

#include "runtime/metrics_state.h"
#include "runtime/profile.h"
#include "runtime/sync.h"

namespace lt::metrics {
namespace {
// donated_buffers counts graph outputs written in place into a donated input's buffer (one per
// output per run); donated_bytes is their size: memory those runs did not allocate.
// cuda_graph_launches counts runs whose kernels went to the GPU as one CUDA graph launch
// (backends/cuda/cuda_graph.h); kernel_launches still counts those kernels. symbolic_compiles
// counts the graph_compiles whose sizes are symbolic (runtime/symbolic_compile.h).
const char* kCounterNames[] = {"traced_ops",          "syncs",
                               "graph_compiles",      "graph_cache_hits",
                               "disk_cache_hits",     "kernels_compiled",
                               "kernel_launches",     "fallbacks",
                               "donated_buffers",     "donated_bytes",
                               "cuda_graph_launches", "symbolic_compiles"};
static_assert(std::size(kCounterNames) == static_cast<size_t>(Counter::kCount));
constexpr int kReasons = static_cast<int>(SyncReason::ControlFlow) + 1;
std::array<std::atomic<int64_t>, static_cast<size_t>(Counter::kCount)> g_counters{};
std::array<std::atomic<int64_t>, kReasons> g_reasons{};
std::mutex g_mu;
GraphInfo g_last;
}  // namespace

void bump(Counter c, int64_t by) {
  g_counters[static_cast<size_t>(c)].fetch_add(by, std::memory_order_relaxed);
}

void record_sync(SyncReason r) {
  if (r != SyncReason::Eager) bump(Counter::Syncs);
  g_reasons[static_cast<size_t>(r)].fetch_add(1, std::memory_order_relaxed);
}

void set_last_graph(GraphInfo g) {
  std::lock_guard<std::mutex> l(g_mu);
  g_last = std::move(g);
}

std::map<std::string, int64_t> counters() {
  std::map<std::string, int64_t> m;
  for (size_t i = 0; i < g_counters.size(); ++i) m[kCounterNames[i]] = g_counters[i].load();
  return m;
}

std::map<std::string, int64_t> syncs_by_reason() {
  std::map<std::string, int64_t> m;
  for (int i = 0; i < kReasons; ++i)
    m[sync_reason_name(static_cast<SyncReason>(i))] = g_reasons[i].load();
  return m;
}

GraphInfo last_graph() {
  std::lock_guard<std::mutex> l(g_mu);
  return g_last;
}

std::string report() {
  std::ostringstream os;
  os << "lazytensor metrics\n";
  for (auto& [k, v] : counters()) os << "  " << k << ": " << v << "\n";
  os << "  syncs by reason:";
  for (auto& [k, v] : syncs_by_reason())
    if (v) os << " " << k << "=" << v;
  GraphInfo g = last_graph();
  os << "\n  last graph: " << (g.hash.empty() ? "none" : g.hash) << " backend=" << g.backend
     << " nodes=" << g.nodes << " kernels=" << g.kernels << " cache=" << g.cache
     << " compile_ms=" << g.compile_ms << " run_ms=" << g.run_ms << "\n";
  auto t = profile::timings();
  if (!t.empty()) {
    os << "  timings (ms)      count     total       p50       p90       p99       max\n";
    char line[160];
    for (auto& [name, p] : t) {
      std::snprintf(line, sizeof line, "    %-10s %10lld %9.3f %9.4f %9.4f %9.4f %9.4f\n",
                    name.c_str(), static_cast<long long>(p.count), p.total_ms, p.p50_ms, p.p90_ms,
                    p.p99_ms, p.max_ms);
      os << line;
    }
  }
  return os.str();
}

void reset() {
  for (auto& c : g_counters) c.store(0);
  for (auto& r : g_reasons) r.store(0);
  std::lock_guard<std::mutex> l(g_mu);
  g_last = GraphInfo{};
  profile::reset_timings();
}

}  // namespace lt::metrics
