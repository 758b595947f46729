#include "backends/cpu/cpu_backend.h"

#include <cstring>

#include "backends/cpu/cpu_executable.h"
#include "ir/error.h"
#include "lowering/collective_placement.h"

namespace lt {
namespace {

class CpuBackend : public Backend {
 public:
  std::string name() const override { return "cpu"; }
  bool host_memory() const override { return true; }
  BufferPtr allocate(size_t bytes) override { return std::make_shared<HostBuffer>(bytes); }

  void copy_from_host(Buffer& dst, const void* src, size_t bytes) override {
    LT_CHECK(dst.on_host(), ErrorKind::Runtime,
             "cpu backend: copy into a buffer that is not in host memory");
    LT_CHECK(bytes <= dst.bytes(), ErrorKind::Value, "cpu backend: copying ", bytes,
             " bytes into a buffer of ", dst.bytes());
    if (bytes) std::memcpy(dst.data(), src, bytes);
  }

  void copy_to_host(void* dst, const Buffer& src, size_t bytes) override {
    LT_CHECK(src.on_host(), ErrorKind::Runtime,
             "cpu backend: copy from a buffer that is not in host memory");
    LT_CHECK(bytes <= src.bytes(), ErrorKind::Value, "cpu backend: copying ", bytes,
             " bytes out of a buffer of ", src.bytes());
    if (bytes) std::memcpy(dst, src.data(), bytes);
  }

  std::unique_ptr<Executable> compile(const Plan& plan) override {
    return std::make_unique<cpu::CpuExecutable>(plan);
  }

  // Symbolic kernels read their sizes from a parameter array, library steps are instantiated per
  // binding (cpu_executable.h).
  bool symbolic_sizes() const override { return true; }

  // float32 matmuls and convolutions go to oneDNN, and bfloat16 and float16 matmuls widened to
  // float32 (onednn_gemm.h); float64 (which oneDNN lacks) and other dtypes stay loop kernels.
  LowerOptions lower_options() const override {
    LowerOptions o;
    if (cpu::onednn_gemm_available() && gemm_enabled())
      o.gemm_dtypes = {DType::Float32, DType::BFloat16, DType::Float16};
    if (cpu::onednn_conv_available() && gemm_enabled()) o.conv_dtypes = {DType::Float32};
    o.conv_channels_last = !o.conv_dtypes.empty() && conv_channels_last(false);
    o.collectives_beside_light_work = collectives_beside_light_work_from_env();
    return o;
  }

  // Plans with and without library GEMMs are kept apart by the graph key, which carries the
  // LowerOptions (runtime/executor.cc).
  std::string cache_target() override { return cpu::jit_cache_target(); }

  bool serialize(const Executable& exe, std::string* out) override {
    auto* cpu_exe = dynamic_cast<const cpu::CpuExecutable*>(&exe);
    if (!cpu_exe || cpu_exe->symbolic()) return false;  // symbolic plans are not stored
    *out = cpu_exe->serialize();
    return true;
  }

  std::unique_ptr<Executable> load(const Plan& plan, std::string_view bytes) override {
    return std::make_unique<cpu::CpuExecutable>(plan, bytes);
  }
};

}  // namespace

std::unique_ptr<Backend> make_cpu_backend() { return std::make_unique<CpuBackend>(); }

}  // namespace lt
