// 16-bit <-> float32 conversion of whole arrays for the library kernels (widen.h): bfloat16 with the
// inline integer conversions of aether/core/dtype.h (vectorised by the compiler), float16 with
// half_array.h's (F16C where the CPU has it), a chunk of kChunk values per call and thread.
#include "widen.h"

#include <algorithm>

#include "aether/core/error.h"
#include "core/half_array.h"

namespace aether::cpu {
namespace {
void check_16bit(DType t, const char* op) {
  AETHER_CHECK(is_16bit_float(t), op, "expected float16 or bfloat16, got ", dtype_name(t));
}
}  // namespace

BufferPtr widen(DType t, const void* p, int64_t n) {
  check_16bit(t, "widen");
  constexpr int64_t kChunk = 1 << 14;
  auto out = std::make_shared<Buffer>(Device::cpu(), DType::float32, n, /*zero_fill=*/false);
  float* dst = static_cast<float*>(out->data());
  const uint16_t* src = static_cast<const uint16_t*>(p);
  if (t == DType::bfloat16) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_float(src[i]);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += kChunk) half_to_float(src + i, dst + i, std::min(kChunk, n - i));
  }
  return out;
}

void narrow(DType t, const float* src, void* p, int64_t n) {
  check_16bit(t, "narrow");
  constexpr int64_t kChunk = 1 << 14;
  uint16_t* dst = static_cast<uint16_t*>(p);
  if (t == DType::bfloat16) {
#pragma omp parallel for simd schedule(static)
    for (int64_t i = 0; i < n; ++i) dst[i] = float_to_bf16(src[i]);
  } else {
#pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < n; i += kChunk) float_to_half(src + i, dst + i, std::min(kChunk, n - i));
  }
}

}  // namespace aether::cpu
