// TrainOptions::class_weight and sample_weight (Keras'): the training loss of every loss kind equals
// the textbook formula with each sample's loss times its class's weight and its own, averaged over
// the samples; a sample's weight stays with it when the data is shuffled; class weights move an
// imbalanced problem's predictions toward the rare class; validation and evaluate ignore train()'s
// weights and take their own sample weights (EvalOptions::sample_weight,
// TrainOptions::validation_sample_weight), which weigh the loss and not the accuracy; bad weights are
// errors that change nothing.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "model_util.h"
#include "nn_test_util.h"

using namespace aether;
using namespace model_test;
using nn_test::expect_error;

namespace {

// n flat samples of 4 values in [0, 1]; label = argmax of (v0, v1, v2) (3 classes), and a binary
// target t = v3 > 0.5.
data::Dataset three_classes(int64_t n = 48) {
  data::Dataset d = flat_samples(n, 4, 4);
  d.num_classes = 3;
  for (int64_t i = 0; i < n; ++i) {
    const uint8_t* v = &d.images[size_t(4 * i)];
    d.labels.push_back(v[0] >= v[1] && v[0] >= v[2] ? 0 : v[1] >= v[2] ? 1 : 2);
  }
  d.check();
  return d;
}
data::Dataset binary_targets(const data::Dataset& labelled) {
  data::Dataset d = labelled;
  d.labels.clear();
  d.num_classes = 0;
  d.target_dim = 1;
  for (int64_t i = 0; i < d.n; ++i) d.targets.push_back(d.images[size_t(i * 4 + 3)] > 127 ? 1.0f : 0.0f);
  d.check();
  return d;
}

Model mlp(const std::string& loss, int64_t outputs, double label_smoothing = 0) {
  manual_seed(8);
  Model m;
  m.add(mk<nn::Linear>(4, 8)).add(mk<nn::Tanh>()).add(mk<nn::Linear>(8, outputs));
  if (loss == "categorical_cross_entropy") m.add(mk<nn::Softmax>());
  ModelConfig c;
  c.loss = loss;
  c.label_smoothing = label_smoothing;
  c.lr = 1e-3;
  m.configure(c).finalize({4});
  return m;
}

// One step on the whole data set in order: the history's training loss is the loss of the
// untrained model.
TrainOptions one_step(std::vector<double> class_weight, int64_t n, std::vector<double> sample_weight = {}) {
  TrainOptions o;
  o.epochs = 1;
  o.data.batch_size = n;
  o.data.shuffle = false;
  o.progress = false;
  o.class_weight = std::move(class_weight);
  o.sample_weight = std::move(sample_weight);
  return o;
}

// Sample i's own weight in these tests.
double own_weight(int64_t i) { return 0.25 + 0.5 * double(i % 5); }
std::vector<double> own_weights(int64_t n) {
  std::vector<double> w;
  for (int64_t i = 0; i < n; ++i) w.push_back(own_weight(i));
  return w;
}

TEST(ClassWeight, EachLossIsTheWeightedMeanOfTheSamplesLosses) {
  const data::Dataset d = three_classes(), bin = binary_targets(d);
  const std::vector<double> w = {0.5, 2.0, 3.0};
  for (const std::string loss :
       {"cross_entropy", "categorical_cross_entropy", "binary_cross_entropy", "mse"}) {
    for (const bool targets : {false, true})
      for (const bool own : {false, true}) {
        if (targets && loss != "binary_cross_entropy") continue;
        SCOPED_TRACE(loss + (targets ? " (targets)" : " (labels)") + (own ? ", sample weights" : ""));
        const double s = loss == "cross_entropy" || loss == "binary_cross_entropy" ? 0.1 : 0.0;
        Model m = mlp(loss, targets ? 1 : 3, s);
        const std::vector<float> p = floats(m.predict(targets ? bin : d));  // before the step
        // The textbook per-sample losses from predict's outputs, in double.
        double want = 0;
        for (int64_t i = 0; i < d.n; ++i) {
          const int64_t label = d.labels[size_t(i)];
          double l = 0, wi = w[size_t(label)];
          if (targets) {
            const double t = bin.targets[size_t(i)], ts = t * (1 - s) + s / 2, q = p[size_t(i)];
            l = -(ts * std::log(q) + (1 - ts) * std::log(1 - q));
            wi = t * 2.0 + (1 - t) * 0.5;  // class_weight {0.5, 2.0}: target 0 and target 1
          } else {
            for (int64_t k = 0; k < 3; ++k) {
              const double q = p[size_t(3 * i + k)], hot = k == label, t = hot * (1 - s) + s / 3;
              if (loss == "cross_entropy" || loss == "categorical_cross_entropy") l -= t * std::log(q);
              if (loss == "binary_cross_entropy")
                l -= (hot * (1 - s) + s / 2) * std::log(q) + (1 - (hot * (1 - s) + s / 2)) * std::log(1 - q);
              if (loss == "mse") l += (q - hot) * (q - hot) / 3;  // mse: the mean over the 3 outputs
            }
            if (loss == "binary_cross_entropy") l /= 3;  // the mean over the outputs
          }
          want += wi * (own ? own_weight(i) : 1.0) * l;
        }
        want /= double(d.n);
        const History h =
            m.train(targets ? bin : d, one_step(targets ? std::vector<double>{0.5, 2.0} : w, d.n,
                                                own ? own_weights(d.n) : std::vector<double>{}));
        EXPECT_NEAR(h.epochs[0].train_loss, want, 1e-5 * want);
      }
  }
}

// Regression targets take sample weights (not class weights): the weighted mean squared error. And
// shuffled batches: each weight stays with its sample, so an epoch of equal batches at a negligible
// learning rate has the full batch's weighted loss in any order.
TEST(SampleWeight, RegressionAndShuffledBatches) {
  const data::Dataset d = three_classes(), bin = binary_targets(d);
  Model r = mlp("mse", 1);
  const std::vector<float> p = floats(r.predict(bin));
  double want = 0;
  for (int64_t i = 0; i < d.n; ++i) {
    const double e = p[size_t(i)] - bin.targets[size_t(i)];
    want += own_weight(i) * e * e;
  }
  want /= double(d.n);
  EXPECT_NEAR(r.train(bin, one_step({}, d.n, own_weights(d.n))).epochs[0].train_loss, want, 1e-5 * want);

  Model m = mlp("cross_entropy", 3);
  ModelConfig c;
  c.lr = 1e-9;  // the weights barely move: each batch's loss is the untrained model's
  m.configure(c);
  const std::vector<float> q = floats(m.predict(d));
  double full = 0;
  for (int64_t i = 0; i < d.n; ++i) full -= own_weight(i) * std::log(q[size_t(3 * i + d.labels[size_t(i)])]);
  full /= double(d.n);
  TrainOptions o = one_step({}, 8, own_weights(d.n));  // 6 batches of 8, shuffled
  o.data.shuffle = true;
  o.data.seed = 5;
  EXPECT_NEAR(m.train(d, o).epochs[0].train_loss, full, 1e-5 * full);
}

// 10% of the samples are class 1, and the classes overlap: weighting class 1 by 9 makes the model
// predict it for more samples than without weights.
TEST(ClassWeight, MovesAnImbalancedProblemTowardTheRareClass) {
  data::Dataset d;
  d.name = "imbalanced";
  d.n = 400;
  d.h = 2;
  d.w = 1;
  d.c = 1;
  d.num_classes = 2;
  std::mt19937 gen(2);
  std::normal_distribution<double> noise(0, 40);
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t label = i % 10 == 0;
    for (int j = 0; j < 2; ++j)
      d.images.push_back(uint8_t(std::clamp(128 + (label ? 30 : -10) + noise(gen), 0.0, 255.0)));
    d.labels.push_back(label);
  }
  d.check();
  auto predicted_ones = [&](std::vector<double> class_weight) {
    manual_seed(3);
    Model m;
    m.add(mk<nn::Linear>(2, 2));
    ModelConfig c;
    c.optimizer = "adam";
    c.lr = 0.05;
    m.configure(c).finalize({2});
    TrainOptions o = one_step(std::move(class_weight), 40);
    o.epochs = 20;
    m.train(d, o);
    const std::vector<float> p = floats(m.predict(d));
    int64_t ones = 0;
    for (int64_t i = 0; i < d.n; ++i) ones += p[size_t(2 * i + 1)] > p[size_t(2 * i)];
    return ones;
  };
  const int64_t plain = predicted_ones({}), weighted = predicted_ones({1.0, 9.0});
  EXPECT_GT(weighted, plain + 20) << "without weights " << plain << ", with " << weighted;
}

TEST(ClassWeight, ValidationAndEvaluateAreUnweighted) {
  const data::Dataset d = three_classes();
  Model m = mlp("cross_entropy", 3);
  TrainOptions o = one_step({0.1, 5.0, 1.0}, 16);
  o.validation = &d;
  const History h = m.train(d, o);
  const EvalResult r = m.evaluate(d, 256);
  EXPECT_DOUBLE_EQ(*h.epochs[0].val_loss, r.loss);
  // After train() returns the weights are gone: a second train() without them goes as one with
  // weights of 1.
  auto second_epoch = [&](std::vector<double> then) {
    Model a = mlp("cross_entropy", 3);
    a.train(d, one_step({0.1, 5.0, 1.0}, 16));
    TrainOptions p = one_step(std::move(then), 16);
    p.epochs = 2;
    a.train(d, p);
    return a.evaluate(d).loss;
  };
  EXPECT_NEAR(second_epoch({}), second_epoch({1.0, 1.0, 1.0}), 1e-5);
}

// evaluate(sample_weight): the mean over the samples of each one's loss times its weight, in any
// batches; the accuracy unweighted. train()'s validation_sample_weight gives the same val_loss.
TEST(SampleWeight, EvaluateWeighsTheLossNotTheAccuracy) {
  const data::Dataset d = three_classes(), bin = binary_targets(d);
  for (const bool targets : {false, true}) {
    SCOPED_TRACE(targets ? "mse on regression targets" : "cross_entropy");
    Model m = mlp(targets ? "mse" : "cross_entropy", targets ? 1 : 3);
    const data::Dataset& data = targets ? bin : d;
    const std::vector<float> p = floats(m.predict(data));
    double want = 0;
    for (int64_t i = 0; i < d.n; ++i) {
      const double l = targets ? std::pow(p[size_t(i)] - bin.targets[size_t(i)], 2)
                               : -std::log(p[size_t(3 * i + d.labels[size_t(i)])]);
      want += own_weight(i) * l;
    }
    want /= double(d.n);
    for (const int64_t batch : {16, 20, 256}) {
      const EvalResult plain = m.evaluate(data, batch);
      EvalOptions o;
      o.batch_size = batch;
      o.sample_weight = own_weights(d.n);
      const EvalResult r = m.evaluate(data, o);
      EXPECT_NEAR(r.loss, want, 1e-6 * want) << "batch " << batch;
      EXPECT_NE(r.loss, plain.loss);
      EXPECT_DOUBLE_EQ(r.accuracy, plain.accuracy) << "batch " << batch;
    }
  }
  Model m = mlp("cross_entropy", 3);
  TrainOptions o = one_step({}, 16);
  o.validation = &d;
  o.validation_sample_weight = own_weights(d.n);
  const History h = m.train(d, o);
  EvalOptions e;
  e.sample_weight = own_weights(d.n);
  EXPECT_DOUBLE_EQ(*h.epochs[0].val_loss, m.evaluate(d, e).loss);
  EXPECT_NE(*h.epochs[0].val_loss, m.evaluate(d).loss);
}

TEST(SampleWeight, EvaluationWeightErrors) {
  const data::Dataset d = three_classes();
  Model m = mlp("cross_entropy", 3);
  EvalOptions e;
  e.sample_weight = {1, 2};
  expect_error([&] { m.evaluate(d, e); },
               {"evaluate: sample_weight has 2 weights, data set 'flat' has 48 samples"});
  e.sample_weight = own_weights(d.n);
  e.sample_weight[3] = std::numeric_limits<double>::quiet_NaN();
  expect_error([&] { m.evaluate(d, e); },
               {"evaluate: sample_weight[3] is nan; a weight must be finite and >= 0"});
  e.sample_weight = own_weights(d.n);
  expect_error([&] { m.predict(d, e); }, {"predict: sample_weight is evaluate's; predict scores nothing"});
  TrainOptions o = one_step({}, 16);
  o.validation_sample_weight = own_weights(d.n);
  expect_error([&] { m.train(d, o); },
               {"train: validation_sample_weight is given without a validation data set"});
  const data::Dataset half = first_samples(d, 24);
  o.validation = &half;
  expect_error([&] { m.train(d, o); },
               {"train: validation_sample_weight has 48 weights, data set 'flat' has 24 samples"});
  EXPECT_EQ(m.steps_done(), 0);
}

TEST(ClassWeight, BadWeightsAreErrorsThatChangeNothing) {
  const data::Dataset d = three_classes();
  Model m = mlp("cross_entropy", 3);
  auto error = [&](std::vector<double> w, const data::Dataset& data) {
    std::string e;
    try {
      m.train(data, one_step(std::move(w), 16));
    } catch (const Error& x) {
      e = x.what();
    }
    EXPECT_EQ(m.steps_done(), 0);
    return e;
  };
  EXPECT_EQ(error({1, 2}, d),
            "train: class_weight has 2 weights, expected 3 (one per class: the model's outputs)");
  EXPECT_EQ(error({1, -2, 1}, d), "train: class_weight[1] is -2; a weight must be finite and >= 0");
  EXPECT_EQ(error({1, 1, std::numeric_limits<double>::quiet_NaN()}, d),
            "train: class_weight[2] is nan; a weight must be finite and >= 0");
  Model b = mlp("binary_cross_entropy", 1);
  expect_error(
      [&] {
        b.train(binary_targets(d), one_step({1, 2, 3}, 16));
      },
      {"train: class_weight has 3 weights, expected 2 (for target 0 and target 1)"});
  Model s = mlp("cross_entropy", 3);
  expect_error(
      [&] {
        s.train(d, one_step({}, 16, {1, 2}));
      },
      {"train: sample_weight has 2 weights, data set 'flat' has 48 samples"});
  std::vector<double> bad = own_weights(d.n);
  bad[7] = -1;
  expect_error([&] { s.train(d, one_step({}, 16, bad)); },
               {"train: sample_weight[7] is -1; a weight must be finite and >= 0"});
  bad[7] = std::numeric_limits<double>::infinity();
  expect_error([&] { s.train(d, one_step({}, 16, bad)); }, {"train: sample_weight[7] is inf"});
  EXPECT_EQ(s.steps_done(), 0);
  data::Dataset regression = binary_targets(d);
  Model r = mlp("mse", 1);
  expect_error(
      [&] {
        r.train(regression, one_step({1, 2}, 16));
      },
      {"train: class_weight needs class labels or the binary_cross_entropy loss's targets; data set "
       "'flat' has regression targets (loss mse)"});
}

}  // namespace
