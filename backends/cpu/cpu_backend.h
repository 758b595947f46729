// The CPU backend: loop IR -> LLVM IR (IRBuilder) -> O3 for the host CPU -> ORC LLJIT, run on a
// thread pool over the outer loop.
#pragma once
#include <memory>

#include "backends/backend.h"

namespace lt {

std::unique_ptr<Backend> make_cpu_backend();

}  // namespace lt
