// Tests of the nn layers (aether/nn/layers.h, module.h): each layer's forward against plain-loop
// references or hand values, initialisation bounds and reproducibility, batch-norm running
// statistics in training and evaluation, dropout masks, residual gradients, module naming and
// bookkeeping, the summary table, config round trips, and finite-difference gradient checks in
// float64 through a small Sequential.
#include "aether/nn/layers.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/nn/module.h"
#include "graph_util.h"
#include "nn_test_util.h"

using namespace aether;
using nn_test::det_values;
using nn_test::expect_close;
using nn_test::expect_error;

namespace {

template <typename T, typename... A>
std::shared_ptr<T> mk(A&&... a) {
  return std::make_shared<T>(std::forward<A>(a)...);
}

Tensor f64(const std::vector<double>& v, const Shape& s) { return Tensor::from_vector<double>(v, s); }

// Plain-loop convolution: x (N,H,W,C), w (O,KH,KW,C/g), b (O) or empty, explicit padding.
std::vector<double> ref_conv(const std::vector<double>& x, const Shape& xs, const std::vector<double>& w,
                             const Shape& ws, const std::vector<double>& b, int64_t stride, int64_t pt,
                             int64_t pl, int64_t oh, int64_t ow, int64_t groups) {
  const int64_t n = xs[0], h = xs[1], wd = xs[2], c = xs[3];
  const int64_t o = ws[0], kh = ws[1], kw = ws[2], cg = ws[3];
  const int64_t og = o / groups;
  std::vector<double> y(size_t(n * oh * ow * o), 0.0);
  for (int64_t in = 0; in < n; ++in)
    for (int64_t yy = 0; yy < oh; ++yy)
      for (int64_t xx = 0; xx < ow; ++xx)
        for (int64_t oc = 0; oc < o; ++oc) {
          double s = b.empty() ? 0.0 : b[size_t(oc)];
          const int64_t g = oc / og;
          for (int64_t i = 0; i < kh; ++i)
            for (int64_t j = 0; j < kw; ++j) {
              const int64_t sy = yy * stride - pt + i, sx = xx * stride - pl + j;
              if (sy < 0 || sy >= h || sx < 0 || sx >= wd) continue;
              for (int64_t ci = 0; ci < cg; ++ci)
                s += x[size_t(((in * h + sy) * wd + sx) * c + g * cg + ci)] *
                     w[size_t(((oc * kh + i) * kw + j) * cg + ci)];
            }
          y[size_t(((in * oh + yy) * ow + xx) * o + oc)] = s;
        }
  return y;
}

}  // namespace

// ---- Linear -----------------------------------------------------------------------------------------------
TEST(LinearLayer, ShapesAndValues) {
  nn::Linear lin(3, 2);
  EXPECT_EQ(lin.weight.shape(), (Shape{2, 3}));
  EXPECT_EQ(lin.bias.shape(), (Shape{2}));
  EXPECT_TRUE(lin.weight.requires_grad());
  const std::vector<double> w{1, 2, 3, -1, 0.5, 0.25}, b{0.5, -2};
  lin.weight = f64(w, {2, 3});
  lin.bias = f64(b, {2});
  const std::vector<double> x{1, 0, -1, 2, 3, 4};
  const Tensor y = lin(f64(x, {2, 3}));
  EXPECT_EQ(y.shape(), (Shape{2, 2}));
  // y[r][o] = sum_i x[r][i] w[o][i] + b[o]
  expect_close(y.to_vector<double>(), {1 - 3 + 0.5, -1 - 0.25 - 2, 2 + 6 + 12 + 0.5, -2 + 1.5 + 1 - 2}, 1e-12,
               0);
  // Leading batch axes are kept: (2, 5, 3) -> (2, 5, 2).
  EXPECT_EQ(lin(Tensor::zeros({2, 5, 3}, DType::float64)).shape(), (Shape{2, 5, 2}));
  nn::Linear nb(3, 4, false);
  EXPECT_FALSE(nb.bias.defined());
  EXPECT_EQ(nb.named_parameters().size(), 1u);
  EXPECT_EQ(nb.num_parameters(), 12);
  EXPECT_EQ(nb.describe(), "Linear(3 -> 4, no bias)");
  expect_error([&] { lin(Tensor::zeros({2, 4})); }, {"Linear", "(2, 4)"});
  expect_error([] { nn::Linear(0, 3); }, {"Linear"});
}

TEST(LinearLayer, InitBoundsAndReproducible) {
  manual_seed(123);
  nn::Linear a(50, 40);
  manual_seed(123);
  nn::Linear b(50, 40);
  const double bound = 1 / std::sqrt(50.0);
  for (const Tensor* t : {&a.weight, &a.bias}) {
    const auto v = t->to_vector<double>();
    double mx = 0, mean = 0;
    for (double e : v) {
      EXPECT_LE(std::abs(e), bound * (1 + 1e-6));
      mx = std::max(mx, std::abs(e));
      mean += e / double(v.size());
    }
    EXPECT_GT(mx, 0.8 * bound);  // spread over the whole interval, not a narrower one
    if (v.size() > 100) {
      EXPECT_LT(std::abs(mean), 0.1 * bound);
    }
  }
  const auto wa = a.weight.to_vector<float>(), wb = b.weight.to_vector<float>();
  EXPECT_EQ(0, std::memcmp(wa.data(), wb.data(), wa.size() * sizeof(float)));
  EXPECT_EQ(a.bias.to_vector<float>(), b.bias.to_vector<float>());
  nn::Linear c(50, 40);  // a later draw differs
  EXPECT_NE(c.weight.to_vector<float>(), wa);
}

// ---- Conv2d -----------------------------------------------------------------------------------------------
TEST(Conv2dLayer, WeightShapeInitAndSamePadding) {
  manual_seed(5);
  nn::Conv2d conv(4, 6, {3, 2}, Conv2dOptions{.padding = "same"});
  EXPECT_EQ(conv.weight.shape(), (Shape{6, 3, 2, 4}));  // OHWI
  EXPECT_EQ(conv.bias.shape(), (Shape{6}));
  const double bound = 1 / std::sqrt(4.0 * 3 * 2);
  for (double e : conv.weight.to_vector<double>()) EXPECT_LE(std::abs(e), bound * (1 + 1e-6));
  for (double e : conv.bias.to_vector<double>()) EXPECT_LE(std::abs(e), bound * (1 + 1e-6));
  EXPECT_EQ(conv.num_parameters(), 6 * 3 * 2 * 4 + 6);

  // "same" with an even kernel width: total pad 1 in W goes after (left 0, right 1); H: 1 and 1.
  const Shape xs{2, 5, 4, 4};
  const auto x = det_values(size_t(numel(xs)), 1);
  const auto w = det_values(6 * 3 * 2 * 4, 2);
  const auto b = det_values(6, 3);
  conv.weight = f64(w, {6, 3, 2, 4});
  conv.bias = f64(b, {6});
  const Tensor y = conv(f64(x, xs));
  EXPECT_EQ(y.shape(), (Shape{2, 5, 4, 6}));
  expect_close(y.to_vector<double>(), ref_conv(x, xs, w, {6, 3, 2, 4}, b, 1, 1, 0, 5, 4, 1), 1e-12, 1e-12);
  EXPECT_EQ(conv.describe(), "Conv2d(4 -> 6, 3x2, stride 1, pad same)");
}

TEST(Conv2dLayer, StrideGroupsNoBias) {
  nn::Conv2d conv(4, 6, 3, Conv2dOptions{.stride = 2, .padding = 1, .groups = 2}, false);
  EXPECT_FALSE(conv.bias.defined());
  EXPECT_EQ(conv.weight.shape(), (Shape{6, 3, 3, 2}));
  EXPECT_EQ(conv.named_parameters().size(), 1u);
  const Shape xs{1, 5, 6, 4};
  const auto x = det_values(size_t(numel(xs)), 4);
  const auto w = det_values(6 * 3 * 3 * 2, 5);
  conv.weight = f64(w, {6, 3, 3, 2});
  const Tensor y = conv(f64(x, xs));
  // OH = floor((5 + 2 - 3) / 2) + 1 = 3, OW = floor((6 + 2 - 3) / 2) + 1 = 3
  EXPECT_EQ(y.shape(), (Shape{1, 3, 3, 6}));
  expect_close(y.to_vector<double>(), ref_conv(x, xs, w, {6, 3, 3, 2}, {}, 2, 1, 1, 3, 3, 2), 1e-12, 1e-12);
  EXPECT_EQ(conv.describe(), "Conv2d(4 -> 6, 3x3, stride 2, pad 1, groups 2, no bias)");
  expect_error([&] { conv(Tensor::zeros({1, 5, 6, 3})); }, {"Conv2d", "(1, 5, 6, 3)"});
  expect_error([] { nn::Conv2d(3, 6, 3, Conv2dOptions{.groups = 2}); }, {"Conv2d", "groups"});
}

// ---- BatchNorm --------------------------------------------------------------------------------------------
namespace {
// Batch norm reference over x (M, C) rows (M = every axis but the channel one flattened).
struct BnRef {
  std::vector<double> out, mean, var_biased, var_unbiased;
};
BnRef ref_bn_train(const std::vector<double>& x, int64_t c, const std::vector<double>& w,
                   const std::vector<double>& b, double eps) {
  const int64_t m = int64_t(x.size()) / c;
  BnRef r;
  r.mean.assign(size_t(c), 0);
  r.var_biased.assign(size_t(c), 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t k = 0; k < c; ++k) r.mean[size_t(k)] += x[size_t(i * c + k)] / double(m);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t k = 0; k < c; ++k) {
      const double d = x[size_t(i * c + k)] - r.mean[size_t(k)];
      r.var_biased[size_t(k)] += d * d / double(m);
    }
  for (int64_t k = 0; k < c; ++k)
    r.var_unbiased.push_back(r.var_biased[size_t(k)] * double(m) / double(m - 1));
  r.out.resize(x.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t k = 0; k < c; ++k)
      r.out[size_t(i * c + k)] = (x[size_t(i * c + k)] - r.mean[size_t(k)]) /
                                     std::sqrt(r.var_biased[size_t(k)] + eps) * w[size_t(k)] +
                                 b[size_t(k)];
  return r;
}
}  // namespace

TEST(BatchNormLayer, TrainUpdatesRunningStatsEvalUsesThem) {
  for (int dims : {1, 2}) {
    SCOPED_TRACE(dims);
    const int64_t c = 3;
    const double mom = 0.25, eps = 1e-3;
    std::shared_ptr<nn::BatchNorm> bn;
    if (dims == 1)
      bn = mk<nn::BatchNorm1d>(c, mom, eps);
    else
      bn = mk<nn::BatchNorm2d>(c, mom, eps);
    EXPECT_EQ(bn->type_name(), dims == 1 ? "BatchNorm1d" : "BatchNorm2d");
    EXPECT_EQ(bn->running_mean.to_vector<double>(), (std::vector<double>{0, 0, 0}));
    EXPECT_EQ(bn->running_var.to_vector<double>(), (std::vector<double>{1, 1, 1}));
    EXPECT_EQ(bn->weight.to_vector<double>(), (std::vector<double>{1, 1, 1}));
    EXPECT_EQ(bn->bias.to_vector<double>(), (std::vector<double>{0, 0, 0}));
    const std::vector<double> w{1.5, -0.5, 2}, b{0.1, 0.2, -0.3};
    bn->weight = f64(w, {c});
    bn->bias = f64(b, {c});
    const Shape xs = dims == 1 ? Shape{6, c} : Shape{2, 3, 2, c};
    auto x = det_values(size_t(numel(xs)), 17, -2, 3);
    const BnRef r = ref_bn_train(x, c, w, b, eps);
    const Tensor y = (*bn)(f64(x, xs));
    EXPECT_EQ(y.shape(), xs);
    expect_close(y.to_vector<double>(), r.out, 1e-6, 1e-6, "train out");
    // running = (1 - momentum) running + momentum batch (unbiased variance); stored as float32.
    std::vector<double> rm, rv;
    for (int64_t k = 0; k < c; ++k) {
      rm.push_back(mom * r.mean[size_t(k)]);
      rv.push_back((1 - mom) * 1.0 + mom * r.var_unbiased[size_t(k)]);
    }
    expect_close(bn->running_mean.to_vector<double>(), rm, 1e-6, 1e-6, "running_mean");
    expect_close(bn->running_var.to_vector<double>(), rv, 1e-6, 1e-6, "running_var");
    // A second training forward moves them again.
    const auto x2 = det_values(size_t(numel(xs)), 18, -1, 1);
    const BnRef r2 = ref_bn_train(x2, c, w, b, eps);
    (*bn)(f64(x2, xs)).realize();
    for (int64_t k = 0; k < c; ++k) {
      rm[size_t(k)] = (1 - mom) * rm[size_t(k)] + mom * r2.mean[size_t(k)];
      rv[size_t(k)] = (1 - mom) * rv[size_t(k)] + mom * r2.var_unbiased[size_t(k)];
    }
    expect_close(bn->running_mean.to_vector<double>(), rm, 1e-6, 1e-6, "running_mean 2");
    expect_close(bn->running_var.to_vector<double>(), rv, 1e-6, 1e-6, "running_var 2");

    // Evaluation: normalises with the running statistics and leaves them alone.
    bn->eval();
    EXPECT_FALSE(bn->is_training());
    const Tensor ye = (*bn)(f64(x, xs));
    std::vector<double> want(x.size());
    const auto rmf = bn->running_mean.to_vector<double>(), rvf = bn->running_var.to_vector<double>();
    for (size_t i = 0; i < x.size(); ++i) {
      const size_t k = i % size_t(c);
      want[i] = (x[i] - rmf[k]) / std::sqrt(rvf[k] + eps) * w[k] + b[k];
    }
    expect_close(ye.to_vector<double>(), want, 1e-6, 1e-6, "eval out");
    expect_close(bn->running_mean.to_vector<double>(), rm, 1e-6, 1e-6, "eval keeps running_mean");
    expect_close(bn->running_var.to_vector<double>(), rv, 1e-6, 1e-6, "eval keeps running_var");
  }
}

// A training loop of one's own never realizes the buffers with its step (Model::train does): each
// training forward computes the last one's pending update first, so the updates do not chain.
// Before, the running mean after k forwards was a graph over all k batches (a Python loop of 3,000
// steps: 16 MB more memory per 1,000 steps, and 15.8 s to realize the mean at the end).
TEST(BatchNormLayer, RunningStatsDoNotChainAcrossForwardsThatAreNotRealized) {
  const int64_t c = 3;
  const double mom = 0.25;
  nn::BatchNorm1d bn(c, mom, 1e-3, /*affine=*/false);
  std::vector<double> rm(size_t(c), 0.0);
  size_t loads_at_3 = 0;
  for (int step = 1; step <= 20; ++step) {
    const auto x = det_values(18, uint32_t(100 + step), -2, 3);
    (void)bn(f64(x, {6, c}));  // never realized
    const BnRef r = ref_bn_train(x, c, {1, 1, 1}, {0, 0, 0}, 1e-3);
    for (size_t k = 0; k < size_t(c); ++k) rm[k] = (1 - mom) * rm[k] + mom * r.mean[k];
    const size_t loads = testing_graph::nodes_of(bn.running_mean, Op::Load).size();
    if (step == 3) loads_at_3 = loads;
    if (step > 3) {
      EXPECT_EQ(loads, loads_at_3) << "the running mean's graph grew at step " << step;
    }
  }
  expect_close(bn.running_mean.to_vector<double>(), rm, 1e-6, 1e-6, "running_mean after 20 forwards");
}

TEST(BatchNormLayer, NoAffineAndErrors) {
  nn::BatchNorm1d bn(2, 0.1, 1e-5, false);
  EXPECT_FALSE(bn.weight.defined());
  EXPECT_EQ(bn.num_parameters(), 0);
  EXPECT_EQ(bn.named_buffers().size(), 2u);
  const std::vector<double> x{1, 2, 3, 6};
  const auto r = ref_bn_train(x, 2, {1, 1}, {0, 0}, 1e-5);
  expect_close(bn(f64(x, {2, 2})).to_vector<double>(), r.out, 1e-6, 1e-6);
  expect_error([&] { bn(Tensor::zeros({2, 2, 2, 2})); }, {"BatchNorm1d", "(2, 2, 2, 2)"});
  nn::BatchNorm2d bn2(3);
  expect_error([&] { bn2(Tensor::zeros({2, 4, 4, 2})); }, {"BatchNorm2d", "(2, 4, 4, 2)"});
  expect_error([] { nn::BatchNorm2d(3, 1.5); }, {"BatchNorm", "momentum"});
}

// ---- activations ------------------------------------------------------------------------------------------
TEST(ActivationLayers, ForwardValues) {
  const std::vector<double> x{-3, -0.5, 0, 0.25, 2, 7};
  const Tensor xt = f64(x, {2, 3});
  std::vector<double> relu, leaky, gelu, gelu_tanh;
  for (double v : x) {
    relu.push_back(v > 0 ? v : 0);
    leaky.push_back(v < 0 ? 0.2 * v : v);
    gelu.push_back(0.5 * v * (1 + std::erf(v / std::sqrt(2.0))));
    gelu_tanh.push_back(0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))));
  }
  expect_close(nn::ReLU()(xt).to_vector<double>(), relu, 0, 0, "relu");
  expect_close(nn::LeakyReLU(0.2)(xt).to_vector<double>(), leaky, 1e-15, 0, "leaky");
  expect_close(nn::GELU()(xt).to_vector<double>(), gelu, 1e-14, 1e-13, "gelu");
  expect_close(nn::GELU(true)(xt).to_vector<double>(), gelu_tanh, 1e-14, 1e-13, "gelu tanh");
  // Softmax over the last axis and over axis 0.
  std::vector<double> sm(6), sm0(6);
  for (int r = 0; r < 2; ++r) {
    double s = 0;
    for (int k = 0; k < 3; ++k) s += std::exp(x[size_t(r * 3 + k)]);
    for (int k = 0; k < 3; ++k) sm[size_t(r * 3 + k)] = std::exp(x[size_t(r * 3 + k)]) / s;
  }
  for (int k = 0; k < 3; ++k) {
    const double s = std::exp(x[size_t(k)]) + std::exp(x[size_t(3 + k)]);
    sm0[size_t(k)] = std::exp(x[size_t(k)]) / s;
    sm0[size_t(3 + k)] = std::exp(x[size_t(3 + k)]) / s;
  }
  expect_close(nn::Softmax()(xt).to_vector<double>(), sm, 1e-15, 1e-13, "softmax");
  expect_close(nn::Softmax(0)(xt).to_vector<double>(), sm0, 1e-15, 1e-13, "softmax axis 0");
  std::vector<double> sig, th;
  for (double v : x) sig.push_back(1 / (1 + std::exp(-v))), th.push_back(std::tanh(v));
  expect_close(nn::Sigmoid()(xt).to_vector<double>(), sig, 1e-15, 1e-15, "sigmoid");
  expect_close(nn::Tanh()(xt).to_vector<double>(), th, 1e-15, 1e-15, "tanh");
  // ELU, SiLU and Softplus against their textbook formulas (Softplus's linear part past beta x > 3).
  std::vector<double> elu, silu, softplus;
  for (double v : x) {
    elu.push_back(v > 0 ? v : 0.5 * (std::exp(v) - 1));
    silu.push_back(v / (1 + std::exp(-v)));
    softplus.push_back(2 * v > 3 ? v : std::log(1 + std::exp(2 * v)) / 2);
  }
  expect_close(nn::ELU(0.5)(xt).to_vector<double>(), elu, 1e-15, 1e-14, "elu");
  expect_close(nn::SiLU()(xt).to_vector<double>(), silu, 1e-15, 1e-14, "silu");
  expect_close(nn::Softplus(2, 3)(xt).to_vector<double>(), softplus, 1e-15, 1e-14, "softplus");
  expect_error([] { nn::ELU(std::nan("")); }, {"ELU: alpha must be finite, got nan"});
  expect_error([] { nn::Softplus(0); }, {"Softplus: beta must be finite and > 0, got 0"});
  expect_error([] { nn::Softplus(1, std::numeric_limits<double>::infinity()); },
               {"Softplus: threshold must be finite, got inf"});
}

// LayerNorm: each row (each pixel of an NHWC image) by its own mean and population variance, then
// the affine parameters; the same in training and evaluation; errors name the layer.
TEST(LayerNormLayer, NormalisesEachSampleOverTheLastAxis) {
  const Shape s{2, 2, 3, 4};  // (N, H, W, C): 12 pixels of 4 channels
  const std::vector<double> x = det_values(size_t(numel(s)), 7, -3, 5);
  nn::LayerNorm ln(4, 1e-3);
  ln.weight = f64({1, 2, -1, 0.5}, {4});
  ln.bias = f64({0, 1, 2, -3}, {4});
  std::vector<double> want;
  for (size_t p = 0; p < x.size(); p += 4) {
    double mean = 0, var = 0;
    for (size_t c = 0; c < 4; ++c) mean += x[p + c] / 4;
    for (size_t c = 0; c < 4; ++c) var += (x[p + c] - mean) * (x[p + c] - mean) / 4;
    const double w[] = {1, 2, -1, 0.5}, b[] = {0, 1, 2, -3};
    for (size_t c = 0; c < 4; ++c) want.push_back((x[p + c] - mean) / std::sqrt(var + 1e-3) * w[c] + b[c]);
  }
  const Tensor xt = f64(x, s);
  expect_close(ln(xt).to_vector<double>(), want, 1e-13, 1e-13, "layer norm (training)");
  ln.eval();
  expect_close(ln(xt).to_vector<double>(), want, 1e-13, 1e-13, "layer norm (evaluation)");
  EXPECT_EQ(ln.num_parameters(), 8);
  EXPECT_EQ(nn::LayerNorm(4, 1e-5, false).num_parameters(), 0);
  // float32 input with its float32 parameters; bfloat16 input comes back bfloat16, normalised in float32.
  nn::LayerNorm f(4);
  const Tensor y16 = f(xt.cast(DType::bfloat16));
  EXPECT_EQ(y16.dtype(), DType::bfloat16);
  const auto ref = f(xt.cast(DType::bfloat16).cast(DType::float32)).to_vector<double>();
  expect_close(y16.to_vector<double>(), ref, 1.0 / 128, 1e-2, "bfloat16 layer norm");
  expect_error([&] { ln(f64(x, {6, 8})); }, {"LayerNorm", "expected input (N, ..., 4)", "(6, 8)"});
  expect_error([] { nn::LayerNorm(0); }, {"LayerNorm", "features must be > 0"});
  expect_error([] { nn::LayerNorm(3, 0); }, {"LayerNorm", "eps must be finite and > 0"});
  expect_error([&] { layer_norm(xt, f64({1, 2}, {2})); }, {"layer_norm", "weight of shape (4,)"});
  expect_error([&] { layer_norm(xt, Tensor(), Tensor(), 5); }, {"layer_norm", "1 to 4 trailing dims"});
  expect_error([] { layer_norm(Tensor::from_vector<int32_t>({1, 2})); }, {"layer_norm", "float"});
}

// ---- pooling and Flatten ----------------------------------------------------------------------------------
TEST(PoolingLayers, ForwardValues) {
  // x (1,4,4,2): channel 0 = 0..15, channel 1 = 15..0
  std::vector<double> x;
  for (int i = 0; i < 16; ++i) {
    x.push_back(i);
    x.push_back(15 - i);
  }
  const Tensor xt = f64(x, {1, 4, 4, 2});
  const Tensor mp = nn::MaxPool2d(2)(xt);
  EXPECT_EQ(mp.shape(), (Shape{1, 2, 2, 2}));
  expect_close(mp.to_vector<double>(), {5, 15, 7, 13, 13, 7, 15, 5}, 0, 0, "max");
  const Tensor ap = nn::AvgPool2d(2)(xt);
  expect_close(ap.to_vector<double>(), {2.5, 12.5, 4.5, 10.5, 10.5, 4.5, 12.5, 2.5}, 1e-15, 0, "avg");
  // Kernel 3, stride 1, padding 1: corner (0,0) averages the 4 real elements without padding
  // (0,1,4,5 -> 2.5) and 10/9 with count_include_pad.
  const Tensor ap3 = nn::AvgPool2d(3, 1, 1)(xt);
  EXPECT_EQ(ap3.shape(), (Shape{1, 4, 4, 2}));
  EXPECT_DOUBLE_EQ(ap3.to_vector<double>()[0], 2.5);
  EXPECT_DOUBLE_EQ(nn::AvgPool2d(3, 1, 1, true)(xt).to_vector<double>()[0], 10.0 / 9.0);
  // Max with stride 1 on a 3x3 kernel: out (1,2,2,2), channel 0 maxima 10, 11, 14, 15.
  const auto m3 = nn::MaxPool2d(3, 1)(xt).to_vector<double>();
  expect_close(m3, {10, 15, 11, 14, 14, 11, 15, 10}, 0, 0, "max 3/1");
  const Tensor ga = nn::GlobalAvgPool2d()(xt), gm = nn::GlobalMaxPool2d()(xt);
  EXPECT_EQ(ga.shape(), (Shape{1, 2}));
  expect_close(ga.to_vector<double>(), {7.5, 7.5}, 1e-15, 0, "global avg");
  expect_close(gm.to_vector<double>(), {15, 15}, 0, 0, "global max");
  const Tensor fl = nn::Flatten()(xt);
  EXPECT_EQ(fl.shape(), (Shape{1, 32}));
  EXPECT_EQ(fl.to_vector<double>(), x);
  EXPECT_EQ(nn::Flatten()(Tensor::zeros({3, 2, 5})).shape(), (Shape{3, 10}));
}

// ---- Dropout ----------------------------------------------------------------------------------------------
TEST(DropoutLayers, TrainEvalAndReproducible) {
  const Tensor x = Tensor::ones({4, 8, 8, 16});
  nn::Dropout d(0.25);
  manual_seed(9);
  const auto a = d(x).to_vector<float>();
  manual_seed(9);
  const auto b = d(x).to_vector<float>();
  EXPECT_EQ(a, b);
  int64_t zeros = 0;
  for (float v : a) {
    EXPECT_TRUE(v == 0.0f || std::abs(v - 1 / 0.75f) < 1e-6f) << v;
    zeros += v == 0.0f;
  }
  const double frac = double(zeros) / double(a.size());
  EXPECT_NEAR(frac, 0.25, 0.03);
  d.eval();
  EXPECT_EQ(d(x).to_vector<float>(), x.to_vector<float>());

  nn::SpatialDropout sd(0.5);
  manual_seed(10);
  const auto s1 = sd(x).to_vector<float>();
  manual_seed(10);
  EXPECT_EQ(sd(x).to_vector<float>(), s1);
  // One draw per (n, c): every spatial position of a channel has the same value (0 or 2).
  int64_t dropped = 0;
  for (int n = 0; n < 4; ++n)
    for (int c = 0; c < 16; ++c) {
      const float first = s1[size_t((n * 64) * 16 + c)];
      EXPECT_TRUE(first == 0.0f || first == 2.0f);
      dropped += first == 0.0f;
      for (int p = 1; p < 64; ++p)
        ASSERT_EQ(s1[size_t((n * 64 + p) * 16 + c)], first) << n << " " << c << " " << p;
    }
  EXPECT_GT(dropped, 10);
  EXPECT_LT(dropped, 54);
  sd.eval();
  EXPECT_EQ(sd(x).to_vector<float>(), x.to_vector<float>());
  expect_error([] { nn::Dropout(1.0); }, {"Dropout", "p"});
  expect_error([] { nn::SpatialDropout(-0.1); }, {"SpatialDropout", "p"});
}

// ---- Residual ---------------------------------------------------------------------------------------------
TEST(ResidualLayer, AddsInputAndGradientFlowsToBoth) {
  auto lin = mk<nn::Linear>(3, 3);
  const std::vector<double> w{1, 2, 0, -1, 0.5, 3, 0, 1, -2}, bv{0.1, 0.2, 0.3};
  lin->weight = f64(w, {3, 3}).set_requires_grad();
  lin->bias = f64(bv, {3}).set_requires_grad();
  nn::Residual res(lin);
  EXPECT_EQ(res.describe(), "Residual(Linear(3 -> 3) + identity)");
  const std::vector<double> xv{1, -1, 2, 0.5, 0, -3};
  Tensor x = f64(xv, {2, 3}).set_requires_grad();
  const Tensor y = res(x);
  std::vector<double> want(6);
  for (int r = 0; r < 2; ++r)
    for (int o = 0; o < 3; ++o) {
      double s = bv[size_t(o)] + xv[size_t(r * 3 + o)];
      for (int i = 0; i < 3; ++i) s += xv[size_t(r * 3 + i)] * w[size_t(o * 3 + i)];
      want[size_t(r * 3 + o)] = s;
    }
  expect_close(y.to_vector<double>(), want, 1e-14, 0, "residual forward");
  // d sum(y) / dx[r][i] = 1 + sum_o w[o][i]; d/dW[o][i] = sum_r x[r][i]; d/db = 2.
  y.sum().backward();
  std::vector<double> gx(6), gw(9);
  for (int r = 0; r < 2; ++r)
    for (int i = 0; i < 3; ++i)
      gx[size_t(r * 3 + i)] = 1 + w[size_t(i)] + w[size_t(3 + i)] + w[size_t(6 + i)];
  for (int o = 0; o < 3; ++o)
    for (int i = 0; i < 3; ++i) gw[size_t(o * 3 + i)] = xv[size_t(i)] + xv[size_t(3 + i)];
  expect_close(x.grad().to_vector<double>(), gx, 1e-14, 0, "grad x");
  expect_close(lin->weight.grad().to_vector<double>(), gw, 1e-14, 0, "grad w");
  expect_close(lin->bias.grad().to_vector<double>(), {2, 2, 2}, 1e-14, 0, "grad b");

  // With a shortcut module: y = body(x) + shortcut(x); shape mismatch is an error.
  auto sc = mk<nn::Linear>(3, 2);
  nn::Residual bad(mk<nn::Linear>(3, 4), sc);
  expect_error([&] { bad(Tensor::zeros({1, 3})); }, {"Residual", "(1, 4)", "(1, 2)"});
}

// ---- Module bookkeeping -----------------------------------------------------------------------------------
namespace {
std::shared_ptr<nn::Sequential> small_net() {
  auto body = mk<nn::Sequential>();
  body->add(mk<nn::Conv2d>(4, 4, 3, Conv2dOptions{.padding = "same"}, false)).add(mk<nn::BatchNorm2d>(4));
  auto net = mk<nn::Sequential>();
  net->add(mk<nn::Conv2d>(1, 4, 3, Conv2dOptions{.padding = "same"}))  // 0: 36 + 4
      .add(mk<nn::BatchNorm2d>(4))                                     // 1: 8 (+ 8 buffers)
      .add(mk<nn::ReLU>())                                             // 2
      .add(mk<nn::Residual>(body))                                     // 3: 144 + 8 (+ 8 buffers)
      .add(mk<nn::MaxPool2d>(2))                                       // 4
      .add(mk<nn::Dropout>(0.1))                                       // 5
      .add(mk<nn::Flatten>())                                          // 6
      .add(mk<nn::Linear>(4 * 4 * 4, 10));                             // 7: 640 + 10
  return net;
}
}  // namespace

TEST(ModuleBookkeeping, NamesCountsAndModes) {
  auto net = small_net();
  std::vector<std::string> pnames, bnames;
  for (auto& [n, t] : net->named_parameters()) pnames.push_back(n);
  for (auto& [n, t] : net->named_buffers()) bnames.push_back(n);
  EXPECT_EQ(pnames, (std::vector<std::string>{"0.weight", "0.bias", "1.weight", "1.bias", "3.body.0.weight",
                                              "3.body.1.weight", "3.body.1.bias", "7.weight", "7.bias"}));
  EXPECT_EQ(bnames, (std::vector<std::string>{"1.running_mean", "1.running_var", "3.body.1.running_mean",
                                              "3.body.1.running_var"}));
  EXPECT_EQ(net->num_parameters(), 40 + 8 + 144 + 8 + 650);
  EXPECT_EQ(net->parameters().size(), 9u);
  for (auto& t : net->parameters()) EXPECT_TRUE(t.requires_grad());
  // The named pointers are the members themselves.
  auto* conv0 = dynamic_cast<nn::Conv2d*>((*net)[0].get());
  ASSERT_NE(conv0, nullptr);
  EXPECT_EQ(net->named_parameters()[0].second, &conv0->weight);
  EXPECT_EQ(net->named_parameters("net")[0].first, "net.0.weight");
  EXPECT_EQ(net->size(), 8u);

  // train()/eval() reach every descendant.
  std::function<void(nn::Module&, bool)> all_mode = [&](nn::Module& m, bool on) {
    EXPECT_EQ(m.is_training(), on) << m.type_name();
    for (auto& [n, c] : m.children()) all_mode(*c, on);
  };
  all_mode(*net, true);
  net->eval();
  all_mode(*net, false);
  net->train();
  all_mode(*net, true);
  net->train(false);
  all_mode(*net, false);
}

// A parameter, buffer or layer name must be non-empty, hold no '.' (full names are joined with dots)
// and be new in its module: a second "w" shadowed the first in every by-name lookup, and "a.b"
// read back as layer "a"'s parameter "b".
TEST(ModuleBookkeeping, RegisteredNamesAreUniqueAndDotFree) {
  struct Probe : nn::Module {
    Tensor w = Tensor::ones({2}), v = Tensor::ones({2});
    std::string type_name() const override { return "Probe"; }
    Tensor forward(const Tensor& x) override { return x; }
    std::string config() const override { return "{}"; }
    void param(const std::string& name, Tensor& t) { register_parameter(name, t); }
    void buffer(const std::string& name, Tensor& t) { register_buffer(name, t); }
    void child(const std::string& name) { register_module(name, std::make_shared<nn::ReLU>()); }
  } p;
  p.param("w", p.w);
  expect_error([&] { p.param("w", p.v); },
               {"register_parameter", "'w' is already a parameter, buffer or layer"});
  expect_error([&] { p.buffer("w", p.v); }, {"register_buffer", "'w' is already"});
  expect_error([&] { p.child("w"); }, {"register_module", "'w' is already"});
  expect_error([&] { p.param("a.b", p.v); },
               {"register_parameter", "name 'a.b' must be non-empty and hold no '.'"});
  expect_error([&] { p.buffer("", p.v); }, {"register_buffer", "name '' must be non-empty"});
  p.buffer("v", p.v);
  p.child("relu");
  EXPECT_EQ(p.named_parameters().size(), 1u);
  EXPECT_EQ(p.named_buffers().size(), 1u);
  EXPECT_EQ(p.children().size(), 1u);
}

TEST(ModuleBookkeeping, SummaryTable) {
  auto net = small_net();
  const auto before_mean = net->named_buffers()[0].second->to_vector<float>();
  const auto before_var = net->named_buffers()[1].second->to_vector<float>();
  const std::string s = nn::summary(*net, {1, 8, 8, 1});
  auto has = [&](const std::string& part) {
    EXPECT_NE(s.find(part), std::string::npos) << "missing: " << part << "\n" << s;
  };
  has("Layer");
  has("Output shape");
  has("Params");
  has("0 Conv2d(1 -> 4, 3x3, stride 1, pad same)");
  has("(1, 8, 8, 4)");
  has("1 BatchNorm2d(4)");
  has("3 Residual(");
  has("4 MaxPool2d(2)");
  has("(1, 4, 4, 4)");
  has("6 Flatten");
  has("(1, 64)");
  has("7 Linear(64 -> 10)");
  has("(1, 10)");
  has("Trainable parameters: 850");
  has("Buffers (non-trainable): 16");
  // The rows carry each layer's parameter count at the end of the line.
  auto row_ends_with = [&](const std::string& start, const std::string& count) {
    const size_t p = s.find(start);
    ASSERT_NE(p, std::string::npos) << start;
    const size_t e = s.find('\n', p);
    const std::string row = s.substr(p, e - p);
    EXPECT_EQ(row.substr(row.size() - count.size()), count) << row;
    EXPECT_EQ(row[row.size() - count.size() - 1], ' ') << row;
  };
  row_ends_with("0 Conv2d", "40");
  row_ends_with("1 BatchNorm2d", "8");
  row_ends_with("2 ReLU", "0");
  row_ends_with("3 Residual", "152");
  row_ends_with("7 Linear", "650");
  // The layers inside the Residual block follow its row, indented and named as their parameters.
  row_ends_with("  3.body.0 Conv2d(4 -> 4, 3x3, stride 1, pad same, no bias)", "144");
  const size_t body0 = s.find("3.body.0");
  EXPECT_NE(s.substr(body0, s.find('\n', body0) - body0).find("(1, 8, 8, 4)"), std::string::npos) << s;
  row_ends_with("  3.body.1 BatchNorm2d(4)", "8");
  EXPECT_LT(s.find("3 Residual"), s.find("3.body.0")) << s;
  EXPECT_LT(s.find("3.body.1"), s.find("4 MaxPool2d")) << s;
  EXPECT_EQ(s.find("3.body.2"), std::string::npos) << s;
  // Building the table neither updates batch-norm statistics nor changes the mode.
  EXPECT_EQ(net->named_buffers()[0].second->to_vector<float>(), before_mean);
  EXPECT_EQ(net->named_buffers()[1].second->to_vector<float>(), before_var);
  EXPECT_TRUE(net->is_training());
  EXPECT_TRUE((*net)[1]->is_training());
}

TEST(ModuleBookkeeping, ConfigRoundTripEveryLayer) {
  std::vector<nn::ModulePtr> layers{
      mk<nn::Linear>(5, 3),
      mk<nn::Linear>(5, 3, false),
      mk<nn::Conv2d>(4, 8, Size2{3, 5},
                     Conv2dOptions{.stride = {2, 1}, .padding = "same", .dilation = {1, 2}}),
      mk<nn::Conv2d>(4, 8, 3, Conv2dOptions{.padding = {0, 1, 2, 1}, .groups = 4}, false),
      mk<nn::BatchNorm1d>(7, 0.3, 1e-4),
      mk<nn::BatchNorm2d>(6, 0.1, 1e-5, false),
      mk<nn::LayerNorm>(5, 1e-4),
      mk<nn::LayerNorm>(4, 1e-5, false),
      mk<nn::ReLU>(),
      mk<nn::Sigmoid>(),
      mk<nn::Tanh>(),
      mk<nn::LeakyReLU>(0.3),
      mk<nn::GELU>(true),
      mk<nn::GELU>(),
      mk<nn::ELU>(0.7),
      mk<nn::SiLU>(),
      mk<nn::Softplus>(2, 15),
      mk<nn::Softmax>(1),
      mk<nn::MaxPool2d>(Size2{3, 2}, Size2{2, 1}, Size2{1, 0}),
      mk<nn::AvgPool2d>(3, 2, 1, true),
      mk<nn::GlobalAvgPool2d>(),
      mk<nn::GlobalMaxPool2d>(),
      mk<nn::Flatten>(),
      mk<nn::Dropout>(0.3),
      mk<nn::Scale>(1.0 / 9),
      mk<nn::SpatialDropout>(0.2),
      mk<nn::Residual>(mk<nn::Linear>(4, 4)),
      mk<nn::Residual>(mk<nn::Conv2d>(2, 4, 3, Conv2dOptions{.padding = 1}), mk<nn::Conv2d>(2, 4, 1)),
      small_net(),
  };
  std::set<std::string> types;
  for (const auto& l : layers) {
    const std::string c = l->config();
    const auto back = nn::module_from_config(c);
    ASSERT_NE(back, nullptr);
    EXPECT_EQ(back->config(), c);
    EXPECT_EQ(back->describe(), l->describe());
    EXPECT_EQ(back->type_name(), l->type_name());
    EXPECT_EQ(back->num_parameters(), l->num_parameters());
    EXPECT_EQ(back->named_parameters().size(), l->named_parameters().size());
    EXPECT_EQ(back->named_buffers().size(), l->named_buffers().size());
    types.insert(l->type_name());
  }
  EXPECT_EQ(types.size(), 24u);  // every layer type (and Sequential) is covered
  // Behaviour survives too: a rebuilt norm / pool / activation gives the same output.
  const Tensor x = Tensor::from_vector<double>(det_values(2 * 6 * 5 * 4, 3), {2, 6, 5, 4});
  for (size_t i : {7u, 9u, 10u, 11u, 12u, 14u, 15u, 16u, 18u, 19u, 24u}) {
    const auto back = nn::module_from_config(layers[i]->config());
    EXPECT_EQ((*back)(x).to_vector<double>(), (*layers[i])(x).to_vector<double>()) << layers[i]->describe();
  }
  expect_error([] { nn::module_from_config(R"({"type": "Nope"})"); }, {"module_from_config", "Nope"});
  expect_error([] { nn::module_from_config(R"({"type": "Linear", "in": 3})"); },
               {"module_from_config", "Linear"});
  expect_error([] { nn::module_from_config("[]"); }, {"module_from_config"});
  expect_error([] { nn::module_from_config(R"({"type": "Linear", "in": 3,)"); }, {"module config"});
}

// ---- finite-difference gradients through the layers -----------------------------------------------------
TEST(LayerGradients, SequentialMatchesFiniteDifferencesFloat64) {
  manual_seed(3);
  auto net = mk<nn::Sequential>();
  net->add(mk<nn::Conv2d>(2, 3, 3, Conv2dOptions{.padding = "same"}))
      .add(mk<nn::BatchNorm2d>(3))
      .add(mk<nn::ReLU>())
      .add(mk<nn::MaxPool2d>(2))
      .add(mk<nn::Flatten>())
      .add(mk<nn::Linear>(2 * 2 * 3, 3));
  auto named = net->named_parameters();
  std::vector<std::pair<std::vector<double>, Shape>> inputs;
  uint32_t seed = 40;
  for (auto& [n, t] : named)
    inputs.emplace_back(det_values(size_t(t->numel()), seed++, -0.8, 0.8), t->shape());
  const Shape xs{2, 4, 4, 2};
  const Tensor x = f64(det_values(size_t(numel(xs)), 99, -1, 1), xs);
  const Tensor labels = Tensor::from_vector<int64_t>({0, 2});
  // f(params) = cross_entropy(net(x)) with the module's parameters replaced by the float64 leaves.
  nn_test::Fn f = [&](const std::vector<Tensor>& ps) {
    for (size_t i = 0; i < named.size(); ++i) *named[i].second = ps[i];
    return (*net)(x);  // (2, 3) logits; scalarize() takes a random projection
  };
  nn_test::expect_grad_matches_fd(f, inputs, 1e-6, 1e-6);
  // And through the loss, wrt the input as well, with autograd on the module's own tensors.
  Tensor xin = f64(det_values(size_t(numel(xs)), 98, -1, 1), xs).set_requires_grad();
  for (size_t i = 0; i < named.size(); ++i)
    *named[i].second = f64(inputs[i].first, inputs[i].second).set_requires_grad();
  const Tensor loss = cross_entropy((*net)(xin), labels);
  loss.backward();
  for (auto& [n, t] : named) {
    ASSERT_TRUE(t->grad().defined()) << n;
    EXPECT_EQ(t->grad().shape(), t->shape()) << n;
  }
  auto xv = xin.to_vector<double>();
  const auto gx = xin.grad().to_vector<double>();
  for (size_t j = 0; j < xv.size(); j += 5) {
    auto at = [&](double d) {
      NoGradGuard ng;
      auto v = xv;
      v[j] += d;
      return cross_entropy((*net)(f64(v, xs)), labels).item<double>();
    };
    const double fd = (at(1e-6) - at(-1e-6)) / 2e-6;
    EXPECT_NEAR(gx[j], fd, 1e-6 * std::max(1.0, std::abs(fd))) << "x element " << j;
  }
}
