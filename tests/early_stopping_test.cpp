// Early stopping (TrainOptions::early_stopping, src/model/early_stopping.h) and the validation split
// (data::split_validation): the stopping rule on given sequences (losses fall, accuracies rise,
// min_delta, patience 0 as 1), the best epoch's weights kept and restored, Model::train stopping
// on a validation loss that rises and returning (and saving) the best epoch's weights, which equal
// those of a run trained for that many epochs; errors before an epoch is spent.
#include "model/early_stopping.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "error_util.h"
#include "model_util.h"
#include "temp_dir.h"

using namespace aether;
using namespace model_test;
using aether::model_internal::EarlyStopper;
using aether::test::TempDir;

namespace {

EarlyStopping stopping(const std::string& monitor, int64_t patience, double min_delta = 0,
                       bool restore = true) {
  EarlyStopping e;
  e.monitor = monitor;
  e.patience = patience;
  e.min_delta = min_delta;
  e.restore_best_weights = restore;
  return e;
}

// The epoch (0-based) after which `s` stops on `values` of the monitored number, or -1 when it
// does not; each epoch's state is a tensor holding its epoch number.
int64_t stop_epoch(EarlyStopper& s, const std::string& monitor, const std::vector<double>& values,
                   Tensor* state = nullptr) {
  Tensor t = Tensor::from_vector<float>({-1.0f}, {1});
  if (state == nullptr) state = &t;
  for (size_t e = 0; e < values.size(); ++e) {
    EpochStats st;
    st.epoch = int64_t(e);
    if (monitor == "loss") st.train_loss = values[e];
    if (monitor == "accuracy") st.train_accuracy = values[e];
    if (monitor == "val_loss") st.val_loss = values[e];
    if (monitor == "val_accuracy") st.val_accuracy = values[e];
    state->assign(Tensor::from_vector<float>({float(e)}, {1}));
    if (s.update(st, {{"x", state}})) return int64_t(e);
  }
  return -1;
}

}  // namespace

TEST(EarlyStopper, LossesMustFallByMoreThanMinDelta) {
  const std::vector<double> losses = {1.0, 0.9, 0.95, 0.89, 0.91, 0.92, 0.5};
  EarlyStopper plain(stopping("val_loss", 2), true);
  EXPECT_EQ(stop_epoch(plain, "val_loss", losses), 5);  // 0.89 at epoch 3 improves; 4 and 5 do not
  EXPECT_EQ(plain.best_epoch(), 3);
  EXPECT_EQ(plain.stop_reason(), "val_loss has not improved on 0.8900 (epoch 4) for 2 epochs");
  EarlyStopper delta(stopping("val_loss", 2, 0.02), true);
  EXPECT_EQ(stop_epoch(delta, "val_loss", losses), 3);  // 0.89 is not below 0.9 - 0.02
  EXPECT_EQ(delta.best_epoch(), 1);
  EarlyStopper train_loss(stopping("loss", 3), false);
  EXPECT_EQ(stop_epoch(train_loss, "loss", losses), -1);  // 0.5 at epoch 6 comes in time
  EXPECT_EQ(train_loss.best_epoch(), 6);
}

TEST(EarlyStopper, AccuraciesMustRiseAndPatienceZeroActsAsOne) {
  const std::vector<double> acc = {0.5, 0.6, 0.6, 0.55, 0.7};
  EarlyStopper two(stopping("val_accuracy", 2), true);
  EXPECT_EQ(stop_epoch(two, "val_accuracy", acc), 3);  // an equal value is no improvement
  EXPECT_EQ(two.best_epoch(), 1);
  for (int64_t patience : {0, 1}) {
    EarlyStopper one(stopping("accuracy", patience), false);
    EXPECT_EQ(stop_epoch(one, "accuracy", acc), 2) << "patience " << patience;
  }
}

TEST(EarlyStopper, RestoresTheBestEpochsValuesOnlyWhenALaterEpochRan) {
  Tensor x = Tensor::from_vector<float>({0.0f}, {1});
  EarlyStopper s(stopping("val_loss", 2), true);
  EXPECT_EQ(stop_epoch(s, "val_loss", {3, 2, 2.5, 2.5}, &x), 3);
  EXPECT_EQ(x.item<float>(), 3.0f);  // the last epoch's value
  EXPECT_TRUE(s.restore({{"x", &x}}));
  EXPECT_EQ(x.item<float>(), 1.0f);  // epoch 1's

  Tensor y = Tensor::from_vector<float>({0.0f}, {1});
  EarlyStopper last_best(stopping("val_loss", 2), true);
  EXPECT_EQ(stop_epoch(last_best, "val_loss", {3, 2, 1}, &y), -1);
  EXPECT_FALSE(last_best.restore({{"y", &y}}));
  EXPECT_EQ(y.item<float>(), 2.0f);

  Tensor z = Tensor::from_vector<float>({0.0f}, {1});
  EarlyStopper off(stopping("val_loss", 1, 0, /*restore=*/false), true);
  EXPECT_EQ(stop_epoch(off, "val_loss", {1, 2}, &z), 1);
  EXPECT_FALSE(off.restore({{"z", &z}}));
  EXPECT_EQ(z.item<float>(), 1.0f);
}

TEST(EarlyStopper, BadOptionsNameWhatIsWrong) {
  EXPECT_NE(error_of([] {
              EarlyStopper(stopping("val_acc", 1), true);
            }).find("unknown monitor 'val_acc' (expected val_loss, val_accuracy, loss or accuracy)"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              EarlyStopper(stopping("val_accuracy", 1), false);
            }).find("monitors val_accuracy, which needs a validation set"),
            std::string::npos);
  EXPECT_NE(error_of([] { EarlyStopper(stopping("loss", -1), false); }).find("patience must be >= 0, got -1"),
            std::string::npos);
  EXPECT_NE(error_of([] {
              EarlyStopper(stopping("loss", 1, -0.5), false);
            }).find("min_delta must be >= 0, got -0.5"),
            std::string::npos);
  EXPECT_EQ(error_of([] { EarlyStopper(stopping("loss", 0), false); }), "");
}

TEST(ModelEarlyStopping, StopsWhenTheValidationLossRisesAndReturnsTheBestEpochsWeights) {
  TempDir dir;
  const std::string ckpt = (dir.path() / "best.aether").string();
  const data::Dataset train = tiny_dataset(), val = flipped_labels(tiny_dataset(32, 5));
  TrainOptions o = train_options(12);
  o.validation = &val;
  o.checkpoint_path = ckpt;
  o.early_stopping = stopping("val_loss", 2);
  Model m = small_model();
  const History h = m.train(train, o);
  ASSERT_TRUE(h.stopped_early);
  ASSERT_GE(h.best_epoch, 0);
  // Stopped `patience` epochs after the best, which no later epoch improved on.
  EXPECT_EQ(int64_t(h.epochs.size()), h.best_epoch + 1 + 2);
  EXPECT_LT(h.epochs.size(), 12u);
  for (const auto& e : h.epochs) EXPECT_GE(*e.val_loss, *h.epochs[size_t(h.best_epoch)].val_loss);
  EXPECT_EQ(h.best, *h.epochs[size_t(h.best_epoch)].val_loss);
  EXPECT_TRUE(h.restored_best);
  EXPECT_EQ(m.epochs_done(), int64_t(h.epochs.size()));  // the epochs that ran

  // The weights are those of a run trained for best_epoch + 1 epochs; the checkpoint holds them.
  Model ref = small_model();
  TrainOptions ro = train_options(h.best_epoch + 1);
  ro.validation = &val;
  ref.train(train, ro);
  expect_same_weights(m, ref);
  Model loaded = Model::load(ckpt);
  expect_same_weights(loaded, ref);
  EXPECT_EQ(m.evaluate(val).loss, *h.epochs[size_t(h.best_epoch)].val_loss);

  // Without restore_best_weights, the last epoch's weights.
  Model last = small_model();
  o.checkpoint_path.clear();
  o.early_stopping = stopping("val_loss", 2, 0, /*restore=*/false);
  const History hl = last.train(train, o);
  EXPECT_TRUE(hl.stopped_early);
  EXPECT_FALSE(hl.restored_best);
  Model ref_last = small_model();
  ro.epochs = int64_t(hl.epochs.size());
  ref_last.train(train, ro);
  expect_same_weights(last, ref_last);
}

TEST(ModelEarlyStopping, AnUnreachableMinDeltaStopsAfterPatienceEpochs) {
  const data::Dataset train = tiny_dataset();
  TrainOptions o = train_options(10);
  o.early_stopping = stopping("loss", 3, /*min_delta=*/1e9);
  Model m = small_model();
  const History h = m.train(train, o);
  EXPECT_TRUE(h.stopped_early);
  EXPECT_EQ(h.epochs.size(), 4u);
  EXPECT_EQ(h.best_epoch, 0);
  EXPECT_TRUE(h.restored_best);
  Model ref = small_model();
  ref.train(train, train_options(1));
  expect_same_weights(m, ref);
}

TEST(ModelEarlyStopping, OptionsAreCheckedBeforeAnEpochIsSpent) {
  const data::Dataset train = tiny_dataset();
  TrainOptions o = train_options(3);
  o.early_stopping = stopping("val_loss", 1);
  Model m = small_model();
  const std::string msg = error_of([&] { m.train(train, o); });
  EXPECT_NE(msg.find("early_stopping monitors val_loss, which needs a validation set"), std::string::npos)
      << msg;
  EXPECT_EQ(m.epochs_done(), 0);
  EXPECT_EQ(m.steps_done(), 0);
}

TEST(SplitValidation, TheLastFractionValidatesInOrder) {
  const data::Dataset d = tiny_dataset(10);
  const auto [train, val] = data::split_validation(d, 0.25);  // round(2.5) = 3 held out
  ASSERT_EQ(train.n, 7);
  ASSERT_EQ(val.n, 3);
  EXPECT_EQ(val.name, "tiny (validation)");
  EXPECT_EQ(train.name, "tiny");
  EXPECT_EQ(std::vector<uint8_t>(d.images.begin(), d.images.begin() + 7 * 64), train.images);
  EXPECT_EQ(std::vector<uint8_t>(d.images.begin() + 7 * 64, d.images.end()), val.images);
  EXPECT_EQ(std::vector<int64_t>(d.labels.begin() + 7, d.labels.end()), val.labels);
  train.check();
  val.check();

  // Float32 images point into the same array; targets are split too.
  std::vector<float> pixels(size_t(4 * 64));
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = float(i);
  data::Dataset f = d;
  f.n = 4;
  f.images.clear();
  f.labels.clear();
  f.num_classes = 0;
  f.class_names.clear();
  f.float_images = pixels.data();
  f.target_dim = 2;
  f.targets = {0, 1, 2, 3, 4, 5, 6, 7};
  const auto [ft, fv] = data::split_validation(f, 0.5);
  EXPECT_EQ(fv.float_images, pixels.data() + 2 * 64);
  EXPECT_EQ(fv.targets, (std::vector<float>{4, 5, 6, 7}));
  EXPECT_EQ(ft.targets, (std::vector<float>{0, 1, 2, 3}));
  ft.check();
  fv.check();
}

TEST(SplitValidation, BadFractionsNameWhatIsWrong) {
  const data::Dataset d = tiny_dataset(10);
  for (double f : {0.0, 1.0, -0.1, 1.5})
    EXPECT_NE(error_of([&] { data::split_validation(d, f); }).find("must be in (0, 1)"), std::string::npos)
        << f;
  EXPECT_NE(error_of([&] {
              data::split_validation(d, 0.01);
            }).find("0.01 of the 10 items of 'tiny' leaves 10 to train on and 0 to validate on"),
            std::string::npos);
  EXPECT_NE(error_of([&] { data::split_validation(d, 0.99); }).find("leaves 0 to train on and 10"),
            std::string::npos);
}
