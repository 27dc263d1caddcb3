// dtype tests: names and sizes, the promotion table, float16/bfloat16 conversions and casts
// between every pair of dtypes. Expected values are computed here independently of the library
// (exact long double arithmetic, a hand-written promotion table).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <sstream>
#include <vector>

#include "aether/aether.h"
#include "core/half_array.h"

using namespace aether;

namespace {

constexpr DType kAll[] = {DType::float32, DType::float16, DType::bfloat16, DType::float64,
                          DType::int32,   DType::int64,   DType::uint8,    DType::boolean};

// ---- independent references ---------------------------------------------------------------------
// Value of a binary16 bit pattern, from the IEEE definition.
double half_bits_value(uint16_t h) {
  const int sign = (h >> 15) & 1, e = (h >> 10) & 0x1f, m = h & 0x3ff;
  double v;
  if (e == 0) {
    v = std::ldexp(double(m), -24);
  } else if (e == 31) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(1.0 + m / 1024.0, e - 15);
  }
  return sign ? -v : v;
}

// Correctly rounded (nearest even) value of `v` in a binary format with `mant` fraction bits,
// smallest normal exponent `emin` and largest finite value `max`; overflow gives inf.
long double round_ref(long double v, int mant, int emin, long double max) {
  if (std::isnan(v)) return v;
  if (std::isinf(v) || v == 0) return v;
  const long double a = std::fabs(v);
  int ex;
  std::frexp(a, &ex);  // a = f * 2^ex, f in [0.5, 1)
  int e = std::max(ex - 1, emin);
  const long double ulp = std::ldexp(1.0L, e - mant);
  const long double r = std::nearbyint(a / ulp) * ulp;  // default mode: ties to even
  const long double out = r > max ? std::numeric_limits<long double>::infinity() : r;
  return v < 0 ? -out : out;
}
long double round_half_ref(long double v) { return round_ref(v, 10, -14, 65504.0L); }
long double round_bf16_ref(long double v) {
  return round_ref(v, 7, -126, std::ldexp(2.0L - std::ldexp(1.0L, -7), 127));
}

float bits_to_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Expected value of casting `v` (exactly a value of a `src_float` or integer dtype) to `dst`.
long double cast_ref(long double v, bool src_float, DType dst) {
  auto sat = [&](long double lo, long double hi) -> long double {
    if (std::isnan(v)) return 0;
    const long double t = std::trunc(v);
    return (t <= lo ? lo : t >= hi ? hi : t) + 0.0L;  // + 0: integers have no -0
  };
  auto wrap = [&](int bits, bool is_signed) -> long double {
    const uint64_t u = uint64_t(int64_t(v));
    if (bits == 64) return (long double)int64_t(u);
    const uint64_t m = u & ((uint64_t(1) << bits) - 1);
    if (is_signed && (m >> (bits - 1))) return (long double)(int64_t(m) - (int64_t(1) << bits));
    return (long double)m;
  };
  switch (dst) {
    case DType::float64: return (long double)double(v);
    case DType::float32: return (long double)float(v);
    case DType::float16: return round_half_ref(v);
    case DType::bfloat16: return round_bf16_ref(v);
    case DType::boolean: return (std::isnan(v) || v != 0) ? 1 : 0;
    case DType::int32: return src_float ? sat(-2147483648.0L, 2147483647.0L) : wrap(32, true);
    case DType::int64:
      return src_float ? sat((long double)std::numeric_limits<int64_t>::min(),
                             (long double)std::numeric_limits<int64_t>::max())
                       : wrap(64, true);
    case DType::uint8: return src_float ? sat(0, 255) : wrap(8, false);
  }
  return 0;
}

// Is `v` exactly a value of dtype `t`?
bool representable(long double v, DType t) {
  switch (t) {
    case DType::float64: return std::isnan(v) || (long double)double(v) == v;
    case DType::float32: return std::isnan(v) || (long double)float(v) == v;
    case DType::float16: return std::isnan(v) || round_half_ref(v) == v;
    case DType::bfloat16: return std::isnan(v) || round_bf16_ref(v) == v;
    case DType::int32: return v == std::trunc(v) && v >= -2147483648.0L && v <= 2147483647.0L;
    case DType::int64:
      return v == std::trunc(v) && v >= -9223372036854775808.0L && v <= 9223372036854775807.0L;
    case DType::uint8: return v == std::trunc(v) && v >= 0 && v <= 255;
    case DType::boolean: return v == 0 || v == 1;
  }
  return false;
}

// A tensor of dtype t holding `vals` (each representable), written byte by byte here.
Tensor make_exact(const std::vector<long double>& vals, DType t) {
  std::vector<unsigned char> bytes(vals.size() * size_t(dtype_size(t)));
  for (size_t i = 0; i < vals.size(); ++i) {
    unsigned char* p = bytes.data() + i * size_t(dtype_size(t));
    const long double v = vals[i];
    auto put = [&](auto x) { std::memcpy(p, &x, sizeof x); };
    switch (t) {
      case DType::float64: put(double(v)); break;
      case DType::float32: put(float(v)); break;
      case DType::float16: put(float_to_half(float(v))); break;
      case DType::bfloat16: put(float_to_bf16(float(v))); break;
      case DType::int32: put(int32_t(v)); break;
      case DType::int64: put(int64_t(v)); break;
      case DType::uint8: put(uint8_t(v)); break;
      case DType::boolean: put(uint8_t(v != 0)); break;
    }
  }
  return Tensor::from_blob(bytes.data(), {int64_t(vals.size())}, t);
}

// The elements of `t`, read in its own dtype (no cast), as long double.
std::vector<long double> read_exact(const Tensor& t) {
  std::vector<unsigned char> bytes(size_t(t.numel() * dtype_size(t.dtype())));
  t.copy_to(bytes.data(), t.dtype());
  std::vector<long double> out;
  for (int64_t i = 0; i < t.numel(); ++i) {
    const unsigned char* p = bytes.data() + i * dtype_size(t.dtype());
    auto get = [&](auto x) {  // x: a value of the storage type, only for its type
      std::memcpy(&x, p, sizeof x);
      return x;
    };
    switch (t.dtype()) {
      case DType::float64: out.push_back(get(double{})); break;
      case DType::float32: out.push_back(get(float{})); break;
      case DType::float16: out.push_back(half_bits_value(get(uint16_t{}))); break;
      case DType::bfloat16: out.push_back(bits_to_float(uint32_t(get(uint16_t{})) << 16)); break;
      case DType::int32: out.push_back(get(int32_t{})); break;
      case DType::int64: out.push_back((long double)get(int64_t{})); break;
      case DType::uint8:
      case DType::boolean: out.push_back(*p); break;
    }
  }
  return out;
}

bool same_value(long double a, long double b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b);
  return a == b && std::signbit(a) == std::signbit(b);
}

}  // namespace

// ---- names, sizes, kinds -------------------------------------------------------------------------
TEST(DType, NamesSizesKinds) {
  const char* names[] = {"float32", "float16", "bfloat16", "float64", "int32", "int64", "uint8", "bool"};
  const int sizes[] = {4, 2, 2, 8, 4, 8, 1, 1};
  for (int i = 0; i < kNumDTypes; ++i) {
    EXPECT_STREQ(dtype_name(kAll[i]), names[i]);
    EXPECT_EQ(dtype_size(kAll[i]), sizes[i]) << names[i];
    EXPECT_EQ(dtype_from_name(names[i]), kAll[i]);
    EXPECT_EQ(is_float(kAll[i]), i < 4) << names[i];
    EXPECT_EQ(is_int(kAll[i]), i >= 4 && i < 7) << names[i];
    std::ostringstream os;
    os << kAll[i];
    EXPECT_EQ(os.str(), names[i]);
  }
  EXPECT_EQ(dtype_from_name("f32"), DType::float32);
  EXPECT_EQ(dtype_from_name("half"), DType::float16);
  EXPECT_EQ(dtype_from_name("bf16"), DType::bfloat16);
  EXPECT_EQ(dtype_from_name("double"), DType::float64);
  EXPECT_THROW(dtype_from_name("float128"), Error);
  EXPECT_EQ(dtype_of<float>(), DType::float32);
  EXPECT_EQ(dtype_of<half>(), DType::float16);
  EXPECT_EQ(dtype_of<bfloat16>(), DType::bfloat16);
  EXPECT_EQ(dtype_of<bool>(), DType::boolean);
  EXPECT_EQ(dtype_of<uint8_t>(), DType::uint8);
}

// ---- promotion -------------------------------------------------------------------------------------
// The table from dtype.h, written out by hand. Rows/cols: f32 f16 bf16 f64 i32 i64 u8 bool.
TEST(DType, PromotionTable) {
  using D = DType;
  const D F32 = D::float32, F16 = D::float16, BF = D::bfloat16, F64 = D::float64, I32 = D::int32,
          I64 = D::int64, U8 = D::uint8, B = D::boolean;
  const D table[8][8] = {
      /* f32  */ {F32, F32, F32, F64, F32, F32, F32, F32},
      /* f16  */ {F32, F16, F32, F64, F16, F16, F16, F16},
      /* bf16 */ {F32, F32, BF, F64, BF, BF, BF, BF},
      /* f64  */ {F64, F64, F64, F64, F64, F64, F64, F64},
      /* i32  */ {F32, F16, BF, F64, I32, I64, I32, I32},
      /* i64  */ {F32, F16, BF, F64, I64, I64, I64, I64},
      /* u8   */ {F32, F16, BF, F64, I32, I64, U8, U8},
      /* bool */ {F32, F16, BF, F64, I32, I64, U8, B},
  };
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(promote(kAll[i], kAll[j]), table[i][j])
          << dtype_name(kAll[i]) << " + " << dtype_name(kAll[j]);
      // Binary tensor ops use the same table.
      const Tensor a = Tensor::ones({2}, kAll[i]), b = Tensor::ones({2}, kAll[j]);
      EXPECT_EQ((a + b).dtype(), table[i][j]) << dtype_name(kAll[i]) << " + " << dtype_name(kAll[j]);
      EXPECT_EQ(a.maximum(b).dtype(), table[i][j]);
      EXPECT_EQ(where(Tensor::ones({2}, DType::boolean), a, b).dtype(), table[i][j]);
      EXPECT_EQ(a.lt(b).dtype(), DType::boolean);
    }
}

// ---- float16 -------------------------------------------------------------------------------------
TEST(Half, EveryBitPatternDecodes) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = half_bits_value(uint16_t(h));
    const float got = half_to_float(uint16_t(h));
    if (std::isnan(want)) {
      ASSERT_TRUE(std::isnan(got)) << std::hex << h;
      ASSERT_EQ(std::signbit(got), bool(h & 0x8000)) << std::hex << h;
      ASSERT_TRUE(std::isnan(half_to_float(float_to_half(got))));
    } else {
      ASSERT_EQ(double(got), want) << std::hex << h;
      ASSERT_EQ(std::signbit(got), bool(h & 0x8000)) << std::hex << h;
      ASSERT_EQ(float_to_half(got), h) << std::hex << h;  // exact values round-trip
    }
  }
}

TEST(Half, ExactValuesAndSpecials) {
  EXPECT_EQ(float_to_half(1.0f), 0x3c00);
  EXPECT_EQ(float_to_half(-2.0f), 0xc000);
  EXPECT_EQ(float_to_half(0.5f), 0x3800);
  EXPECT_EQ(float_to_half(65504.0f), 0x7bff);
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(float_to_half(std::ldexp(1023.0f, -24)), 0x03ff);
  EXPECT_EQ(float_to_half(0.0f), 0x0000);
  EXPECT_EQ(float_to_half(-0.0f), 0x8000);
  EXPECT_EQ(float_to_half(INFINITY), 0x7c00);
  EXPECT_EQ(float_to_half(-INFINITY), 0xfc00);
  const uint16_t nan = float_to_half(NAN);
  EXPECT_EQ(nan & 0x7c00, 0x7c00);
  EXPECT_NE(nan & 0x03ff, 0);
  EXPECT_EQ(float_to_half(-NAN) & 0x8000, 0x8000);
  EXPECT_EQ(float(half(3.0f)), 3.0f);  // the storage type converts both ways
}

TEST(Half, RoundsToNearestEven) {
  const float one = 1.0f;
  EXPECT_EQ(float_to_half(one + std::ldexp(1.0f, -11)), 0x3c00);      // tie -> even (down)
  EXPECT_EQ(float_to_half(one + 3 * std::ldexp(1.0f, -11)), 0x3c02);  // tie -> even (up)
  EXPECT_EQ(float_to_half(one + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);  // above tie
  EXPECT_EQ(float_to_half(one + std::ldexp(1.0f, -11) - std::ldexp(1.0f, -22)), 0x3c00);  // below tie
  EXPECT_EQ(float_to_half(2047.0f / 1024.0f * 1.0f + std::ldexp(1.0f, -11)),
            0x4000);  // carries into exponent
  // Overflow: 65504 is the largest; 65520 (the tie with 65536) and above become inf.
  EXPECT_EQ(float_to_half(65519.0f), 0x7bff);
  EXPECT_EQ(float_to_half(65520.0f), 0x7c00);
  EXPECT_EQ(float_to_half(-65520.0f), 0xfc00);
  EXPECT_EQ(float_to_half(1e6f), 0x7c00);
  EXPECT_EQ(float_to_half(3.4e38f), 0x7c00);
}

TEST(Half, Subnormals) {
  const float u = std::ldexp(1.0f, -25);  // half a subnormal step
  EXPECT_EQ(float_to_half(u), 0x0000);    // tie with 0 -> 0 (even)
  EXPECT_EQ(float_to_half(-u), 0x8000);
  EXPECT_EQ(float_to_half(u * 1.0001f), 0x0001);  // just above the tie
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -26)), 0x0000);
  EXPECT_EQ(float_to_half(3 * u), 0x0002);                      // 1.5 steps -> 2 (even)
  EXPECT_EQ(float_to_half(5 * u), 0x0002);                      // 2.5 steps -> 2 (even)
  EXPECT_EQ(float_to_half(7 * u), 0x0004);                      // 3.5 steps -> 4
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -14) - u), 0x0400);  // 1023.5 steps -> normal
  EXPECT_EQ(float_to_half(std::ldexp(1.0f, -15)), 0x0200);
  EXPECT_EQ(float_to_half(1e-30f), 0x0000);
  EXPECT_EQ(float_to_half(std::numeric_limits<float>::denorm_min()), 0x0000);
}

// Every 4099th float bit pattern (all ranges, both signs) against the exact reference.
TEST(Half, SweepAgainstReference) {
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099) {
    const float f = bits_to_float(uint32_t(u));
    const double got = half_bits_value(float_to_half(f));
    const long double want = round_half_ref(f);
    ASSERT_TRUE(same_value(got, want)) << std::hexfloat << f << " -> " << got << " want " << double(want);
  }
}

// The array conversions (F16C on AVX2 CPUs) give the scalar functions' bits for every float16
// pattern and a sweep of float32 patterns, at lengths that leave a scalar tail.
TEST(Half, ArrayConversionsMatchScalar) {
  std::vector<uint16_t> h(65536 + 5);  // [65541] every pattern, then 5 more for the tail
  for (size_t i = 0; i < h.size(); ++i) h[i] = uint16_t(i);
  std::vector<float> f(h.size());
  half_to_float(h.data(), f.data(), int64_t(h.size()));
  for (size_t i = 0; i < h.size(); ++i) {
    const float w = half_to_float(h[i]);
    ASSERT_EQ(std::memcmp(&f[i], &w, 4), 0) << std::hex << h[i];
  }
  std::vector<float> x;  // every 4099th float32 bit pattern, NaNs and subnormals included
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099) x.push_back(bits_to_float(uint32_t(u)));
  x.push_back(NAN);
  std::vector<uint16_t> y(x.size());
  float_to_half(x.data(), y.data(), int64_t(x.size()));
  for (size_t i = 0; i < x.size(); ++i) ASSERT_EQ(y[i], float_to_half(x[i])) << std::hexfloat << x[i];
  std::printf("float16 array conversions in hardware (F16C): %s\n",
              half_conversions_in_hardware() ? "yes" : "no");
}

// ---- bfloat16 ------------------------------------------------------------------------------------
TEST(BFloat16, ExactRoundingSpecials) {
  EXPECT_EQ(float_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(float_to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(bf16_to_float(0x3f80), 1.0f);
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);      // tie -> even
  EXPECT_EQ(float_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);  // tie -> even (up)
  EXPECT_EQ(float_to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20)), 0x3f81);
  EXPECT_EQ(float_to_bf16(INFINITY), 0x7f80);
  EXPECT_EQ(float_to_bf16(-INFINITY), 0xff80);
  EXPECT_EQ(float_to_bf16(-0.0f), 0x8000);
  EXPECT_EQ(float_to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // overflows to inf
  EXPECT_EQ(float_to_bf16(std::ldexp(255.0f, 120)), 0x7f7f);            // the largest bf16
  const uint16_t nan = float_to_bf16(NAN);
  EXPECT_EQ(nan & 0x7f80, 0x7f80);
  EXPECT_NE(nan & 0x007f, 0);
  // A signalling NaN whose payload sits only in the low 16 bits must stay a NaN.
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_to_float(0x7f800001u)))));
  EXPECT_TRUE(std::isnan(bf16_to_float(float_to_bf16(bits_to_float(0xff800001u)))));
  // Subnormals: the bf16 grid is the float grid with 7 fraction bits.
  EXPECT_EQ(float_to_bf16(std::ldexp(1.0f, -133)), 0x0001);
  EXPECT_EQ(float_to_bf16(std::ldexp(1.0f, -134)), 0x0000);  // tie -> 0
  EXPECT_EQ(float(bfloat16(0.5f)), 0.5f);
}

TEST(BFloat16, SweepAgainstReference) {
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099) {
    const float f = bits_to_float(uint32_t(u));
    const float got = bf16_to_float(float_to_bf16(f));
    const long double want = round_bf16_ref(f);
    ASSERT_TRUE(same_value(got, want)) << std::hexfloat << f << " -> " << got << " want " << double(want);
  }
}

// ---- casts between every pair of dtypes ------------------------------------------------------------
TEST(Cast, AllPairs) {
  const long double inf = std::numeric_limits<long double>::infinity();
  const long double nan = std::numeric_limits<long double>::quiet_NaN();
  const std::vector<long double> candidates = {0,
                                               -0.0L,
                                               1,
                                               -1,
                                               0.5,
                                               -0.5,
                                               0.7,
                                               -0.7,
                                               1.5,
                                               -1.5,
                                               2.5,
                                               -2.5,
                                               0.999,
                                               100,
                                               -100,
                                               127,
                                               128,
                                               200.75,
                                               255,
                                               255.9,
                                               256,
                                               300,
                                               -300,
                                               1000.5,
                                               2048,
                                               2049,
                                               65504,
                                               65519,
                                               65520,
                                               1e6,
                                               -1e6,
                                               16777217,
                                               3e9,
                                               -3e9,
                                               2147483647,
                                               -2147483648.0L,
                                               2147483648.0L,
                                               -2147483649.0L,
                                               2147483520,
                                               1099511627777.0L,
                                               9007199254740993.0L,
                                               1e19,
                                               -1e19,
                                               9223372036854775807.0L,
                                               -9223372036854775807.0L - 1,
                                               4611686018427387904.0L,
                                               1e-3,
                                               1e-6,
                                               6e-8,
                                               1e-40,
                                               3.4e38,
                                               1e300,
                                               inf,
                                               -inf,
                                               nan};
  for (DType src : kAll) {
    std::vector<long double> vals;
    for (long double v : candidates)
      if (representable(v, src) && (is_float(src) || !(v == 0 && std::signbit(v)))) vals.push_back(v);
    const Tensor x = make_exact(vals, src);
    ASSERT_EQ(read_exact(x).size(), vals.size());
    for (DType dst : kAll) {
      const Tensor y = x.cast(dst);
      ASSERT_EQ(y.dtype(), dst);
      const auto got = read_exact(y);
      for (size_t i = 0; i < vals.size(); ++i) {
        const long double want = cast_ref(vals[i], is_float(src), dst);
        EXPECT_TRUE(same_value(got[i], want))
            << dtype_name(src) << " " << double(vals[i]) << " -> " << dtype_name(dst) << ": got "
            << double(got[i]) << ", want " << double(want);
      }
    }
  }
}

// Narrowing float64 -> float16/bfloat16 must round once (no double rounding through float32).
TEST(Cast, Float64ToHalfRoundsOnce) {
  const double v = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);  // just above a half tie
  EXPECT_EQ(Tensor::from_vector<double>({v}).cast(DType::float16).item<double>(), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(Tensor::from_vector<double>({-v}).cast(DType::float16).item<double>(),
            -(1.0 + std::ldexp(1.0, -10)));
  const double w = 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40);  // just above a bf16 tie
  EXPECT_EQ(Tensor::from_vector<double>({w}).cast(DType::bfloat16).item<double>(), 1.0 + std::ldexp(1.0, -7));
  const double below = 1.0 + std::ldexp(1.0, -11) - std::ldexp(1.0, -40);  // just below the tie
  EXPECT_EQ(Tensor::from_vector<double>({below}).cast(DType::float16).item<double>(), 1.0);
}

TEST(Cast, FloatToIntTruncatesSaturatesNaNIsZero) {
  const auto x =
      Tensor::from_vector<float>({2.9f, -2.9f, NAN, INFINITY, -INFINITY, 1e10f, -1e10f, 255.5f, -0.5f});
  EXPECT_EQ(x.cast(DType::int32).to_vector<int32_t>(),
            (std::vector<int32_t>{2, -2, 0, INT32_MAX, INT32_MIN, INT32_MAX, INT32_MIN, 255, 0}));
  EXPECT_EQ(x.cast(DType::uint8).to_vector<uint8_t>(),
            (std::vector<uint8_t>{2, 0, 0, 255, 0, 255, 0, 255, 0}));
  EXPECT_EQ(x.cast(DType::int64).to_vector<int64_t>(),
            (std::vector<int64_t>{2, -2, 0, INT64_MAX, INT64_MIN, 10000000000, -10000000000, 255, 0}));
  EXPECT_EQ(x.cast(DType::boolean).to_vector<bool>(),
            (std::vector<bool>{true, true, true, true, true, true, true, true, true}));
  EXPECT_EQ(Tensor::from_vector<float>({0.0f, -0.0f}).cast(DType::boolean).to_vector<bool>(),
            (std::vector<bool>{false, false}));
  // Integers narrow modulo 2^n, like C++20 and NumPy.
  EXPECT_EQ(Tensor::from_vector<int64_t>({-1, 256, 300}).cast(DType::uint8).to_vector<uint8_t>(),
            (std::vector<uint8_t>{255, 0, 44}));
  EXPECT_EQ(Tensor::from_vector<int32_t>({0, 7, -7}).cast(DType::boolean).to_vector<bool>(),
            (std::vector<bool>{false, true, true}));
}

TEST(Cast, NoOpWhenSameDType) {
  const auto x = Tensor::from_vector<float>({1, 2});
  EXPECT_TRUE(x.cast(DType::float32).same(x));
  EXPECT_TRUE(x.to(DType::float32).same(x));
  EXPECT_EQ(x.to(DType::int32).dtype(), DType::int32);
}
