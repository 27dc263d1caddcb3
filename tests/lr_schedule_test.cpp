// TrainOptions::lr_schedule (Keras' LearningRateScheduler) and Model::learning_rate(): the function sees
// each epoch and the base learning rate in force; every step of the epoch trains at what it returned
// (the "constant" schedule), or the schedule's shape scaled by returned / ModelConfig::lr, times a
// plateau reduction's factor; the value is training state (kept by later train() calls and in the
// checkpoint: a resumed run equals an uninterrupted one) until configure(); a bad value stops train()
// before the epoch's first step. (Several ranks: python/tests/test_distributed.py.)
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "error_util.h"
#include "model_util.h"
#include "temp_dir.h"

using namespace aether;
using namespace model_test;
using aether::test::TempDir;

namespace {

// Each step's learning rate (the optimizer's, read after the step).
std::vector<double> step_lrs(Model& m, const data::Dataset& train, TrainOptions o) {
  std::vector<double> lrs;
  o.on_batch = [&](const BatchProgress&) { lrs.push_back(m.optimizer()->lr()); };
  m.train(train, o);
  return lrs;
}

}  // namespace

TEST(LrSchedule, EveryStepOfAnEpochTrainsAtWhatItReturned) {
  const data::Dataset train = tiny_dataset();  // 4 steps of 16 per epoch
  Model m = small_model();                     // sgd, lr 0.05, constant schedule
  TrainOptions o = train_options(4);
  std::vector<std::pair<int64_t, double>> calls;  // (epoch, lr it was given)
  o.lr_schedule = [&](int64_t epoch, double lr) {
    calls.emplace_back(epoch, lr);
    return epoch == 0 ? lr : lr * 0.5;
  };
  const std::vector<double> lrs = step_lrs(m, train, o);
  EXPECT_EQ(calls, (std::vector<std::pair<int64_t, double>>{{0, 0.05}, {1, 0.05}, {2, 0.025}, {3, 0.0125}}));
  ASSERT_EQ(lrs.size(), 16u);
  for (size_t s = 0; s < lrs.size(); ++s)
    EXPECT_EQ(lrs[s], 0.05 * std::pow(0.5, double(s / 4))) << "step " << s;
  EXPECT_EQ(m.learning_rate(), 0.00625);

  // Kept by a later train() (which calls on with it), also without the function; configure() ends it.
  o.epochs = 5;
  EXPECT_EQ(m.train(train, o).epochs[0].lr, 0.003125);
  EXPECT_EQ(calls.back(), (std::pair<int64_t, double>{4, 0.00625}));
  o.epochs = 6;
  o.lr_schedule = nullptr;
  EXPECT_EQ(m.train(train, o).epochs[0].lr, 0.003125);
  m.configure(sgd_config());
  EXPECT_EQ(m.learning_rate(), 0.05);
  o.epochs = 7;
  EXPECT_EQ(m.train(train, o).epochs[0].lr, 0.05);
}

TEST(LrSchedule, ReturningTheConfiguredRateChangesNothing) {
  const data::Dataset train = tiny_dataset();
  TrainOptions o = train_options(3);
  Model without = small_model();  // (each model's dropout draws follow its manual_seed)
  without.train(train, o);
  o.lr_schedule = [](int64_t, double lr) { return lr; };
  Model with = small_model();
  with.train(train, o);
  expect_same_state(with, without);
}

TEST(LrSchedule, ScalesAScheduleAndComposesWithAPlateauReduction) {
  const data::Dataset train = tiny_dataset(), val = flipped_labels(tiny_dataset(32, 5));
  auto cosine = [] {
    manual_seed(11);
    Model m;
    add_layers(m);
    m.configure(sgd_config("cosine")).finalize({8, 8, 1});
    return m;
  };
  TrainOptions o = train_options(4);
  o.validation = &val;
  Model plain = cosine();
  const std::vector<double> shape = step_lrs(plain, train, o);  // the cosine schedule's rates
  // Epoch e at 0.05 x (e + 1), with a reduction on a plateau: each step's rate is the cosine's x
  // (e + 1) x the factor after the epochs before it that reduced it.
  o.lr_schedule = [](int64_t epoch, double) { return 0.05 * double(epoch + 1); };
  ReduceLrOnPlateau r;
  r.factor = 0.5;
  r.patience = 1;
  o.reduce_lr_on_plateau = r;
  std::vector<bool> reduced;
  o.on_epoch = [&](const EpochStats& e) { reduced.push_back(e.lr_reduced); };
  Model scaled = cosine();
  const std::vector<double> lrs = step_lrs(scaled, train, o);
  ASSERT_EQ(lrs.size(), shape.size());
  ASSERT_EQ(reduced.size(), 4u);
  double factor = 1;
  for (size_t s = 0; s < lrs.size(); ++s) {
    const size_t e = s / 4;
    if (s % 4 == 0 && e > 0 && reduced[e - 1]) factor *= 0.5;
    EXPECT_DOUBLE_EQ(lrs[s], shape[s] * double(e + 1) * factor) << "step " << s;
  }
  EXPECT_LT(factor, 1);  // it did reduce
}

TEST(LrSchedule, AResumedRunEqualsAnUninterruptedOne) {
  TempDir dir;
  const std::string ckpt = (dir.path() / "run.aether").string();
  const data::Dataset train = tiny_dataset();
  TrainOptions o = train_options(6);
  o.lr_schedule = [](int64_t, double lr) { return lr * 0.7; };  // needs the rate in force
  Model whole = small_model();
  const History hw = whole.train(train, o);

  Model part = small_model();
  o.epochs = 3;
  o.checkpoint_path = ckpt;
  part.train(train, o);
  Model resumed = Model::load(ckpt);
  EXPECT_EQ(resumed.learning_rate(), part.learning_rate());
  o.epochs = 6;
  o.checkpoint_path.clear();
  const History hr = resumed.train(train, o);
  ASSERT_EQ(hr.epochs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(hr.epochs[i].lr, hw.epochs[i + 3].lr) << i;
  expect_same_state(resumed, whole);
  EXPECT_EQ(resumed.learning_rate(), whole.learning_rate());
}

TEST(LrSchedule, ABadRateStopsTrainBeforeTheEpochsFirstStep) {
  const data::Dataset train = tiny_dataset();
  for (const double bad :
       {0.0, -0.1, std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity()}) {
    Model m = small_model();
    TrainOptions o = train_options(3);
    o.lr_schedule = [bad](int64_t epoch, double lr) { return epoch == 1 ? bad : lr; };
    const std::string e = error_of([&] { m.train(train, o); });
    EXPECT_NE(e.find("lr_schedule returned " + detail::cat(bad) +
                     " for epoch 2; a learning rate must be finite "
                     "and > 0"),
              std::string::npos)
        << e;
    EXPECT_EQ(m.epochs_done(), 1);
    EXPECT_EQ(m.steps_done(), 4);
    EXPECT_EQ(m.learning_rate(), 0.05);
  }
}
