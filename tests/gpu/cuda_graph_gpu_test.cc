// CUDA graph replay (backends/cuda/cuda_graph.h) and the disk cache of compiled CUDA modules
// (backends/cuda/cuda_module_image.h) on a GPU:
//  - one executable run 8 times with fresh input buffers (new addresses), new values and new
//    scalars each run gives, from the 4th run on through one graph launch, exactly the results of
//    the same plan without graphs (LT_CUDA_GRAPHS=0) and the reference interpreter's, over
//    kernels, a strided cuBLAS GEMM and a pointer-array batched GEMM;
//  - training with SGD (momentum) and AdamW on lazy:cuda (10 steps), whose updates are donated in
//    place and whose learning rate and Adam step change every step, ends with the same parameters
//    with and without graphs, and lt.metrics counts the graph launches;
//  - a module serialized by the backend loads (cubin, and PTX for the driver's JIT) without NVRTC
//    and computes the same; damaged bytes are an lt::Error; through the runtime, a cleared memory
//    cache is refilled from LT_CACHE_DIR with nothing compiled.
// Skips without a GPU; tests/gpu/run.sh builds and runs it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <memory>
#include <random>

#include "../cpp/graph_util.h"
#include "../cpp/test_util.h"
#include "backends/backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_device.h"
#include "backends/cuda/cuda_graph.h"
#include "backends/cuda/driver_api.h"
#include "backends/reference/reference_backend.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "nn/nn.h"
#include "nn/optim.h"
#include "runtime/disk_cache.h"
#include "runtime/executor.h"
#include "runtime/metrics.h"
#include "runtime/ops.h"
#include "runtime/sync.h"

namespace lt {
namespace {

using testing::param;

// Sets an environment variable for one scope (nullptr: unset), restoring it after.
class ScopedEnv {
 public:
  ScopedEnv(const char* name, const char* value) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (had_) old_ = old;
    if (value)
      ::setenv(name, value, 1);
    else
      ::unsetenv(name);
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

int64_t counter(const char* name) { return metrics::counters().at(name); }

// ---- one plan, run by the backend directly ----------------------------------------------------

NodePtr node(Op op, NodeList in, std::vector<int64_t> ints = {}) {
  Attrs a;
  a.ints = to_ints(ints);
  return make_node(op, std::move(in), a);
}

// Kernels around a strided GEMM (x @ w) and a GEMM whose 2-d batch needs pointer arrays
// (q[3,5,6,4] @ k[5,4,2]), with a runtime scalar in both epilogues.
struct TestGraph {
  NodeList roots;
  Graph graph;
  TestGraph() {
    NodePtr x = param({64, 48}), w = param({48, 40}), bias = param({40}), q = param({3, 5, 6, 4}),
            k = param({5, 4, 2});
    NodePtr s = make_scalar(DType::Float32, 0.5);
    NodePtr h =
        node(Op::Relu, {node(Op::Add, {node(Op::Mul, {node(Op::Matmul, {x, w}), s}), bias})});
    NodePtr sm = node(Op::Softmax, {h}, {1});
    NodePtr rows = node(Op::ReduceSum, {h}, {1});
    NodePtr att = node(Op::Mul, {node(Op::Sin, {node(Op::Matmul, {q, k})}), s});
    roots = {sm, rows, att};
    graph = collect_graph({sm.get(), rows.get(), att.get()});
  }
};

// Inputs of run `r`: values seeded by r, the scalar 0.5 + r / 4.
struct HostInputs {
  std::vector<std::vector<float>> arrays;  // per graph input (empty for the scalar)
  double scalar = 0;
};
HostInputs inputs_for(const Graph& g, int r) {
  HostInputs in;
  std::mt19937 rng(100 + r);
  std::normal_distribution<float> normal(0, 1);
  for (const Node* n : g.inputs) {
    std::vector<float> v;
    if (n->op != Op::Scalar) {
      v.resize(static_cast<size_t>(numel(n->shape)));
      for (float& f : v) f = normal(rng);
    }
    in.arrays.push_back(std::move(v));
  }
  in.scalar = 0.5 + r / 4.0;
  return in;
}

// Runs `exe` of `plan` on `in`, uploading into fresh buffers. With `hold`, this run's input and
// output buffers stay alive there, so the caching allocator gives the next run other addresses
// (freed blocks would come straight back). Returns every output's values.
std::vector<std::vector<double>> run_plan(Backend& be, Executable& exe, const Plan& plan,
                                          const Graph& g, const HostInputs& in, RunStats* stats,
                                          std::vector<BufferPtr>* hold = nullptr) {
  std::vector<BufferPtr> keep;
  std::vector<RunInput> ri(g.inputs.size());
  for (size_t i = 0; i < g.inputs.size(); ++i) {
    if (g.inputs[i]->op == Op::Scalar) {
      ri[i].scalar = in.scalar;
      ri[i].scalar_i = static_cast<int64_t>(in.scalar);
      continue;
    }
    const auto& v = in.arrays[i];
    auto buf = be.allocate(v.size() * sizeof(float));
    be.copy_from_host(*buf, v.data(), v.size() * sizeof(float));
    ri[i].buffer = buf.get();
    keep.push_back(std::move(buf));
  }
  auto outs = exe.run(ri, stats);
  std::vector<std::vector<double>> res;
  for (int b : plan.output_buffers) {
    const BufferSpec& spec = plan.buffers[static_cast<size_t>(b)];
    std::vector<float> host(static_cast<size_t>(spec.numel));
    be.copy_to_host(host.data(), *outs.at(static_cast<size_t>(b)), host.size() * sizeof(float));
    res.emplace_back(host.begin(), host.end());
  }
  if (hold) {
    for (auto& b : keep) hold->push_back(std::move(b));
    for (auto& b : outs)
      if (b) hold->push_back(std::move(b));
  }
  return res;
}

class CudaGraphGpu : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << cuda_driver().error;
    if (!cuda_driver().graphs) GTEST_SKIP() << "the driver lacks the CUDA graph entry points";
  }
};

TEST_F(CudaGraphGpu, ChangingAddressesValuesAndScalarsGiveThePlainResults) {
  ScopedEnv cache("LT_CACHE_DIR", "off");
  auto cuda = make_cuda_backend(0);
  auto ref = make_reference_backend();
  TestGraph tg;
  Plan plan = lower(tg.graph, cuda->lower_options());
  ASSERT_EQ(plan.gemms.size(), 2u) << plan.grouping;
  ASSERT_GE(plan.kernels.size(), 2u) << plan.grouping;
  Plan ref_plan = lower(tg.graph, ref->lower_options());
  std::unique_ptr<Executable> plain, graphed;
  {
    ScopedEnv off("LT_CUDA_GRAPHS", "0");
    plain = cuda->compile(plan);
  }
  {
    // Every replay here recaptures both GEMMs, more than plain launches of its few steps would
    // cost: "always" keeps the graph anyway, to test the updates (the default drops it after
    // kCudaGraphSlowReplays such replays: DropsTheGraphWhenReplaysKeepRecapturing).
    ScopedEnv on("LT_CUDA_GRAPHS", "always");
    graphed = cuda->compile(plan);
  }
  auto ref_exe = ref->compile(ref_plan);
  std::vector<BufferPtr> held;  // every graphed run gets new input and output addresses
  for (int r = 0; r < 8; ++r) {
    SCOPED_TRACE("run " + std::to_string(r));
    const HostInputs in = inputs_for(tg.graph, r);
    RunStats sp, sg;
    auto want = run_plan(*cuda, *plain, plan, tg.graph, in, &sp);
    auto got = run_plan(*cuda, *graphed, plan, tg.graph, in, &sg, &held);
    auto oracle = run_plan(*ref, *ref_exe, ref_plan, tg.graph, in, nullptr);
    EXPECT_EQ(sp.graph_launches, 0);
    EXPECT_EQ(sg.graph_launches, r >= 3 ? 1 : 0);
    EXPECT_EQ(sg.kernel_launches, sp.kernel_launches);
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) {
      // The same kernels and cuBLAS calls, replayed: the same numbers.
      testing::expect_close(got[o], want[o], 1e-6, 1e-7,
                            "graph vs plain, output " + std::to_string(o));
      testing::expect_close(got[o], oracle[o], 1e-4, 1e-4,
                            "graph vs reference, output " + std::to_string(o));
    }
  }
  // Profiling times each launch, so that run launches plainly, with the same results.
  RunStats prof;
  prof.on_kernel = [](const std::string&, std::chrono::steady_clock::time_point,
                      std::chrono::steady_clock::time_point) {};
  const HostInputs in = inputs_for(tg.graph, 9);
  RunStats sp;
  auto want = run_plan(*cuda, *plain, plan, tg.graph, in, &sp);
  auto got = run_plan(*cuda, *graphed, plan, tg.graph, in, &prof, &held);
  EXPECT_EQ(prof.graph_launches, 0);
  for (size_t o = 0; o < got.size(); ++o)
    testing::expect_close(got[o], want[o], 1e-6, 1e-7, "profiled run");
  // The same inputs twice in a row (nothing to update) still give the same numbers.
  const HostInputs again = inputs_for(tg.graph, 10);
  std::vector<BufferPtr> keep;
  for (int rep = 0; rep < 2; ++rep) {
    RunStats s;
    auto g2 = run_plan(*cuda, *graphed, plan, tg.graph, again, &s);
    auto w2 = run_plan(*cuda, *plain, plan, tg.graph, again, nullptr);
    EXPECT_EQ(s.graph_launches, 1);
    for (size_t o = 0; o < g2.size(); ++o)
      testing::expect_close(g2[o], w2[o], 1e-6, 1e-7, "repeat");
  }
}

// A graph whose replays recapture its GEMMs (new input and output addresses every run), each
// replay costing more than plain launches of its steps, is dropped after kCudaGraphSlowReplays
// such replays; the runs give the plain results either way (checked above with "always").
TEST_F(CudaGraphGpu, DropsTheGraphWhenReplaysKeepRecapturing) {
  ScopedEnv cache("LT_CACHE_DIR", "off");
  ScopedEnv on("LT_CUDA_GRAPHS", nullptr);
  auto cuda = make_cuda_backend(0);
  TestGraph tg;
  Plan plan = lower(tg.graph, cuda->lower_options());
  ASSERT_EQ(plan.gemms.size(), 2u) << plan.grouping;
  auto exe = cuda->compile(plan);
  std::vector<BufferPtr> held;
  int graphed = 0, last = -1;
  for (int r = 0; r < kCudaGraphWarmupRuns + 1 + kCudaGraphSlowReplays + 3; ++r) {
    RunStats s;
    run_plan(*cuda, *exe, plan, tg.graph, inputs_for(tg.graph, r), &s, &held);
    graphed += static_cast<int>(s.graph_launches);
    if (s.graph_launches) last = r;
  }
  // The first replay builds the graph (no recapture); each of the next kCudaGraphSlowReplays
  // recaptures a GEMM at least (new input addresses), which outweighs plain launches of so few
  // steps; then the graph is gone.
  ASSERT_LT(plan.ordered_steps().size(), kCudaGraphRecaptureCost);
  EXPECT_EQ(graphed, 1 + kCudaGraphSlowReplays);
  EXPECT_EQ(last, kCudaGraphWarmupRuns + kCudaGraphSlowReplays);
}

// ---- training on lazy:cuda -------------------------------------------------------------------

struct Trained {
  std::vector<std::vector<double>> params;
  int64_t graph_launches = 0, donated = 0;
};

// An MLP plus a batched product whose 2-d batch needs pointer arrays, 10 steps with a learning
// rate that changes every step.
Trained train(const std::string& opt) {
  const Device d = Device::parse("lazy:cuda");
  std::vector<Tensor> ps = {testing::random_tensor({64, 24}, 11, d, -0.3f, 0.3f),
                            testing::random_tensor({64}, 12, d, -0.1f, 0.1f),
                            testing::random_tensor({4, 64}, 13, d, -0.3f, 0.3f),
                            testing::random_tensor({4}, 14, d, -0.1f, 0.1f),
                            testing::random_tensor({3, 6, 5}, 15, d, -0.3f, 0.3f)};
  for (auto& p : ps) p.requires_grad_();
  Tensor x = testing::random_tensor({32, 24}, 16, d), y = testing::random_tensor({32, 4}, 17, d);
  Tensor xb = testing::random_tensor({2, 3, 8, 6}, 18, d);
  std::unique_ptr<optim::Optimizer> o;
  if (opt == "sgd")
    o = std::make_unique<optim::SGD>(ps, 0.05, 0.9, 1e-3);
  else
    o = std::make_unique<optim::AdamW>(ps, 1e-2, 0.9, 0.999, 1e-8, 0.05);
  const int64_t g0 = counter("cuda_graph_launches"), d0 = counter("donated_buffers");
  for (int s = 0; s < 10; ++s) {
    o->set_lr((opt == "sgd" ? 0.05 : 1e-2) * (1.0 + 0.1 * s));
    o->zero_grad();
    Tensor h = (matmul(x, ps[0].transpose(0, 1)) + ps[1]).relu();
    Tensor att = matmul(xb, ps[4]).tanh();
    Tensor loss = nn::mse_loss(matmul(h, ps[2].transpose(0, 1)) + ps[3], y) + (att * att).mean();
    loss.backward();
    o->step();
  }
  Trained r;
  for (auto& p : ps) r.params.push_back(p.to_vector<double>());
  r.graph_launches = counter("cuda_graph_launches") - g0;
  r.donated = counter("donated_buffers") - d0;
  return r;
}

TEST_F(CudaGraphGpu, DonatedOptimizerStepsMatchPlainLaunches) {
  ScopedEnv cache("LT_CACHE_DIR", "off");
  for (const std::string opt : {"sgd", "adamw"}) {
    SCOPED_TRACE(opt);
    Trained plain, graphed;
    {
      ScopedEnv off("LT_CUDA_GRAPHS", "0");
      clear_graph_cache();  // executables read LT_CUDA_GRAPHS when they are created
      plain = train(opt);
    }
    {
      // "always": each step's gradients are new output buffers, so the weight-gradient GEMMs are
      // captured again at every replay, which by default drops the graph after
      // kCudaGraphSlowReplays replays (4 graph launches here); this test is of the replays.
      ScopedEnv on("LT_CUDA_GRAPHS", "always");
      clear_graph_cache();
      graphed = train(opt);
    }
    clear_graph_cache();
    EXPECT_EQ(plain.graph_launches, 0);
    // Every step is one sync of the same graph (lazy:cpu shows it too): runs 4 to 10 are graph
    // launches.
    EXPECT_EQ(graphed.graph_launches, 7);
    EXPECT_GT(plain.donated, 0);
    EXPECT_EQ(graphed.donated, plain.donated);
    ASSERT_EQ(graphed.params.size(), plain.params.size());
    for (size_t i = 0; i < plain.params.size(); ++i)
      testing::expect_close(graphed.params[i], plain.params[i], 1e-6, 1e-7,
                            opt + " param " + std::to_string(i));
  }
}

// ---- the disk cache ---------------------------------------------------------------------------

TEST_F(CudaGraphGpu, SerializedModulesLoadWithoutNvrtcForCubinAndPtx) {
  TestGraph tg;
  for (const bool ptx : {false, true}) {
    SCOPED_TRACE(ptx ? "ptx" : "cubin");
    std::string arch;
    {
      auto probe = make_cuda_backend(0);
      const CudaDevice& dev = dynamic_cast<CudaBackend&>(*probe).device();
      arch = "compute_" + std::to_string(dev.cc_major() * 10 + dev.cc_minor());
    }
    ScopedEnv env("LT_CUDA_ARCH", ptx ? arch.c_str() : nullptr);
    auto be = make_cuda_backend(0);
    auto& cuda = dynamic_cast<CudaBackend&>(*be);
    const std::string key = be->cache_target();
    EXPECT_EQ(key.rfind(cuda.target() + " nvrtc ", 0), 0u) << key;
    Plan plan = lower(tg.graph, be->lower_options());
    auto exe = be->compile(plan);
    std::string bytes;
    ASSERT_TRUE(be->serialize(*exe, &bytes));
    std::unique_ptr<Executable> loaded;
    try {
      loaded = be->load(plan, bytes);
    } catch (const Error& e) {
      FAIL() << e.what();
    }
    ASSERT_TRUE(loaded);
    EXPECT_EQ(loaded->kernel_sources(), exe->kernel_sources());
    for (int r = 0; r < 5; ++r) {  // past the graph warm-up too
      const HostInputs in = inputs_for(tg.graph, r);
      auto want = run_plan(*be, *exe, plan, tg.graph, in, nullptr);
      auto got = run_plan(*be, *loaded, plan, tg.graph, in, nullptr);
      for (size_t o = 0; o < got.size(); ++o)
        testing::expect_close(got[o], want[o], 0, 0,
                              "loaded vs compiled, output " + std::to_string(o));
    }
    // Damage: truncated bytes, an image the driver rejects, another kernel count.
    EXPECT_THROW(be->load(plan, std::string_view(bytes).substr(0, bytes.size() / 2)), Error);
    std::string bad = bytes;
    const size_t at = ptx ? bad.find(".target")
                          : bad.find(
                                "\x7f"
                                "ELF");
    ASSERT_NE(at, std::string::npos);
    bad[at + 1] = 'X';
    EXPECT_THROW(be->load(plan, bad), Error);
    // Another kernel count: a whole plan of a smaller graph (lower() returns complete plans, so
    // dropping a kernel from this one would leave steps naming a kernel that is not there).
    const NodePtr small_root = node(Op::Sin, {param({7, 9})});
    const Graph small = collect_graph({small_root.get()});
    const Plan fewer = lower(small, be->lower_options());
    ASSERT_NE(fewer.kernels.size(), plan.kernels.size());
    EXPECT_THROW(be->load(fewer, bytes), Error);
  }
}

TEST_F(CudaGraphGpu, ClearedMemoryCacheIsRefilledFromDiskWithNothingCompiled) {
  char tmpl[] = "/tmp/lt_cuda_cache_XXXXXX";
  ASSERT_NE(::mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  ScopedEnv cache("LT_CACHE_DIR", dir.c_str());
  const Device d = Device::parse("lazy:cuda");
  auto work = [&] {
    std::vector<std::vector<double>> out;
    Tensor x = testing::random_tensor({32, 64}, 1, d), m = testing::random_tensor({64, 16}, 2, d);
    mark_step();
    for (int step = 0; step < 5; ++step) {
      Tensor a = (matmul(x, m) * (2.0 - 0.25 * step)).tanh();
      Tensor b = softmax(x * (1.0 + step), 1).sum({1});
      mark_step();
      out.push_back(a.to_vector<double>());
      out.push_back(b.to_vector<double>());
    }
    return out;
  };
  clear_graph_cache();
  metrics::reset();
  auto first = work();
  EXPECT_GE(counter("graph_compiles"), 1);
  EXPECT_GE(cache_info().entries, 1);
  clear_graph_cache();
  metrics::reset();
  auto second = work();
  EXPECT_EQ(counter("graph_compiles"), 0);
  EXPECT_EQ(counter("kernels_compiled"), 0);
  EXPECT_GE(counter("disk_cache_hits"), 1);
  ASSERT_EQ(first.size(), second.size());
  for (size_t i = 0; i < first.size(); ++i) EXPECT_EQ(first[i], second[i]) << "result " << i;
  clear_graph_cache();
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

}  // namespace
}  // namespace lt
