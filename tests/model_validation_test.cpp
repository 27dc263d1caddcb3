// tests/model_validation_test.cpp - Model never writes or accepts a bad state: save refuses NaN/Inf
// weights, buffers and optimizer slots (the previous file is kept), training stops on a non-finite
// validation result or weights before its checkpoint, Model::load rejects every bad value of a real
// checkpoint rewritten to a bad variant (normalisation, weights, optimizer slots, training state,
// architecture...), evaluate/predict check the data's sample shape and non-finite results, and
// train/evaluate/predict refuse empty data, non-finite float data and options that cannot apply.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/core/random.h"
#include "aether/io/file.h"
#include "aether/model/model.h"
#include "io/checkpoint.h"
#include "io/zip_archive.h"
#include "model_util.h"
#include "temp_dir.h"

using namespace aether;
using aether::test::TempDir;
using model_test::mk;
using model_test::train_options;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Module configs as parsed JSON, and modules rebuilt from JSON (the API passes JSON text).
nn::ModulePtr from_config(const json& c) { return nn::module_from_config(c.dump()); }
json config_of(const nn::Module& m) { return json::parse(m.config()); }

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}

// The message holds every part.
void expect_has(const std::string& msg, const std::vector<std::string>& parts) {
  for (const auto& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
}
// f throws an aether::Error whose message holds every part.
void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  expect_has(error_of(f), parts);
}

// n images (h,w,1) uint8: class 0 bright top half, class 1 bright bottom half, plus noise.
data::Dataset tiny_dataset(int64_t n = 64, int64_t h = 8, int64_t w = 8, const std::string& name = "tiny") {
  data::Dataset d;
  d.name = name;
  d.n = n;
  d.h = h;
  d.w = w;
  d.c = 1;
  d.num_classes = 2;
  d.class_names = {"top", "bottom"};
  std::mt19937 gen(1);
  std::uniform_int_distribution<int> noise(0, 90);
  for (int64_t i = 0; i < n; ++i) {
    d.labels.push_back(i % 2);
    for (int64_t y = 0; y < h; ++y)
      for (int64_t x = 0; x < w; ++x)
        d.images.push_back(uint8_t(((y < h / 2) == (i % 2 == 0) ? 150 : 20) + noise(gen)));
  }
  d.check();
  return d;
}

// Conv -> BN -> ReLU -> pool -> flatten -> linear for (8,8,1) inputs; SGD with momentum or Adam.
Model make_model(const std::string& optimizer = "sgd") {
  Model m;
  m.add(mk<nn::Conv2d>(1, 4, 3, Conv2dOptions{.padding = "same"}))
      .add(mk<nn::BatchNorm2d>(4))
      .add(mk<nn::ReLU>())
      .add(mk<nn::MaxPool2d>(2))
      .add(mk<nn::Flatten>())
      .add(mk<nn::Linear>(4 * 4 * 4, 2));
  ModelConfig c;
  c.optimizer = optimizer;
  c.lr = optimizer == "sgd" ? 0.05 : 0.01;
  c.momentum = 0.9;
  m.configure(c).finalize({8, 8, 1});
  return m;
}

Tensor* find_tensor(std::vector<std::pair<std::string, Tensor*>> named, const std::string& name) {
  for (auto& [n, t] : named)
    if (n == name) return t;
  ADD_FAILURE() << "no tensor " << name;
  return nullptr;
}

// Sets element 0 of a float tensor to v (keeping its shape, dtype and identity).
void poison(Tensor* t, float v) {
  auto values = t->to_vector<float>();
  values[0] = v;
  t->assign(Tensor::from_vector<float>(values, t->shape()));
}

std::vector<float> floats(const Tensor& t) { return t.to_vector<float>(); }

// Every parameter and buffer of two models is bitwise equal.
bool same_weights(Model& a, Model& b) {
  auto ta = a.network().named_parameters(), tb = b.network().named_parameters();
  for (auto& x : a.network().named_buffers()) ta.push_back(x);
  for (auto& x : b.network().named_buffers()) tb.push_back(x);
  if (ta.size() != tb.size()) return false;
  for (size_t i = 0; i < ta.size(); ++i) {
    const auto va = floats(*ta[i].second), vb = floats(*tb[i].second);
    if (ta[i].first != tb[i].first || va.size() != vb.size() ||
        std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) != 0)
      return false;
  }
  return true;
}

// Writes a checkpoint holding exactly `extra` and the tensors (no check of their values), the way
// save_checkpoint lays it out: a hostile or damaged file.
void write_raw_checkpoint(const std::string& path, const json& extra, const NamedTensors& model,
                          const NamedTensors& optimizer) {
  json manifest = extra;
  manifest["format"] = kCheckpointFormatName;
  manifest["format_version"] = kCheckpointFormatVersion;
  auto list = [](const NamedTensors& ts) {
    json l = json::array();
    for (const auto& [name, t] : ts)
      l.push_back({{"name", name}, {"dtype", safetensors_dtype_name(t.dtype())}, {"shape", t.shape()}});
    return l;
  };
  manifest["tensors"] = {{"model", list(model)}, {"optimizer", list(optimizer)}};
  const std::string text = manifest.dump(2), m = write_safetensors(model), o = write_safetensors(optimizer);
  const std::string zip = zipio::write_zip(
      {{"manifest.json", text, true}, {"model.safetensors", m, false}, {"optimizer.safetensors", o, false}},
      path);
  std::ofstream(path, std::ios::binary | std::ios::trunc).write(zip.data(), std::streamsize(zip.size()));
}

// A real checkpoint (Model::save) rewritten by `edit` to `dst`.
using Edit = std::function<void(json& extra, NamedTensors& model, NamedTensors& optimizer)>;
void rewrite(const std::string& src, const std::string& dst, const Edit& edit) {
  Checkpoint ck = load_checkpoint(src);
  edit(ck.manifest_extra, ck.model, ck.optimizer);
  write_raw_checkpoint(dst, ck.manifest_extra, ck.model, ck.optimizer);
}

Tensor& tensor_named(NamedTensors& ts, const std::string& name) {
  for (auto& [n, t] : ts)
    if (n == name) return t;
  throw std::runtime_error("no tensor " + name);
}
void set_first(NamedTensors& ts, const std::string& name, float v) {
  Tensor& t = tensor_named(ts, name);
  auto values = t.to_vector<float>();
  values[0] = v;
  t = Tensor::from_vector<float>(values, t.shape());
}

// A trained model saved with SGD momentum (one epoch: every parameter has its momentum slot).
struct Saved {
  TempDir tmp;
  std::string path;
  Saved(const std::string& optimizer = "sgd") {
    manual_seed(11);
    Model m = make_model(optimizer);
    m.train(tiny_dataset(), train_options(1));
    path = tmp.file("good.aether");
    m.save(path);
  }
  // Model::load's error for the checkpoint rewritten by `edit`.
  std::string load_error(const Edit& edit) {
    const std::string bad = tmp.file("bad.aether");
    rewrite(path, bad, edit);
    return error_of([&] { Model::load(bad); });
  }
};

}  // namespace

// ---- save never writes NaN/Inf ------------------------------------------------------------------------
TEST(ModelSaveFinite, RefusesNonFiniteWeightsAndKeepsThePreviousFile) {
  TempDir tmp;
  manual_seed(1);
  Model m = make_model();
  m.train(tiny_dataset(), train_options(1));
  const std::string path = tmp.file("run.aether");
  m.save(path);
  const std::string before = read_file(path);
  Model good = Model::load(path);

  Tensor* w = find_tensor(m.network().named_parameters(), "5.weight");
  const float old = w->to_vector<float>()[0];
  poison(w, kNaN);
  EXPECT_EQ(error_of([&] { m.save(path); }),
            "save: 5.weight holds NaN; not writing " + path + ", the previous file is kept");
  EXPECT_EQ(read_file(path), before);
  Model again = Model::load(path);
  EXPECT_TRUE(same_weights(again, good));
  poison(w, old);

  // A buffer (batch norm running variance), an optimizer slot, Inf and a new path.
  Tensor* var = find_tensor(m.network().named_buffers(), "1.running_var");
  poison(var, kInf);
  expect_error([&] { m.save(path); },
               {"save: 1.running_var holds Inf; not writing", "previous file is kept"});
  poison(var, -2.0f);  // a negative variance gives NaN outputs: refused too
  expect_error([&] { m.save(path); }, {"save: 1.running_var holds the negative value -2"});
  poison(var, 1.0f);
  Tensor* mom = nullptr;
  for (auto& [name, t] : m.optimizer()->named_state())
    if (name == "0.momentum") mom = t;
  ASSERT_NE(mom, nullptr);
  poison(mom, -kInf);
  EXPECT_EQ(error_of([&] { m.save(path); }),
            "save: optimizer state 0.weight.momentum holds -Inf; not writing " + path +
                ", the previous file is kept");
  const std::string fresh = tmp.file("fresh.aether");
  EXPECT_EQ(error_of([&] { m.save(fresh); }),
            "save: optimizer state 0.weight.momentum holds -Inf; not writing " + fresh);
  EXPECT_FALSE(fs::exists(fresh));
  EXPECT_EQ(read_file(path), before);
  poison(mom, 0.5f);
  m.save(path);  // all finite again: written
  EXPECT_NE(read_file(path), before);
}

// After every epoch train() evaluates and saves: a non-finite validation loss stops it before the
// checkpoint, which keeps the last good epoch.
TEST(ModelSaveFinite, TrainStopsOnNonFiniteValidationAndKeepsTheCheckpoint) {
  TempDir tmp;
  manual_seed(2);
  const data::Dataset d = tiny_dataset();
  Model m = make_model();
  TrainOptions o = train_options(3);
  o.validation = &d;
  o.checkpoint_path = tmp.file("ckpt.aether");
  std::string after_first;
  o.on_epoch = [&](const EpochStats& s) {
    if (s.epoch != 0) return;
    after_first = read_file(o.checkpoint_path);
    // A negative running variance is finite but gives NaN in evaluation mode only: training
    // (batch statistics) goes on with a finite loss; the validation loss is NaN.
    Tensor* var = find_tensor(m.network().named_buffers(), "1.running_var");
    var->assign(Tensor::full({4}, -100.0));
  };
  expect_error([&] { m.train(d, o); },
               {"train: epoch 2: validation on 'tiny' failed: evaluate:", "not finite", "NaN",
                "not writing " + o.checkpoint_path + ", the previous checkpoint is kept"});
  ASSERT_FALSE(after_first.empty());
  EXPECT_EQ(read_file(o.checkpoint_path), after_first);
  Model back = Model::load(o.checkpoint_path);
  EXPECT_EQ(back.epochs_done(), 1);
}

TEST(ModelSaveFinite, TrainStopsOnNonFiniteWeightsAndKeepsTheCheckpoint) {
  TempDir tmp;
  manual_seed(3);
  const data::Dataset d = tiny_dataset();
  Model m = make_model();
  TrainOptions o = train_options(3);
  o.checkpoint_path = tmp.file("ckpt.aether");
  std::string after_first;
  o.on_epoch = [&](const EpochStats& s) {
    if (s.epoch != 0) return;
    after_first = read_file(o.checkpoint_path);
    // The running mean is not used in training mode: the training loss stays finite.
    poison(find_tensor(m.network().named_buffers(), "1.running_mean"), kInf);
  };
  expect_error([&] { m.train(d, o); }, {"train: epoch 2: save: 1.running_mean holds Inf; not writing " +
                                        o.checkpoint_path + ", the previous file is kept"});
  EXPECT_EQ(read_file(o.checkpoint_path), after_first);
  EXPECT_EQ(Model::load(o.checkpoint_path).epochs_done(), 1);

  // A NaN weight: the training loss guard stops the next step, before any checkpoint.
  Model n = make_model();
  TrainOptions on = train_options(3);
  on.checkpoint_path = tmp.file("n.aether");
  on.on_epoch = [&](const EpochStats& s) {
    if (s.epoch == 0) poison(find_tensor(n.network().named_parameters(), "0.weight"), kNaN);
  };
  expect_error([&] { n.train(d, on); }, {"train: the loss became", "epoch 2"});
  EXPECT_EQ(Model::load(on.checkpoint_path).epochs_done(), 1);
}

// ---- load validates every value -----------------------------------------------------------------------
TEST(ModelLoadValidation, TheUnchangedRewriteLoads) {
  Saved s;
  const std::string copy = s.tmp.file("copy.aether");
  rewrite(s.path, copy, [](json&, NamedTensors&, NamedTensors&) {});
  Model a = Model::load(s.path), b = Model::load(copy);
  EXPECT_TRUE(same_weights(a, b));
  EXPECT_EQ(b.epochs_done(), 1);
}

TEST(ModelLoadValidation, Normalization) {
  Saved s;
  const std::string bad = s.tmp.file("bad.aether");
  const std::string where = "load: " + bad + ": ";
  EXPECT_EQ(
      s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["normalization"]["mean"] = json::array(); }),
      where + "normalization.mean has 0 values, expected one per input channel (1)");
  EXPECT_EQ(s.load_error([](json& j, NamedTensors&, NamedTensors&) {
    j["normalization"] = {{"mean", json::array()}, {"std", json::array()}};
  }),
            where + "normalization.mean has 0 values, expected one per input channel (1)");
  EXPECT_EQ(s.load_error([](json& j, NamedTensors&, NamedTensors&) {
    j["normalization"]["std"] = {0.3, 0.3, 0.3};
  }),
            where + "normalization.std has 3 values, expected one per input channel (1)");
  EXPECT_EQ(s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["normalization"]["std"] = {0.0}; }),
            where + "normalization.std[0] is 0, expected > 0");
  EXPECT_EQ(s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["normalization"]["std"] = {-1.5}; }),
            where + "normalization.std[0] is -1.5, expected > 0");
  EXPECT_EQ(
      s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["normalization"]["mean"] = {nullptr}; }),
      where + "normalization.mean[0] is null, expected a finite float32 number");
  EXPECT_EQ(s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["normalization"]["mean"] = {1e300}; }),
            where + "normalization.mean[0] is 1e+300, expected a finite float32 number");
  EXPECT_EQ(s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["normalization"]["mean"] = "0.3"; }),
            where + "normalization.mean is \"0.3\", expected a list of numbers");
  EXPECT_EQ(s.load_error([](json& j, NamedTensors&, NamedTensors&) { j.erase("normalization"); }),
            where + "manifest.json has no \"normalization\" (not a model checkpoint?)");
  // An untrained model saves its (default) normalisation explicitly: it loads.
  manual_seed(4);
  Model fresh = make_model();
  const std::string untrained = s.tmp.file("untrained.aether");
  fresh.save(untrained);
  Model back = Model::load(untrained);
  EXPECT_EQ(back.norm_mean(), std::vector<float>{0.0f});
  EXPECT_EQ(back.norm_std(), std::vector<float>{1.0f});
}

TEST(ModelLoadValidation, NonFiniteWeightsAndBuffers) {
  Saved s;
  const std::string where = "load: " + s.tmp.file("bad.aether") + ": ";
  EXPECT_EQ(s.load_error([](json&, NamedTensors& m, NamedTensors&) { set_first(m, "0.weight", kNaN); }),
            where + "tensor '0.weight' holds NaN");
  EXPECT_EQ(s.load_error([](json&, NamedTensors& m, NamedTensors&) { set_first(m, "5.bias", -kInf); }),
            where + "tensor '5.bias' holds -Inf");
  EXPECT_EQ(s.load_error([](json&, NamedTensors& m, NamedTensors&) { set_first(m, "1.running_mean", kInf); }),
            where + "tensor '1.running_mean' holds Inf");
  EXPECT_EQ(s.load_error([](json&, NamedTensors& m, NamedTensors&) { set_first(m, "1.running_var", -3); }),
            where + "tensor '1.running_var' holds the negative value -3 (a variance)");
  EXPECT_EQ(s.load_error([](json&, NamedTensors& m, NamedTensors&) { m.pop_back(); }),
            where + "tensor '1.running_var' is missing");
  EXPECT_EQ(s.load_error([](json&, NamedTensors& m, NamedTensors&) {
    m.emplace_back("9.weight", Tensor::zeros({2}).realize());
  }),
            where + "tensor '9.weight' is not part of the architecture");
  EXPECT_EQ(s.load_error([](json&, NamedTensors& m, NamedTensors&) {
    tensor_named(m, "5.bias") = Tensor::zeros({2}, DType::float64).realize();
  }),
            where + "tensor '5.bias' has shape (2,) float64, the architecture expects (2,) float32");
}

TEST(ModelLoadValidation, OptimizerSlots) {
  Saved s;
  const std::string where = "load: " + s.tmp.file("bad.aether") + ": ";
  // Renamed (an unknown slot), missing, non-finite, the wrong shape or dtype, naming no parameter.
  EXPECT_EQ(
      s.load_error([](json&, NamedTensors&, NamedTensors& o) { o[0].first = "0.weight.velocity"; }),
      where +
          "optimizer state '0.weight.velocity' is not a state of SGD for '0.weight' (its slots: momentum)");
  EXPECT_EQ(s.load_error([](json&, NamedTensors&, NamedTensors& o) { o.erase(o.begin() + 1); }),
            where + "optimizer state '0.bias.momentum' is missing (the optimizer has taken 4 steps)");
  EXPECT_EQ(s.load_error([](json&, NamedTensors&, NamedTensors& o) { o.clear(); }),
            where + "optimizer state '0.weight.momentum' is missing (the optimizer has taken 4 steps)");
  EXPECT_EQ(
      s.load_error([](json&, NamedTensors&, NamedTensors& o) { set_first(o, "5.weight.momentum", kNaN); }),
      where + "optimizer state '5.weight.momentum' holds NaN");
  EXPECT_EQ(
      s.load_error([](json&, NamedTensors&, NamedTensors& o) {
        tensor_named(o, "5.bias.momentum") = Tensor::zeros({3}).realize();
      }),
      where + "optimizer state '5.bias.momentum' has shape (3,) float32, its parameter has (2,) float32");
  EXPECT_EQ(
      s.load_error([](json&, NamedTensors&, NamedTensors& o) {
        tensor_named(o, "5.bias.momentum") = Tensor::zeros({2}, DType::float16).realize();
      }),
      where + "optimizer state '5.bias.momentum' has shape (2,) float16, its parameter has (2,) float32");
  EXPECT_EQ(s.load_error([](json&, NamedTensors&, NamedTensors& o) {
    o.emplace_back("7.weight.momentum", Tensor::zeros({2}).realize());
  }),
            where + "optimizer state '7.weight.momentum' names no trained parameter of the model");
  EXPECT_EQ(s.load_error([](json&, NamedTensors&, NamedTensors& o) {
    o.emplace_back("step", Tensor::zeros({1}).realize());
  }),
            where + "optimizer state 'step' names no trained parameter of the model");
  // Slots before the first step.
  EXPECT_EQ(
      s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["training_state"]["optimizer_steps"] = 0; }),
      where + "optimizer state '0.weight.momentum' is present but training_state.optimizer_steps is 0");
}

TEST(ModelLoadValidation, AdamSlots) {
  Saved s("adam");
  const std::string where = "load: " + s.tmp.file("bad.aether") + ": ";
  EXPECT_EQ(s.load_error([](json&, NamedTensors&, NamedTensors& o) { o[0].first = "0.weight.momentum"; }),
            where +
                "optimizer state '0.weight.momentum' is not a state of Adam for '0.weight' (its slots: "
                "exp_avg, exp_avg_sq)");
  EXPECT_EQ(
      s.load_error([](json&, NamedTensors&, NamedTensors& o) { set_first(o, "0.weight.exp_avg_sq", -1); }),
      where + "optimizer state '0.weight.exp_avg_sq' holds the negative value -1 (a variance)");
  EXPECT_EQ(s.load_error([](json&, NamedTensors&, NamedTensors& o) { o.erase(o.begin() + 1); }),
            where + "optimizer state '0.weight.exp_avg_sq' is missing (the optimizer has taken 4 steps)");
}

TEST(ModelLoadValidation, TrainingState) {
  Saved s;
  const std::string where = "load: " + s.tmp.file("bad.aether") + ": ";
  auto ts = [&](const std::string& key, json value) {
    return s.load_error([&](json& j, NamedTensors&, NamedTensors&) { j["training_state"][key] = value; });
  };
  EXPECT_EQ(ts("epoch", -1), where + "training_state.epoch is -1, expected an integer >= 0");
  EXPECT_EQ(ts("step", 2.5), where + "training_state.step is 2.5, expected an integer >= 0");
  EXPECT_EQ(ts("step", "4"), where + "training_state.step is \"4\", expected an integer >= 0");
  EXPECT_EQ(ts("optimizer_steps", -4),
            where + "training_state.optimizer_steps is -4, expected an integer >= 0");
  EXPECT_EQ(ts("schedule_position", 3),
            where + "training_state.schedule_position is 3 but training_state.step is 4; they must agree");
  EXPECT_EQ(ts("lr", -0.1), where + "training_state.lr is -0.1, expected a finite number >= 0");
  EXPECT_EQ(ts("lr", nullptr), where + "training_state.lr is null, expected a finite number >= 0");
  EXPECT_EQ(ts("scheduled_lr", 0),
            where + "training_state.scheduled_lr is 0, expected null or a finite number > 0");
  EXPECT_EQ(ts("scheduled_lr", -0.5),
            where + "training_state.scheduled_lr is -0.5, expected null or a finite number > 0");
  EXPECT_EQ(ts("scheduled_lr", "0.1"),
            where + "training_state.scheduled_lr is \"0.1\", expected null or a finite number > 0");
  EXPECT_EQ(ts("scheduled_lr", 0.2), "<no error>");
  EXPECT_EQ(ts("scheduled_lr", nullptr), "<no error>");
  EXPECT_EQ(
      s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["training_state"].erase("scheduled_lr"); }),
      "<no error>");  // files from before it
  EXPECT_EQ(ts("rng", {{"seed", -1}, {"next_stream", 3}}),
            where + "training_state.rng.seed is -1, expected an integer >= 0");
  EXPECT_EQ(ts("rng", {{"seed", 1}}), where + "training_state.rng.next_stream is missing");
  EXPECT_EQ(ts("loader", 5), where + "training_state.loader is 5, expected an object");
  EXPECT_EQ(ts("loader", {{"batch_size", 0}}),
            where + "training_state.loader.batch_size is 0, expected an integer >= 1");
  EXPECT_EQ(ts("loader", {{"hflip", "yes"}}),
            where + "training_state.loader.hflip is \"yes\", expected true or false");
  EXPECT_EQ(ts("loader", {{"alternate_flips", 1}}),
            where + "training_state.loader.alternate_flips is 1, expected true or false");
  const json plateau = {{"factor", 0.5}, {"cooldown", 0}, {"best", 0.3}, {"best_epoch", 1}, {"wait", 0}};
  auto lp = [&](const std::string& key, json value) {
    json p = plateau;
    p[key] = value;
    return ts("lr_plateau", p);
  };
  EXPECT_EQ(lp("factor", 0.0), where + "training_state.lr_plateau.factor is 0, expected a number in (0, 1]");
  EXPECT_EQ(lp("factor", 1.5),
            where + "training_state.lr_plateau.factor is 1.5, expected a number in (0, 1]");
  EXPECT_EQ(lp("cooldown", -1), where + "training_state.lr_plateau.cooldown is -1, expected an integer >= 0");
  EXPECT_EQ(lp("best_epoch", -2),
            where + "training_state.lr_plateau.best_epoch is -2, expected an integer >= -1");
  EXPECT_EQ(lp("wait", 0.5), where + "training_state.lr_plateau.wait is 0.5, expected an integer >= 0");
  EXPECT_EQ(lp("best", "x"), where + "training_state.lr_plateau.best is \"x\", expected a finite number >= " +
                                 detail::cat(-std::numeric_limits<double>::max()));
  EXPECT_EQ(ts("lr_plateau", 5), where + "training_state.lr_plateau is 5, expected an object");
  EXPECT_EQ(lp("wait", 3), "<no error>");
  EXPECT_EQ(
      s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["training_state"].erase("lr_plateau"); }),
      "<no error>");  // files from before it
  EXPECT_EQ(s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["training_state"].erase("epoch"); }),
            where + "training_state.epoch is missing");
  EXPECT_EQ(s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["training_state"] = 3; }),
            where + "training_state is 3, expected an object");
  // (JSON has no NaN or Inf: a non-finite lr is written as null, above, or overflows the parser.)
}

TEST(ModelLoadValidation, ArchitectureConfigAndTheRest) {
  Saved s;
  const std::string where = "load: " + s.tmp.file("bad.aether") + ": ";
  auto top = [&](const std::string& key, json value) {
    return s.load_error([&](json& j, NamedTensors&, NamedTensors&) { j[key] = value; });
  };
  EXPECT_EQ(top("input_shape", {8, 8, 0}), where + "input_shape[2] is 0, expected an integer >= 1");
  EXPECT_EQ(top("input_shape", {8, 8}), where + "input_shape is [8,8], expected [H, W, C] or [features]");
  expect_has(top("input_shape", {8, 8, 3}), {where + "architecture does not fit input_shape (8, 8, 3)"});
  EXPECT_EQ(top("precision", "float8"),
            where + "precision is \"float8\"; expected \"float32\", \"bfloat16\" or \"float16\"");
  EXPECT_EQ(top("precision", 16),
            where + "precision is 16; expected \"float32\", \"bfloat16\" or \"float16\"");
  EXPECT_EQ(top("info", 7), where + "info is 7, expected an object");
  expect_has(top("layouts", {{"activations", "NCHW"}}), {where + "layouts is", "reads only"});
  expect_has(top("optimizer", {{"type", "Adam"}}),
             {where + "optimizer is", "disagrees with config and training_state.lr"});
  expect_has(s.load_error([](json& j, NamedTensors&, NamedTensors&) { j["config"]["momentum"] = -0.5; }),
             {where + "config is invalid: configure: momentum must be finite and >= 0"});
  expect_has(top("config", {{"loss", "hinge"}}), {where + "config is invalid"});
  expect_has(s.load_error([](json& j, NamedTensors&, NamedTensors&) {
    j["architecture"]["layers"][0]["type"] = "Conv3d";
  }),
             {where + "architecture is invalid: module_from_config: unknown layer type 'Conv3d'"});
  EXPECT_EQ(s.load_error([](json& j, NamedTensors&, NamedTensors&) {
    j["architecture"] = j["architecture"]["layers"][2];
  }),
            where + "architecture is not a Sequential model");
  // A layer far larger than the file: refused before anything is allocated.
  expect_has(s.load_error([](json& j, NamedTensors&, NamedTensors&) {
    j["architecture"]["layers"][5]["in"] = int64_t(1) << 40;
  }),
             {where + "architecture.layers[5] declares a Linear layer of", "more than the file holds"});
  // Many layers, each small, together far more than the file.
  expect_has(
      s.load_error([](json& j, NamedTensors&, NamedTensors&) {
        json& layers = j["architecture"]["layers"];
        for (int k = 0; k < 1000; ++k)
          layers.push_back({{"type", "Linear"}, {"in", 100}, {"out", 100}, {"bias", true}});
      }),
      {"declares a Linear layer of 10000 weights; the layers up to it need", "more than the file holds"});
}

TEST(ModelLoadValidation, AFailedLoadLeavesTheGeneratorAlone) {
  Saved s;
  const std::string bad = s.tmp.file("bad.aether");
  rewrite(s.path, bad, [](json&, NamedTensors& m, NamedTensors&) { set_first(m, "5.bias", kNaN); });
  manual_seed(99);
  const GeneratorState before = generator_state();
  EXPECT_THROW(Model::load(bad), Error);
  const GeneratorState after = generator_state();
  EXPECT_EQ(after.seed, before.seed);
  EXPECT_EQ(after.next_stream, before.next_stream);
}

// ---- evaluate / predict ---------------------------------------------------------------------------------
TEST(ModelEvaluate, ChecksTheSampleShape) {
  manual_seed(5);
  Model m = make_model();
  // 4x16 images have as many values as 8x8 ones, and after the conv and pooling the Linear layer
  // gets the 64 inputs it expects: without the check this "works".
  const data::Dataset wrong = tiny_dataset(32, 4, 16, "wide");
  EXPECT_EQ(error_of([&] { m.evaluate(wrong); }),
            "evaluate: data set 'wide' has images (4, 16, 1), the model expects (8, 8, 1)");
  EXPECT_EQ(error_of([&] { m.predict(wrong); }),
            "predict: data set 'wide' has images (4, 16, 1), the model expects (8, 8, 1)");
  expect_error([&] { m.predict(Tensor::zeros({2, 4, 16, 1})); }, {"predict", "(2, 4, 16, 1)"});
  // Training with such a validation set fails before the first step.
  TrainOptions o = train_options(1);
  o.validation = &wrong;
  expect_error([&] { m.train(tiny_dataset(), o); }, {"train (validation): data set 'wide'"});
  EXPECT_EQ(m.steps_done(), 0);
  EXPECT_EQ(m.evaluate(tiny_dataset()).samples, 64);
}

TEST(ModelEvaluate, AFlatModelChecksTheValuesPerSample) {
  manual_seed(5);
  Model flat;
  flat.add(mk<nn::Linear>(64, 2));
  flat.configure(ModelConfig{}).finalize({64});
  // Any sample of 64 values fits a model of 64 inputs; the error counts values, not an image shape.
  EXPECT_EQ(flat.evaluate(tiny_dataset(8, 4, 16, "wide")).samples, 8);
  const data::Dataset short_rows = tiny_dataset(8, 7, 8, "short");
  EXPECT_EQ(error_of([&] { flat.evaluate(short_rows); }),
            "evaluate: data set 'short' has 56 values per sample (images (7, 8, 1)), the model expects 64");
  EXPECT_EQ(error_of([&] { flat.train(short_rows, train_options(1)); }),
            "train: data set 'short' has 56 values per sample (images (7, 8, 1)), the model expects 64");
  // Python's (N, features) arrays arrive as (F, 1, 1) images: no image shape to name.
  EXPECT_EQ(error_of([&] { flat.predict(tiny_dataset(8, 56, 1, "rows")); }),
            "predict: data set 'rows' has 56 values per sample, the model expects 64");
  EXPECT_EQ(flat.steps_done(), 0);
}

TEST(ModelEvaluate, NonFiniteOutputsAreAnError) {
  manual_seed(6);
  Model m = make_model();
  m.train(tiny_dataset(), train_options(1));
  const data::Dataset d = tiny_dataset();
  poison(find_tensor(m.network().named_parameters(), "5.weight"), kNaN);
  EXPECT_EQ(error_of([&] { m.evaluate(d); }),
            "evaluate: the model's outputs are not finite (NaN); the weights are corrupt or diverged");
  EXPECT_EQ(error_of([&] { m.predict(d); }),
            "predict: the model's outputs are not finite (NaN); the weights are corrupt or diverged");
  EXPECT_EQ(error_of([&] {
              m.predict(Tensor::zeros({3, 8, 8, 1}));
            }),
            "predict: the model's outputs are not finite (NaN); the weights are corrupt or diverged");
  std::vector<float> x(64, 0.0f);
  x[5] = kNaN;
  Model ok = make_model();
  EXPECT_EQ(error_of([&] {
              ok.predict(Tensor::from_vector<float>(x, {1, 8, 8, 1}));
            }),
            "predict: the images hold NaN");
}

// ---- the data a model is given ----------------------------------------------------------------------------
// An empty data set is an error before any step (it used to train "an epoch" of loss 0, and
// evaluate returned loss 0 and accuracy 0 as if measured).
TEST(ModelData, EmptyDataSetsAreErrors) {
  manual_seed(8);
  Model m = make_model();
  const data::Dataset empty = tiny_dataset(0, 8, 8, "none");
  EXPECT_EQ(error_of([&] { m.train(empty, train_options(1)); }), "train: data set 'none' is empty");
  EXPECT_EQ(error_of([&] { m.evaluate(empty); }), "evaluate: data set 'none' is empty");
  EXPECT_EQ(error_of([&] { m.predict(empty); }), "predict: data set 'none' is empty");
  EXPECT_EQ(error_of([&] { data::channel_stats(empty); }), "channel_stats: data set 'none' is empty");
  TrainOptions o = train_options(1);
  o.validation = &empty;
  EXPECT_EQ(error_of([&] { m.train(tiny_dataset(), o); }), "train (validation): data set 'none' is empty");
  EXPECT_EQ(m.steps_done(), 0);
}

// Float images (and regression targets) holding NaN or Inf name the item, instead of training to a
// NaN loss and advising a lower learning rate.
TEST(ModelData, NonFiniteFloatValuesNameTheItem) {
  manual_seed(9);
  Model m = make_model();
  std::vector<float> pixels(16 * 64, 0.5f);  // (16, 8, 8, 1)
  data::Dataset d = tiny_dataset(16);
  d.images.clear();
  d.float_images = pixels.data();
  d.check();
  pixels[5 * 64 + 17] = kInf;  // item 5
  pixels[9 * 64] = kNaN;       // item 9
  EXPECT_EQ(error_of([&] { d.check(); }),
            "Dataset: tiny: the image of item 5 holds Inf; images must be finite");
  EXPECT_EQ(error_of([&] { m.train(d, train_options(1)); }),
            "Dataset: tiny: the image of item 5 holds Inf; images must be finite");
  EXPECT_EQ(error_of([&] { m.evaluate(d); }),
            "Dataset: tiny: the image of item 5 holds Inf; images must be finite");
  pixels[5 * 64 + 17] = -kInf;
  EXPECT_EQ(error_of([&] { d.check(); }),
            "Dataset: tiny: the image of item 5 holds -Inf; images must be finite");
  pixels[5 * 64 + 17] = 0.5f;
  EXPECT_EQ(error_of([&] { m.predict(d); }),
            "Dataset: tiny: the image of item 9 holds NaN; images must be finite");
  EXPECT_EQ(m.steps_done(), 0);
  pixels[9 * 64] = 0.5f;
  EXPECT_EQ(m.predict(d).shape(), Shape({16, 2}));

  data::Dataset r = d;  // regression targets (16, 2)
  r.labels.clear();
  r.num_classes = 0;
  r.class_names.clear();
  r.target_dim = 2;
  r.targets.assign(32, 1.0f);
  r.check();
  r.targets[2 * 2 + 1] = kNaN;
  EXPECT_EQ(error_of([&] { r.check(); }),
            "Dataset: tiny: the target of item 2 holds NaN; targets must be finite");
}

// Labels must be classes the model gives, targets as wide as its output (was: a label past the
// output failed inside a step as one_hot's error; too wide targets as mse_loss's shape error).
TEST(ModelData, LabelsAndTargetsMustFitTheOutput) {
  manual_seed(8);
  Model m = make_model();  // 2 outputs
  data::Dataset three = tiny_dataset(32, 8, 8, "three");
  three.num_classes = 3;
  three.class_names.push_back("middle");
  expect_error([&] { m.train(three, train_options(1)); },
               {"train: data set 'three' has 3 classes, the model gives 2"});
  expect_error([&] { m.evaluate(three); }, {"evaluate: data set 'three' has 3 classes, the model gives 2"});
  EXPECT_EQ(m.predict(three).shape(), (Shape{32, 2}));  // predict reads no labels
  EXPECT_EQ(m.steps_done(), 0);

  Model r;
  r.add(mk<nn::Flatten>()).add(mk<nn::Linear>(64, 2));
  ModelConfig c;
  c.loss = "mse";
  r.configure(c).finalize({8, 8, 1});
  data::Dataset wide = tiny_dataset(32, 8, 8, "wide");
  wide.labels.clear();
  wide.num_classes = 0;
  wide.class_names.clear();
  wide.target_dim = 3;
  wide.targets.assign(32 * 3, 0.5f);
  expect_error([&] { r.train(wide, train_options(1)); },
               {"train: data set 'wide' has 3 targets per sample, the model gives 2"});
  wide.target_dim = 2;
  wide.targets.resize(32 * 2);
  EXPECT_EQ(r.train(wide, train_options(1)).epochs.size(), 1u);
}

TEST(ModelData, TrainOptionsThatCannotApply) {
  manual_seed(10);
  Model m = make_model();
  TrainOptions o = train_options(1);
  o.max_steps_per_epoch = -1;
  EXPECT_EQ(error_of([&] { m.train(tiny_dataset(), o); }),
            "train: max_steps_per_epoch must be >= 0 (0: whole epochs), got -1");
  // A model of flat samples: no pixels for crops or flips to move.
  Model flat;
  flat.add(mk<nn::Linear>(64, 2));
  ModelConfig c;
  c.lr = 0.05;
  flat.configure(c).finalize({64});
  for (const bool hflip : {false, true}) {
    TrainOptions a = train_options(1);
    a.data.hflip = hflip;
    a.data.crop_padding = hflip ? 0 : 2;
    EXPECT_EQ(
        error_of([&] { flat.train(tiny_dataset(), a); }),
        std::string("train: crop_padding and hflip need image input (H, W, C), the model takes (64,) (got "
                    "crop_padding ") +
            (hflip ? "0, hflip on)" : "2, hflip off)"));
  }
  EXPECT_EQ(flat.steps_done(), 0);
  EXPECT_EQ(flat.train(tiny_dataset(), train_options(1)).epochs.size(), 1u);
  // epochs counts from the start of training: asking again for 1 would train nothing.
  EXPECT_EQ(
      error_of([&] { flat.train(tiny_dataset(), train_options(1)); }),
      "train: epochs is 1 and the model has trained 1 already: epochs counts from the start of training, so "
      "this would train nothing (pass more than 1)");
  EXPECT_EQ(flat.train(tiny_dataset(), train_options(2)).epochs.size(), 1u);
}

// A checkpoint that cannot be written fails before the first step, not after an epoch's work.
TEST(ModelData, AnUnwritableCheckpointFailsBeforeTraining) {
  manual_seed(11);
  Model m = make_model();
  TempDir dir("unwritable_ckpt");
  TrainOptions o = train_options(1);
  o.checkpoint_path = (dir.path() / "missing" / "run.aether").string();
  EXPECT_EQ(error_of([&] { m.train(tiny_dataset(), o); }),
            "train: checkpoint '" + o.checkpoint_path + "': directory '" + (dir.path() / "missing").string() +
                "' does not exist");
  o.checkpoint_path = dir.path().string();
  EXPECT_EQ(error_of([&] { m.train(tiny_dataset(), o); }),
            "train: checkpoint '" + o.checkpoint_path + "' is a directory, not a file");
  EXPECT_EQ(m.steps_done(), 0);
  o.checkpoint_path = (dir.path() / "run.aether").string();
  m.train(tiny_dataset(), o);
  EXPECT_TRUE(fs::exists(o.checkpoint_path));
}

// ---- pooling strides in the architecture ------------------------------------------------------------
// categorical_cross_entropy takes probabilities: a model ending in a built-in layer that gives
// scores is an error at finalize (it trained on clamped scores, silently); a Softmax end, one
// behind Flatten/Dropout or inside a nested Sequential, is fine, and so is the logits loss.
TEST(ModelConfigure, CategoricalCrossEntropyNeedsProbabilities) {
  ModelConfig c;
  c.loss = "categorical_cross_entropy";
  auto with_end = [&](std::vector<nn::ModulePtr> end) {
    Model m;
    m.add(mk<nn::Flatten>()).add(mk<nn::Linear>(8, 3));
    for (auto& l : end) m.add(std::move(l));
    m.configure(c).finalize({2, 4, 1});
    return m.input_shape() == Shape{2, 4, 1};  // set by a finalize that passed
  };
  expect_error([&] { with_end({}); },
               {"finalize: the loss categorical_cross_entropy takes probabilities, but the model ends with "
                "Linear (layer 1), which gives unnormalised scores: end the model with a Softmax layer"});
  expect_error([&] { with_end({mk<nn::ReLU>(), mk<nn::Dropout>(0.1)}); }, {"ends with ReLU (layer 2)"});
  expect_error([&] { with_end({mk<nn::SiLU>()}); }, {"ends with SiLU (layer 2)"});
  expect_error([&] { with_end({mk<nn::ELU>()}); }, {"ends with ELU (layer 2)"});
  expect_error([&] { with_end({mk<nn::Softplus>()}); }, {"ends with Softplus (layer 2)"});
  EXPECT_TRUE(with_end({mk<nn::Softmax>()}));
  EXPECT_TRUE(with_end({mk<nn::Softmax>(), mk<nn::Dropout>(0.1)}));
  EXPECT_TRUE(
      with_end({mk<nn::Sequential>(std::vector<nn::ModulePtr>{mk<nn::Scale>(2.0), mk<nn::Softmax>()})}));
  expect_error(
      [&] {
        with_end({mk<nn::Sequential>(std::vector<nn::ModulePtr>{mk<nn::Softmax>(), mk<nn::Scale>(2.0)})});
      },
      {"ends with Scale (layer 1)"});
  c.loss = "cross_entropy";
  EXPECT_TRUE(with_end({}));
}

// A layer that folds the batch away still gives two dims: (N, K) must keep N.
TEST(ModelConfigure, TheLastLayerMustKeepTheBatch) {
  struct SumOverBatch : nn::Module {
    Tensor forward(const Tensor& x) override { return x.sum({0}).reshape({1, -1}); }
    std::string type_name() const override { return "SumOverBatch"; }
    std::string config() const override { return R"({"type": "SumOverBatch"})"; }
  };
  Model m;
  m.add(mk<nn::Flatten>()).add(mk<nn::Linear>(8, 3)).add(mk<SumOverBatch>());
  expect_error(
      [&] {
        m.configure(ModelConfig{}).finalize({2, 4, 1});
      },
      {"finalize: the last layer must give (N, classes), got (1, 3) for a batch of 2 (2, 2, 4, 1)"});
}

TEST(Presets, NeedAtLeastTwoClasses) {
  expect_error(
      [] {
        (void)make_preset("cifarnet", {32, 32, 3}, 1);
      },
      {"preset: cifarnet: a classifier needs at least 2 classes, got 1"});
  expect_error([] { (void)make_preset("mlp", {28, 28, 1}, 0); }, {"at least 2 classes, got 0"});
  EXPECT_NO_THROW((void)make_preset("mlp", {28, 28, 1}, 2));
}

// An image shape with a size of 0 is the preset's error (it read "Linear: features must be positive,
// got 0 -> 128", from a layer the user never named).
TEST(Presets, NeedAnImageShapeOfPositiveSizes) {
  for (const Shape& bad : {Shape{0, 28, 1}, Shape{28, 28, 0}, Shape{28, 28}})
    expect_error([&] { (void)make_preset("lenet", bad, 10); },
                 {"preset: image shape must be (H, W, C) of sizes >= 1, got " + to_string(bad)});
  // Images too small for a preset's pools: the preset says what it needs.
  expect_error(
      [] {
        (void)make_preset("cifarnet", {7, 32, 3}, 10);
      },
      {"cifarnet: needs images of at least 8x8 (three 2x2 max-pools), got (7, 32, 3)"});
  EXPECT_NO_THROW((void)make_preset("cifarnet", {8, 8, 1}, 10));
}

TEST(PoolingConfig, StoresTheRealStride) {
  EXPECT_EQ(config_of(nn::MaxPool2d(2))["stride"], json({2, 2}));
  EXPECT_EQ(config_of(nn::MaxPool2d(Size2(2, 3)))["stride"], json({2, 3}));
  EXPECT_EQ(config_of(nn::MaxPool2d(3, 1))["stride"], json({1, 1}));
  EXPECT_EQ(config_of(nn::AvgPool2d(3))["stride"], json({3, 3}));
  EXPECT_EQ(config_of(nn::AvgPool2d(3, 2, 1))["stride"], json({2, 2}));
  // A reader taking the stored stride literally gets the layer's output shape.
  manual_seed(7);
  const Tensor x = Tensor::rand({1, 9, 9, 2});
  for (const auto& layer :
       {from_config(config_of(nn::MaxPool2d(3))), from_config(config_of(nn::AvgPool2d(3)))}) {
    const json c = config_of(*layer);
    const int64_t k = c["kernel"][0], st = c["stride"][0];
    ASSERT_GT(st, 0) << c.dump();
    EXPECT_EQ(layer->forward(x).shape(), (Shape{1, (9 - k) / st + 1, (9 - k) / st + 1, 2})) << c.dump();
  }
}

TEST(PoolingConfig, OlderFilesWithStrideZeroMeanTheKernel) {
  // [0, 0] from files written before: the kernel's size, and written back as such.
  const json old_max = {{"type", "MaxPool2d"}, {"kernel", {2, 2}}, {"stride", {0, 0}}, {"padding", {0, 0}}};
  const json old_avg = {{"type", "AvgPool2d"},
                        {"kernel", {3, 3}},
                        {"stride", {0, 0}},
                        {"padding", {0, 0}},
                        {"count_include_pad", false}};
  EXPECT_EQ(config_of(*from_config(old_max))["stride"], json({2, 2}));
  EXPECT_EQ(config_of(*from_config(old_avg))["stride"], json({3, 3}));
  manual_seed(8);
  const Tensor x = Tensor::rand({2, 6, 6, 3});
  EXPECT_EQ(floats(from_config(old_max)->forward(x)), floats(max_pool2d(x, 2, 2)));
  EXPECT_EQ(floats(from_config(old_avg)->forward(x)), floats(avg_pool2d(x, 3, 3)));

  // A whole checkpoint with the old [0, 0] loads and predicts like the one saved now.
  Saved s;
  const std::string old = s.tmp.file("old.aether");
  rewrite(s.path, old, [](json& j, NamedTensors&, NamedTensors&) {
    json& pool = j["architecture"]["layers"][3];
    ASSERT_EQ(pool["type"], "MaxPool2d");
    ASSERT_EQ(pool["stride"], json({2, 2}));
    pool["stride"] = {0, 0};
  });
  Model a = Model::load(s.path), b = Model::load(old);
  EXPECT_EQ(b.network().config(), a.network().config());
  const data::Dataset d = tiny_dataset();
  EXPECT_EQ(floats(b.predict(d)), floats(a.predict(d)));
}

// Hostile values in the architecture's layers: each one a clear error naming the file, never a
// crash or a huge allocation.
TEST(ModelLoadValidation, HostileLayerValuesAreErrors) {
  Saved s;
  const std::string where = "load: " + s.tmp.file("bad.aether") + ": ";
  struct Change {
    int layer;
    const char* key;
    json value;
  };
  const std::vector<Change> changes = {
      {0, "kernel", {0, 0}},
      {0, "kernel", {-3, 3}},
      {0, "kernel", "x"},
      {0, "stride", {0, 0}},
      {0, "dilation", {0, 1}},
      {0, "groups", 0},
      {0, "groups", -1},
      {0, "padding", {-1, 0, 0, 0}},
      {0, "padding", "bogus"},
      {0, "in", 0},
      {0, "in", 1e30},
      {1, "channels", -4},
      {1, "eps", 0},
      {1, "momentum", 7},
      {3, "kernel", {0, 0}},
      {3, "kernel", {-2, -2}},
      {3, "stride", {-1, -1}},
      {3, "padding", {-1, -1}},
      {3, "kernel", {100, 100}},
      {5, "in", -64},
      {5, "out", 0},
      {5, "out", int64_t(1) << 50},
      {2, "type", 7},
      {2, "type", "Conv2d"},
  };
  for (const auto& c : changes) {
    SCOPED_TRACE(std::to_string(c.layer) + " " + c.key + " " + c.value.dump());
    const std::string msg = s.load_error([&](json& j, NamedTensors&, NamedTensors&) {
      j["architecture"]["layers"][size_t(c.layer)][c.key] = c.value;
    });
    EXPECT_EQ(msg.rfind(where, 0), 0u) << msg;
  }
}

// build_optimizer: the config's optimizer over tensors of one's own, and what only Model::train
// applies refused by name.
TEST(BuildOptimizer, MakesTheConfigsOptimizerAndRefusesWhatOnlyTrainApplies) {
  auto params = [] {
    return std::vector<Tensor>{Tensor::from_vector<float>({1, -2, 3, 0.5f}, {2, 2}).set_requires_grad()};
  };
  for (const auto& [name, type] : std::vector<std::pair<std::string, std::string>>{
           {"sgd", "SGD"}, {"adam", "Adam"}, {"adamw", "AdamW"}, {"muon", "Muon"}}) {
    ModelConfig c;
    c.optimizer = name;
    EXPECT_EQ(build_optimizer(c, params())->type_name(), type);
  }
  // One Nesterov step equals optim::SGD's with the same options.
  ModelConfig c;
  c.lr = 0.1;
  c.momentum = 0.9;
  c.nesterov = true;
  c.weight_decay = 0.01;
  const std::vector<Tensor> a = params(), b = params();
  const auto built = build_optimizer(c, a);
  optim::SGD direct(b, {.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 0.01});
  for (const auto& p : {a[0], b[0]}) (p * p * p).sum().backward();
  built->step();
  direct.step();
  EXPECT_EQ(a[0].to_vector<float>(), b[0].to_vector<float>());
  EXPECT_NE(a[0].to_vector<float>(), params()[0].to_vector<float>());

  auto refused = [&](const std::function<void(ModelConfig&)>& set, const std::vector<std::string>& words) {
    ModelConfig bad;
    set(bad);
    expect_error([&] { (void)build_optimizer(bad, params()); }, words);
  };
  refused([](ModelConfig& x) { x.schedule = "cosine"; },
          {"build_optimizer", "schedule 'cosine'", "needs total_steps"});
  refused([](ModelConfig& x) { x.clip_grad_norm = 1; }, {"build_optimizer", "clip_grad_norm"});
  refused([](ModelConfig& x) { x.lookahead_every = 5; }, {"build_optimizer", "lookahead"});
  refused([](ModelConfig& x) { x.param_groups = {ParamGroup{.match = "*"}}; },
          {"build_optimizer", "param_groups"});
  refused([](ModelConfig& x) { x.lr = -1; }, {"learning rate must be > 0"});
  refused([](ModelConfig& x) { x.optimizer = "lion"; }, {"unknown optimizer 'lion'"});
  ModelConfig c2;
  expect_error([&] { (void)build_optimizer(c2, {Tensor::ones({2})}); },
               {"parameter 0 does not require grad"});
}

// A schedule over total_steps: each step uses the rate the schedule gives for the steps before it,
// as Model::train does (make_schedule is what it uses).
TEST(BuildOptimizer, AppliesTheConfigsScheduleOverTotalSteps) {
  for (const std::string schedule : {"cosine", "one_cycle", "warmup_linear", "triangle", "step"}) {
    SCOPED_TRACE(schedule);
    ModelConfig c;
    c.optimizer = "sgd";
    c.momentum = 0;  // plain SGD
    c.weight_decay = 0;
    c.lr = 0.5;
    c.schedule = schedule;
    const Tensor p = Tensor::zeros({3}, DType::float64).set_requires_grad();
    const auto opt = build_optimizer(c, {p}, 6);
    const auto want = make_schedule(c, 6);
    ASSERT_NE(opt->schedule(), nullptr);
    double moved = 0;
    for (int64_t k = 0; k < 6; ++k) {
      opt->set_lr(123);    // overridden by the schedule at the step
      p.sum().backward();  // gradient 1: plain SGD moves p by -lr
      opt->step();
      opt->zero_grad();
      EXPECT_DOUBLE_EQ(opt->lr(), want->lr(k)) << "step " << k;
      moved += want->lr(k);
    }
    EXPECT_NEAR(p.to_vector<double>()[0], -moved, 1e-12);
    EXPECT_GT(moved, 0);
  }
}
