// Lookahead (optim::Optimizer::set_lookahead; ModelConfig::lookahead_*): slow weights against values
// computed by hand, the model's schedule of alpha and its final slow weights, and a checkpoint that
// resumes bit-identically with the slow weights in the optimizer state.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "io/checkpoint.h"

using namespace aether;
namespace fs = std::filesystem;

// SGD lr 0.1 with a gradient of 1: the fast weights step by -0.1; the slow weights start at step 2
// (the first multiple of 2) as the fast ones; every 2 steps after they move halfway to the fast
// weights, which take the slow ones' value.
TEST(Lookahead, SlowWeightsFollowTheFastOnesEveryKSteps) {
  Tensor p = Tensor::from_vector<float>({1.0f, -2.0f}).set_requires_grad();
  optim::SGD opt({p}, {.lr = 0.1});
  opt.set_lookahead(2, 0.5);
  const double want[] = {-0.1, -0.2, -0.3, -0.3};  // p - p0 after steps 1..4
  for (int s = 0; s < 4; ++s) {
    p.set_grad(Tensor::ones({2}));
    opt.step();
    const auto v = p.to_vector<double>();
    EXPECT_NEAR(v[0] - 1.0, want[s], 1e-6) << "step " << s + 1;
    EXPECT_NEAR(v[1] + 2.0, want[s], 1e-6) << "step " << s + 1;
  }
  p.set_grad(Tensor::ones({2}));
  opt.step();  // step 5: fast -0.4, slow stays at -0.3
  EXPECT_NEAR(p.to_vector<double>()[0] - 1.0, -0.4, 1e-6);
  opt.lookahead_finish();
  EXPECT_NEAR(p.to_vector<double>()[0] - 1.0, -0.3, 1e-6);
  // Paused, steps take no lookahead step: step 6 (a multiple of 2) leaves the fast weights at -0.4.
  opt.pause_lookahead(true);
  p.set_grad(Tensor::ones({2}));
  opt.step();
  EXPECT_NEAR(p.to_vector<double>()[0] - 1.0, -0.4, 1e-6);
  EXPECT_THROW(opt.set_lookahead(-1, 0.5), Error);
  EXPECT_THROW(opt.set_lookahead_alpha(1.5), Error);
  EXPECT_NE(opt.config().find("\"lookahead_every\":2"), std::string::npos) << opt.config();
}

// A buffer (not trained, changed between steps as a forward pass changes BatchNorm's running
// statistics) is averaged at the parameters' lookahead steps: its slow values start at step 2 as
// the buffer, then move halfway to it every 2 steps, and the buffer takes them; lookahead_finish
// sets it to them; its slow values are state "1.lookahead" (index params().size() + 0).
TEST(Lookahead, BuffersAreAveragedAtTheSameSteps) {
  Tensor p = Tensor::from_vector<float>({1.0f}).set_requires_grad();
  Tensor buf = Tensor::from_vector<float>({0.0f, 10.0f});
  optim::SGD opt({p}, {.lr = 0.1});
  opt.set_lookahead(2, 0.5);
  opt.set_lookahead_buffers({buf});
  // Before step k (1..5) the buffer is set to (k, 10 k), but to (6, 40) before step 4.
  for (int k = 1; k <= 5; ++k) {
    buf.assign(Tensor::from_vector<float>({float(k == 4 ? 6 : k), 10.0f * float(k)}));
    p.set_grad(Tensor::ones({1}));
    opt.step();
  }
  // Step 2: slow = buf = (2, 20). Step 4: buf = (6, 40) -> slow (4, 30). Step 5: buf (5, 50), no step.
  EXPECT_EQ(buf.to_vector<float>(), (std::vector<float>{5.0f, 50.0f}));
  bool found = false;
  for (auto& [name, t] : opt.named_state())
    if (name == "1.lookahead") {
      EXPECT_EQ(t->to_vector<float>(), (std::vector<float>{4.0f, 30.0f}));
      found = true;
    }
  EXPECT_TRUE(found);
  opt.lookahead_finish();
  EXPECT_EQ(buf.to_vector<float>(), (std::vector<float>{4.0f, 30.0f}));
  // Checkpoint-style restore: shape-checked, "lookahead" only.
  EXPECT_THROW(opt.set_state(1, "lookahead", Tensor::zeros({3})), Error);
  EXPECT_THROW(opt.set_state(1, "momentum", Tensor::zeros({2})), Error);
  EXPECT_THROW(opt.set_state(2, "lookahead", Tensor::zeros({2})), Error);
  opt.set_state(1, "lookahead", Tensor::from_vector<float>({-1.0f, -2.0f}));
  opt.lookahead_finish();
  EXPECT_EQ(buf.to_vector<float>(), (std::vector<float>{-1.0f, -2.0f}));
  // Set before the first step only, floating-point tensors only.
  EXPECT_THROW(opt.set_lookahead_buffers({buf}), Error);
  optim::SGD fresh({p}, {.lr = 0.1});
  EXPECT_THROW(fresh.set_lookahead_buffers({Tensor::zeros({2}, DType::int32)}), Error);
}

// The buffer is averaged from its value after the step's forward pass: a step realized in one go
// (the buffer's new value recorded, then the optimizer's step) averages the recorded value.
TEST(Lookahead, BufferAveragesTheValueRecordedInTheSameStep) {
  Tensor p = Tensor::from_vector<float>({1.0f}).set_requires_grad();
  Tensor buf = Tensor::from_vector<float>({8.0f});
  optim::SGD opt({p}, {.lr = 0.1});
  opt.set_lookahead(1, 0.25);
  opt.set_lookahead_buffers({buf});
  for (int s = 0; s < 2; ++s) {
    buf.assign(buf.detach() * 2.0);  // lazy, like BatchNorm's running-statistics update
    p.set_grad(Tensor::ones({1}));
    opt.step({buf});
  }
  // Step 1: buf 16, slow starts at 16. Step 2: buf 32 -> slow 16 + 0.25 (32 - 16) = 20.
  EXPECT_EQ(buf.to_vector<float>(), (std::vector<float>{20.0f}));
}

namespace {
data::Dataset tiny() {
  data::Dataset d;
  d.name = "tiny";
  d.n = 40;
  d.h = d.w = 4;
  d.c = 1;
  d.num_classes = 2;
  for (int64_t i = 0; i < d.n; ++i) {
    d.labels.push_back(i % 2);
    for (int64_t k = 0; k < 16; ++k)
      d.images.push_back(uint8_t(((k < 8) == (i % 2 == 0) ? 170 : 40) + i * 3 % 30));
  }
  d.check();
  return d;
}
Model make(int64_t every = 3) {
  manual_seed(11);
  Model m;
  m.add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::Linear>(16, 8))
      .add(std::make_shared<nn::BatchNorm>(8, 1, 0.4))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::Linear>(8, 2));
  ModelConfig c;
  c.optimizer = "sgd";
  c.lr = 0.2;
  c.momentum = 0.9;
  c.nesterov = true;
  c.lookahead_every = every;
  c.lookahead_decay = std::pow(0.95, 5);
  c.lookahead_power = 3;
  m.configure(c).finalize({4, 4, 1});
  return m;
}
TrainOptions options(int64_t epochs) {
  TrainOptions o;
  o.epochs = epochs;
  o.data.batch_size = 8;
  o.data.seed = 1;
  o.progress = false;
  return o;
}
std::vector<std::vector<double>> params(Model& m) {
  std::vector<std::vector<double>> v;
  for (auto& [n, t] : m.network().named_parameters()) v.push_back(t->to_vector<double>());
  return v;
}
std::vector<std::vector<double>> buffers(Model& m) {
  std::vector<std::vector<double>> v;
  for (auto& [n, t] : m.network().named_buffers()) v.push_back(t->to_vector<double>());
  return v;
}
}  // namespace

// After training the parameters and the BatchNorm statistics are the slow values; 2 epochs in one
// go equal the same run stopped after epoch 1, loaded from its checkpoint and finished, bit for bit
// (the slow values are optimizer state "<param or buffer>.lookahead"; alpha's schedule runs over the
// 2 epochs).
TEST(Lookahead, ModelEndsOnTheSlowWeightsAndResumesBitIdentically) {
  const fs::path dir = fs::temp_directory_path() / ("aether_lookahead_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string ckpt = (dir / "m.aether").string();
  Model a = make();
  a.train(tiny(), options(2));
  size_t slow_slots = 0;
  const auto pa = params(a), ba = buffers(a);
  ASSERT_EQ(ba.size(), 2u);  // running_mean, running_var
  for (auto& [name, t] : a.optimizer()->named_state())
    if (name.size() > 10 && name.substr(name.size() - 10) == ".lookahead") {
      const size_t i = std::stoul(name.substr(0, name.find('.')));
      EXPECT_EQ(t->to_vector<double>(), i < pa.size() ? pa[i] : ba.at(i - pa.size())) << name;
      ++slow_slots;
    }
  EXPECT_EQ(slow_slots, pa.size() + ba.size());
  // The checkpoint names them after the buffers, and a load restores them.
  a.save(ckpt);
  std::set<std::string> saved;
  for (const auto& [name, t] : load_checkpoint(ckpt).optimizer) saved.insert(name);
  EXPECT_TRUE(saved.count("2.running_mean.lookahead") && saved.count("2.running_var.lookahead"));
  Model loaded = Model::load(ckpt);
  for (auto& [name, t] : loaded.optimizer()->named_state())
    if (name == std::to_string(pa.size()) + ".lookahead") {
      EXPECT_EQ(t->to_vector<double>(), ba[0]);
    }
  {  // the same 2-epoch run, stopped after its first epoch's checkpoint
    Model b = make();
    TrainOptions ob = options(2);
    ob.checkpoint_path = ckpt;
    ob.on_epoch = [](const EpochStats& e) {
      if (e.epoch == 0) throw std::runtime_error("stop");
    };
    EXPECT_THROW(b.train(tiny(), ob), std::runtime_error);
  }
  Model c = Model::load(ckpt);
  EXPECT_EQ(c.config().lookahead_every, 3);
  c.train(tiny(), options(2));
  EXPECT_EQ(params(c), pa);
  EXPECT_EQ(buffers(c), ba);
  // Without lookahead the same training ends elsewhere: the test sees what lookahead does.
  Model plain = make(0);
  plain.train(tiny(), options(2));
  EXPECT_NE(params(plain), pa);
  fs::remove_all(dir);
}
