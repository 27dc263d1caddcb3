// float16 <-> float32 conversion of whole arrays: the same bits as half_to_float / float_to_half
// (aether/core/dtype.h) for every input, with the CPU's F16C instructions where it has them (every
// AVX2 CPU does), the portable scalar functions otherwise. bfloat16 needs no such help: its
// conversions are inline integer arithmetic that the compiler vectorises.
#pragma once

#include <cstdint>

namespace aether {

void half_to_float(const uint16_t* src, float* dst, int64_t n);  // src: [n] float16 bits, dst: [n]
void float_to_half(const float* src, uint16_t* dst, int64_t n);  // src: [n], dst: [n] float16 bits
bool half_conversions_in_hardware();                             // F16C is used

}  // namespace aether
