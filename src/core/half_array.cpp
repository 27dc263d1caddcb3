// Array float16 conversions (half_array.h): F16C, 8 values per instruction, when the CPU has AVX2
// (every AVX2 CPU has F16C; clang 14's __builtin_cpu_supports does not know "f16c" itself).
#include "half_array.h"

#include "aether/core/dtype.h"
#include "aether/core/error.h"

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define AETHER_F16C_DISPATCH 1
#endif

namespace aether {
namespace {

#if AETHER_F16C_DISPATCH
// float16 NaN -> a quiet float NaN with the payload kept, as the instruction does and
// half_to_float does: no fix-up needed.
__attribute__((target("avx,f16c"))) void h2f_f16c(const uint16_t* src, float* dst, int64_t n) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8)
    _mm256_storeu_ps(dst + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i))));
  for (; i < n; ++i) dst[i] = half_to_float(src[i]);
}

// Round to nearest even (imm 0), overflow to inf like float_to_half; a NaN becomes the quiet NaN
// float_to_half gives (sign | 0x7e00), not the instruction's truncated payload.
__attribute__((target("avx,f16c"))) void f2h_f16c(const float* src, uint16_t* dst, int64_t n) {
  int64_t i = 0;
  const __m128i quiet = _mm_set1_epi16(0x7e00), sign = _mm_set1_epi16(int16_t(0x8000));
  for (; i + 8 <= n; i += 8) {
    const __m256 f = _mm256_loadu_ps(src + i);
    __m128i h = _mm256_cvtps_ph(f, 0);
    const __m256 nan = _mm256_cmp_ps(f, f, _CMP_UNORD_Q);  // [8] all-ones where NaN
    const __m128i nan16 = _mm_packs_epi32(_mm256_castsi256_si128(_mm256_castps_si256(nan)),
                                          _mm256_extractf128_si256(_mm256_castps_si256(nan), 1));
    h = _mm_blendv_epi8(h, _mm_or_si128(_mm_and_si128(h, sign), quiet), nan16);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(dst + i), h);
  }
  for (; i < n; ++i) dst[i] = float_to_half(src[i]);
}
#endif

}  // namespace

bool half_conversions_in_hardware() {
#if AETHER_F16C_DISPATCH
  static const bool yes = __builtin_cpu_supports("avx2");
  return yes;
#else
  return false;
#endif
}

void half_to_float(const uint16_t* src, float* dst, int64_t n) {
#if AETHER_F16C_DISPATCH
  if (half_conversions_in_hardware()) return h2f_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = half_to_float(src[i]);
}

void float_to_half(const float* src, uint16_t* dst, int64_t n) {
#if AETHER_F16C_DISPATCH
  if (half_conversions_in_hardware()) return f2h_f16c(src, dst, n);
#endif
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_half(src[i]);
}

void widen_16bit(DType t, const uint16_t* src, float* dst, int64_t n) {
  AETHER_CHECK_DTYPE(is_16bit_float(t), "widen", "expected float16 or bfloat16, got ", dtype_name(t));
  if (t == DType::float16) return half_to_float(src, dst, n);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
}

void narrow_16bit(DType t, const float* src, uint16_t* dst, int64_t n) {
  AETHER_CHECK_DTYPE(is_16bit_float(t), "narrow", "expected float16 or bfloat16, got ", dtype_name(t));
  if (t == DType::float16) return float_to_half(src, dst, n);
#pragma omp simd
  for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
}

}  // namespace aether
