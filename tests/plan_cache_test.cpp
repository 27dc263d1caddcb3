// The fused executor's plan cache (backend/cpu/fused.cpp, backend/graph_signature.*): a graph with the
// structure of an earlier one reuses its schedule and kernels, re-bound to the new nodes, with the
// new run-time parameters (float constants, random seeds). Checked bit for bit against the same
// computation prepared from scratch (the cache cleared before every realize): a training loop with
// dropout and a learning rate that changes every step, constants whose equalities change between
// runs, and new random draws.
#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "aether/aether.h"
#include "aether/nn/layers.h"
#include "aether/nn/module.h"
#include "aether/ops/nn.h"
#include "aether/optim/optimizer.h"

using namespace aether;

namespace {

struct FusionOn {
  bool was = fusion_enabled();
  FusionOn() { set_fusion(true); }
  ~FusionOn() { set_fusion(was); }
};

// Bits of a float tensor's values, to compare runs exactly.
std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<uint64_t> out;
  for (double v : t.to_vector<double>()) {
    uint64_t b;
    std::memcpy(&b, &v, sizeof b);
    out.push_back(b);
  }
  return out;
}

// Trains a small net for `steps` steps (conv, batch norm, relu, max pool, dropout, linear; SGD
// Nesterov with weight decay; the learning rate changes every step) and returns its parameters and
// losses. `before_step` runs before every step.
std::vector<std::vector<uint64_t>> train(int steps, const std::function<void()>& before_step) {
  manual_seed(11);
  // x (8, 8, 8, 3) NHWC, labels (8)
  nn::Sequential net;
  net.add(std::make_shared<nn::Conv2d>(3, 4, 3, Conv2dOptions{.padding = 1}));
  net.add(std::make_shared<nn::BatchNorm2d>(4));
  net.add(std::make_shared<nn::ReLU>());
  net.add(std::make_shared<nn::MaxPool2d>(2));
  net.add(std::make_shared<nn::Flatten>());
  net.add(std::make_shared<nn::Dropout>(0.3));
  net.add(std::make_shared<nn::Linear>(4 * 4 * 4, 5));
  optim::SGD opt(net.parameters(), {.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 5e-4});
  const Tensor x = Tensor::randn({8, 8, 8, 3}).realize();
  const Tensor labels = Tensor::randint(0, 5, {8}, DType::int64).realize();
  std::vector<std::vector<uint64_t>> out;
  for (int i = 0; i < steps; ++i) {
    before_step();
    opt.set_lr(0.1 / (1 + i));  // a new constant every step
    net.train();
    const Tensor loss = cross_entropy(net.forward(x), labels, 0.1);
    loss.backward();
    std::vector<Tensor> extra{loss};
    for (auto& [name, t] : net.named_buffers()) extra.push_back(*t);
    opt.step(extra);
    opt.zero_grad();
    out.push_back(bits(loss));
  }
  for (const Tensor& p : net.parameters()) out.push_back(bits(p));
  for (auto& [name, t] : net.named_buffers()) out.push_back(bits(*t));
  return out;
}

}  // namespace

TEST(PlanCache, TrainingMatchesPlansPreparedFromScratch) {
  FusionOn on;
  const auto fresh = train(5, [] { plan_cache_clear(); });
  plan_cache_clear();
  const auto before = plan_cache_stats();
  const auto cached = train(5, [] {});
  const auto after = plan_cache_stats();
  const char* env = std::getenv("AETHER_PLAN_CACHE");
  if (env == nullptr || std::string(env) != "0") {
    EXPECT_GE(after.hits - before.hits, 4) << "steps 2-5 reuse the plan of step 1";
  }
  ASSERT_EQ(cached.size(), fresh.size());
  for (size_t i = 0; i < fresh.size(); ++i) EXPECT_EQ(cached[i], fresh[i]) << "value " << i;
}

TEST(PlanCache, ConstantsAreParametersAndTheirEqualitiesArePartOfTheKey) {
  FusionOn on;
  plan_cache_clear();
  // y = x * a + x * b, float64: a and b become kernel parameters, shared when equal.
  const Tensor x = Tensor::from_vector<double>({1e7, -3e7, 0.5}, {3}).realize();
  auto run = [&](double a, double b) {
    const auto got = (x * a + x * b).to_vector<double>();
    const auto xs = x.to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], xs[i] * a + xs[i] * b) << a << " " << b;
  };
  run(0.5, 0.5);              // one shared parameter
  run(0.5, 0.25);             // two: must not reuse the plan above
  run(0.3, 0.7);              // same structure as the last: reused, with the new values
  EXPECT_GE(plan_cache_stats().entries, 2);
  // Prepared from scratch, constants equal to 6 digits stay two parameters (the lowering once keyed
  // them by their 6-digit decimal form and merged them).
  plan_cache_clear();
  run(1.0000001, 1.0000002);
  plan_cache_clear();
  run(0.1, 1 - 0.9);  // 0.1 and 0.09999999999999998
}

TEST(PlanCache, RandomDrawsGetTheirNewSeeds) {
  FusionOn on;
  plan_cache_clear();
  const Tensor x = Tensor::ones({1000});
  manual_seed(3);
  const auto a1 = bits(dropout(x, 0.5, true));
  const auto a2 = bits(dropout(x, 0.5, true));  // same structure, the next draw: a new mask
  EXPECT_NE(a1, a2);
  plan_cache_clear();
  manual_seed(3);
  EXPECT_EQ(bits(dropout(x, 0.5, true)), a1);
  plan_cache_clear();
  EXPECT_EQ(bits(dropout(x, 0.5, true)), a2) << "the second draw, prepared from scratch";
}
