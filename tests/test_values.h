// tests/test_values.h - deterministic test inputs that do not come from aether's own RNG, so that two
// runs (fused and reference, CPU and GPU) start from the same numbers.
#pragma once

#include <cstdint>
#include <vector>

#include "aether/graph/tensor.h"

namespace aether::testing_values {

// n values in [lo, hi) from a linear congruential generator seeded by `seed`.
inline std::vector<float> values(int64_t n, uint32_t seed, float lo = -2, float hi = 2) {
  std::vector<float> v(static_cast<size_t>(n));
  uint32_t s = seed * 2654435761u + 12345u;
  for (auto& x : v) {
    s = s * 1664525u + 1013904223u;
    x = lo + (hi - lo) * float(s >> 8) / 16777216.0f;
  }
  return v;
}
// A float32 tensor of `shape` filled with values(numel, seed, lo, hi).
inline Tensor input(const Shape& shape, uint32_t seed, float lo = -2, float hi = 2) {
  return Tensor::from_vector<float>(values(numel(shape), seed, lo, hi), shape);
}

}  // namespace aether::testing_values
