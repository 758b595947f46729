// CUDA backend without a GPU. Real graphs go through the real lowering pipeline (decompose, fuse,
// schedule), their loop IR through the CUDA code generator, and the resulting translation unit
// through NVRTC to a cubin for sm_90: every kernel shape the CPU backend runs must compile. Kernel
// counts are pinned where lowering pins them (tests/cpp/lowering_test.cc). The driver layer,
// settings, device registry and allocator: cuda_backend_test.cc. Numerical results on a GPU:
// tests/gpu/.
#include <gtest/gtest.h>

#ifdef LT_HAVE_CUDA

#include <functional>
#include <sstream>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "graph_util.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "runtime/indexing.h"
#include "test_util.h"

namespace lt {
namespace {

constexpr DType kAllDTypes[] = {DType::Bool,     DType::UInt8,   DType::Int8,
                                DType::Int32,    DType::Int64,   DType::Float16,
                                DType::BFloat16, DType::Float32, DType::Float64};
constexpr DType kFloatDTypes[] = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64};

using testing::FakeData;
using testing::param;
using testing::plan_of;
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
  a.ints = {1, w ? 1 : 0, b ? 1 : 0};
  a.value = 1e-5;
  NodeList in = {std::move(x)};
  if (w) in.push_back(std::move(w));
  if (b) in.push_back(std::move(b));
  return make_node(Op::LayerNorm, std::move(in), a);
}
NodePtr rand_node(Shape s, DType t, int64_t stream = 0) {
  Attrs a;
  a.ints = std::move(s);
  a.dtype = t;
  a.stream = stream;
  return make_node(Op::Rand,
                   {make_int_scalar(DType::Int64, 1234), make_int_scalar(DType::Int64, 8)}, a);
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Generates the plan's kernels as one translation unit (as the backend does), compiles it with
// NVRTC to an sm_90 cubin and checks the result is a non-empty ELF image. `kernels` >= 0 pins the
// plan's kernel count.
CudaModuleSource compile_ok(const Plan& p, int kernels = -1) {
  if (kernels >= 0) {
    EXPECT_EQ(static_cast<int>(p.kernels.size()), kernels) << p.grouping;
  }
  CudaModuleSource m = generate_cuda(p.kernels);
  EXPECT_EQ(m.kernels.size(), p.kernels.size());
  std::vector<char> cubin;
  try {
    cubin = nvrtc_compile_cubin(m.source, "sm_90");
  } catch (const Error& e) {
    ADD_FAILURE() << e.what() << "\n---- source ----\n" << m.source;
  }
  EXPECT_GT(cubin.size(), 64u);
  if (cubin.size() >= 4) {
    EXPECT_EQ(std::string(cubin.data() + 1, 3), "ELF");
  }
  for (const auto& k : m.kernels) EXPECT_NE(m.source.find(" " + k.name + "("), std::string::npos);
  return m;
}

bool row_mode(CudaKernelMode m) {
  return m == CudaKernelMode::Thread || m == CudaKernelMode::Warp || m == CudaKernelMode::Block ||
         m == CudaKernelMode::Tile;
}

// Number of cross-thread reductions a kernel's source performs.
size_t cross_thread_reductions(const std::string& src) {
  return count(src, "= lt_block_reduce(acc") + count(src, "= lt_warp_reduce(acc") +
         count(src, "= lt_tile_reduce<");
}

// ---- elementwise ----------------------------------------------------------------------------

TEST(CudaCodegen, ElementwiseChainIsOneVectorizedGridStrideKernel) {
  NodePtr x = param({1 << 20});
  for (int i = 0; i < 20; ++i) x = bin(Op::Add, x, op(Op::Mul, {x, op(Op::Neg, {x})}));
  auto m = compile_ok(plan_of({x}), 1);
  EXPECT_EQ(m.kernels[0].mode, CudaKernelMode::Elementwise);
  EXPECT_TRUE(m.kernels[0].vectorized);
  EXPECT_EQ(m.kernels[0].threads, 256);
  EXPECT_NE(m.source.find("float4"), std::string::npos);
  EXPECT_NE(m.source.find("flat += stride"), std::string::npos);  // grid-stride
}

// The 20-sin chain costs more per point than kVectorPointCostLimit: one scalar grid-stride loop,
// each sin emitted once (not once per vector lane plus the tail: 5x the text for NVRTC).
TEST(CudaCodegen, HeavyElementwiseBodyIsOneScalarLoop) {
  NodePtr x = param({1 << 20});
  for (int i = 0; i < 20; ++i) x = bin(Op::Add, x, op(Op::Sin, {x}));
  const Plan p = plan_of({x});
  ASSERT_EQ(p.kernels.size(), 1u);
  EXPECT_GT(cuda_point_cost(p.kernels[0]), kVectorPointCostLimit);
  auto m = compile_ok(p, 1);
  EXPECT_EQ(m.kernels[0].mode, CudaKernelMode::Elementwise);
  EXPECT_FALSE(m.kernels[0].vectorized);
  EXPECT_EQ(count(m.source, "float4*>(a"), 0u) << m.source;
  // Every sin is the inline one (kPreambleTrig, whose definition is the + 1); CUDA's sinf appears
  // once, out of line.
  EXPECT_EQ(count(m.source, "lt_sinf("), 20u + 1u) << "20 sins, each emitted once";
  EXPECT_EQ(count(m.source, " sinf("), 1u) << "only lt_sinf_wide calls CUDA's sinf";
  // Five sins are light enough for the vector path.
  NodePtr y = param({1 << 20});
  for (int i = 0; i < 5; ++i) y = bin(Op::Add, y, op(Op::Sin, {y}));
  auto light = compile_ok(plan_of({y}), 1);
  EXPECT_TRUE(light.kernels[0].vectorized);
  EXPECT_EQ(count(light.source, "lt_sinf("), 5u * 5u + 1u) << "once per vector lane + scalar tail";
}

TEST(CudaCodegen, BroadcastIsIndexArithmetic) {
  auto x = param({64, 256}), b = param({256}), c = param({64, 1});
  auto y = bin(Op::Mul, bin(Op::Add, x, b), c);
  auto m = compile_ok(plan_of({y}), 1);
  EXPECT_EQ(m.kernels[0].mode, CudaKernelMode::Elementwise);
  EXPECT_TRUE(m.kernels[0].vectorized);  // x and y are flat
}

TEST(CudaCodegen, PermuteReshapeUsesDivMod) {
  auto x = param({8, 4}), y = param({32});
  auto t = op(Op::Reshape, {op(Op::Permute, {x}, {1, 0})}, {32});
  auto m =
      compile_ok(plan_of({bin(Op::Add, bin(Op::Mul, t, make_scalar(DType::Float32, 2)), y)}), 1);
  // The transposed read needs floor-div/mod of the flat index (IExpr FloorDiv/Mod).
  EXPECT_TRUE(m.source.find(" / ") != std::string::npos &&
              m.source.find(" % ") != std::string::npos)
      << m.source;
  EXPECT_NE(m.source.find("double a"), std::string::npos) << "the scalar 2 is passed by value";
  // A 3-d permute of a reshape: general indices of several loop variables.
  auto z = op(Op::Permute, {op(Op::Reshape, {param({6, 20})}, {3, 4, 10})}, {2, 0, 1});
  compile_ok(plan_of({op(Op::Exp, {z})}), 1);
}

// Builds a node, or nothing when the IR rejects the dtypes at trace time (add of bools, ...).
void try_add(NodeList& roots, const std::function<NodePtr()>& make) {
  try {
    roots.push_back(make());
  } catch (const Error&) {
  }
}

TEST(CudaCodegen, EveryElementwisePrimitiveOfEveryDtype) {
  // Walks the op registry: every elementwise primitive, for every dtype the IR accepts for it.
  NodeList roots;
  size_t ops = 0;
  for (const OpInfo& info : all_ops()) {
    if (!info.primitive || info.cls == OpClass::Rand) continue;  // rand: its own test below
    const Op o = info.op;
    const size_t before = roots.size();
    for (DType t : kAllDTypes) {
      switch (info.cls) {
        case OpClass::Unary:
        case OpClass::Predicate1:
          try_add(roots, [&] { return make_node(o, {param({37, 5}, t)}); });
          break;
        case OpClass::Binary:
          try_add(roots, [&] { return bin(o, param({37, 5}, t), param({5}, t)); });
          break;
        case OpClass::Compare:
        case OpClass::Logical:
          try_add(roots, [&] { return bin(o, param({37, 5}, t), param({37, 1}, t)); });
          break;
        case OpClass::Where:
          try_add(roots, [&] {
            return make_node(o, {param({37, 5}, DType::Bool), param({37, 5}, t), param({5}, t)});
          });
          break;
        case OpClass::Cast:
          try_add(roots, [&] { return cast(param({37, 5}, t), DType::Float32); });
          break;
        default:
          break;
      }
    }
    if (is_elementwise(info.cls) || info.cls == OpClass::Where || info.cls == OpClass::Cast) {
      EXPECT_GT(roots.size(), before) << op_name(o) << ": no dtype accepted";
      ++ops;
    }
  }
  EXPECT_GE(ops, 26u);
  ASSERT_GT(roots.size(), 100u);
  // One graph with many outputs: many stores per kernel, all in one NVRTC program.
  auto m = compile_ok(plan_of(roots));
  for (const char* fn : {"expf(", "logf(", "sqrtf(", "sinf(", "cosf(", "tanhf(", "erff(", "fabsf(",
                         "floorf(", "powf(", "exp(", "erf(", "pow(", "lt_max(", "lt_min(",
                         "lt_add(", "lt_mul(", "lt_rh(", "lt_rbf("})
    EXPECT_NE(m.source.find(fn), std::string::npos) << fn;
}

TEST(CudaCodegen, EveryCastBetweenEveryDtypePair) {
  NodeList roots;
  for (DType from : kAllDTypes) {
    auto x = param({1000}, from);
    for (DType to : kAllDTypes)
      if (to != from) roots.push_back(cast(x, to));
  }
  auto m = compile_ok(plan_of(roots));
  EXPECT_NE(m.source.find("lt_f2i("), std::string::npos);  // float -> int truncates via int64
  EXPECT_NE(m.source.find("lt_f2h("), std::string::npos);
  EXPECT_NE(m.source.find("lt_f2bf("), std::string::npos);
  EXPECT_NE(m.source.find("lt_h2f("), std::string::npos);
  EXPECT_NE(m.source.find("lt_bf2f("), std::string::npos);
}

TEST(CudaCodegen, CastsInsideFusedChains) {
  // The runtime promotes with explicit casts before tracing; they fuse into one kernel.
  auto a = param({64}, DType::Int32), b = param({64}, DType::Float16),
       c = param({64}, DType::UInt8);
  auto y = bin(Op::Mul, bin(Op::Add, cast(a, DType::Float16), b), cast(c, DType::Float16));
  auto z =
      cast(bin(Op::Gt, cast(y, DType::Float32), make_scalar(DType::Float32, 0.5)), DType::Int64);
  compile_ok(plan_of({y, z}));
}

// ---- reductions ---------------------------------------------------------------------------

TEST(CudaCodegen, EveryReductionOfEveryDtypeAlongEveryAxis) {
  size_t dtypes = 0;
  for (DType t : kAllDTypes) {
    NodeList roots;
    auto x = param({48, 300}, t);
    for (Op r : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd}) {
      try_add(roots, [&] { return op(r, {x}, {1}); });
      try_add(roots, [&] { return op(r, {x}, {0}, true); });
      try_add(roots, [&] { return op(r, {x}, {0, 1}); });
    }
    if (roots.empty()) continue;  // the IR wants a cast first
    ++dtypes;
    SCOPED_TRACE(dtype_name(t));
    auto m = compile_ok(plan_of(roots));
    for (const auto& k : m.kernels) EXPECT_TRUE(row_mode(k.mode)) << cuda_kernel_mode_name(k.mode);
  }
  EXPECT_GE(dtypes, 8u);  // every dtype but possibly bool
}

TEST(CudaCodegen, ReductionWithPrologueAndEpilogueIsOneKernel) {
  auto x = param({32, 64}), w = param({64}), b = param({64});
  auto y =
      op(Op::ReduceSum, {op(Op::Relu, {op(Op::Sin, {bin(Op::Add, bin(Op::Mul, x, w), b)})})}, {1});
  auto m = compile_ok(plan_of({bin(Op::Mul, y, make_scalar(DType::Float32, 2))}), 1);
  EXPECT_EQ(cross_thread_reductions(m.source), 1u) << m.source;
}

TEST(CudaCodegen, RowMappingFollowsTheRowLength) {
  struct Case {
    Shape shape;
    CudaKernelMode mode;
  };
  const Case cases[] = {{{4096, 8}, CudaKernelMode::Thread},
                        {{4096, 100}, CudaKernelMode::Warp},
                        {{512, 2048}, CudaKernelMode::Block},
                        {{256, 4000}, CudaKernelMode::Block}};
  for (const auto& c : cases) {
    auto m = compile_ok(plan_of({op(Op::ReduceMax, {param(c.shape)}, {1})}), 1);
    EXPECT_EQ(m.kernels[0].mode, c.mode) << shape_str(c.shape);
    if (c.mode == CudaKernelMode::Warp) {
      EXPECT_NE(m.source.find("__shfl_xor_sync"), std::string::npos);
      EXPECT_EQ(count(m.source, "= lt_warp_reduce(acc"), 1u);
    }
    if (c.mode == CudaKernelMode::Block) {
      EXPECT_NE(m.source.find("__shfl_xor_sync"), std::string::npos);  // warp stage of the block
      EXPECT_EQ(count(m.source, "= lt_block_reduce(acc"), 1u);
    }
  }
  // Few long rows are reduced in two stages (lowering/split_reduce.cc): [4, 65536] becomes
  // [4 x 256] rows of 256 (warps), then the 256 partials of each row.
  auto wide = compile_ok(plan_of({op(Op::ReduceMax, {param({4, 1 << 16})}, {1})}), 2);
  EXPECT_EQ(wide.kernels[0].mode, CudaKernelMode::Warp);
  // Column sums read contiguously along the outer index: lanes take adjacent columns.
  auto cols = compile_ok(plan_of({op(Op::ReduceSum, {param({512, 4096})}, {0})}), 1);
  EXPECT_EQ(cols.kernels[0].mode, CudaKernelMode::Tile);
  EXPECT_EQ(count(cols.source, "= lt_tile_reduce<"), 1u);
  // Weighted by a per-row statistic (a layer norm's weight gradient: the statistic is contiguous
  // along the rows, the big operand down the columns): still Tile, the statistic a broadcast
  // load; long columns get more warps.
  auto weighted = compile_ok(
      plan_of({op(Op::ReduceSum, {bin(Op::Mul, param({1024, 4096}), param({1024, 1}))}, {0})}), 1);
  EXPECT_EQ(weighted.kernels[0].mode, CudaKernelMode::Tile);
  EXPECT_EQ(weighted.kernels[0].threads, 512);
  EXPECT_EQ(count(weighted.source, "= lt_tile_reduce<16u>"), 1u);
}

TEST(CudaCodegen, MeanVarAndLogSumExp) {
  auto x = param({10, 33});
  compile_ok(plan_of({op(Op::Mean, {x}, {0, 1})}), 1);
  compile_ok(plan_of({op(Op::Var, {x}, {1})}));
  compile_ok(plan_of({op(Op::LogSumExp, {x}, {1})}));
}

// ---- row kernels ----------------------------------------------------------------------------

TEST(CudaCodegen, SoftmaxAndLogSoftmaxAreOneKernelWithTwoCrossThreadReductions) {
  for (Shape s : {Shape{16, 48}, Shape{4096, 4096}, Shape{64, 20000}}) {
    for (Op o : {Op::Softmax, Op::LogSoftmax}) {
      auto m = compile_ok(plan_of({op(o, {param(s)}, {-1})}), 1);
      EXPECT_TRUE(row_mode(m.kernels[0].mode));
      if (m.kernels[0].mode != CudaKernelMode::Thread) {
        EXPECT_EQ(cross_thread_reductions(m.source), 2u) << m.source;
      }
      EXPECT_NE(m.source.find("expf("), std::string::npos);
    }
  }
  // The hand-written form fuses the same way.
  auto x = param({16, 32});
  auto mx = op(Op::ReduceMax, {x}, {1}, true);
  auto e = op(Op::Exp, {bin(Op::Sub, x, mx)});
  auto m = compile_ok(plan_of({bin(Op::Div, e, op(Op::ReduceSum, {e}, {1}, true))}), 1);
  EXPECT_EQ(cross_thread_reductions(m.source), 2u);
}

TEST(CudaCodegen, LayerNormIsOneKernel) {
  for (Shape s : {Shape{8, 64}, Shape{8192, 4096}}) {
    auto x = param(s), w = param({s[1]}), b = param({s[1]});
    compile_ok(plan_of({layer_norm(x, nullptr, nullptr)}), 1);
    auto m = compile_ok(plan_of({layer_norm(x, w, b)}), 1);
    EXPECT_GE(cross_thread_reductions(m.source), 2u) << m.source;
  }
}

TEST(CudaCodegen, GeluOfLayerNormPlusResidualIsOneKernel) {
  auto x = param({8192, 4096}), w = param({4096}), b = param({4096}), r = param({8192, 4096});
  auto y = bin(Op::Add, make_node(Op::Gelu, {layer_norm(x, w, b)}), r);
  auto m = compile_ok(plan_of({y}), 1);
  EXPECT_EQ(m.kernels[0].mode, CudaKernelMode::Block);
  EXPECT_NE(m.source.find("erff("), std::string::npos);
}

TEST(CudaCodegen, SixteenBitAndDoubleRowKernels) {
  for (DType t : kFloatDTypes) {
    SCOPED_TRACE(dtype_name(t));
    auto x = param({128, 1000}, t);
    compile_ok(plan_of({op(Op::Softmax, {x}, {-1})}), 1);
    compile_ok(plan_of({layer_norm(x, param({1000}, t), param({1000}, t))}), 1);
    compile_ok(plan_of({op(Op::Mean, {x}, {1})}), 1);
  }
}

TEST(CudaCodegen, SeveralOutputsFromRowKernels) {
  // softmax and the row max it used, plus an elementwise output: several stores and kernels.
  auto x = param({64, 512});
  auto mx = op(Op::ReduceMax, {x}, {1}, true);
  auto sm = op(Op::Softmax, {x}, {-1});
  compile_ok(plan_of({sm, mx, op(Op::Sin, {x})}));
  // A reduction read at another shape is materialized: two kernels through a temp buffer.
  auto s = op(Op::ReduceSum, {param({4, 8})}, {1});
  compile_ok(plan_of({bin(Op::Add, op(Op::Reshape, {s}, {4, 1}), param({4, 3}))}), 2);
}

TEST(CudaCodegen, RowKernelsUseVectorAccessesWhereTheRowIsContiguous) {
  // softmax over rows of 4096: x is read and y written 4 elements (16 bytes) at a time, and x's
  // 4 vectors per thread are loaded once and kept in registers for the three stages.
  auto m = compile_ok(plan_of({op(Op::Softmax, {param({4096, 4096})}, {-1})}), 1);
  EXPECT_EQ(m.kernels[0].mode, CudaKernelMode::Block);
  EXPECT_EQ(count(m.source, "lt_ld4<float4>(&a"), 1u) << m.source;
  EXPECT_NE(m.source.find("float4 c0[4]"), std::string::npos) << m.source;
  EXPECT_EQ(count(m.source, "lt_st4(&a"), 1u) << m.source;
  // Rows whose length is not a multiple of 4 stay per point.
  auto odd = compile_ok(plan_of({op(Op::Softmax, {param({64, 333})}, {-1})}), 1);
  EXPECT_EQ(count(odd.source, "lt_ld4<"), 0u);
  // A transposed operand is read per point next to the vector loads of the contiguous one.
  auto x = param({256, 2048}), t = param({2048, 256});
  auto mixed = compile_ok(
      plan_of({op(Op::Softmax, {bin(Op::Add, x, op(Op::Permute, {t}, {1, 0}))}, {-1})}), 1);
  EXPECT_GE(count(mixed.source, "lt_ld4<float4>(&a"), 1u);
  EXPECT_NE(mixed.source.find(" * 256u]"), std::string::npos) << mixed.source;  // t[i1 * 256 + i0]
  // 16-bit rows load 4 elements as 8 bytes.
  auto h = param({512, 2048}, DType::BFloat16);
  auto lnh = compile_ok(
      plan_of({layer_norm(h, param({2048}, DType::BFloat16), param({2048}, DType::BFloat16))}), 1);
  EXPECT_GE(count(lnh.source, "lt_ld4<ushort4>(&a"), 1u) << lnh.source;
  // The knobs: vectors off; no register cache (x is loaded by each of the 3 stages); a row longer
  // than the cache holds (512 threads, 10 chunks each) is not cached.
  const Plan p = plan_of({op(Op::Softmax, {param({4096, 4096})}, {-1})});
  CudaCodegenOptions off;
  off.row_vectors = false;
  EXPECT_EQ(count(generate_cuda(p.kernels, off).source, "lt_ld4<"), 0u);
  CudaCodegenOptions nocache;
  nocache.max_cached_per_thread = 0;
  const std::string src = generate_cuda(p.kernels, nocache).source;
  EXPECT_EQ(count(src, "lt_ld4<float4>(&a"), 3u) << src;
  EXPECT_EQ(src.find(" c0["), std::string::npos) << src;
  EXPECT_GT(nvrtc_compile_cubin(src, "sm_90").size(), 64u);
  auto wide = compile_ok(plan_of({op(Op::Softmax, {param({512, 20000})}, {-1})}), 1);
  EXPECT_EQ(wide.source.find(" c0["), std::string::npos) << wide.source;
}

// ---- random numbers, matmul, edges -----------------------------------------------------------

TEST(CudaCodegen, RandUniformIsTheSharedCounterGenerator) {
  NodeList roots;
  for (DType t : kFloatDTypes) roots.push_back(rand_node({33, 7}, t, 1));
  roots.push_back(op(Op::ReduceSum, {rand_node({16, 300}, DType::Float32)}, {1}));
  auto m = compile_ok(plan_of(roots));
  EXPECT_NE(m.source.find("lt_rand_f32("), std::string::npos);
  EXPECT_NE(m.source.find("lt_rand_f64("), std::string::npos);
  // loop::splitmix64 and the seed multiplier, bit for bit.
  for (const char* c : {"0xd1342543de82ef95ull", "0x9e3779b97f4a7c15ull", "0xbf58476d1ce4e5b9ull",
                        "0x94d049bb133111ebull", ">> 40", ">> 11"})
    EXPECT_NE(m.source.find(c), std::string::npos) << c;
}

// A concat's copy kernels (lowering/concat_match.cc: a graph input, an unaligned piece; bf16 and
// float32) store at an offset into the result: they compile as any elementwise kernel.
TEST(CudaCodegen, ConcatCopiesCompile) {
  for (DType t : {DType::Float32, DType::BFloat16}) {
    auto a = param({64}, t), b = param({3}, t), c = param({8, 8}, t);
    Attrs flat;
    flat.ints = {64};
    auto cat = make_node(Op::Concat,
                         {a, op(Op::Exp, {b}), make_node(Op::Reshape, {op(Op::Exp, {c})}, flat)});
    const Plan p = plan_of({bin(Op::Add, cat, cat)});
    int copies = 0;
    for (const auto& k : p.kernels) copies += k.name.find("_concat_") != std::string::npos;
    // a (an input) and exp(c) at 67 (unaligned); exp(b) at 64 is in place in float32 (256 bytes
    // in), not in bfloat16 (128).
    EXPECT_EQ(copies, t == DType::Float32 ? 2 : 3) << p.grouping;
    compile_ok(p);
  }
}

TEST(CudaCodegen, MatmulAsLoweredToday) {
  auto a = param({8, 16}), b = param({16, 4}), bias = param({4});
  auto p = plan_of({op(Op::Relu, {bin(Op::Add, make_node(Op::Matmul, {a, b}), bias)})});
  EXPECT_LE(p.kernels.size(), 2u) << p.grouping;
  compile_ok(p);
  compile_ok(plan_of({make_node(Op::Matmul, {param({256, 512}), param({512, 128})})}));
  compile_ok(plan_of({make_node(Op::Matmul, {param({4, 32, 64}), param({4, 64, 48})})}));
  compile_ok(plan_of(
      {make_node(Op::Matmul, {param({64}, DType::Float64), param({64, 3}, DType::Float64)})}));
}

TEST(CudaCodegen, IndexWidthFollowsTheSizes) {
  auto small = generate_cuda(plan_of({op(Op::Sin, {param({64, 256})})}).kernels);
  EXPECT_NE(small.source.find("unsigned flat"), std::string::npos) << small.source;
  // 2^32 elements: 64-bit index arithmetic (codegen only; nothing is allocated).
  auto big = compile_ok(plan_of({op(Op::Sin, {param({65536, 65536})})}), 1);
  EXPECT_NE(big.source.find("long long flat"), std::string::npos);
  EXPECT_EQ(big.source.find("unsigned flat"), std::string::npos);
  auto big_rows = compile_ok(plan_of({op(Op::Softmax, {param({1 << 17, 1 << 15})}, {-1})}), 1);
  EXPECT_NE(big_rows.source.find("long long row"), std::string::npos);
}

TEST(CudaCodegen, DegenerateShapes) {
  compile_ok(plan_of({op(Op::Sin, {param({})})}), 1);                            // 0-d
  auto empty = compile_ok(plan_of({op(Op::ReduceSum, {param({16, 0})}, {1})}));  // empty rows
  auto none = compile_ok(plan_of({op(Op::ReduceSum, {param({0, 16})}, {1})}));   // no rows
  for (const auto& k : none.kernels) EXPECT_EQ(k.max_blocks, 0) << "nothing to launch";
  compile_ok(plan_of({op(Op::ReduceMax, {param({0, 16})}, {1})}));  // no rows: nothing to reduce
  EXPECT_THROW(plan_of({op(Op::ReduceMax, {param({0, 16})}, {0})}), Error);  // empty: no identity
}

TEST(CudaCodegen, HelpersAreIncludedOnlyWhenUsed) {
  auto m = generate_cuda(plan_of({bin(Op::Add, param({4, 4}), param({4}))}).kernels);
  EXPECT_EQ(m.source.find("lt_rand_f32"), std::string::npos);
  EXPECT_EQ(m.source.find("__shfl_xor_sync"), std::string::npos);
  EXPECT_EQ(m.source.find("lt_h2f"), std::string::npos);
}

TEST(CudaCodegen, InPlaceBufferPassedTwiceIsNotRestrict) {
  Plan p = plan_of({op(Op::Sin, {param({64})})});
  ASSERT_EQ(p.kernels.size(), 1u);
  ASSERT_EQ(p.kernels[0].args.size(), 2u);
  p.kernels[0].args[1].buffer = p.kernels[0].args[0].buffer;  // as an in-place update would
  auto m = generate_cuda(p.kernels);
  EXPECT_EQ(m.source.find("* __restrict__ a"), std::string::npos) << m.source;
  EXPECT_FALSE(nvrtc_compile_cubin(m.source).empty());
}

TEST(CudaCodegen, UnsupportedIsNotImplementedOnCuda) {
  Plan p = plan_of({op(Op::Sin, {param({16})})});
  ASSERT_EQ(p.kernels.size(), 1u);
  bool changed = false;
  for (auto& in : p.kernels[0].stages[0].body)
    if (in.kind == loop::IKind::Op && in.op == Op::Sin) in.op = Op::Matmul, changed = true;
  ASSERT_TRUE(changed);
  try {
    generate_cuda(p.kernels);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotImplemented);
    std::string msg = e.what();
    EXPECT_NE(msg.find("not implemented: matmul"), std::string::npos) << msg;
    EXPECT_NE(msg.find("on cuda"), std::string::npos) << msg;
  }
  // An integer exp is what the CPU rejects too.
  Plan q = plan_of({op(Op::Sin, {param({16})})});
  for (auto& in : q.kernels[0].stages[0].body)
    if (in.kind == loop::IKind::Op) in.dtype = DType::Int32;
  EXPECT_THROW(generate_cuda(q.kernels), Error);
}

TEST(CudaCodegen, KernelNamesAreUniqueInOneProgram) {
  Plan a = plan_of({op(Op::Sin, {param({8})})});
  std::vector<loop::Kernel> ks = {a.kernels[0], a.kernels[0], a.kernels[0]};
  ks[1].name = "9 odd-name";
  auto m = generate_cuda(ks);
  EXPECT_NE(m.kernels[0].name, m.kernels[2].name);
  EXPECT_EQ(m.kernels[1].name, "k_9_odd_name");
  EXPECT_FALSE(nvrtc_compile_cubin(m.source).empty());
}

// ---- NVRTC, driver, registry -----------------------------------------------------------------

// cat is a chain of selects over its pieces, each a load at a wrapped index (runtime/indexing.cc):
// each side of a select computes its own load inside a branch, so an element loads the one piece
// it takes instead of all six (lowering/branch_regions.h). A select between plain values stays a
// conditional move.
TEST(CudaCodegen, CatLoadsOnlyThePieceEachElementTakes) {
  std::vector<Tensor> pieces;
  for (int i = 0; i < 6; ++i)
    pieces.push_back(
        testing::random_tensor({1000 + 37 * i}, static_cast<uint32_t>(i + 1), testing::kLazyCpu));
  Tensor c = cat(pieces, 0);
  auto m = compile_ok(lower(collect_graph({c.node().get()})), 1);
  // Five branches per point (each of the four vector lanes and the scalar tail).
  EXPECT_EQ(count(m.source, "} else {"), 25u) << m.source;
  // Every piece's load (a wrapped index: "% <piece length>") sits alone in a branch side, whose
  // next line hands it to the select's result.
  std::istringstream lines(m.source);
  std::vector<std::string> ls;
  for (std::string l; std::getline(lines, l);) ls.push_back(l);
  int loads = 0;
  for (size_t i = 0; i + 1 < ls.size(); ++i) {
    if (ls[i].find("u))]") == std::string::npos) continue;
    ++loads;
    EXPECT_NE(ls[i + 1].find(" = v"), std::string::npos) << ls[i] << "\n" << ls[i + 1];
  }
  EXPECT_EQ(loads, 30) << m.source;

  NodePtr x = param({4096}), y = param({4096});
  NodePtr relu = make_node(Op::Where, {bin(Op::Gt, x, y), bin(Op::Mul, x, y), bin(Op::Sub, x, y)});
  auto plain = compile_ok(plan_of({relu}), 1);
  EXPECT_EQ(count(plain.source, "} else {"), 0u) << plain.source;
}

TEST(Nvrtc, CompileErrorCarriesTheLog) {
  try {
    nvrtc_compile_cubin("extern \"C\" __global__ void k() { this is not cuda; }\n");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("NVRTC failed"), std::string::npos) << msg;
    EXPECT_NE(msg.find("line 1:"), std::string::npos) << msg;
  }
}

// ---- gather / scatter_add --------------------------------------------------------------------

NodePtr indexed(Op o, NodeList in, int64_t axis) {
  Attrs a;
  a.ints = {axis};
  return make_node(o, std::move(in), a);
}

TEST(CudaCodegen, GatherOfEveryDtypeIsAnIndexedLoadInOneKernel) {
  for (DType t : kAllDTypes) {
    // embedding(w, idx) * 2 + pos: the index is loaded, clamped and used in the address of w.
    NodePtr w = param({50000, 64}, t), idx = param({512, 1}, DType::Int64);
    NodePtr rows = indexed(Op::Gather, {w, op(Op::Expand, {idx}, {512, 64})}, 0);
    NodePtr y = t == DType::Bool
                    ? bin(Op::Or, rows, param({512, 64}, t))
                    : bin(Op::Add, bin(Op::Mul, rows, cast(make_scalar(DType::Float64, 2), t)),
                          param({512, 64}, t));
    SCOPED_TRACE(dtype_name(t));
    auto m = compile_ok(plan_of({y}), 1);
    EXPECT_NE(m.source.find("(unsigned)v"), std::string::npos)
        << m.source;  // 32-bit indexed address
  }
}

TEST(CudaCodegen, GatherInsideRowReductionsAndAlongInnerAxes) {
  // A target pick inside a loss reduction, and a gather along the last axis of a permuted source.
  NodePtr x = param({256, 1000}), t = param({256, 1}, DType::Int64);
  NodePtr picked = indexed(Op::Gather, {op(Op::LogSoftmax, {x}, {1}), t}, 1);
  compile_ok(plan_of({op(Op::ReduceSum, {picked}, {0, 1})}));
  NodePtr xt = op(Op::Permute, {param({40, 30})}, {1, 0});
  compile_ok(plan_of({op(Op::ReduceMax,
                         {indexed(Op::Gather, {xt, param({30, 70}, DType::Int64)}, 1)}, {1})}),
             1);
}

TEST(CudaCodegen, ScatterAddOfEveryDtypeUsesAtomics) {
  for (DType t : kAllDTypes) {
    if (t == DType::Bool) continue;  // the runtime sums bool as int64
    NodePtr base = param({1000, 48}, t), idx = param({4096, 48}, DType::Int64),
            src = param({4096, 48}, t);
    SCOPED_TRACE(dtype_name(t));
    auto m = compile_ok(plan_of({indexed(Op::ScatterAdd, {base, idx, src}, 0)}), 2);
    const char* fn = t == DType::Float16    ? "lt_atomic_add_f16(&a"
                     : t == DType::BFloat16 ? "lt_atomic_add_bf16(&a"
                                            : "lt_atomic_add(&a";
    EXPECT_NE(m.source.find(fn), std::string::npos) << m.source;
  }
  // Scatter along an inner axis with src larger than the index, and 64-bit indexing of a big
  // output.
  compile_ok(plan_of({indexed(Op::ScatterAdd,
                              {param({8, 100}), param({8, 30}, DType::Int64), param({9, 40})}, 1)}),
             2);
  NodePtr big = indexed(
      Op::ScatterAdd,
      {param({1 << 16, 1 << 15}), param({64, 1 << 15}, DType::Int64), param({64, 1 << 15})}, 0);
  auto m = compile_ok(plan_of({big}), 2);
  EXPECT_NE(m.source.find("long long i0"), std::string::npos);
}

TEST(Nvrtc, ArchIsAnOptionAndTargetSelectionFollowsTheDevice) {
  const std::string src =
      generate_cuda(plan_of({op(Op::Softmax, {param({8, 300})}, {-1})}).kernels).source;
  auto sm80 = nvrtc_compile_cubin(src, "sm_80");
  auto sm90 = nvrtc_compile_cubin(src, "sm_90");
  EXPECT_FALSE(sm80.empty());
  EXPECT_NE(sm80, sm90);
  bool cubin = false;
  EXPECT_EQ(nvrtc_target_for(9, 0, &cubin), "sm_90");
  EXPECT_TRUE(cubin);
  std::string future = nvrtc_target_for(99, 0, &cubin);
  EXPECT_FALSE(cubin);
  EXPECT_EQ(future.rfind("compute_", 0), 0u) << future;
  EXPECT_THROW(nvrtc_target_for(3, 0, &cubin), Error);
}

}  // namespace
}  // namespace lt

#endif  // LT_HAVE_CUDA
