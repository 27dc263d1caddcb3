// Tests of the Model API (aether/model/model.h) on a tiny synthetic data set built in memory
// (64 images 8x8x1, 2 classes: bright top half or bright bottom half): building, configuring,
// finalizing and the summary; training lowers the loss; evaluate/predict shapes and
// probabilities; error messages; save/load round trips; bit-identical resume from a checkpoint;
// corrupt checkpoints.
#include "aether/model/model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "aether/aether.h"
#include "aether/core/random.h"
#include "io/checkpoint.h"
#include "model/progress.h"
#include "model_util.h"
#include "oracle_util.h"
#include "temp_dir.h"

using namespace aether;
using aether::test::TempDir;
using namespace model_test;
namespace fs = std::filesystem;

namespace {

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected aether::Error containing '" << parts.front() << "'";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

}  // namespace

// ---- building ---------------------------------------------------------------------------------------------
TEST(ModelBuild, ConfigureFinalizeSummary) {
  manual_seed(1);
  Model m;
  add_layers(m);
  expect_error([&] { m.finalize({8, 8, 1}); }, {"finalize", "configure"});
  expect_error([&] { m.summary(); }, {"summary", "finalize"});
  m.configure(sgd_config());
  expect_error([&] { m.finalize({8, 8, 3}); }, {"Conv2d", "(2, 8, 8, 3)"});
  // Finalizing builds the graph only: no batch-norm statistics change, no random numbers drawn.
  const auto rng_before = generator_state();
  m.finalize({8, 8, 1});
  EXPECT_EQ(generator_state().next_stream, rng_before.next_stream);
  EXPECT_EQ(floats(*m.network().named_buffers()[0].second), std::vector<float>(4, 0.0f));
  EXPECT_EQ(floats(*m.network().named_buffers()[1].second), std::vector<float>(4, 1.0f));
  EXPECT_EQ(m.input_shape(), (Shape{8, 8, 1}));
  ASSERT_NE(m.optimizer(), nullptr);
  EXPECT_EQ(m.optimizer()->type_name(), "SGD");
  EXPECT_EQ(m.optimizer()->params().size(), 6u);
  EXPECT_EQ(m.network().num_parameters(), 40 + 8 + 130);
  const std::string s = m.summary();
  for (const char* part : {"0 Conv2d(1 -> 4, 3x3, stride 1, pad same)", "(1, 8, 8, 4)", "3 MaxPool2d(2)",
                           "(1, 4, 4, 4)", "(1, 64)", "5 Dropout(0.25)", "6 Linear(64 -> 2)", "(1, 2)",
                           "Trainable parameters: 178", "Buffers (non-trainable): 8"})
    EXPECT_NE(s.find(part), std::string::npos) << "missing " << part << " in\n" << s;
  EXPECT_EQ(generator_state().next_stream, rng_before.next_stream);  // summary draws nothing either
  EXPECT_EQ(floats(*m.network().named_buffers()[1].second), std::vector<float>(4, 1.0f));
  expect_error([&] { m.add(mk<nn::ReLU>()); }, {"Model::add", "finalize"});

  Model flat;
  flat.add(mk<nn::Linear>(8, 3)).configure(sgd_config());
  expect_error([&] { flat.finalize({8, 8, 1}); }, {"Linear"});
  Model empty;
  empty.configure(sgd_config());
  expect_error([&] { empty.finalize({8}); }, {"finalize", "no layers"});
  Model not2d;
  not2d.add(mk<nn::ReLU>()).configure(sgd_config());
  expect_error([&] { not2d.finalize({8, 8, 1}); }, {"finalize", "(N, classes)"});
}

TEST(ModelBuild, ConfigurationErrors) {
  Model m;
  add_layers(m);
  ModelConfig c = sgd_config();
  c.loss = "hinge";
  expect_error([&] { m.configure(c); }, {"configure", "unknown loss 'hinge'"});
  c = sgd_config();
  c.optimizer = "rmsprop";
  expect_error([&] { m.configure(c); }, {"configure", "unknown optimizer 'rmsprop'"});
  c = sgd_config();
  c.schedule = "zigzag";
  expect_error([&] { m.configure(c); }, {"configure", "zigzag"});
  c = sgd_config();
  c.metrics = {"f1"};
  expect_error([&] { m.configure(c); }, {"configure", "f1"});
  c = sgd_config();
  c.lr = -1;
  expect_error([&] { m.configure(c); }, {"configure", "learning rate"});

  expect_error([&] { m.set_precision("float8"); }, {"set_precision", "unknown precision 'float8'", "bf16"});
  expect_error([&] { m.set_precision(""); }, {"set_precision", "unknown precision ''"});
  EXPECT_NO_THROW(m.set_precision("float32"));
  expect_error([&] { m.to("cuda"); }, {"CUDA"});
  expect_error([&] { m.to("cuda:1"); }, {"CUDA"});
  expect_error([&] { m.to("tpu"); }, {"unknown device 'tpu'"});
  EXPECT_NO_THROW(m.to("cpu"));

  Model unfinished;
  add_layers(unfinished);
  const data::Dataset d = tiny_dataset(8);
  expect_error([&] { unfinished.train(d, train_options(1)); }, {"train", "finalize"});
  expect_error([&] { unfinished.evaluate(d); }, {"evaluate", "finalize"});
  expect_error([&] { unfinished.save("/tmp/never.aether"); }, {"save", "finalize"});
}

// ---- training, evaluation, prediction ------------------------------------------------------------------
TEST(ModelTrain, LossFallsAndPredictionsAreProbabilities) {
  manual_seed(2);
  const data::Dataset d = tiny_dataset();
  Model m;
  add_layers(m, 0.1);
  m.configure(sgd_config()).finalize({8, 8, 1});
  TrainOptions o = train_options(2);
  std::vector<int64_t> seen_epochs;
  o.on_epoch = [&](const EpochStats& s) { seen_epochs.push_back(s.epoch); };
  // Before training (no normalisation known yet): roughly chance.
  const History h = m.train(d, o);
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_EQ(seen_epochs, (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(m.epochs_done(), 2);
  EXPECT_EQ(m.steps_done(), 8);  // 64 / 16 = 4 batches per epoch
  EXPECT_EQ(m.optimizer()->steps(), 8);
  EXPECT_LT(h.epochs[1].train_loss, h.epochs[0].train_loss);
  EXPECT_LT(h.epochs[1].train_loss, 0.5);
  EXPECT_GT(h.epochs[1].images_per_second, 0);
  EXPECT_EQ(m.norm_mean(), std::vector<float>{0.35f});
  const EvalResult r = m.evaluate(d, 20);
  EXPECT_EQ(r.samples, 64);
  EXPECT_LT(r.loss, 0.4);
  EXPECT_GT(r.accuracy, 0.9);
  EXPECT_TRUE(m.network().is_training());  // evaluate restores the mode

  const Tensor p = m.predict(d, 24);
  EXPECT_EQ(p.shape(), (Shape{64, 2}));
  const auto pv = p.to_vector<double>();
  for (int64_t i = 0; i < 64; ++i) {
    EXPECT_NEAR(pv[size_t(2 * i)] + pv[size_t(2 * i + 1)], 1.0, 1e-6) << i;
    EXPECT_GE(pv[size_t(2 * i)], 0.0);
  }
  // predict(Tensor) on normalised images gives the same rows.
  std::vector<float> imgs;
  for (int64_t i = 0; i < 5 * 64; ++i) imgs.push_back((float(d.images[size_t(i)]) / 255.0f - 0.35f) / 0.3f);
  const Tensor p5 = m.predict(Tensor::from_vector(imgs, {5, 8, 8, 1}));
  EXPECT_EQ(p5.shape(), (Shape{5, 2}));
  const auto p5v = p5.to_vector<double>();
  for (size_t i = 0; i < 10; ++i) EXPECT_NEAR(p5v[i], pv[i], 1e-5) << i;
  expect_error([&] { m.predict(Tensor::zeros({2, 8, 8, 3})); }, {"predict", "(2, 8, 8, 3)"});
  // Training data of the wrong shape.
  data::Dataset wrong = tiny_dataset(4);
  wrong.c = 2;
  wrong.images.resize(size_t(4 * 8 * 8 * 2));
  expect_error([&] { m.train(wrong, train_options(3)); }, {"train", "tiny"});
}

TEST(ModelTrain, AdamMlpOnFlatInput) {
  manual_seed(4);
  const data::Dataset d = tiny_dataset();
  Model m;
  m.add(mk<nn::Linear>(64, 16)).add(mk<nn::ReLU>()).add(mk<nn::Linear>(16, 2));
  ModelConfig c;
  c.optimizer = "adamw";
  c.lr = 0.01;
  c.weight_decay = 0.01;
  c.schedule = "cosine";
  c.clip_grad_norm = 1.0;
  c.loss = "cross_entropy";
  c.label_smoothing = 0.1;
  m.configure(c).finalize({64});
  const History h = m.train(d, train_options(2));
  EXPECT_LT(h.epochs[1].train_loss, h.epochs[0].train_loss);
  EXPECT_EQ(m.optimizer()->type_name(), "AdamW");
  EXPECT_EQ(m.predict(d).shape(), (Shape{64, 2}));
}

// ---- save / load
// ---------------------------------------------------------------------------------------------
TEST(ModelSaveLoad, RoundTripGivesIdenticalPredictionsAndState) {
  TempDir tmp;
  manual_seed(5);
  const data::Dataset d = tiny_dataset();
  Model m;
  add_layers(m);
  m.configure(sgd_config("cosine")).finalize({8, 8, 1});
  m.train(d, train_options(1));
  m.set_info(R"({"note": "hello"})");
  expect_error([&] { m.set_info("[1, 2]"); }, {"Model::set_info", "expected a JSON object"});
  expect_error([&] { m.set_info("{\"note\": "); }, {"Model::set_info"});
  EXPECT_EQ(m.info(), R"({"note":"hello"})");  // a bad value leaves the old one
  const std::string path = tmp.file("m.aether");
  m.save(path);
  Model back = Model::load(path);
  EXPECT_EQ(back.input_shape(), m.input_shape());
  EXPECT_EQ(back.config().optimizer, "sgd");
  EXPECT_EQ(back.config().schedule, "cosine");
  EXPECT_EQ(back.config().lr, 0.05);
  EXPECT_EQ(back.norm_mean(), m.norm_mean());
  EXPECT_EQ(back.norm_std(), m.norm_std());
  EXPECT_EQ(back.info(), R"({"note":"hello"})");
  EXPECT_EQ(back.optimizer()->lr(), m.optimizer()->lr());
  EXPECT_EQ(back.network().config(), m.network().config());
  EXPECT_EQ(back.summary(), m.summary());
  expect_same_state(m, back);
  EXPECT_FALSE(m.optimizer()->named_state().empty());
  const Tensor pa = m.predict(d), pb = back.predict(d);
  EXPECT_TRUE(bit_equal(pa, pb));
}

// Resuming from a checkpoint reproduces an uninterrupted run bit for bit: same seed, dropout, SGD
// momentum, a one-cycle schedule over all 3 epochs and flip/crop augmentation.
TEST(ModelSaveLoad, BitIdenticalResume) {
  TempDir tmp;
  const data::Dataset d = tiny_dataset();
  auto make = [] {
    manual_seed(77);
    Model m;
    add_layers(m, 0.3);
    m.configure(sgd_config("one_cycle")).finalize({8, 8, 1});
    return m;
  };
  auto options = [&](const std::string& ckpt) {
    TrainOptions o = train_options(3);
    o.data.hflip = true;
    o.data.crop_padding = 1;
    o.checkpoint_path = ckpt;
    return o;
  };
  // A: 3 epochs in one go (checkpointing every epoch).
  Model a = make();
  const History ha = a.train(d, options(tmp.file("a.aether")));
  ASSERT_EQ(ha.epochs.size(), 3u);

  // B: the same run, interrupted after its first epoch (after the checkpoint was written).
  struct Interrupt {};
  {
    Model b = make();
    TrainOptions ob = options(tmp.file("b.aether"));
    ob.on_epoch = [](const EpochStats& s) {
      if (s.epoch == 0) throw Interrupt{};
    };
    EXPECT_THROW(b.train(d, ob), Interrupt);
    EXPECT_EQ(b.epochs_done(), 1);
  }
  // Something else draws random numbers in between; the checkpoint's RNG state must win.
  manual_seed(12345);
  (void)Tensor::rand({10}).realize();
  Model c = Model::load(tmp.file("b.aether"));
  EXPECT_EQ(c.epochs_done(), 1);
  EXPECT_EQ(c.steps_done(), 4);
  const History hc = c.train(d, options(tmp.file("b.aether")));
  ASSERT_EQ(hc.epochs.size(), 2u);
  EXPECT_EQ(hc.epochs[0].epoch, 1);
  EXPECT_EQ(hc.epochs[0].train_loss, ha.epochs[1].train_loss);
  EXPECT_EQ(hc.epochs[1].train_loss, ha.epochs[2].train_loss);
  EXPECT_EQ(hc.epochs[1].lr, ha.epochs[2].lr);
  expect_same_state(a, c);
  // The final checkpoints agree too (both are at epoch 3).
  Model a3 = Model::load(tmp.file("a.aether")), c3 = Model::load(tmp.file("b.aether"));
  expect_same_state(a3, c3);
  EXPECT_TRUE(bit_equal(a.predict(d), c.predict(d)));
}

TEST(ModelSaveLoad, CorruptCheckpointsThrowClearErrors) {
  TempDir tmp;
  manual_seed(6);
  Model m;
  add_layers(m);
  m.configure(sgd_config()).finalize({8, 8, 1});
  const std::string good = tmp.file("good.aether");
  m.save(good);
  // Not a checkpoint at all.
  const std::string junk = tmp.file("junk.aether");
  std::ofstream(junk) << "this is not a zip archive, just text\n";
  expect_error([&] { Model::load(junk); }, {junk});
  // Truncated.
  std::string bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string cut = tmp.file("cut.aether");
  std::ofstream(cut, std::ios::binary) << bytes.substr(0, bytes.size() / 2);
  expect_error([&] { Model::load(cut); }, {cut});
  // Flipped bytes in the middle.
  std::string flipped = bytes;
  for (size_t i = bytes.size() / 3; i < bytes.size() / 3 + 64 && i < flipped.size(); ++i) flipped[i] ^= 0x5a;
  const std::string bad = tmp.file("flipped.aether");
  std::ofstream(bad, std::ios::binary) << flipped;
  expect_error([&] { Model::load(bad); }, {bad});
  // Missing file.
  expect_error([&] { Model::load(tmp.file("nope.aether")); }, {"nope.aether"});
  // A valid checkpoint that is not a model.
  Checkpoint ck;
  ck.manifest_extra = {{"hello", 1}};
  const std::string other = tmp.file("other.aether");
  save_checkpoint(other, ck);
  expect_error([&] { Model::load(other); }, {other, "manifest"});
  // A model checkpoint whose tensor disagrees with its architecture.
  Checkpoint real = load_checkpoint(good);
  real.model[0].second = Tensor::zeros({3, 3});
  const std::string mismatch = tmp.file("mismatch.aether");
  save_checkpoint(mismatch, real);
  expect_error([&] { Model::load(mismatch); }, {mismatch, real.model[0].first, "(3, 3)"});
}

// ---- hooks the Python package uses
// -------------------------------------------------------------------------
TEST(ModelTrain, OnBatchSeesEveryStepAndItsExceptionStopsTrainingKeepingTheCheckpoint) {
  manual_seed(4);
  const data::Dataset d = tiny_dataset();
  TempDir dir;
  Model m;
  add_layers(m);
  m.configure(sgd_config()).finalize({8, 8, 1});
  TrainOptions o = train_options(3);
  o.checkpoint_path = dir.file("ck.aether");
  std::vector<BatchProgress> seen;
  struct Stop {};
  o.on_batch = [&](const BatchProgress& p) {
    seen.push_back(p);
    if (p.epoch == 1 && p.batch == 2) throw Stop{};  // like Ctrl-C in the second epoch
  };
  EXPECT_THROW(m.train(d, o), Stop);
  ASSERT_EQ(seen.size(), 4u + 2u);  // 64 images / 16: 4 steps, then 2
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(seen[i].epoch, 0);
    EXPECT_EQ(seen[i].batch, int64_t(i) + 1);
    EXPECT_EQ(seen[i].batches, 4);
    EXPECT_EQ(seen[i].seen, 16 * (int64_t(i) + 1));
    EXPECT_TRUE(std::isfinite(seen[i].loss));
  }
  EXPECT_EQ(seen[4].epoch, 1);
  const Model back = Model::load(o.checkpoint_path);  // the first epoch, intact
  EXPECT_EQ(back.epochs_done(), 1);
}

TEST(ModelTrain, RegressionTargetsWithMse) {
  manual_seed(5);
  // 128 flat samples of 4 values in [0, 1], target (2): a linear map of them.
  data::Dataset d;
  d.name = "linear";
  d.n = 128;
  d.h = 4;
  d.w = 1;
  d.c = 1;
  d.target_dim = 2;
  std::mt19937 gen(1);
  std::uniform_int_distribution<int> pix(0, 255);
  for (int64_t i = 0; i < d.n; ++i) {
    float v[4];
    for (float& x : v) {
      const int p = pix(gen);
      d.images.push_back(uint8_t(p));
      x = float(p) / 255.0f;
    }
    d.targets.push_back(v[0] + 2 * v[1] - v[2]);
    d.targets.push_back(0.5f * v[3] - v[0]);
  }
  d.check();
  Model m;
  m.add(mk<nn::Linear>(4, 2));
  ModelConfig c;
  c.loss = "mse";
  c.optimizer = "adam";
  c.lr = 0.05;
  m.configure(c).finalize({4});
  TrainOptions o;
  o.epochs = 30;
  o.data.batch_size = 32;
  o.progress = false;
  const History h = m.train(d, o);
  EXPECT_LT(h.epochs.back().train_loss, 0.05 * h.epochs.front().train_loss);
  // regression_precision defaults to std(targets) / 250 of the training set
  EXPECT_GT(m.config().regression_precision, 0);
  EXPECT_LT(m.config().regression_precision, 0.01);
  const EvalResult r = m.evaluate(d);
  EXPECT_LT(r.loss, 0.01);
  EXPECT_GE(r.accuracy, 0);
  // classification losses refuse targets
  Model ce;
  ce.add(mk<nn::Linear>(4, 2));
  ce.configure(ModelConfig{}).finalize({4});
  expect_error([&] { ce.train(d, o); },
               {"has float targets, which need the mse or binary_cross_entropy loss"});
}

TEST(ModelSaveLoad, RegisteredModuleTypesRoundTrip) {
  // A layer type the library does not know (as Python's layers are) is rebuilt by its factory.
  struct Twice : nn::Module {
    Tensor forward(const Tensor& x) override { return x * 2.0; }
    std::string type_name() const override { return "Twice"; }
    std::string config() const override { return R"({"type": "TestTwice"})"; }
  };
  TempDir dir;
  manual_seed(6);
  Model m;
  m.add(std::make_shared<Twice>()).add(mk<nn::Linear>(4, 2));
  m.configure(ModelConfig{}).finalize({4});
  m.save(dir.file("t.aether"));
  expect_error([&] { Model::load(dir.file("t.aether")); }, {"unknown layer type 'TestTwice'"});
  nn::register_module_type("TestTwice", [](const std::string&) { return std::make_shared<Twice>(); });
  Model back = Model::load(dir.file("t.aether"));
  const Tensor x = Tensor::ones({3, 4});
  EXPECT_TRUE(bit_equal(back.predict(x), m.predict(x)));
}

// The resnet20 preset: its stride-2 stages and projection shortcuts give the shapes of ResNet-20,
// and one batch's loss and gradients are the reference backend's on the fused executor (the
// residual adds, shortcut convs and global average pool included). A 16x16 input keeps it small.
TEST(Presets, Resnet20FusedStepMatchesTheReference) {
  struct Step {
    double loss = 0;
    std::vector<std::pair<std::string, std::vector<double>>> grads;  // per parameter
  };
  auto step = [](bool fused) {
    return oracle_test::with_fusion(fused, [] {
      manual_seed(7);
      const Preset p = make_preset("resnet20", {16, 16, 3}, 10);
      manual_seed(8);
      const Tensor x = Tensor::randn({4, 16, 16, 3});     // (N,H,W,C)
      const Tensor labels = Tensor::randint(0, 10, {4});  // (N)
      const Tensor logits = (*p.network)(x);              // (N,10)
      EXPECT_EQ(logits.shape(), (Shape{4, 10}));
      const Tensor loss = cross_entropy(logits, labels, 0.1);
      loss.backward();
      Step s{loss.item<double>(), {}};
      for (auto& [name, t] : p.network->named_parameters())
        s.grads.emplace_back(name, oracle_test::f32_values(t->grad()));
      return s;
    });
  };
  const Step fused = step(true), ref = step(false);
  EXPECT_TRUE(std::isfinite(ref.loss) && ref.loss > 1);  // about ln 10 at initialisation
  EXPECT_NEAR(fused.loss, ref.loss, 1e-5 * ref.loss);
  ASSERT_EQ(fused.grads.size(), ref.grads.size());
  // The stem's conv and BN (weight, bias), 9 blocks of 2 convs + 2 BNs, 2 shortcuts of a conv + a
  // BN, the head's weight and bias.
  EXPECT_EQ(ref.grads.size(), size_t(1 + 2 + 9 * (2 + 2 * 2) + 2 * (1 + 2) + 2));
  bool has_shortcut = false;
  for (size_t i = 0; i < ref.grads.size(); ++i) {
    const auto& [name, want] = ref.grads[i];
    has_shortcut = has_shortcut || name == "9.shortcut.0.weight";
    double scale = 0;
    for (double v : want) scale = std::max(scale, std::abs(v));
    ASSERT_EQ(fused.grads[i].second.size(), want.size()) << name;
    EXPECT_GT(scale, 0) << name << ": no gradient";
    for (size_t j = 0; j < want.size(); ++j)
      ASSERT_NEAR(fused.grads[i].second[j], want[j], 1e-4 * scale + 1e-7) << name << "[" << j << "]";
  }
  EXPECT_TRUE(has_shortcut);
}

// The progress bar's clock stops at stop(): an epoch's seconds and its final line's rate and time
// cover its training, not the validation after it (the final line used to count the validation).
TEST(ProgressBar, StopFreezesTheClock) {
  ProgressBar bar(0, 1, 10, false);
  bar.update(10, 1000, 0.5, 0.5);
  bar.stop();
  const double t = bar.seconds();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));  // a validation, say
  EXPECT_EQ(bar.seconds(), t);
  bar.stop();  // a second stop keeps the first time
  EXPECT_EQ(bar.seconds(), t);
}
