// The CUDA backend's host side without a GPU: the driver layer loads or fails cleanly, the
// backend's settings read from the environment, every GPU is a device and backend of its own (a
// missing one a clear error), and the caching allocator's size classes. Code generation and
// NVRTC: cuda_codegen_test.cc; numerical results on a GPU: tests/gpu/.
#include <gtest/gtest.h>

#ifdef LT_HAVE_CUDA

#include <unistd.h>

#include <cstdlib>
#include <initializer_list>
#include <string>

#include "backends/backend.h"
#include "backends/cuda/caching_allocator.h"
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cuda_graph.h"
#include "backends/cuda/driver_api.h"
#include "ir/error.h"
#include "runtime/device.h"

namespace lt {
namespace {

TEST(CudaDriver, MissingLibraryIsReportedNotFatal) {
  CudaDriver d = load_cuda_driver("liblazytensor-no-such-driver.so.1");
  EXPECT_FALSE(d.ok);
  EXPECT_EQ(d.device_count, 0);
  EXPECT_NE(d.error.find("cannot load"), std::string::npos) << d.error;
}

// The CUDA graph entry points (driver_functions.def, optional) are spelled as the driver exports
// them: the toolkit's stub libcuda has them all (its cuInit fails, so the driver is not usable).
TEST(CudaDriver, GraphEntryPointsResolveFromTheToolkitStub) {
  const char* stub = "/usr/local/cuda/lib64/stubs/libcuda.so";
  if (::access(stub, R_OK) != 0) GTEST_SKIP() << "no " << stub;
  CudaDriver d = load_cuda_driver(stub);
  EXPECT_TRUE(d.graphs) << d.error;
  EXPECT_NE(d.cuGraphExecKernelNodeSetParams_v2, nullptr);
  EXPECT_NE(d.cuStreamBeginCapture_v2, nullptr);
}

// Sets an environment variable for a test's scope and restores it (or its absence) afterwards.
class ScopedEnv {
 public:
  explicit ScopedEnv(const char* name) : name_(name) {
    const char* old = std::getenv(name);
    had_ = old != nullptr;
    if (old) old_ = old;
  }
  ~ScopedEnv() {
    if (had_)
      ::setenv(name_, old_.c_str(), 1);
    else
      ::unsetenv(name_);
  }
  void set(const char* value) const { ::setenv(name_, value, 1); }
  void unset() const { ::unsetenv(name_); }
  // Each of `bad` as the value makes read() a ValueError naming the variable.
  template <class Read>
  void expect_rejected(std::initializer_list<const char*> bad, Read read) const {
    for (const char* value : bad) {
      set(value);
      try {
        read();
        ADD_FAILURE() << name_ << "=" << value << ": expected an error";
      } catch (const Error& e) {
        EXPECT_EQ(e.kind(), ErrorKind::Value);
        EXPECT_NE(std::string(e.what()).find(name_), std::string::npos);
      }
    }
  }

 private:
  const char* name_;
  bool had_ = false;
  std::string old_;
};

// LT_CUDA_GRAPH_SEGMENTS (cuda_graph.h): unset, empty or 0 is off, 1 is on, anything else is an
// error naming the variable.
TEST(CudaGraphSegments, ReadsTheVariableAndRejectsBadValues) {
  const ScopedEnv env("LT_CUDA_GRAPH_SEGMENTS");
  env.unset();
  EXPECT_FALSE(cuda_graph_segments());
  env.set("0");
  EXPECT_FALSE(cuda_graph_segments());
  env.set("1");
  EXPECT_TRUE(cuda_graph_segments());
  env.expect_rejected({"yes", "2", "-1"}, [] { cuda_graph_segments(); });
}

// LT_CUDA_GEMM_SM_CARVEOUT (cuda_graph.h): unset or empty is the default, a whole number of SMs
// is taken (0: off), anything else is an error naming the variable.
TEST(CudaGemmSmCarveout, ReadsTheVariableAndRejectsBadValues) {
  const ScopedEnv env("LT_CUDA_GEMM_SM_CARVEOUT");
  env.unset();
  EXPECT_EQ(cuda_gemm_sm_carveout(), kDefaultGemmSmCarveout);
  env.set("");
  EXPECT_EQ(cuda_gemm_sm_carveout(), kDefaultGemmSmCarveout);
  env.set("0");
  EXPECT_EQ(cuda_gemm_sm_carveout(), 0);
  env.set("24");
  EXPECT_EQ(cuda_gemm_sm_carveout(), 24);
  env.expect_rejected({"-1", "12x", "2000", "lots"}, [] { cuda_gemm_sm_carveout(); });
}

// Asking for device `dev`'s backend is a RuntimeError whose message contains "no CUDA device"
// and `says`.
void expect_no_cuda_device(const std::string& dev, const std::string& says) {
  try {
    get_backend(Device::parse(dev).backend_name());
    ADD_FAILURE() << dev << ": expected an error";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::Runtime);
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(says), std::string::npos) << e.what();
  }
}

TEST(CudaRegistry, AbsentGpuIsAClearErrorAndLazyFallsBackToCpu) {
  const bool gpu = cuda_device_available();
  EXPECT_EQ(backend_available("cuda"), gpu);
  if (gpu) {
    EXPECT_EQ(get_backend("cuda").name(), "cuda");
    return;
  }
  for (const char* dev : {"cuda", "lazy:cuda"}) expect_no_cuda_device(dev, "no CUDA device");
  if (!std::getenv("LT_LAZY_BACKEND")) {
    EXPECT_EQ(Device::parse("lazy").backend_name(), "cpu");
  }
}

// Every GPU is a device of its own (issue 31): cuda:N and lazy:cuda:N name backend "cuda:N"
// (device 0 keeps the plain name "cuda"), and a GPU that is not there is a clear error naming
// it, on a machine with GPUs as on one without.
TEST(CudaRegistry, EachGpuIsItsOwnBackend) {
  EXPECT_EQ(Device::parse("cuda").backend_name(), "cuda");
  EXPECT_EQ(Device::parse("cuda:0").backend_name(), "cuda");
  EXPECT_EQ(Device::parse("cuda:3").backend_name(), "cuda:3");
  EXPECT_EQ(Device::parse("lazy:cuda").backend_name(), "cuda");
  const Device lazy3 = Device::parse("lazy:cuda:3");
  EXPECT_EQ(lazy3.backend_name(), "cuda:3");
  EXPECT_EQ(lazy3.index, 3);
  EXPECT_EQ(lazy3.str(), "lazy:cuda:3");
  EXPECT_EQ(Device::parse(lazy3.str()), lazy3);
  EXPECT_NE(lazy3, Device::parse("lazy:cuda"));
  EXPECT_EQ(Device::parse("cuda:3").str(), "cuda:3");
  EXPECT_EQ(cuda_ordinal("cuda"), 0);
  EXPECT_EQ(cuda_ordinal("cuda:12"), 12);
  EXPECT_EQ(cuda_ordinal("cpu"), -1);
  EXPECT_EQ(cuda_ordinal("cuda:"), -1);
  EXPECT_EQ(cuda_ordinal("cuda:1x"), -1);
  EXPECT_EQ(cuda_backend_name(0), "cuda");
  EXPECT_EQ(cuda_backend_name(2), "cuda:2");
  EXPECT_THROW(Device::parse("lazy:cuda:x"), Error);
  EXPECT_THROW(Device::parse("lazy:cuda:"), Error);
  const int count = cuda_device_available() ? cuda_driver().device_count : 0;
  EXPECT_FALSE(backend_available(cuda_backend_name(count)));
  // With GPUs, the error names the missing one and how many there are.
  const std::string says = count > 0 ? "device(s) visible" : "no CUDA device";
  for (const std::string& dev :
       {"cuda:" + std::to_string(count), "lazy:cuda:" + std::to_string(count)})
    expect_no_cuda_device(dev, says);
  // The failed requests left nothing behind: asking again is the same clear error.
  EXPECT_THROW(get_backend(cuda_backend_name(count)), Error);
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

// Built without the CUDA backend: only the contract that asking for it is a clear error.
#include "backends/backend.h"
#include "ir/error.h"

TEST(CudaRegistry, WithoutTheBackendCudaIsAClearError) {
  EXPECT_FALSE(lt::backend_available("cuda"));
  try {
    lt::get_backend("cuda");
    FAIL() << "expected an error";
  } catch (const lt::Error& e) {
    EXPECT_NE(std::string(e.what()).find("no CUDA device"), std::string::npos) << e.what();
  }
}

#endif
