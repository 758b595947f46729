// LLVM module -> optimized machine code in the process-wide ORC LLJIT. Internal to backends/cpu.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "backends/cpu/cpu_jit.h"

namespace llvm {
class Module;
namespace orc {
class JITDylib;
}
}  // namespace llvm

namespace lt::cpu {

using KernelFn = void (*)(void** args, int64_t begin, int64_t end);

// The code of one compiled plan: its own JITDylib, removed (code freed) on destruction.
class JitCode {
 public:
  explicit JitCode(llvm::orc::JITDylib* dylib) : dylib_(dylib) {}
  ~JitCode();
  JitCode(const JitCode&) = delete;
  JitCode& operator=(const JitCode&) = delete;
  const std::vector<KernelFn>& functions() const { return fns_; }
  void set_functions(std::vector<KernelFn> fns) { fns_ = std::move(fns); }

 private:
  llvm::orc::JITDylib* dylib_;
  std::vector<KernelFn> fns_;
};

struct JitTimings {
  double optimize_s = 0, codegen_s = 0, link_s = 0;
};

// Sets the module's triple and data layout to the host's.
void configure_for_host(llvm::Module& m);

// Verifies `m`, runs the O3 pipeline for the host CPU, prints the optimized IR of each function
// (or alias) in `names` into (*sources)[i] and emits an object file. Modules in separate
// LLVMContexts may be compiled on several threads at once. LLVM failures become lt::Error.
std::string jit_compile_object(llvm::Module& m, const std::vector<std::string>& names,
                               std::vector<std::string>* sources, JitTimings* timings);
// Links object files (from jit_compile_object, in this or an earlier process on the same target)
// into one fresh JITDylib; functions()[i] is `names[i]`. A malformed object or a missing symbol
// becomes lt::Error.
std::unique_ptr<JitCode> jit_load_objects(const std::vector<std::string>& objects,
                                          const std::vector<std::string>& names);

// Everything the object code depends on: triple, CPU name, CPU features, LLVM version.
std::string jit_cache_target();

// Whether the CPU the JIT compiles for has an LLVM target feature ("avx2", "avx512f", ...): code
// that emits target-specific intrinsics asks this, so it agrees with the target machine.
bool jit_target_has(const char* feature);

}  // namespace lt::cpu
