// Introspection of the CPU backend's process-wide JIT (no LLVM types, so tests and the runtime may
// include it).
#pragma once
#include <cstdint>
#include <string>

namespace lt::cpu {

struct JitStats {
  int64_t live_dylibs = 0;     // compiled plans whose code is still loaded
  int64_t created_dylibs = 0;  // compiled plans ever loaded
};
JitStats jit_stats();

// "<cpu name> <triple>" of the code the JIT generates, e.g. "skylake-avx512 x86_64-pc-linux-gnu".
std::string jit_target_description();

}  // namespace lt::cpu
