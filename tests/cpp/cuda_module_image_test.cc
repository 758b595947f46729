// The CUDA backend's part of an on-disk cache entry (backends/cuda/cuda_module_image.h) without a
// GPU: a real plan's kernels generated and compiled by NVRTC (cubin and PTX) round-trip through
// the byte format exactly, and every truncation, byte flip, foreign target or kernel count is an
// lt::Error (the cache then rebuilds), never a crash. Loading the image on a device:
// tests/gpu/cuda_graph_gpu_test.cc.
#include <gtest/gtest.h>

#ifdef LT_HAVE_CUDA

#include <random>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_compile.h"
#include "backends/cuda/cuda_module_image.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "graph_util.h"
#include "ir/error.h"
#include "ir/graph.h"
#include "lowering/lower.h"

namespace lt {
namespace {

using testing::FakeData;
using testing::param;

// A softmax and an elementwise epilogue: kernels of several launch modes.
CudaModuleImage compiled(bool cubin) {
  NodePtr x = param({37, 300});
  Attrs a;
  a.ints = {1};
  NodePtr sm = make_node(Op::Softmax, {x}, a);
  NodePtr y = make_node(Op::Sin, {make_node(Op::Mul, {sm, param({300})})});
  Plan plan = lower(collect_graph({y.get(), sm.get()}));
  // Two NVRTC programs, so the table of programs round-trips too.
  CudaModuleImage m = compile_cuda_module(plan, cubin ? "sm_90" : "compute_90", cubin, nullptr, 2);
  EXPECT_EQ(m.images.size(), 2u);
  return m;
}

void expect_same(const CudaModuleImage& a, const CudaModuleImage& b) {
  EXPECT_EQ(a.target, b.target);
  EXPECT_EQ(a.cubin, b.cubin);
  EXPECT_EQ(a.images, b.images);
  EXPECT_EQ(a.program_of, b.program_of);
  EXPECT_EQ(a.source, b.source);
  ASSERT_EQ(a.launches.size(), b.launches.size());
  for (size_t i = 0; i < a.launches.size(); ++i) {
    EXPECT_EQ(a.launches[i].name, b.launches[i].name);
    EXPECT_EQ(a.launches[i].mode, b.launches[i].mode);
    EXPECT_EQ(a.launches[i].threads, b.launches[i].threads);
    EXPECT_EQ(a.launches[i].max_blocks, b.launches[i].max_blocks);
    EXPECT_EQ(a.launches[i].vectorized, b.launches[i].vectorized);
  }
}

TEST(CudaModuleImage, CubinAndPtxRoundTrip) {
  for (bool cubin : {true, false}) {
    SCOPED_TRACE(cubin ? "cubin" : "ptx");
    CudaModuleImage m = compiled(cubin);
    ASSERT_GE(m.launches.size(), 2u);
    const std::string bytes = encode_cuda_module(m);
    expect_same(decode_cuda_module(bytes, m.launches.size(), m.target), m);
    EXPECT_EQ(encode_cuda_module(decode_cuda_module(bytes, m.launches.size(), m.target)), bytes);
  }
}

TEST(CudaModuleImage, ForeignTargetOrKernelCountIsRejected) {
  CudaModuleImage m = compiled(true);
  const std::string bytes = encode_cuda_module(m);
  const size_t n = m.launches.size();
  auto rejected = [&](const std::string& b, size_t kernels, const std::string& target,
                      const char* why) {
    try {
      decode_cuda_module(b, kernels, target);
      ADD_FAILURE() << "accepted: " << why;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("cuda module"), std::string::npos) << e.what();
    }
  };
  rejected(bytes, n, "sm_80", "another architecture");
  rejected(bytes, n + 1, "sm_90", "one kernel more");
  rejected(bytes, n - 1, "sm_90", "one kernel less");
  rejected(bytes + "x", n, "sm_90", "trailing byte");
  rejected("", 0, "sm_90", "empty");
  // A PTX image must end in the NUL the driver's C-string read stops at.
  CudaModuleImage p = compiled(false);
  p.images[1].pop_back();
  rejected(encode_cuda_module(p), p.launches.size(), p.target, "PTX without NUL");
  // An image kind that contradicts the target.
  CudaModuleImage k = m;
  k.cubin = false;
  for (auto& image : k.images) image.push_back('\0');
  rejected(encode_cuda_module(k), n, "sm_90", "PTX flag on an sm_ target");
  // Launch descriptions the backend could not launch.
  CudaModuleImage t = m;
  t.launches[0].threads = 33;
  rejected(encode_cuda_module(t), n, "sm_90", "block size not a multiple of 32");
  t.launches[0].threads = 2048;
  rejected(encode_cuda_module(t), n, "sm_90", "block size above 1024");
  CudaModuleImage b = m;
  b.launches[1].max_blocks = -5;
  rejected(encode_cuda_module(b), n, "sm_90", "negative grid");
  CudaModuleImage e = m;
  e.launches[0].name.clear();
  rejected(encode_cuda_module(e), n, "sm_90", "empty kernel name");
  CudaModuleImage q = m;
  q.program_of[0] = 2;
  rejected(encode_cuda_module(q), n, "sm_90", "a launch in a program that does not exist");
  CudaModuleImage z = m;
  z.images[0].clear();
  rejected(encode_cuda_module(z), n, "sm_90", "an empty image");
}

TEST(CudaModuleImage, EveryTruncationIsAnError) {
  CudaModuleImage m = compiled(true);
  const std::string bytes = encode_cuda_module(m);
  for (size_t len = 0; len < bytes.size(); ++len) {
    // Every length along the header and launch table; a sample through the (large) image.
    if (len > 64 && len + 512 < bytes.size() && len % 97 != 0) continue;
    EXPECT_THROW(
        decode_cuda_module(std::string_view(bytes).substr(0, len), m.launches.size(), m.target),
        Error)
        << "length " << len;
  }
}

TEST(CudaModuleImage, CorruptBytesNeverCrash) {
  CudaModuleImage m = compiled(true);
  const std::string bytes = encode_cuda_module(m);
  std::mt19937 rng(5);
  int rejected = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    std::string b = bytes;
    // Flip bytes in the header and in the launch table at the end, where lengths and counts live.
    const int flips = 1 + static_cast<int>(rng() % 4);
    for (int f = 0; f < flips; ++f) {
      size_t at = rng() % 2 ? rng() % std::min<size_t>(64, b.size())
                            : b.size() - 1 - rng() % std::min<size_t>(256, b.size());
      b[at] = static_cast<char>(rng());
    }
    try {
      CudaModuleImage d = decode_cuda_module(b, m.launches.size(), m.target);
      // Accepted bytes decode to a module that satisfies every check a load relies on.
      EXPECT_EQ(d.launches.size(), m.launches.size());
      for (const auto& l : d.launches) {
        EXPECT_TRUE(l.threads >= 32 && l.threads <= 1024 && l.threads % 32 == 0);
        EXPECT_GE(l.max_blocks, 0);
        EXPECT_FALSE(l.name.empty());
      }
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 1000);
}

}  // namespace
}  // namespace lt

#endif  // LT_HAVE_CUDA
