// Helpers for the nn-op tests: tensors from doubles, closeness checks, finite-difference gradient
// checks in float64 and error-message checks.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "aether/aether.h"

namespace nn_test {

using aether::DType;
using aether::Shape;
using aether::Tensor;

// A tensor of dtype t holding `v` (rounded to t).
inline Tensor make(const std::vector<double>& v, const Shape& s, DType t = DType::float64) {
  return Tensor::from_vector<double>(v, s).cast(t);
}
// What `v` becomes after rounding to dtype t (the inputs a reference must use for 16-bit dtypes).
inline std::vector<double> rounded(const std::vector<double>& v, DType t) {
  return make(v, {int64_t(v.size())}, t).to_vector<double>();
}
// Deterministic values uniform in [lo, hi).
inline std::vector<double> det_values(size_t n, uint32_t seed, double lo = -1.0, double hi = 1.0) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = dist(gen);
  return v;
}

// |got - want| <= atol + rtol |want|, element by element; NaN matches only NaN, inf only the same inf.
inline void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol,
                         double rtol, const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << what << " [" << i << "]: got " << got[i] << ", want NaN";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << what << " [" << i << "]";
    } else {
      EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << what << " [" << i << "]";
    }
  }
}

// Tolerances for a forward result of dtype t whose inputs were already rounded to t.
struct Tol {
  double atol, rtol;
};
inline Tol tol_for(DType t) {
  switch (t) {
    case DType::float64: return {1e-14, 1e-13};
    case DType::float32: return {3e-7, 3e-6};
    case DType::float16: return {2e-4, 2e-3};
    case DType::bfloat16: return {2e-3, 1.6e-2};
    default: return {0, 0};
  }
}

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// sum(out * w) for fixed pseudo-random weights w (or out itself when it is a scalar): checking the
// gradient of this scalar checks a whole random vector-Jacobian product of f.
inline Tensor scalarize(const Tensor& out) {
  if (out.numel() == 1) return out.reshape({});
  const Tensor w = Tensor::from_vector<double>(det_values(size_t(out.numel()), 977), out.shape());
  return (out.cast(DType::float64) * w).sum();
}

// Compares the autograd gradient of scalarize(f(inputs)) w.r.t. every input (float64 leaves) with
// central differences of step eps: |analytic - numeric| <= tol * max(1, |numeric|).
inline void expect_grad_matches_fd(const Fn& f,
                                   const std::vector<std::pair<std::vector<double>, Shape>>& inputs,
                                   double eps = 1e-6, double tol = 1e-6) {
  auto leaves = [&](const std::vector<std::vector<double>>& vals, bool grad) {
    std::vector<Tensor> ts;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Tensor t = Tensor::from_vector<double>(vals[i], inputs[i].second);
      if (grad) t.set_requires_grad();
      ts.push_back(t);
    }
    return ts;
  };
  std::vector<std::vector<double>> vals;
  for (const auto& in : inputs) vals.push_back(in.first);
  const auto xs = leaves(vals, true);
  const auto grads = aether::gradients(scalarize(f(xs)), xs);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const auto g = grads[i].to_vector<double>();
    ASSERT_EQ(g.size(), vals[i].size());
    for (size_t j = 0; j < vals[i].size(); ++j) {
      auto at = [&](double delta) {
        auto v = vals;
        v[i][j] += delta;
        aether::NoGradGuard no_grad;
        return scalarize(f(leaves(v, false))).item<double>();
      };
      const double fd = (at(eps) - at(-eps)) / (2 * eps);
      EXPECT_NEAR(g[j], fd, tol * std::max(1.0, std::abs(fd))) << "input " << i << ", element " << j;
    }
  }
}

// Expects f() to throw aether::Error whose message contains every one of `parts`.
inline void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected aether::Error containing '" << parts.front() << "'";
  } catch (const aether::Error& e) {
    const std::string msg = e.what();
    for (const auto& p : parts)
      EXPECT_NE(msg.find(p), std::string::npos) << "message: " << msg << "\nmissing: " << p;
  }
}

}  // namespace nn_test
