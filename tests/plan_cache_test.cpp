// The fused executor's plan cache (backend/executor.cpp, backend/graph_signature.*): a graph with the
// structure of an earlier one reuses its schedule and kernels, re-bound to the new nodes, with the
// new run-time parameters (float constants, random seeds). Checked bit for bit against the same
// computation prepared from scratch (the cache cleared before every realize): a training loop with
// dropout and a learning rate that changes every step, constants whose equalities change between
// runs, and new random draws.
#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <vector>

#include "aether/aether.h"
#include "aether/nn/layers.h"
#include "aether/nn/module.h"
#include "aether/ops/conv.h"
#include "aether/ops/nn.h"
#include "aether/optim/optimizer.h"
#include "backend/cpu/kernels.h"
#include "core/config.h"

using namespace aether;

namespace {

struct FusionOn {
  bool was = fusion_enabled();
  FusionOn() { set_fusion(true); }
  ~FusionOn() { set_fusion(was); }
};

// Sets a switch of the configuration (core/config.h) for the lifetime of the guard.
struct ScopedSwitch {
  std::atomic<bool>& s;
  bool was;
  ScopedSwitch(std::atomic<bool>& sw, bool on) : s(sw), was(sw) { s = on; }
  ~ScopedSwitch() { s = was; }
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

std::vector<float> floats(uint32_t seed, int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = float(int((seed = seed * 1664525u + 1013904223u) >> 24) - 128) / 64.f;
  return v;
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
  if (config().plan_cache) {
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
  run(0.5, 0.5);   // one shared parameter
  run(0.5, 0.25);  // two: must not reuse the plan above
  run(0.3, 0.7);   // same structure as the last: reused, with the new values
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

// A setting the schedule depends on (AETHER_POSTOPS, AETHER_POOL_LIBRARY, ...) is part of the key:
// changed at run time, it gives a new plan, not the cached plan made under the old value.
TEST(PlanCache, SettingsTheScheduleDependsOnArePartOfTheKey) {
  FusionOn on;
  ScopedSwitch cache(config().plan_cache, true), onednn(config().onednn, true),
      postops(config().postops, true);
  plan_cache_clear();
  // x (2,6,6,4) NHWC, w (8,3,3,4) OHWI, b (8): relu(conv(x, w) + b), the bias and ReLU merged into the
  // oneDNN call as post-ops when AETHER_POSTOPS is on.
  const Tensor x = Tensor::from_vector<float>(floats(1, 2 * 6 * 6 * 4), {2, 6, 6, 4}).realize();
  const Tensor w = Tensor::from_vector<float>(floats(2, 8 * 3 * 3 * 4), {8, 3, 3, 4}).realize();
  const Tensor b = Tensor::from_vector<float>(floats(3, 8), {8}).realize();
  auto step = [&] { return (conv2d(x, w) + b).relu().to_vector<float>(); };
  const auto s0 = plan_cache_stats();
  const int64_t c0 = cpu::conv_postop_calls();
  const auto merged = step();
  const auto again = step();
  const auto s1 = plan_cache_stats();
  EXPECT_EQ(s1.misses - s0.misses, 1);
  EXPECT_EQ(s1.hits - s0.hits, 1);
  EXPECT_EQ(cpu::conv_postop_calls() - c0, 2) << "both runs: one oneDNN call with post-ops";
  config().postops = false;
  const auto apart = step();
  const auto s2 = plan_cache_stats();
  EXPECT_EQ(s2.misses - s1.misses, 1) << "AETHER_POSTOPS changed: a new plan";
  EXPECT_EQ(s2.hits, s1.hits) << "not the plan made with post-ops";
  EXPECT_EQ(cpu::conv_postop_calls() - c0, 2) << "the conv ran without post-ops";
  config().postops = true;
  const auto back = step();
  const auto s3 = plan_cache_stats();
  EXPECT_EQ(s3.hits - s2.hits, 1) << "the first plan again";
  EXPECT_EQ(cpu::conv_postop_calls() - c0, 3);
  ASSERT_EQ(apart.size(), merged.size());
  for (size_t i = 0; i < merged.size(); ++i) {
    EXPECT_EQ(again[i], merged[i]);
    EXPECT_EQ(back[i], merged[i]);
    EXPECT_NEAR(apart[i], merged[i], 1e-4f * (1 + std::abs(merged[i]))) << i;
  }

  // AETHER_POOL_LIBRARY changes the graph itself (a library op instead of a ReduceMax over windows).
  ScopedSwitch pool(config().pool_library, false);
  const Tensor p = Tensor::from_vector<float>(floats(4, 2 * 4 * 4 * 3), {2, 4, 4, 3}).realize();
  auto pooled = [&] { return max_pool2d(p * 2.0, {2, 2}).to_vector<float>(); };
  const auto windows = pooled();
  const auto s4 = plan_cache_stats();
  config().pool_library = true;
  const auto library = pooled();
  EXPECT_EQ(plan_cache_stats().misses - s4.misses, 1) << "AETHER_POOL_LIBRARY changed: a new plan";
  EXPECT_EQ(library, windows);
}
