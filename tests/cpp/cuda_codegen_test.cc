// CUDA backend without a GPU: loop IR -> CUDA C must compile with NVRTC to a cubin for sm_90, pick
// the intended grid mapping, and the driver layer must fail cleanly where there is no GPU. Results
// on a GPU are checked by tests/gpu/cuda_backend_gpu_test.cc.
#include <gtest/gtest.h>

#ifdef LT_HAVE_CUDA

#include <regex>

#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/driver_api.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "lowering/lower.h"
#include "tests/gpu/cuda_test_kernels.h"

namespace lt {
namespace {

using namespace cudatest;

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t p = s.find(what); p != std::string::npos; p = s.find(what, p + 1)) ++n;
  return n;
}

// Generates and compiles the kernels of `plans` as one translation unit; returns the module.
CudaModuleSource compile_ok(const std::vector<Plan>& plans) {
  std::vector<loop::Kernel> ks;
  for (const auto& p : plans) ks.insert(ks.end(), p.kernels.begin(), p.kernels.end());
  CudaModuleSource m = generate_cuda(ks);
  EXPECT_EQ(m.kernels.size(), ks.size());
  std::vector<char> cubin;
  try {
    cubin = nvrtc_compile_cubin(m.source, "sm_90");
  } catch (const Error& e) {
    ADD_FAILURE() << e.what() << "\n---- source ----\n" << m.source;
  }
  EXPECT_FALSE(cubin.empty());
  // An ELF image.
  if (cubin.size() >= 4) {
    EXPECT_EQ(std::string(cubin.data() + 1, 3), "ELF");
  }
  return m;
}

TEST(CudaCodegen, ElementwiseBroadcastUsesFloat4) {
  auto m = compile_ok({bias_add(64, 256)});
  EXPECT_EQ(m.kernels[0].mode, CudaKernelMode::Elementwise);
  EXPECT_TRUE(m.kernels[0].vectorized);
  EXPECT_NE(m.source.find("float4"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("extern \"C\" __global__"), std::string::npos);
  // The bias is a broadcast (stride 0 on the row): read per point, not as a vector.
  EXPECT_NE(m.source.find("a1[i1]"), std::string::npos) << m.source;
  EXPECT_EQ(m.kernels[0].threads, 256);
  EXPECT_EQ(m.kernels[0].max_blocks, (64 * 256 / 4 + 255) / 256);
}

TEST(CudaCodegen, VectorWidthFollowsTheDtype) {
  auto f64 = compile_ok({scale_1d(1000, DType::Float64)});
  EXPECT_FALSE(f64.kernels[0].vectorized);
  EXPECT_EQ(f64.source.find("float4"), std::string::npos);
  EXPECT_NE(f64.source.find("sin("), std::string::npos);
  auto f16 = compile_ok({scale_1d(1000, DType::Float16)});
  EXPECT_TRUE(f16.kernels[0].vectorized);
  EXPECT_NE(f16.source.find("ushort4"), std::string::npos);
  EXPECT_NE(f16.source.find("lt_rh("), std::string::npos);  // rounded to half after every op
  auto f32 = compile_ok({scale_1d(3, DType::Float32)});       // too short for a vector
  EXPECT_FALSE(f32.kernels[0].vectorized);
}

TEST(CudaCodegen, GeneralIndexUsesDivMod) {
  auto m = compile_ok({transpose_general(5, 7)});
  EXPECT_NE(m.source.find("% 5u"), std::string::npos) << m.source;
  EXPECT_NE(m.source.find("/ 5u"), std::string::npos) << m.source;
  // The gathered load stays scalar per point; the contiguous store is a vector store.
  EXPECT_TRUE(m.kernels[0].vectorized);
  EXPECT_NE(m.source.find("float4 y1;"), std::string::npos) << m.source;
}

TEST(CudaCodegen, RowReductionsPickTheirMapping) {
  struct Case {
    int64_t n, m;
    CudaKernelMode mode;
    int threads;
  };
  const Case cases[] = {{4096, 8, CudaKernelMode::Thread, 256},
                        {4096, 100, CudaKernelMode::Warp, 256},
                        {64, 4096, CudaKernelMode::Block, 256},
                        {64, 10000, CudaKernelMode::Block, 512},
                        {4, 1 << 16, CudaKernelMode::Block, 1024}};
  for (const auto& c : cases) {
    std::vector<Plan> plans;
    for (Op rop : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd}) plans.push_back(row_reduce(c.n, c.m, rop));
    auto m = compile_ok(plans);
    for (const auto& k : m.kernels) {
      EXPECT_EQ(k.mode, c.mode) << c.n << "x" << c.m << " " << cuda_kernel_mode_name(k.mode);
      EXPECT_EQ(k.threads, c.threads) << c.n << "x" << c.m;
    }
    if (c.mode != CudaKernelMode::Thread) {
      EXPECT_NE(m.source.find("__shfl_xor_sync"), std::string::npos) << m.source;
    }
    if (c.mode == CudaKernelMode::Block) {
      EXPECT_EQ(count(m.source, "= lt_block_reduce(acc"), 4u) << m.source;
    }
    if (c.mode == CudaKernelMode::Warp) {
      EXPECT_EQ(count(m.source, "= lt_warp_reduce(acc"), 4u) << m.source;
    }
    // The epilogue adds the scalar, passed by value.
    EXPECT_NE(m.source.find("double a1"), std::string::npos);
  }
}

TEST(CudaCodegen, ColumnSumsUseTiles) {
  auto m = compile_ok({column_sum(512, 4096)});
  EXPECT_EQ(m.kernels[0].mode, CudaKernelMode::Tile);
  EXPECT_EQ(m.kernels[0].max_blocks, 4096 / 32);
  EXPECT_NE(m.source.find("= lt_tile_reduce(acc0, LtSum())"), std::string::npos) << m.source;
  auto odd = compile_ok({column_sum(100, 1024 + 7)});  // a partial last tile
  EXPECT_EQ(odd.kernels[0].mode, CudaKernelMode::Tile);
  auto few = compile_ok({column_sum(4096, 8)});  // too few columns for tiles
  EXPECT_EQ(few.kernels[0].mode, CudaKernelMode::Block);
}

TEST(CudaCodegen, SoftmaxIsOneRowKernelWithTwoBlockReductions) {
  auto m = compile_ok({softmax_rows(128, 4096)});
  ASSERT_EQ(m.kernels.size(), 1u);
  EXPECT_EQ(m.kernels[0].mode, CudaKernelMode::Block);
  EXPECT_EQ(count(m.source, "= lt_block_reduce(acc"), 2u) << m.source;
  EXPECT_NE(m.source.find("__shfl_xor_sync"), std::string::npos);
  EXPECT_NE(m.source.find("expf("), std::string::npos);
  EXPECT_EQ(count(m.source, "= a0["), 3u) << m.source;  // each stage re-reads the row (L1/L2)
  compile_ok({softmax_rows(1000, 96, DType::Float16), softmax_rows(7, 3000, DType::BFloat16),
              softmax_rows(3, 5, DType::Float64)});
  auto ln = compile_ok({layer_norm_two_kernels(64, 1024)});
  EXPECT_EQ(ln.kernels.size(), 2u);
}

TEST(CudaCodegen, RowCachingInRegistersIsAnOption) {
  CudaCodegenOptions opt;
  opt.max_cached_per_thread = 16;
  for (const Plan& p : {softmax_rows(128, 4096), softmax_rows(1000, 96, DType::Float16)}) {
    auto m = generate_cuda(p.kernels, opt);
    // x is read from memory once and kept in registers for all 3 stages.
    EXPECT_EQ(count(m.source, "c0[k] = "), 1u) << m.source;
    EXPECT_EQ(count(m.source, "= c0[k];"), 3u) << m.source;
    EXPECT_FALSE(nvrtc_compile_cubin(m.source).empty());
  }
  auto big = generate_cuda(softmax_rows(4, 20000).kernels, opt);  // 20 points per thread: no cache
  EXPECT_EQ(big.source.find("c0[k]"), std::string::npos);
}

TEST(CudaCodegen, EveryCastCompiles) {
  std::vector<Plan> plans;
  for (DType t : all_dtypes()) plans.push_back(cast_all(t, 1000));
  auto m = compile_ok(plans);
  EXPECT_NE(m.source.find("lt_f2i("), std::string::npos);  // float -> int truncates via int64
  EXPECT_NE(m.source.find("lt_f2h("), std::string::npos);
  EXPECT_NE(m.source.find("lt_f2bf("), std::string::npos);
  EXPECT_NE(m.source.find("!= 0)"), std::string::npos);  // -> bool
}

TEST(CudaCodegen, RandUniformAndScalarArgumentsByValue) {
  auto m = compile_ok({rand_all(1000)});
  EXPECT_NE(m.source.find("lt_rand_f32("), std::string::npos);
  EXPECT_NE(m.source.find("lt_rand_f64("), std::string::npos);
  EXPECT_NE(m.source.find("0xd1342543de82ef95ull"), std::string::npos);
  EXPECT_NE(m.source.find("(long long a0, long long a1,"), std::string::npos) << m.source;
  auto s = compile_ok({scalar_args(1000)});
  EXPECT_NE(s.source.find("double a1, long long a2, long long a3"), std::string::npos) << s.source;
  EXPECT_EQ(s.source.find("* __restrict__ a1"), std::string::npos);
}

TEST(CudaCodegen, HelpersAreIncludedOnlyWhenUsed) {
  auto m = generate_cuda(bias_add(4, 4).kernels);
  EXPECT_EQ(m.source.find("lt_rand_f32"), std::string::npos);
  EXPECT_EQ(m.source.find("__shfl_xor_sync"), std::string::npos);
  EXPECT_EQ(m.source.find("lt_h2f"), std::string::npos);
}

TEST(CudaCodegen, EveryElementwiseOpOfEveryDtypeCompiles) {
  std::vector<Plan> plans;
  for (DType t : {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64}) plans.push_back(unary_ops(1000, t));
  for (DType t : all_dtypes()) plans.push_back(binary_ops(1000, t));
  auto m = compile_ok(plans);
  for (const char* fn : {"expf(", "logf(", "sqrtf(", "sinf(", "cosf(", "tanhf(", "erff(", "fabsf(", "floorf(", "powf(",
                         "exp(", "erf(", "pow(", "lt_max(", "lt_min(", "lt_add(", "lt_mul("})
    EXPECT_NE(m.source.find(fn), std::string::npos) << fn;
}

TEST(CudaCodegen, ReductionsOfEveryDtypeCompile) {
  std::vector<Plan> plans;
  for (DType t : all_dtypes())
    for (Op rop : {Op::ReduceSum, Op::ReduceMax, Op::ReduceMin, Op::ReduceProd}) {
      if (t == DType::Bool && rop == Op::ReduceSum) continue;
      plans.push_back(plain_reduce(64, 300, rop, t));
      plans.push_back(plain_reduce(64, 5000, rop, t));
    }
  auto m = compile_ok(plans);
  EXPECT_NE(m.source.find("(-LT_INF_F)"), std::string::npos);  // max identity
  EXPECT_NE(m.source.find("(-9223372036854775807LL - 1)"), std::string::npos);  // int64 max identity
}

TEST(CudaCodegen, IndexWidthFollowsTheSizes) {
  auto small = generate_cuda(bias_add(64, 256).kernels);
  EXPECT_NE(small.source.find("unsigned flat"), std::string::npos);
  // 2^31 + 4 elements: 64-bit index arithmetic (codegen only; nothing is allocated).
  auto big = compile_ok({scale_1d((int64_t(1) << 31) + 4, DType::Float32)});
  EXPECT_NE(big.source.find("long long flat"), std::string::npos);
  EXPECT_EQ(big.source.find("unsigned flat"), std::string::npos);
}

TEST(CudaCodegen, DegenerateShapes) {
  Plan zero_d = scale_1d(1, DType::Float32);
  zero_d.kernels[0].outer = {};
  zero_d.kernels[0].stages[0].body[0].index.strides = {};
  zero_d.kernels[0].stages[0].stores[0].index.strides = {};
  Plan empty_rows = plain_reduce(16, 0, Op::ReduceSum, DType::Float32);
  Plan no_rows = plain_reduce(0, 16, Op::ReduceMax, DType::Float32);
  auto m = compile_ok({zero_d, empty_rows, no_rows});
  EXPECT_EQ(m.kernels[0].max_blocks, 1);
  EXPECT_GE(m.kernels[1].max_blocks, 1);
  EXPECT_EQ(m.kernels[2].max_blocks, 0);  // nothing to launch
}

TEST(CudaCodegen, DuplicateAndOddKernelNamesAreMadeUnique) {
  Plan a = bias_add(4, 4), b = bias_add(4, 4);
  std::vector<loop::Kernel> ks = {a.kernels[0], b.kernels[0]};
  ks[1].name = "9 odd-name";
  ks.push_back(a.kernels[0]);
  auto m = generate_cuda(ks);
  EXPECT_EQ(m.kernels[0].name, "bias_add");
  EXPECT_EQ(m.kernels[1].name, "k_9_odd_name");
  EXPECT_EQ(m.kernels[2].name, "bias_add_2");
  EXPECT_NO_THROW(nvrtc_compile_cubin(m.source));
}

TEST(CudaCodegen, UnsupportedOpIsAClearError) {
  Plan p = scale_1d(16, DType::Float32);
  p.kernels[0].stages[0].body[1].op = Op::Matmul;
  try {
    generate_cuda(p.kernels);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::NotImplemented);
    EXPECT_NE(std::string(e.what()).find("matmul"), std::string::npos) << e.what();
  }
}

// Real graphs through decomposition and fusion, then NVRTC.
struct FakeData : LeafData {};
NodePtr param(Shape s, DType t = DType::Float32) { return make_param(t, std::move(s), std::make_shared<FakeData>()); }
NodePtr node(Op o, std::vector<NodePtr> in, std::vector<int64_t> ints = {}, bool keepdim = false) {
  Attrs a;
  a.ints = std::move(ints);
  a.keepdim = keepdim;
  return make_node(o, std::move(in), a);
}
Plan lower_roots(const std::vector<NodePtr>& roots) {
  std::vector<const Node*> r;
  for (auto& n : roots) r.push_back(n.get());
  return lower(collect_graph(r));
}

TEST(CudaCodegen, LoweredGraphsCompile) {
  std::vector<Plan> plans;
  auto x = param({64, 256});
  plans.push_back(lower_roots({node(Op::Softmax, {x}, {-1})}));
  plans.push_back(lower_roots({node(Op::LogSoftmax, {x}, {1})}));
  Attrs ln;
  ln.ints = {1, 1, 1};
  ln.value = 1e-5;
  auto w = param({256}), b = param({256}), r = param({64, 256});
  plans.push_back(lower_roots({make_node(Op::Add, {make_node(Op::Gelu, {make_node(Op::LayerNorm, {x, w, b}, ln)}), r})}));
  plans.push_back(lower_roots({make_node(Op::Matmul, {param({32, 64}), param({64, 48})})}));
  plans.push_back(lower_roots({node(Op::ReduceSum, {x}, {0})}));
  plans.push_back(lower_roots({node(Op::Mean, {x}, {0, 1})}));
  auto t = node(Op::Reshape, {node(Op::Permute, {param({8, 4})}, {1, 0})}, {32});
  plans.push_back(lower_roots({make_node(Op::Add, {make_node(Op::Mul, {t, make_scalar(DType::Float32, 2)}), param({32})})}));
  auto h = param({16, 32}, DType::Float16);
  plans.push_back(lower_roots({node(Op::Softmax, {h}, {-1})}));
  plans.push_back(lower_roots({node(Op::Var, {param({10, 33})}, {1})}));
  // Kernel names are only unique within one plan: compile each plan on its own.
  for (const auto& p : plans) compile_ok({p});
}

TEST(Nvrtc, CompileErrorCarriesTheLog) {
  try {
    nvrtc_compile_cubin("extern \"C\" __global__ void k() { this is not cuda; }\n");
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("NVRTC failed"), std::string::npos) << msg;
    EXPECT_NE(msg.find("error"), std::string::npos) << msg;
    EXPECT_NE(msg.find("line 1:"), std::string::npos) << msg;
  }
}

TEST(Nvrtc, TargetSelection) {
  bool cubin = false;
  EXPECT_EQ(nvrtc_target_for(9, 0, &cubin), "sm_90");
  EXPECT_TRUE(cubin);
  std::string future = nvrtc_target_for(99, 0, &cubin);
  EXPECT_FALSE(cubin);
  EXPECT_EQ(future.rfind("compute_", 0), 0u) << future;
  EXPECT_THROW(nvrtc_target_for(3, 0, &cubin), Error);
  EXPECT_FALSE(nvrtc_compile_ptx("extern \"C\" __global__ void k() {}\n", future).empty());
}

TEST(CudaDriver, MissingLibraryIsReportedNotFatal) {
  CudaDriver d = load_cuda_driver("liblazytensor-no-such-driver.so.1");
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.device_count, 0);
  EXPECT_NE(d.error.find("cannot load"), std::string::npos) << d.error;
}

TEST(CudaDriver, NoDeviceMeansACleanError) {
  bool available = false;
  EXPECT_NO_THROW(available = cuda_device_available());
  if (available) {
    // A GPU machine: the backend comes up.
    auto b = make_cuda_backend();
    EXPECT_EQ(b->name(), "cuda");
    return;
  }
  try {
    make_cuda_backend();
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

TEST(CudaAllocator, SizeClasses) {
  EXPECT_EQ(CudaCachingAllocator::round_size(0), 512u);
  EXPECT_EQ(CudaCachingAllocator::round_size(1), 512u);
  EXPECT_EQ(CudaCachingAllocator::round_size(513), 1024u);
  EXPECT_EQ(CudaCachingAllocator::round_size((1 << 20) - 1), size_t(1) << 20);
  EXPECT_EQ(CudaCachingAllocator::round_size(1 << 20), size_t(2) << 20);
  EXPECT_EQ(CudaCachingAllocator::round_size((3 << 20) + 1), size_t(4) << 20);
}

}  // namespace
}  // namespace lt

#else  // !LT_HAVE_CUDA

TEST(CudaCodegen, NotBuilt) { GTEST_SKIP() << "built without the CUDA backend (LT_WITH_CUDA=OFF)"; }

#endif
