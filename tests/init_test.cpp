// nn::init (aether/nn/init.h): patch whitening makes the conv's responses to the patches it was
// fitted on uncorrelated with second moments lambda / (lambda + eps) (checked through the conv's own
// forward pass, not the decomposition), its second half negates its first; dirac filters pass their
// input channels through; and the errors name what does not fit.
#include "aether/nn/init.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "aether/aether.h"

using namespace aether;

namespace {
// (n, h, w, 3) images with correlated channels and neighbouring pixels (not white already).
Tensor correlated_images(int64_t n, int64_t h, int64_t w) {
  manual_seed(21);
  const Tensor base = Tensor::randn({n, h, w, 1});
  const Tensor noise = Tensor::randn({n, h, w, 3}) * 0.3;
  Tensor x = base.expand({n, h, w, 3}) + noise;  // channels share `base`
  // smooth along W: neighbours correlate
  x = (x + cat({x.slice(2, 1, w), x.slice(2, w - 1, w)}, 2)) * 0.5 + 0.2;
  return x.realize();
}
}  // namespace

TEST(Init, PatchWhiteningDecorrelatesThePatches) {
  const Tensor x = correlated_images(40, 9, 10);
  nn::Conv2d conv(3, 24, 2);  // 2x2 patches of 3 channels: d = 12, all 12 directions, both signs
  const double eps = 1e-3;
  nn::init::patch_whitening(conv, x, eps);
  NoGradGuard no_grad;
  const Tensor y = conv.forward(x);  // (40, 8, 9, 24), bias zeroed
  const int64_t m = y.numel() / 24;
  const Tensor flat = y.reshape({m, 24});
  const auto cov = (flat.t().matmul(flat) / double(m)).to_vector<double>();  // (24, 24)
  double off = 0, min_diag = 1e9, max_diag = 0;
  for (int a = 0; a < 12; ++a)
    for (int b = 0; b < 12; ++b) {
      const double v = cov[size_t(a * 24 + b)];
      if (a == b) {
        min_diag = std::min(min_diag, v);
        max_diag = std::max(max_diag, v);
      } else {
        off = std::max(off, std::abs(v));
      }
    }
  EXPECT_LT(off, 1e-3) << "responses of different filters correlate";
  EXPECT_LT(max_diag, 1.0 + 1e-4);  // lambda / (lambda + eps) < 1
  EXPECT_GT(min_diag, 0.1);         // every direction of these images has lambda >> eps... or most
  const auto w = conv.weight.to_vector<double>();  // (24, 2, 2, 3)
  for (size_t k = 0; k < 12 * 12; ++k) EXPECT_EQ(w[k], -w[12 * 12 + k]) << k;
  EXPECT_EQ(conv.bias.to_vector<double>(), std::vector<double>(24, 0.0));
  // Filters come in decreasing eigenvalue order: the first responds the most.
  EXPECT_GE(cov[0], cov[size_t(11 * 24 + 11)]);
}

TEST(Init, DiracFiltersPassTheirChannelsThrough) {
  nn::Conv2d conv(3, 5, 3, Conv2dOptions{.padding = "same"}, /*bias=*/false);
  const auto before = conv.weight.to_vector<float>();
  nn::init::dirac(conv);
  const Tensor x = Tensor::randn({2, 4, 5, 3});
  NoGradGuard no_grad;
  const auto y = conv.forward(x).to_vector<float>(), xv = x.to_vector<float>();  // y (2, 4, 5, 5)
  for (size_t p = 0; p < xv.size() / 3; ++p)
    for (size_t c = 0; c < 3; ++c)
      EXPECT_EQ(y[p * 5 + c], xv[p * 3 + c]) << "pixel " << p << " channel " << c;
  const auto after = conv.weight.to_vector<float>();  // filters 3 and 4 (no input channel) unchanged
  for (size_t k = 3 * 27; k < after.size(); ++k) EXPECT_EQ(after[k], before[k]) << k;
}

// Scaled, not centred: w / std(w) with torch's unbiased std (airbench94_muon's head).
TEST(Init, UnitStdScalesToStandardDeviationOne) {
  Tensor w = Tensor::from_vector<float>({1, 2, 3, 6}, {2, 2});
  nn::init::unit_std(w);
  const double sd = std::sqrt((4.0 + 1.0 + 0.0 + 9.0) / 3.0);  // mean 3, unbiased
  const std::vector<float> want = {float(1 / sd), float(2 / sd), float(3 / sd), float(6 / sd)};
  const auto got = w.to_vector<float>();
  for (size_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(got[i], want[i]) << i;
  EXPECT_EQ(w.shape(), (Shape{2, 2}));
  Tensor flat = Tensor::full({3}, 2.0), one = Tensor::zeros({1});
  EXPECT_THROW(nn::init::unit_std(flat), Error);  // constant: no deviation to scale
  EXPECT_THROW(nn::init::unit_std(one), Error);
}

TEST(Init, ErrorsNameWhatDoesNotFit) {
  const Tensor x = correlated_images(2, 5, 5);
  auto expect_error = [](auto f, const std::string& part) {
    try {
      f();
      ADD_FAILURE() << "no error containing " << part;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  nn::Conv2d odd(3, 7, 2), wide(3, 26, 2), grouped(4, 4, 2, Conv2dOptions{.groups = 2});
  expect_error([&] { nn::init::patch_whitening(odd, x); }, "even number");
  expect_error([&] { nn::init::patch_whitening(wide, x); }, "patch size 12");
  expect_error([&] { nn::init::patch_whitening(grouped, Tensor::zeros({1, 4, 4, 4})); }, "groups 1");
  nn::Conv2d ok(3, 24, 2);
  expect_error([&] { nn::init::patch_whitening(ok, Tensor::zeros({2, 5, 5, 4})); }, "(N, H, W, 3)");
  expect_error([&] { nn::init::patch_whitening(ok, Tensor::zeros({2, 1, 5, 3})); }, "hold no 2x2 patch");
  expect_error([&] { nn::init::patch_whitening(ok, x, -1); }, "eps");
}
