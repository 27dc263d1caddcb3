// Helpers for the Model tests: a tiny synthetic data set built in memory (8x8x1 images, 2 classes:
// bright top half or bright bottom half), flat samples of random values, a small conv net, SGD and
// loader options, and bitwise comparisons of tensors.
#pragma once

#include <gtest/gtest.h>

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

// n flat samples (features, 1, 1) of uniform uint8 values drawn with `seed`, without labels or
// targets (the caller adds them: a model taking (features,) sees each value / 255).
inline data::Dataset flat_samples(int64_t n, int64_t features, uint32_t seed) {
  data::Dataset d;
  d.name = "flat";
  d.n = n;
  d.h = features;
  d.w = 1;
  d.c = 1;
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> pix(0, 255);
  for (int64_t i = 0; i < n * features; ++i) d.images.push_back(uint8_t(pix(gen)));
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

// The first n samples of a labelled data set.
inline data::Dataset first_samples(const data::Dataset& d, int64_t n) {
  data::Dataset out = d;
  out.n = n;
  out.images.resize(size_t(n * d.h * d.w * d.c));
  out.labels.resize(size_t(n));
  out.check();
  return out;
}

inline bool bit_equal(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const auto va = floats(a), vb = floats(b);
  return std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0;
}

// Every parameter and buffer of two models is bitwise equal (names too).
inline void expect_same_weights(Model& a, Model& b) {
  auto pa = a.network().named_parameters(), pb = b.network().named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) {
    EXPECT_EQ(pa[i].first, pb[i].first);
    EXPECT_TRUE(bit_equal(*pa[i].second, *pb[i].second)) << "parameter " << pa[i].first;
  }
  auto ba = a.network().named_buffers(), bb = b.network().named_buffers();
  ASSERT_EQ(ba.size(), bb.size());
  for (size_t i = 0; i < ba.size(); ++i)
    EXPECT_TRUE(bit_equal(*ba[i].second, *bb[i].second)) << "buffer " << ba[i].first;
}

// ... and every optimizer state slot, and the step and epoch counts.
inline void expect_same_state(Model& a, Model& b) {
  expect_same_weights(a, b);
  auto sa = a.optimizer()->named_state(), sb = b.optimizer()->named_state();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    EXPECT_EQ(sa[i].first, sb[i].first);
    EXPECT_TRUE(bit_equal(*sa[i].second, *sb[i].second)) << "optimizer state " << sa[i].first;
  }
  EXPECT_EQ(a.optimizer()->steps(), b.optimizer()->steps());
  EXPECT_EQ(a.steps_done(), b.steps_done());
  EXPECT_EQ(a.epochs_done(), b.epochs_done());
}

// add_layers' net with sgd_config, finalized for (8,8,1), its weights drawn after manual_seed(11).
inline Model small_model() {
  manual_seed(11);
  Model m;
  add_layers(m);
  m.configure(sgd_config()).finalize({8, 8, 1});
  return m;
}

// `d` with every label swapped (2 classes): its loss rises as a model learns the true labels.
inline data::Dataset flipped_labels(data::Dataset d) {
  for (auto& l : d.labels) l = 1 - l;
  d.name = "flipped";
  return d;
}

}  // namespace model_test
