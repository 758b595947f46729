// LT_DEBUG's level (0 when unset), read once per process: the executor and the disk cache print
// their one-line diagnostics only above 0.
#pragma once
#include <cstdlib>

namespace lt {

inline int debug_level() {
  static const int level = [] {
    const char* e = std::getenv("LT_DEBUG");
    return e ? std::atoi(e) : 0;
  }();
  return level;
}

}  // namespace lt
