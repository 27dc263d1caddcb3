// Internal: element conversions shared by the oracle loops (reference_conv.cpp, reference_matmul.cpp,
// reference_pool.cpp). The oracle reads every float storage type as double, accumulates in double
// and rounds once when it stores the result.
#pragma once

#include <type_traits>

#include "aether/core/dtype.h"

namespace aether::cpu {

// A stored element as double (exact for every float storage type).
template <typename T>
double to_f64(T v) {
  if constexpr (std::is_same_v<T, double>)
    return v;
  else
    return double(float(v));  // float, half, bfloat16
}

// A double rounded once to storage type T (16-bit types through round-to-odd, see dtype.h).
template <typename T>
T from_f64(double v) {
  if constexpr (std::is_same_v<T, double>)
    return v;
  else if constexpr (std::is_same_v<T, float>)
    return float(v);
  else
    return T(float_round_odd(v));
}

// Below this many multiply-adds one thread beats waking an OpenMP team (tests run many tiny ops).
constexpr long long kOracleParallelWork = 1LL << 15;

}  // namespace aether::cpu
