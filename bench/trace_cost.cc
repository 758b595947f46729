// Host cost of tracing in C++: builds 100,000 elementwise ops on "lazy" (no sync while tracing),
// then times the sync of that graph twice: cold (lower + compile) and warm (hash + cache hit).
// Prints JSON for bench/run.py.  Usage: bench_trace_cost [ops]
#include <lazytensor/lazytensor.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>

namespace {
double now_us() {
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now().time_since_epoch()).count();
}
}  // namespace

int main(int argc, char** argv) {
  const int ops = argc > 1 ? std::atoi(argv[1]) : 100000;
  lt::Tensor x = lt::randn({64}, lt::DType::Float32, lt::kLazy);
  lt::mark_step();
  // Chains of 100 ops, each synced: the trace cost per op is measured without the sync.
  double trace_us = 0;
  int traced = 0;
  for (int c = 0; c < ops / 100; ++c) {
    double t0 = now_us();
    lt::Tensor y = x;
    for (int i = 0; i < 50; ++i) y = (y * 1.0001) + 0.5;
    traced += 100;
    trace_us += now_us() - t0;
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
  lt::Tensor second = build();
  double w0 = now_us();
  lt::mark_step();
  double warm = now_us() - w0;
  auto g = lt::metrics::last_graph();
  std::printf("{\"ops\": %d, \"trace_us_per_op\": %.4f, \"graph_1000_nodes_cold_ms\": %.3f, "
              "\"graph_1000_nodes_warm_sync_us\": %.1f, \"warm_run_ms\": %.4f, \"cache\": \"%s\"}\n",
              traced, trace_us / traced, cold / 1000, warm, g.run_ms, g.cache.c_str());
  return 0;
}
