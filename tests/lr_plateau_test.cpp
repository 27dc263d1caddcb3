// The learning-rate reduction on a plateau (TrainOptions::reduce_lr_on_plateau, src/model/
// lr_plateau.h): the rule on given sequences against Keras' ReduceLROnPlateau (patience, cooldown,
// min_lr, accuracies rising), its state carried over; Model::train multiplying every step's learning
// rate by the factor after the epochs a simple oracle picks; a run resumed from a checkpoint equal
// bit for bit to an uninterrupted one; configure() ending the reduction; errors before an epoch.
#include "model/lr_plateau.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "error_util.h"
#include "model_util.h"
#include "temp_dir.h"

using namespace aether;
using namespace model_test;
using aether::model_internal::LrPlateauState;
using aether::model_internal::LrReducer;
using aether::test::TempDir;

namespace {

ReduceLrOnPlateau reducing(const std::string& monitor, double factor, int64_t patience, int64_t cooldown = 0,
                           double min_lr = 0, double min_delta = 0) {
  ReduceLrOnPlateau r;
  r.monitor = monitor;
  r.factor = factor;
  r.patience = patience;
  r.cooldown = cooldown;
  r.min_lr = min_lr;
  r.min_delta = min_delta;
  return r;
}

EpochStats epoch_with(const std::string& monitor, int64_t epoch, double v) {
  EpochStats st;
  st.epoch = epoch;
  if (monitor == "val_loss") st.val_loss = v;
  if (monitor == "accuracy") st.train_accuracy = v;
  return st;
}

// The factor after each epoch of `values`, from epoch `first` on.
std::vector<double> factors(LrReducer& r, const std::string& monitor, const std::vector<double>& values,
                            int64_t first = 0) {
  std::vector<double> out;
  for (size_t e = 0; e < values.size(); ++e) {
    r.update(epoch_with(monitor, first + int64_t(e), values[e]));
    out.push_back(r.state().factor);
  }
  return out;
}

}  // namespace

TEST(LrReducer, PatienceCooldownAndMinLrAsKeras) {
  const std::vector<double> losses = {1, 0.9, 0.95, 0.96, 0.97, 0.98, 0.99};
  LrReducer two(reducing("val_loss", 0.5, 2), true, 1.0, {});
  EXPECT_EQ(factors(two, "val_loss", losses), (std::vector<double>{1, 1, 1, 0.5, 0.5, 0.25, 0.25}));
  EXPECT_EQ(two.reduced_text(),
            "val_loss has not improved on 0.9000 (epoch 2) for 2 epochs: learning rate x0.5 (factor 0.25, lr "
            "0.25)");
  // Cooldown 2: after a reduction two epochs count down, the second of which may count again.
  LrReducer cool(reducing("val_loss", 0.5, 1, 2), true, 1.0, {});
  EXPECT_EQ(factors(cool, "val_loss", losses), (std::vector<double>{1, 1, 0.5, 0.5, 0.25, 0.25, 0.125}));
  // min_lr bounds ModelConfig::lr times the factor: 2 x 0.1 = 0.2, then 0.05 (not 0.02), then no more.
  LrReducer floor(reducing("val_loss", 0.1, 0, 0, 0.05), true, 2.0, {});
  EXPECT_EQ(factors(floor, "val_loss", {1, 1, 1, 1}), (std::vector<double>{1, 0.1, 0.025, 0.025}));
  // Accuracies improve by rising; min_delta must be beaten.
  LrReducer acc(reducing("accuracy", 0.5, 1, 0, 0, 0.05), false, 1.0, {});
  EXPECT_EQ(factors(acc, "accuracy", {0.5, 0.6, 0.62, 0.7}), (std::vector<double>{1, 1, 0.5, 0.5}));
}

TEST(LrReducer, ContinuesFromItsState) {
  const std::vector<double> losses = {1, 0.9, 0.95, 0.96, 0.8, 0.85, 0.86, 0.87};
  LrReducer whole(reducing("val_loss", 0.5, 2, 1), true, 1.0, {});
  const std::vector<double> all = factors(whole, "val_loss", losses);
  LrReducer first(reducing("val_loss", 0.5, 2, 1), true, 1.0, {});
  std::vector<double> parts = factors(first, "val_loss", {losses.begin(), losses.begin() + 3});
  LrReducer second(reducing("val_loss", 0.5, 2, 1), true, 1.0, first.state());
  for (double f : factors(second, "val_loss", {losses.begin() + 3, losses.end()}, 3)) parts.push_back(f);
  EXPECT_EQ(parts, all);
  EXPECT_EQ(all.back(), 0.25);
}

TEST(LrReducer, BadOptionsNameWhatIsWrong) {
  auto error = [](const ReduceLrOnPlateau& o, bool validation = true, double lr = 1) {
    return error_of([&] { LrReducer(o, validation, lr, {}); });
  };
  for (double f : {0.0, 1.0, -0.5, 2.0})
    EXPECT_NE(error(reducing("val_loss", f, 1)).find("reduce_lr_on_plateau: factor must be in (0, 1)"),
              std::string::npos)
        << f;
  EXPECT_NE(error(reducing("val_loss", 0.5, -1)).find("patience must be >= 0, got -1"), std::string::npos);
  EXPECT_NE(error(reducing("val_loss", 0.5, 1, -2)).find("cooldown must be >= 0, got -2"), std::string::npos);
  EXPECT_NE(error(reducing("val_loss", 0.5, 1, 0, -1)).find("min_lr must be >= 0"), std::string::npos);
  EXPECT_NE(error(reducing("val_loss", 0.5, 1, 0, NAN)).find("min_lr must be >= 0"), std::string::npos);
  EXPECT_NE(error(reducing("val_loss", 0.5, 1, 0, 0, -1)).find("min_delta must be >= 0"), std::string::npos);
  EXPECT_NE(
      error(reducing("val_loss", 0.5, 1), false).find("reduce_lr_on_plateau monitors val_loss, which needs"),
      std::string::npos);
  EXPECT_NE(error(reducing("lr", 0.5, 1)).find("unknown monitor 'lr'"), std::string::npos);
  EXPECT_NE(error(reducing("loss", 0.5, 1), true, 0).find("needs a learning rate > 0"), std::string::npos);
  EXPECT_EQ(error(reducing("loss", 0.5, 0)), "");
}

TEST(ModelLrPlateau, EveryStepsLearningRateTakesTheFactorAfterTheEpochsThatDidNotImprove) {
  const data::Dataset train = tiny_dataset(), val = flipped_labels(tiny_dataset(32, 5));
  TrainOptions o = train_options(6);
  o.validation = &val;
  o.reduce_lr_on_plateau = reducing("val_loss", 0.5, 1);
  Model m = small_model();
  const History h = m.train(train, o);
  ASSERT_EQ(h.epochs.size(), 6u);
  // Oracle for patience 1, no cooldown, no min_delta: the factor halves after each epoch whose
  // validation loss is not below the best before it. The epoch's lr is its last step's.
  double best = INFINITY, lr = sgd_config().lr;
  int reductions = 0;
  for (const auto& e : h.epochs) {
    EXPECT_EQ(e.lr, lr) << "epoch " << e.epoch;
    if (*e.val_loss < best) {
      best = *e.val_loss;
    } else {
      lr *= 0.5;
      ++reductions;
    }
  }
  EXPECT_GE(reductions, 2);
  EXPECT_EQ(m.optimizer()->lr(), h.epochs.back().lr);
  // A later train() keeps the factor (and its state); a new recipe ends it.
  o.epochs = 7;
  o.reduce_lr_on_plateau.reset();
  EXPECT_EQ(m.train(train, o).epochs[0].lr, lr);
  m.configure(sgd_config());
  o.epochs = 8;
  EXPECT_EQ(m.train(train, o).epochs[0].lr, sgd_config().lr);
}

TEST(ModelLrPlateau, AResumedRunEqualsAnUninterruptedOne) {
  TempDir dir;
  const std::string ckpt = (dir.path() / "run.aether").string();
  const data::Dataset train = tiny_dataset(), val = flipped_labels(tiny_dataset(32, 5));
  TrainOptions o = train_options(6);
  o.validation = &val;
  o.reduce_lr_on_plateau = reducing("val_loss", 0.5, 1, 1);
  Model whole = small_model();
  const History hw = whole.train(train, o);

  Model part = small_model();
  o.epochs = 3;
  o.checkpoint_path = ckpt;
  part.train(train, o);
  Model resumed = Model::load(ckpt);
  o.epochs = 6;
  o.checkpoint_path.clear();
  const History hr = resumed.train(train, o);
  ASSERT_EQ(hr.epochs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(hr.epochs[i].lr, hw.epochs[i + 3].lr) << i;
  EXPECT_LT(hw.epochs.back().lr, sgd_config().lr);  // it did reduce
  expect_same_state(resumed, whole);
}

TEST(ModelLrPlateau, OptionsAreCheckedBeforeAnEpochIsSpent) {
  const data::Dataset train = tiny_dataset();
  TrainOptions o = train_options(3);
  o.reduce_lr_on_plateau = reducing("val_accuracy", 0.5, 1);
  Model m = small_model();
  EXPECT_NE(error_of([&] { m.train(train, o); }).find("reduce_lr_on_plateau monitors val_accuracy"),
            std::string::npos);
  o.reduce_lr_on_plateau = reducing("loss", 1.5, 1);
  EXPECT_NE(error_of([&] { m.train(train, o); }).find("factor must be in (0, 1), got 1.5"),
            std::string::npos);
  EXPECT_EQ(m.epochs_done(), 0);
}
