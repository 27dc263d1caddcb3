// Helpers for the Model tests: a tiny synthetic data set built in memory (8x8x1 images, 2 classes:
// bright top half or bright bottom half), a small conv net for it, SGD and loader options, and
// bitwise comparisons of tensors.
#pragma once

#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "aether/aether.h"
#include "aether/model/model.h"

namespace model_test {

using namespace aether;

template <typename T, typename... A>
std::shared_ptr<T> mk(A&&... a) {
  return std::make_shared<T>(std::forward<A>(a)...);
}

// 64 images (8,8,1) uint8: class 0 has a bright top half, class 1 a bright bottom half, plus noise.
inline data::Dataset tiny_dataset(int64_t n = 64, uint32_t seed = 1) {
  data::Dataset d;
  d.name = "tiny";
  d.n = n;
  d.h = 8;
  d.w = 8;
  d.c = 1;
  d.num_classes = 2;
  d.class_names = {"top", "bottom"};
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> noise(0, 90);
  for (int64_t i = 0; i < n; ++i) {
    const int64_t label = i % 2;
    d.labels.push_back(label);
    for (int y = 0; y < 8; ++y)
      for (int x = 0; x < 8; ++x) {
        const bool bright = (y < 4) == (label == 0);
        d.images.push_back(uint8_t((bright ? 150 : 20) + noise(gen)));
      }
  }
  d.check();
  return d;
}

// Conv -> BN -> ReLU -> pool -> flatten -> dropout -> linear, for (8,8,1) inputs and 2 classes.
inline void add_layers(Model& m, double dropout = 0.25) {
  m.add(mk<nn::Conv2d>(1, 4, 3, Conv2dOptions{.padding = "same"}))
      .add(mk<nn::BatchNorm2d>(4))
      .add(mk<nn::ReLU>())
      .add(mk<nn::MaxPool2d>(2))
      .add(mk<nn::Flatten>())
      .add(mk<nn::Dropout>(dropout))
      .add(mk<nn::Linear>(4 * 4 * 4, 2));
}

inline ModelConfig sgd_config(const std::string& schedule = "constant") {
  ModelConfig c;
  c.optimizer = "sgd";
  c.lr = 0.05;
  c.momentum = 0.9;
  c.schedule = schedule;
  return c;
}

inline TrainOptions train_options(int64_t epochs) {
  TrainOptions o;
  o.epochs = epochs;
  o.data.batch_size = 16;
  o.data.seed = 3;
  o.data.mean = {0.35f};
  o.data.std = {0.3f};
  o.progress = false;
  return o;
}

inline std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

inline bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const auto va = floats(a), vb = floats(b);
  return std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0;
}

}  // namespace model_test
