// float16 <-> float32 conversion of whole arrays: the same bits as half_to_float / float_to_half
// (aether/core/dtype.h) for every input, with the CPU's F16C instructions where it has them (every
// AVX2 CPU does), the portable scalar functions otherwise. bfloat16 needs no such help: its
// conversions are inline integer arithmetic that the compiler vectorises.
#pragma once

#include <cstdint>

#include "aether/core/dtype.h"

namespace aether {

void half_to_float(const uint16_t* src, float* dst, int64_t n);  // src: [n] float16 bits, dst: [n]
void float_to_half(const float* src, uint16_t* dst, int64_t n);  // src: [n], dst: [n] float16 bits
bool half_conversions_in_hardware();                             // F16C is used

// Either 16-bit float type (t: float16 or bfloat16; throws aether::Error for another) <-> float32,
// whole arrays, one thread: src (n) 16-bit bits -> dst (n) float32, and back rounded to nearest even.
void widen_16bit(DType t, const uint16_t* src, float* dst, int64_t n);
void narrow_16bit(DType t, const float* src, uint16_t* dst, int64_t n);

}  // namespace aether
