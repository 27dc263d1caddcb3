// Helpers of the op tests (ops_test.cpp, integer_ops_test.cpp): tensors from exact values in any dtype,
// the value a dtype stores, and element-wise comparisons with a per-dtype tolerance.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "aether/aether.h"

namespace ops_test {
using namespace aether;

inline constexpr DType kFloats[] = {DType::float32, DType::float16, DType::bfloat16, DType::float64};
inline constexpr DType kInts[] = {DType::int32, DType::int64, DType::uint8};
inline const double kInf = std::numeric_limits<double>::infinity();
inline const double kNaN = std::numeric_limits<double>::quiet_NaN();

// A tensor of dtype t from values exactly representable in t.
inline Tensor make(const std::vector<double>& v, const Shape& s, DType t) {
  return dispatch_dtype(t, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> b;
      for (double x : v) b.push_back(x != 0);
      return Tensor::from_blob(b.data(), s, t);
    } else {
      std::vector<T> b;
      for (double x : v) {
        if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
          b.push_back(T(float(x)));
        else
          b.push_back(T(x));
      }
      return Tensor::from_blob(b.data(), s, t);
    }
  });
}
inline Tensor make(const std::vector<double>& v, DType t) { return make(v, {int64_t(v.size())}, t); }

// `v` rounded to dtype t, as the result of an exact operation stored in t would be.
inline double round_to(double v, DType t) {
  switch (t) {
    case DType::float64: return v;
    case DType::float32: return float(v);
    case DType::float16: return float(half(float(v)));
    case DType::bfloat16: return float(bfloat16(float(v)));
    case DType::int32: return double(int32_t(int64_t(v)));
    case DType::int64: return v;
    case DType::uint8: return double(uint8_t(int64_t(v)));  // modular
    case DType::boolean: return v != 0;
  }
  return v;
}

inline double tol(DType t) {
  switch (t) {
    case DType::float64: return 1e-12;
    case DType::float32: return 1e-5;
    case DType::float16: return 4e-3;
    case DType::bfloat16: return 3e-2;
    case DType::int32:
    case DType::int64:
    case DType::uint8:
    case DType::boolean: return 0;
  }
  return 0;
}

inline bool close(double got, double want, double tolerance) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tolerance * (1 + std::fabs(want));
}

// Checks t's dtype, shape and values (within dtype tolerance; exact for integer results).
inline void expect_values(const Tensor& t, DType dtype, const Shape& shape, const std::vector<double>& want,
                          const std::string& what, double tolerance = -1) {
  ASSERT_EQ(t.dtype(), dtype) << what;
  ASSERT_EQ(t.shape(), shape) << what;
  const double tl = tolerance >= 0 ? tolerance : tol(dtype);
  const auto got = t.to_vector<double>();
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_TRUE(close(got[i], want[i], tl))
        << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
}

inline std::vector<double> map(const std::vector<double>& v, const std::function<double(double)>& f) {
  std::vector<double> out;
  for (double x : v) out.push_back(f(x));
  return out;
}
inline std::vector<double> zip(const std::vector<double>& a, const std::vector<double>& b,
                               const std::function<double(double, double)>& f) {
  std::vector<double> out;
  for (size_t i = 0; i < a.size(); ++i) out.push_back(f(a[i], b[i]));
  return out;
}

}  // namespace ops_test
