// The CUDA code generator and buffer donation, without a GPU: an in-place pair (a donated input and
// its output, Kernel::inplace) loses __restrict__ (the two pointers may be one buffer at run time),
// the other arguments keep it, and the kernel still compiles with NVRTC for sm_90.
#include <gtest/gtest.h>

#ifdef LT_HAVE_CUDA

#include <regex>

#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "graph_util.h"
#include "ir/graph.h"
#include "lowering/lower.h"

namespace lt {
namespace {

using testing::param;

TEST(DonationCudaCodegen, InPlacePairDropsRestrictAndCompiles) {
  NodePtr p = param({256, 64});
  NodePtr g = param({256, 64});
  NodePtr lr = make_scalar(DType::Float32, 0.1);
  NodePtr root =
      make_node(Op::Sub, {p, make_node(Op::Mul, {g, make_node(Op::Expand, {lr}, {{256, 64}})})});
  Plan plan = lower(collect_graph({root.get()}));
  ASSERT_EQ(plan.donations.size(), 1u);
  ASSERT_EQ(plan.kernels.size(), 1u);
  const loop::Kernel& k = plan.kernels[0];
  ASSERT_EQ(k.inplace.size(), 1u);
  const auto [in, out] = k.inplace[0];
  CudaModuleSource m = generate_cuda(plan.kernels);
  // Each pointer parameter is "T* aN" or "T* __restrict__ aN".
  for (size_t a = 0; a < k.args.size(); ++a) {
    if (k.args[a].scalar) continue;
    const std::string name = "a" + std::to_string(a);
    const bool restricted =
        std::regex_search(m.source, std::regex("__restrict__ " + name + "[,)]"));
    const bool paired = static_cast<int>(a) == in || static_cast<int>(a) == out;
    EXPECT_EQ(restricted, !paired) << name << " in\n" << m.source.substr(0, 4000);
  }
  EXPECT_FALSE(nvrtc_compile_cubin(m.source, "sm_90").empty());
}

}  // namespace
}  // namespace lt

#endif  // LT_HAVE_CUDA
