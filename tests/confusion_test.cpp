// EvalResult::confusion and class_accuracy(): evaluate() counts each (label, argmax) pair; the
// counts equal those from predict()'s outputs, in any batch size and with test-time augmentation's
// averaged outputs; the diagonal over the samples is the accuracy; a class without samples has a
// NaN accuracy; targets give no matrix. Training counts its accuracy too.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "model_util.h"

using namespace aether;
using namespace model_test;

namespace {

// n flat samples of 4 values, labels i % classes (unrelated to the values: an untrained model's
// argmax spreads over the classes).
data::Dataset labelled(int64_t n, int64_t classes, int64_t label_classes) {
  data::Dataset d = flat_samples(n, 4, 9);
  d.num_classes = classes;
  for (int64_t i = 0; i < n; ++i) d.labels.push_back(i % label_classes);
  d.check();
  return d;
}

Model linear(int64_t outputs) {
  manual_seed(11);
  Model m;
  m.add(mk<nn::Linear>(4, outputs));
  m.configure(sgd_config()).finalize({4});
  return m;
}

// The confusion matrix from the argmax of `out` (N, K): [label][predicted].
std::vector<int64_t> counted(const Tensor& out, const data::Dataset& d) {
  const int64_t k = out.shape()[1];
  const std::vector<int64_t> p = out.argmax(1).to_vector<int64_t>();
  std::vector<int64_t> c(size_t(k * k), 0);
  for (int64_t i = 0; i < d.n; ++i) ++c[size_t(d.labels[size_t(i)] * k + p[size_t(i)])];
  return c;
}

TEST(Confusion, CountsEachLabelAndPredictionPair) {
  const data::Dataset d = labelled(90, 3, 3);
  Model m = linear(3);
  const std::vector<int64_t> want = counted(m.predict(d), d);
  int64_t off_diagonal = 0;
  for (int64_t l = 0; l < 3; ++l)
    for (int64_t p = 0; p < 3; ++p) off_diagonal += l != p ? want[size_t(l * 3 + p)] : 0;
  ASSERT_GT(off_diagonal, 0) << "every prediction right: the test would not see a swapped index";
  const double right = double(want[0] + want[4] + want[8]) / 90.0;
  ASSERT_NE(double(float(right)), right) << "float32 batch means (before) could give this ratio exactly";
  for (const int64_t batch : {7, 32, 256}) {
    const EvalResult r = m.evaluate(d, batch);
    EXPECT_EQ(r.confusion, want) << "batch " << batch;
    EXPECT_EQ(r.accuracy, right) << "batch " << batch;  // counted, not float32 batch means
    const std::vector<double> acc = r.class_accuracy();
    ASSERT_EQ(acc.size(), 3u);
    for (int64_t c = 0; c < 3; ++c)  // 30 samples of each class
      EXPECT_DOUBLE_EQ(acc[size_t(c)], double(want[size_t(c * 4)]) / 30.0) << "class " << c;
  }
}

TEST(Confusion, TestTimeAugmentationCountsTheAveragedOutputs) {
  data::Dataset d = tiny_dataset(48);
  Model m;
  manual_seed(4);
  add_layers(m);
  m.configure(sgd_config()).finalize({8, 8, 1});
  // flip: the mean of the outputs of each image and its mirror image, as predict() gives them.
  data::Dataset mirrored = d;
  for (int64_t i = 0; i < d.n; ++i)
    for (int64_t y = 0; y < 8; ++y)
      for (int64_t x = 0; x < 8; ++x)
        mirrored.images[size_t(i * 64 + y * 8 + x)] = d.images[size_t(i * 64 + y * 8 + 7 - x)];
  // log softmax differs from the logits by a per-image constant: the same argmax as their mean.
  const Tensor logits_mean = m.predict(d).log() + m.predict(mirrored).log();
  EXPECT_EQ(m.evaluate(d, 16, TTA::flip).confusion, counted(logits_mean, d));
}

TEST(Confusion, AClassWithoutSamplesAndTargets) {
  const data::Dataset d = labelled(40, 4, 3);  // 4 classes, no sample of class 3
  Model m = linear(4);
  const EvalResult r = m.evaluate(d, 16);
  ASSERT_EQ(r.confusion.size(), 16u);
  const std::vector<double> acc = r.class_accuracy();
  EXPECT_TRUE(std::isnan(acc[3]));
  EXPECT_FALSE(std::isnan(acc[0]));
  int64_t total = 0;
  for (const int64_t v : r.confusion) total += v;
  EXPECT_EQ(total, 40);
  // Regression targets: no matrix.
  data::Dataset t = flat_samples(20, 4, 3);
  t.target_dim = 4;
  for (int64_t i = 0; i < 20 * 4; ++i) t.targets.push_back(float(i % 5) / 5);
  t.check();
  Model r4 = linear(4);
  ModelConfig c = sgd_config();
  c.loss = "mse";
  r4.configure(c);
  const EvalResult e = r4.evaluate(t, 8);
  EXPECT_TRUE(e.confusion.empty());
  EXPECT_TRUE(e.class_accuracy().empty());
}

}  // namespace

// Training's accuracy with class labels is a count of hits over the samples too: each step's float32
// mean of its batch is turned back into its integer count (it was summed as it was: 0.30000001192).
TEST(Confusion, TrainingAccuracyCountsTheHits) {
  const data::Dataset d = labelled(90, 3, 3);
  Model m = linear(3);
  TrainOptions o = train_options(2);
  o.data.batch_size = 7;  // 13 steps, the last of 6 samples (no drop_last)
  o.data.mean = {0.0f};
  o.data.std = {1.0f};
  const History h = m.train(d, o);
  ASSERT_EQ(h.epochs.size(), 2u);
  for (const EpochStats& e : h.epochs) {
    const double hits = e.train_accuracy * 90.0;
    EXPECT_EQ(hits, std::round(hits)) << "epoch " << e.epoch << ": accuracy " << e.train_accuracy;
    EXPECT_EQ(e.train_accuracy, std::round(hits) / 90.0);
  }
}
