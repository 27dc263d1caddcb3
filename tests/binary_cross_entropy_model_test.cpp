// The binary_cross_entropy loss in a Model (a sigmoid per output: binary and multi-label
// classification): train() learns 0/1 targets; evaluate()'s loss and accuracy equal the textbook
// formulas computed in double from predict()'s probabilities (so predict gives sigmoids); class
// labels are one-hot targets scored by argmax; label smoothing; save and load keep it; targets outside
// [0, 1] and a model that ends with a sigmoid or softmax are errors that change nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "model_util.h"
#include "nn_test_util.h"
#include "temp_dir.h"

using namespace aether;
using namespace model_test;
using aether::test::TempDir;
using nn_test::expect_error;

namespace {

// n flat samples of 4 uint8 values (v in [0, 1] after scaling) with target_dim targets from `rule`.
data::Dataset flat_targets(int64_t n, int64_t target_dim,
                           const std::function<std::vector<float>(const float*)>& rule) {
  data::Dataset d = flat_samples(n, 4, 7);
  d.target_dim = target_dim;
  for (int64_t i = 0; i < n; ++i) {
    float v[4];
    for (int j = 0; j < 4; ++j) v[j] = float(d.images[size_t(4 * i + j)]) / 255.0f;
    for (float t : rule(v)) d.targets.push_back(t);
  }
  d.check();
  return d;
}

// One output: is v0 + v1 > v2 + v3. Three outputs, independent: v0 > 0.5, v1 + v2 > 1, v3 < v0.
data::Dataset one_label(int64_t n = 256) {
  return flat_targets(n, 1,
                      [](const float* v) { return std::vector<float>{float(v[0] + v[1] > v[2] + v[3])}; });
}
data::Dataset three_labels(int64_t n = 256) {
  return flat_targets(n, 3, [](const float* v) {
    return std::vector<float>{float(v[0] > 0.5f), float(v[1] + v[2] > 1.0f), float(v[3] < v[0])};
  });
}

Model mlp(int64_t outputs, double label_smoothing = 0) {
  manual_seed(3);
  Model m;
  m.add(mk<nn::Linear>(4, 16)).add(mk<nn::ReLU>()).add(mk<nn::Linear>(16, outputs));
  ModelConfig c;
  c.loss = "binary_cross_entropy";
  c.label_smoothing = label_smoothing;
  c.optimizer = "adam";
  c.lr = 0.02;
  m.configure(c).finalize({4});
  return m;
}

TrainOptions options(int64_t epochs) {
  TrainOptions o;
  o.epochs = epochs;
  o.data.batch_size = 32;
  o.progress = false;
  return o;
}

// The textbook loss -[t' ln p + (1 - t') ln(1 - p)] (t' = (1 - s) t + s / 2) and the accuracy
// (p > 0.5) == (t > 0.5), both means over every value, in double.
struct Scores {
  double loss = 0, accuracy = 0;
};
Scores textbook(const std::vector<float>& probs, const std::vector<float>& targets, double smoothing = 0) {
  EXPECT_EQ(probs.size(), targets.size());
  Scores s;
  for (size_t i = 0; i < probs.size(); ++i) {
    const double p = probs[i], t = targets[i] * (1 - smoothing) + smoothing / 2;
    if (t != 0) s.loss -= t * std::log(p);  // a term of weight 0 is 0 (p may round to 0 or 1)
    if (t != 1) s.loss -= (1 - t) * std::log(1 - p);
    s.accuracy += (p > 0.5) == (targets[i] > 0.5);
  }
  s.loss /= double(probs.size());
  s.accuracy /= double(probs.size());
  return s;
}

TEST(BinaryCrossEntropyModel, LearnsOneBinaryOutput) {
  const data::Dataset d = one_label();
  Model m = mlp(1);
  const History h = m.train(d, options(30));
  EXPECT_LT(h.epochs.back().train_loss, 0.5 * h.epochs.front().train_loss);
  EXPECT_EQ(m.config().regression_precision, 0);  // an mse setting; binary targets leave it
  const EvalResult r = m.evaluate(d);
  const std::vector<float> p = floats(m.predict(d));  // (256, 1) probabilities
  ASSERT_EQ(p.size(), 256u);
  for (float v : p) ASSERT_TRUE(v >= 0 && v <= 1) << v;  // (a logit past about 17 rounds to 1)
  const Scores want = textbook(p, d.targets);
  EXPECT_NEAR(r.loss, want.loss, 1e-5 * (1 + want.loss));
  EXPECT_NEAR(r.accuracy, want.accuracy, 1e-7);
  EXPECT_GT(r.accuracy, 0.95);
  // Saved and loaded, the loss and the predictions stay.
  TempDir dir;
  const std::string path = (dir.path() / "bce.aether").string();
  m.save(path);
  Model back = Model::load(path);
  EXPECT_EQ(back.config().loss, "binary_cross_entropy");
  EXPECT_EQ(floats(back.predict(d)), p);
  EXPECT_DOUBLE_EQ(back.evaluate(d).loss, r.loss);
}

TEST(BinaryCrossEntropyModel, MultiLabelTargetsWithLabelSmoothing) {
  const data::Dataset d = three_labels();
  for (const double s : {0.0, 0.1}) {
    Model m = mlp(3, s);
    m.train(d, options(40));
    const EvalResult r = m.evaluate(d);
    const Scores want = textbook(floats(m.predict(d)), d.targets, s);
    EXPECT_NEAR(r.loss, want.loss, 1e-5 * (1 + want.loss)) << "label_smoothing " << s;
    EXPECT_NEAR(r.accuracy, want.accuracy, 1e-7);
    EXPECT_GT(r.accuracy, 0.9) << "label_smoothing " << s;
  }
}

// Class labels: each output's target is 1 for the label's class, 0 for the others (one-vs-rest); the
// accuracy is argmax's, as with the other classification losses.
TEST(BinaryCrossEntropyModel, ClassLabelsAreOneHotTargets) {
  const data::Dataset d = tiny_dataset();
  manual_seed(11);
  Model m;
  add_layers(m);
  ModelConfig c = sgd_config();
  c.loss = "binary_cross_entropy";
  m.configure(c).finalize({8, 8, 1});
  m.train(d, train_options(3));
  const EvalResult r = m.evaluate(d);
  const std::vector<float> p = floats(m.predict(d));  // (64, 2)
  std::vector<float> one_hot;
  double hits = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t label = d.labels[size_t(i)];
    for (int64_t k = 0; k < 2; ++k) one_hot.push_back(float(k == label));
    const int64_t argmax = p[size_t(2 * i + 1)] > p[size_t(2 * i)] ? 1 : 0;  // a tie: the first
    hits += argmax == label;
  }
  EXPECT_NEAR(r.loss, textbook(p, one_hot).loss, 1e-5);
  EXPECT_NEAR(r.accuracy, hits / double(d.n), 1e-7);
  EXPECT_GT(r.accuracy, 0.9);
}

TEST(BinaryCrossEntropyModel, TargetsOutsideZeroToOneAreAnError) {
  data::Dataset d = one_label(64);
  d.targets[3] = 1.5f;
  Model m = mlp(1);
  const std::vector<Tensor> before = m.get_weights();
  expect_error([&] { m.train(d, options(1)); },
               {"train: data set 'flat' has target 1.5 (sample 3, output 0); the binary_cross_entropy loss "
                "takes targets in [0, 1]"});
  expect_error([&] { m.evaluate(d); }, {"evaluate: data set 'flat' has target 1.5"});
  EXPECT_EQ(m.steps_done(), 0);
  const std::vector<Tensor> after = m.get_weights();
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(bit_equal(after[i], before[i])) << "weight " << i;
  d.targets[3] = 1.0f;
  EXPECT_EQ(m.predict(d).shape(), Shape({64, 1}));  // predict does not score: targets do not matter
}

// binary_cross_entropy applies the sigmoid itself: a Sigmoid or Softmax at the end (behind Dropout,
// or inside a nested Sequential) would apply a second one and train on it silently.
TEST(BinaryCrossEntropyModel, AModelEndingWithASigmoidIsAnError) {
  ModelConfig c;
  c.loss = "binary_cross_entropy";
  auto with_end = [&](std::vector<nn::ModulePtr> end) {
    Model m;
    m.add(mk<nn::Linear>(4, 3));
    for (auto& l : end) m.add(std::move(l));
    m.configure(c).finalize({4});
    return m.input_shape() == Shape{4};
  };
  expect_error(
      [&] { with_end({mk<nn::Sigmoid>()}); },
      {"finalize: the loss binary_cross_entropy takes logits and applies the sigmoid itself, but the "
       "model ends with Sigmoid (layer 1), which gives probabilities: remove that layer"});
  expect_error([&] { with_end({mk<nn::Softmax>(), mk<nn::Dropout>(0.1)}); }, {"ends with Softmax (layer 1)"});
  expect_error([&] { with_end({mk<nn::Sequential>(std::vector<nn::ModulePtr>{mk<nn::Sigmoid>()})}); },
               {"ends with Sigmoid (layer 0)"});
  EXPECT_TRUE(with_end({}));
  EXPECT_TRUE(with_end({mk<nn::Sigmoid>(), mk<nn::Linear>(3, 2)}));
}

}  // namespace
