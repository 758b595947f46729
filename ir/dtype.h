// Element types and PyTorch's type-promotion rules.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

namespace lt {

enum class DType : uint8_t { Bool, UInt8, Int8, Int32, Int64, Float16, BFloat16, Float32, Float64 };
constexpr int kNumDTypes = 9;

size_t dtype_size(DType t);
std::string_view dtype_name(DType t);
DType dtype_from_name(std::string_view name);  // throws lt::Error on unknown names
bool is_floating(DType t);
bool is_integral(DType t);  // including bool
inline bool is_bool(DType t) { return t == DType::Bool; }
inline bool is_half(DType t) { return t == DType::Float16 || t == DType::BFloat16; }
// The dtype 16-bit floats compute in (PyTorch's opmath type): float32; others their own.
inline DType opmath_dtype(DType t) { return is_half(t) ? DType::Float32 : t; }
// Whether every value of `from` is a value of `to` (a cast there and back returns it): a 16-bit
// float in float32 or float64, float32 in float64; integers in wider signed integers and in floats
// whose significand holds them; bool in every dtype.
bool widens_exactly(DType from, DType to);

// Promotion of two tensor operands (torch.promote_types).
DType promote(DType a, DType b);
// Category of a Python scalar operand: bool < integer < floating.
enum class ScalarKind { Bool, Int, Float };
// Result dtype of `tensor op scalar` (a wrapped number only raises the category, never the width).
DType promote_with_scalar(DType t, ScalarKind s);
DType default_float();

}  // namespace lt
