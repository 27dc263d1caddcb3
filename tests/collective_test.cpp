// Collectives in the graph (aether/graph/collective.h): the AllReduce primitive and the synchronized
// batch norm built on it, in one process. A group of R ranks that all hold the same values is
// simulated by a reduction that multiplies by R: then AllReduce(x) = R x, its gradient R dy, and a
// synchronized batch norm must equal the plain one (the same statistics, from R times the count).
// Ranks that hold different values are tested as processes in dist_train_test.cpp.
#include "aether/graph/collective.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "aether/aether.h"

using namespace aether;

namespace {

// `ranks` ranks holding the same float32 or float64 values.
int64_t identical_ranks(double ranks) {
  return register_collective([ranks](void* data, size_t n, DType t) {
    if (t == DType::float64) {
      for (size_t i = 0; i < n; ++i) static_cast<double*>(data)[i] *= ranks;
    } else {
      ASSERT_EQ(t, DType::float32);
      for (size_t i = 0; i < n; ++i) static_cast<float*>(data)[i] *= float(ranks);
    }
  });
}

std::vector<double> ramp(int64_t n, double lo, double hi) {
  std::vector<double> v;
  for (int64_t k = 0; k < n; ++k) v.push_back(lo + (hi - lo) * std::fmod(0.618034 * double(k + 1), 1.0));
  return v;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, double tol,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::fabs(want[i]))) << what << " at " << i;
}

}  // namespace

// sum(w * AllReduce(x) * x) over 3 identical ranks = 3 sum(w x^2): gradient 6 w x, against central
// differences.
TEST(Collective, AllReduceGradientIsTheAllReduceOfTheGradient) {
  const int64_t g = identical_ranks(3);
  const std::vector<double> xv = ramp(12, -2, 2), wv = ramp(12, 0.5, 1.5);
  const Tensor x = Tensor::from_vector<double>(xv, {3, 4}).set_requires_grad();
  const Tensor w = Tensor::from_vector<double>(wv, {3, 4});
  const Tensor y = all_reduce(x, g) * x;
  expect_close(
      y.to_vector<double>(),
      [&] {
        std::vector<double> v;
        for (size_t i = 0; i < xv.size(); ++i) v.push_back(3 * xv[i] * xv[i]);
        return v;
      }(),
      1e-12, "forward");
  (y * w).sum().backward();
  const auto grad = x.grad().to_vector<double>();
  const double eps = 1e-6;
  auto f = [&](std::vector<double> v) {
    NoGradGuard no_grad;
    const Tensor t = Tensor::from_vector<double>(v, {3, 4});
    return (all_reduce(t, g) * t * w).sum().item<double>();
  };
  for (size_t i = 0; i < xv.size(); ++i) {
    auto plus = xv, minus = xv;
    plus[i] += eps, minus[i] -= eps;
    EXPECT_NEAR(grad[i], (f(plus) - f(minus)) / (2 * eps), 1e-6) << "element " << i;
    EXPECT_NEAR(grad[i], 6 * wv[i] * xv[i], 1e-12) << "element " << i;
  }
  unregister_collective(g);
}

TEST(Collective, BadGroupsAndDtypesAreNamed) {
  const Tensor x = Tensor::ones({4});
  try {
    all_reduce(x, 987654).realize();
    ADD_FAILURE() << "an unregistered group ran";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("collective group 987654 is not registered"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(all_reduce(Tensor::ones({4}, DType::int32), identical_ranks(2)), Error);
  EXPECT_THROW(all_reduce(x, -1), Error);
  EXPECT_THROW(register_collective(nullptr), Error);
}

// Over identical ranks a synchronized batch norm normalises exactly as the plain one: the same
// output and input gradient, and running variance unbiased over 2 ranks x n values.
TEST(Collective, SyncBatchNormOverIdenticalRanksIsThePlainOne) {
  const int64_t g = identical_ranks(2);
  const Shape s{4, 3, 3, 5};  // (N, H, W, C)
  const int64_t n = 4 * 3 * 3;
  for (DType t : {DType::float32, DType::float64}) {
    SCOPED_TRACE(dtype_name(t));
    const std::vector<double> xv = ramp(numel(s), -1, 3), wv = ramp(numel(s), -1, 1);
    auto run = [&](int64_t group, std::vector<double>* dx, std::vector<double>* rv) {
      const Tensor x = Tensor::from_vector<double>(xv, s).cast(t).detach().set_requires_grad();
      const Tensor weight = Tensor::from_vector<double>(ramp(5, 0.5, 2), {5}).cast(t);
      const Tensor bias = Tensor::from_vector<double>(ramp(5, -1, 1), {5}).cast(t);
      const Tensor rm = Tensor::zeros({5}, t), rvar = Tensor::ones({5}, t);
      const BatchNormResult r = batch_norm(x, weight, bias, rm, rvar, true, 0.5, 1e-5, group);
      (r.out * Tensor::from_vector<double>(wv, s).cast(t)).sum().backward();
      *dx = x.grad().to_vector<double>();
      *rv = r.new_running_var.to_vector<double>();
      return r.out.to_vector<double>();
    };
    std::vector<double> dx_sync, dx_plain, rv_sync, rv_plain;
    const auto y_sync = run(g, &dx_sync, &rv_sync), y_plain = run(-1, &dx_plain, &rv_plain);
    const double tol = t == DType::float32 ? 1e-5 : 1e-12;
    expect_close(y_sync, y_plain, tol, "output");
    expect_close(dx_sync, dx_plain, tol, "input gradient");
    // running var = 0.5 + 0.5 var_b x N/(N-1): N = 2n synchronized, n plain
    for (size_t c = 0; c < rv_sync.size(); ++c) {
      const double var_b = (rv_plain[c] - 0.5) / 0.5 * double(n - 1) / double(n);
      EXPECT_NEAR(rv_sync[c], 0.5 + 0.5 * var_b * double(2 * n) / double(2 * n - 1), tol) << "channel " << c;
    }
  }
  unregister_collective(g);
}
