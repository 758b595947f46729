#include "ir/dtype.h"

#include "ir/error.h"

namespace lt {

size_t dtype_size(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8:
      return 1;
    case DType::Float16:
    case DType::BFloat16:
      return 2;
    case DType::Int32:
    case DType::Float32:
      return 4;
    case DType::Int64:
    case DType::Float64:
      return 8;
  }
  return 0;
}

std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::UInt8:
      return "uint8";
    case DType::Int8:
      return "int8";
    case DType::Int32:
      return "int32";
    case DType::Int64:
      return "int64";
    case DType::Float16:
      return "float16";
    case DType::BFloat16:
      return "bfloat16";
    case DType::Float32:
      return "float32";
    case DType::Float64:
      return "float64";
  }
  return "?";
}

DType dtype_from_name(std::string_view n) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (dtype_name(DType(i)) == n) return DType(i);
  if (n == "float") return DType::Float32;
  if (n == "double") return DType::Float64;
  if (n == "half") return DType::Float16;
  if (n == "long") return DType::Int64;
  if (n == "int") return DType::Int32;
  fail(ErrorKind::Type, "unknown dtype '", n, "'");
}

bool is_floating(DType t) {
  return t == DType::Float16 || t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
bool is_integral(DType t) { return !is_floating(t); }

bool widens_exactly(DType from, DType to) {
  if (from == to || from == DType::Bool) return true;
  // Significand bits (with the implicit one) of the floats, value bits of the integers.
  auto bits = [](DType t) {
    switch (t) {
      case DType::UInt8:
        return 8;
      case DType::Int8:
        return 7;
      case DType::Int32:
        return 31;
      case DType::Int64:
        return 63;
      case DType::Float16:
        return 11;
      case DType::BFloat16:
        return 8;
      case DType::Float32:
        return 24;
      case DType::Float64:
        return 53;
      default:
        return 0;
    }
  };
  // float16 has more significand than bfloat16 but less range: neither holds the other.
  if (is_half(from)) return to == DType::Float32 || to == DType::Float64;
  if (is_floating(from)) return from == DType::Float32 && to == DType::Float64;
  if (to == DType::Bool) return false;
  if (is_floating(to)) return bits(from) <= bits(to);
  // Integer to integer: uint8 needs a signed type wider than 8 bits; a signed one a wider signed.
  if (to == DType::UInt8) return false;
  return from == DType::UInt8 ? bits(to) > 8 : bits(from) <= bits(to);
}

DType default_float() { return DType::Float32; }

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (is_bool(a)) return b;
  if (is_bool(b)) return a;
  bool fa = is_floating(a), fb = is_floating(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    // float16 with bfloat16 promotes to float32, as in PyTorch.
    if ((a == DType::Float16 && b == DType::BFloat16) ||
        (a == DType::BFloat16 && b == DType::Float16))
      return DType::Float32;
    return dtype_size(a) >= dtype_size(b) ? a : b;
  }
  // Both integral. uint8 with int8 promotes to int16 in PyTorch; we have no int16, so int32.
  if ((a == DType::UInt8 && b == DType::Int8) || (a == DType::Int8 && b == DType::UInt8))
    return DType::Int32;
  return dtype_size(a) >= dtype_size(b) ? a : b;
}

DType promote_with_scalar(DType t, ScalarKind s) {
  switch (s) {
    case ScalarKind::Bool:
      return t;
    case ScalarKind::Int:
      return is_bool(t) ? DType::Int64 : t;
    case ScalarKind::Float:
      return is_floating(t) ? t : default_float();
  }
  return t;
}

}  // namespace lt
