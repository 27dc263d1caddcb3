// Tests of the losses and metrics in aether/ops/nn.h: one_hot, cross_entropy (index and probability
// labels, label smoothing), nll_loss, categorical_cross_entropy, mse_loss,
// binary_cross_entropy_with_logits, accuracy, binary_accuracy and top_k_accuracy: forward against double
// loops, finite-difference gradients in float64, stability with large logits, and error messages.
#include <gtest/gtest.h>

#include <algorithm>
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

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// mean over rows of -sum_k t_k log_softmax(z)_k for (rows, K) row-major logits z and targets t.
double ref_ce(const std::vector<double>& z, const std::vector<double>& t, int64_t k) {
  const int64_t rows = int64_t(z.size()) / k;
  double total = 0;
  for (int64_t r = 0; r < rows; ++r) {
    double m = -kInf;
    for (int64_t j = 0; j < k; ++j) m = std::max(m, z[size_t(r * k + j)]);
    double s = 0;
    for (int64_t j = 0; j < k; ++j) s += std::exp(z[size_t(r * k + j)] - m);
    for (int64_t j = 0; j < k; ++j) {
      const double tj = t[size_t(r * k + j)];
      if (tj != 0) total -= tj * (z[size_t(r * k + j)] - m - std::log(s));
    }
  }
  return total / double(rows);
}
// Smoothed one-hot targets (rows, K) for class indices.
std::vector<double> ref_targets(const std::vector<int64_t>& labels, int64_t k, double s) {
  std::vector<double> t;
  for (int64_t l : labels)
    for (int64_t j = 0; j < k; ++j) t.push_back((1 - s) * (j == l ? 1.0 : 0.0) + s / double(k));
  return t;
}

// ---- one_hot ---------------------------------------------------------------------------------------
TEST(OneHot, Values) {
  const Tensor oh = one_hot(Tensor::from_vector<int64_t>({2, 0, 1}, {3}), 3);
  EXPECT_EQ(oh.shape(), (Shape{3, 3}));
  EXPECT_EQ(oh.dtype(), DType::float32);
  EXPECT_EQ(oh.to_vector<double>(), (std::vector<double>{0, 0, 1, 1, 0, 0, 0, 1, 0}));
  const Tensor oh2 = one_hot(Tensor::from_vector<int32_t>({3, 0, 1, 1}, {2, 2}), 4, DType::boolean);
  EXPECT_EQ(oh2.shape(), (Shape{2, 2, 4}));
  EXPECT_EQ(oh2.dtype(), DType::boolean);
  EXPECT_EQ(oh2.to_vector<double>(), (std::vector<double>{0, 0, 0, 1, 1, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0}));
}

TEST(OneHot, Errors) {
  expect_error(
      [] {
        one_hot(Tensor::from_vector<int64_t>({0, 3}, {2}), 3);
      },
      {"one_hot", "label 3", "index 1", "[0, 3)"});
  expect_error([] { one_hot(Tensor::from_vector<int64_t>({-1}, {1}), 3); }, {"one_hot", "label -1"});
  expect_error([] { one_hot(make({1}, {1}), 3); }, {"one_hot", "int", "float64"});
  expect_error([] { one_hot(Tensor::from_vector<int64_t>({0}, {1}), 0); }, {"one_hot", "num_classes"});
}

// ---- cross_entropy ---------------------------------------------------------------------------------
TEST(CrossEntropy, IndexLabelsWithAndWithoutSmoothing) {
  const auto z = det_values(20, 1, -3, 3);  // (5, 4)
  const std::vector<int64_t> labels = {3, 0, 2, 2, 1};
  for (DType t : {DType::float64, DType::float32}) {
    const auto zr = rounded(z, t);
    for (double s : {0.0, 0.1, 1.0}) {
      for (DType lt : {DType::int64, DType::int32}) {
        const Tensor loss =
            cross_entropy(make(z, {5, 4}, t), Tensor::from_vector<int64_t>(labels, {5}).cast(lt), s);
        EXPECT_EQ(loss.shape(), Shape{});
        EXPECT_EQ(loss.dtype(), t);
        const auto tol = nn_test::tol_for(t);
        EXPECT_NEAR(loss.item<double>(), ref_ce(zr, ref_targets(labels, 4, s), 4), 4 * tol.rtol)
            << "smoothing " << s << " " << dtype_name(t) << " labels " << dtype_name(lt);
      }
    }
  }
}

TEST(CrossEntropy, ProbabilityLabels) {
  const auto z = det_values(12, 2, -2, 2);  // (3, 4)
  const std::vector<double> p = {0.1, 0.2, 0.3, 0.4, 0, 0, 1, 0, 0.25, 0.25, 0.5, 0};
  for (double s : {0.0, 0.2}) {
    std::vector<double> t;
    for (double v : p) t.push_back((1 - s) * v + s / 4);
    EXPECT_NEAR(cross_entropy(make(z, {3, 4}), make(p, {3, 4}), s).item<double>(), ref_ce(z, t, 4), 1e-14);
  }
}

TEST(CrossEntropy, ExtraBatchAxes) {
  const auto z = det_values(24, 3, -2, 2);  // (2, 3, 4)
  const std::vector<int64_t> labels = {0, 1, 2, 3, 3, 0};
  EXPECT_NEAR(
      cross_entropy(make(z, {2, 3, 4}), Tensor::from_vector<int64_t>(labels, {2, 3}), 0.05).item<double>(),
      ref_ce(z, ref_targets(labels, 4, 0.05), 4), 1e-14);
}

TEST(CrossEntropy, LargeLogitsStayFinite) {
  const std::vector<double> z = {1e4, -1e4, 5e3, 2e4, 2e4 - 3, -2e4};  // (2, 3)
  const std::vector<int64_t> labels = {2, 1};
  for (double s : {0.0, 0.1}) {
    const double got =
        cross_entropy(make(z, {2, 3}, DType::float32), Tensor::from_vector<int64_t>(labels, {2}), s)
            .item<double>();
    const double want = ref_ce(z, ref_targets(labels, 3, s), 3);
    EXPECT_TRUE(std::isfinite(got));
    EXPECT_NEAR(got, want, 1e-6 * want) << "smoothing " << s;
  }
  Tensor x = make(z, {2, 3}).detach();
  x.set_requires_grad();
  const auto g = aether::gradients(cross_entropy(x, Tensor::from_vector<int64_t>(labels, {2}), 0.1), {x})[0];
  for (double e : g.to_vector<double>()) EXPECT_TRUE(std::isfinite(e));
}

// Logits of -inf on classes with zero target (masking) give a finite loss and gradient; with
// smoothing those classes get target mass and the loss is +inf.
TEST(CrossEntropy, MinusInfLogitsOnZeroTargets) {
  Tensor z = make({0.5, -kInf, 1.0, -kInf, 2.0, 0.0}, {2, 3});
  z.set_requires_grad();
  const Tensor labels = Tensor::from_vector<int64_t>({0, 1}, {2});
  const Tensor loss = cross_entropy(z, labels);
  const double want = ref_ce({0.5, -kInf, 1.0, -kInf, 2.0, 0.0}, ref_targets({0, 1}, 3, 0), 3);
  EXPECT_NEAR(loss.item<double>(), want, 1e-14);
  for (double e : aether::gradients(loss, {z})[0].to_vector<double>()) EXPECT_FALSE(std::isnan(e));
  EXPECT_EQ(cross_entropy(z.detach(), labels, 0.1).item<double>(), kInf);
}

TEST(CrossEntropy, Float16Logits) {
  const auto z = det_values(12, 4, -3, 3);
  const auto zr = rounded(z, DType::float16);
  const std::vector<int64_t> labels = {1, 3, 0};
  const Tensor loss =
      cross_entropy(make(z, {3, 4}, DType::float16), Tensor::from_vector<int64_t>(labels, {3}));
  EXPECT_EQ(loss.dtype(), DType::float16);
  const double want = ref_ce(zr, ref_targets(labels, 4, 0), 4);
  EXPECT_NEAR(loss.item<double>(), want, 2e-3 * want);
}

TEST(CrossEntropy, GradientsMatchFiniteDifferences) {
  const Tensor labels = Tensor::from_vector<int64_t>({3, 0, 2}, {3});
  expect_grad_matches_fd([&](const std::vector<Tensor>& v) { return cross_entropy(v[0], labels, 0.15); },
                         {{det_values(12, 5, -2, 2), {3, 4}}});
  expect_grad_matches_fd([&](const std::vector<Tensor>& v) { return cross_entropy(v[0], labels); },
                         {{det_values(12, 6, -2, 2), {3, 4}}});
  // Probability labels: gradients w.r.t. both the logits and the targets.
  expect_grad_matches_fd(
      [](const std::vector<Tensor>& v) { return cross_entropy(v[0], v[1], 0.1); },
      {{det_values(8, 7, -2, 2), {2, 4}}, {{0.1, 0.2, 0.3, 0.4, 0.7, 0.1, 0.1, 0.1}, {2, 4}}});
}

// ---- nll_loss --------------------------------------------------------------------------------------
TEST(NllLoss, PicksTheLabelEntry) {
  const std::vector<double> lp = {-0.1, -2, -3, -kInf, -0.5, -1, -4, -0.2, -7};  // (3, 3)
  const Tensor loss = nll_loss(make(lp, {3, 3}), Tensor::from_vector<int32_t>({0, 1, 2}, {3}));
  EXPECT_DOUBLE_EQ(loss.item<double>(), (0.1 + 0.5 + 7) / 3);
  // nll_loss(log_softmax(z)) == cross_entropy(z).
  const auto z = det_values(12, 8);
  const Tensor labels = Tensor::from_vector<int64_t>({1, 1, 0}, {3});
  EXPECT_NEAR(nll_loss(log_softmax(make(z, {3, 4})), labels).item<double>(),
              ref_ce(z, ref_targets({1, 1, 0}, 4, 0), 4), 1e-14);
  expect_grad_matches_fd([&](const std::vector<Tensor>& v) { return nll_loss(v[0], labels); },
                         {{det_values(12, 9, -3, 0), {3, 4}}});
}

// ---- categorical_cross_entropy ---------------------------------------------------------------------
TEST(CategoricalCrossEntropy, ClampedLogOfProbabilities) {
  const std::vector<double> p = {0.2, 0.5, 0.3, 0.0, 1.0, 0.0};  // (2, 3); zeros clamp to eps
  const std::vector<double> t = {0, 1, 0, 0.5, 0, 0.5};
  const double eps = 1e-7;
  double want = 0;
  for (size_t i = 0; i < p.size(); ++i) want -= t[i] * std::log(std::clamp(p[i], eps, 1 - eps));
  want /= 2;
  EXPECT_NEAR(categorical_cross_entropy(make(p, {2, 3}), make(t, {2, 3})).item<double>(), want, 1e-14);
  // Index targets.
  const double want_idx = -(std::log(0.5) + std::log(1 - eps)) / 2;
  EXPECT_NEAR(
      categorical_cross_entropy(make(p, {2, 3}), Tensor::from_vector<int64_t>({1, 1}, {2})).item<double>(),
      want_idx, 1e-14);
  EXPECT_NEAR(
      categorical_cross_entropy(make(p, {2, 3}, DType::float32), Tensor::from_vector<int64_t>({1, 1}, {2}))
          .item<double>(),
      want_idx, 1e-6);
  expect_grad_matches_fd(
      [&](const std::vector<Tensor>& v) {
        return categorical_cross_entropy(v[0], make(t, {2, 3}));
      },
      {{{0.2, 0.5, 0.3, 0.1, 0.6, 0.3}, {2, 3}}});
}

// ---- mse_loss --------------------------------------------------------------------------------------
TEST(MseLoss, ForwardAndGradients) {
  const auto a = det_values(6, 10), b = det_values(6, 11);
  double want = 0;
  for (size_t i = 0; i < a.size(); ++i) want += (a[i] - b[i]) * (a[i] - b[i]);
  EXPECT_NEAR(mse_loss(make(a, {2, 3}), make(b, {2, 3})).item<double>(), want / 6, 1e-15);
  expect_grad_matches_fd([](const std::vector<Tensor>& v) { return mse_loss(v[0], v[1]); },
                         {{a, {2, 3}}, {b, {2, 3}}});
}

// ---- binary_cross_entropy_with_logits --------------------------------------------------------------
// mean over elements of -[t ln sigmoid(z) + (1 - t) ln(1 - sigmoid(z))], in double, the textbook way.
double ref_bce(const std::vector<double>& z, const std::vector<double>& t, double smoothing = 0) {
  double total = 0;
  for (size_t i = 0; i < z.size(); ++i) {
    const double p = 1 / (1 + std::exp(-z[i])), ti = t[i] * (1 - smoothing) + smoothing / 2;
    total -= ti * std::log(p) + (1 - ti) * std::log(1 - p);
  }
  return total / double(z.size());
}

TEST(BinaryCrossEntropy, AgainstTheTextbookFormula) {
  const auto z = det_values(12, 21, -4, 4);
  const std::vector<double> t = {0, 1, 1, 0, 0.25, 1, 0, 0, 1, 0.5, 1, 0};  // 0/1 and soft targets
  for (const double s : {0.0, 0.2}) {
    EXPECT_NEAR(binary_cross_entropy_with_logits(make(z, {3, 4}), make(t, {3, 4}), s).item<double>(),
                ref_bce(z, t, s), 1e-14)
        << "label_smoothing " << s;
    // Any shape: one logit per sample (N,) as well as (N, K).
    EXPECT_NEAR(binary_cross_entropy_with_logits(make(z, {12}), make(t, {12}), s).item<double>(),
                ref_bce(z, t, s), 1e-14);
  }
  const Tensor f32 =
      binary_cross_entropy_with_logits(make(z, {3, 4}, DType::float32), make(t, {3, 4}, DType::float32), 0.2);
  EXPECT_EQ(f32.dtype(), DType::float32);
  EXPECT_NEAR(f32.item<double>(), ref_bce(z, t, 0.2), 1e-6);
  const Tensor bf16 =
      binary_cross_entropy_with_logits(make(z, {3, 4}, DType::bfloat16), make(t, {3, 4}, DType::float32));
  EXPECT_EQ(bf16.dtype(), DType::bfloat16);
  EXPECT_NEAR(bf16.item<double>(), ref_bce(rounded(z, DType::bfloat16), t), 2e-2);
  for (const double s : {0.0, 0.3})
    expect_grad_matches_fd(
        [&](const std::vector<Tensor>& v) { return binary_cross_entropy_with_logits(v[0], v[1], s); },
        {{z, {3, 4}}, {t, {3, 4}}});
}

// weights: each element's loss times its weight (broadcast), still the mean over the elements.
TEST(BinaryCrossEntropy, WeightsScaleEachElementsLoss) {
  const auto z = det_values(6, 23, -3, 3);
  const std::vector<double> t = {0, 1, 1, 0, 0.3, 1}, w = {0.5, 2, 1, 0, 3, 1};
  double want = 0;
  for (size_t i = 0; i < z.size(); ++i) want += w[i] * ref_bce({z[i]}, {t[i]});
  want /= 6;
  EXPECT_NEAR(
      binary_cross_entropy_with_logits(make(z, {2, 3}), make(t, {2, 3}), 0, make(w, {2, 3})).item<double>(),
      want, 1e-14);
  // A (2, 1) column: one weight per row.
  double rows = 0;
  for (size_t i = 0; i < z.size(); ++i) rows += (i < 3 ? 2.0 : 0.25) * ref_bce({z[i]}, {t[i]});
  EXPECT_NEAR(binary_cross_entropy_with_logits(make(z, {2, 3}), make(t, {2, 3}), 0, make({2.0, 0.25}, {2, 1}))
                  .item<double>(),
              rows / 6, 1e-14);
  expect_grad_matches_fd(
      [&](const std::vector<Tensor>& v) { return binary_cross_entropy_with_logits(v[0], v[1], 0.1, v[2]); },
      {{z, {2, 3}}, {t, {2, 3}}, {w, {2, 3}}});
  expect_error(
      [&] {
        binary_cross_entropy_with_logits(make(z, {2, 3}), make(t, {2, 3}), 0, make({1, 2}, {2}));
      },
      {"binary_cross_entropy_with_logits", "weights", "(2,)", "(2, 3)"});
}

TEST(BinaryCrossEntropy, LargeLogitsStayFinite) {
  // sigmoid(+-100) rounds to 1 or 0, so the textbook formula gives inf or NaN here; the loss is
  // |z| for a wrong sign and e^-|z| (about 0) for a right one, with gradient sigmoid(z) - t.
  const std::vector<double> z = {100, -100, 100, -100, 30, -30};
  const std::vector<double> t = {0, 1, 1, 0, 0, 0};
  const double want = (100 + 100 + 30 + std::exp(-100) * 2 + std::log1p(std::exp(-30)) * 2) / 6;
  for (const DType d : {DType::float64, DType::float32}) {
    Tensor x = make(z, {6}, d);
    x.set_requires_grad();
    const Tensor loss = binary_cross_entropy_with_logits(x, make(t, {6}, d));
    EXPECT_NEAR(loss.item<double>(), want, want * 1e-6) << dtype_name(d);
    loss.backward();
    const auto g = x.grad().to_vector<double>();
    for (size_t i = 0; i < z.size(); ++i)
      EXPECT_NEAR(g[i], (1 / (1 + std::exp(-z[i])) - t[i]) / 6, 1e-7) << dtype_name(d) << " element " << i;
  }
}

// ---- metrics ---------------------------------------------------------------------------------------
TEST(BinaryAccuracy, SignOfTheLogitAgainstTheTarget) {
  // A logit > 0 predicts 1 (a logit of 0, sigmoid 0.5, predicts 0); a target > 0.5 is a 1.
  const Tensor z = make({2.0, -1.0, 0.0, 0.5, 3.0, 4.0}, {3, 2}, DType::float32);
  const Tensor t = make({1, 0, 0, 0, 0.5, 0.7}, {3, 2}, DType::float32);
  const Tensor acc = binary_accuracy(z, t);
  EXPECT_EQ(acc.dtype(), DType::float32);
  EXPECT_FLOAT_EQ(float(acc.item<double>()), 4.0f / 6);  // misses: 0.5 (predicts 1) against 0; 3 against 0.5
}

TEST(Accuracy, FractionOfArgmaxHits) {
  const Tensor z = make({0.1, 0.9, 0.0,  //
                         2.0, 1.0, 3.0,  //
                         5.0, 5.0, 1.0,  // tie: the first maximum (class 0) wins
                         0.0, -1.0, -2.0},
                        {4, 3}, DType::float32);
  const Tensor acc = accuracy(z, Tensor::from_vector<int64_t>({1, 0, 1, 0}, {4}));
  EXPECT_EQ(acc.dtype(), DType::float32);
  EXPECT_DOUBLE_EQ(acc.item<double>(), 0.5);  // rows 0 and 3 right
  EXPECT_DOUBLE_EQ(accuracy(z, Tensor::from_vector<int32_t>({1, 2, 0, 0}, {4})).item<double>(), 1.0);
  // One-hot float labels mean the same as their argmax.
  const Tensor oh = make({0, 1, 0, 1, 0, 0, 0, 1, 0, 1, 0, 0}, {4, 3});
  EXPECT_DOUBLE_EQ(accuracy(z, oh).item<double>(), 0.5);
}

TEST(TopKAccuracy, CountsStrictlyLargerLogits) {
  const Tensor z = make({0.1, 0.9, 0.0, 0.5,     // label 3: 1 larger -> top-2 hit, top-1 miss
                         2.0, 1.0, 3.0, 4.0,     // label 1: 3 larger -> miss for k <= 3
                         5.0, 5.0, 5.0, 1.0,     // label 2 tied with two others: 0 strictly larger -> hit
                         0.0, -1.0, -2.0, 7.0},  // label 3: hit
                        {4, 4});
  const Tensor labels = Tensor::from_vector<int64_t>({3, 1, 2, 3}, {4});
  EXPECT_DOUBLE_EQ(top_k_accuracy(z, labels, 1).item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(top_k_accuracy(z, labels, 2).item<double>(), 0.75);
  EXPECT_DOUBLE_EQ(top_k_accuracy(z, labels, 3).item<double>(), 0.75);
  EXPECT_DOUBLE_EQ(top_k_accuracy(z, labels, 4).item<double>(), 1.0);
  EXPECT_DOUBLE_EQ(top_k_accuracy(z, labels, 10).item<double>(), 1.0);
  // Without ties top-1 is accuracy.
  const auto r = det_values(40, 12);
  const Tensor zr = make(r, {10, 4});
  const Tensor lr = Tensor::from_vector<int64_t>({0, 1, 2, 3, 0, 1, 2, 3, 0, 1}, {10});
  EXPECT_DOUBLE_EQ(top_k_accuracy(zr, lr, 1).item<double>(), accuracy(zr, lr).item<double>());
}

TEST(TopKAccuracy, NaNLabelLogitIsAMiss) {
  const Tensor z = make({kNaN, 1, 2, 0, kNaN, 1}, {2, 3});
  // Row 0: the label's logit is NaN -> miss. Row 1: label 2 (logit 1) has no larger logit (the NaN is
  // ignored) -> hit.
  EXPECT_DOUBLE_EQ(top_k_accuracy(z, Tensor::from_vector<int64_t>({0, 2}, {2}), 2).item<double>(), 0.5);
}

// ---- errors ----------------------------------------------------------------------------------------
TEST(Losses, Errors) {
  const Tensor z = make(det_values(6, 1), {2, 3});
  const Tensor labels = Tensor::from_vector<int64_t>({0, 2}, {2});
  expect_error([&] { cross_entropy(make({1, 2, 3}, {3}), labels); }, {"cross_entropy", "(N, K)", "(3,)"});
  expect_error(
      [&] {
        cross_entropy(z, Tensor::from_vector<int64_t>({0, 1, 2}, {3}));
      },
      {"cross_entropy", "labels must have shape (2,)", "(3,)"});
  expect_error(
      [&] {
        cross_entropy(z, make(det_values(4, 2), {2, 2}));
      },
      {"cross_entropy", "the scores' shape (2, 3)", "(2, 2)"});
  expect_error([&] { cross_entropy(z, Tensor::from_vector<int64_t>({0, 3}, {2})); }, {"one_hot", "label 3"});
  expect_error([&] { cross_entropy(z, labels, 1.5); }, {"cross_entropy", "label_smoothing", "1.5"});
  expect_error(
      [&] {
        cross_entropy(z, Tensor::from_vector<bool>({true, false}, {2}));
      },
      {"cross_entropy", "bool"});
  expect_error(
      [&] {
        cross_entropy(Tensor::from_vector<int64_t>({1, 2}, {1, 2}), labels);
      },
      {"cross_entropy", "float"});
  expect_error([&] { nll_loss(z, make({0, 1}, {2})); }, {"nll_loss", "int class-index labels"});
  expect_error([&] { categorical_cross_entropy(z, labels, 0.7); }, {"categorical_cross_entropy", "eps"});
  expect_error([&] { mse_loss(z, make({1, 2}, {2})); }, {"mse_loss", "(2, 3)", "(2,)", "same shape"});
  const char* bce = "binary_cross_entropy_with_logits";
  expect_error(
      [&] {
        binary_cross_entropy_with_logits(z, make({1, 2}, {2}));
      },
      {bce, "(2, 3)", "(2,)", "same shape"});
  expect_error([&] { binary_cross_entropy_with_logits(z, z, 1.5); }, {bce, "label_smoothing", "1.5"});
  expect_error(
      [&] {
        binary_cross_entropy_with_logits(z, Tensor::zeros({2, 3}, DType::int64));
      },
      {bce, "float targets", "int64"});
  expect_error([&] { binary_accuracy(z, make({1, 2}, {2})); }, {"binary_accuracy", "same shape"});
  expect_error([&] { accuracy(z, Tensor::from_vector<int64_t>({0}, {1})); }, {"accuracy", "(2,)", "(1,)"});
  expect_error([&] { top_k_accuracy(z, labels, 0); }, {"top_k_accuracy", "k must be >= 1"});
}

}  // namespace
