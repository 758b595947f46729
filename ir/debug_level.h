// LT_DEBUG's level (0 when unset), read once per process: the executor, the disk cache, donation
// and the CUDA graph replays print their diagnostics only above 0 (some only at 2). In ir/, the
// lowest layer, so that every layer may read it.
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
