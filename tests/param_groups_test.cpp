// Parameter groups (ModelConfig::param_groups, optim::ParamOptions): frozen parameters keep their
// values and get no gradient; a group's learning-rate scale and weight decay apply to its
// parameters only (checked against the default update after one plain SGD step); the layer filter;
// errors naming a group that matches nothing or has a bad value; configure on a finalized model
// applies its groups and optimizer; a checkpoint of a model with groups resumes bit-identically.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "aether/aether.h"

using namespace aether;
namespace fs = std::filesystem;

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

// 0 Conv2d (weight, bias), 1 BatchNorm2d (weight, bias), 2 ReLU, 3 Flatten, 4 Linear (weight, bias).
Model make(const std::vector<ParamGroup>& groups, double momentum = 0, double weight_decay = 0) {
  manual_seed(5);
  Model m;
  m.add(std::make_shared<nn::Conv2d>(1, 3, 3, Conv2dOptions{.padding = "same"}))
      .add(std::make_shared<nn::BatchNorm2d>(3))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::Linear>(6 * 6 * 3, 2));
  ModelConfig c;
  c.optimizer = "sgd";
  c.lr = 0.1;
  c.momentum = momentum;
  c.weight_decay = weight_decay;
  c.param_groups = groups;
  m.configure(c).finalize({6, 6, 1});
  return m;
}

TrainOptions options(int64_t epochs, int64_t steps = 0) {
  TrainOptions o;
  o.epochs = epochs;
  o.data.batch_size = 8;
  o.data.seed = 2;
  o.progress = false;
  o.max_steps_per_epoch = steps;
  return o;
}

std::vector<double> values(Model& m, const std::string& name) {
  for (auto& [n, t] : m.network().named_parameters())
    if (n == name) return t->to_vector<double>();
  ADD_FAILURE() << "no parameter " << name;
  return {};
}

const std::vector<std::string> kNames = {"0.weight", "0.bias", "1.weight", "1.bias", "4.weight", "4.bias"};

}  // namespace

TEST(ParamGroups, FrozenParametersKeepTheirValuesAndGetNoGradient) {
  Model m = make({{.match = "0.*", .frozen = true}});
  const auto w0 = values(m, "0.weight"), b0 = values(m, "0.bias"), l0 = values(m, "4.weight");
  EXPECT_EQ(m.optimizer()->params().size(), 4u);  // 6 parameters, 2 frozen
  m.train(tiny(), options(2));
  EXPECT_EQ(values(m, "0.weight"), w0);
  EXPECT_EQ(values(m, "0.bias"), b0);
  EXPECT_NE(values(m, "4.weight"), l0);
  for (auto& [n, t] : m.network().named_parameters()) {
    const bool frozen = n.rfind("0.", 0) == 0;
    EXPECT_EQ(t->requires_grad(), !frozen) << n;
    if (frozen) {
      EXPECT_FALSE(t->grad().defined()) << n;
    }
  }
}

// After one plain SGD step from the same start on the same batch, a parameter moved by -lr g in the
// default model; with lr_scale s by -s lr g, with weight decay w by -lr (g + w p); the others alike.
TEST(ParamGroups, LearningRateScaleAndWeightDecayApplyToTheirGroupOnly) {
  Model base = make({});
  Model grouped = make({{.match = "*.bias", .layer = "BatchNorm2d", .lr_scale = 4},
                        {.match = "4.weight", .weight_decay = 0.5}});
  std::vector<std::vector<double>> start;
  for (const auto& n : kNames) start.push_back(values(base, n));
  base.train(tiny(), options(1, 1));
  grouped.train(tiny(), options(1, 1));
  for (size_t k = 0; k < kNames.size(); ++k) {
    SCOPED_TRACE(kNames[k]);
    const auto b = values(base, kNames[k]), g = values(grouped, kNames[k]);
    for (size_t i = 0; i < b.size(); ++i) {
      const double step = b[i] - start[k][i];  // -lr g
      double want = step;
      if (kNames[k] == "1.bias") want = 4 * step;
      if (kNames[k] == "4.weight") want = step - 0.1 * 0.5 * start[k][i];
      EXPECT_NEAR(g[i] - start[k][i], want, 1e-6 + 1e-5 * std::abs(want)) << "element " << i;
    }
  }
  // The conv's bias is a bias too, but not a BatchNorm2d's: the layer filter left it alone.
  EXPECT_EQ(values(grouped, "0.bias"), values(base, "0.bias"));
  EXPECT_NE(grouped.optimizer()->config(), base.optimizer()->config());  // names its param_options
}

TEST(ParamGroups, BadGroupsAreNamed) {
  try {
    make({{.match = "*.bias"}, {.match = "9.*"}});
    ADD_FAILURE() << "a group that matches nothing was accepted";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("param_groups[1]"), std::string::npos) << m;
    EXPECT_NE(m.find("matches no parameter"), std::string::npos) << m;
    EXPECT_NE(m.find("0.weight"), std::string::npos) << m;  // how names look
  }
  EXPECT_THROW(make({{.match = "*", .layer = "Conv3d"}}), Error);
  EXPECT_THROW(make({{.match = "*", .lr_scale = 0}}), Error);
  EXPECT_THROW(make({{.match = "", .lr_scale = 1}}), Error);
  EXPECT_THROW(make({{.match = "*", .weight_decay = NAN}}), Error);
}

// configure() on a finalized model takes the whole new recipe, as Keras' compile does: its groups,
// frozen set and optimizer (fresh). Before, the optimizer finalize built stayed: freezing every
// parameter afterwards still trained them all. A recipe that does not fit changes nothing.
TEST(ParamGroups, ConfigureAfterFinalizeTakesTheWholeRecipe) {
  Model m = make({});
  ASSERT_EQ(m.optimizer()->params().size(), 6u);
  ModelConfig c = m.config();
  c.param_groups = {{.match = "0.*", .frozen = true}};
  m.configure(c);
  EXPECT_EQ(m.optimizer()->params().size(), 4u);
  const auto w0 = values(m, "0.weight"), l0 = values(m, "4.weight");
  m.train(tiny(), options(1));
  EXPECT_EQ(values(m, "0.weight"), w0);
  EXPECT_NE(values(m, "4.weight"), l0);
  // Another optimizer: its own state slots after a step (Adam's first and second moments).
  c.param_groups.clear();
  c.optimizer = "adam";
  c.lr = 1e-3;
  m.configure(c);
  EXPECT_EQ(m.optimizer()->params().size(), 6u);
  EXPECT_TRUE(values(m, "0.weight") == w0 && m.network().named_parameters()[0].second->requires_grad());
  m.train(tiny(), options(2));
  EXPECT_NE(values(m, "0.weight"), w0);
  EXPECT_NE(m.optimizer()->config().find("\"type\":\"Adam\""), std::string::npos) << m.optimizer()->config();
  // A recipe that cannot apply is an error naming configure, and the model keeps its recipe.
  ModelConfig bad = c;
  bad.param_groups = {{.match = "0.*", .frozen = true}, {.match = "9.*"}};
  try {
    m.configure(bad);
    ADD_FAILURE() << "a group that matches nothing was accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("configure: param_groups[1]"), std::string::npos) << e.what();
  }
  bad = c;
  bad.loss = "categorical_cross_entropy";  // the model ends with Linear: scores, not probabilities
  EXPECT_THROW(m.configure(bad), Error);
  EXPECT_EQ(m.config().loss, "cross_entropy");
  EXPECT_TRUE(m.config().param_groups.empty());
  EXPECT_EQ(m.optimizer()->params().size(), 6u);
  for (auto& [n, t] : m.network().named_parameters()) EXPECT_TRUE(t->requires_grad()) << n;
}

// Groups and frozen parameters are part of the checkpoint's config: 2 epochs in one go equal 1
// epoch, save, load and 1 more, bit for bit (optimizer state included).
TEST(ParamGroups, ACheckpointWithGroupsResumesBitIdentically) {
  const fs::path dir = fs::temp_directory_path() / ("aether_param_groups_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const std::string ckpt = (dir / "m.aether").string();
  const std::vector<ParamGroup> groups = {{.match = "0.weight", .frozen = true},
                                          {.match = "*.bias", .lr_scale = 3, .weight_decay = 0}};
  Model a = make(groups, 0.9, 1e-3);
  a.train(tiny(), options(2));
  Model b = make(groups, 0.9, 1e-3);
  b.train(tiny(), options(1));
  b.save(ckpt);
  Model c = Model::load(ckpt);
  ASSERT_EQ(c.config().param_groups.size(), 2u);
  EXPECT_TRUE(c.config().param_groups[0].frozen);
  EXPECT_EQ(c.config().param_groups[1].lr_scale, 3);
  c.train(tiny(), options(2));
  for (const auto& n : kNames) EXPECT_EQ(values(a, n), values(c, n)) << n;
  auto sa = a.optimizer()->named_state(), sc = c.optimizer()->named_state();
  ASSERT_EQ(sa.size(), sc.size());
  for (size_t i = 0; i < sa.size(); ++i)
    EXPECT_EQ(sa[i].second->to_vector<double>(), sc[i].second->to_vector<double>()) << sa[i].first;
  fs::remove_all(dir);
}
