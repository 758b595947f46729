// Matmuls lowered to cuBLAS Gemm steps (backends/cuda/cublas_gemm.cc) against the reference
// interpreter (float64, no shared code) on random inputs: plain, transposed, batched, broadcast,
// vector, float64, and with fused prologue/epilogue kernels around the GEMM. Needs a GPU;
// tests/gpu/run.sh builds and runs it. Skips (loudly) where no device is visible.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "backends/backend.h"
#include "backends/cuda/cublas_gemm.h"
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
NodePtr mm(NodePtr a, NodePtr b) { return make_node(Op::Matmul, {std::move(a), std::move(b)}); }
NodePtr tr(NodePtr a, std::vector<int64_t> perm) {
  Attrs at;
  at.ints = to_ints(perm);
  return make_node(Op::Permute, {std::move(a)}, at);
}

class CublasGemm : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_device_available()) GTEST_SKIP() << "no CUDA device: " << cuda_driver().error;
    ASSERT_TRUE(cublas_available()) << cublas_error();
    if (!cuda_) cuda_ = make_cuda_backend(0);
    if (!ref_) ref_ = make_reference_backend();
  }

  // Lowers `root` for the cuda backend, checks it has `gemms` Gemm steps, runs it there and on the
  // reference interpreter with the same random inputs, and compares. With `f64_root` (the same
  // graph over float64 parameters) the reference runs that instead, on the same input values, and
  // its result is rounded once to root's dtype: the reference interpreter decomposes a matmul in
  // the operand dtype, rounding each 16-bit product, which a float32-accumulating GEMM does not.
  void same(const std::string& what, const NodePtr& root, int gemms, double rtol = 1e-4,
            double atol = 1e-4, const NodePtr& f64_root = nullptr) {
    SCOPED_TRACE(what);
    Graph g = collect_graph({root.get()});
    Plan plan = lower(g, cuda_->lower_options());
    EXPECT_EQ(static_cast<int>(plan.gemms.size()), gemms) << plan.grouping;
    std::mt19937 rng(7);
    std::normal_distribution<double> normal(0, 1);
    std::vector<std::vector<char>> data;
    for (const Node* n : g.inputs) {
      std::vector<char> bytes(static_cast<size_t>(numel(n->shape)) * dtype_size(n->dtype));
      for (int64_t i = 0; i < numel(n->shape); ++i)
        store_from_double(bytes.data() + i * dtype_size(n->dtype), n->dtype, normal(rng));
      data.push_back(std::move(bytes));
    }
    auto run = [&](Backend& be, const Graph& g, const Plan& plan,
                   const std::vector<std::vector<char>>& data) {
      std::vector<BufferPtr> keep;
      std::vector<RunInput> in(g.inputs.size());
      for (size_t i = 0; i < g.inputs.size(); ++i) {
        auto buf = be.allocate(data[i].size());
        be.copy_from_host(*buf, data[i].data(), data[i].size());
        in[i].buffer = buf.get();
        keep.push_back(std::move(buf));
      }
      auto outs = be.compile(plan)->run(in, nullptr);
      const int b = plan.output_buffers[0];
      const BufferSpec& spec = plan.buffers[static_cast<size_t>(b)];
      std::vector<char> host(static_cast<size_t>(spec.numel) * dtype_size(spec.dtype));
      be.copy_to_host(host.data(), *outs.at(static_cast<size_t>(b)), host.size());
      std::vector<double> v(static_cast<size_t>(spec.numel));
      for (size_t i = 0; i < v.size(); ++i)
        v[i] = load_as_double(host.data() + i * dtype_size(spec.dtype), spec.dtype);
      return v;
    };
    std::vector<double> want;
    if (f64_root) {
      Graph g64 = collect_graph({f64_root.get()});
      ASSERT_EQ(g64.inputs.size(), g.inputs.size());
      std::vector<std::vector<char>> data64;
      for (size_t j = 0; j < g.inputs.size(); ++j) {
        const Node* n = g.inputs[j];
        ASSERT_EQ(g64.inputs[j]->dtype, DType::Float64);
        ASSERT_EQ(g64.inputs[j]->shape, n->shape);
        std::vector<char> bytes(static_cast<size_t>(numel(n->shape)) * sizeof(double));
        for (int64_t i = 0; i < numel(n->shape); ++i)
          store_from_double(bytes.data() + i * sizeof(double), DType::Float64,
                            load_as_double(data[j].data() + i * dtype_size(n->dtype), n->dtype));
        data64.push_back(std::move(bytes));
      }
      want = run(*ref_, g64, lower(g64, ref_->lower_options()), data64);
      for (double& v : want) v = round_to_dtype(v, root->dtype);
    } else {
      want = run(*ref_, g, plan, data);
    }
    std::vector<double> got;
    try {
      got = run(*cuda_, g, plan, data);
    } catch (const Error& e) {
      FAIL() << e.what();
    }
    ASSERT_EQ(got.size(), want.size());
    int bad = 0;
    for (size_t i = 0; i < got.size() && bad < 5; ++i)
      if (!(std::fabs(got[i] - want[i]) <= atol + rtol * std::fabs(want[i])))
        ++bad, ADD_FAILURE() << "element " << i << ": cuda " << got[i] << ", reference " << want[i];
  }

  static std::unique_ptr<Backend> cuda_, ref_;
};
std::unique_ptr<Backend> CublasGemm::cuda_, CublasGemm::ref_;

TEST_F(CublasGemm, PlainAndTransposed) {
  G g;
  same("x@w", mm(g.p({67, 33}), g.p({33, 129})), 1);
  same("x@w.T", mm(g.p({67, 33}), tr(g.p({129, 33}), {1, 0})), 1);
  same("x.T@w", mm(tr(g.p({33, 67}), {1, 0}), g.p({33, 129})), 1);
  same("x.T@w.T", mm(tr(g.p({33, 67}), {1, 0}), tr(g.p({129, 33}), {1, 0})), 1);
  same("1x1x1", mm(g.p({1, 1}), g.p({1, 1})), 1);
}

TEST_F(CublasGemm, BatchedAndBroadcast) {
  G g;
  same("batched", mm(g.p({4, 6, 5}), g.p({4, 5, 3})), 1);
  same("broadcast B", mm(g.p({3, 5, 6, 4}), g.p({4, 2})), 1);
  same("broadcast A", mm(g.p({6, 4}), g.p({3, 4, 2})), 1);
  // Two batch dims that do not collapse into one stride: one pointer-array call
  // (cublasGemmBatchedEx).
  same("2-d batch", mm(g.p({3, 5, 6, 4}), g.p({5, 4, 2})), 1);
  same("batched transposed", mm(g.p({2, 5, 7}), tr(g.p({2, 3, 7}), {0, 2, 1})), 1);
}

TEST_F(CublasGemm, VectorsAndFloat64) {
  G g;
  same("v@w", mm(g.p({16}), g.p({16, 8})), 1);
  same("x@v", mm(g.p({8, 16}), g.p({16})), 1);
  same("dot", mm(g.p({16}), g.p({16})), 1);
  same("float64", mm(g.p({31, 17}, DType::Float64), g.p({17, 9}, DType::Float64)), 1, 1e-12, 1e-12);
}

// bfloat16/float16 operands and output, float32 accumulation (CUBLAS_COMPUTE_32F). The reference
// computes in float64 from the same rounded inputs and rounds once, so the bound is one output
// rounding each side (bf16: 2^-8 relative, fp16: 2^-11) plus float32 accumulation error.
TEST_F(CublasGemm, Bfloat16AndFloat16) {
  for (DType t : {DType::BFloat16, DType::Float16}) {
    const double tol = t == DType::BFloat16 ? 1e-2 : 2e-3;
    const std::string n(dtype_name(t));
    // Builds the graph twice: in t for cuda, in float64 for the reference.
    auto both = [&](const std::string& what, auto make, double atol) {
      G g, g64;
      same(n + " " + what, make(g, t), 1, tol, atol, make(g64, DType::Float64));
    };
    both(
        "x@w",
        [](G& g, DType d) {
          return mm(g.p({67, 33}, d), g.p({33, 129}, d));
        },
        tol);
    both(
        "x@w.T",
        [](G& g, DType d) {
          return mm(g.p({67, 33}, d), tr(g.p({129, 33}, d), {1, 0}));
        },
        tol);
    both(
        "batched transposed",
        [](G& g, DType d) {
          return mm(g.p({2, 5, 7}, d), tr(g.p({2, 3, 7}, d), {0, 2, 1}));
        },
        tol);
    both(
        "2-d batch",
        [](G& g, DType d) {
          return mm(g.p({3, 5, 6, 4}, d), g.p({5, 4, 2}, d));
        },
        tol);
    both(
        "v@w",
        [](G& g, DType d) {
          return mm(g.p({16}, d), g.p({16, 8}, d));
        },
        tol);
    // K=4096: a sum accumulated in the operand dtype would miss these bounds by far.
    both(
        "K=4096",
        [](G& g, DType d) {
          return mm(g.p({16, 4096}, d), g.p({4096, 24}, d));
        },
        4 * tol);
  }
}

TEST_F(CublasGemm, PrologueAndEpilogueKernelsAroundIt) {
  G g;
  NodePtr x = g.p({64, 32}), w = g.p({16, 32}), b = g.p({16});
  NodePtr y =
      make_node(Op::Relu, {make_node(Op::Add, {mm(make_node(Op::Exp, {x}), tr(w, {1, 0})), b})});
  same("relu(exp(x) @ w.T + b)", y, 1);
}

TEST_F(CublasGemm, Float32IsNotTf32ByDefault) {
  // A long K in float32: TF32 (10-bit mantissa) would miss 1e-4 relative by far.
  G g;
  same("K=4096", mm(g.p({32, 4096}), g.p({4096, 32})), 1, 2e-4, 2e-4);
}

}  // namespace
}  // namespace lt
