#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backends/backend.h"

namespace lt {

bool gemm_enabled() {
  static const bool on = [] {
    const char* e = std::getenv("LT_GEMM");
    return !(e && (std::strcmp(e, "0") == 0 || std::strcmp(e, "off") == 0));
  }();
  return on;
}

namespace {
std::atomic<bool>& tf32_setting() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("LT_ALLOW_TF32");
    return e && std::strcmp(e, "1") == 0;
  }()};
  return on;
}
}  // namespace

bool matmul_allow_tf32() { return tf32_setting().load(std::memory_order_relaxed); }
void set_matmul_allow_tf32(bool on) { tf32_setting().store(on, std::memory_order_relaxed); }

}  // namespace lt
