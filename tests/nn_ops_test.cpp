// Tests of softmax / log_softmax, linear, batch_norm and dropout (aether/ops/nn.h): forward
// against plain double loops, finite-difference gradients in float64, stability with large
// logits, reproducible dropout masks, and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "aether/aether.h"
#include "aether/ops/nn.h"
#include "nn_test_util.h"

using namespace aether;
using nn_test::det_values;
using nn_test::expect_close;
using nn_test::expect_error;
using nn_test::expect_grad_matches_fd;
using nn_test::make;
using nn_test::rounded;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// (log-)softmax of x viewed as (outer, n, inner) along the middle axis, in double.
std::vector<double> ref_softmax(const std::vector<double>& x, int64_t outer, int64_t n, int64_t inner,
                                bool log) {
  std::vector<double> y(x.size());
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t i = 0; i < inner; ++i) {
      auto at = [&](int64_t k) { return size_t((o * n + k) * inner + i); };
      double m = -kInf;
      for (int64_t k = 0; k < n; ++k) m = std::max(m, x[at(k)]);
      double s = 0;
      for (int64_t k = 0; k < n; ++k) s += std::exp(x[at(k)] - m);
      for (int64_t k = 0; k < n; ++k)
        y[at(k)] = log ? x[at(k)] - m - std::log(s) : std::exp(x[at(k)] - m) / s;
    }
  return y;
}

// ---- softmax ---------------------------------------------------------------------------------------
TEST(Softmax, ForwardBothAxesEveryDtype) {
  const auto v = det_values(12, 1, -3, 3);  // (3, 4)
  for (DType t : {DType::float64, DType::float32, DType::float16, DType::bfloat16}) {
    const auto xr = rounded(v, t);
    const Tensor x = make(v, {3, 4}, t);
    const auto tol = nn_test::tol_for(t);
    for (bool log : {false, true}) {
      auto f = [&](int64_t axis) { return log ? log_softmax(x, axis) : softmax(x, axis); };
      const char* name = log ? "log_softmax" : "softmax";
      EXPECT_EQ(f(-1).dtype(), t);
      expect_close(f(-1).to_vector<double>(), ref_softmax(xr, 3, 4, 1, log), tol.atol, 2 * tol.rtol,
                   std::string(name) + " axis -1 " + dtype_name(t));
      expect_close(f(0).to_vector<double>(), ref_softmax(xr, 1, 3, 4, log), tol.atol, 2 * tol.rtol,
                   std::string(name) + " axis 0 " + dtype_name(t));
    }
  }
}

TEST(Softmax, MiddleAxisOf3D) {
  const auto v = det_values(24, 2, -2, 2);  // (2, 3, 4)
  const Tensor x = make(v, {2, 3, 4});
  expect_close(softmax(x, 1).to_vector<double>(), ref_softmax(v, 2, 3, 4, false), 1e-15, 1e-14, "softmax");
  expect_close(log_softmax(x, -2).to_vector<double>(), ref_softmax(v, 2, 3, 4, true), 1e-15, 1e-14,
               "log_softmax");
}

// Logits around 1e4 (where e^x overflows) give finite, correct results in float32.
TEST(Softmax, LargeLogitsStayFinite) {
  const std::vector<double> v = {1e4, 1e4 - 1, -1e4, 0, -1e4, -1e4 + 2, -1e4 - 3, -1e4};  // (2, 4)
  const Tensor x = make(v, {2, 4}, DType::float32);
  expect_close(softmax(x).to_vector<double>(), ref_softmax(v, 2, 4, 1, false), 1e-7, 1e-6, "softmax");
  expect_close(log_softmax(x).to_vector<double>(), ref_softmax(v, 2, 4, 1, true), 1e-6, 1e-6, "log_softmax");
  // Gradients stay finite too.
  Tensor xg = make(v, {2, 4}).detach();
  xg.set_requires_grad();
  const Tensor g1 = aether::gradients(log_softmax(xg).slice(1, 0, 1).sum(), {xg})[0];
  const Tensor g2 = aether::gradients(softmax(xg).slice(1, 1, 2).sum(), {xg})[0];
  for (const Tensor& g : {g1, g2})
    for (double e : g.to_vector<double>()) EXPECT_TRUE(std::isfinite(e));
}

TEST(Softmax, NaNPoisonsOnlyItsRowAndMinusInfGivesZero) {
  const Tensor x = make({kNaN, 1, 2, -kInf, 0, 0}, {2, 3}, DType::float32);
  const auto y = softmax(x).to_vector<double>();
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(std::isnan(y[size_t(i)]));
  EXPECT_EQ(y[3], 0);
  EXPECT_DOUBLE_EQ(y[4], 0.5);
  EXPECT_DOUBLE_EQ(y[5], 0.5);
  const auto l = log_softmax(x).to_vector<double>();
  EXPECT_EQ(l[3], -kInf);
  EXPECT_NEAR(l[4], -std::log(2.0), 1e-7);
}

TEST(Softmax, GradientsMatchFiniteDifferences) {
  const std::vector<std::pair<std::vector<double>, Shape>> in = {{det_values(12, 3, -2, 2), {3, 4}}};
  expect_grad_matches_fd([](const std::vector<Tensor>& x) { return softmax(x[0]); }, in);
  expect_grad_matches_fd([](const std::vector<Tensor>& x) { return softmax(x[0], 0); }, in);
  expect_grad_matches_fd([](const std::vector<Tensor>& x) { return log_softmax(x[0]); }, in);
  expect_grad_matches_fd([](const std::vector<Tensor>& x) { return log_softmax(x[0], 0); }, in);
}

TEST(Softmax, Errors) {
  expect_error([] { softmax(make({1, 2}, {2}), 1); }, {"softmax", "axis"});
  expect_error(
      [] {
        log_softmax(Tensor::from_vector<int64_t>({1, 2}, {2}));
      },
      {"log_softmax", "float", "int64"});
}

// ---- linear ----------------------------------------------------------------------------------------
// y (rows, out) = x (rows, in) w^T + b, in double.
std::vector<double> ref_linear(const std::vector<double>& x, const std::vector<double>& w,
                               const std::vector<double>& b, int64_t rows, int64_t in, int64_t out) {
  std::vector<double> y(size_t(rows * out));
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b.empty() ? 0.0 : b[size_t(o)];
      for (int64_t i = 0; i < in; ++i) s += x[size_t(r * in + i)] * w[size_t(o * in + i)];
      y[size_t(r * out + o)] = s;
    }
  return y;
}

TEST(Linear, ForwardShapesAndValues) {
  const auto xv = det_values(24, 4), wv = det_values(8, 5), bv = det_values(2, 6);
  for (DType t : {DType::float64, DType::float32}) {
    const auto tol = nn_test::tol_for(t);
    const auto xr = rounded(xv, t), wr = rounded(wv, t), br = rounded(bv, t);
    const Tensor w = make(wv, {2, 4}, t), b = make(bv, {2}, t);
    // (6, 4) -> (6, 2), with and without bias
    Tensor y = linear(make(xv, {6, 4}, t), w, b);
    EXPECT_EQ(y.shape(), (Shape{6, 2}));
    expect_close(y.to_vector<double>(), ref_linear(xr, wr, br, 6, 4, 2), tol.atol * 4, tol.rtol * 4, "2-D");
    y = linear(make(xv, {6, 4}, t), w);
    expect_close(y.to_vector<double>(), ref_linear(xr, wr, {}, 6, 4, 2), tol.atol * 4, tol.rtol * 4,
                 "no bias");
    // (2, 3, 4) -> (2, 3, 2)
    y = linear(make(xv, {2, 3, 4}, t), w, b);
    EXPECT_EQ(y.shape(), (Shape{2, 3, 2}));
    expect_close(y.to_vector<double>(), ref_linear(xr, wr, br, 6, 4, 2), tol.atol * 4, tol.rtol * 4, "3-D");
    // (4) -> (2)
    y = linear(make({xv.begin(), xv.begin() + 4}, {4}, t), w, b);
    EXPECT_EQ(y.shape(), (Shape{2}));
    expect_close(y.to_vector<double>(), ref_linear({xr.begin(), xr.begin() + 4}, wr, br, 1, 4, 2),
                 tol.atol * 4, tol.rtol * 4, "1-D");
  }
}

TEST(Linear, GradientsMatchFiniteDifferences) {
  expect_grad_matches_fd([](const std::vector<Tensor>& v) { return linear(v[0], v[1], v[2]); },
                         {{det_values(12, 7), {3, 4}}, {det_values(8, 8), {2, 4}}, {det_values(2, 9), {2}}});
  expect_grad_matches_fd([](const std::vector<Tensor>& v) { return linear(v[0], v[1]); },
                         {{det_values(12, 10), {2, 2, 3}}, {det_values(6, 11), {2, 3}}});
}

TEST(Linear, Errors) {
  const Tensor x = make(det_values(6, 1), {2, 3});
  expect_error([&] { linear(x, make({1, 2, 3}, {3})); }, {"linear", "(out, in)", "(3,)"});
  expect_error([&] { linear(x, make(det_values(8, 2), {2, 4})); }, {"linear", "(2, 3)", "4"});
  expect_error(
      [&] {
        linear(x, make(det_values(6, 2), {2, 3}), make({1, 2, 3}, {3}));
      },
      {"linear", "bias", "(2,)", "(3,)"});
}

// ---- batch norm ------------------------------------------------------------------------------------
struct BnRef {
  std::vector<double> out, mean, var, running_mean, running_var;
};
// x viewed as (n, C); training statistics in double.
BnRef ref_batch_norm(const std::vector<double>& x, int64_t c, const std::vector<double>& w,
                     const std::vector<double>& b, const std::vector<double>& rm,
                     const std::vector<double>& rv, double momentum, double eps) {
  const int64_t n = int64_t(x.size()) / c;
  BnRef r{
      std::vector<double>(x.size()), std::vector<double>(size_t(c)), std::vector<double>(size_t(c)), {}, {}};
  for (int64_t j = 0; j < c; ++j) {
    double s = 0;
    for (int64_t i = 0; i < n; ++i) s += x[size_t(i * c + j)];
    const double m = s / double(n);
    double q = 0;
    for (int64_t i = 0; i < n; ++i) q += (x[size_t(i * c + j)] - m) * (x[size_t(i * c + j)] - m);
    const double v = q / double(n);
    r.mean[size_t(j)] = m;
    r.var[size_t(j)] = v;
    for (int64_t i = 0; i < n; ++i)
      r.out[size_t(i * c + j)] =
          (x[size_t(i * c + j)] - m) / std::sqrt(v + eps) * w[size_t(j)] + b[size_t(j)];
    r.running_mean.push_back((1 - momentum) * rm[size_t(j)] + momentum * m);
    r.running_var.push_back((1 - momentum) * rv[size_t(j)] + momentum * q / double(n - 1));
  }
  return r;
}

TEST(BatchNorm, TrainingForwardAndRunningStats) {
  const std::vector<double> w = {1.5, -0.5, 2}, b = {0.1, 0.2, -0.3}, rm = {0.5, -1, 0}, rv = {1, 2, 0.5};
  for (Shape shape : {Shape{5, 3}, Shape{2, 2, 3, 3}}) {
    const auto xv = det_values(size_t(numel(shape)), 12, -2, 3);
    for (DType t : {DType::float64, DType::float32}) {
      const auto xr = rounded(xv, t);
      const BnRef want = ref_batch_norm(xr, 3, w, b, rm, rv, 0.2, 1e-3);
      const BatchNormResult r = batch_norm(make(xv, shape, t), make(w, {3}, t), make(b, {3}, t),
                                           make(rm, {3}, t), make(rv, {3}, t), true, 0.2, 1e-3);
      const auto tol = nn_test::tol_for(t);
      const std::string what = to_string(shape) + " " + dtype_name(t);
      EXPECT_EQ(r.out.shape(), shape);
      EXPECT_EQ(r.out.dtype(), t);
      expect_close(r.out.to_vector<double>(), want.out, 8 * tol.atol, 8 * tol.rtol, "out " + what);
      expect_close(r.batch_mean.to_vector<double>(), want.mean, 8 * tol.atol, 8 * tol.rtol, "mean " + what);
      expect_close(r.batch_var.to_vector<double>(), want.var, 8 * tol.atol, 8 * tol.rtol, "var " + what);
      expect_close(r.new_running_mean.to_vector<double>(), want.running_mean, 8 * tol.atol, 8 * tol.rtol,
                   "running_mean " + what);
      expect_close(r.new_running_var.to_vector<double>(), want.running_var, 8 * tol.atol, 8 * tol.rtol,
                   "running_var " + what);
      EXPECT_FALSE(r.new_running_mean.requires_grad());
    }
  }
}

// A large mean (1000 + values of std ~1): the statistics take one pass (sum and sum of squares),
// so float32 x must be accumulated in float64: E[x^2] - E[x]^2 in float32 would lose ~6% of the
// variance here. The batch var matches a two-pass float64 computation to ~1e-5 relative, and the
// gradients stay float32 and match the double formula.
TEST(BatchNorm, LargeMeanStatisticsArePrecise) {
  const int64_t c = 4;
  const Shape shape{64, 8, 8, c};  // n = 4096 values per channel
  auto xv = det_values(size_t(numel(shape)), 21, -1.7, 1.7);
  for (size_t i = 0; i < xv.size(); ++i) xv[i] += 1000.0 + 10.0 * double(i % size_t(c));
  const auto xr = rounded(xv, DType::float32);
  const std::vector<double> w = {1.5, -0.5, 2, 1}, b = {0.1, 0.2, -0.3, 0};
  const std::vector<double> rm = {0, 0, 0, 0}, rv = {1, 1, 1, 1};
  const BnRef want = ref_batch_norm(xr, c, w, b, rm, rv, 0.1, 1e-5);
  Tensor x = make(xv, shape, DType::float32), wt = make(w, {c}, DType::float32);
  Tensor bt = make(b, {c}, DType::float32);
  for (Tensor* t : {&x, &wt, &bt}) t->set_requires_grad();
  const BatchNormResult r =
      batch_norm(x, wt, bt, make(rm, {c}, DType::float32), make(rv, {c}, DType::float32), true, 0.1, 1e-5);
  expect_close(r.batch_var.to_vector<double>(), want.var, 0, 1e-5, "large-mean var");
  expect_close(r.batch_mean.to_vector<double>(), want.mean, 0, 1e-7, "large-mean mean");
  expect_close(r.new_running_var.to_vector<double>(), want.running_var, 0, 1e-5, "large-mean running var");
  expect_close(r.out.to_vector<double>(), want.out, 1e-4, 1e-4, "large-mean out");
  // Backward with an upstream gradient g: in double, with x_hat = (x - mean) / sqrt(var + eps),
  //   dx = w / sqrt(var + eps) (g - mean(g) - x_hat mean(g x_hat)),  dw = sum(g x_hat),  db = sum(g).
  const auto gv = det_values(xv.size(), 22, -1, 1);
  const auto gr = rounded(gv, DType::float32);
  const int64_t n = int64_t(xv.size()) / c;
  std::vector<double> dx(xv.size()), dw(static_cast<size_t>(c)), db(static_cast<size_t>(c));
  for (int64_t j = 0; j < c; ++j) {
    const double rs = 1 / std::sqrt(want.var[size_t(j)] + 1e-5);
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = size_t(i * c + j);
      sg += gr[k];
      sgx += gr[k] * (xr[k] - want.mean[size_t(j)]) * rs;
    }
    dw[size_t(j)] = sgx;
    db[size_t(j)] = sg;
    for (int64_t i = 0; i < n; ++i) {
      const size_t k = size_t(i * c + j);
      const double xh = (xr[k] - want.mean[size_t(j)]) * rs;
      dx[k] = w[size_t(j)] * rs * (gr[k] - sg / double(n) - xh * sgx / double(n));
    }
  }
  r.out.backward(make(gv, shape, DType::float32));
  EXPECT_EQ(x.grad().dtype(), DType::float32);
  EXPECT_EQ(wt.grad().dtype(), DType::float32);
  expect_close(x.grad().to_vector<double>(), dx, 1e-5, 1e-4, "large-mean dx");
  expect_close(wt.grad().to_vector<double>(), dw, 1e-3, 1e-4, "large-mean dw");
  expect_close(bt.grad().to_vector<double>(), db, 1e-3, 1e-4, "large-mean db");
}

TEST(BatchNorm, EvaluationUsesRunningStats) {
  const std::vector<double> xv = {1, 2, 3, -4, 0.5, 6}, rm = {0.5, -1, 2}, rv = {4, 0.25, 1};
  const std::vector<double> w = {2, 1, -1}, b = {0, 1, 0.5};
  const Tensor rmt = make(rm, {3}), rvt = make(rv, {3});
  const BatchNormResult r =
      batch_norm(make(xv, {2, 3}), make(w, {3}), make(b, {3}), rmt, rvt, false, 0.1, 0.0);
  std::vector<double> want;
  for (size_t i = 0; i < xv.size(); ++i)
    want.push_back((xv[i] - rm[i % 3]) / std::sqrt(rv[i % 3]) * w[i % 3] + b[i % 3]);
  expect_close(r.out.to_vector<double>(), want, 1e-15, 1e-15, "eval");
  EXPECT_TRUE(r.new_running_mean.same(rmt));
  EXPECT_TRUE(r.new_running_var.same(rvt));
  EXPECT_FALSE(r.batch_mean.defined());
}

TEST(BatchNorm, WithoutAffineOrRunningStats) {
  const auto xv = det_values(8, 13);  // (4, 2)
  const BatchNormResult r =
      batch_norm(make(xv, {4, 2}), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  const BnRef want = ref_batch_norm(xv, 2, {1, 1}, {0, 0}, {0, 0}, {0, 0}, 0.1, 1e-5);
  expect_close(r.out.to_vector<double>(), want.out, 1e-14, 1e-13, "no affine");
  EXPECT_FALSE(r.new_running_mean.defined());
  EXPECT_FALSE(r.new_running_var.defined());
}

TEST(BatchNorm, Float16InputKeepsItsDtype) {
  const auto xv = det_values(12, 14, -2, 2);
  const auto xr = rounded(xv, DType::float16);
  const BatchNormResult r =
      batch_norm(make(xv, {4, 3}, DType::float16), Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-5);
  EXPECT_EQ(r.out.dtype(), DType::float16);
  const BnRef want = ref_batch_norm(xr, 3, {1, 1, 1}, {0, 0, 0}, {0, 0, 0}, {0, 0, 0}, 0.1, 1e-5);
  expect_close(r.out.to_vector<double>(), want.out, 2e-3, 2e-3, "float16");
}

TEST(BatchNorm, TrainingGradientsMatchFiniteDifferences) {
  auto f = [](const std::vector<Tensor>& v) {
    return batch_norm(v[0], v[1], v[2], Tensor(), Tensor(), true, 0.1, 1e-3).out;
  };
  expect_grad_matches_fd(
      f, {{det_values(12, 15, -2, 2), {4, 3}}, {{1.5, -0.5, 2}, {3}}, {{0.1, 0.2, -0.3}, {3}}});
  expect_grad_matches_fd(f,
                         {{det_values(16, 16, -2, 2), {2, 2, 2, 2}}, {{0.7, 1.2}, {2}}, {{0.3, -0.1}, {2}}});
  // The batch statistics are differentiable outputs too.
  expect_grad_matches_fd(
      [](const std::vector<Tensor>& v) {
        const auto r = batch_norm(v[0], Tensor(), Tensor(), Tensor(), Tensor(), true, 0.1, 1e-3);
        return r.batch_mean * 2.0 + r.batch_var;
      },
      {{det_values(9, 17), {3, 3}}});
}

// layer_norm: over the last dim and the last two, with and without the affine parameters; every
// float dtype against the same computation in double.
TEST(LayerNorm, ForwardEveryDtypeAndGradientsMatchFiniteDifferences) {
  const Shape s{3, 2, 4};
  const auto x = det_values(24, 21, -2, 3);
  for (int64_t axes : {1, 2}) {
    const int64_t n = axes == 1 ? 4 : 8;
    std::vector<double> want;
    for (size_t r = 0; r < x.size(); r += size_t(n)) {
      double mean = 0, var = 0;
      for (int64_t k = 0; k < n; ++k) mean += x[r + size_t(k)] / double(n);
      for (int64_t k = 0; k < n; ++k) var += std::pow(x[r + size_t(k)] - mean, 2) / double(n);
      for (int64_t k = 0; k < n; ++k) want.push_back((x[r + size_t(k)] - mean) / std::sqrt(var + 1e-5));
    }
    for (DType t : {DType::float64, DType::float32, DType::float16, DType::bfloat16}) {
      const Tensor y = layer_norm(make(x, s).cast(t), Tensor(), Tensor(), axes);
      EXPECT_EQ(y.dtype(), t);
      const double tol = t == DType::float64   ? 1e-12
                         : t == DType::float32 ? 1e-5
                         : t == DType::float16 ? 2e-2
                                               : 8e-2;
      expect_close(y.to_vector<double>(), want, tol, tol,
                   detail::cat("layer_norm ", dtype_name(t), " axes ", axes));
    }
  }
  auto f = [](const std::vector<Tensor>& v) { return layer_norm(v[0], v[1], v[2], 1, 1e-3); };
  expect_grad_matches_fd(f, {{x, s}, {{1.5, -0.5, 2, 0.3}, {4}}, {{0.1, 0.2, -0.3, 1}, {4}}});
  expect_grad_matches_fd(
      [](const std::vector<Tensor>& v) { return layer_norm(v[0], v[1], Tensor(), 2, 1e-3); },
      {{x, s}, {det_values(8, 22), {2, 4}}});
  expect_grad_matches_fd([](const std::vector<Tensor>& v) { return layer_norm(v[0]); }, {{x, s}});
}

TEST(BatchNorm, EvaluationGradientsMatchFiniteDifferences) {
  const Tensor rm = make({0.5, -1, 2}, {3}), rv = make({4, 0.25, 1}, {3});
  expect_grad_matches_fd(
      [&](const std::vector<Tensor>& v) {
        return batch_norm(v[0], v[1], v[2], rm, rv, false, 0.1, 1e-5).out;
      },
      {{det_values(6, 18), {2, 3}}, {{1.5, -0.5, 2}, {3}}, {{0.1, 0.2, -0.3}, {3}}});
}

TEST(BatchNorm, Errors) {
  const Tensor x = make(det_values(6, 1), {2, 3}), c3 = make({1, 1, 1}, {3});
  expect_error(
      [&] {
        batch_norm(make({1, 2, 3}, {3}), c3, c3, c3, c3, true);
      },
      {"batch_norm", "(N, C)", "(3,)"});
  expect_error(
      [&] {
        batch_norm(x, make({1, 1}, {2}), c3, c3, c3, true);
      },
      {"batch_norm", "weight", "(3,)", "(2,)"});
  expect_error(
      [&] {
        batch_norm(make({1, 2, 3}, {1, 3}), c3, c3, c3, c3, true);
      },
      {"batch_norm", "more than one value per channel"});
  expect_error([&] { batch_norm(x, c3, c3, Tensor(), Tensor(), false); },
               {"batch_norm", "running_mean", "required"});
  expect_error([&] { batch_norm(x, c3, c3, c3, c3, true, 1.5); }, {"batch_norm", "momentum"});
}

// ---- dropout ---------------------------------------------------------------------------------------
TEST(Dropout, MaskIsPhiloxUniformAtLeastP) {
  const uint64_t seed = 1234;
  const double p = 0.3;
  const auto xv = det_values(20, 19, 0.5, 2);
  for (DType t : {DType::float32, DType::float64}) {
    manual_seed(seed);
    const auto y = dropout(make(xv, {4, 5}, t), p, true).to_vector<double>();
    const auto xr = rounded(xv, t);
    const double scale = rounded({1 / (1 - p)}, t)[0];
    std::vector<double> want;
    // The first draw after manual_seed uses stream 0; element i keeps iff u_i >= p.
    for (size_t i = 0; i < xv.size(); ++i)
      want.push_back(philox_uniform_f32(seed, 0, i) >= float(p) ? rounded({xr[i] * scale}, t)[0] : 0.0);
    expect_close(y, want, 0, 0, std::string("dropout ") + dtype_name(t));
  }
}

TEST(Dropout, ReproducibleUnderManualSeed) {
  const Tensor x = Tensor::ones({64});
  manual_seed(7);
  const auto a = dropout(x, 0.5, true).to_vector<float>();
  const auto b = dropout(x, 0.5, true).to_vector<float>();  // next stream: a different mask
  manual_seed(7);
  const auto c = dropout(x, 0.5, true).to_vector<float>();
  EXPECT_EQ(a, c);
  EXPECT_NE(a, b);
}

TEST(Dropout, MeanIsRoughlyPreserved) {
  manual_seed(3);
  const Tensor y = dropout(Tensor::ones({20000}), 0.25, true);
  EXPECT_NEAR(y.mean().item<double>(), 1.0, 0.03);
  EXPECT_NEAR((y.eq(Tensor::zeros({})).cast(DType::float32)).mean().item<double>(), 0.25, 0.015);
}

TEST(Dropout, IdentityWhenNotTrainingOrPZero) {
  const Tensor x = make({1, 2, 3}, {3});
  EXPECT_TRUE(dropout(x, 0.5, false).same(x));
  EXPECT_TRUE(dropout(x, 0.0, true).same(x));
  const Tensor x4 = make(det_values(16, 1), {1, 2, 2, 4});
  EXPECT_TRUE(spatial_dropout(x4, 0.5, false).same(x4));
}

TEST(Dropout, POneGivesZerosAndZeroGradient) {
  Tensor x = make({1, -2, 3}, {3});
  x.set_requires_grad();
  const Tensor y = dropout(x, 1.0, true);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(aether::gradients(y.sum(), {x})[0].to_vector<double>(), (std::vector<double>{0, 0, 0}));
}

TEST(Dropout, GradientIsMaskTimesScale) {
  manual_seed(11);
  Tensor x = make(det_values(30, 20, 0.5, 1.5), {30});
  x.set_requires_grad();
  const Tensor y = dropout(x, 0.4, true);
  const auto yv = y.to_vector<double>();
  const auto g = aether::gradients(y.sum(), {x})[0].to_vector<double>();
  int dropped = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    EXPECT_DOUBLE_EQ(g[i], yv[i] == 0 ? 0.0 : 1 / 0.6) << i;
    dropped += yv[i] == 0;
  }
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, 30);
}

TEST(SpatialDropout, OneMaskPerSampleAndChannel) {
  const int64_t n = 3, h = 2, w = 3, c = 5;
  const auto xv = det_values(size_t(n * h * w * c), 21, 0.5, 2);
  const uint64_t seed = 99;
  manual_seed(seed);
  const auto y = spatial_dropout(make(xv, {n, h, w, c}, DType::float32), 0.5, true).to_vector<double>();
  const auto xr = rounded(xv, DType::float32);
  int kept = 0;
  for (int64_t in = 0; in < n; ++in)
    for (int64_t ic = 0; ic < c; ++ic) {
      const bool keep = philox_uniform_f32(seed, 0, uint64_t(in * c + ic)) >= 0.5f;  // mask (N, 1, 1, C)
      kept += keep;
      for (int64_t p = 0; p < h * w; ++p) {
        const size_t i = size_t((in * h * w + p) * c + ic);
        EXPECT_DOUBLE_EQ(y[i], keep ? rounded({xr[i] * 2}, DType::float32)[0] : 0.0)
            << in << "," << p << "," << ic;
      }
    }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, n * c);
  // A 3-D (N, L, C) input works the same way.
  EXPECT_EQ(spatial_dropout(Tensor::ones({2, 4, 3}), 0.5, true).shape(), (Shape{2, 4, 3}));
}

TEST(Dropout, Errors) {
  const Tensor x = Tensor::ones({2, 3});
  expect_error([&] { dropout(x, 1.5, true); }, {"dropout", "[0, 1]", "1.5"});
  expect_error([&] { dropout(x, -0.1, false); }, {"dropout", "[0, 1]"});
  expect_error([&] { spatial_dropout(x, 0.5, true); }, {"spatial_dropout", "(N, H, W, C)", "(2, 3)"});
  expect_error([&] { dropout(Tensor::from_vector<int32_t>({1}, {1}), 0.5, true); }, {"dropout", "float"});
}

}  // namespace
