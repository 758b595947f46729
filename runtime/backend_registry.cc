// Name -> backend. Backends are created on first use and live for the process.
#include <mutex>

#include "backends/backend.h"
#include "backends/reference/reference_backend.h"
#include "ir/error.h"
#ifdef LT_HAVE_LLVM
#include "backends/cpu/cpu_backend.h"
#endif

namespace lt {

bool backend_available(const std::string& name) {
  if (name == "reference") return true;
#ifdef LT_HAVE_LLVM
  if (name == "cpu") return true;
#endif
  return false;
}

Backend& get_backend(const std::string& name) {
  static std::mutex mu;
  static std::unique_ptr<Backend> ref, cpu;
  std::lock_guard<std::mutex> g(mu);
  if (name == "reference") {
    if (!ref) ref = make_reference_backend();
    return *ref;
  }
  if (name == "cpu") {
#ifdef LT_HAVE_LLVM
    if (!cpu) cpu = make_cpu_backend();
    return *cpu;
#else
    // Without LLVM the CPU runs on the reference interpreter (DESIGN.md); warned once by the runtime.
    if (!ref) ref = make_reference_backend();
    return *ref;
#endif
  }
  if (name == "cuda")
    fail(ErrorKind::Runtime, "not implemented: the cuda backend is not built yet (no CUDA device support in this build)");
  fail(ErrorKind::Runtime, "unknown backend '", name, "' (expected reference, cpu or cuda)");
}

}  // namespace lt
