// Lookahead (optim::Optimizer::set_lookahead; ModelConfig::lookahead_*): slow weights against values
// computed by hand, the model's schedule of alpha and its final slow weights, and a checkpoint that
// resumes bit-identically with the slow weights in the optimizer state.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <vector>

#include "aether/aether.h"

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
}  // namespace

// After training the parameters are the slow weights; 2 epochs in one go equal the same run stopped
// after epoch 1, loaded from its checkpoint and finished, bit for bit (the slow weights are optimizer
// state "<param>.lookahead"; alpha's schedule runs over the 2 epochs).
TEST(Lookahead, ModelEndsOnTheSlowWeightsAndResumesBitIdentically) {
  const fs::path dir = fs::temp_directory_path() / ("aether_lookahead_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string ckpt = (dir / "m.aether").string();
  Model a = make();
  a.train(tiny(), options(2));
  size_t slow_slots = 0;
  const auto pa = params(a);
  for (auto& [name, t] : a.optimizer()->named_state())
    if (name.size() > 10 && name.substr(name.size() - 10) == ".lookahead") {
      const size_t i = std::stoul(name.substr(0, name.find('.')));
      EXPECT_EQ(t->to_vector<double>(), pa[i]) << name;
      ++slow_slots;
    }
  EXPECT_EQ(slow_slots, pa.size());
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
  // Without lookahead the same training ends elsewhere: the test sees what lookahead does.
  Model plain = make(0);
  plain.train(tiny(), options(2));
  EXPECT_NE(params(plain), pa);
  fs::remove_all(dir);
}
