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

bool conv_channels_last(bool backend_default) {
  static const int setting = [] {
    const char* e = std::getenv("LT_CHANNELS_LAST");
    return !e || !*e ? -1 : std::strcmp(e, "0") == 0 ? 0 : 1;
  }();
  return setting < 0 ? backend_default : setting == 1;
}

namespace {
std::atomic<bool>& tf32_setting() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("LT_ALLOW_TF32");
    return e && std::strcmp(e, "1") == 0;
  }()};
  return on;
}
std::atomic<bool>& conv_tf32_setting() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("LT_CONV_ALLOW_TF32");
    return !(e && std::strcmp(e, "0") == 0);
  }()};
  return on;
}
std::atomic<bool>& share_openmp_setting() {
  static std::atomic<bool> on{[] {
    const char* e = std::getenv("LT_SHARE_OPENMP");
    return e && std::strcmp(e, "1") == 0;
  }()};
  return on;
}
}  // namespace

bool cpu_share_openmp_threads() { return share_openmp_setting().load(std::memory_order_relaxed); }
void set_cpu_share_openmp_threads(bool on) {
  // LT_SHARE_OPENMP=0 keeps lazytensor's own pool whatever the bindings ask for.
  const char* e = std::getenv("LT_SHARE_OPENMP");
  if (e && std::strcmp(e, "0") == 0) on = false;
  share_openmp_setting().store(on, std::memory_order_relaxed);
}

bool matmul_allow_tf32() { return tf32_setting().load(std::memory_order_relaxed); }
void set_matmul_allow_tf32(bool on) { tf32_setting().store(on, std::memory_order_relaxed); }
bool conv_allow_tf32() { return conv_tf32_setting().load(std::memory_order_relaxed); }
void set_conv_allow_tf32(bool on) { conv_tf32_setting().store(on, std::memory_order_relaxed); }

}  // namespace lt
