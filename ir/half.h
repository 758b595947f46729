// float16 / bfloat16 bit conversions (round to nearest even) and loads/stores of any dtype as
// double or int64. Shared by the reference interpreter, the runtime and the bindings.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "ir/dtype.h"

namespace lt {

inline uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

inline uint16_t float_to_bfloat16(float f) {
  uint32_t u = float_bits(f);
  if (std::isnan(f)) return static_cast<uint16_t>((u >> 16) | 0x40);  // keep it a quiet NaN
  u += 0x7fff + ((u >> 16) & 1);
  return static_cast<uint16_t>(u >> 16);
}
inline float bfloat16_to_float(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

inline uint16_t float_to_half(float f) {
  uint32_t u = float_bits(f);
  uint32_t sign = (u >> 16) & 0x8000;
  uint32_t exp = (u >> 23) & 0xff;
  uint32_t man = u & 0x7fffff;
  if (exp == 0xff) return static_cast<uint16_t>(sign | 0x7c00 | (man ? 0x200 : 0));  // inf / NaN
  int32_t e = static_cast<int32_t>(exp) - 127 + 15;
  if (e >= 31) return static_cast<uint16_t>(sign | 0x7c00);  // overflow -> inf
  if (e <= 0) {
    if (e < -10) return static_cast<uint16_t>(sign);  // underflow -> signed zero
    man |= 0x800000;                                  // subnormal: shift in the implicit bit
    uint32_t shift = static_cast<uint32_t>(14 - e);
    uint32_t half = man >> shift;
    uint32_t rem = man & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rem > mid || (rem == mid && (half & 1))) ++half;
    return static_cast<uint16_t>(sign | half);
  }
  uint32_t half = sign | (static_cast<uint32_t>(e) << 10) | (man >> 13);
  uint32_t rem = man & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (half & 1)))
    ++half;  // may carry into the exponent: correct
  return static_cast<uint16_t>(half);
}

inline float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  if (exp == 0x1f) return bits_float(sign | 0x7f800000 | (man << 13));
  if (exp == 0) {
    if (!man) return bits_float(sign);
    float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  return bits_float(sign | ((exp + 112) << 23) | (man << 13));
}

inline double load_as_double(const void* p, DType t) {
  switch (t) {
    case DType::Bool:
      return *static_cast<const uint8_t*>(p) != 0;
    case DType::UInt8:
      return *static_cast<const uint8_t*>(p);
    case DType::Int8:
      return *static_cast<const int8_t*>(p);
    case DType::Int32:
      return *static_cast<const int32_t*>(p);
    case DType::Int64:
      return static_cast<double>(*static_cast<const int64_t*>(p));
    case DType::Float16:
      return half_to_float(*static_cast<const uint16_t*>(p));
    case DType::BFloat16:
      return bfloat16_to_float(*static_cast<const uint16_t*>(p));
    case DType::Float32:
      return *static_cast<const float*>(p);
    case DType::Float64:
      return *static_cast<const double*>(p);
  }
  return 0;
}

// Float -> integer conversion: truncates toward zero; NaN, infinities and values outside the int64
// range give 0 instead of undefined behaviour (the CUDA backend's lt_f2i does the same).
inline int64_t double_to_int64(double v) {
  // The cast truncates; the range test on v equals one on trunc(v) (a double past 2^53 is whole).
  return (v >= -9.2e18 && v <= 9.2e18) ? static_cast<int64_t>(v) : 0;  // false for NaN
}

// The value of an integral dtype that an int64 wraps to (two's complement; bool is v != 0).
inline int64_t wrap_to_dtype(int64_t v, DType t) {
  switch (t) {
    case DType::Bool:
      return v != 0;
    case DType::UInt8:
      return static_cast<uint8_t>(v);
    case DType::Int8:
      return static_cast<int8_t>(v);
    case DType::Int32:
      return static_cast<int32_t>(v);
    default:
      return v;
  }
}

// The nearest value of a floating dtype (float16/bfloat16 round through float32, as every backend
// does); integral dtypes give the truncated, wrapped value (bool: v != 0).
inline double round_to_dtype(double v, DType t) {
  switch (t) {
    case DType::Float64:
      return v;
    case DType::Float32:
      return static_cast<float>(v);
    case DType::Float16:
      return half_to_float(float_to_half(static_cast<float>(v)));
    case DType::BFloat16:
      return bfloat16_to_float(float_to_bfloat16(static_cast<float>(v)));
    case DType::Bool:
      return v != 0;
    default:
      return static_cast<double>(wrap_to_dtype(double_to_int64(v), t));
  }
}

inline int64_t load_as_int(const void* p, DType t) {
  switch (t) {
    case DType::Bool:
      return *static_cast<const uint8_t*>(p) != 0;
    case DType::UInt8:
      return *static_cast<const uint8_t*>(p);
    case DType::Int8:
      return *static_cast<const int8_t*>(p);
    case DType::Int32:
      return *static_cast<const int32_t*>(p);
    case DType::Int64:
      return *static_cast<const int64_t*>(p);
    default:
      return double_to_int64(load_as_double(p, t));
  }
}

inline void store_from_int(void* p, DType t, int64_t v) {
  switch (t) {
    case DType::Bool:
      *static_cast<uint8_t*>(p) = v != 0;
      break;
    case DType::UInt8:
      *static_cast<uint8_t*>(p) = static_cast<uint8_t>(v);
      break;
    case DType::Int8:
      *static_cast<int8_t*>(p) = static_cast<int8_t>(v);
      break;
    case DType::Int32:
      *static_cast<int32_t*>(p) = static_cast<int32_t>(v);
      break;
    case DType::Int64:
      *static_cast<int64_t*>(p) = v;
      break;
    case DType::Float16:
      *static_cast<uint16_t*>(p) = float_to_half(static_cast<float>(v));
      break;
    case DType::BFloat16:
      *static_cast<uint16_t*>(p) = float_to_bfloat16(static_cast<float>(v));
      break;
    case DType::Float32:
      *static_cast<float*>(p) = static_cast<float>(v);
      break;
    case DType::Float64:
      *static_cast<double*>(p) = static_cast<double>(v);
      break;
  }
}

// Floating dtypes round to nearest even (float16/bfloat16 through float32); integral dtypes take
// double_to_int64 wrapped to their width; bool is v != 0 (so 0.5 and NaN are true).
inline void store_from_double(void* p, DType t, double v) {
  switch (t) {
    case DType::Bool:
      *static_cast<uint8_t*>(p) = v != 0;
      break;
    case DType::Float16:
      *static_cast<uint16_t*>(p) = float_to_half(static_cast<float>(v));
      break;
    case DType::BFloat16:
      *static_cast<uint16_t*>(p) = float_to_bfloat16(static_cast<float>(v));
      break;
    case DType::Float32:
      *static_cast<float*>(p) = static_cast<float>(v);
      break;
    case DType::Float64:
      *static_cast<double*>(p) = v;
      break;
    default:
      store_from_int(p, t, double_to_int64(v));
  }
}

}  // namespace lt
