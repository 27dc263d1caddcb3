// Model::request_stop (Keras' model.stop_training) and TrainOptions::on_epoch_begin: a request from
// on_epoch or on_batch stops train() after the epoch it is in, whose checkpoint is written; the
// stopped model is the model of a run of that many epochs and continues as an uninterrupted run;
// train() clears a request made before it, and one made in the last epoch stops nothing. While
// train() runs, its callbacks may evaluate and save but not train again or change the recipe.
// (Several ranks: DistTrain.RankZerosStopRequestStopsEveryRank in dist_train_test.cpp.)
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include "error_util.h"
#include "model_util.h"
#include "temp_dir.h"

using namespace aether;
using namespace model_test;
using aether::test::TempDir;

TEST(RequestStop, FromOnEpochStopsAfterThatEpochWhoseCheckpointIsWritten) {
  TempDir dir;
  const std::string ckpt = (dir.path() / "stopped.aether").string();
  const data::Dataset train = tiny_dataset();  // 64 images: 4 steps of 16 per epoch
  Model m = small_model();
  TrainOptions o = train_options(6);
  o.checkpoint_path = ckpt;
  std::vector<std::pair<int64_t, int64_t>> begins;  // (epoch, steps done) at each epoch's start
  o.on_epoch_begin = [&](int64_t epoch) { begins.emplace_back(epoch, m.steps_done()); };
  o.on_epoch = [&](const EpochStats& e) {
    if (e.epoch == 1) m.request_stop();
  };
  const History h = m.train(train, o);
  EXPECT_TRUE(h.stopped_on_request);
  EXPECT_FALSE(h.stopped_early);
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_EQ(m.epochs_done(), 2);
  EXPECT_EQ(m.steps_done(), 8);
  EXPECT_EQ(begins, (std::vector<std::pair<int64_t, int64_t>>{{0, 0}, {1, 4}}));

  // The model of a run of 2 epochs (constant learning rate), in memory and in the checkpoint.
  Model two = small_model();
  two.train(train, train_options(2));
  expect_same_state(m, two);
  Model loaded = Model::load(ckpt);
  expect_same_state(loaded, two);

  // Training again continues as one run of 4 epochs would have.
  const History rest = m.train(train, train_options(4));
  EXPECT_FALSE(rest.stopped_on_request);
  EXPECT_EQ(rest.epochs.size(), 2u);
  Model four = small_model();
  four.train(train, train_options(4));
  expect_same_state(m, four);
}

TEST(RequestStop, FromOnBatchFinishesTheEpochFirst) {
  const data::Dataset train = tiny_dataset();
  Model m = small_model();
  TrainOptions o = train_options(3);
  o.on_batch = [&](const BatchProgress& p) {
    if (p.epoch == 0 && p.batch == 2) m.request_stop();
  };
  const History h = m.train(train, o);
  EXPECT_TRUE(h.stopped_on_request);
  EXPECT_EQ(h.epochs.size(), 1u);
  EXPECT_EQ(m.steps_done(), 4);  // all of epoch 0's steps
  Model one = small_model();
  one.train(train, train_options(1));
  expect_same_state(m, one);
}

TEST(RequestStop, ARequestBeforeTrainIsClearedAndOneInTheLastEpochStopsNothing) {
  const data::Dataset train = tiny_dataset();
  Model m = small_model();
  m.request_stop();
  EXPECT_TRUE(m.stop_requested());
  TrainOptions o = train_options(2);
  int64_t last = -1;
  o.on_epoch = [&](const EpochStats& e) {
    last = e.epoch;
    EXPECT_FALSE(m.stop_requested()) << "train() clears an earlier request";
    if (e.epoch == 1) m.request_stop();
  };
  const History h = m.train(train, o);
  EXPECT_EQ(last, 1);
  EXPECT_EQ(h.epochs.size(), 2u);
  EXPECT_FALSE(h.stopped_on_request) << "every epoch ran";
  EXPECT_TRUE(m.stop_requested());
  m.request_stop(false);
  EXPECT_FALSE(m.stop_requested());
}

TEST(TrainCallbacks, OnBatchBeginComesBeforeEachStepAndOnBatchAfter) {
  const data::Dataset train = tiny_dataset();  // 4 steps of 16 per epoch
  Model m = small_model();
  TrainOptions o = train_options(2);
  std::vector<std::string> calls;  // "begin e.b s" / "end e.b s": epoch, batch (0-based), steps done
  o.on_batch_begin = [&](int64_t epoch, int64_t batch) {
    calls.push_back(detail::cat("begin ", epoch, ".", batch, " ", m.steps_done()));
  };
  o.on_batch = [&](const BatchProgress& p) {
    calls.push_back(detail::cat("end ", p.epoch, ".", p.batch - 1, " ", m.steps_done()));
  };
  m.train(train, o);
  std::vector<std::string> want;
  for (int64_t s = 0; s < 8; ++s) {
    want.push_back(detail::cat("begin ", s / 4, ".", s % 4, " ", s));
    want.push_back(detail::cat("end ", s / 4, ".", s % 4, " ", s + 1));
  }
  EXPECT_EQ(calls, want);
}

TEST(TrainCallbacks, MayEvaluateAndSaveButNotTrainOrChangeTheRecipe) {
  TempDir dir;
  const data::Dataset train = tiny_dataset();
  Model m = small_model();
  EXPECT_FALSE(m.is_training());
  TrainOptions o = train_options(2);
  std::vector<std::string> errors;
  o.on_epoch = [&](const EpochStats& e) {
    EXPECT_TRUE(m.is_training());
    EXPECT_EQ(m.evaluate(train).samples, 64);
    m.save((dir.path() / ("e" + std::to_string(e.epoch) + ".aether")).string());
    errors.push_back(error_of([&] { m.train(train, train_options(5)); }));
    errors.push_back(error_of([&] { m.configure(sgd_config()); }));
    errors.push_back(error_of([&] { m.to("cpu"); }));
    errors.push_back(error_of([&] { m.set_precision("bf16"); }));
  };
  const History h = m.train(train, o);
  EXPECT_EQ(h.epochs.size(), 2u);
  EXPECT_FALSE(m.is_training());
  ASSERT_EQ(errors.size(), 8u);
  for (size_t i = 0; i < errors.size(); ++i)
    EXPECT_NE(errors[i].find("the model is training (called from a callback of train()?)"), std::string::npos)
        << i << ": " << errors[i];
  EXPECT_EQ(errors[0].rfind("train: ", 0), 0u) << errors[0];
  EXPECT_EQ(errors[1].rfind("configure: ", 0), 0u) << errors[1];
  EXPECT_EQ(m.precision(), "float32");
  // The model saved after epoch 2 is the model train() returned.
  Model saved = Model::load((dir.path() / "e1.aether").string());
  expect_same_state(saved, m);
  // An exception from a callback ends the training state too.
  o.epochs = 3;
  o.on_epoch = [](const EpochStats&) { throw Error("from the callback", ErrorKind::runtime); };
  EXPECT_NE(error_of([&] { m.train(train, o); }).find("from the callback"), std::string::npos);
  EXPECT_FALSE(m.is_training());
  m.configure(sgd_config());
}
