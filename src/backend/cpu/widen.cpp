// 16-bit <-> float32 conversion of whole arrays for the library kernels (widen.h): core/half_array.h's
// conversions (F16C for float16 where the CPU has it), a chunk of kChunk values per call, in parallel.
#include "widen.h"

#include <algorithm>

#include "aether/core/error.h"
#include "core/half_array.h"

namespace aether::cpu {
namespace {
constexpr int64_t kChunk = 1 << 14;  // values per conversion call (and per thread at a time)
}  // namespace

BufferPtr widen(DType t, const void* p, int64_t n) {
  AETHER_CHECK_DTYPE(is_16bit_float(t), "widen", "expected float16 or bfloat16, got ", dtype_name(t));
  auto out = std::make_shared<Buffer>(Device::cpu(), DType::float32, n, /*zero_fill=*/false);
  float* dst = static_cast<float*>(out->data());
  const uint16_t* src = static_cast<const uint16_t*>(p);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += kChunk) widen_16bit(t, src + i, dst + i, std::min(kChunk, n - i));
  return out;
}

void narrow(DType t, const float* src, void* p, int64_t n) {
  AETHER_CHECK_DTYPE(is_16bit_float(t), "narrow", "expected float16 or bfloat16, got ", dtype_name(t));
  uint16_t* dst = static_cast<uint16_t*>(p);
#pragma omp parallel for schedule(static)
  for (int64_t i = 0; i < n; i += kChunk) narrow_16bit(t, src + i, dst + i, std::min(kChunk, n - i));
}

}  // namespace aether::cpu
