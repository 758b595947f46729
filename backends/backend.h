// What every backend provides: memory, host transfers, and compiling a Plan into an Executable.
// Backends know no Python and no runtime Tensor; the runtime drives them through this interface.
#pragma once
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "ir/error.h"
#include "lowering/plan.h"

namespace lt {

// A block of memory owned by a backend's allocator; freed (returned to its pool) on destruction.
class Buffer {
 public:
  virtual ~Buffer() = default;
  void* data() const { return data_; }
  size_t bytes() const { return bytes_; }
  virtual bool on_host() const = 0;
  // False for memory that others own too (a NumPy array, a DLPack producer's tensor): the runtime
  // never writes a graph output into it in place (RunInput::donated_output).
  virtual bool runtime_owned() const { return true; }

 protected:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};
using BufferPtr = std::shared_ptr<Buffer>;

// Host memory, 64-byte aligned (whole cache lines, full-width vector loads).
class HostBuffer : public Buffer {
 public:
  explicit HostBuffer(size_t bytes);
  ~HostBuffer() override;
  bool on_host() const override { return true; }
};

// A contiguous part of a runtime-owned host buffer: the memory of a view (a reshape or a contiguous
// slice of materialized data shares its base's memory, as PyTorch's views do). It keeps the
// parent alive, so the parent is never donated while it exists, and it is not runtime_owned, so no
// graph writes a result into it (and through it into its base).
class HostSubBuffer : public Buffer {
 public:
  HostSubBuffer(BufferPtr parent, size_t offset, size_t bytes);
  bool on_host() const override { return true; }
  bool runtime_owned() const override { return false; }
  const BufferPtr& parent() const { return parent_; }
  size_t offset() const { return offset_; }

 private:
  BufferPtr parent_;
  size_t offset_;
};

// One runtime input of an executable: a buffer, or a scalar value (Scalar leaves).
// With donated_output >= 0 the executable writes that plan buffer (an Output paired with this
// input in Plan::donations) into this input's memory instead of allocating it, and returns null
// in its place: the caller's buffer holds the result, and the input's old values are gone.
struct RunInput {
  const Buffer* buffer = nullptr;
  double scalar = 0;
  int64_t scalar_i = 0;
  int donated_output = -1;
};

struct RunStats {
  int kernel_launches = 0;
  // CUDA graph launches that replaced this run's kernel launches (backends/cuda/cuda_graph.h);
  // kernel_launches still counts the kernels they ran.
  int graph_launches = 0;
  // Set by the runtime while profiling (LT_PROFILE): called once per kernel or GEMM step with its
  // name and host-side start/end (on CUDA, the launch; the stream is synchronized at the end).
  std::function<void(const std::string& name, std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point end)>
      on_kernel;
};

class Executable {
 public:
  virtual ~Executable() = default;
  // Runs the plan; returns one buffer per distinct Output buffer, indexed like Plan::buffers
  // (entries of non-output buffers, and of outputs written into a donated input, are null).
  virtual std::vector<BufferPtr> run(const std::vector<RunInput>& inputs, RunStats* stats) = 0;
  // Runs a symbolic plan (Plan::sym, lowering/generalize.h) for the symbol values `symbols`, one
  // per symbol. Only executables of backends whose symbolic_sizes() is true are given symbolic
  // plans; a static plan takes no symbols.
  virtual std::vector<BufferPtr> run_symbolic(const std::vector<RunInput>& inputs, RunStats* stats,
                                              std::span<const int64_t> symbols) {
    if (!symbols.empty())
      fail(ErrorKind::NotImplemented, "not implemented: symbolic sizes on this backend");
    return run(inputs, stats);
  }
  virtual int num_kernels() const = 0;
  // Generated source of each kernel (LLVM IR, CUDA C), for lt.debug.kernel_sources and dumps.
  virtual std::vector<std::string> kernel_sources() const { return {}; }
};

class Backend {
 public:
  virtual ~Backend() = default;
  virtual std::string name() const = 0;
  // Whether the backend's buffers are host memory (the CPU backend and the reference interpreter):
  // such backends read each other's buffers directly, and DLPack exports them as host data.
  virtual bool host_memory() const { return false; }
  virtual BufferPtr allocate(size_t bytes) = 0;
  // `bytes` of `parent` from `offset` on, sharing its memory and keeping it alive (a graph output
  // that is a view of another's buffer, Plan::output_offsets). Not runtime_owned: nothing is ever
  // written into it in place. Host memory by default; a device backend gives its own kind.
  virtual BufferPtr sub_buffer(const BufferPtr& parent, size_t offset, size_t bytes);
  virtual void copy_from_host(Buffer& dst, const void* src, size_t bytes) = 0;
  virtual void copy_to_host(void* dst, const Buffer& src, size_t bytes) = 0;
  // Starts copying the first `bytes` of src to the host after the work issued so far, without
  // waiting; the function returned waits for that copy alone (not for later work) and writes the
  // bytes to its argument. A sync's index checks are read this way on a device, so the host can
  // trace the next step while the GPU runs this one. The default copies at once.
  virtual std::function<void(void*)> copy_to_host_async(const Buffer& src, size_t bytes) {
    auto copy = std::make_shared<std::vector<unsigned char>>(bytes);
    copy_to_host(copy->data(), src, bytes);
    return [copy](void* dst) { std::memcpy(dst, copy->data(), copy->size()); };
  }
  virtual std::unique_ptr<Executable> compile(const Plan& plan) = 0;
  // Whether compile() takes symbolic plans (Plan::sym): kernels whose sizes are read at run time,
  // so one executable serves every binding of the plan's size symbols (issue 30). Backends
  // without it get static plans only: the runtime pins every size for them.
  virtual bool symbolic_sizes() const { return false; }
  // The library steps compile() can run (lowering emits only those): GEMM dtypes for matmul.
  virtual LowerOptions lower_options() const { return {}; }
  // Waits until every run and copy issued so far has finished (CUDA runs are asynchronous; host
  // backends finish before run() returns). Device faults of earlier runs are reported here.
  virtual void synchronize() {}
  // A buffer over device memory that something else owns (a DLPack producer's tensor on this
  // backend's device), used without a copy; `release` runs once no tensor uses it. nullptr when
  // this backend cannot hold foreign memory.
  virtual BufferPtr wrap_external(void* data, size_t bytes, std::function<void()> release) {
    return nullptr;
  }

  // On-disk compile cache (runtime/disk_cache.h). Optional: the defaults say "not cacheable".
  // Identifies the code compile() generates (CPU name + features, GPU architecture + toolkit);
  // part of the cache key, so an entry is only loaded where its code runs. Empty: never cached.
  virtual std::string cache_target() { return {}; }
  // This backend's part of a cache entry for an executable that its compile() returned (object
  // code, cubins, ...); false when this executable cannot be stored.
  virtual bool serialize(const Executable& exe, std::string* out) { return false; }
  // Rebuilds an executable for `plan` from bytes that serialize() wrote, compiling nothing.
  // Throws lt::Error when the bytes do not fit the plan (the runtime then compiles afresh).
  virtual std::unique_ptr<Executable> load(const Plan& plan, std::string_view bytes) {
    return nullptr;
  }
};

// Checks each input's donated_output against the plan (its buffers and Plan::donations: only
// pairs whose kernels were generated for it may share memory) and the input's size; returns, per
// plan buffer, the graph input whose memory an Output is written into this run, or -1. Throws
// lt::Error naming `who` on a pair the plan does not allow.
std::vector<int> donated_outputs(const std::vector<BufferSpec>& buffers,
                                 const std::vector<Donation>& donations,
                                 const std::vector<RunInput>& inputs, const char* who);

// False when LT_GEMM=0: backends then offer no library GEMM and every matmul stays a loop kernel
// (to compare the two paths, or to rule out a library bug). Read once.
bool gemm_enabled();
// Whether lowering keeps convolution data NHWC (LowerOptions::conv_channels_last): LT_CHANNELS_LAST
// =1 or =0 at start, else the backend's default (off for now on both: see cuda_backend.cc). Read
// once.
bool conv_channels_last(bool backend_default);
// Whether float32 GEMMs may round their inputs to TF32 on tensor cores (PyTorch's
// torch.backends.cuda.matmul.allow_tf32, default off): LT_ALLOW_TF32=1 at start, or set at run
// time (lt.backends.cuda.matmul.allow_tf32). Read at each GEMM launch.
bool matmul_allow_tf32();
void set_matmul_allow_tf32(bool on);
// Whether float32 convolutions may use TF32 (PyTorch's torch.backends.cudnn.allow_tf32, default
// ON as in PyTorch): LT_CONV_ALLOW_TF32=0 at start, or set at run time
// (lt.backends.cudnn.allow_tf32). Read at each cuDNN convolution launch.
bool conv_allow_tf32();
void set_conv_allow_tf32(bool on);
// Whether the CPU backend runs its parallel kernels on the process's OpenMP threads (the runtime
// oneDNN's GEMMs run on) rather than on its own pool. On when PyTorch loaded its OpenMP runtime
// first (lazytensor/__init__.py): that runtime's threads then spin for milliseconds after every
// GEMM (PyTorch's default wait policy, which lazytensor can no longer change), and two spinning
// pools on the same cores delay each other's chunks by scheduler slices. One team, as PyTorch's
// own kernels and Inductor's use, has no one to contend with. LT_SHARE_OPENMP=0/1 at start.
bool cpu_share_openmp_threads();
void set_cpu_share_openmp_threads(bool on);

// Registered backends ("reference", "cpu", "cuda"); throws a clear lt::Error when unavailable.
Backend& get_backend(const std::string& name);
bool backend_available(const std::string& name);
// cuDNN's version (e.g. 91000) where the CUDA backend loads it for convolutions, else 0 with
// *why saying why (no CUDA backend in this build, library not found, ...).
size_t cuda_conv_library_version(std::string* why);
// get_backend(name).host_memory(), without creating a backend that does not exist yet (one that
// holds no buffers cannot be asked about them).
bool backend_host_memory(const std::string& name);

}  // namespace lt
