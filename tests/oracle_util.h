// Test helpers for comparing the fast CPU paths (the fused executor: oneDNN matmul and conv, the
// pooling library loops and generated pooling kernels) with the oracle (the reference backend,
// AETHER_FUSE=0: naive loops, never oneDNN).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "aether/aether.h"

namespace oracle_test {

// Runs f() with the fused executor (on = true) or on the reference backend, then restores the mode.
template <typename F>
auto with_fusion(bool on, F&& f) {
  struct Restore {
    bool prev = aether::fusion_enabled();
    ~Restore() { aether::set_fusion(prev); }
  } restore;
  aether::set_fusion(on);
  return f();
}

// Uniform values in [-1, 1).
inline std::vector<double> uniform(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& e : v) e = u(gen);
  return v;
}

// A float32 tensor of `v` (rounded), made on the host: no kernel runs.
inline aether::Tensor f32_tensor(const std::vector<double>& v, const aether::Shape& shape) {
  return aether::Tensor::from_vector(std::vector<float>(v.begin(), v.end()), shape);
}

// The values of a float32 tensor, converted on the host (to_vector<double> would run a Cast kernel,
// which the fused executor compiles for every new shape).
inline std::vector<double> f32_values(const aether::Tensor& t) {
  const std::vector<float> v = t.to_vector<float>();
  return std::vector<double>(v.begin(), v.end());
}

inline std::vector<double> abs_of(std::vector<double> v) {
  for (auto& e : v) e = std::abs(e);
  return v;
}

// The error bound of a float32 sum of `terms` products, in any order: every order of adding K
// terms is within (K-1) u S of the exact sum, S the sum of the terms' absolute values and
// u = 2^-24 (Higham, "Accuracy and Stability of Numerical Algorithms", 2nd ed., eq. 4.4); the
// oracle sums in double and rounds once (u |exact|). So |fast - oracle| <= (K + 1) u S; we allow
// twice that. `scale` holds S per element: the oracle run on the inputs' absolute values.
inline void expect_within_sum_bound(const std::vector<double>& fast, const std::vector<double>& oracle,
                                    const std::vector<double>& scale, int64_t terms,
                                    const std::string& what) {
  ASSERT_EQ(fast.size(), oracle.size()) << what;
  ASSERT_EQ(scale.size(), oracle.size()) << what;
  const double u = std::ldexp(1.0, -24);
  int bad = 0;
  for (size_t i = 0; i < fast.size(); ++i) {
    const double tol = 2.0 * double(terms + 1) * u * scale[i] + 1e-30;
    if (!(std::abs(fast[i] - oracle[i]) <= tol) && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " fast " << fast[i] << " oracle " << oracle[i]
                    << " (bound " << tol << ")";
  }
}

}  // namespace oracle_test
