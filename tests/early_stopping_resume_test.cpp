// Early stopping's run across train() calls and checkpoints (src/model/early_stopping.h,
// EarlyStoppingRun): a run that train() left by an exception continues, in memory and from its
// checkpoint, to the same stop, best epoch and weights as the uninterrupted run; a run that ended
// (every epoch, the patience, a stop request) is not continued, nor one with other options; the
// checkpoint's early_stopping entry and best-epoch tensors are checked on loading.
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "error_util.h"
#include "io/checkpoint.h"
#include "model_util.h"
#include "temp_dir.h"

using namespace aether;
using namespace model_test;
using aether::test::TempDir;

namespace {

EarlyStopping stopping(int64_t patience, bool restore = true) {
  EarlyStopping e;
  e.monitor = "val_loss";
  e.patience = patience;
  e.restore_best_weights = restore;
  return e;
}

// Validating on swapped labels: the validation loss falls, then rises as the model learns.
struct SwappedValidation {
  data::Dataset train = tiny_dataset(), val = flipped_labels(tiny_dataset(32, 5));
  TrainOptions options(int64_t epochs, EarlyStopping es) const {
    TrainOptions o = train_options(epochs);
    o.validation = &val;
    o.early_stopping = es;
    return o;
  }
  // Trains `m` with `o` (writing `ckpt`) until an exception after epoch `cut`'s checkpoint.
  void interrupt(Model& m, TrainOptions o, const std::string& ckpt, int64_t cut) const {
    o.checkpoint_path = ckpt;
    o.on_epoch = [cut](const EpochStats& e) {
      if (e.epoch == cut) throw std::runtime_error("interrupted");
    };
    EXPECT_THROW(m.train(train, o), std::runtime_error);
    EXPECT_EQ(m.epochs_done(), cut + 1);
  }
};

}  // namespace

TEST(EarlyStoppingRun, ARunLeftByAnExceptionContinuesAsTheUninterruptedOne) {
  TempDir dir;
  const std::string ckpt = (dir.path() / "run.aether").string();
  const SwappedValidation r;
  for (const bool restore : {true, false}) {
    SCOPED_TRACE(restore ? "restore_best_weights" : "last weights");
    const TrainOptions o = r.options(12, stopping(3, restore));
    Model whole = small_model();
    const History hw = whole.train(r.train, o);
    ASSERT_TRUE(hw.stopped_early);
    const int64_t best = hw.best_epoch, last = hw.epochs.back().epoch;
    ASSERT_EQ(last, best + 3);
    // Interrupted after the epoch past the best: continued in memory, and from its checkpoint.
    Model m = small_model();
    r.interrupt(m, o, ckpt, best + 1);
    const History hm = m.train(r.train, o);
    Model loaded = Model::load(ckpt);  // (the global generator from here: the checkpoint's)
    const History hl = loaded.train(r.train, o);
    for (const History* h : {&hm, &hl}) {
      EXPECT_TRUE(h->stopped_early);
      EXPECT_EQ(h->restored_best, restore);
      EXPECT_EQ(h->best_epoch, best);
      EXPECT_EQ(h->best, hw.best);
      ASSERT_EQ(h->epochs.size(), 2u);  // epochs best + 2 and best + 3
      EXPECT_EQ(h->epochs.back().epoch, last);
    }
    expect_same_state(m, whole);
    expect_same_state(loaded, whole);
  }
}

TEST(EarlyStoppingRun, ARunThatEndedOrHasOtherOptionsIsNotContinued) {
  TempDir dir;
  const std::string ckpt = (dir.path() / "run.aether").string();
  const SwappedValidation r;
  // The validation loss is lowest early (by epoch 1): a run continued past it would report that
  // epoch, a new one one of its own.
  Model probe = small_model();
  ASSERT_LE(probe.train(r.train, r.options(6, stopping(5))).best_epoch, 1);
  // A stop request ends the run: the next train() starts one, also from the checkpoint, which is
  // saved again to say the run ended.
  Model m = small_model();
  TrainOptions o = r.options(3, stopping(5));
  o.checkpoint_path = ckpt;
  o.on_epoch = [&m](const EpochStats& e) {
    if (e.epoch == 1) m.request_stop();
  };
  ASSERT_TRUE(m.train(r.train, o).stopped_on_request);
  Model loaded = Model::load(ckpt);
  const TrainOptions more = r.options(4, stopping(5));
  EXPECT_GE(m.train(r.train, more).best_epoch, 2);
  EXPECT_GE(loaded.train(r.train, more).best_epoch, 2);
  // Every epoch ran: the same.
  EXPECT_GE(m.train(r.train, r.options(5, stopping(5))).best_epoch, 4);
  // An interrupted run is not continued with other options (patience), nor after configure().
  Model other = small_model();
  r.interrupt(other, r.options(6, stopping(5)), ckpt, 1);
  EXPECT_GE(other.train(r.train, r.options(3, stopping(4))).best_epoch, 2);
  Model reconfigured = small_model();
  r.interrupt(reconfigured, r.options(6, stopping(5)), ckpt, 1);
  reconfigured.configure(sgd_config());
  EXPECT_GE(reconfigured.train(r.train, r.options(3, stopping(5))).best_epoch, 2);
  // (With the same options it is: the control.)
  Model same = small_model();
  r.interrupt(same, r.options(6, stopping(5)), ckpt, 1);
  EXPECT_LE(same.train(r.train, r.options(3, stopping(5))).best_epoch, 1);
}

TEST(EarlyStoppingRun, TheCheckpointsRunIsCheckedOnLoading) {
  TempDir dir;
  const std::string ckpt = (dir.path() / "run.aether").string(), bad = (dir.path() / "bad.aether").string();
  const SwappedValidation r;
  Model m = small_model();
  r.interrupt(m, r.options(6, stopping(5)), ckpt, 1);
  const Checkpoint good = load_checkpoint(ckpt);
  ASSERT_EQ(good.training.size(), good.model.size());  // every parameter and buffer
  EXPECT_EQ(good.training[0].first, "early_stopping." + good.model[0].first);
  const std::string where = "load: " + bad + ": ";
  auto error = [&](const std::function<void(Checkpoint&)>& change) {
    Checkpoint c = good;
    change(c);
    save_checkpoint(bad, c);
    const std::string e = error_of([&] { Model::load(bad); });
    return e.empty() ? "<no error>" : e;
  };
  auto entry = [&](const std::string& key, nlohmann::json value) {
    return error([&](Checkpoint& c) { c.manifest_extra["training_state"]["early_stopping"][key] = value; });
  };
  const std::string first = good.training[0].first;
  EXPECT_EQ(error([](Checkpoint&) {}), "<no error>");
  EXPECT_EQ(entry("monitor", "lr"),
            where +
                "training_state.early_stopping.monitor is \"lr\", expected val_loss, val_accuracy, loss or "
                "accuracy");
  EXPECT_EQ(entry("patience", -1),
            where + "training_state.early_stopping.patience is -1, expected an integer >= 0");
  EXPECT_EQ(entry("wait", 0.5),
            where + "training_state.early_stopping.wait is 0.5, expected an integer >= 0");
  EXPECT_EQ(entry("ended", 1), where + "training_state.early_stopping.ended is 1, expected true or false");
  EXPECT_EQ(error([](Checkpoint& c) { c.manifest_extra["training_state"]["early_stopping"].erase("best"); }),
            where + "training_state.early_stopping.best is missing");
  EXPECT_EQ(error([](Checkpoint& c) { c.training.erase(c.training.begin()); }),
            where + "tensor '" + first +
                "' is missing (training_state.early_stopping has a best epoch to restore)");
  EXPECT_EQ(
      error([](Checkpoint& c) { c.training.emplace_back("early_stopping.9.weight", c.training[0].second); }),
      where + "tensor 'early_stopping.9.weight' is no parameter or buffer of the model");
  EXPECT_EQ(error([](Checkpoint& c) { c.training[0].second = Tensor::zeros({2}); }),
            where + "tensor '" + first + "' has shape (2,) float32, '" + good.model[0].first + "' has " +
                to_string(good.model[0].second.shape()) + " float32");
  EXPECT_EQ(error([](Checkpoint& c) {
              c.training[0].second =
                  Tensor::full(c.training[0].second.shape(), std::numeric_limits<float>::quiet_NaN());
            }),
            where + "tensor '" + first + "' holds NaN");
  EXPECT_EQ(entry("ended", true),
            where + "tensor '" + first +
                "' is not expected: training_state.early_stopping keeps no best epoch to restore");
  EXPECT_EQ(error([](Checkpoint& c) { c.manifest_extra["training_state"]["early_stopping"] = nullptr; }),
            where + "tensor '" + first +
                "' is not expected: training_state.early_stopping keeps no best epoch to restore");
  // Files from before it: no entry (or null) and no tensors.
  EXPECT_EQ(error([](Checkpoint& c) {
              c.manifest_extra["training_state"].erase("early_stopping");
              c.training.clear();
            }),
            "<no error>");
}
