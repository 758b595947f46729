// How a timeout reads in messages ("3 s", "0.25 s"), the same everywhere in distributed/.
#pragma once
#include <chrono>
#include <cstdio>
#include <string>

namespace lt::dist {

using Millis = std::chrono::milliseconds;

inline std::string seconds_text(Millis t) {
  char buf[48];
  if (t.count() % 1000 == 0)
    std::snprintf(buf, sizeof(buf), "%lld s", static_cast<long long>(t.count() / 1000));
  else
    std::snprintf(buf, sizeof(buf), "%g s", static_cast<double>(t.count()) / 1000.0);
  return buf;
}

}  // namespace lt::dist
