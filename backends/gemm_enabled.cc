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

}  // namespace lt
