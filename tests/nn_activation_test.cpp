// Tests of the composite activations in aether/ops/nn.h: forward against std:: math in double for
// every float dtype, finite-difference gradients in float64, NaN/inf behaviour, finite gradients
// at large |x|, and ReLU's backward with a NaN upstream gradient.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/ops/nn.h"
#include "nn_test_util.h"

using namespace aether;
using nn_test::expect_close;
using nn_test::make;
using nn_test::rounded;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

double ref_gelu(double x) { return 0.5 * x * std::erfc(-x / std::numbers::sqrt2); }
double ref_gelu_tanh(double x) {
  return 0.5 * x * (1 + std::tanh(std::sqrt(2 / std::numbers::pi) * (x + 0.044715 * x * x * x)));
}
double ref_softplus(double x, double beta, double threshold) {
  return beta * x > threshold ? x : std::log1p(std::exp(beta * x)) / beta;
}

struct Activation {
  std::string name;
  std::function<Tensor(const Tensor&)> f;
  std::function<double(double)> ref;
  std::vector<double> inputs;       // forward test points (float32/float64)
  std::vector<double> inputs16;     // forward test points for float16/bfloat16 (in their range)
  std::vector<double> grad_points;  // float64 finite-difference points (away from kinks)
};

const std::vector<double> kWide = {-30,  -9.5, -5,  -2.5, -1.2, -1, -0.7, -0.3, -1e-5, 0,
                                   1e-8, 0.2,  0.5, 0.99, 1.01, 2,  3.7,  6,    12,    40};
const std::vector<double> kNarrow = {-6, -2.5, -1.2, -0.7, -0.3, -0.01, 0, 0.2, 0.5, 1.5, 3, 6};
const std::vector<double> kGrad = {-3.1, -1.3, -0.45, -0.02, 0.03, 0.6, 0.999, 1.7, 2.9, 5.5};

std::vector<Activation> activations() {
  return {
      {"leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.1); },
       [](double x) { return x < 0 ? 0.1 * x : x; }, kWide, kNarrow, kGrad},
      {"elu", [](const Tensor& x) { return elu(x, 1.5); },
       [](double x) { return x > 0 ? x : 1.5 * std::expm1(x); }, kWide, kNarrow, kGrad},
      {"erf",
       [](const Tensor& x) { return aether::erf(x); },
       [](double x) { return std::erf(x); },
       kWide,
       kNarrow,
       {-3.1, -1.3, -1.0000003, -0.45, -0.02, 0.03, 0.6, 0.999, 1.7, 2.9, 5.5}},
      {"erfc", [](const Tensor& x) { return aether::erfc(x); }, [](double x) { return std::erfc(x); }, kWide,
       kNarrow, kGrad},
      {"gelu", [](const Tensor& x) { return gelu(x); }, ref_gelu, kWide, kNarrow, kGrad},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, true); }, ref_gelu_tanh, kWide, kNarrow, kGrad},
      {"softplus",
       [](const Tensor& x) { return softplus(x, 2.0, 20.0); },
       [](double x) { return ref_softplus(x, 2.0, 20.0); },
       kWide,
       kNarrow,
       {-3.1, -1.3, -0.45, -0.02, 0.03, 0.6, 1.7, 2.9, 5.5, 11, 25}},
      {"silu", [](const Tensor& x) { return silu(x); }, [](double x) { return x / (1 + std::exp(-x)); },
       kWide, kNarrow, kGrad},
      {"exp2",
       [](const Tensor& x) { return aether::exp2(x); },
       [](double x) { return std::exp2(x); },
       kWide,
       {-6, -2.5, -1.2, -0.3, 0, 0.2, 0.5, 1.5, 3, 6, 10, 14.5},
       kGrad},
      {"log2",
       [](const Tensor& x) { return aether::log2(x); },
       [](double x) { return std::log2(x); },
       {1e-30, 1e-5, 0.1, 0.5, 0.999, 1, 1.0001, 2, 3, 1024, 1e20},
       {0.01, 0.1, 0.5, 1, 2, 3, 100, 6e4},
       {0.01, 0.3, 0.999, 1.7, 2.9, 55}},
      {"log10",
       [](const Tensor& x) { return aether::log10(x); },
       [](double x) { return std::log10(x); },
       {1e-30, 1e-5, 0.1, 0.5, 0.999, 1, 1.0001, 2, 3, 1000, 1e20},
       {0.01, 0.1, 0.5, 1, 2, 3, 100, 6e4},
       {0.01, 0.3, 0.999, 1.7, 2.9, 55}},
      {"log1p",
       [](const Tensor& x) { return aether::log1p(x); },
       [](double x) { return std::log1p(x); },
       {-0.999, -0.6, -0.49, -0.1, -1e-7, -1e-20, 0, 1e-30, 1e-12, 3e-5, 0.3, 0.49, 0.5, 0.7, 2, 1e10},
       {-0.9, -0.6, -0.49, -0.1, -1e-3, 0, 1e-4, 0.3, 0.49, 0.5, 2, 100},
       {-0.9, -0.6, -0.3, -1e-9, 0, 2e-8, 0.2, 0.45, 0.55, 3}},
      {"expm1",
       [](const Tensor& x) { return aether::expm1(x); },
       [](double x) { return std::expm1(x); },
       {-30, -3, -0.6, -0.49, -0.1, -1e-7, -1e-20, 0, 1e-30, 1e-12, 3e-5, 0.3, 0.49, 0.5, 0.7, 2, 20},
       {-6, -0.6, -0.49, -0.1, -1e-3, 0, 1e-4, 0.3, 0.49, 0.5, 2, 8},
       {-3, -0.6, -0.3, -1e-9, 0, 2e-8, 0.2, 0.45, 0.55, 3}},
  };
}

class ActivationTest : public ::testing::TestWithParam<size_t> {
 protected:
  Activation act() const { return activations()[GetParam()]; }
};

// Forward against the std:: reference evaluated in double on the dtype-rounded inputs.
TEST_P(ActivationTest, ForwardMatchesReferenceInEveryFloatDtype) {
  const Activation a = act();
  for (DType t : {DType::float64, DType::float32, DType::float16, DType::bfloat16}) {
    const bool narrow = t == DType::float16 || t == DType::bfloat16;
    const auto& in = narrow ? a.inputs16 : a.inputs;
    const auto xr = rounded(in, t);
    std::vector<double> want;
    for (double x : xr) want.push_back(rounded({a.ref(x)}, t)[0]);  // the best a dtype-t result can be
    const Tensor y = a.f(make(in, {int64_t(in.size())}, t));
    EXPECT_EQ(y.dtype(), t) << a.name;
    const auto tol = nn_test::tol_for(t);
    expect_close(y.to_vector<double>(), want, tol.atol, tol.rtol, a.name + " " + dtype_name(t));
  }
}

// The same function on a 2-D tensor: the shape is kept and elements are independent.
TEST_P(ActivationTest, KeepsShape) {
  const Activation a = act();
  ASSERT_GE(a.grad_points.size(), 6u);
  const std::vector<double> in(a.grad_points.begin(), a.grad_points.begin() + 6);
  const Tensor y = a.f(make(in, {2, 3}, DType::float32));
  EXPECT_EQ(y.shape(), (Shape{2, 3}));
  EXPECT_EQ(y.to_vector<double>(), a.f(make(in, {6}, DType::float32)).to_vector<double>());
}

TEST_P(ActivationTest, GradientMatchesFiniteDifferences) {
  const Activation a = act();
  nn_test::expect_grad_matches_fd([&](const std::vector<Tensor>& x) { return a.f(x[0]); },
                                  {{a.grad_points, {int64_t(a.grad_points.size())}}});
}

TEST_P(ActivationTest, NaNPropagates) {
  const Activation a = act();
  for (DType t : {DType::float32, DType::float64, DType::float16}) {
    const auto y = a.f(make({kNaN, 0.5, kNaN}, {3}, t)).to_vector<double>();
    EXPECT_TRUE(std::isnan(y[0]) && std::isnan(y[2])) << a.name << " " << dtype_name(t);
    EXPECT_FALSE(std::isnan(y[1])) << a.name << " " << dtype_name(t);
  }
}

INSTANTIATE_TEST_SUITE_P(All, ActivationTest, ::testing::Range<size_t>(0, activations().size()),
                         [](const ::testing::TestParamInfo<size_t>& info) {
                           return activations()[info.param].name;
                         });

// erf, erfc and gelu on a dense grid in float64 and float32: the error bounds stated in nn.h.
TEST(Erf, DenseGridErrorBounds) {
  std::vector<double> xs;
  for (int i = -1200; i <= 1200; ++i) xs.push_back(i * 0.005);  // [-6, 6]
  for (DType t : {DType::float64, DType::float32}) {
    const auto xr = rounded(xs, t);
    const Tensor x = make(xs, {int64_t(xs.size())}, t);
    const auto e = aether::erf(x).to_vector<double>();
    const auto c = aether::erfc(x).to_vector<double>();
    const auto g = gelu(x).to_vector<double>();
    double max_abs = 0, max_rel_erfc = 0, max_rel_gelu = 0;
    for (size_t i = 0; i < xs.size(); ++i) {
      max_abs = std::max(max_abs, std::abs(e[i] - std::erf(xr[i])));
      max_rel_erfc = std::max(max_rel_erfc, std::abs(c[i] / std::erfc(xr[i]) - 1));
      if (xr[i] != 0) max_rel_gelu = std::max(max_rel_gelu, std::abs(g[i] / ref_gelu(xr[i]) - 1));
    }
    if (t == DType::float64) {
      EXPECT_LT(max_abs, 3e-16);
      EXPECT_LT(max_rel_erfc, 1e-14);
      EXPECT_LT(max_rel_gelu, 3e-14);  // -x / sqrt 2 and its square round: about x^2 ulp at x < 0
    } else {
      EXPECT_LT(max_abs, 1.5e-7);
      EXPECT_LT(max_rel_erfc, 1e-5);  // x^2 rounds in float32: relative error grows like x^2 * 6e-8
      EXPECT_LT(max_rel_gelu, 1e-5);  // the same, for erfc(-x / sqrt 2) on the negative side
    }
    char buf[96];
    std::snprintf(buf, sizeof buf, "%.3g abs (erf), %.3g rel (erfc), %.3g rel (gelu)", max_abs, max_rel_erfc,
                  max_rel_gelu);
    RecordProperty(std::string("max_err_") + dtype_name(t), buf);
  }
}

// Far tails: erfc keeps relative accuracy; erf saturates exactly.
TEST(Erf, Tails) {
  const auto c = aether::erfc(make({3, 5, 10, 20, 26.5, 30, -30}, {7})).to_vector<double>();
  const std::vector<double> want = {
      std::erfc(3.0), std::erfc(5.0), std::erfc(10.0), std::erfc(20.0), std::erfc(26.5), 0.0, 2.0};
  expect_close(c, want, 0, 1e-13, "erfc tails");
  const auto e = aether::erf(make({-kInf, -40, 40, kInf}, {4})).to_vector<double>();
  EXPECT_EQ(e, (std::vector<double>{-1, -1, 1, 1}));
}

// Infinite inputs where the limit is defined.
TEST(Activations, InfiniteInputs) {
  const Tensor x = make({-kInf, kInf}, {2}, DType::float32);
  EXPECT_EQ(softplus(x).to_vector<double>(), (std::vector<double>{0, kInf}));
  EXPECT_EQ(aether::exp2(x).to_vector<double>(), (std::vector<double>{0, kInf}));
  EXPECT_EQ(aether::expm1(x).to_vector<double>(), (std::vector<double>{-1, kInf}));
  EXPECT_EQ(leaky_relu(x, 0.2).to_vector<double>(), (std::vector<double>{-kInf, kInf}));
  EXPECT_EQ(aether::log1p(make({-1, kInf}, {2}, DType::float32)).to_vector<double>(),
            (std::vector<double>{-kInf, kInf}));
}

// Gradients stay finite (and right) far out on both sides, where a naive 1 / (1 + e^-x) would
// produce 0 * inf = NaN.
TEST(Activations, GradientsFiniteAtLargeInputs) {
  const std::vector<double> xs = {-1000, -100, -50, 50, 100, 1000};
  struct Case {
    const char* name;
    std::function<Tensor(const Tensor&)> f;
    std::vector<double> want;  // derivative at xs
  };
  const std::vector<Case> cases = {
      {"silu", [](const Tensor& x) { return silu(x); }, {0, 0, 0, 1, 1, 1}},
      {"gelu", [](const Tensor& x) { return gelu(x); }, {0, 0, 0, 1, 1, 1}},
      {"gelu_tanh", [](const Tensor& x) { return gelu(x, true); }, {0, 0, 0, 1, 1, 1}},
      {"softplus", [](const Tensor& x) { return softplus(x); }, {0, 0, 0, 1, 1, 1}},
      {"erf", [](const Tensor& x) { return aether::erf(x); }, {0, 0, 0, 0, 0, 0}},
      {"elu", [](const Tensor& x) { return elu(x); }, {0, 0, 0, 1, 1, 1}},
      {"log1p",
       [](const Tensor& x) { return aether::log1p(x.abs()); },
       {-1 / 1001.0, -1 / 101.0, -1 / 51.0, 1 / 51.0, 1 / 101.0, 1 / 1001.0}},
  };
  for (DType t : {DType::float32, DType::float64}) {
    for (const auto& c : cases) {
      Tensor x = make(xs, {6}, t).detach();
      x.set_requires_grad();
      const auto g = aether::gradients(c.f(x).sum(), {x})[0].to_vector<double>();
      expect_close(g, c.want, 1e-12, 1e-6, std::string(c.name) + " " + dtype_name(t));
    }
  }
}

// ReLU (Tensor::relu): NaN passes forward; backward is one select, so a NaN upstream gradient at an
// inactive unit gives 0, and at an active one stays NaN.
TEST(Relu, NaNForwardAndMaskedNaNUpstreamGradient) {
  Tensor x = make({-1, 0, 2, kNaN}, {4});
  x.set_requires_grad();
  const Tensor y = x.relu();
  const auto v = y.to_vector<double>();
  EXPECT_EQ(v[0], 0);
  EXPECT_EQ(v[1], 0);
  EXPECT_EQ(v[2], 2);
  EXPECT_TRUE(std::isnan(v[3]));
  const Tensor dy = make({kNaN, kNaN, 3, 1}, {4});
  const auto g = aether::gradients(y, {x}, dy)[0].to_vector<double>();
  EXPECT_EQ(g[0], 0);
  EXPECT_EQ(g[1], 0);
  EXPECT_EQ(g[2], 3);
}

TEST(LeakyRelu, GradientIsSlopeOnTheNegativeSide) {
  Tensor x = make({-2, -0.5, 0.5, 3}, {4});
  x.set_requires_grad();
  const auto g = aether::gradients(leaky_relu(x, 0.2).sum(), {x})[0].to_vector<double>();
  EXPECT_EQ(g, (std::vector<double>{0.2, 0.2, 1, 1}));
}

TEST(Activations, IntInputsComputeInFloat32) {
  const Tensor x = Tensor::from_vector<int32_t>({0, 1, 3}, {3});
  const Tensor y = aether::exp2(x);
  EXPECT_EQ(y.dtype(), DType::float32);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 2, 8}));
}

TEST(Activations, Errors) {
  const Tensor ints = Tensor::from_vector<int32_t>({1, 2}, {2});
  nn_test::expect_error([&] { leaky_relu(ints); }, {"leaky_relu", "float", "int32"});
  nn_test::expect_error([&] { softplus(make({1}, {1}), -1.0); }, {"softplus", "beta"});
  nn_test::expect_error([&] { gelu(Tensor()); }, {"empty tensor"});
}

}  // namespace
