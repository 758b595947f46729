// The CUDA backend against the reference interpreter (the project's oracle, which computes in
// float64 and shares no code with the CUDA code generator) on real graphs lowered by the real
// pipeline: the same graph kinds tests/cpp/cuda_codegen_test.cc compiles without a GPU, now run.
// Needs a GPU; tests/gpu/run.sh builds and runs it. Skips (loudly) where no device is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "backends/backend.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/driver_api.h"
#include "backends/reference/reference_backend.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "ir/half.h"
#include "lowering/lower.h"
#include "tests/cpp/graph_util.h"

namespace lt {
namespace {

// A graph built from params; `params` keeps the leaves in graph-input order.
using G = testing::ParamList;
NodePtr op(Op o, NodeList in, std::vector<int64_t> ints = {}, bool keepdim = false) {
  Attrs a;
  a.ints = to_ints(ints);
  a.keepdim = keepdim;
  return make_node(o, std::move(in), a);
}
NodePtr bin(Op o, NodePtr a, NodePtr b) { return make_node(o, {std::move(a), std::move(b)}); }
NodePtr cast(NodePtr x, DType t) {
  Attrs a;
  a.dtype = t;
  return make_node(Op::Cast, {std::move(x)}, a);
}
NodePtr layer_norm(NodePtr x, NodePtr w, NodePtr b) {
  Attrs a;
  a.ints = {1, 1, 1};
  a.value = 1e-5;
  return make_node(Op::LayerNorm, {std::move(x), std::move(w), std::move(b)}, a);
}

// Random bytes of each input of graph `g` (in its input order), valid values of their dtype.
std::vector<std::vector<char>> random_inputs(const Graph& g, uint32_t seed, bool positive) {
  std::mt19937 rng(seed);
  std::normal_distribution<double> normal(0, 1);
  std::vector<std::vector<char>> out;
  for (const Node* n : g.inputs) {
    const int64_t count = n->op == Op::Scalar ? 0 : numel(n->shape);
    std::vector<char> bytes(static_cast<size_t>(count) * dtype_size(n->dtype));
    for (int64_t i = 0; i < count; ++i) {
      void* p = bytes.data() + i * dtype_size(n->dtype);
      if (is_floating(n->dtype)) {
        double v = normal(rng);
        store_from_double(p, n->dtype, positive ? std::fabs(v) + 0.1 : v);
      } else {
        store_from_int(p, n->dtype, static_cast<int64_t>(rng() % 2000) - (positive ? 0 : 1000));
      }
    }
    out.push_back(std::move(bytes));
  }
  return out;
}

class CudaVsReference : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << cuda_driver().error;
    if (!cuda_) cuda_ = make_cuda_backend(0);
    if (!ref_) ref_ = make_reference_backend();
  }

  // Lowers `roots`, runs the plan on both backends with the same random inputs and compares every
  // output; `kernels` >= 0 also pins the kernel count (as lowering_test does).
  void same(const std::string& what, const NodeList& roots, double rtol, double atol,
            int kernels = -1, bool positive = false) {
    SCOPED_TRACE(what);
    std::vector<const Node*> r;
    for (auto& n : roots) r.push_back(n.get());
    Graph g = collect_graph(r);
    Plan plan = lower(g);
    if (kernels >= 0) {
      EXPECT_EQ(static_cast<int>(plan.kernels.size()), kernels) << plan.grouping;
    }
    auto data = random_inputs(g, 42, positive);
    auto run = [&](Backend& be, std::vector<BufferPtr>& keep) {
      std::vector<RunInput> in(g.inputs.size());
      for (size_t i = 0; i < g.inputs.size(); ++i) {
        const Node* n = g.inputs[i];
        if (n->op == Op::Scalar) {
          in[i].scalar = n->scalar;
          in[i].scalar_i = n->scalar_i;
          continue;
        }
        auto buf = be.allocate(data[i].size());
        if (!data[i].empty()) be.copy_from_host(*buf, data[i].data(), data[i].size());
        in[i].buffer = buf.get();
        keep.push_back(std::move(buf));
      }
      auto exe = be.compile(plan);
      RunStats stats;
      auto outs = exe->run(in, &stats);
      std::vector<std::vector<double>> vals;
      for (size_t o = 0; o < plan.output_buffers.size(); ++o) {
        const int b = plan.output_buffers[o];
        const BufferSpec& spec = plan.buffers[static_cast<size_t>(b)];
        std::vector<char> host(static_cast<size_t>(spec.numel) * dtype_size(spec.dtype));
        if (spec.kind == BufferSpec::Kind::Output) {
          if (!host.empty())
            be.copy_to_host(host.data(), *outs.at(static_cast<size_t>(b)), host.size());
        } else if (spec.kind == BufferSpec::Kind::Input) {
          host = data[static_cast<size_t>(spec.input)];
        }
        std::vector<double> v(static_cast<size_t>(spec.numel));
        for (size_t i = 0; i < v.size(); ++i)
          v[i] = load_as_double(host.data() + i * dtype_size(spec.dtype), spec.dtype);
        vals.push_back(std::move(v));
      }
      return vals;
    };
    std::vector<BufferPtr> keep_ref, keep_cuda;
    auto want = run(*ref_, keep_ref);
    std::vector<std::vector<double>> got;
    try {
      got = run(*cuda_, keep_cuda);
    } catch (const Error& e) {
      FAIL() << e.what();
    }
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < got.size(); ++o) {
      ASSERT_EQ(got[o].size(), want[o].size());
      int bad = 0;
      for (size_t i = 0; i < got[o].size() && bad < 5; ++i) {
        const double w = want[o][i], v = got[o][i];
        bool ok = std::isnan(w)   ? std::isnan(v)
                  : std::isinf(w) ? v == w
                                  : std::fabs(v - w) <= atol + rtol * std::fabs(w);
        if (!ok) {
          ++bad;
          ADD_FAILURE() << "output " << o << " element " << i << ": cuda " << v << ", reference "
                        << w;
        }
      }
    }
  }

  static std::unique_ptr<Backend> cuda_, ref_;
};
std::unique_ptr<Backend> CudaVsReference::cuda_, CudaVsReference::ref_;

TEST_F(CudaVsReference, ElementwiseChainsAndBroadcasts) {
  G g;
  NodePtr x = g.p({1 << 16});
  for (int i = 0; i < 20; ++i) x = bin(Op::Add, x, op(Op::Sin, {x}));
  same("x + sin(x) x20", {x}, 1e-5, 1e-5, 1);
  G h;
  auto y = bin(Op::Mul, bin(Op::Add, h.p({64, 257}), h.p({257})), h.p({64, 1}));
  same("broadcast", {y}, 1e-6, 1e-7, 1);
  G s;  // a runtime scalar, passed by value
  same("scalar", {bin(Op::Mul, s.p({1000}), make_scalar(DType::Float32, 2.5))}, 1e-6, 0, 1);
}

TEST_F(CudaVsReference, MovementIsIndexArithmetic) {
  G g;
  auto t = op(Op::Reshape, {op(Op::Permute, {g.p({37, 53})}, {1, 0})}, {37 * 53});
  same("permute+reshape", {bin(Op::Add, t, g.p({37 * 53}))}, 1e-6, 1e-7, 1);
  G h;
  auto z = op(Op::Permute, {op(Op::Reshape, {h.p({6, 20})}, {3, 4, 10})}, {2, 0, 1});
  same("3-d permute of a reshape", {op(Op::Exp, {z})}, 1e-6, 1e-7, 1);
}

TEST_F(CudaVsReference, EveryReductionAlongEveryAxisInEveryMapping) {
  for (Shape s :
       {Shape{4096, 8}, Shape{512, 100}, Shape{64, 4096}, Shape{4, 70000}, Shape{300, 4096}}) {
    for (Op r : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin}) {
      G g;
      auto x = g.p(s);
      same(std::string(op_name(r)) + " " + shape_str(s), {op(r, {x}, {1}), op(r, {x}, {0}, true)},
           2e-5, 1e-4);
    }
  }
  G p;
  same("prod", {op(Op::ReduceProd, {p.p({64, 12})}, {1})}, 1e-5, 1e-6, -1, /*positive=*/true);
  G m;
  // 90,300 elements into one: two stages (lowering/split_reduce.cc), 350 partials then their sum.
  same("mean of everything", {op(Op::Mean, {m.p({300, 301})}, {0, 1})}, 1e-5, 1e-6, 2);
}

// Column sums weighted by a per-row statistic (a layer norm's weight gradient): Tile mode with its
// broadcast loads, 8, 16 and 32 warps by the columns' length, odd column counts (inactive lanes).
TEST_F(CudaVsReference, WeightedColumnSumsInEveryTileWidth) {
  for (Shape s : {Shape{300, 1100}, Shape{900, 1057}, Shape{3000, 1031}, Shape{8192, 768}}) {
    G g;
    auto x = g.p(s), stat = g.p({s[0], 1}), dy = g.p(s, DType::BFloat16);
    auto prod = bin(Op::Mul, bin(Op::Mul, x, stat), cast(dy, DType::Float32));
    same("weighted column sum " + shape_str(s), {op(Op::ReduceSum, {prod}, {0})}, 1e-4, 1e-3);
  }
}

TEST_F(CudaVsReference, IntegerReductions) {
  for (DType t : {DType::Int32, DType::Int64, DType::Int8, DType::UInt8}) {
    G g;
    auto x = g.p({33, 700}, t);
    NodeList roots;
    for (Op r : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin}) {
      try {  // the IR may want a cast first for some (op, dtype) pairs
        roots.push_back(op(r, {x}, {1}));
        roots.push_back(op(r, {x}, {0}));
      } catch (const Error&) {
      }
    }
    ASSERT_FALSE(roots.empty()) << dtype_name(t);
    same(std::string("int reductions ") + std::string(dtype_name(t)), roots, 0, 0);
  }
}

TEST_F(CudaVsReference, SoftmaxLogSoftmaxLayerNormAreOneKernelEach) {
  for (Shape s : {Shape{16, 48}, Shape{1000, 300}, Shape{8, 20000}}) {
    G g;
    auto x = g.p(s);
    same("softmax " + shape_str(s), {op(Op::Softmax, {x}, {-1})}, 1e-5, 1e-7, 1);
    same("log_softmax " + shape_str(s), {op(Op::LogSoftmax, {x}, {-1})}, 1e-5, 1e-5, 1);
    G h;
    auto ln = layer_norm(h.p(s), h.p({s[1]}), h.p({s[1]}));
    same("layer_norm " + shape_str(s), {ln}, 1e-4, 1e-5, 1);
    G k;
    auto y =
        bin(Op::Add, make_node(Op::Gelu, {layer_norm(k.p(s), k.p({s[1]}), k.p({s[1]}))}), k.p(s));
    same("gelu(layer_norm)+r " + shape_str(s), {y}, 1e-4, 1e-5, 1);
  }
}

TEST_F(CudaVsReference, SixteenBitTypesComputeInFloat32) {
  for (DType t : {DType::Float16, DType::BFloat16}) {
    const double tol = t == DType::Float16 ? 4e-3 : 3e-2;
    G g;
    auto x = g.p({128, 1000}, t);
    same(std::string("softmax ") + std::string(dtype_name(t)), {op(Op::Softmax, {x}, {-1})}, tol,
         tol, 1);
    G h;
    auto y = bin(Op::Mul, op(Op::Exp, {h.p({4099}, t)}), h.p({4099}, t));
    same(std::string("exp*y ") + std::string(dtype_name(t)), {y}, tol, 1e-3, 1);
  }
}

TEST_F(CudaVsReference, CastsBetweenEveryDtypePair) {
  const DType all[] = {DType::Bool,    DType::UInt8,    DType::Int8,    DType::Int32,  DType::Int64,
                       DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};
  for (DType from : all) {
    G g;
    auto x = g.p({1000}, from);
    NodeList roots;
    for (DType to : all)
      if (to != from) roots.push_back(cast(x, to));
    same(std::string("casts from ") + std::string(dtype_name(from)), roots, 0, 0);
  }
}

TEST_F(CudaVsReference, RandUniformEqualsTheReferenceBitForBit) {
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    Attrs a;
    a.ints = {257, 31};
    a.dtype = t;
    a.stream = 1;
    auto r = make_node(
        Op::Rand, {make_int_scalar(DType::Int64, 987654321), make_int_scalar(DType::Int64, 4242)},
        a);
    same(std::string("rand ") + std::string(dtype_name(t)), {r, op(Op::ReduceSum, {r}, {1})}, 0,
         1e-4);
  }
}

TEST_F(CudaVsReference, MatmulAsLoweredToday) {
  G g;
  auto mm = make_node(Op::Matmul, {g.p({64, 128}), g.p({128, 48})});
  same("relu(matmul + bias)", {op(Op::Relu, {bin(Op::Add, mm, g.p({48}))})}, 1e-4, 1e-4);
  G b;
  same("batched matmul", {make_node(Op::Matmul, {b.p({4, 16, 32}), b.p({4, 32, 8})})}, 1e-4, 1e-4);
}

TEST_F(CudaVsReference, EmptyAndZeroDimensional) {
  G g;
  same("0-d", {op(Op::Sin, {g.p({})})}, 1e-6, 0);
  G h;
  same("empty rows", {op(Op::ReduceSum, {h.p({16, 0})}, {1})}, 0, 0);
  G k;
  same("no rows", {op(Op::ReduceSum, {k.p({0, 16})}, {1})}, 0, 0);
}

}  // namespace
}  // namespace lt
