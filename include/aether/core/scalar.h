// aether/core/scalar.h - a number operand of the tensor API (t + 1, x * 0.5, t.clamp(0, 9)).
//
// An integer stays an integer and a float a float, as Python's numbers do in NumPy and PyTorch: with
// an integer tensor, `labels + 1` is integer arithmetic (of the tensor's dtype where the value fits,
// else int64), while `labels * 0.5` is float32. With a float tensor, either is a number of its dtype.
#pragma once

#include <cstdint>
#include <type_traits>

namespace aether {

class Scalar {
 public:
  template <typename T>
  requires std::is_arithmetic_v<T> Scalar(T v)  // NOLINT: implicit by design, like a number
      : integral_(std::is_integral_v<T>), int_(std::is_integral_v<T> ? int64_t(v) : 0), double_(double(v)) {}

  bool is_integral() const { return integral_; }  // an integer or bool (unsigned above 2^63 wraps)
  int64_t to_int() const { return int_; }         // the integer (only when is_integral())
  double to_double() const { return double_; }    // the value as a double (rounded above 2^53)

 private:
  bool integral_;
  int64_t int_;
  double double_;
};

}  // namespace aether
