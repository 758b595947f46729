// Host cost of tracing in C++: builds 100,000 elementwise ops on "lazy" (no sync while tracing),
// then times the sync of a 1,000-node graph: cold (lower + compile) and warm (hash + cache hit +
// run), the warm one as the median of repeated syncs. Each figure also comes as the calling
// thread's CPU time (`*_cpu_*`), which other processes on a shared machine disturb far less than
// wall time. The trace also comes as the median and the 10th percentile over groups of 10 chains
// (1,000 ops) of that CPU time (`trace_cpu_us_per_op_median`, `_p10`): on a shared VM a thread's
// CPU time still takes in time stolen from its virtual CPU, which a whole-run mean sums whole,
// while the low percentile of the groups shows the uncontended cost. Prints JSON for bench/run.py.
// Usage: bench_trace_cost [ops] [warm_repeats]
#include <lazytensor/lazytensor.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "backends/clocks.h"
#include "ir/graph.h"
#include "runtime/tensor_impl.h"

namespace {
double now_us() {
  return std::chrono::duration<double, std::micro>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
double cpu_us() { return lt::thread_cpu_seconds() * 1e6; }
double percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1))];
}
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  const int ops = argc > 1 ? std::atoi(argv[1]) : 100000;
  const int repeats = std::max(1, argc > 2 ? std::atoi(argv[2]) : 21);
  lt::Tensor x = lt::randn({64}, lt::DType::Float32, lt::kLazy);
  lt::mark_step();
  // Chains of 100 ops, each synced: the trace cost per op is measured without the sync.
  double trace_us = 0, trace_cpu = 0, group_cpu = 0;
  std::vector<double> group_cpu_per_op;  // us/op of each group of 10 chains
  int traced = 0;
  for (int c = 0; c < ops / 100; ++c) {
    double t0 = now_us(), p0 = cpu_us();
    lt::Tensor y = x;
    for (int i = 0; i < 50; ++i) y = (y * 1.0001) + 0.5;
    traced += 100;
    const double chain_cpu = cpu_us() - p0;
    trace_cpu += chain_cpu;
    trace_us += now_us() - t0;
    group_cpu += chain_cpu;
    if (c % 10 == 9) {
      group_cpu_per_op.push_back(group_cpu / 1000);
      group_cpu = 0;
    }
    double t1 = now_us();
    lt::mark_step();
    if (c == 0) std::fprintf(stderr, "first sync (compile): %.1f us\n", now_us() - t1);
  }
  // One 1,000-node graph: the warm cost of hash + cache lookup + run.
  auto build = [&] {
    lt::Tensor y = x;
    for (int i = 0; i < 500; ++i) y = (y * 1.0001) + 0.5;
    return y;
  };
  lt::Tensor first = build();  // kept alive: a dropped tensor has nothing to sync
  double c0 = now_us();
  lt::mark_step();
  double cold = now_us() - c0;
  std::vector<double> warm, warm_cpu, collect, collect_cpu;
  for (int r = 0; r < repeats; ++r) {
    lt::Tensor second = build();
    // The collect + hash step alone (what a cache hit costs before its lookup), then the sync.
    const lt::Node* root = second.impl()->pending.get();
    double h0 = now_us(), q0 = cpu_us();
    lt::Graph g = lt::collect_graph({root});
    collect_cpu.push_back(cpu_us() - q0);
    collect.push_back(now_us() - h0);
    double w0 = now_us(), p0 = cpu_us();
    lt::mark_step();
    warm_cpu.push_back(cpu_us() - p0);
    warm.push_back(now_us() - w0);
  }
  auto g = lt::metrics::last_graph();
  std::printf(
      "{\"ops\": %d, \"trace_us_per_op\": %.4f, \"trace_cpu_us_per_op\": %.4f, "
      "\"trace_cpu_us_per_op_median\": %.4f, \"trace_cpu_us_per_op_p10\": %.4f, "
      "\"graph_1000_nodes_cold_ms\": %.3f, \"graph_1000_nodes_warm_sync_us\": %.1f, "
      "\"graph_1000_nodes_warm_sync_cpu_us\": %.1f, \"graph_1000_nodes_collect_hash_us\": %.1f, "
      "\"graph_1000_nodes_collect_hash_cpu_us\": %.1f, \"warm_run_ms\": %.4f, \"cache\": \"%s\"}\n",
      traced, trace_us / traced, trace_cpu / traced,
      group_cpu_per_op.empty() ? trace_cpu / traced : median(group_cpu_per_op),
      group_cpu_per_op.empty() ? trace_cpu / traced : percentile(group_cpu_per_op, 0.1),
      cold / 1000, median(warm), median(warm_cpu), median(collect), median(collect_cpu), g.run_ms,
      g.cache.c_str());
  return 0;
}
