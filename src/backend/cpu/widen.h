// Internal: float32 compute on 16-bit storage. The CPU library kernels (oneDNN convolution and
// matmul) run float16/bfloat16 natively only where the CPU has the instructions (avx512_core_bf16,
// AMX, avx512_core_fp16); elsewhere they convert their 16-bit operands to float32 copies, compute in
// float32 and round the result back to nearest even (the same rounding as a cast).
#pragma once

#include <cstdint>

#include "aether/core/buffer.h"

namespace aether::cpu {

// p: n elements of `t` (float16 or bfloat16) -> a float32 Buffer (n), exact. From the caching
// allocator, so a steady training step makes no system allocation for it.
BufferPtr widen(DType t, const void* p, int64_t n);
// src: n float32 -> dst: n elements of `t`, rounded to nearest even (overflow to Inf, NaN kept).
void narrow(DType t, const float* src, void* dst, int64_t n);

}  // namespace aether::cpu
