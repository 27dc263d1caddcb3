// dtype names, sizes, promotion and float16 conversion.
#include "aether/core/dtype.h"

#include <ostream>

#include "aether/core/error.h"

namespace aether {

const char* dtype_name(DType t) {
  switch (t) {
#define AETHER_X(name, str, type, bytes) \
  case DType::name: return str;
    AETHER_DTYPES(AETHER_X)
#undef AETHER_X
  }
  return "?";
}

int dtype_size(DType t) {
  switch (t) {
#define AETHER_X(name, str, type, bytes) \
  case DType::name: return bytes;
    AETHER_DTYPES(AETHER_X)
#undef AETHER_X
  }
  return 0;
}

bool is_float(DType t) {
  return t == DType::float32 || t == DType::float16 || t == DType::bfloat16 || t == DType::float64;
}
bool is_int(DType t) { return t == DType::int32 || t == DType::int64 || t == DType::uint8; }

DType dtype_from_name(const std::string& name) {
#define AETHER_X(n, str, type, bytes) \
  if (name == str) return DType::n;
  AETHER_DTYPES(AETHER_X)
#undef AETHER_X
  if (name == "f32") return DType::float32;
  if (name == "f16" || name == "half") return DType::float16;
  if (name == "bf16") return DType::bfloat16;
  if (name == "f64" || name == "double") return DType::float64;
  throw Error("dtype: unknown dtype name '" + name +
                  "' (expected float32, float16, bfloat16, float64, int32, int64, uint8 or bool)",
              ErrorKind::type);
}

std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

namespace {
// Rank in the promotion lattice within a kind; higher wins.
int float_rank(DType t) {
  switch (t) {
    case DType::float16: return 1;
    case DType::bfloat16: return 1;
    case DType::float32: return 2;
    case DType::float64: return 3;
    case DType::int32:
    case DType::int64:
    case DType::uint8:
    case DType::boolean: return 0;
  }
  return 0;
}
int int_rank(DType t) {
  switch (t) {
    case DType::uint8: return 1;
    case DType::int32: return 2;
    case DType::int64: return 3;
    case DType::float16:
    case DType::bfloat16:
    case DType::float32:
    case DType::float64:
    case DType::boolean: return 0;
  }
  return 0;
}
}  // namespace

DType promote(DType a, DType b) {
  if (a == b) return a;
  if (a == DType::boolean) return b;
  if (b == DType::boolean) return a;
  const bool fa = is_float(a), fb = is_float(b);
  if (fa && !fb) return a;
  if (fb && !fa) return b;
  if (fa && fb) {
    const int ra = float_rank(a), rb = float_rank(b);
    if (ra == rb) return DType::float32;  // float16 with bfloat16
    return ra > rb ? a : b;
  }
  return int_rank(a) > int_rank(b) ? a : b;
}

float half_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  uint32_t u;
  if (exp == 0) {
    if (mant == 0) {
      u = sign;
    } else {  // subnormal: normalise
      exp = 127 - 15 + 1;
      while ((mant & 0x400u) == 0) {
        mant <<= 1;
        --exp;
      }
      mant &= 0x3ffu;
      u = sign | (exp << 23) | (mant << 13);
    }
  } else if (exp == 0x1f) {
    u = sign | 0x7f800000u | (mant << 13) | (mant ? 0x400000u : 0u);  // inf, or NaN made quiet (as F16C)
  } else {
    u = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t float_to_half(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t absu = u & 0x7fffffffu;
  if (absu > 0x7f800000u) return uint16_t(sign | 0x7e00u);   // NaN
  if (absu >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // overflow (>= 65520) -> inf
  if (absu < 0x38800000u) {                                  // below the smallest normal half
    if (absu < 0x33000000u) return sign;                     // < 2^-25 rounds to zero
    const uint32_t exp = absu >> 23;
    const uint32_t mant = (absu & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exp;  // 14..24
    uint32_t h = mant >> shift;
    const uint32_t rem = mant & ((1u << shift) - 1);
    const uint32_t halfway = 1u << (shift - 1);
    if (rem > halfway || (rem == halfway && (h & 1u))) ++h;
    return uint16_t(sign | h);
  }
  uint32_t h = ((absu >> 13) - ((127 - 15) << 10));
  const uint32_t rem = absu & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return uint16_t(sign | h);
}

}  // namespace aether
