// The attention prims through lowering without a GPU: fusion groups them into one forward step
// (output + logsumexp) and one backward step (dq, dk, dv) over contiguous operand buffers (a
// transposed view is copied first), plans with attention steps round-trip through the cache
// format and corrupt ones are errors, a backend without an attention library gets them expanded
// into matmuls and softmax, and (with the CUDA toolkit) NVRTC compiles the flash kernels for sm_90
// and the module image that carries them round-trips. Their numbers:
// tests/python/test_attention_prims.py (reference interpreter) and
// tests/gpu/check_attention_cuda.py (the kernels on a GPU).
#include <gtest/gtest.h>

#include "graph_util.h"
#include "ir/attention.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "lowering/plan_serialize.h"

#ifdef LT_HAVE_CUDA
#include "backends/cuda/cuda_compile.h"
#include "backends/cuda/flash_attention.h"
#include "backends/cuda/nvrtc_compiler.h"
#endif

namespace lt {
namespace {

using testing::FakeData;
using testing::param;

LowerOptions flash_options() {
  LowerOptions o;
  o.attention_dtypes = {DType::Float32};
  o.attention_head_dim = 64;
  return o;
}

// A causal attention forward and backward over [2, 3, 100, 64] heads; the query arrives as a
// transposed view (as q.transpose(1, 2) of [B, T, H, D] in a transformer).
struct Graphs {
  NodePtr out, lse, dq, dk, dv, q_view;
};
Graphs attention_graph(bool causal = true) {
  Graphs g;
  Attrs perm;
  perm.ints = {0, 2, 1, 3};
  g.q_view = make_node(Op::Permute, {param({2, 100, 3, 64})}, perm);
  NodePtr k = param({2, 3, 100, 64}), v = param({2, 3, 100, 64});
  const Attrs a = AttentionParams{causal, 0.125}.attrs();
  g.out = make_node(Op::Attention, {g.q_view, k, v}, a);
  g.lse = make_node(Op::AttentionLse, {g.q_view, k, v}, a);
  NodePtr dout = param({2, 3, 100, 64}), dsum = param({2, 3, 100, 1});
  const NodeList bw = {g.q_view, k, v, dout, g.lse, dsum};
  g.dq = make_node(Op::AttentionGradQ, bw, a);
  g.dk = make_node(Op::AttentionGradK, bw, a);
  g.dv = make_node(Op::AttentionGradV, bw, a);
  return g;
}

Plan attention_plan() {
  Graphs g = attention_graph();
  return lower(collect_graph({g.out.get(), g.dq.get(), g.dk.get(), g.dv.get()}), flash_options());
}

TEST(AttentionPlan, ForwardAndBackwardAreOneStepEach) {
  const Plan p = attention_plan();
  ASSERT_EQ(p.attentions.size(), 2u);
  const AttentionStep &f = p.attentions[0], &b = p.attentions[1];
  EXPECT_EQ(f.kind, AttentionStep::Kind::Forward);
  EXPECT_EQ(b.kind, AttentionStep::Kind::Backward);
  for (const AttentionStep* a : {&f, &b}) {
    EXPECT_EQ(a->batch, 6);
    EXPECT_EQ(a->L, 100);
    EXPECT_EQ(a->S, 100);
    EXPECT_EQ(a->E, 64);
    EXPECT_EQ(a->Ev, 64);
    EXPECT_TRUE(a->causal);
    EXPECT_DOUBLE_EQ(a->scale, 0.125);
  }
  EXPECT_GE(f.out, 0);
  EXPECT_GE(f.lse, 0);
  EXPECT_EQ(b.lse, f.lse);  // the backward reads the forward's logsumexp buffer
  EXPECT_EQ(b.q, f.q);
  EXPECT_GE(b.dq, 0);
  EXPECT_GE(b.dk, 0);
  EXPECT_GE(b.dv, 0);
  // The transposed query is one copy kernel; nothing else is a kernel.
  ASSERT_EQ(p.kernels.size(), 1u);
  ASSERT_EQ(p.steps.size(), 3u);
  EXPECT_EQ(p.steps[0].kind, PlanStep::Kind::Kernel);
  EXPECT_EQ(p.steps[1].kind, PlanStep::Kind::Attention);
  EXPECT_EQ(p.steps[2].kind, PlanStep::Kind::Attention);
  EXPECT_NE(p.grouping.find("attention float32 forward batch 6 L 100 S 100 E 64 Ev 64 causal"),
            std::string::npos)
      << p.grouping;
}

TEST(AttentionPlan, OnlyTheGradientsAskedForAreWritten) {
  Graphs g = attention_graph();
  const Plan p = lower(collect_graph({g.dv.get()}), flash_options());
  ASSERT_EQ(p.attentions.size(), 2u);
  EXPECT_EQ(p.attentions[0].out, -1);  // only the logsumexp is needed
  EXPECT_GE(p.attentions[0].lse, 0);
  EXPECT_EQ(p.attentions[1].dq, -1);
  EXPECT_EQ(p.attentions[1].dk, -1);
  EXPECT_GE(p.attentions[1].dv, 0);
}

TEST(AttentionPlan, RoundTripsAndCorruptionIsAnError) {
  const Plan p = attention_plan();
  const std::string bytes = serialize_plan(p);
  const Plan back = deserialize_plan(bytes);
  EXPECT_EQ(serialize_plan(back), bytes);
  ASSERT_EQ(back.attentions.size(), 2u);
  EXPECT_EQ(back.attentions[1].dk, p.attentions[1].dk);
  for (size_t n = 0; n < bytes.size(); n += 7)
    EXPECT_THROW(deserialize_plan(std::string_view(bytes).substr(0, n)), Error) << n;
}

// Without an attention library (or with one for other head dims), decompose expands the prims
// into matmuls and softmax (lowering/expand_attention.h): no attention step, the causal mask from
// iota prims (no input of the graph), and the gradients recompute P instead of reading lse (so
// the attention_lse prim is dead code) and dsum (an input that no kernel reads).
TEST(AttentionPlan, WithoutTheLibraryThePrimsExpand) {
  LowerOptions other_dim = flash_options();
  other_dim.attention_head_dim = 128;
  for (bool causal : {false, true}) {
    for (const LowerOptions& opts : {LowerOptions{}, other_dim}) {
      Graphs g = attention_graph(causal);
      const Plan p = lower(collect_graph({g.out.get(), g.dq.get(), g.dk.get(), g.dv.get()}), opts);
      EXPECT_TRUE(p.attentions.empty());
      int iotas = 0;
      for (const PNode& n : p.prims.nodes) {
        EXPECT_NE(op_info(n.op).cls, OpClass::Attention) << op_name(n.op);
        iotas += n.op == Op::Iota;
      }
      EXPECT_EQ(iotas, causal ? 1 : 0);  // L == S: one iota serves both positions
      EXPECT_EQ(p.prims.num_inputs, 5);  // q, k, v, dout, dsum: no positions
      EXPECT_FALSE(p.kernels.empty());
      for (const loop::Kernel& k : p.kernels)
        for (const loop::Arg& arg : k.args)
          EXPECT_NE(p.buffers.at(static_cast<size_t>(arg.buffer)).input, 4) << "dsum was read";
    }
  }
}

TEST(AttentionPrims, ShapeRuleNamesTheOpAndShapes) {
  const Attrs a = AttentionParams{false, 1.0}.attrs();
  try {
    make_node(Op::Attention, {param({2, 5, 8}), param({2, 7, 8}), param({2, 6, 8})}, a);
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("attention: shapes do not match: query [2, 5, 8], key "
                                         "[2, 7, 8], value [2, 6, 8]"),
              std::string::npos)
        << e.what();
  }
  Attrs bad = a;
  bad.ints = {2};
  EXPECT_THROW(make_node(Op::Attention, {param({5, 8}), param({7, 8}), param({7, 8})}, bad), Error);
  // Batch dims must be equal, not broadcast.
  EXPECT_THROW(make_node(Op::Attention, {param({2, 5, 8}), param({1, 7, 8}), param({1, 7, 8})}, a),
               Error);
}

#ifdef LT_HAVE_CUDA
// NVRTC's path (GPUs without an embedded cubin): one program per kernel, compiled in parallel,
// each holding just its kernel.
TEST(FlashAttention, NvrtcCompilesOneProgramPerKernel) {
  const auto images = compile_flash_attention("sm_90", true);
  ASSERT_EQ(images.size(), static_cast<size_t>(kFlashKernelCount));
  for (size_t k = 0; k < images.size(); ++k) {
    EXPECT_GT(images[k].size(), 1024u);
    const std::string bytes(images[k].begin(), images[k].end());
    for (size_t j = 0; j < images.size(); ++j)
      EXPECT_EQ(bytes.find(std::string(kFlashKernels[j].name) + '\0') != std::string::npos, j == k)
          << k << " " << kFlashKernels[j].name;
  }
  // Each program is the shared helpers plus one kernel's section of flash_attention.cu.
  for (int k = 0; k < kFlashKernelCount; ++k) {
    const std::string src = flash_attention_program_source(k);
    EXPECT_NE(src.find("lt_fa_mm"), std::string::npos);
    EXPECT_NE(src.find("lt_fa16_mma"), std::string::npos);
    for (int j = 0; j < kFlashKernelCount; ++j)
      EXPECT_EQ(src.find(std::string(kFlashKernels[j].name) + "(") != std::string::npos, j == k)
          << k << " " << j;
  }
}

// A dtype's kernels: float32 forward, dK/dV/dQ, zero; 16-bit forward, dK/dV, dQ. Head dim 64
// only; integer dtypes have none.
TEST(FlashAttention, KernelTableCoversThreeFloatDtypes) {
  EXPECT_EQ(flash_kernel_base(DType::Float32), 0);
  EXPECT_EQ(flash_kernel_base(DType::BFloat16), 3);
  EXPECT_EQ(flash_kernel_base(DType::Float16), 6);
  EXPECT_EQ(flash_kernel_base(DType::Float64), -1);
  EXPECT_EQ(std::string(kFlashKernels[3 + 2].name), "lt_flash_attention_bwd_dq_bf16");
  EXPECT_EQ(std::string(kFlashKernels[6].name), "lt_flash_attention_fwd_f16");
  for (DType t : {DType::Float32, DType::BFloat16, DType::Float16}) {
    EXPECT_TRUE(flash_attention_supports(t, 64, 64)) << dtype_name(t);
    EXPECT_FALSE(flash_attention_supports(t, 128, 128)) << dtype_name(t);
    EXPECT_FALSE(flash_attention_supports(t, 64, 32)) << dtype_name(t);
  }
  EXPECT_FALSE(flash_attention_supports(DType::Float64, 64, 64));
  EXPECT_FALSE(flash_attention_supports(DType::Int32, 64, 64));
  // Shared memory within the 227 KB an sm_90 block may have (the 16-bit ones within 48 KB).
  for (const FlashKernel& k : kFlashKernels) {
    EXPECT_LE(k.smem, 227u * 1024) << k.name;
    EXPECT_TRUE(k.threads == 128 || k.threads == 256) << k.name;
  }
}

// The build embeds nvcc's cubins for sm_80 and sm_90 (this build has nvcc: CUDA toolkit in CI and
// on the GPU machine): one ELF image holding every kernel, used instead of NVRTC.
TEST(FlashAttention, BuildEmbedsCubinsForAmpereAndHopper) {
  for (const char* arch : {"sm_80", "sm_90"}) {
    const std::vector<char> cubin = embedded_flash_attention(arch);
    ASSERT_GT(cubin.size(), 1024u) << arch;
    EXPECT_EQ(std::string(cubin.data() + 1, 3), "ELF");
    const std::string bytes(cubin.begin(), cubin.end());
    for (const FlashKernel& k : kFlashKernels)
      EXPECT_NE(bytes.find(std::string(k.name) + '\0'), std::string::npos) << arch << " " << k.name;
  }
  EXPECT_TRUE(embedded_flash_attention("sm_75").empty());
  EXPECT_EQ(flash_attention_images("sm_90", true).size(), 1u);
}

TEST(FlashAttention, ModuleImageCarriesTheKernelsAfterThePlans) {
  const Plan p = attention_plan();
  const size_t n = kFlashKernelCount;
  ASSERT_EQ(flash_attention_launches(p), n);
  CudaModuleImage m = compile_cuda_module(p, "sm_90", true);
  const size_t programs = m.images.size();
  append_flash_attention(m, flash_attention_images("sm_90", true));  // the embedded cubin
  ASSERT_EQ(m.launches.size(), p.kernels.size() + n);
  ASSERT_EQ(m.images.size(), programs + 1);
  EXPECT_EQ(m.launches.back().name, kFlashKernels[n - 1].name);
  for (size_t k = 0; k < n; ++k) {
    EXPECT_EQ(m.program_of[p.kernels.size() + k], programs);
    EXPECT_EQ(m.launches[p.kernels.size() + k].threads, static_cast<int>(kFlashKernels[k].threads));
  }
  CudaModuleImage mn = compile_cuda_module(p, "sm_90", true);
  append_flash_attention(mn, compile_flash_attention("sm_90", true));  // NVRTC's, one per kernel
  ASSERT_EQ(mn.images.size(), programs + n);
  for (size_t k = 0; k < n; ++k) EXPECT_EQ(mn.program_of[p.kernels.size() + k], programs + k);
  const CudaModuleImage back =
      decode_cuda_module(encode_cuda_module(m), p.kernels.size() + n, "sm_90");
  EXPECT_EQ(back.images, m.images);
  EXPECT_EQ(back.program_of, m.program_of);
  EXPECT_THROW(decode_cuda_module(encode_cuda_module(m), p.kernels.size(), "sm_90"), Error);
}
#endif

}  // namespace
}  // namespace lt
