// Settings read from the environment, each a clear lt::Error naming the variable when its value
// is not one it takes. In ir/, the lowest layer (as debug_level.h), so that every layer may read
// one.
//
// env_switch: a two-way switch: unset or `off` is false, `on` is true, anything else an error
// naming both accepted values.
#pragma once
#include <cstdlib>
#include <string>

#include "ir/error.h"

namespace lt {

inline bool env_switch(const char* name, const char* off, const char* on) {
  const char* e = std::getenv(name);
  const std::string v = e ? e : "";
  if (v.empty() || v == off) return false;
  if (v == on) return true;
  fail(ErrorKind::Value, name, "=", v, ": expected ", on, " or ", off, " (or unset)");
}

// An integer setting: unset or empty is `fallback`, a whole number in [lo, hi] is taken, anything
// else is an error naming the range.
inline int env_int(const char* name, int lo, int hi, int fallback) {
  const char* e = std::getenv(name);
  if (!e || !*e) return fallback;
  char* end = nullptr;
  const long v = std::strtol(e, &end, 10);
  if (*end || v < lo || v > hi)
    fail(ErrorKind::Value, name, "=", e, ": expected an integer in [", lo, ", ", hi, "]");
  return static_cast<int>(v);
}

}  // namespace lt
