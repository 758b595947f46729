// A two-way switch read from the environment: unset or `off` is false, `on` is true, anything
// else an lt::Error naming the variable and both accepted values. In ir/, the lowest layer (as
// debug_level.h), so that every layer may read one.
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

}  // namespace lt
