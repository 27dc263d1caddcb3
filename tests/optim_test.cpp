// Tests of the optimizers and learning-rate schedules (aether/optim): three steps of SGD (plain,
// momentum with dampening, Nesterov, weight decay), Adam and AdamW against the formulas of
// optimizer.h evaluated here with plain doubles; schedule values at key steps (OneCycleLR against
// torch.optim.lr_scheduler.OneCycleLR's formulas); config round trips; gradient clipping; saving
// and restoring optimizer state; error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <numbers>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/optim/optimizer.h"
#include "aether/optim/schedule.h"

using namespace aether;

namespace {

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected aether::Error containing '" << parts.front() << "'";
  } catch (const Error& e) {
    for (const auto& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  }
}

void expect_near_rel(const std::vector<double>& got, const std::vector<double>& want, double rtol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], rtol * std::max(1.0, std::abs(want[i]))) << what << " [" << i << "]";
}

// Two parameters of 3 and 4 elements (float64 unless told): the test's flat view concatenates them.
struct Params {
  std::vector<Tensor> ts;
  explicit Params(DType dt = DType::float64) {
    ts.push_back(Tensor::from_vector<double>({0.5, -1.0, 2.0}, {3}).cast(dt).realize().detach());
    ts.push_back(Tensor::from_vector<double>({1.0, 0.25, -0.75, 3.0}, {2, 2}).cast(dt).realize().detach());
    for (auto& t : ts) t.set_requires_grad();
  }
  std::vector<double> flat() const {
    std::vector<double> out;
    for (const auto& t : ts)
      for (double v : t.to_vector<double>()) out.push_back(v);
    return out;
  }
};

// The gradient of element j at step t (1-based): deterministic, sign-changing values.
double grad_at(size_t j, int t) { return std::sin(double(j) * 1.3 + double(t)) + 0.1 * double(t) - 0.2; }

void set_grads(Params& p, int t) {
  size_t j = 0;
  for (auto& ten : p.ts) {
    std::vector<double> g(size_t(ten.numel()));
    for (auto& v : g) v = grad_at(j++, t);
    ten.set_grad(Tensor::from_vector<double>(g, ten.shape()).cast(ten.dtype()));
  }
}

// Runs 3 steps of `opt` on `p` and compares, after each, with `ref` applied to the flat values:
// ref(p, g, t) updates p (and its own state) in place.
void run_three_steps(Params& p, optim::Optimizer& opt,
                     const std::function<void(std::vector<double>&, const std::vector<double>&, int)>& ref,
                     double rtol = 1e-13) {
  std::vector<double> want = p.flat();
  for (int t = 1; t <= 3; ++t) {
    set_grads(p, t);
    std::vector<double> g(want.size());
    for (size_t j = 0; j < g.size(); ++j) g[j] = grad_at(j, t);
    opt.step();
    opt.zero_grad();
    ref(want, g, t);
    expect_near_rel(p.flat(), want, rtol, "step " + std::to_string(t));
    EXPECT_EQ(opt.steps(), t);
  }
  for (const auto& t : p.ts) EXPECT_FALSE(t.grad().defined());  // zero_grad cleared them
}

// SGD as torch.optim.SGD, on plain doubles.
struct RefSGD {
  RefSGD(double lr_, double momentum_, double dampening_, double wd_, bool nesterov_)
      : lr(lr_), momentum(momentum_), dampening(dampening_), wd(wd_), nesterov(nesterov_) {}
  double lr, momentum, dampening, wd;
  bool nesterov;
  std::vector<double> buf;
  void operator()(std::vector<double>& p, const std::vector<double>& grad, int t) {
    if (buf.empty()) buf.assign(p.size(), 0);
    for (size_t j = 0; j < p.size(); ++j) {
      double g = grad[j] + wd * p[j];
      if (momentum != 0) {
        buf[j] = t == 1 ? g : momentum * buf[j] + (1 - dampening) * g;
        g = nesterov ? g + momentum * buf[j] : buf[j];
      }
      p[j] -= lr * g;
    }
  }
};

struct RefAdam {
  RefAdam(double lr_, double b1_, double b2_, double eps_, double wd_, bool decoupled_)
      : lr(lr_), b1(b1_), b2(b2_), eps(eps_), wd(wd_), decoupled(decoupled_) {}
  double lr, b1, b2, eps, wd;
  bool decoupled;
  std::vector<double> m, v;
  void operator()(std::vector<double>& p, const std::vector<double>& grad, int t) {
    if (m.empty()) m.assign(p.size(), 0), v.assign(p.size(), 0);
    for (size_t j = 0; j < p.size(); ++j) {
      double g = grad[j];
      if (decoupled)
        p[j] *= 1 - lr * wd;
      else
        g += wd * p[j];
      m[j] = b1 * m[j] + (1 - b1) * g;
      v[j] = b2 * v[j] + (1 - b2) * g * g;
      const double mh = m[j] / (1 - std::pow(b1, t)), vh = v[j] / (1 - std::pow(b2, t));
      p[j] -= lr * mh / (std::sqrt(vh) + eps);
    }
  }
};

}  // namespace

// ---- SGD
// ----------------------------------------------------------------------------------------------------
TEST(SGD, Plain) {
  Params p;
  optim::SGD opt(p.ts, {.lr = 0.1});
  run_three_steps(p, opt, RefSGD(0.1, 0, 0, 0, false));
  EXPECT_TRUE(opt.named_state().empty());  // no momentum: no state
  // Hand values for the first element after 3 steps: p -= 0.1 * g_t.
  const double p0 = 0.5 - 0.1 * (grad_at(0, 1) + grad_at(0, 2) + grad_at(0, 3));
  EXPECT_NEAR(p.flat()[0], p0, 1e-15);
}

TEST(SGD, MomentumWithDampening) {
  Params p;
  optim::SGD opt(p.ts, {.lr = 0.05, .momentum = 0.9, .dampening = 0.3});
  run_three_steps(p, opt, RefSGD(0.05, 0.9, 0.3, 0, false));
  // Element 0 by hand: buf1 = g1; buf2 = 0.9 g1 + 0.7 g2; buf3 = 0.9 buf2 + 0.7 g3.
  const double g1 = grad_at(0, 1), g2 = grad_at(0, 2), g3 = grad_at(0, 3);
  const double b1 = g1, b2 = 0.9 * b1 + 0.7 * g2, b3 = 0.9 * b2 + 0.7 * g3;
  EXPECT_NEAR(p.flat()[0], 0.5 - 0.05 * (b1 + b2 + b3), 1e-14);
  EXPECT_NEAR(opt.named_state()[0].second->to_vector<double>()[0], b3, 1e-14);
}

TEST(SGD, Nesterov) {
  Params p;
  optim::SGD opt(p.ts, {.lr = 0.1, .momentum = 0.8, .nesterov = true});
  run_three_steps(p, opt, RefSGD(0.1, 0.8, 0, 0, true));
}

TEST(SGD, WeightDecayAndMomentum) {
  Params p;
  optim::SGD opt(p.ts, {.lr = 0.1, .momentum = 0.5, .weight_decay = 0.01});
  run_three_steps(p, opt, RefSGD(0.1, 0.5, 0, 0.01, false));
  Params q;
  optim::SGD plain(q.ts, {.lr = 0.2, .weight_decay = 0.1});
  run_three_steps(q, plain, RefSGD(0.2, 0, 0, 0.1, false));
}

TEST(SGD, Float32Parameters) {
  Params p(DType::float32);
  optim::SGD opt(p.ts, {.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 1e-3});
  run_three_steps(p, opt, RefSGD(0.1, 0.9, 0, 1e-3, true), 1e-6);
  EXPECT_EQ(p.ts[0].dtype(), DType::float32);
  EXPECT_EQ(opt.named_state()[0].second->dtype(), DType::float32);
}

TEST(SGD, LrChangesApplyToTheNextStepAndMissingGradsAreSkipped) {
  Params p;
  optim::SGD opt(p.ts, {.lr = 0.1, .momentum = 0.9, .dampening = 0.5});
  const auto before = p.flat();
  // Step 1: only parameter 0 has a gradient.
  p.ts[0].set_grad(Tensor::from_vector<double>({1, 2, 3}, {3}));
  opt.step();
  opt.zero_grad();
  auto now = p.flat();
  EXPECT_NEAR(now[0], before[0] - 0.1, 1e-15);
  for (size_t j = 3; j < 7; ++j) EXPECT_EQ(now[j], before[j]);  // untouched
  // Step 2 with lr 0.5: parameter 1 gets its first gradient; its momentum buffer starts as g
  // (torch: buf = g the first time the parameter has a gradient, no dampening).
  opt.set_lr(0.5);
  EXPECT_EQ(opt.lr(), 0.5);
  p.ts[0].set_grad(Tensor::from_vector<double>({1, 1, 1}, {3}));
  p.ts[1].set_grad(Tensor::from_vector<double>({2, 2, 2, 2}, {2, 2}));
  opt.step();
  now = p.flat();
  // param 0, element 0: buf = 0.9 * 1 + 0.5 * 1 = 1.4.
  EXPECT_NEAR(now[0], before[0] - 0.1 - 0.5 * 1.4, 1e-14);
  EXPECT_NEAR(now[3], before[3] - 0.5 * 2, 1e-14);
}

// A parameter's own learning rate (set_param_lr) replaces lr() for it alone, still x its lr_scale;
// a negative one gives it lr() again; bad indices and values are errors.
TEST(SGD, ParamLrReplacesTheScheduleForOneParameter) {
  Params p;
  optim::SGD opt(p.ts, {.lr = 0.1});
  opt.set_param_options(1, {.lr_scale = 2});
  opt.set_param_lr(1, 0.03);
  EXPECT_EQ(opt.param_lr(1), 0.03);
  EXPECT_LT(opt.param_lr(0), 0);
  const auto before = p.flat();
  p.ts[0].set_grad(Tensor::from_vector<double>({1, 2, 3}, {3}));
  p.ts[1].set_grad(Tensor::from_vector<double>({1, 1, 2, 2}, {2, 2}));
  opt.step();
  auto now = p.flat();
  EXPECT_NEAR(now[0], before[0] - 0.1 * 1, 1e-15);       // lr()
  EXPECT_NEAR(now[3], before[3] - 0.03 * 2 * 1, 1e-15);  // its own x lr_scale
  EXPECT_NEAR(now[6], before[6] - 0.03 * 2 * 2, 1e-15);
  opt.set_param_lr(1, -1);  // back on lr()
  opt.set_lr(0.2);
  opt.step();
  const auto after = p.flat();
  EXPECT_NEAR(after[3], now[3] - 0.2 * 2 * 1, 1e-15);
  EXPECT_NEAR(after[0], now[0] - 0.2 * 1, 1e-15);
  EXPECT_THROW(opt.set_param_lr(2, 0.1), Error);
  EXPECT_THROW(opt.set_param_lr(0, std::nan("")), Error);
  // Not part of the description: a run sets it before every step, as it does lr().
  opt.set_param_lr(1, 0.03);
  optim::SGD same(p.ts, {.lr = 0.2});
  same.set_param_options(1, {.lr_scale = 2});
  EXPECT_EQ(opt.config(), same.config());
}

// ---- Adam / AdamW
// ----------------------------------------------------------------------------------------------
TEST(Adam, ThreeSteps) {
  Params p;
  optim::Adam opt(p.ts, {.lr = 0.01, .beta1 = 0.8, .beta2 = 0.95, .eps = 1e-6});
  EXPECT_EQ(opt.type_name(), "Adam");
  run_three_steps(p, opt, RefAdam(0.01, 0.8, 0.95, 1e-6, 0, false));
  // First step by hand: m^ = g, v^ = g^2, so p moves by lr * g / (|g| + eps) ~ lr * sign(g).
  Params q;
  optim::Adam one(q.ts, {.lr = 0.01});
  set_grads(q, 1);
  one.step();
  const double g = grad_at(0, 1);
  EXPECT_NEAR(q.flat()[0], 0.5 - 0.01 * g / (std::abs(g) + 1e-8), 1e-15);
}

TEST(Adam, L2WeightDecay) {
  Params p;
  optim::Adam opt(p.ts, {.lr = 0.02, .weight_decay = 0.1});
  run_three_steps(p, opt, RefAdam(0.02, 0.9, 0.999, 1e-8, 0.1, false));
}

TEST(AdamW, DecoupledWeightDecay) {
  Params p;
  optim::AdamW opt(p.ts, {.lr = 0.02, .beta1 = 0.85, .weight_decay = 0.1});
  EXPECT_EQ(opt.type_name(), "AdamW");
  EXPECT_EQ(nlohmann::json::parse(opt.config()).at("type"), "AdamW");
  run_three_steps(p, opt, RefAdam(0.02, 0.85, 0.999, 1e-8, 0.1, true));
  // Decoupled differs from L2 on the same data.
  Params q;
  optim::Adam l2(q.ts, {.lr = 0.02, .beta1 = 0.85, .weight_decay = 0.1});
  run_three_steps(q, l2, RefAdam(0.02, 0.85, 0.999, 1e-8, 0.1, false));
  EXPECT_GT(std::abs(p.flat()[3] - q.flat()[3]), 1e-6);
}

// ---- state
// -----------------------------------------------------------------------------------------------------
TEST(OptimizerState, NamedStateAndRestore) {
  Params p;
  optim::Adam opt(p.ts, {.lr = 0.01, .weight_decay = 0.01});
  EXPECT_TRUE(opt.named_state().empty());
  set_grads(p, 1);
  opt.step();
  opt.zero_grad();
  std::vector<std::string> names;
  for (auto& [n, t] : opt.named_state()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.exp_avg", "0.exp_avg_sq", "1.exp_avg", "1.exp_avg_sq"}));
  // exp_avg = (1 - beta1) g after one step; exp_avg_sq = (1 - beta2) g^2 (with the L2 term).
  const auto st = opt.named_state();
  const double g0 = grad_at(0, 1) + 0.01 * 0.5;
  EXPECT_NEAR(st[0].second->to_vector<double>()[0], 0.1 * g0, 1e-15);
  EXPECT_NEAR(st[1].second->to_vector<double>()[0], 0.001 * g0 * g0, 1e-15);
  EXPECT_EQ(st[2].second->shape(), (Shape{2, 2}));

  // A second optimizer on a copy, restored from the first's state, continues identically.
  Params q;
  for (size_t i = 0; i < 2; ++i) q.ts[i].assign(p.ts[i].detach());
  realize(q.ts);
  optim::Adam opt2(q.ts, {.lr = 0.01, .weight_decay = 0.01});
  for (auto& [n, t] : opt.named_state()) {
    const size_t dot = n.find('.');
    opt2.set_state(std::stoul(n.substr(0, dot)), n.substr(dot + 1), *t);
  }
  opt2.set_steps(opt.steps());
  for (int t = 2; t <= 3; ++t) {
    set_grads(p, t);
    set_grads(q, t);
    opt.step();
    opt2.step();
    opt.zero_grad();
    opt2.zero_grad();
  }
  const auto a = p.flat(), b = q.flat();
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * sizeof(double)));
  EXPECT_EQ(opt2.steps(), 3);

  expect_error([&] { opt2.set_state(0, "exp_avg", Tensor::zeros({4}, DType::float64)); },
               {"optimizer", "exp_avg", "(4,)", "(3,)"});
  expect_error([&] { opt2.set_state(0, "exp_avg", Tensor::zeros({3}, DType::float32)); },
               {"optimizer", "float32", "float64"});
  expect_error([&] { opt2.set_state(5, "exp_avg", Tensor::zeros({3}, DType::float64)); }, {"optimizer", "5"});
}

TEST(OptimizerState, SgdMomentumStateNames) {
  Params p;
  optim::SGD opt(p.ts, {.lr = 0.1, .momentum = 0.9});
  set_grads(p, 1);
  opt.step();
  ASSERT_EQ(opt.named_state().size(), 2u);
  EXPECT_EQ(opt.named_state()[0].first, "0.momentum");
  EXPECT_EQ(opt.named_state()[1].first, "1.momentum");
  // The first buffer is the gradient itself.
  EXPECT_NEAR(opt.named_state()[1].second->to_vector<double>()[2], grad_at(5, 1), 1e-15);
  EXPECT_EQ(nlohmann::json::parse(opt.config()).at("momentum"), 0.9);
  EXPECT_EQ(nlohmann::json::parse(opt.config()).at("type"), "SGD");
}

// ---- errors
// ------------------------------------------------------------------------------------------------------
TEST(OptimizerErrors, BadOptions) {
  Params p;
  expect_error([&] { optim::SGD(p.ts, {.lr = -0.1}); }, {"learning rate", "-0.1"});
  expect_error([&] { optim::SGD(p.ts, {.lr = NAN}); }, {"learning rate"});
  expect_error([&] { optim::Adam(p.ts, {.lr = -1}); }, {"learning rate"});
  expect_error([&] { optim::SGD(p.ts, {.lr = 0.1, .nesterov = true}); }, {"SGD", "Nesterov"});
  expect_error([&] { optim::SGD(p.ts, {.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .nesterov = true}); },
               {"SGD", "Nesterov"});
  expect_error([&] { optim::SGD(p.ts, {.lr = 0.1, .momentum = -0.5}); }, {"SGD", "momentum"});
  expect_error([&] { optim::Adam(p.ts, {.beta1 = 1.0}); }, {"Adam", "beta"});
  expect_error([&] { optim::AdamW(p.ts, {.eps = 0}); }, {"AdamW", "eps"});
  optim::SGD ok(p.ts, {.lr = 0.1});
  expect_error([&] { ok.set_lr(-1); }, {"learning rate"});
  EXPECT_EQ(ok.lr(), 0.1);
  std::vector<Tensor> frozen{Tensor::zeros({2})};
  expect_error([&] { optim::SGD(frozen, {.lr = 0.1}); }, {"optimizer", "parameter 0", "grad"});
}

// ---- clipping
// ----------------------------------------------------------------------------------------------------
TEST(ClipGradNorm, TotalNormAndScaledGradients) {
  Params p(DType::float32);
  p.ts[0].set_grad(Tensor::from_vector<float>({3, 4, 0}, {3}));
  p.ts[1].set_grad(Tensor::from_vector<float>({0, 12, 0, 0}, {2, 2}));
  Tensor third = Tensor::zeros({2}).set_requires_grad();  // no gradient: ignored
  std::vector<Tensor> all{p.ts[0], p.ts[1], third};
  const Tensor norm = optim::clip_grad_norm(all, 6.5);
  EXPECT_NEAR(norm.item<double>(), 13.0, 1e-5);
  const double scale = 6.5 / (13.0 + 1e-6);
  const auto g0 = p.ts[0].grad().to_vector<double>(), g1 = p.ts[1].grad().to_vector<double>();
  expect_near_rel(g0, {3 * scale, 4 * scale, 0}, 1e-6, "g0");
  expect_near_rel(g1, {0, 12 * scale, 0, 0}, 1e-6, "g1");
  EXPECT_FALSE(third.grad().defined());
  // Below max_norm: unchanged (the scale is capped at 1).
  const Tensor n2 = optim::clip_grad_norm(all, 100);
  EXPECT_NEAR(n2.item<double>(), 6.5, 1e-5);
  expect_near_rel(p.ts[0].grad().to_vector<double>(), {3 * scale, 4 * scale, 0}, 1e-6, "unchanged");
  expect_error([&] { optim::clip_grad_norm(all, 0); }, {"clip_grad_norm", "max_norm"});
  // No gradients at all: norm 0.
  std::vector<Tensor> none{third};
  EXPECT_EQ(optim::clip_grad_norm(none, 1).item<double>(), 0.0);
}

// ---- schedules
// -----------------------------------------------------------------------------------------------------
TEST(Schedules, StepLR) {
  optim::StepLR s(0.1, 3, 0.5);
  for (int64_t k : {0, 1, 2}) EXPECT_DOUBLE_EQ(s.lr(k), 0.1);
  for (int64_t k : {3, 4, 5}) EXPECT_DOUBLE_EQ(s.lr(k), 0.05);
  EXPECT_DOUBLE_EQ(s.lr(6), 0.025);
  EXPECT_DOUBLE_EQ(s.lr(30), 0.1 * std::pow(0.5, 10));
  expect_error([] { optim::StepLR(0.1, 0); }, {"StepLR", "step_size"});
  EXPECT_DOUBLE_EQ(optim::ConstantLR(0.3).lr(1000), 0.3);
}

TEST(Schedules, CosineLR) {
  optim::CosineLR s(1.0, 10, 0.1);
  EXPECT_DOUBLE_EQ(s.lr(0), 1.0);
  EXPECT_NEAR(s.lr(5), 0.55, 1e-15);
  EXPECT_NEAR(s.lr(10), 0.1, 1e-15);
  EXPECT_NEAR(s.lr(15), 0.1, 1e-15);  // stays at min after total
  for (int64_t k = 0; k <= 10; ++k)
    EXPECT_NEAR(s.lr(k), 0.1 + 0.9 * (1 + std::cos(std::numbers::pi * double(k) / 10)) / 2, 1e-15) << k;
  expect_error([] { optim::CosineLR(0.1, 0); }, {"CosineLR"});
}

TEST(Schedules, WarmupLinearLR) {
  // base * (step + 1) / warmup during warm-up, then linear from base at `warmup` to final at total.
  optim::WarmupLinearLR s(1.0, 4, 12, 0.2);
  EXPECT_DOUBLE_EQ(s.lr(0), 0.25);
  EXPECT_DOUBLE_EQ(s.lr(1), 0.5);
  EXPECT_DOUBLE_EQ(s.lr(3), 1.0);
  EXPECT_DOUBLE_EQ(s.lr(4), 1.0);
  EXPECT_NEAR(s.lr(8), 0.6, 1e-15);
  EXPECT_NEAR(s.lr(12), 0.2, 1e-15);
  EXPECT_NEAR(s.lr(40), 0.2, 1e-15);
  for (int64_t k = 1; k < 12; ++k) EXPECT_GE(s.lr(k) - s.lr(k - 1), k < 4 ? 0.2 : -1.0) << k;
  expect_error([] { optim::WarmupLinearLR(1.0, 5, 5); }, {"WarmupLinearLR"});
}

namespace {
// torch.optim.lr_scheduler.OneCycleLR (anneal_strategy="cos", three_phase=False) get_lr():
//   phases: [end_step = pct_start * total - 1: initial -> max], [end_step = total - 1: max -> min]
//   pct = (step - start_step) / (end_step - start_step);  cos: end + (start - end) / 2 * (cos(pi pct) + 1)
double torch_one_cycle(double max_lr, int64_t total, double pct_start, double div, double final_div,
                       int64_t step) {
  const double initial = max_lr / div, min_lr = initial / final_div;
  auto anneal = [](double start, double end, double pct) {
    return end + (start - end) / 2.0 * (std::cos(std::numbers::pi * pct) + 1);
  };
  const double end1 = pct_start * double(total) - 1, end2 = double(total) - 1;
  if (double(step) <= end1) return anneal(initial, max_lr, double(step) / end1);
  return anneal(max_lr, min_lr, (double(step) - end1) / (end2 - end1));
}
}  // namespace

TEST(Schedules, OneCycleLRMatchesTorchFormulas) {
  optim::OneCycleLR s(1.0, 100, 0.3, 25, 1e4);
  EXPECT_NEAR(s.lr(0), 0.04, 1e-15);               // max / div_factor
  EXPECT_DOUBLE_EQ(s.lr(29), 1.0);                 // the peak at pct_start * total - 1
  EXPECT_NEAR(s.lr(99), 4e-6, 1e-18);              // initial / final_div_factor at total - 1
  EXPECT_NEAR(s.lr(64), (1.0 + 4e-6) / 2, 1e-15);  // half way down
  for (int64_t k = 0; k < 100; ++k)
    EXPECT_NEAR(s.lr(k), torch_one_cycle(1.0, 100, 0.3, 25, 1e4, k), 1e-15) << k;
  // A peak between steps (pct_start * total = 2.5) and other factors.
  optim::OneCycleLR t(0.2, 10, 0.25, 10, 100);
  for (int64_t k = 0; k < 10; ++k)
    EXPECT_NEAR(t.lr(k), torch_one_cycle(0.2, 10, 0.25, 10, 100, k), 1e-15) << k;
  EXPECT_NEAR(t.lr(0), 0.02, 1e-15);
  EXPECT_NEAR(t.lr(9), 0.0002, 1e-17);
  // Monotone up to the peak, then down.
  for (int64_t k = 1; k < 100; ++k) {
    if (k <= 29) {
      EXPECT_GT(s.lr(k), s.lr(k - 1)) << k;
    } else {
      EXPECT_LT(s.lr(k), s.lr(k - 1)) << k;
    }
  }
  expect_error([] { optim::OneCycleLR(1.0, 100, 1.5); }, {"OneCycleLR", "pct_start"});
}

TEST(Schedules, ConfigRoundTrip) {
  std::vector<std::unique_ptr<optim::LRSchedule>> all;
  all.push_back(std::make_unique<optim::ConstantLR>(0.3));
  all.push_back(std::make_unique<optim::StepLR>(0.1, 7, 0.3));
  all.push_back(std::make_unique<optim::CosineLR>(0.5, 40, 0.01));
  all.push_back(std::make_unique<optim::WarmupLinearLR>(0.5, 5, 40, 0.05));
  all.push_back(std::make_unique<optim::OneCycleLR>(0.4, 40, 0.25, 20, 1e3));
  for (const auto& s : all) {
    const std::string c = s->config();
    const auto back = optim::schedule_from_config(c);
    EXPECT_EQ(back->config(), c);
    for (int64_t k = 0; k <= 45; ++k) EXPECT_EQ(back->lr(k), s->lr(k)) << c << " step " << k;
  }
  expect_error([] { optim::schedule_from_config(R"({"type": "wiggly"})"); },
               {"schedule_from_config", "wiggly"});
  expect_error([] { optim::schedule_from_config(R"({"type": "step", "base": 0.1})"); },
               {"schedule_from_config", "step"});
  expect_error([] { optim::schedule_from_config("[]"); }, {"schedule_from_config"});
  expect_error([] { optim::schedule_from_config("{\"type\""); }, {"schedule config"});
}
