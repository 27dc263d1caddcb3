// EvalOptions' hooks (Keras' on_test_batch_* and on_predict_batch_*): evaluate() and predict() call
// on_batch_begin before each batch and on_batch after it with the batches and samples done and, for
// evaluate, the running loss and accuracy, which are evaluate's own over the samples done (the last
// equals the result), for predict, the batch's rows of the result. train() calls TrainOptions'
// validation hooks in each epoch's validation. An exception from a hook ends the call; the model
// computes as before afterwards.
#include <gtest/gtest.h>

#include <algorithm>
#include <stdexcept>
#include <vector>

#include "error_util.h"
#include "model_util.h"

using namespace aether;
using namespace model_test;

namespace {

struct Calls {
  std::vector<int64_t> begun;
  std::vector<EvalProgress> done;
  EvalOptions options(int64_t batch_size) {
    EvalOptions o;
    o.batch_size = batch_size;
    o.on_batch_begin = [this](int64_t batch) {
      EXPECT_EQ(done.size(), begun.size()) << "a batch began before the last one ended";
      begun.push_back(batch);
    };
    o.on_batch = [this](const EvalProgress& p) { done.push_back(p); };
    return o;
  }
};

TEST(EvalHooks, EvaluateReportsEachBatchWithItsRunningMeans) {
  Model m = small_model();
  m.train(tiny_dataset(), train_options(1));
  const data::Dataset d = tiny_dataset(60, 5);  // batches of 16: 16, 16, 16, 12
  Calls c;
  const EvalResult r = m.evaluate(d, c.options(16));
  EXPECT_EQ(c.begun, (std::vector<int64_t>{0, 1, 2, 3}));
  ASSERT_EQ(c.done.size(), 4u);
  for (size_t i = 0; i < 4; ++i) {
    const EvalProgress& p = c.done[i];
    EXPECT_EQ(p.batch, int64_t(i) + 1);
    EXPECT_EQ(p.batches, 4);
    EXPECT_EQ(p.seen, std::min<int64_t>(16 * (int64_t(i) + 1), 60));
    // The running means are evaluate's over the samples done.
    const EvalResult part = m.evaluate(first_samples(d, p.seen), 16);
    EXPECT_DOUBLE_EQ(p.loss, part.loss) << "after batch " << p.batch;
    EXPECT_DOUBLE_EQ(p.accuracy, part.accuracy) << "after batch " << p.batch;
  }
  EXPECT_DOUBLE_EQ(c.done.back().loss, r.loss);
  EXPECT_DOUBLE_EQ(c.done.back().accuracy, r.accuracy);
  // The hooks change nothing: the same result as without them.
  const EvalResult plain = m.evaluate(d, 16);
  EXPECT_DOUBLE_EQ(plain.loss, r.loss);
  EXPECT_DOUBLE_EQ(plain.accuracy, r.accuracy);
}

TEST(EvalHooks, PredictReportsEachBatch) {
  Model m = small_model();
  const data::Dataset d = tiny_dataset(40);
  Calls c;
  const Tensor p = m.predict(d, c.options(16));  // 16, 16, 8
  EXPECT_EQ(c.begun, (std::vector<int64_t>{0, 1, 2}));
  ASSERT_EQ(c.done.size(), 3u);
  EXPECT_EQ(c.done.back().seen, 40);
  EXPECT_EQ(c.done.back().batches, 3);
  EXPECT_EQ(floats(p), floats(m.predict(d, 16)));
  // Each batch's outputs are its rows of the result (Keras' on_predict_batch_end logs["outputs"]).
  for (size_t i = 0; i < c.done.size(); ++i) {
    const int64_t lo = int64_t(i) * 16, hi = std::min<int64_t>(lo + 16, 40);
    ASSERT_TRUE(c.done[i].outputs.defined()) << "batch " << i;
    EXPECT_EQ(c.done[i].outputs.shape(), Shape({hi - lo, p.shape()[1]}));
    EXPECT_EQ(floats(c.done[i].outputs), floats(p.slice(0, lo, hi))) << "batch " << i;
  }
  const EvalResult e = m.evaluate(d, c.options(16));  // evaluate's batches carry no outputs
  EXPECT_EQ(e.samples, 40);
  EXPECT_FALSE(c.done.back().outputs.defined());
  EvalOptions tta;
  tta.tta = TTA::flip;
  EXPECT_EQ(error_of([&] { m.predict(d, tta); }),
            "predict: test-time augmentation is evaluate's; predict takes tta none, got flip");
}

TEST(EvalHooks, AnExceptionFromAHookEndsTheCall) {
  Model m = small_model();
  const data::Dataset d = tiny_dataset(48);
  const EvalResult before = m.evaluate(d, 16);
  EvalOptions o;
  o.batch_size = 16;
  int64_t after = 0;
  o.on_batch = [&](const EvalProgress& p) {
    ++after;
    if (p.batch == 2) throw std::runtime_error("stop here");
  };
  EXPECT_THROW(m.evaluate(d, o), std::runtime_error);
  EXPECT_EQ(after, 2);  // the third batch never ran
  EXPECT_THROW(m.predict(d, o), std::runtime_error);
  // Evaluation mode was left (the dropout layer trains again) and the results are as before.
  EXPECT_TRUE(m.network().is_training());
  const EvalResult again = m.evaluate(d, 16);
  EXPECT_DOUBLE_EQ(again.loss, before.loss);
  EXPECT_DOUBLE_EQ(again.accuracy, before.accuracy);
}

TEST(EvalHooks, TrainCallsTheValidationHooksEveryEpoch) {
  Model m = small_model();
  const data::Dataset val = tiny_dataset(24, 9);
  TrainOptions o = train_options(2);
  o.validation = &val;
  std::vector<int64_t> begun;
  std::vector<EvalProgress> done;
  o.on_validation_batch_begin = [&](int64_t batch) { begun.push_back(batch); };
  o.on_validation_batch = [&](const EvalProgress& p) { done.push_back(p); };
  const History h = m.train(tiny_dataset(), o);
  // Validation batches are max(batch size, 256): one batch of 24 per epoch.
  EXPECT_EQ(begun, (std::vector<int64_t>{0, 0}));
  ASSERT_EQ(done.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(done[e].seen, 24);
    EXPECT_DOUBLE_EQ(done[e].loss, *h.epochs[e].val_loss) << "epoch " << e;
    EXPECT_DOUBLE_EQ(done[e].accuracy, *h.epochs[e].val_accuracy) << "epoch " << e;
  }
}

}  // namespace
