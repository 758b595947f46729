// Name -> backend. Backends are created on first use and live for the process.
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>

#include "backends/backend.h"
#include "backends/reference/reference_backend.h"
#include "ir/error.h"
#include "runtime/device.h"
#ifdef LT_HAVE_LLVM
#include "backends/cpu/cpu_backend.h"
#endif
#ifdef LT_HAVE_CUDA
#include "backends/cuda/cuda_backend.h"
#include "backends/cuda/cudnn_conv.h"
#include "backends/cuda/driver_api.h"
#endif

namespace lt {

bool backend_available(const std::string& name) {
  // Without LLVM "cpu" still works: it runs on the reference interpreter (DESIGN.md).
  if (name == "reference" || name == "cpu") return true;
#ifdef LT_HAVE_CUDA
  // Loads libcuda on first use; false (never a throw) without a driver or a device.
  if (const int n = cuda_ordinal(name); n >= 0)
    return cuda_device_available() && n < cuda_driver().device_count;
#endif
  return false;
}

size_t cuda_conv_library_version(std::string* why) {
#ifdef LT_HAVE_CUDA
  if (cudnn_available()) return cudnn_version();
  *why = cudnn_error();
#else
  *why = "this build of lazytensor has no CUDA backend";
#endif
  return 0;
}

namespace {
// The backends made so far, each created on first use and kept for the process.
struct Backends {
  std::mutex mu;
  std::unique_ptr<Backend> ref, cpu;
  std::map<int, std::unique_ptr<Backend>> cuda;  // by GPU ordinal
};
Backends& backends() {
  static Backends b;
  return b;
}
}  // namespace

bool backend_host_memory(const std::string& name) {
  Backends& b = backends();
  Backend* made = nullptr;
  {
    std::lock_guard<std::mutex> g(b.mu);
    made = name == "reference" ? b.ref.get()
           : name == "cpu"     ? (b.cpu ? b.cpu.get() : nullptr)
                               : nullptr;
    if (auto it = b.cuda.find(cuda_ordinal(name)); it != b.cuda.end()) made = it->second.get();
#ifndef LT_HAVE_LLVM
    if (name == "cpu") made = b.ref.get();  // the cpu backend is the interpreter then
#endif
  }
  if (made) return made->host_memory();
  // Not made yet: ask a fresh one only where that is cheap (the interpreter holds no state).
  return name == "reference" || name == "cpu" ? get_backend("reference").host_memory() : false;
}

Backend& get_backend(const std::string& name) {
  Backends& b = backends();
  std::lock_guard<std::mutex> g(b.mu);
  std::unique_ptr<Backend>& ref = b.ref;
  if (name == "reference") {
    if (!ref) ref = make_reference_backend();
    return *ref;
  }
  if (name == "cpu") {
#ifdef LT_HAVE_LLVM
    if (!b.cpu) b.cpu = make_cpu_backend();
    return *b.cpu;
#else
    if (!ref) {
      // Said only under LT_DEBUG: stderr belongs to the CLI's one-line errors otherwise.
      if (const char* d = std::getenv("LT_DEBUG"); d && *d && *d != '0')
        std::fprintf(stderr,
                     "[lazytensor] warning: built without LLVM; the cpu backend runs on the "
                     "reference interpreter (slow)\n");
      ref = make_reference_backend();
    }
    return *ref;
#endif
  }
  if (const int ordinal = cuda_ordinal(name); ordinal >= 0) {
#ifdef LT_HAVE_CUDA
    auto it = b.cuda.find(ordinal);
    if (it == b.cuda.end()) {
      if (!cuda_device_available()) {
        const std::string& why = cuda_driver().error;
        fail(ErrorKind::Runtime,
             "no CUDA device: ", why.empty() ? std::string("the driver reports none") : why,
             " (use device 'cpu' or 'lazy:cpu')");
      }
      if (ordinal >= cuda_driver().device_count)
        fail(ErrorKind::Runtime, "no CUDA device ", ordinal, " ('", name,
             "'): ", cuda_driver().device_count,
             " device(s) visible (CUDA_VISIBLE_DEVICES selects them)");
      // make_cuda_backend throws a clear lt::Error on failure, before anything is kept.
      it = b.cuda.emplace(ordinal, make_cuda_backend(ordinal)).first;
    }
    return *it->second;
#else
    fail(ErrorKind::Runtime,
         "no CUDA device: this build of lazytensor has no CUDA backend (configure with "
         "-DLT_WITH_CUDA=ON where the CUDA toolkit is installed)");
#endif
  }
  fail(ErrorKind::Runtime, "unknown backend '", name,
       "' (expected reference, cpu, cuda or cuda:N)");
}

}  // namespace lt
