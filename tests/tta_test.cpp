// Test-time augmentation in Model::evaluate (TTA: none, flip, flip_translate): the loss and accuracy
// are those of the logits averaged over the views, checked against views built here on the host
// (mirror images; one-pixel shifts of the reflect-padded image), and TTA names and inputs are checked.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "aether/aether.h"

using namespace aether;

namespace {

constexpr int64_t kN = 12, kH = 5, kW = 6;  // images (kN, kH, kW, 1)

data::Dataset images() {
  data::Dataset d;
  d.name = "tta";
  d.n = kN;
  d.h = kH;
  d.w = kW;
  d.c = 1;
  d.num_classes = 3;
  for (int64_t i = 0; i < kN; ++i) {
    d.labels.push_back(i % 3);
    for (int64_t p = 0; p < kH * kW; ++p) d.images.push_back(uint8_t((i * 53 + p * p * 7 + p) % 251));
  }
  d.check();
  return d;
}

// An untrained conv net (no batch norm, no dropout: the same in both modes), normalisation 0 / 1.
Model model() {
  manual_seed(4);
  Model m;
  m.add(std::make_shared<nn::Conv2d>(1, 4, 3, Conv2dOptions{.padding = "same"}))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::Linear>(kH * kW * 4, 3));
  m.configure(ModelConfig{}).finalize({kH, kW, 1});
  return m;
}

// The data set's images as the loader gives them (uint8 / 255), with pixel (y, x) of image i taken
// from view(i, y, x): an (N, H, W, 1) float32 tensor.
template <typename F>
Tensor view(const data::Dataset& d, F&& at) {
  std::vector<float> v;
  for (int64_t i = 0; i < kN; ++i)
    for (int64_t y = 0; y < kH; ++y)
      for (int64_t x = 0; x < kW; ++x) v.push_back(float(at(i, y, x)) / 255.0f);
  return Tensor::from_vector<float>(v, {kN, kH, kW, 1});
}

// Reflection of an index into [0, n) (as reflect padding: -1 -> 1, n -> n - 2).
int64_t reflect(int64_t i, int64_t n) { return i < 0 ? -i : i >= n ? 2 * (n - 1) - i : i; }

}  // namespace

TEST(TTA, EvaluateAveragesTheLogitsOfTheViews) {
  const data::Dataset d = images();
  Model m = model();
  auto px = [&](int64_t i, int64_t y, int64_t x) { return d.images[size_t((i * kH + y) * kW + x)]; };
  const Tensor plain = view(d, px);
  const Tensor mirror = view(d, [&](int64_t i, int64_t y, int64_t x) { return px(i, y, kW - 1 - x); });
  // The reflect-padded image cropped at (0, 0): pixel (y, x) is the original's (y - 1, x - 1).
  auto shifted = [&](int64_t dy, int64_t dx, bool flip) {
    return view(d, [&, dy, dx, flip](int64_t i, int64_t y, int64_t x) {
      const int64_t xx = flip ? kW - 1 - x : x;
      return px(i, reflect(y + dy, kH), reflect(xx + dx, kW));
    });
  };
  NoGradGuard no_grad;
  auto logits = [&](const Tensor& x) { return m.network().forward(x); };
  const Tensor labels = Tensor::from_vector<int64_t>(d.labels, {kN});
  const Tensor flip = (logits(plain) + logits(mirror)) * 0.5;
  const Tensor down_right = (logits(shifted(-1, -1, false)) + logits(shifted(-1, -1, true))) * 0.5;
  const Tensor up_left = (logits(shifted(1, 1, false)) + logits(shifted(1, 1, true))) * 0.5;
  const Tensor both = flip * 0.5 + (down_right + up_left) * 0.25;
  const std::pair<TTA, Tensor> cases[] = {
      {TTA::none, logits(plain)}, {TTA::flip, flip}, {TTA::flip_translate, both}};
  for (const auto& [tta, want] : cases) {
    SCOPED_TRACE(tta_name(tta));
    const EvalResult r = m.evaluate(d, 5, tta);  // batches of 5: a partial last one
    EXPECT_NEAR(r.loss, cross_entropy(want, labels).item<double>(), 1e-5);
    EXPECT_NEAR(r.accuracy, accuracy(want, labels).item<double>(), 1e-6);  // float32 means per batch
    EXPECT_EQ(r.samples, kN);
  }
  // The views differ, so the averages do: the test would notice a view left out.
  EXPECT_NE(m.evaluate(d, 5, TTA::flip).loss, m.evaluate(d, 5, TTA::none).loss);
  EXPECT_NE(m.evaluate(d, 5, TTA::flip_translate).loss, m.evaluate(d, 5, TTA::flip).loss);
}

TEST(TTA, NamesAndInputsAreChecked) {
  for (TTA t : {TTA::none, TTA::flip, TTA::flip_translate}) EXPECT_EQ(tta_from_name(tta_name(t)), t);
  EXPECT_THROW(tta_from_name("mirror"), Error);
  // A model with flat input has no image to mirror.
  Model flat;
  flat.add(std::make_shared<nn::Linear>(kH * kW, 3));
  flat.configure(ModelConfig{}).finalize({kH * kW});
  try {
    flat.evaluate(images(), 5, TTA::flip);
    ADD_FAILURE() << "TTA on flat input was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("needs image input"), std::string::npos) << e.what();
  }
}
