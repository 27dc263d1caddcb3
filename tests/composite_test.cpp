// Tests of optim::Composite (aether/optim/composite.h): a Composite of Muon and SGD steps each
// parameter exactly as its part alone would (per-parameter learning-rate scales and weight decays,
// learning-rate changes, lookahead over all of them), names its state by its own indices, restores
// it, describes itself the same before and after steps, and rejects parts that do not cover the
// parameters once each.
#include "aether/optim/composite.h"

#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/optim/muon.h"

using namespace aether;

namespace {

std::vector<double> wave(int64_t n, double phase) {
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    v[size_t(j)] = std::sin(double(j) * 0.9 + phase) + 0.2 * std::cos(double(j) * 2.3);
  return v;
}
// Parameters of the given shapes (float64, so both sides compute the same values to rounding).
std::vector<Tensor> make_params(const std::vector<Shape>& shapes) {
  std::vector<Tensor> ps;
  for (size_t k = 0; k < shapes.size(); ++k) {
    ps.push_back(
        Tensor::from_vector<double>(wave(numel(shapes[k]), 0.3 + double(k)), shapes[k]).realize().detach());
    ps.back().set_requires_grad();
  }
  return ps;
}
const std::vector<Shape> kShapes = {{4, 3, 3, 2}, {5}, {3, 6}, {4}};  // filter, bias, matrix, bias
const optim::MuonOptions kMuon{
    .lr = 0.1, .momentum = 0.6, .nesterov = true, .ns_steps = 3, .normalize_weights = true};
const optim::SGDOptions kSgd{.lr = 0.1, .momentum = 0.85, .nesterov = true, .weight_decay = 0.01};

// Muon for parameters 0 and 2, SGD for 1 and 3, over `ps`.
std::unique_ptr<optim::Composite> composite(const std::vector<Tensor>& ps) {
  std::vector<optim::Composite::Part> parts;
  parts.push_back({std::make_unique<optim::Muon>(std::vector<Tensor>{ps[0], ps[2]}, kMuon), {0, 2}});
  parts.push_back({std::make_unique<optim::SGD>(std::vector<Tensor>{ps[1], ps[3]}, kSgd), {1, 3}});
  return std::make_unique<optim::Composite>(ps, 0.1, std::move(parts));
}

}  // namespace

// Four steps with changing learning rates, per-parameter options, per-parameter learning rates and
// lookahead every 2 steps: the Composite's parameters equal those of a Muon and an SGD that each
// train their own copies.
TEST(Composite, StepsEachParameterAsItsPartWould) {
  const std::vector<Tensor> ps = make_params(kShapes), qs = make_params(kShapes);
  auto opt = composite(ps);
  optim::Muon muon({qs[0], qs[2]}, kMuon);
  optim::SGD sgd({qs[1], qs[3]}, kSgd);
  const optim::ParamOptions scaled{.lr_scale = 0.5, .weight_decay = 0.02};
  opt->set_param_options(2, scaled);  // Muon's second parameter
  muon.set_param_options(1, scaled);
  opt->set_param_options(3, {.lr_scale = 3});  // SGD's second
  sgd.set_param_options(1, {.lr_scale = 3});
  for (optim::Optimizer* o : std::initializer_list<optim::Optimizer*>{opt.get(), &muon, &sgd})
    o->set_lookahead(2, 0.5);
  for (int t = 1; t <= 4; ++t) {
    const double lr = 0.1 * (1 - 0.2 * t);
    opt->set_lr(lr);
    muon.set_lr(lr);
    sgd.set_lr(lr);
    // Own learning rates (set_param_lr) for one parameter of each part, from step 2.
    const double own = t >= 2 ? 0.3 * (1 - 0.3 * t) : -1;
    opt->set_param_lr(1, own);  // SGD's first
    sgd.set_param_lr(0, own);
    opt->set_param_lr(2, own / 2);  // Muon's second
    muon.set_param_lr(1, own / 2);
    for (size_t k = 0; k < ps.size(); ++k) {
      const Tensor g = Tensor::from_vector<double>(wave(numel(kShapes[k]), 1.7 * t + double(k)), kShapes[k]);
      const_cast<Tensor&>(ps[k]).set_grad(g);
      const_cast<Tensor&>(qs[k]).set_grad(g);
    }
    opt->step();
    muon.step();
    sgd.step();
    for (size_t k = 0; k < ps.size(); ++k) {
      const auto got = ps[k].to_vector<double>(), want = qs[k].to_vector<double>();
      ASSERT_EQ(got.size(), want.size());
      for (size_t j = 0; j < got.size(); ++j)
        ASSERT_NEAR(got[j], want[j], 1e-12) << "parameter " << k << " step " << t << " [" << j << "]";
    }
    EXPECT_NE(ps[0].to_vector<double>(), wave(numel(kShapes[0]), 0.3)) << "Muon's parameter moved";
  }
  // The state: each parameter's momentum and slow weights, by the Composite's indices, equal to the
  // parts' own.
  std::vector<std::string> names;
  for (auto& [n, t] : opt->named_state()) names.push_back(n);
  EXPECT_EQ(names, (std::vector<std::string>{"0.momentum", "0.lookahead", "1.momentum", "1.lookahead",
                                             "2.momentum", "2.lookahead", "3.momentum", "3.lookahead"}));
  auto state_of = [](optim::Optimizer& o, const std::string& name) {
    for (auto& [n, t] : o.named_state())
      if (n == name) return t->to_vector<double>();
    ADD_FAILURE() << "no state " << name;
    return std::vector<double>{};
  };
  EXPECT_EQ(state_of(*opt, "2.momentum"), state_of(muon, "1.momentum"));
  EXPECT_EQ(state_of(*opt, "3.momentum"), state_of(sgd, "1.momentum"));
  EXPECT_TRUE(muon.named_state().size() == 4 && opt->part(0).params().size() == 2);
}

// The description names the parts and their parameters, without the parts' learning rates or
// options (the Composite's own), and does not change with steps; state restores by index.
TEST(Composite, ConfigAndStateRestore) {
  const std::vector<Tensor> ps = make_params(kShapes);
  auto opt = composite(ps);
  opt->set_param_options(1, {.lr_scale = 64});
  const std::string before = opt->config();
  const nlohmann::json j = nlohmann::json::parse(before);
  EXPECT_EQ(j.at("type"), "Composite");
  ASSERT_EQ(j.at("parts").size(), 2u);
  EXPECT_EQ(j.at("parts")[0].at("params"), nlohmann::json::array({0, 2}));
  EXPECT_EQ(j.at("parts")[0].at("optimizer").at("type"), "Muon");
  EXPECT_EQ(j.at("parts")[1].at("optimizer").at("momentum"), 0.85);
  EXPECT_FALSE(j.at("parts")[1].at("optimizer").contains("lr"));
  EXPECT_EQ(j.at("param_options"), nlohmann::json::parse("[[1, 64.0, -1.0]]"));
  for (size_t k = 0; k < ps.size(); ++k)
    const_cast<Tensor&>(ps[k]).set_grad(Tensor::ones(kShapes[k], DType::float64));
  opt->step();
  opt->set_lr(0.1);
  EXPECT_EQ(opt->config(), before);
  EXPECT_EQ(opt->type_name(), "Composite");
  // Restoring a slot by the Composite's index reaches the part's update.
  const std::vector<Tensor> qs = make_params(kShapes);
  auto again = composite(qs);
  again->set_param_options(1, {.lr_scale = 64});
  for (auto& [n, t] : opt->named_state())
    again->set_state(std::stoul(n.substr(0, n.find('.'))), n.substr(n.find('.') + 1), *t);
  for (size_t k = 0; k < ps.size(); ++k) {
    const Tensor g = Tensor::from_vector<double>(wave(numel(kShapes[k]), 0.1 * double(k)), kShapes[k]);
    const_cast<Tensor&>(ps[k]).set_grad(g);
    const_cast<Tensor&>(qs[k]).assign(ps[k].detach());
    const_cast<Tensor&>(qs[k]).set_grad(g);
  }
  opt->step();
  again->set_steps(1);
  again->step();
  for (size_t k = 0; k < ps.size(); ++k) EXPECT_EQ(qs[k].to_vector<double>(), ps[k].to_vector<double>()) << k;
}

TEST(Composite, PartsMustCoverEveryParameterOnce) {
  const std::vector<Tensor> ps = make_params(kShapes);
  auto build = [&](std::vector<std::vector<size_t>> index, std::vector<std::vector<Tensor>> tensors) {
    std::vector<optim::Composite::Part> parts;
    for (size_t k = 0; k < index.size(); ++k)
      parts.push_back({std::make_unique<optim::SGD>(tensors[k], kSgd), index[k]});
    return optim::Composite(ps, 0.1, std::move(parts));
  };
  auto message = [&](auto&& f) {
    try {
      f();
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("no error");
  };
  EXPECT_NE(message([&] {
              build({{0, 1}, {2}}, {{ps[0], ps[1]}, {ps[2]}});
            }).find("parameter 3 is in no part"),
            std::string::npos);
  EXPECT_NE(message([&] {
              build({{0, 1}, {1, 2, 3}}, {{ps[0], ps[1]}, {ps[1], ps[2], ps[3]}});
            }).find("parameter 1 is in parts 0 and 1"),
            std::string::npos);
  EXPECT_NE(message([&] {
              build({{0, 1, 2, 3}}, {{ps[0], ps[2], ps[1], ps[3]}});
            }).find("is not the Composite's parameter 1"),
            std::string::npos);
  EXPECT_NE(message([&] {
              build({{0, 1, 2, 3, 4}}, {{ps[0], ps[1], ps[2], ps[3]}});
            }).find("but 5 indices"),
            std::string::npos);
  EXPECT_NO_THROW(build({{3, 1}, {0, 2}}, {{ps[3], ps[1]}, {ps[0], ps[2]}}));
}
