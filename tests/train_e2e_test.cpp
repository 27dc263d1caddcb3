// End to end, from the public headers only: a small MLP and a small CNN
// (conv -> batch norm -> relu -> max pool -> linear -> cross-entropy) train a few SGD steps on
// synthetic data and their loss falls.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "aether/aether.h"
#include "aether/ops/conv.h"
#include "aether/ops/nn.h"

using namespace aether;

namespace {
// Plain SGD on leaf tensors: p <- p - lr * grad.
void sgd_step(std::vector<Tensor>& params, double lr) {
  NoGradGuard no_grad;
  for (auto& p : params) {
    p.assign(p - p.grad() * lr);
    p.zero_grad();
  }
  realize(params);
}
Tensor param(const Shape& s, double scale) {
  return (Tensor::randn(s) * scale).realize().detach().set_requires_grad();
}
}  // namespace

TEST(TrainE2E, MlpLossFalls) {
  manual_seed(7);
  // Two Gaussian blobs in 4-D: class c has mean (+-1, ...). x (64, 4), y (64)
  std::vector<float> xs;
  std::vector<int64_t> ys;
  const auto noise = Tensor::randn({64, 4}).to_vector<float>();
  for (int i = 0; i < 64; ++i) {
    const int c = i % 2;
    for (int j = 0; j < 4; ++j) xs.push_back((c ? 1.0f : -1.0f) + 0.5f * noise[size_t(i * 4 + j)]);
    ys.push_back(c);
  }
  const Tensor x = Tensor::from_vector(xs, {64, 4}), y = Tensor::from_vector(ys);
  std::vector<Tensor> params{param({16, 4}, 0.5), param({16}, 0.1), param({2, 16}, 0.25), param({2}, 0.1)};
  double first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    const Tensor h = linear(x, params[0], params[1]).relu();
    const Tensor loss = cross_entropy(linear(h, params[2], params[3]), y);
    loss.backward();
    sgd_step(params, 0.2);
    last = loss.item<double>();
    if (step == 0) first = last;
    ASSERT_TRUE(std::isfinite(last));
  }
  EXPECT_LT(last, 0.5 * first) << "loss " << first << " -> " << last;
}

TEST(TrainE2E, CnnLossFalls) {
  manual_seed(11);
  // 8x8 single-channel images; class = which half (left/right) is bright. x (32, 8, 8, 1) NHWC
  const int n = 32;
  std::vector<float> xs;
  std::vector<int64_t> ys;
  const auto noise = Tensor::rand({n, 8, 8}).to_vector<float>();
  for (int i = 0; i < n; ++i) {
    const int c = i % 2;
    for (int r = 0; r < 8; ++r)
      for (int q = 0; q < 8; ++q)
        xs.push_back(((q < 4) == (c == 0) ? 1.0f : 0.0f) + 0.3f * noise[size_t(i * 64 + r * 8 + q)]);
    ys.push_back(c);
  }
  const Tensor x = Tensor::from_vector(xs, {n, 8, 8, 1}), y = Tensor::from_vector(ys);
  // conv 3x3 1->4 "same" (no bias) -> batch norm (affine) -> relu -> max pool 2 -> flatten -> linear 64->2
  std::vector<Tensor> params{
      param({4, 3, 3, 1}, 0.3), Tensor::ones({4}).realize().detach().set_requires_grad(),
      Tensor::zeros({4}).realize().detach().set_requires_grad(), param({2, 64}, 0.1), param({2}, 0.1)};
  Tensor running_mean = Tensor::zeros({4}), running_var = Tensor::ones({4});
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    const Tensor c = conv2d(x, params[0], Tensor(), {.padding = "same"});
    const auto bn = batch_norm(c, params[1], params[2], running_mean, running_var, /*training=*/true);
    const Tensor p = max_pool2d(bn.out.relu(), 2);
    const Tensor loss = cross_entropy(linear(p.flatten(1), params[3], params[4]), y);
    loss.backward();
    sgd_step(params, 0.1);
    running_mean = bn.new_running_mean.detach().realize();
    running_var = bn.new_running_var.detach().realize();
    last = loss.item<double>();
    if (step == 0) first = last;
    ASSERT_TRUE(std::isfinite(last));
  }
  EXPECT_LT(last, 0.5 * first) << "loss " << first << " -> " << last;
  // The running statistics moved away from their initial values.
  EXPECT_GT(running_mean.abs().sum().item<double>(), 0.0);
}

namespace {
// 15 SGD steps of the small CNN above (same seed, same data) with fusion on or off: the losses
// and the final parameters.
std::pair<std::vector<double>, std::vector<float>> cnn_run(bool fused) {
  const bool was = fusion_enabled();
  set_fusion(fused);
  manual_seed(11);
  const int n = 16;
  const Tensor x = Tensor::rand({n, 8, 8, 1}).realize();
  std::vector<int64_t> ys;
  for (int i = 0; i < n; ++i) ys.push_back(i % 3);
  const Tensor y = Tensor::from_vector(ys);
  std::vector<Tensor> params{
      param({4, 3, 3, 1}, 0.3), Tensor::ones({4}).realize().detach().set_requires_grad(),
      Tensor::zeros({4}).realize().detach().set_requires_grad(), param({3, 64}, 0.1), param({3}, 0.1)};
  Tensor running_mean = Tensor::zeros({4}), running_var = Tensor::ones({4});
  std::vector<double> losses;
  for (int step = 0; step < 15; ++step) {
    const Tensor c = conv2d(x, params[0], Tensor(), {.padding = "same"});
    const auto bn = batch_norm(c, params[1], params[2], running_mean, running_var, /*training=*/true);
    const Tensor p = max_pool2d(bn.out.relu(), 2);
    const Tensor loss = cross_entropy(linear(p.flatten(1), params[3], params[4]), y, /*label_smoothing=*/0.1);
    loss.backward();
    sgd_step(params, 0.1);
    running_mean = bn.new_running_mean.detach().realize();
    running_var = bn.new_running_var.detach().realize();
    losses.push_back(loss.item<double>());
  }
  std::vector<float> flat;
  for (const Tensor& t : params)
    for (float v : t.to_vector<float>()) flat.push_back(v);
  for (float v : running_var.to_vector<float>()) flat.push_back(v);
  set_fusion(was);
  return {losses, flat};
}
}  // namespace

TEST(TrainE2E, FusedAndReferenceTrainingAgree) {
  const auto [ref_loss, ref_params] = cnn_run(false);
  const auto [fused_loss, fused_params] = cnn_run(true);
  ASSERT_EQ(ref_loss.size(), fused_loss.size());
  for (size_t i = 0; i < ref_loss.size(); ++i) EXPECT_NEAR(fused_loss[i], ref_loss[i], 1e-4) << "step " << i;
  EXPECT_LT(ref_loss.back(), ref_loss.front());
  ASSERT_EQ(ref_params.size(), fused_params.size());
  for (size_t i = 0; i < ref_params.size(); ++i)
    EXPECT_NEAR(fused_params[i], ref_params[i], 1e-4) << "param " << i;
}
