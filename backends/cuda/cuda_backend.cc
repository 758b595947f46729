#include "backends/cuda/cuda_backend.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <mutex>

#include "backends/cuda/cublas_gemm.h"
#include "backends/cuda/cuda_codegen.h"
#include "backends/cuda/nvrtc_compiler.h"
#include "lowering/memory_plan.h"
#include "lowering/plan_serialize.h"
#include "ir/error.h"

namespace lt {

CudaBuffer::CudaBuffer(std::shared_ptr<CudaCachingAllocator> alloc, size_t bytes) : alloc_(std::move(alloc)) {
  bytes_ = bytes;
  data_ = reinterpret_cast<void*>(alloc_->allocate(bytes));
}

CudaBuffer::~CudaBuffer() { alloc_->release(ptr(), bytes_); }

namespace {

const CudaBuffer& as_cuda(const Buffer& b, const char* what) {
  auto* c = dynamic_cast<const CudaBuffer*>(&b);
  if (!c)
    fail(ErrorKind::Runtime, what, ": the buffer is ", b.on_host() ? "host memory" : "not CUDA device memory",
         ", not a buffer of the cuda backend");
  return *c;
}

class CudaExecutable : public Executable {
 public:
  CudaExecutable(std::shared_ptr<CudaCachingAllocator> alloc, const Plan& plan, std::string target,
                 bool cubin, std::shared_ptr<const CublasHandle> blas)
      : alloc_(std::move(alloc)),
        dev_(alloc_->device()),
        buffers_(plan.buffers),
        kernels_(plan.kernels),
        gemms_(plan.gemms),
        steps_(plan.ordered_steps()),
        blas_(std::move(blas)),
        donations_(plan.donations),
        memory_(plan_memory(plan)) {
    for (const Gemm& g : gemms_) {
      for (int buf : {g.a, g.b, g.out})
        if (buf < 0 || buf >= static_cast<int>(buffers_.size()) || buffers_[buf].dtype != g.dtype ||
            buffers_[buf].kind == BufferSpec::Kind::Scalar)
          fail(ErrorKind::Runtime, "internal: gemm ", g.name, " names bad buffer ", buf);
      validate_gemm(g, buffers_[g.a].numel, buffers_[g.b].numel, buffers_[g.out].numel, "cuda executable");
    }
    // The runtime expands conv prims for backends without a conv library (runtime/conv.h).
    if (!plan.convs.empty())
      fail(ErrorKind::NotImplemented, "not implemented: library convolution step ", plan.convs[0].name, " on cuda");
    if (!gemms_.empty() && !blas_) fail(ErrorKind::Runtime, "internal: cuda plan with gemms but no cuBLAS handle");
    for (const PlanStep& st : steps_)
      if (st.index < 0 || st.index >= static_cast<int>(st.kind == PlanStep::Kind::Gemm ? gemms_.size() : kernels_.size()))
        fail(ErrorKind::Runtime, "internal: plan step names step ", st.index, " that does not exist");
    // Identical kernels (repeated layers) are generated and compiled once and launched by each.
    const DistinctKernels codes = distinct_kernels(plan.kernels);
    std::vector<loop::Kernel> distinct;
    for (size_t i : codes.first) distinct.push_back(plan.kernels[i]);
    CudaModuleSource gen = generate_cuda(distinct);
    source_ = std::move(gen.source);
    for (size_t c : codes.code_of) launches_.push_back(gen.kernels.at(c));
    if (kernels_.empty()) return;
    std::vector<char> image;
    if (cubin) {
      image = nvrtc_compile_cubin(source_, target);
    } else {
      std::string ptx = nvrtc_compile_ptx(source_, target);
      image.assign(ptx.begin(), ptx.end());
      image.push_back('\0');
    }
    const CudaDriver& d = dev_->driver();
    dev_->bind();
    d.check(d.cuModuleLoadData(&module_, image.data()), "cuModuleLoadData");
    for (const auto& l : launches_) {
      CUfunction f = nullptr;
      d.check(d.cuModuleGetFunction(&f, module_, l.name.c_str()), "cuModuleGetFunction");
      functions_.push_back(f);
    }
  }

  ~CudaExecutable() override {
    if (!module_) return;
    const CudaDriver& d = dev_->driver();
    if (d.cuCtxSetCurrent) {
      try {
        dev_->bind();
        d.cuStreamSynchronize(dev_->stream());  // its kernels may still be running
        d.cuModuleUnload(module_);
      } catch (...) {
      }
    }
  }

  int num_kernels() const override { return static_cast<int>(kernels_.size() + gemms_.size()); }
  std::vector<std::string> kernel_sources() const override { return {source_}; }

  std::vector<BufferPtr> run(const std::vector<RunInput>& inputs, RunStats* stats) override {
    const CudaDriver& d = dev_->driver();
    dev_->bind();
    // Bind every plan buffer: inputs from the caller, temps and outputs from the allocator.
    std::vector<BufferPtr> owned(buffers_.size());
    std::vector<CUdeviceptr> ptrs(buffers_.size(), 0);
    const std::vector<int> donated =
        donated_outputs(buffers_, donations_, inputs, "cuda executable");
    std::vector<std::shared_ptr<CudaBuffer>> slot_bufs(memory_.slot_bytes.size());
    for (size_t s = 0; s < slot_bufs.size(); ++s)
      slot_bufs[s] = std::make_shared<CudaBuffer>(alloc_, std::max<size_t>(memory_.slot_bytes[s], 1));
    for (size_t b = 0; b < buffers_.size(); ++b) {
      const BufferSpec& spec = buffers_[b];
      const size_t bytes = static_cast<size_t>(spec.numel) * dtype_size(spec.dtype);
      switch (spec.kind) {
        case BufferSpec::Kind::Input: {
          if (spec.input < 0 || spec.input >= static_cast<int>(inputs.size()) || !inputs[spec.input].buffer)
            fail(ErrorKind::Runtime, "cuda executable: graph input ", spec.input, " is missing (", inputs.size(),
                 " given)");
          const CudaBuffer& cb = as_cuda(*inputs[spec.input].buffer, "cuda executable input");
          if (cb.bytes() < bytes)
            fail(ErrorKind::Runtime, "cuda executable: input ", spec.input, " holds ", cb.bytes(), " bytes, expected ",
                 bytes, " (", spec.numel, " x ", dtype_name(spec.dtype), ")");
          ptrs[b] = cb.ptr();
          break;
        }
        case BufferSpec::Kind::Scalar:
          if (spec.input < 0 || spec.input >= static_cast<int>(inputs.size()))
            fail(ErrorKind::Runtime, "cuda executable: scalar input ", spec.input, " is missing");
          break;
        case BufferSpec::Kind::Temp:
          if (memory_.slot_of[b] >= 0) {  // shared with temporaries of disjoint lifetimes
            ptrs[b] = slot_bufs[static_cast<size_t>(memory_.slot_of[b])]->ptr();
            break;
          }
          [[fallthrough]];
        case BufferSpec::Kind::Output: {
          // A donated output is written in place: nothing to allocate.
          if (spec.kind == BufferSpec::Kind::Output && donated[b] >= 0) {
            ptrs[b] = as_cuda(*inputs[static_cast<size_t>(donated[b])].buffer,
                              "cuda executable donated input")
                          .ptr();
            break;
          }
          auto buf = std::make_shared<CudaBuffer>(alloc_, bytes);
          ptrs[b] = buf->ptr();
          owned[b] = std::move(buf);
          break;
        }
      }
    }
    CUstream stream = dev_->stream();
    const bool timed = stats && stats->on_kernel;
    for (const PlanStep& step : steps_) {
      const auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
      if (step.kind == PlanStep::Kind::Gemm) {
        const Gemm& g = gemms_[step.index];
        if (const size_t bytes = CublasHandle::pointer_array_bytes(g)) {
          std::lock_guard<std::mutex> lock(arrays_mu_);  // one host staging vector per step
          GemmArrays& ga = gemm_arrays_[static_cast<size_t>(step.index)];
          if (!ga.device) ga.device = std::make_shared<CudaBuffer>(alloc_, bytes);  // kept with the executable
          blas_->gemm(g, ptrs[g.a], ptrs[g.b], ptrs[g.out], {ga.device->ptr(), &ga.host});
        } else {
          blas_->gemm(g, ptrs[g.a], ptrs[g.b], ptrs[g.out]);
        }
        if (stats) ++stats->kernel_launches;
        if (timed) stats->on_kernel("gemm " + g.name + " (launch)", t0, std::chrono::steady_clock::now());
        continue;
      }
      const size_t k = static_cast<size_t>(step.index);
      const CudaKernelLaunch& l = launches_[k];
      if (l.max_blocks <= 0) continue;
      const loop::Kernel& kern = kernels_[k];
      // One 8-byte slot per parameter: device pointers, and scalars by value (double / long long).
      std::vector<uint64_t> slots(kern.args.size());
      std::vector<void*> params(kern.args.size());
      for (size_t a = 0; a < kern.args.size(); ++a) {
        const loop::Arg& arg = kern.args[a];
        if (arg.buffer < 0 || arg.buffer >= static_cast<int>(buffers_.size()))
          fail(ErrorKind::Runtime, "internal: kernel ", kern.name, " uses buffer ", arg.buffer, " of ", buffers_.size());
        const BufferSpec& spec = buffers_[arg.buffer];
        if (arg.scalar) {
          const RunInput& in = inputs.at(static_cast<size_t>(spec.input));
          if (is_floating(arg.dtype)) {
            double v = in.scalar;
            std::memcpy(&slots[a], &v, sizeof v);
          } else {
            long long v = in.scalar_i;
            std::memcpy(&slots[a], &v, sizeof v);
          }
        } else {
          if (spec.kind == BufferSpec::Kind::Scalar)
            fail(ErrorKind::Runtime, "internal: kernel ", kern.name, " reads scalar buffer ", arg.buffer,
                 " through a pointer");
          CUdeviceptr p = ptrs[static_cast<size_t>(arg.buffer)];
          std::memcpy(&slots[a], &p, sizeof p);
        }
        params[a] = &slots[a];
      }
      const int64_t cap = static_cast<int64_t>(dev_->sm_count()) * std::max(1, 2048 / l.threads) * 4;
      const unsigned grid = static_cast<unsigned>(std::clamp<int64_t>(l.max_blocks, 1, std::min<int64_t>(cap, 1 << 30)));
      d.check(d.cuLaunchKernel(functions_[k], grid, 1, 1, static_cast<unsigned>(l.threads), 1, 1, 0, stream,
                               params.data(), nullptr),
              "cuLaunchKernel");
      if (stats) ++stats->kernel_launches;
      if (timed) stats->on_kernel(kern.name + " (launch)", t0, std::chrono::steady_clock::now());
    }
    // Asynchronous: the outputs are valid for later work on the stream, and host reads wait
    // (copy_to_host). Temporaries go back to the cache now; only later stream work reuses them.
    if (CudaDevice::synchronous_runs()) dev_->synchronize();
    std::vector<BufferPtr> out(buffers_.size());
    for (size_t b = 0; b < buffers_.size(); ++b)
      if (buffers_[b].kind == BufferSpec::Kind::Output) out[b] = std::move(owned[b]);
    return out;  // temps return to the cache here
  }

 private:
  std::shared_ptr<CudaCachingAllocator> alloc_;
  std::shared_ptr<CudaDevice> dev_;
  std::vector<BufferSpec> buffers_;
  std::vector<loop::Kernel> kernels_;
  std::vector<Gemm> gemms_;
  std::vector<PlanStep> steps_;
  std::shared_ptr<const CublasHandle> blas_;
  // Per gemm: device and host copies of its pointer arrays (cublas_gemm.h), when it needs them.
  struct GemmArrays {
    std::shared_ptr<CudaBuffer> device;
    std::vector<uint64_t> host;
  };
  std::vector<GemmArrays> gemm_arrays_ = std::vector<GemmArrays>(gemms_.size());
  std::mutex arrays_mu_;
  std::vector<Donation> donations_;  // outputs a run may write into an input's memory
  MemoryPlan memory_;  // which temporaries share an allocation
  std::string source_;
  std::vector<CudaKernelLaunch> launches_;
  CUmodule module_ = nullptr;
  std::vector<CUfunction> functions_;
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
  }

  std::string name() const override { return "cuda"; }

  BufferPtr allocate(size_t bytes) override { return std::make_shared<CudaBuffer>(alloc_, bytes); }

  void copy_from_host(Buffer& dst, const void* src, size_t bytes) override {
    const CudaBuffer& cb = as_cuda(dst, "cuda copy_from_host");
    if (bytes > cb.bytes())
      fail(ErrorKind::Runtime, "cuda copy_from_host: ", bytes, " bytes into a buffer of ", cb.bytes());
    if (!bytes) return;
    dev_->bind();
    const CudaDriver& d = dev_->driver();
    // In stream order, so a recycled block is written only after the runs that read it before.
    // From pageable memory (numpy's) the driver stages the data before returning; from pinned
    // memory the DMA may still be reading `src` on return, so that case waits.
    d.check(d.cuMemcpyHtoDAsync_v2(cb.ptr(), src, bytes, dev_->stream()), "cuMemcpyHtoDAsync");
    unsigned int type = 0;
    if (d.cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, reinterpret_cast<CUdeviceptr>(src)) ==
        CUDA_SUCCESS)
      dev_->synchronize();
  }

  void copy_to_host(void* dst, const Buffer& src, size_t bytes) override {
    const CudaBuffer& cb = as_cuda(src, "cuda copy_to_host");
    if (bytes > cb.bytes())
      fail(ErrorKind::Runtime, "cuda copy_to_host: ", bytes, " bytes from a buffer of ", cb.bytes());
    if (!bytes) return;
    dev_->synchronize();  // the runs that write `src` may still be in flight
    const CudaDriver& d = dev_->driver();
    d.check(d.cuMemcpyDtoH_v2(dst, cb.ptr(), bytes), "cuMemcpyDtoH");
  }

  void synchronize() override { dev_->synchronize(); }

  std::unique_ptr<Executable> compile(const Plan& plan) override {
    std::shared_ptr<const CublasHandle> blas;
    if (!plan.gemms.empty()) blas = cublas_handle();
    return std::make_unique<CudaExecutable>(alloc_, plan, target_, cubin_, std::move(blas));
  }

  // cuBLAS computes float32, float64, bfloat16 and float16 matmuls when it loads; otherwise they
  // stay loop kernels.
  LowerOptions lower_options() const override {
    LowerOptions o;
    if (gemm_enabled() && cublas_available())
      o.gemm_dtypes = {DType::Float32, DType::Float64, DType::BFloat16, DType::Float16};
    return o;
  }

  CudaAllocatorStats memory_stats() const override { return alloc_->stats(); }
  void empty_cache() override { alloc_->empty_cache(); }
  const CudaDevice& device() const override { return *dev_; }
  std::string target() const override { return target_; }

 private:
  // Created on the first plan with a gemm, on the device's stream, and kept: creating a handle
  // allocates device memory and costs milliseconds.
  std::shared_ptr<const CublasHandle> cublas_handle() {
    std::lock_guard<std::mutex> lock(blas_mu_);
    if (!blas_) {
      dev_->bind();
      blas_ = std::make_shared<const CublasHandle>(dev_->stream());
    }
    return blas_;
  }
  std::shared_ptr<CudaDevice> dev_;
  std::shared_ptr<CudaCachingAllocator> alloc_;
  std::string target_;
  bool cubin_ = true;
  // Last, so it is destroyed before the device it was created on.
  std::mutex blas_mu_;
  std::shared_ptr<const CublasHandle> blas_;
};

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int ordinal) { return std::make_unique<CudaBackendImpl>(ordinal); }

}  // namespace lt
