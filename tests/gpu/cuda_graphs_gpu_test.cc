// The CUDA backend on a GPU, on lowered graphs (softmax, layer norm + gelu + residual, matmuls,
// sums and movement) against host computations, and a throughput report printed for information.
// Split from cuda_backend_gpu_test.cc, whose fixture (cuda_gpu_fixture.h) it shares. Not built in
// CI (no GPU there): tests/gpu/run.sh builds and runs it.

#include <gtest/gtest.h>

#include "tests/gpu/cuda_gpu_fixture.h"

namespace lt {
namespace {

using namespace cudagpu;

// ---- lowered graphs ----

using testing::param;
NodePtr node(Op o, NodeList in, std::vector<int64_t> ints = {}, bool keepdim = false) {
  Attrs a;
  a.ints = to_ints(ints);
  a.keepdim = keepdim;
  return make_node(o, std::move(in), a);
}

// Lowers `root` and runs it with `inputs` (in Graph::inputs order, each float32 of its shape).
std::vector<double> run_graph(
    CudaGpu& t, const NodePtr& root, const std::vector<std::vector<double>>& inputs,
    std::function<std::vector<std::vector<double>>(const Plan&, const std::vector<Input>&)> run,
    size_t* kernels = nullptr) {
  Graph g = collect_graph({root.get()});
  Plan plan = lower(g);
  if (kernels) *kernels = plan.kernels.size();
  std::vector<Input> in;
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    const Node* n = g.inputs[i];
    if (n->op == Op::Scalar) {
      in.push_back(Input{{}, n->scalar, n->scalar_i});
    } else {
      in.push_back(Input{make_array(n->dtype, inputs.at(i))});
    }
  }
  auto out = run(plan, in);
  return out.at(0);
}

class CudaGraphs : public CudaGpu {
 protected:
  std::vector<double> go(const NodePtr& root, const std::vector<std::vector<double>>& inputs,
                         size_t* kernels = nullptr) {
    return run_graph(
        *this, root, inputs,
        [this](const Plan& p, const std::vector<Input>& in) { return run(p, in); }, kernels);
  }
};

TEST_F(CudaGraphs, SoftmaxIsOneKernel) {
  const int64_t n = 64, m = 1000;
  auto x = random_values(DType::Float32, n * m, 20, -5, 5);
  size_t kernels = 0;
  auto got = go(node(Op::Softmax, {param({n, m})}, {-1}), {x}, &kernels);
  EXPECT_EQ(kernels, 1u);
  expect_near(got, host_softmax(x, n, m), 2e-5, 1e-9, "softmax graph");
}

TEST_F(CudaGraphs, GeluOfLayerNormPlusResidual) {
  const int64_t n = 32, m = 768;
  auto xs = random_values(DType::Float32, n * m, 21, -3, 3),
       ws = random_values(DType::Float32, m, 22), bs = random_values(DType::Float32, m, 23),
       rs = random_values(DType::Float32, n * m, 24);
  auto x = param({n, m}), w = param({m}), b = param({m}), r = param({n, m});
  Attrs ln;
  ln.ints = {1, 1, 1};
  ln.value = 1e-5;
  auto y = make_node(Op::Add, {make_node(Op::Gelu, {make_node(Op::LayerNorm, {x, w, b}, ln)}), r});
  size_t kernels = 0;
  auto got = go(y, {xs, ws, bs, rs}, &kernels);
  EXPECT_EQ(kernels, 1u);
  std::vector<double> want(xs.size());
  for (int64_t i = 0; i < n; ++i) {
    double mean = 0, var = 0;
    for (int64_t j = 0; j < m; ++j) mean += xs[i * m + j];
    mean /= m;
    for (int64_t j = 0; j < m; ++j) var += (xs[i * m + j] - mean) * (xs[i * m + j] - mean);
    var /= m;
    for (int64_t j = 0; j < m; ++j) {
      double z = (xs[i * m + j] - mean) / std::sqrt(var + 1e-5) * ws[j] + bs[j];
      want[i * m + j] = 0.5 * z * (1 + std::erf(z / std::sqrt(2.0))) + rs[i * m + j];
    }
  }
  expect_near(got, want, 1e-5, 5e-5, "gelu(layer_norm(x)) + r");
}

TEST_F(CudaGraphs, MatmulSumsAndMovement) {
  const int64_t a = 33, k = 70, b = 41;
  auto xs = random_values(DType::Float32, a * k, 25), ys = random_values(DType::Float32, k * b, 26);
  auto mm = go(make_node(Op::Matmul, {param({a, k}), param({k, b})}), {xs, ys});
  std::vector<double> want(static_cast<size_t>(a * b), 0.0);
  for (int64_t i = 0; i < a; ++i)
    for (int64_t j = 0; j < b; ++j)
      for (int64_t q = 0; q < k; ++q) want[i * b + j] += xs[i * k + q] * ys[q * b + j];
  expect_near(mm, want, 1e-5, 1e-4, "matmul");

  const int64_t n = 300, m = 2000;
  auto zs = random_values(DType::Float32, n * m, 27);
  auto col = go(node(Op::ReduceSum, {param({n, m})}, {0}), {zs});
  std::vector<double> cw(static_cast<size_t>(m), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t j = 0; j < m; ++j) cw[j] += zs[i * m + j];
  expect_near(col, cw, 1e-5, 1e-4, "sum(0)");
  auto mean = go(node(Op::Mean, {param({n, m})}, {0, 1}), {zs});
  double mw = 0;
  for (double v : zs) mw += v;
  expect_near(mean, {mw / static_cast<double>(n * m)}, 1e-5, 1e-6, "mean");

  auto ps = random_values(DType::Float32, 32, 28), qs = random_values(DType::Float32, 32, 29);
  auto t = node(Op::Reshape, {node(Op::Permute, {param({8, 4})}, {1, 0})}, {32});
  auto mv =
      go(make_node(Op::Add, {make_node(Op::Mul, {t, make_scalar(DType::Float32, 2)}), param({32})}),
         {ps, {}, qs});
  std::vector<double> tw(32);
  for (int64_t f = 0; f < 32; ++f)
    tw[f] = round_to(DType::Float32, ps[(f % 8) * 4 + f / 8] * 2 + qs[f]);
  expect_near(mv, tw, 1e-6, 0, "permute+reshape");
}

// ---- throughput, printed for information (never asserted) ----

TEST_F(CudaGpu, ThroughputReport) {
  // Device buffers of small values (uninitialized memory could hold NaNs or huge arguments that
  // take slow paths).
  auto filled = [&](int64_t n) {
    std::vector<float> h(static_cast<size_t>(n), 0.5f);
    auto b = backend_->allocate(h.size() * 4);
    backend_->copy_from_host(*b, h.data(), h.size() * 4);
    return b;
  };
  auto time_plan = [&](const Plan& plan, std::vector<RunInput> ri, double bytes, const char* what) {
    auto exe = backend_->compile(plan);
    for (int i = 0; i < 3; ++i) exe->run(ri, nullptr);
    const int reps = 20;
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < reps; ++i) exe->run(ri, nullptr);
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count() /
        reps;
    std::printf("[throughput] %-40s %8.3f ms/run (incl. sync + allocation)  %7.1f GB/s\n", what, ms,
                bytes / ms / 1e6);
  };
  {
    const int64_t n = 8192, m = 4096;
    auto x = filled(n * m), b = filled(m);
    std::vector<RunInput> ri(2);
    ri[0].buffer = x.get(), ri[1].buffer = b.get();
    time_plan(bias_add(n, m), ri, 2.0 * n * m * 4, "bias_add 8192x4096 f32");
  }
  {
    const int64_t n = 4096, m = 4096;
    auto x = filled(n * m);
    std::vector<RunInput> ri(1);
    ri[0].buffer = x.get();
    time_plan(softmax_rows(n, m), ri, 2.0 * n * m * 4, "softmax 4096x4096 f32 (one kernel)");
  }
  {
    const int64_t n = 1 << 24;
    auto x = filled(n);
    std::vector<RunInput> ri(1);
    ri[0].buffer = x.get();
    time_plan(scale_1d(n, DType::Float32), ri, 2.0 * n * 4, "sin(x)*2.5+x 2^24 f32");
  }
  {
    const int64_t n = 4096, m = 8192;
    auto x = filled(n * m);
    std::vector<RunInput> ri(1);
    ri[0].buffer = x.get();
    time_plan(column_sum(n, m), ri, 1.0 * n * m * 4, "column sum 4096x8192 f32");
  }
}

}  // namespace
}  // namespace lt
