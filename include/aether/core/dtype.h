// aether/core/dtype.h - element types, their C++ storage types and the promotion table.
//
// dtype      storage            size  kind
// float32    float              4     float
// float16    aether::half       2     float   (IEEE binary16)
// bfloat16   aether::bfloat16   2     float   (upper half of a float32)
// float64    double             8     float   (used for gradient checks)
// int32      int32_t            4     int
// int64      int64_t            8     int
// uint8      uint8_t            1     int
// bool       bool               1     bool
//
// Promotion (promote(a, b), used by every binary and ternary op), in the spirit of NumPy/PyTorch:
//   - equal dtypes give themselves;
//   - bool with anything gives the other;
//   - an int with a float gives the float (int64 + float16 -> float16);
//   - two ints give the wider one; uint8 with a signed int gives the signed one;
//   - two floats give the wider one: float16 + float32 -> float32, float32 + float64 -> float64;
//   - float16 with bfloat16 gives float32 (neither holds the other).
// Python-style scalars (`x * 2.0`) take the tensor's dtype when it is a float, else float32.
#pragma once

#include <cstdint>
#include <cstring>
#include <iosfwd>
#include <string>

namespace aether {

// X(enum name, printed name, storage type, bytes)
#define AETHER_DTYPES(X)                         \
  X(float32, "float32", float, 4)                \
  X(float16, "float16", ::aether::half, 2)       \
  X(bfloat16, "bfloat16", ::aether::bfloat16, 2) \
  X(float64, "float64", double, 8)               \
  X(int32, "int32", int32_t, 4)                  \
  X(int64, "int64", int64_t, 8)                  \
  X(uint8, "uint8", uint8_t, 1)                  \
  X(boolean, "bool", bool, 1)

enum class DType : uint8_t {
#define AETHER_X(name, str, type, bytes) name,
  AETHER_DTYPES(AETHER_X)
#undef AETHER_X
};
constexpr int kNumDTypes = 8;

const char* dtype_name(DType t);
int dtype_size(DType t);
bool is_float(DType t);
bool is_int(DType t);  // integer types, not bool
// float16 or bfloat16: stored in 16 bits, computed in float32 (the types mixed precision uses).
inline bool is_16bit_float(DType t) { return t == DType::float16 || t == DType::bfloat16; }
DType promote(DType a, DType b);
DType dtype_from_name(const std::string& name);  // throws aether::Error for an unknown name
std::ostream& operator<<(std::ostream& os, DType t);

// ---- 16-bit float storage types: conversion only; arithmetic happens in float -------------------
float half_to_float(uint16_t h);
uint16_t float_to_half(float f);  // round to nearest even, overflow to inf, NaN kept
inline float bf16_to_float(uint16_t b) {
  uint32_t u = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t float_to_bf16(float f) {  // round to nearest even, NaN kept quiet
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

// double -> float rounded to odd (truncate, then set the last bit when inexact). Rounding that
// float once more to float16/bfloat16 (far fewer bits) then equals rounding the double directly;
// plain double -> float -> half would round twice and can miss a tie by 2^-40.
inline float float_round_odd(double v) {
  float f = float(v);
  if (v != v || double(f) == v || !(f - f == 0.0f)) return f;  // NaN, exact or overflow
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((f < 0 ? -double(f) : double(f)) > (v < 0 ? -v : v)) --u;  // toward zero
  u |= 1u;
  std::memcpy(&f, &u, 4);
  return f;
}

struct half {
  uint16_t bits = 0;
  half() = default;
  half(float f) : bits(float_to_half(f)) {}  // NOLINT: implicit by design, like a float
  operator float() const { return half_to_float(bits); }
};
struct bfloat16 {
  uint16_t bits = 0;
  bfloat16() = default;
  bfloat16(float f) : bits(float_to_bf16(f)) {}  // NOLINT
  operator float() const { return bf16_to_float(bits); }
};
static_assert(sizeof(half) == 2 && sizeof(bfloat16) == 2);

// Maps a C++ type to its dtype: dtype_of<float>() == DType::float32.
template <typename T>
constexpr DType dtype_of();
#define AETHER_X(name, str, type, bytes) \
  template <>                            \
  constexpr DType dtype_of<type>() {     \
    return DType::name;                  \
  }
AETHER_DTYPES(AETHER_X)
#undef AETHER_X

// Calls f(T{}) with T the storage type of `t`: dispatch_dtype(t, [&](auto tag) { using T = decltype(tag); ...
// }).
template <typename F>
decltype(auto) dispatch_dtype(DType t, F&& f) {
  switch (t) {
#define AETHER_X(name, str, type, bytes) \
  case DType::name: return f(type{});
    AETHER_DTYPES(AETHER_X)
#undef AETHER_X
  }
  return f(float{});  // unreachable: every enumerator is handled above
}

}  // namespace aether
