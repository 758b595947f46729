#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <future>
#include <map>
#include <mutex>
#include <span>

#include "backends/cuda/cublas_gemm.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/cuda_compile.h"
#include "backends/cuda/cuda_executable.h"
#include "backends/cuda/cuda_graph.h"
#include "backends/cuda/cuda_module_image.h"
#include "backends/cuda/cudnn_conv.h"
#include "backends/cuda/flash_attention.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "backends/cuda/nvrtc_worker.h"
#include "ir/error.h"
#include "lowering/collective_placement.h"
#include "lowering/memory_plan.h"
#include "lowering/size_fields.h"

namespace lt {

CudaBuffer::CudaBuffer(std::shared_ptr<CudaCachingAllocator> alloc, size_t bytes,
                       CUdeviceptr prefer)
    : alloc_(std::move(alloc)) {
  bytes_ = bytes;
  data_ = reinterpret_cast<void*>(alloc_->allocate(bytes, prefer));
}

CudaBuffer::CudaBuffer(CUdeviceptr ptr, size_t bytes, std::function<void()> release)
    : release_(std::move(release)) {
  bytes_ = bytes;
  data_ = reinterpret_cast<void*>(ptr);
}

CudaBuffer::~CudaBuffer() {
  if (alloc_)
    alloc_->release(ptr(), bytes_);
  else if (release_)
    release_();
}

namespace {

// LowerOptions::split_for_many_threads, on unless LT_CUDA_SPLIT_REDUCTIONS=0 (read once). On the
// ResNet-18 row (H200, 2026-11-29) batch norm's statistics split in two stages took the step from
// 7.56 to 6.22 ms (274 -> 430 kernels) once its CUDA graph replayed without recaptures (an
// earlier A/B, with every convolution recaptured each step, had hidden it). GPT-2's reductions
// have too many outputs for the rule to touch them.
bool split_for_many_threads() {
  static const bool on = [] {
    const char* e = std::getenv("LT_CUDA_SPLIT_REDUCTIONS");
    return !(e && std::string(e) == "0");
  }();
  return on;
}

// A pinned host slot and an event for Backend::copy_to_host_async, reused: a slot goes back to
// its pool when the last reader of its copy lets go (never freed, see copy_to_host_async).
struct ReadSlot {
  static constexpr size_t kBytes = 64;
  void* host = nullptr;
  CUevent done = nullptr;
};

class ReadSlotPool : public std::enable_shared_from_this<ReadSlotPool> {
 public:
  std::shared_ptr<ReadSlot> take(const CudaDriver& d) {
    ReadSlot* s = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!free_.empty()) {
        s = free_.back();
        free_.pop_back();
      }
    }
    if (!s) {
      auto fresh = std::make_unique<ReadSlot>();
      d.check(d.cuMemAllocHost_v2(&fresh->host, ReadSlot::kBytes), "cuMemAllocHost");
      d.check(d.cuEventCreate(&fresh->done, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
      s = fresh.release();
    }
    return std::shared_ptr<ReadSlot>(s, [pool = shared_from_this()](ReadSlot* r) {
      std::lock_guard<std::mutex> lock(pool->mu_);
      pool->free_.push_back(r);
    });
  }

 private:
  std::mutex mu_;
  std::vector<ReadSlot*> free_;
};

class CudaBackendImpl : public CudaBackend {
 public:
  explicit CudaBackendImpl(int ordinal)
      : dev_(CudaDevice::open(ordinal)), alloc_(std::make_shared<CudaCachingAllocator>(dev_)) {
    // LT_CUDA_ARCH=sm_XY (cubin) or compute_XY (PTX for the driver's JIT) overrides the
    // architecture detected from the device, e.g. to try a newer NVRTC target.
    const char* arch = std::getenv("LT_CUDA_ARCH");
    if (arch && *arch) {
      target_ = arch;
      cubin_ = target_.rfind("sm_", 0) == 0;
    } else {
      target_ = nvrtc_target_for(dev_->cc_major(), dev_->cc_minor(), &cubin_);
    }
    start_nvrtc_workers();  // warm by the time the first graph is traced and compiles
  }

  std::string name() const override { return "cuda"; }

  BufferPtr allocate(size_t bytes) override { return std::make_shared<CudaBuffer>(alloc_, bytes); }

  // Device memory owned by `parent` (kept alive by the release function), not runtime-owned.
  BufferPtr sub_buffer(const BufferPtr& parent, size_t offset, size_t bytes) override {
    const CudaBuffer& p = as_cuda(*parent, "cuda sub_buffer");
    if (offset > p.bytes() || bytes > p.bytes() - offset)
      fail(ErrorKind::Runtime, "internal: a cuda sub-buffer of ", bytes, " bytes at ", offset,
           " does not lie inside its parent of ", p.bytes(), " bytes");
    return std::make_shared<CudaBuffer>(p.ptr() + offset, bytes, [keep = parent] {});
  }

  void copy_from_host(Buffer& dst, const void* src, size_t bytes) override {
    const CudaBuffer& cb = as_cuda(dst, "cuda copy_from_host");
    if (bytes > cb.bytes())
      fail(ErrorKind::Runtime, "cuda copy_from_host: ", bytes, " bytes into a buffer of ",
           cb.bytes());
    if (!bytes) return;
    dev_->bind();
    const CudaDriver& d = dev_->driver();
    // In stream order, so a recycled block is written only after the runs that read it before.
    // From pageable memory (numpy's) the driver stages the data before returning; from pinned
    // memory the DMA may still be reading `src` on return, so that case waits.
    d.check(d.cuMemcpyHtoDAsync_v2(cb.ptr(), src, bytes, dev_->stream()), "cuMemcpyHtoDAsync");
    unsigned int type = 0;
    if (d.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                reinterpret_cast<CUdeviceptr>(src)) == CUDA_SUCCESS)
      dev_->synchronize();
  }

  void copy_to_host(void* dst, const Buffer& src, size_t bytes) override {
    const CudaBuffer& cb = as_cuda(src, "cuda copy_to_host");
    if (bytes > cb.bytes())
      fail(ErrorKind::Runtime, "cuda copy_to_host: ", bytes, " bytes from a buffer of ",
           cb.bytes());
    if (!bytes) return;
    dev_->synchronize();  // the runs that write `src` may still be in flight
    const CudaDriver& d = dev_->driver();
    d.check(d.cuMemcpyDtoH_v2(dst, cb.ptr(), bytes), "cuMemcpyDtoH");
  }

  // Into pinned memory on the stream, then an event: waiting on the event waits for the runs
  // issued before this call, not for the ones issued after (the next step). The pinned slots and
  // events are pooled and never freed: cuMemFreeHost (and a first cuMemAllocHost) synchronize
  // the device, which is what this exists to avoid.
  std::function<void(void*)> copy_to_host_async(const Buffer& src, size_t bytes) override {
    const CudaBuffer& cb = as_cuda(src, "cuda copy_to_host_async");
    if (bytes > cb.bytes())
      fail(ErrorKind::Runtime, "cuda copy_to_host_async: ", bytes, " bytes from a buffer of ",
           cb.bytes());
    if (bytes > ReadSlot::kBytes) return Backend::copy_to_host_async(src, bytes);
    dev_->bind();
    const CudaDriver& d = dev_->driver();
    std::shared_ptr<ReadSlot> slot = read_slots_->take(d);
    if (bytes)
      d.check(d.cuMemcpyDtoHAsync_v2(slot->host, cb.ptr(), bytes, dev_->stream()),
              "cuMemcpyDtoHAsync");
    d.check(d.cuEventRecord(slot->done, dev_->stream()), "cuEventRecord");
    return [slot, bytes, dev = dev_](void* dst) {
      const CudaDriver& d = dev->driver();
      dev->bind();
      d.check(d.cuEventSynchronize(slot->done), "cuEventSynchronize");
      raise_collective_error(dev->ordinal());  // the values may come from a failed collective
      std::memcpy(dst, slot->host, bytes);
    };
  }

  void synchronize() override { dev_->synchronize(); }

  BufferPtr wrap_external(void* data, size_t bytes, std::function<void()> release) override {
    return std::make_shared<CudaBuffer>(reinterpret_cast<CUdeviceptr>(data), bytes,
                                        std::move(release));
  }

  std::unique_ptr<Executable> compile(const Plan& plan) override {
    std::shared_ptr<const CublasHandle> blas;
    if (!plan.gemms.empty()) blas = cublas_handle();
    std::shared_ptr<const CudnnHandle> dnn;
    if (!plan.convs.empty()) dnn = cudnn_handle();
    CudaExecutable::check_plan(plan, blas != nullptr, dnn != nullptr);
    // The flash kernels compile (once per process) while the plan's programs do.
    std::future<const std::vector<std::vector<char>>*> flash;
    if (flash_attention_launches(plan))
      flash = std::async(std::launch::async,
                         [t = target_, c = cubin_] { return &flash_attention_images(t, c); });
    CudaModuleImage module = compile_cuda_module(plan, target_, cubin_);
    if (flash.valid()) append_flash_attention(module, *flash.get());
    return std::make_unique<CudaExecutable>(alloc_, plan, std::move(module), std::move(blas),
                                            std::move(dnn));
  }

  // Symbolic plans (issue 30): kernels read their sizes at run time (cuda_codegen.h), library
  // steps are instantiated per binding (CudaExecutable::run_symbolic).
  bool symbolic_sizes() const override { return true; }

  // The code depends on the architecture compiled for and the NVRTC that compiled it (and how
  // hard it optimized; the library's own build is in every entry's header). Which steps are
  // cuBLAS, cuDNN or flash kernels is in the graph key, which carries the LowerOptions
  // (runtime/executor.cc).
  std::string cache_target() override {
    return target_ + " nvrtc " + nvrtc_version() + (nvrtc_fast_compile() ? " ofc" : "") +
           CudaCodegenOptions::from_env().tag();
  }

  bool serialize(const Executable& exe, std::string* out) override {
    auto* cuda_exe = dynamic_cast<const CudaExecutable*>(&exe);
    // A symbolic executable is not stored: compiling one is the point where its sizes are free.
    if (!cuda_exe || cuda_exe->symbolic()) return false;
    *out = encode_cuda_module(cuda_exe->module_image());
    return true;
  }

  // Loads the image an earlier process compiled (cuModuleLoadData); runs neither code generation
  // nor NVRTC. Bytes that do not fit throw, and the runtime compiles afresh.
  std::unique_ptr<Executable> load(const Plan& plan, std::string_view bytes) override {
    LT_CHECK(!plan.sym.symbolic(), ErrorKind::Runtime,
             "cached cuda code: a symbolic plan is never cached");
    CudaExecutable::check_plan(plan, true, true);
    CudaModuleImage m =
        decode_cuda_module(bytes, plan.kernels.size() + flash_attention_launches(plan), target_);
    std::shared_ptr<const CublasHandle> blas;
    if (!plan.gemms.empty()) blas = cublas_handle();
    std::shared_ptr<const CudnnHandle> dnn;
    if (!plan.convs.empty()) dnn = cudnn_handle();
    return std::make_unique<CudaExecutable>(alloc_, plan, std::move(m), std::move(blas),
                                            std::move(dnn));
  }

  // cuBLAS computes float32, float64, bfloat16 and float16 matmuls when it loads; otherwise they
  // stay loop kernels. cuDNN computes convolutions of those types when it loads (LT_CUDNN=0 turns
  // it off); otherwise lowering expands them into GEMMs (lowering/expand_conv.h).
  LowerOptions lower_options() const override {
    LowerOptions o;
    if (gemm_enabled() && cublas_available())
      o.gemm_dtypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16};
    if (gemm_enabled() && cudnn_enabled() && cudnn_available())
      o.conv_dtypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16};
    if (flash_attention_enabled()) {
      o.attention_dtypes = {DType::Float32};
      if (dev_->cc_major() >= 8)  // the 16-bit kernels' mma.sync m16n8k16
        o.attention_dtypes.insert(o.attention_dtypes.end(), {DType::BFloat16, DType::Float16});
      o.attention_head_dim = kFlashTile;
    }
    o.split_for_many_threads = split_for_many_threads();
    // Off by default: on the ResNet-18 row (H200, 2026-11-29) the channels-last plan removed
    // cuDNN's transposes but ran 6.66 ms against 6.16 (its reductions over NHWC data and 32 weight
    // copies not yet tuned); LT_CHANNELS_LAST=1 turns it on.
    o.conv_channels_last = !o.conv_dtypes.empty() && conv_channels_last(false);
    o.collectives_beside_light_work = collectives_beside_light_work_from_env();
    return o;
  }

  CudaAllocatorStats memory_stats() const override { return alloc_->stats(); }
  void empty_cache() override { alloc_->empty_cache(); }
  const CudaDevice& device() const override { return *dev_; }
  std::string target() const override { return target_; }

 private:
  // Library handles (cuBLAS, cuDNN), created on the first plan with a gemm or a conv, on the
  // device's stream, and kept: creating one allocates device memory and costs milliseconds.
  std::shared_ptr<const CublasHandle> cublas_handle() { return library_handle(blas_); }
  std::shared_ptr<const CudnnHandle> cudnn_handle() { return library_handle(dnn_); }
  template <class Handle>
  std::shared_ptr<const Handle> library_handle(std::shared_ptr<const Handle>& slot) {
    std::lock_guard<std::mutex> lock(handles_mu_);
    if (!slot) {
      dev_->bind();
      slot = std::make_shared<const Handle>(dev_->stream());
    }
    return slot;
  }
  static bool cudnn_enabled() {
    static const bool on = [] {
      const char* e = std::getenv("LT_CUDNN");
      return !(e && (std::strcmp(e, "0") == 0 || std::strcmp(e, "off") == 0));
    }();
    return on;
  }
  std::shared_ptr<CudaDevice> dev_;
  std::shared_ptr<ReadSlotPool> read_slots_ = std::make_shared<ReadSlotPool>();
  std::shared_ptr<CudaCachingAllocator> alloc_;
  std::string target_;
  bool cubin_ = true;
  // Last, so it is destroyed before the device it was created on.
  std::mutex handles_mu_;
  std::shared_ptr<const CublasHandle> blas_;
  std::shared_ptr<const CudnnHandle> dnn_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int ordinal) {
  return std::make_unique<CudaBackendImpl>(ordinal);
}

}  // namespace lt
