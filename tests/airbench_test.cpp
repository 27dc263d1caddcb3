// The airbench presets and the pieces they add (issue 18): the triangle schedule against airbench's
// formula, reflect-padded translations, the Scale layer's place in a network, parameters trained for
// their first epochs only (ParamGroup::train_epochs), lookahead from a start epoch, and the
// airbench94 / airbench93 networks and recipes (shapes, parameter counts, frozen and grouped
// parameters, dirac and whitening initialisation, one short training run).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/nn/init.h"

using namespace aether;
namespace fs = std::filesystem;

// airbench's triangle(steps, start=0.2, end=0.07, peak=0.23): linear through (0, 0.2), (int(0.23 *
// steps), 1), (steps, 0.07), as its torch code computes it.
TEST(Triangle, MatchesAirbenchsPiecewiseLinearSchedule) {
  const int64_t total = 476;                   // airbench94: ceil(48 batches x 9.9 epochs)
  const int64_t peak = int64_t(0.23 * total);  // 109
  optim::TriangleLR s(2.0, total, 0.23, 0.2, 0.07);
  auto airbench = [&](int64_t i) {
    if (i < peak) return 0.2 + (1 - 0.2) * double(i) / double(peak);
    return 1 + (0.07 - 1) * double(i - peak) / double(total - peak);
  };
  for (int64_t i :
       {int64_t(0), int64_t(1), int64_t(50), peak - 1, peak, peak + 1, int64_t(300), total - 1, total})
    EXPECT_NEAR(s.lr(i), 2.0 * airbench(i), 1e-12) << "step " << i;
  EXPECT_NEAR(s.lr(total + 10), 2.0 * 0.07, 1e-12);  // then the end value
  const auto back = optim::schedule_from_config(s.config());
  for (int64_t i = 0; i <= total; i += 7) EXPECT_EQ(back->lr(i), s.lr(i));
  EXPECT_THROW(optim::TriangleLR(1.0, 100, 1.5, 0.2, 0.07), Error);
  EXPECT_THROW(optim::TriangleLR(1.0, 100, 0.5, -1, 0.07), Error);
  ModelConfig c;
  c.schedule = "triangle";
  c.lr_end_factor = -0.5;
  Model m;
  m.add(std::make_shared<nn::Linear>(2, 2));
  EXPECT_THROW(m.configure(c), Error);
}

// torch's 'reflect' padding by P, then a crop at (dy, dx): padded[i] = src[r(i - P)] with r(-k) = k
// and r(H-1+k) = H-1-k (the edge itself is not repeated).
TEST(ReflectCrop, TranslatesWithAMirroredBorder) {
  data::LoaderOptions o;
  o.crop_padding = 2;
  o.crop_reflect = true;
  const int64_t h = 4, w = 5;
  std::vector<uint8_t> src(size_t(h * w));
  for (int64_t i = 0; i < h * w; ++i) src[size_t(i)] = uint8_t(i);
  auto r = [](int64_t i, int64_t n) { return i < 0 ? -i : i >= n ? 2 * n - 2 - i : i; };
  for (int64_t dy = 0; dy <= 4; ++dy)
    for (int64_t dx = 0; dx <= 4; ++dx)
      for (bool flip : {false, true}) {
        std::vector<float> out(size_t(h * w));
        data::prepare_sample(o, src.data(), h, w, 1, {dy, dx, flip}, out.data());
        for (int64_t y = 0; y < h; ++y)
          for (int64_t x = 0; x < w; ++x) {
            const int64_t sx = r((flip ? w - 1 - x : x) + dx - 2, w), sy = r(y + dy - 2, h);
            ASSERT_FLOAT_EQ(out[size_t(y * w + x)], float(src[size_t(sy * w + sx)]) / 255.0f)
                << "dy " << dy << " dx " << dx << " flip " << flip << " at " << y << "," << x;
          }
      }
  // Zero padding (the default) differs at the border: the test sees the mode.
  o.crop_reflect = false;
  std::vector<float> zero(size_t(h * w));
  data::prepare_sample(o, src.data(), h, w, 1, {0, 0, false}, zero.data());
  EXPECT_EQ(zero[0], 0.0f);
  // A padding as wide as the image cannot be reflected.
  data::Dataset d;
  d.name = "small";
  d.n = 1;
  d.h = d.w = 2;
  d.c = 1;
  d.num_classes = 1;
  d.images.assign(4, 0);
  d.labels = {0};
  d.check();
  data::LoaderOptions bad;
  bad.crop_padding = 2;
  bad.crop_reflect = true;
  try {
    data::DataLoader loader(d, bad);
    ADD_FAILURE() << "crop_reflect with padding 2 on 2x2 images was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("crop_reflect"), std::string::npos) << e.what();
  }
}

namespace {
// 32 images (6,6,1), 2 classes: a bright left or right half.
data::Dataset tiny() {
  data::Dataset d;
  d.name = "tiny";
  d.n = 32;
  d.h = d.w = 6;
  d.c = 1;
  d.num_classes = 2;
  for (int64_t i = 0; i < d.n; ++i) {
    d.labels.push_back(i % 2);
    for (int y = 0; y < 6; ++y)
      for (int x = 0; x < 6; ++x)
        d.images.push_back(uint8_t(((x < 3) == (i % 2 == 0) ? 160 : 30) + (i * 7 + y) % 50));
  }
  d.check();
  return d;
}
// 0 Conv2d (weight, bias), 1 BatchNorm2d, 2 ReLU, 3 Flatten, 4 Linear, 5 Scale.
Model make(const std::vector<ParamGroup>& groups, int64_t lookahead_every = 0, int64_t lookahead_start = 0,
           bool falling_lr = false) {
  manual_seed(7);
  Model m;
  m.add(std::make_shared<nn::Conv2d>(1, 3, 3, Conv2dOptions{.padding = "same"}))
      .add(std::make_shared<nn::BatchNorm2d>(3))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::Linear>(6 * 6 * 3, 2, false))
      .add(std::make_shared<nn::Scale>(0.5));
  ModelConfig c;
  c.optimizer = "sgd";
  c.lr = 0.1;
  c.momentum = 0.9;
  c.nesterov = true;
  c.weight_decay = 1e-3;
  c.param_groups = groups;
  c.lookahead_every = lookahead_every;
  c.lookahead_decay = 0.5;
  c.lookahead_start_epoch = lookahead_start;
  if (falling_lr) {  // lr (1 - step / steps), airbench94_muon's
    c.schedule = "triangle";
    c.warmup_fraction = 0;
    c.lr_start_factor = 1;
  }
  m.configure(c).finalize({6, 6, 1});
  return m;
}
TrainOptions options(int64_t epochs) {
  TrainOptions o;
  o.epochs = epochs;
  o.data.batch_size = 8;
  o.data.seed = 3;
  o.progress = false;
  return o;
}
std::vector<double> values(Model& m, const std::string& name) {
  for (auto& [n, t] : m.network().named_parameters())
    if (n == name) return t->to_vector<double>();
  ADD_FAILURE() << "no parameter " << name;
  return {};
}
// `m` trained for 3 epochs with a checkpoint after each, stopped after the second: the checkpoint.
Model stopped_after_two_epochs(Model m, const std::string& ckpt) {
  TrainOptions o = options(3);
  o.checkpoint_path = ckpt;
  o.on_epoch = [](const EpochStats& e) {
    if (e.epoch == 1) throw std::runtime_error("stop");
  };
  EXPECT_THROW(m.train(tiny(), o), std::runtime_error);
  return Model::load(ckpt);
}
bool has_state(Model& m, const std::string& suffix) {
  for (auto& [n, t] : m.optimizer()->named_state())
    if (n.size() >= suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0)
      return true;
  return false;
}
}  // namespace

// The conv's bias trains in epoch 1 only (airbench's whitening bias: 3); the other parameters keep
// training; the optimizer still holds it (its state's index does not move), so a checkpoint written
// after epoch 2 resumes bit-identically.
TEST(ParamGroups, TrainEpochsFreezeAParameterAfterItsEpochs) {
  const fs::path dir = fs::temp_directory_path() / ("aether_train_epochs_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string ckpt = (dir / "m.aether").string();
  const std::vector<ParamGroup> groups = {{.match = "0.bias", .train_epochs = 1}};
  Model a = make(groups);
  const auto b0 = values(a, "0.bias");
  std::vector<std::vector<double>> bias_after, weight_after;
  TrainOptions oa = options(3);
  oa.on_epoch = [&](const EpochStats&) {
    bias_after.push_back(values(a, "0.bias"));
    weight_after.push_back(values(a, "4.weight"));
  };
  a.train(tiny(), oa);
  ASSERT_EQ(bias_after.size(), 3u);
  EXPECT_NE(bias_after[0], b0);             // trained in epoch 1
  EXPECT_EQ(bias_after[1], bias_after[0]);  // then frozen
  EXPECT_EQ(bias_after[2], bias_after[0]);
  EXPECT_NE(weight_after[1], weight_after[0]);  // the others train on
  EXPECT_NE(weight_after[2], weight_after[1]);
  // Stopped after epoch 2 (the bias frozen), resumed for the third.
  Model c = stopped_after_two_epochs(make(groups), ckpt);
  EXPECT_EQ(c.config().param_groups.at(0).train_epochs, 1);
  c.train(tiny(), options(3));
  for (const char* n : {"0.weight", "0.bias", "1.weight", "1.bias", "4.weight"})
    EXPECT_EQ(values(c, n), values(a, n)) << n;
  fs::remove_all(dir);
  EXPECT_THROW(make({{.match = "0.bias", .frozen = true, .train_epochs = 2}}), Error);
  EXPECT_THROW(make({{.match = "0.bias", .train_epochs = -1}}), Error);
}

// schedule_over_train_epochs: the head's weight, trained for 2 of 4 epochs, follows the falling
// schedule over its own 2 epochs: what 2 epochs of training give it (and not what it gets without
// the setting, with the schedule over 4); then it stays put. Everything else is frozen but the conv's
// bias, which trains every epoch (an epoch must train something) and which the BatchNorm after it
// cancels, so the head's gradients are the same in both runs up to rounding. A run stopped after
// epoch 1 resumes onto the same values.
TEST(ParamGroups, ScheduleOverTrainEpochsRunsTheScheduleOverTheGroupsOwnEpochs) {
  const ParamGroup bias{.match = "0.bias"}, rest{.match = "*", .frozen = true};
  const std::vector<ParamGroup> own = {
      {.match = "4.weight", .train_epochs = 2, .schedule_over_train_epochs = true}, bias, rest};
  Model a = make(own, 0, 0, true);
  std::vector<std::vector<double>> head_after;
  TrainOptions oa = options(4);
  oa.on_epoch = [&](const EpochStats&) { head_after.push_back(values(a, "4.weight")); };
  a.train(tiny(), oa);
  ASSERT_EQ(head_after.size(), 4u);
  auto expect_near = [](const std::vector<double>& got, const std::vector<double>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size()) << what;
    for (size_t j = 0; j < got.size(); ++j) ASSERT_NEAR(got[j], want[j], 1e-5) << what << " [" << j << "]";
  };
  Model b = make({{.match = "4.weight"}, bias, rest}, 0, 0, true);
  b.train(tiny(), options(2));
  expect_near(head_after[1], values(b, "4.weight"), "2 epochs of its own schedule");
  EXPECT_EQ(head_after[2], head_after[1]);
  EXPECT_EQ(head_after[3], head_after[1]);
  Model c = make({{.match = "4.weight", .train_epochs = 2}, bias, rest}, 0, 0, true);
  c.train(tiny(), options(4));
  double gap = 0;  // without the setting the rate falls over 4 epochs, not 2: a different weight
  const auto wc = values(c, "4.weight");
  for (size_t j = 0; j < wc.size(); ++j) gap = std::max(gap, std::abs(wc[j] - head_after[1][j]));
  EXPECT_GT(gap, 1e-3);
  // Stopped after epoch 1, resumed from its checkpoint: the setting is saved, the rate recomputed.
  const fs::path dir = fs::temp_directory_path() / ("aether_own_schedule_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string ckpt = (dir / "m.aether").string();
  Model d = make(own, 0, 0, true);
  TrainOptions od = options(4);
  od.checkpoint_path = ckpt;
  od.on_epoch = [](const EpochStats& e) {
    if (e.epoch == 0) throw std::runtime_error("stop");
  };
  EXPECT_THROW(d.train(tiny(), od), std::runtime_error);
  Model e = Model::load(ckpt);
  EXPECT_TRUE(e.config().param_groups.at(0).schedule_over_train_epochs);
  e.train(tiny(), options(4));
  EXPECT_EQ(values(e, "4.weight"), head_after[3]);
  fs::remove_all(dir);
  // It needs the epochs it spans.
  EXPECT_THROW(make({{.match = "0.bias", .schedule_over_train_epochs = true}}), Error);
}

// An epoch in which nothing would train (every parameter frozen, or past its train_epochs) is an
// error that says so, raised before the epoch's first step: the parameters keep their values.
TEST(ParamGroups, AnEpochWithNothingToTrainIsAClearError) {
  Model a = make({{.match = "4.weight", .train_epochs = 1}, {.match = "*", .frozen = true}});
  std::vector<std::vector<double>> after;
  TrainOptions o = options(2);
  o.on_epoch = [&](const EpochStats&) { after.push_back(values(a, "4.weight")); };
  try {
    a.train(tiny(), o);
    ADD_FAILURE() << "an epoch with every parameter frozen trained";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("epoch 2 would train no parameter"), std::string::npos) << e.what();
  }
  ASSERT_EQ(after.size(), 1u);
  EXPECT_EQ(values(a, "4.weight"), after[0]);
  Model b = make({{.match = "*", .frozen = true}});
  EXPECT_THROW(b.train(tiny(), options(1)), Error);
}

// Lookahead from epoch 1: epoch 0 keeps no slow weights; from epoch 1 they exist, and every epoch
// ends with the parameters equal to them.
TEST(Lookahead, StartsAtItsEpochAndEveryEpochEndsOnTheSlowWeights) {
  Model a = make({}, 2, 1);
  std::vector<bool> slots;
  TrainOptions o = options(3);
  o.on_epoch = [&](const EpochStats&) {
    slots.push_back(has_state(a, ".lookahead"));
    if (!slots.back()) return;
    // State i < params().size() is a parameter's, the rest lookahead's buffers' (BatchNorm).
    const auto& params = a.optimizer()->params();
    const auto& buffers = a.optimizer()->lookahead_buffers();
    for (auto& [n, t] : a.optimizer()->named_state())
      if (n.size() > 10 && n.substr(n.size() - 10) == ".lookahead") {
        const size_t i = std::stoul(n.substr(0, n.find('.')));
        ASSERT_LT(i, params.size() + buffers.size()) << n;
        const Tensor& owner = i < params.size() ? params[i] : buffers[i - params.size()];
        EXPECT_EQ(t->to_vector<double>(), owner.to_vector<double>()) << n;
      }
  };
  a.train(tiny(), o);
  EXPECT_EQ(slots, (std::vector<bool>{false, true, true}));
  // Lookahead from epoch 0 differs from it: the start epoch matters.
  Model b = make({}, 2, 0);
  b.train(tiny(), options(3));
  EXPECT_NE(values(a, "4.weight"), values(b, "4.weight"));
}

namespace {
int64_t trained_params(Model& m) {
  int64_t n = 0;
  for (const Tensor& p : m.optimizer()->params()) n += p.numel();
  return n;
}
Model from_preset(const Preset& p) {
  Model m;
  for (auto& l : p.network->children()) m.add(l.second);
  m.configure(p.config).finalize({32, 32, 3});
  return m;
}
// n synthetic CIFAR-sized images (32,32,3), 10 classes.
data::Dataset cifar_like(int64_t n) {
  data::Dataset d;
  d.name = "cifar-like";
  d.n = n;
  d.h = d.w = 32;
  d.c = 3;
  d.num_classes = 10;
  for (int64_t i = 0; i < n; ++i) {
    d.labels.push_back(i % 10);
    for (int64_t k = 0; k < 32 * 32 * 3; ++k)
      d.images.push_back(uint8_t((k * 37 + i * 101 + (k / 96) * (i % 10)) % 256));
  }
  d.check();
  return d;
}
}  // namespace

// airbench94: 1,972,792 parameters (whitening 2x2x3x24 + 24, convs 24-64, 64-64, 64-256, 256-256 x3,
// BatchNorm 2 x (64+64+256+256+256+256), head 256x10); the BN weights and whitening filters frozen;
// the BN biases at 64x the learning rate; (N,32,32,3) -> (N,10).
TEST(AirbenchPreset, NetworksRecipesAndInitialisation) {
  manual_seed(1);
  const Preset p = make_preset("airbench94", {32, 32, 3}, 10);
  Model m = from_preset(p);
  EXPECT_EQ(m.network().num_parameters(), 1972792);
  EXPECT_EQ(trained_params(m), 1972792 - 288 - (64 + 64 + 256 + 256 + 256 + 256));
  EXPECT_EQ(p.epochs, 10);
  EXPECT_EQ(p.data.batch_size, 1024);
  EXPECT_TRUE(p.data.crop_reflect && p.data.alternate_flips && p.data.drop_last);
  EXPECT_EQ(p.data.crop_padding, 2);
  EXPECT_EQ(p.tta, TTA::flip_translate);
  EXPECT_EQ(preset_tta("airbench93"), TTA::flip_translate);
  EXPECT_EQ(preset_tta("cifarnet"), TTA::none);
  EXPECT_NEAR(p.config.lr, 1.5, 1e-12);  // 11.5 / (1 + 1 / 0.15)
  EXPECT_EQ(p.config.schedule, "triangle");
  EXPECT_EQ(p.config.lookahead_start_epoch, 3);
  // The BN biases' learning rate scale, by name.
  int64_t scaled = 0;
  for (size_t i = 0; i < m.optimizer()->params().size(); ++i)
    if (m.optimizer()->param_options(i).lr_scale == 64) scaled += m.optimizer()->params()[i].numel();
  EXPECT_EQ(scaled, 64 + 64 + 256 + 256 + 256 + 256);
  // Dirac: the first 24 filters of the first 3x3 conv (layer 2) pass their channel through.
  auto* conv = dynamic_cast<nn::Conv2d*>(m.network()[2].get());
  ASSERT_NE(conv, nullptr);
  const auto w = conv->weight.to_vector<float>();  // (64,3,3,24)
  for (int64_t o = 0; o < 24; ++o)
    for (int64_t k = 0; k < 9 * 24; ++k)
      ASSERT_EQ(w[size_t(o * 9 * 24 + k)], k == 4 * 24 + o ? 1.0f : 0.0f) << "filter " << o << " at " << k;
  // The whitening init replaces the random filters and zeroes the bias.
  auto* white = dynamic_cast<nn::Conv2d*>(m.network()[0].get());
  const auto before = white->weight.to_vector<float>();
  const data::Dataset d = cifar_like(64);
  data::LoaderOptions lo;
  std::tie(lo.mean, lo.std) = data::channel_stats(d);
  p.init(*p.network, d, lo);
  EXPECT_NE(white->weight.to_vector<float>(), before);
  EXPECT_EQ(white->bias.to_vector<float>(), std::vector<float>(24, 0.0f));
  // (N,32,32,3) -> (N,10), in evaluation mode too.
  const Tensor y = m.predict(d, 16);
  EXPECT_EQ(y.shape(), (Shape{64, 10}));
  const Preset q = make_preset("airbench93", {32, 32, 3}, 10);
  EXPECT_EQ(q.epochs, 11);
  EXPECT_EQ(from_preset(q).network().num_parameters(), 288 + 24 + 24 * 64 * 9 + 64 * 64 * 9 + 64 * 128 * 9 +
                                                           3 * 128 * 128 * 9 + 2 * (64 + 64 + 128 * 4) +
                                                           1280);
  EXPECT_THROW(make_preset("airbench94", {28, 28, 1}, 10), Error);
}

// Two short epochs of airbench93 on synthetic images: the whitening filters never move, its bias
// trains in the first (of train_epochs 3, so in both), the BN weights stay 1, the loss is finite.
TEST(AirbenchPreset, TrainsWithItsFrozenAndGroupedParameters) {
  manual_seed(2);
  Preset p = make_preset("airbench93", {32, 32, 3}, 10);
  const data::Dataset d = cifar_like(32);
  TrainOptions o;
  o.epochs = 2;
  o.data = p.data;
  o.data.batch_size = 16;
  o.progress = false;
  std::tie(o.data.mean, o.data.std) = data::channel_stats(d);
  p.init(*p.network, d, o.data);
  Model m = from_preset(p);
  const auto w0 = values(m, "0.weight"), b0 = values(m, "0.bias");
  const History h = m.train(d, o);
  ASSERT_EQ(h.epochs.size(), 2u);
  EXPECT_TRUE(std::isfinite(h.epochs.back().train_loss));
  EXPECT_EQ(values(m, "0.weight"), w0);
  EXPECT_NE(values(m, "0.bias"), b0);
  for (auto& [n, t] : m.network().named_parameters())
    if (m.network()[std::stoul(n.substr(0, n.find('.')))]->type_name() == "BatchNorm2d" &&
        n.find(".weight") != std::string::npos) {
      EXPECT_EQ(t->to_vector<float>(), std::vector<float>(size_t(t->numel()), 1.0f)) << n;
    }
}

// A group's own optimizer (airbench94_muon's split): the conv filter by Muon (momentum 0.6), the
// rest by the config's SGD; the model's optimizer is then a Composite of the two. A checkpoint
// written after epoch 2 resumes bit-identically (the Muon slot included), a group under SGD instead
// trains differently, and a parameter Muon cannot train is named in the error.
TEST(ParamGroups, AGroupsOwnOptimizerTrainsItsParametersAndResumes) {
  const fs::path dir = fs::temp_directory_path() / ("aether_group_optimizer_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string ckpt = (dir / "m.aether").string();
  const std::vector<ParamGroup> groups = {
      {.match = "*.weight", .layer = "Conv2d", .lr_scale = 0.5, .optimizer = "muon", .momentum = 0.6}};
  Model a = make(groups);
  EXPECT_EQ(a.optimizer()->type_name(), "Composite");
  const auto parts = nlohmann::json::parse(a.optimizer()->config()).at("parts");
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].at("optimizer").at("type"), "Muon");
  EXPECT_EQ(parts[0].at("optimizer").at("momentum"), 0.6);
  EXPECT_EQ(parts[0].at("params"), nlohmann::json::array({0}));  // "0.weight"
  EXPECT_EQ(parts[1].at("optimizer").at("type"), "SGD");
  a.train(tiny(), options(3));
  EXPECT_TRUE(has_state(a, "0.momentum") && has_state(a, "1.momentum"));
  Model c = stopped_after_two_epochs(make(groups), ckpt);
  EXPECT_EQ(c.config().param_groups.at(0).optimizer, "muon");
  EXPECT_EQ(c.config().param_groups.at(0).momentum, 0.6);
  c.train(tiny(), options(3));
  for (const char* n : {"0.weight", "0.bias", "1.bias", "4.weight"})
    EXPECT_EQ(values(c, n), values(a, n)) << n;
  Model s =
      make({{.match = "*.weight", .layer = "Conv2d", .lr_scale = 0.5, .optimizer = "sgd", .momentum = 0.6}});
  s.train(tiny(), options(3));
  EXPECT_NE(values(s, "0.weight"), values(a, "0.weight"));
  fs::remove_all(dir);
  try {
    make({{.match = "0.*", .optimizer = "muon"}});
    ADD_FAILURE() << "a bias given to muon was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("parameter '0.bias' (Conv2d, shape (3,)) is given to muon"),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(make({{.match = "*", .optimizer = "lion"}}), Error);
  EXPECT_THROW(make({{.match = "*", .momentum = NAN}}), Error);
}

// Triangle without a rising part (airbench94_muon): lr (1 - step / total), from the first step.
TEST(Triangle, WithoutARisingPartOnlyFalls) {
  optim::TriangleLR s(3.0, 200, 0, 1, 0);
  for (int64_t i : {0, 1, 75, 199, 200}) EXPECT_NEAR(s.lr(i), 3.0 * (1 - double(i) / 200), 1e-12) << i;
}

// airbench94_muon: airbench94's network with the head's weight at standard deviation 1 and its
// output divided by 256; the 6 conv3x3 filters under Muon (3 Newton-Schulz steps, momentum 0.6,
// normalised weights, lr 0.24), the biases and the head under Nesterov SGD (momentum 0.85, lr 106 and
// 1340 on the mean loss: airbench's 0.053 and 0.67 on the sum of 2000); 8 epochs of 2000; then a
// short training run keeps the whitening filters.
TEST(AirbenchPreset, Airbench94MuonRecipe) {
  manual_seed(3);
  Preset p = make_preset("airbench94_muon", {32, 32, 3}, 10);
  Model m = from_preset(p);
  EXPECT_EQ(m.network().num_parameters(), 1972792);
  EXPECT_EQ(trained_params(m), 1972792 - 288 - (64 + 64 + 256 + 256 + 256 + 256));
  EXPECT_EQ(p.epochs, 8);
  EXPECT_EQ(p.data.batch_size, 2000);
  EXPECT_TRUE(p.data.crop_reflect && p.data.alternate_flips && p.data.drop_last);
  EXPECT_EQ(p.tta, TTA::flip_translate);
  EXPECT_EQ(p.config.lookahead_every, 0);
  EXPECT_NEAR(p.config.lr, 106, 1e-9);
  const auto j = nlohmann::json::parse(m.optimizer()->config());
  ASSERT_EQ(j.at("type"), "Composite");
  ASSERT_EQ(j.at("parts").size(), 2u);
  const auto& sgd = j.at("parts")[0].at("optimizer");
  const auto& muon = j.at("parts")[1].at("optimizer");
  EXPECT_EQ(sgd.at("type"), "SGD");
  EXPECT_EQ(sgd.at("momentum"), 0.85);
  EXPECT_EQ(muon.at("type"), "Muon");
  EXPECT_EQ(muon.at("momentum"), 0.6);
  EXPECT_EQ(muon.at("ns_steps"), 3);
  EXPECT_EQ(muon.at("normalize_weights"), true);
  std::vector<double> muon_lrs;
  for (size_t i : j.at("parts")[1].at("params").get<std::vector<size_t>>()) {
    EXPECT_EQ(m.optimizer()->params()[i].ndim(), 4) << i;
    EXPECT_EQ(m.optimizer()->param_options(i).weight_decay, 0.0) << i;  // none on the filters
    muon_lrs.push_back(p.config.lr * m.optimizer()->param_options(i).lr_scale);
  }
  ASSERT_EQ(muon_lrs.size(), 6u);
  for (double lr : muon_lrs) EXPECT_NEAR(lr, 0.24, 1e-12);
  // The head: lr 0.67 x 2000, weight decay 2e-6 x 2000 / 0.67 / 2000; standard deviation 1.
  const size_t head = m.optimizer()->params().size() - 1;
  EXPECT_NEAR(p.config.lr * m.optimizer()->param_options(head).lr_scale, 1340, 1e-9);
  EXPECT_NEAR(m.optimizer()->param_options(head).weight_decay, 2e-6 / 0.67, 1e-15);
  const auto w = values(m, "25.weight");
  ASSERT_EQ(w.size(), 2560u);
  double mean = 0, ss = 0;
  for (double v : w) mean += v / double(w.size());
  for (double v : w) ss += (v - mean) * (v - mean);
  EXPECT_NEAR(std::sqrt(ss / double(w.size() - 1)), 1.0, 1e-5);
  EXPECT_NE(m.network()[26]->config().find("0.00390625"), std::string::npos) << m.network()[26]->config();
  // A short run: finite, the whitening filters fixed.
  const data::Dataset d = cifar_like(32);
  TrainOptions o;
  o.epochs = 1;
  o.data = p.data;
  o.data.batch_size = 16;
  o.progress = false;
  std::tie(o.data.mean, o.data.std) = data::channel_stats(d);
  p.init(*p.network, d, o.data);
  const auto w0 = values(m, "0.weight");
  const History h = m.train(d, o);
  EXPECT_TRUE(std::isfinite(h.epochs.back().train_loss));
  EXPECT_EQ(values(m, "0.weight"), w0);
}
