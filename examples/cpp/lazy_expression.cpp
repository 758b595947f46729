// A lazy expression in C++: ten steps of y = relu(sin(x * w + b) * 2).sum(1) on the lazy device.
// The first step compiles one fused kernel; the next nine hit the graph cache.
#include <lazytensor/lazytensor.h>

#include <cstdio>

int main() {
  lt::manual_seed(0);
  const lt::Device dev = lt::Device::parse("lazy");
  lt::Tensor x = lt::randn({32, 64}, lt::DType::Float32, dev);
  lt::Tensor w = lt::randn({64}, lt::DType::Float32, dev);
  lt::Tensor b = lt::randn({64}, lt::DType::Float32, dev);
  lt::mark_step();  // materialize the inputs

  lt::metrics::reset();
  lt::Tensor y;
  for (int step = 0; step < 10; ++step) {
    double scale = 1.0 + 0.1 * step;  // a changing Python-style scalar: never recompiles
    y = ((x * w + b).sin() * scale).relu().sum({1});
    lt::mark_step();
  }
  auto c = lt::metrics::counters();
  auto g = lt::metrics::last_graph();
  std::printf("y[0:3] at the last step: %.4f %.4f %.4f\n", y.to_vector<float>()[0],
              y.to_vector<float>()[1], y.to_vector<float>()[2]);
  std::printf("graph_compiles=%lld graph_cache_hits=%lld kernels in step graph=%lld backend=%s\n",
              static_cast<long long>(c["graph_compiles"]),
              static_cast<long long>(c["graph_cache_hits"]), static_cast<long long>(g.kernels),
              g.backend.c_str());
  std::printf("%s", lt::metrics::report().c_str());
  return 0;
}
