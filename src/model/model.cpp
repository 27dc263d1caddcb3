// Model: composition, configuration and one training step (the training loop: model_train.cpp;
// evaluation and prediction: model_eval.cpp; saving and loading: model_checkpoint.cpp).
#include "aether/model/model.h"

#include <fnmatch.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <functional>
#include <map>
#include <set>

#include "aether/dist/communicator.h"
#include "aether/io/safetensors.h"
#include "aether/optim/composite.h"
#include "aether/optim/muon.h"
#include "core/config.h"
#include "data_parallel.h"
#include "io/json.h"
#include "model_impl.h"

namespace aether {

// ---- configuration <-> JSON ---------------------------------------------------------------------------
namespace model_internal {
nlohmann::json param_groups_to_json(const std::vector<ParamGroup>& groups) {
  nlohmann::json a = nlohmann::json::array();
  for (const ParamGroup& g : groups)
    a.push_back({{"match", g.match},
                 {"layer", g.layer},
                 {"lr_scale", g.lr_scale},
                 {"weight_decay", g.weight_decay},
                 {"frozen", g.frozen},
                 {"train_epochs", g.train_epochs},
                 {"schedule_over_train_epochs", g.schedule_over_train_epochs},
                 {"optimizer", g.optimizer},
                 {"momentum", g.momentum}});
  return a;
}
nlohmann::json config_to_json(const ModelConfig& c) {
  return {{"loss", c.loss},
          {"label_smoothing", c.label_smoothing},
          {"optimizer", c.optimizer},
          {"lr", c.lr},
          {"momentum", c.momentum},
          {"nesterov", c.nesterov},
          {"weight_decay", c.weight_decay},
          {"beta1", c.beta1},
          {"beta2", c.beta2},
          {"eps", c.eps},
          {"muon_ns_steps", c.muon_ns_steps},
          {"muon_normalize_weights", c.muon_normalize_weights},
          {"schedule", c.schedule},
          {"warmup_fraction", c.warmup_fraction},
          {"lr_start_factor", c.lr_start_factor},
          {"lr_end_factor", c.lr_end_factor},
          {"metrics", c.metrics},
          {"clip_grad_norm", c.clip_grad_norm},
          {"regression_precision", c.regression_precision},
          {"param_groups", param_groups_to_json(c.param_groups)},
          {"lookahead_every", c.lookahead_every},
          {"lookahead_decay", c.lookahead_decay},
          {"lookahead_power", c.lookahead_power},
          {"lookahead_start_epoch", c.lookahead_start_epoch}};
}
ModelConfig config_from_json(const nlohmann::json& j) {
  ModelConfig c;
  c.loss = j.at("loss");
  c.label_smoothing = j.at("label_smoothing");
  c.optimizer = j.at("optimizer");
  c.lr = j.at("lr");
  c.momentum = j.at("momentum");
  c.nesterov = j.at("nesterov");
  c.weight_decay = j.at("weight_decay");
  c.beta1 = j.at("beta1");
  c.beta2 = j.at("beta2");
  c.eps = j.at("eps");
  c.schedule = j.at("schedule");
  c.warmup_fraction = j.at("warmup_fraction");
  c.metrics = j.at("metrics").get<std::vector<std::string>>();
  c.clip_grad_norm = j.at("clip_grad_norm");
  c.regression_precision = j.value("regression_precision", 0.0);  // absent in files before it existed
  c.lookahead_every = j.value("lookahead_every", int64_t(0));     // likewise
  c.lookahead_decay = j.value("lookahead_decay", 0.5);
  c.lookahead_power = j.value("lookahead_power", 0.0);
  c.lookahead_start_epoch = j.value("lookahead_start_epoch", int64_t(0));
  c.lr_start_factor = j.value("lr_start_factor", 0.0);
  c.lr_end_factor = j.value("lr_end_factor", 0.0);
  c.muon_ns_steps = j.value("muon_ns_steps", int64_t(5));
  c.muon_normalize_weights = j.value("muon_normalize_weights", false);
  for (const nlohmann::json& g : j.value("param_groups", nlohmann::json::array())) {  // likewise
    ParamGroup p;
    p.match = g.at("match");
    p.layer = g.at("layer");
    p.lr_scale = g.at("lr_scale");
    p.weight_decay = g.at("weight_decay");
    p.frozen = g.at("frozen");
    p.train_epochs = g.value("train_epochs", int64_t(0));
    p.schedule_over_train_epochs = g.value("schedule_over_train_epochs", false);
    p.optimizer = g.value("optimizer", std::string());
    p.momentum = g.value("momentum", -1.0);
    c.param_groups.push_back(p);
  }
  return c;
}
bool known_optimizer(const std::string& name) {
  return name == "sgd" || name == "adam" || name == "adamw" || name == "muon";
}
void check_config(const ModelConfig& c) {
  AETHER_CHECK(c.loss == "cross_entropy" || c.loss == "categorical_cross_entropy" || c.loss == "mse" ||
                   c.loss == "binary_cross_entropy",
               "configure", "unknown loss '", c.loss,
               "' (expected cross_entropy, categorical_cross_entropy, mse or binary_cross_entropy)");
  AETHER_CHECK(known_optimizer(c.optimizer), "configure", "unknown optimizer '", c.optimizer,
               "' (expected sgd, adam, adamw or muon)");
  AETHER_CHECK(c.muon_ns_steps >= 1 && c.muon_ns_steps <= 100, "configure",
               "muon_ns_steps must be in [1, 100], got ", c.muon_ns_steps);
  AETHER_CHECK(c.schedule == "constant" || c.schedule == "one_cycle" || c.schedule == "warmup_linear" ||
                   c.schedule == "cosine" || c.schedule == "step" || c.schedule == "triangle",
               "configure", "unknown schedule '", c.schedule,
               "' (expected constant, one_cycle, warmup_linear, cosine, step or triangle)");
  AETHER_CHECK(c.lr_start_factor >= 0 && std::isfinite(c.lr_start_factor) && c.lr_end_factor >= 0 &&
                   std::isfinite(c.lr_end_factor),
               "configure", "lr_start_factor and lr_end_factor must be finite and >= 0, got ",
               c.lr_start_factor, " and ", c.lr_end_factor);
  for (const auto& m : c.metrics)
    AETHER_CHECK(m == "accuracy" || m == "top5", "configure", "unknown metric '", m,
                 "' (expected accuracy or top5)");
  AETHER_CHECK(c.lr > 0 && std::isfinite(c.lr), "configure", "learning rate must be > 0, got ", c.lr);
  AETHER_CHECK(c.label_smoothing >= 0 && c.label_smoothing < 1, "configure",
               "label_smoothing must be in [0, 1)");
  AETHER_CHECK((c.warmup_fraction > 0 || (c.warmup_fraction == 0 && c.schedule == "triangle")) &&
                   c.warmup_fraction < 1,
               "configure", "warmup_fraction must be in (0, 1) (triangle: [0, 1)), got ", c.warmup_fraction);
  AETHER_CHECK(c.momentum >= 0 && std::isfinite(c.momentum), "configure",
               "momentum must be finite and >= 0, got ", c.momentum);
  AETHER_CHECK(c.weight_decay >= 0 && std::isfinite(c.weight_decay), "configure",
               "weight_decay must be finite and >= 0, got ", c.weight_decay);
  AETHER_CHECK(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1, "configure",
               "beta1 and beta2 must be in [0, 1), got ", c.beta1, " and ", c.beta2);
  AETHER_CHECK(c.eps > 0 && std::isfinite(c.eps), "configure", "eps must be finite and > 0, got ", c.eps);
  AETHER_CHECK(c.clip_grad_norm >= 0 && std::isfinite(c.clip_grad_norm), "configure",
               "clip_grad_norm must be finite and >= 0 (0: no clipping), got ", c.clip_grad_norm);
  AETHER_CHECK(c.regression_precision >= 0 && std::isfinite(c.regression_precision), "configure",
               "regression_precision must be finite and >= 0 (0: from the targets), got ",
               c.regression_precision);
  AETHER_CHECK(c.lookahead_every >= 0, "configure", "lookahead_every must be >= 0 (0: no lookahead), got ",
               c.lookahead_every);
  AETHER_CHECK(c.lookahead_decay >= 0 && c.lookahead_decay <= 1, "configure",
               "lookahead_decay must be in [0, 1], got ", c.lookahead_decay);
  AETHER_CHECK(c.lookahead_power >= 0 && std::isfinite(c.lookahead_power), "configure",
               "lookahead_power must be finite and >= 0, got ", c.lookahead_power);
  AETHER_CHECK(c.lookahead_start_epoch >= 0, "configure", "lookahead_start_epoch must be >= 0, got ",
               c.lookahead_start_epoch);
  for (size_t k = 0; k < c.param_groups.size(); ++k) {
    const ParamGroup& g = c.param_groups[k];
    AETHER_CHECK(!g.match.empty(), "configure", "param_groups[", k,
                 "]: match is empty (\"*\" matches every name)");
    AETHER_CHECK(g.lr_scale > 0 && std::isfinite(g.lr_scale), "configure", "param_groups[", k,
                 "]: lr_scale must be finite and > 0, got ", g.lr_scale);
    AETHER_CHECK(std::isfinite(g.weight_decay), "configure", "param_groups[", k,
                 "]: weight_decay must be finite (< 0: the config's), got ", g.weight_decay);
    AETHER_CHECK(g.train_epochs >= 0, "configure", "param_groups[", k,
                 "]: train_epochs must be >= 0 (0: every epoch), got ", g.train_epochs);
    AETHER_CHECK(!(g.frozen && g.train_epochs > 0), "configure", "param_groups[", k,
                 "]: frozen and train_epochs ", g.train_epochs, " contradict each other");
    AETHER_CHECK(!g.schedule_over_train_epochs || g.train_epochs > 0, "configure", "param_groups[", k,
                 "]: schedule_over_train_epochs needs train_epochs > 0 (the epochs its schedule spans)");
    AETHER_CHECK(g.optimizer.empty() || known_optimizer(g.optimizer), "configure", "param_groups[", k,
                 "]: unknown optimizer '", g.optimizer,
                 "' (expected \"\" for the config's, sgd, adam, adamw or muon)");
    AETHER_CHECK(std::isfinite(g.momentum), "configure", "param_groups[", k,
                 "]: momentum must be finite (< 0: the config's), got ", g.momentum);
  }
}

// Every parameter of `net` with its name and the type of the layer that holds it, in
// named_parameters() order.
struct ParamInfo {
  std::string name, layer;
  Tensor* tensor;
};
void collect_params(nn::Module& m, const std::string& prefix, std::vector<ParamInfo>& out) {
  std::vector<std::string> in_children;  // names the children hold
  for (const auto& [name, child] : m.children())
    for (const auto& [n, t] : child->named_parameters(prefix.empty() ? name : prefix + "." + name))
      in_children.push_back(n);
  for (const auto& [n, t] : m.named_parameters(prefix))
    if (std::find(in_children.begin(), in_children.end(), n) == in_children.end())
      out.push_back({n, m.type_name(), t});
  for (const auto& [name, child] : m.children())
    collect_params(*child, prefix.empty() ? name : prefix + "." + name, out);
}

// "NaN", "Inf" or "-Inf": the first value of a float tensor that is not finite; "" when all are.
template <typename T>
std::string non_finite_in(const std::vector<T>& values) {
  for (T v : values)
    if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : v > 0 ? "Inf" : "-Inf";
  return "";
}
std::string non_finite(const Tensor& t) {
  if (!is_float(t.dtype()) || t.numel() == 0) return "";
  // float32 (nearly everything) is read as it is, without a copy twice its size.
  return t.dtype() == DType::float32 ? non_finite_in(t.to_vector<float>())
                                     : non_finite_in(t.to_vector<double>());
}
// The first negative value of a float tensor, or 0 when there is none (variances must be >= 0).
double first_negative(const Tensor& t) {
  if (!is_float(t.dtype())) return 0;
  for (double v : t.to_vector<double>())
    if (v < 0) return v;
  return 0;
}
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
std::vector<Tensor> take_by_name(const NamedTensors& stored, const std::vector<std::string>& names,
                                 const std::function<void(const std::string&)>& missing,
                                 const std::function<void(const std::string&)>& extra) {
  std::map<std::string, Tensor> left(stored.begin(), stored.end());
  std::vector<Tensor> out;
  for (const std::string& name : names) {
    const auto it = left.find(name);
    if (it == left.end()) missing(name);
    out.push_back(it->second);
    left.erase(it);
  }
  for (const auto& [name, t] : stored)
    if (left.count(name)) extra(name);
  return out;
}

bool non_negative_entry(const std::string& name) {
  return ends_with(name, ".running_var") || ends_with(name, ".exp_avg_sq");
}

std::string invalid_values(const std::string& name, const Tensor& t, const char* variance_note) {
  const std::string bad = non_finite(t);
  if (!bad.empty()) return bad;
  const double negative = non_negative_entry(name) ? first_negative(t) : 0;
  return negative == 0 ? "" : detail::cat("the negative value ", negative, variance_note);
}

void check_writable(const char* op, const std::string& what, const std::string& name, const Tensor& t,
                    const std::string& tail) {
  const std::string bad = invalid_values(name, t);
  AETHER_CHECK_RUNTIME(bad.empty(), op, what, " holds ", bad, tail);
}

std::vector<std::string> optimizer_slots(const ModelConfig& c, const std::string& optimizer,
                                         double momentum) {
  std::vector<std::string> s;
  if (optimizer == "sgd" || optimizer == "muon") {
    if (momentum != 0) s.push_back("momentum");
  } else {
    s = {"exp_avg", "exp_avg_sq"};
  }
  if (c.lookahead_every > 0) s.push_back("lookahead");
  return s;
}

// One optimizer of the config's hyperparameters over `params`, `optimizer` with `momentum`.
std::unique_ptr<optim::Optimizer> make_one(const ModelConfig& c, std::vector<Tensor> params,
                                           const std::string& optimizer, double momentum) {
  if (optimizer == "sgd")
    return std::make_unique<optim::SGD>(std::move(params),
                                        optim::SGDOptions{c.lr, momentum, 0, c.nesterov, c.weight_decay});
  if (optimizer == "muon")
    return std::make_unique<optim::Muon>(std::move(params),
                                         optim::MuonOptions{c.lr, momentum, c.nesterov, int(c.muon_ns_steps),
                                                            c.weight_decay, c.muon_normalize_weights});
  return std::make_unique<optim::Adam>(std::move(params),
                                       optim::AdamOptions{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay},
                                       optimizer == "adamw");
}
std::unique_ptr<optim::Optimizer> make_optimizer(const ModelConfig& c, const std::vector<Tensor>& params,
                                                 const std::vector<std::pair<std::string, double>>& rules) {
  // One part per (optimizer, momentum), in the order of their first parameter.
  std::vector<std::pair<std::string, double>> kinds;
  std::vector<std::vector<size_t>> members;
  for (size_t i = 0; i < rules.size(); ++i) {
    const size_t k = size_t(std::find(kinds.begin(), kinds.end(), rules[i]) - kinds.begin());
    if (k == kinds.size()) {
      kinds.push_back(rules[i]);
      members.emplace_back();
    }
    members[k].push_back(i);
  }
  if (kinds.size() <= 1)  // one optimizer (no parameter to train: the config's)
    return make_one(c, params, kinds.empty() ? c.optimizer : kinds[0].first,
                    kinds.empty() ? c.momentum : kinds[0].second);
  std::vector<optim::Composite::Part> parts;
  for (size_t k = 0; k < kinds.size(); ++k) {
    std::vector<Tensor> own;
    for (size_t i : members[k]) own.push_back(params[i]);
    parts.push_back({make_one(c, std::move(own), kinds[k].first, kinds[k].second), members[k]});
  }
  return std::make_unique<optim::Composite>(params, c.lr, std::move(parts));
}

}  // namespace model_internal

std::unique_ptr<optim::LRSchedule> make_schedule(const ModelConfig& c, int64_t total_steps) {
  const int64_t total = std::max<int64_t>(total_steps, 2);
  if (c.schedule == "one_cycle") return std::make_unique<optim::OneCycleLR>(c.lr, total, c.warmup_fraction);
  if (c.schedule == "warmup_linear")
    return std::make_unique<optim::WarmupLinearLR>(c.lr, int64_t(c.warmup_fraction * double(total)), total,
                                                   0.0);
  if (c.schedule == "cosine") return std::make_unique<optim::CosineLR>(c.lr, total);
  if (c.schedule == "triangle")
    return std::make_unique<optim::TriangleLR>(c.lr, total, c.warmup_fraction, c.lr_start_factor,
                                               c.lr_end_factor);
  if (c.schedule == "step")
    return std::make_unique<optim::StepLR>(c.lr, std::max<int64_t>(total / 3, 1), 0.1);
  return std::make_unique<optim::ConstantLR>(c.lr);
}

std::unique_ptr<optim::Optimizer> build_optimizer(const ModelConfig& c, std::vector<Tensor> params,
                                                  int64_t total_steps) {
  model_internal::check_config(c);
  const char* op = "build_optimizer";
  AETHER_CHECK(c.schedule == "constant" || total_steps > 0, op, "schedule '", c.schedule,
               "' needs total_steps, the number of steps it spans (got ", total_steps, ")");
  AETHER_CHECK(c.clip_grad_norm == 0, op,
               "clip_grad_norm is Model::train's; call clip_grad_norm(parameters, max_norm) before step()");
  AETHER_CHECK(c.lookahead_every == 0, op,
               "lookahead is Model::train's (its epochs decide the slow weights)");
  AETHER_CHECK(c.param_groups.empty(), op,
               "param_groups match a Model's parameter names; give each "
               "optimizer its own parameters instead");
  auto opt = model_internal::make_one(c, std::move(params), c.optimizer, c.momentum);
  if (c.schedule != "constant") opt->set_schedule(make_schedule(c, total_steps));
  return opt;
}

namespace model_internal {
// The memory layouts written to the manifest ("layouts"); a file stating other ones is rejected.
nlohmann::json layouts_json() {
  return {
      {"activations", "NHWC"}, {"conv_weight", "OHWI (O, KH, KW, C/groups)"}, {"linear_weight", "(out, in)"}};
}
std::string canonical_precision(const std::string& name, const char* op) {
  if (name == "float32" || name == "fp32") return "float32";
  if (name == "bfloat16" || name == "bf16") return "bfloat16";
  if (name == "float16" || name == "fp16") return "float16";
  throw Error(detail::cat(op, ": unknown precision '", name,
                          "'; expected float32 (fp32), bfloat16 (bf16) or float16 (fp16)"));
}
DType compute_dtype(const std::string& precision) {
  if (precision == "bfloat16") return DType::bfloat16;
  if (precision == "float16") return DType::float16;
  return DType::float32;
}

}  // namespace model_internal
using namespace model_internal;

namespace {
// categorical_cross_entropy takes probabilities (it clamps them to [eps, 1 - eps] and takes logs).
// Fed a built-in layer's unnormalised scores it trains on clamped values, learns little and says
// nothing, so that is an error. A layer defined outside the library may give probabilities itself.
// binary_cross_entropy takes logits (it applies the sigmoid itself): a model ending with Sigmoid or
// Softmax would train a sigmoid of probabilities, also silently, so that is an error too.
void check_loss_input(const nn::Sequential& net, const std::string& loss, const char* op) {
  if (loss != "categorical_cross_entropy" && loss != "binary_cross_entropy") return;
  static const std::set<std::string> passes_through = {"Flatten", "Dropout", "SpatialDropout"};
  static const std::set<std::string> scores = {"Linear",    "Conv2d",    "BatchNorm1d",     "BatchNorm2d",
                                               "LayerNorm", "ReLU",      "LeakyReLU",       "GELU",
                                               "ELU",       "SiLU",      "Softplus",        "Tanh",
                                               "MaxPool2d", "AvgPool2d", "GlobalAvgPool2d", "GlobalMaxPool2d",
                                               "Residual",  "Scale"};
  for (size_t i = net.size(); i-- > 0;) {
    const std::string type = net[i]->type_name();
    if (passes_through.count(type)) continue;
    if (const auto* inner = dynamic_cast<const nn::Sequential*>(net[i].get()))
      return check_loss_input(*inner, loss, op);
    if (loss == "binary_cross_entropy") {
      AETHER_CHECK(type != "Sigmoid" && type != "Softmax", op,
                   "the loss binary_cross_entropy takes logits and applies the sigmoid itself, but the model "
                   "ends with ",
                   type, " (layer ", i, "), which gives probabilities: remove that layer");
      return;
    }
    AETHER_CHECK(!scores.count(type), op,
                 "the loss categorical_cross_entropy takes probabilities, but the model ends with ", type,
                 " (layer ", i,
                 "), which gives unnormalised scores: end the model with a Softmax layer, or use the "
                 "cross_entropy loss (Python: SoftmaxCategoricalCrossEntropy), which takes scores");
    return;
  }
}

// What a config's param groups make of the network's parameters: each takes the first group that
// matches; frozen ones are left out of the optimizer (and of autograd). Nothing changes while it is
// made; it throws, naming `op`, for a group that matches nothing or a muon parameter of one dim.
struct TrainingPlan {
  std::vector<std::pair<Tensor*, bool>> requires_grad;  // every parameter: trained (not frozen)
  std::vector<Tensor> params;                           // the trained ones, in the optimizer's order
  std::vector<std::string> names;
  std::vector<optim::ParamOptions> options;
  std::vector<std::pair<std::string, double>> rules;  // per trained parameter: optimizer, momentum
  std::vector<std::pair<Tensor*, int64_t>> epoch_limited;
  std::vector<std::pair<size_t, int64_t>> own_schedule;
};
TrainingPlan plan_training(nn::Module& net, const ModelConfig& c, const char* op) {
  std::vector<ParamInfo> infos;
  collect_params(net, "", infos);
  TrainingPlan plan;
  std::vector<bool> used(c.param_groups.size(), false);
  for (const ParamInfo& p : infos) {
    const ParamGroup* group = nullptr;
    for (size_t k = 0; k < c.param_groups.size() && group == nullptr; ++k) {
      const ParamGroup& g = c.param_groups[k];
      if (::fnmatch(g.match.c_str(), p.name.c_str(), 0) == 0 && (g.layer.empty() || g.layer == p.layer)) {
        group = &g;
        used[k] = true;
      }
    }
    plan.requires_grad.emplace_back(p.tensor, group == nullptr || !group->frozen);
    if (group != nullptr && group->frozen) continue;
    if (group != nullptr && group->train_epochs > 0)
      plan.epoch_limited.emplace_back(p.tensor, group->train_epochs);
    if (group != nullptr && group->schedule_over_train_epochs)
      plan.own_schedule.emplace_back(plan.params.size(), group->train_epochs);
    plan.params.push_back(*p.tensor);
    plan.names.push_back(p.name);
    plan.options.push_back(group ? optim::ParamOptions{group->lr_scale, group->weight_decay}
                                 : optim::ParamOptions{});
    plan.rules.emplace_back(group && !group->optimizer.empty() ? group->optimizer : c.optimizer,
                            group && group->momentum >= 0 ? group->momentum : c.momentum);
    AETHER_CHECK(plan.rules.back().first != "muon" || p.tensor->ndim() >= 2, op, "parameter '", p.name, "' (",
                 p.layer, ", shape ", to_string(p.tensor->shape()),
                 ") is given to muon, which trains matrices and filters (2 or more dims) only; give it to "
                 "another optimizer with a ParamGroup (e.g. {.match = \"*.bias\", .optimizer = \"sgd\"})");
  }
  for (size_t k = 0; k < used.size(); ++k)
    AETHER_CHECK(used[k], op, "param_groups[", k, "] (match \"", c.param_groups[k].match, "\"",
                 c.param_groups[k].layer.empty() ? "" : ", layer \"" + c.param_groups[k].layer + "\"",
                 ") matches no parameter; the parameters are named like \"",
                 infos.empty() ? "" : infos[0].name, "\" (Model::network().named_parameters())");
  return plan;
}
}  // namespace

void Model::Impl::setup_training(const ModelConfig& c, const char* op) {
  check_loss_input(*net, c.loss, op);
  TrainingPlan plan = plan_training(*net, c, op);
  // The optimizer takes parameters that require grad: set the flags, and put them back on a throw.
  std::vector<bool> before;
  for (auto& [t, on] : plan.requires_grad) {
    before.push_back(t->requires_grad());
    t->set_requires_grad(on);
  }
  std::unique_ptr<optim::Optimizer> fresh;
  try {
    fresh = make_optimizer(c, plan.params, plan.rules);
  } catch (...) {
    for (size_t i = 0; i < before.size(); ++i) plan.requires_grad[i].first->set_requires_grad(before[i]);
    throw;
  }
  for (size_t i = 0; i < plan.options.size(); ++i) fresh->set_param_options(i, plan.options[i]);
  fresh->set_lookahead(c.lookahead_every, 1.0 - c.lookahead_decay);
  // The optimizer's state owners (checkpoints index its state by them) and the slots each has.
  std::vector<std::string> owners = plan.names;
  std::vector<std::vector<std::string>> slots;
  for (const auto& [optimizer, momentum] : plan.rules)
    slots.push_back(optimizer_slots(c, optimizer, momentum));
  if (c.lookahead_every > 0) {  // lookahead averages the floating-point buffers too (BatchNorm's statistics)
    std::vector<Tensor> buffers;
    for (auto& [name, t] : net->named_buffers())
      if (is_float(t->dtype())) {
        buffers.push_back(*t);
        owners.push_back(name);
        slots.push_back({"lookahead"});
      }
    fresh->set_lookahead_buffers(std::move(buffers));
  }
  opt = std::move(fresh);
  trained_names = std::move(plan.names);
  epoch_limited = std::move(plan.epoch_limited);
  own_schedule = std::move(plan.own_schedule);
  state_names = std::move(owners);
  state_slots = std::move(slots);
}

Model::Model() : impl_(std::make_unique<Impl>()) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model& Model::add(nn::ModulePtr layer) {
  AETHER_CHECK(!impl_->finalized, "Model::add", "the model is finalized; add layers before finalize()");
  impl_->net->add(std::move(layer));
  return *this;
}

Model& Model::configure(const ModelConfig& config) {
  impl_->require_not_training("configure");
  check_config(config);
  // A finalized model takes the new recipe whole (param groups, a fresh optimizer), as Keras'
  // compile does; before, the optimizer finalize built kept its kind, groups and frozen set.
  if (impl_->finalized) impl_->setup_training(config, "configure");
  impl_->lr_plateau = {};             // a reduction of the old recipe's learning rate ends with it
  impl_->scheduled_lr.reset();        // and so does a learning rate lr_schedule set
  impl_->early_stopping_run.reset();  // and an early-stopping run left unfinished
  impl_->config = config;
  impl_->configured = true;
  return *this;
}

Model& Model::to(Device device) {
  impl_->require_not_training("to");
  impl_->net->to(device);  // throws a clear error for a device this build lacks
  if (impl_->opt)          // the optimizer's state (momentum, Adam moments) moves with the parameters
    for (auto& [name, t] : impl_->opt->named_state())
      if (t->device() != device) *t = t->to(device);
  impl_->device = device;
  return *this;
}
Model& Model::to(const std::string& device) { return to(Device::parse(device)); }

Model& Model::set_precision(const std::string& precision) {
  impl_->require_not_training("set_precision");
  impl_->precision = model_internal::canonical_precision(precision, "set_precision");
  return *this;
}

Model& Model::finalize(const Shape& input_shape) {
  auto& m = *impl_;
  AETHER_CHECK(m.configured, "finalize", "call configure() before finalize()");
  AETHER_CHECK(m.net->size() > 0, "finalize", "the model has no layers");
  check_shape(input_shape, "finalize");
  int64_t outputs = 0;  // K of the model's (N, K)
  {  // Build the forward graph on a lazy batch of 2: shape errors surface here, nothing is computed.
    // Evaluation mode: in training mode batch norm would update its running statistics and dropout
    // would draw from the global generator (changing every later random number).
    NoGradGuard no_grad;
    nn::EvalModeGuard eval_mode(*m.net);
    Shape s = input_shape;
    s.insert(s.begin(), 2);
    const Tensor out = m.forward(Tensor::zeros(s, DType::float32, m.device));
    AETHER_CHECK(out.ndim() == 2 && out.shape()[0] == 2, "finalize",
                 "the last layer must give (N, classes), got ", to_string(out.shape()), " for a batch of 2 ",
                 to_string(s));
    outputs = out.shape()[1];
  }
  m.setup_training(m.config, "finalize");
  m.input_shape = input_shape;
  m.outputs = outputs;
  m.finalized = true;
  return *this;
}

namespace {
// Multiplies every gradient by `factor` (lazily: the product fuses into the optimizer's update).
void scale_grads(const std::vector<Tensor>& params, double factor) {
  NoGradGuard no_grad;
  for (const auto& p : params) {
    const Tensor g = p.grad();
    if (g.defined()) const_cast<Tensor&>(p).set_grad(g * factor);
  }
}
}  // namespace

Model::Step Model::Impl::record_step(const Tensor& x, const Tensor& labels, const Tensor& targets,
                                     const Tensor& sample_weight) {
  const Tensor out = forward(x);
  Step step;
  step.loss = train_loss(out, labels, targets, sample_weight);
  const double scale = scales_loss() ? loss_scale.scale : 1.0;
  (scale != 1.0 ? step.loss * scale : step.loss).backward();
  if (scale != 1.0) scale_grads(opt->params(), 1.0 / scale);
  if (config.clip_grad_norm > 0) optim::clip_grad_norm(opt->params(), config.clip_grad_norm);
  step.accuracy = metric(out.detach(), labels, targets);
  std::vector<Tensor> extra{step.loss, step.accuracy};
  for (auto& [name, t] : net->named_buffers()) extra.push_back(*t);
  step.tensors = opt->record_step(extra);
  return step;
}

bool Model::Impl::run_scaled_step(const Tensor& x, const Tensor& labels, const Tensor& targets,
                                  const Tensor& sample_weight, Tensor* loss_out, Tensor* accuracy_out) {
  const Tensor out = forward(x);
  const Tensor l = train_loss(out, labels, targets, sample_weight);
  (l * loss_scale.scale).backward();
  // NaN when any gradient holds Inf or NaN (0 * Inf is NaN), else 0: one sum per gradient.
  Tensor flag;
  std::vector<Tensor> first{l, metric(out.detach(), labels, targets)};
  {
    NoGradGuard no_grad;
    for (const auto& p : opt->params()) {
      const Tensor g = p.grad();
      if (!g.defined()) continue;
      const Tensor z = (g.cast(DType::float32) * 0.0).sum();
      flag = flag.defined() ? flag + z : z;
      first.push_back(g);
    }
  }
  if (flag.defined()) first.push_back(flag);
  for (auto& [name, t] : net->named_buffers()) first.push_back(*t);
  realize(first);
  *loss_out = first[0];
  *accuracy_out = first[1];
  const bool finite = !flag.defined() || std::isfinite(flag.item<double>());
  if (!finite) {  // skip: the gradients are dropped, nothing else changes
    opt->zero_grad();
    loss_scale.overflowed();
    return false;
  }
  scale_grads(opt->params(), 1.0 / loss_scale.scale);
  if (config.clip_grad_norm > 0) optim::clip_grad_norm(opt->params(), config.clip_grad_norm);
  realize(opt->record_step({}));
  loss_scale.clean_step();
  return true;
}

bool Model::Impl::run_data_parallel_step(dist::Communicator& comm, const Tensor& x, const Tensor& labels,
                                         const Tensor& targets, const Tensor& sample_weight, double weight,
                                         double* loss_out, double* accuracy_out) {
  const Tensor out = forward(x);
  const Tensor l = train_loss(out, labels, targets, sample_weight);
  const double scale = scales_loss() ? loss_scale.scale : 1.0;
  (scale != 1.0 ? l * scale : l).backward();
  std::vector<Tensor> first{l, metric(out.detach(), labels, targets)};
  for (auto& [name, t] : net->named_buffers()) first.push_back(*t);
  std::vector<double> metrics(2);  // the loss and the accuracy, over the global batch
  // The gradients are unscaled (float16) as they are packed for the all-reduce.
  const bool finite = average_gradients(comm, opt->params(), first, metrics, weight, weight / scale,
                                        size_t(aether::config().dist_bucket_mb.load()) << 20, &comm_wait);
  *loss_out = metrics[0];
  *accuracy_out = metrics[1];
  if (!finite && scales_loss()) {  // every rank sees the same reduced gradients: all skip together
    opt->zero_grad();
    loss_scale.overflowed();
    return false;
  }
  if (config.clip_grad_norm > 0) optim::clip_grad_norm(opt->params(), config.clip_grad_norm);
  realize(opt->record_step({}));
  if (scales_loss()) loss_scale.clean_step();
  return true;
}

std::pair<double, double> Model::train_step(dist::Communicator& comm, const Tensor& x, const Tensor& labels,
                                            double weight) {
  auto& m = *impl_;
  m.require_finalized("train_step");
  check_communicator_device(&comm, m.device, "train_step");
  AETHER_CHECK(weight > 0 && weight <= 1, "train_step",
               "weight (this rank's share of the global batch) must be in (0, 1], got ", weight);
  double loss = 0, accuracy = 0;
  m.net->train();
  m.run_data_parallel_step(comm, x, labels, Tensor(), Tensor(), weight, &loss, &accuracy);
  m.opt->zero_grad();
  ++m.steps_done;
  return {loss, accuracy};
}

Model::Step Model::record_train_step(const Tensor& x, const Tensor& labels, const Tensor& targets) {
  auto& m = *impl_;
  m.require_finalized("record_train_step");
  Step step = m.record_step(x, labels, targets);
  step.names = {"loss", "accuracy"};
  for (auto& [name, t] : m.net->named_buffers()) step.names.push_back(name);
  // The updated parameters (those with a gradient), then the state, as record_step returns them.
  const auto& params = m.opt->params();
  for (size_t i = 0; i < params.size(); ++i)
    if (params[i].grad().defined()) step.names.push_back(m.trained_names.at(i));
  for (auto& [slot, t] : m.opt->named_state()) {
    const size_t dot = slot.find('.');
    step.names.push_back(m.state_names.at(std::stoul(slot.substr(0, dot))) + slot.substr(dot));
  }
  AETHER_CHECK(step.names.size() == step.tensors.size(), "record_train_step", "named ", step.names.size(),
               " of ", step.tensors.size(), " tensors");
  return step;
}

// ---- weights ---------------------------------------------------------------------------------------
std::vector<Tensor> Model::get_weights() {
  impl_->require_finalized("get_weights");
  std::vector<Tensor> out;
  for (const auto& [name, t] : parameters_and_buffers(*impl_->net)) out.push_back(t->detach().clone());
  realize(out);
  return out;
}

namespace {
// Gives `weights` the `values` (one each, in order), every value checked first (shape,
// floating-point, finite, variances >= 0) and copied in the weight's dtype and device. Errors begin
// "<op>: <which(i, name)>".
void assign_weights(const nn::NamedTensors& weights, const std::vector<Tensor>& values, const std::string& op,
                    const std::function<std::string(size_t, const std::string&)>& which) {
  std::vector<Tensor> cast;
  for (size_t i = 0; i < values.size(); ++i) {
    const auto& [name, w] = weights[i];
    const Tensor& v = values[i];
    const std::string what = which(i, name);
    AETHER_CHECK(v.defined(), op, what, " is an undefined tensor");
    AETHER_CHECK(v.shape() == w->shape(), op, what, " has shape ", to_string(v.shape()), ", the weight has ",
                 to_string(w->shape()));
    AETHER_CHECK(is_float(v.dtype()), op, what, " is ", dtype_name(v.dtype()),
                 ", expected floating-point values");
    Tensor c = v.detach().cast(w->dtype()).to(w->device()).clone();  // its own memory
    realize({c});
    const std::string bad = invalid_values(name, c, " (a variance)");
    AETHER_CHECK(bad.empty(), op, what, " holds ", bad);
    cast.push_back(c);
  }
  std::vector<Tensor> assigned;  // everything checked: assign
  for (size_t i = 0; i < weights.size(); ++i) {
    weights[i].second->assign(cast[i]);
    assigned.push_back(*weights[i].second);
  }
  realize(assigned);
}
}  // namespace

void Model::set_weights(const std::vector<Tensor>& values) {
  auto& m = *impl_;
  m.require_finalized("set_weights");
  const nn::NamedTensors weights = parameters_and_buffers(*m.net);
  const size_t params = m.net->named_parameters().size();
  AETHER_CHECK(values.size() == weights.size(), "set_weights", "got ", values.size(),
               " values for the model's ", weights.size(), " weights (", params, " parameters, then ",
               weights.size() - params, " buffers)");
  assign_weights(weights, values, "set_weights", [](size_t i, const std::string& name) {
    return detail::cat("value ", i, " ('", name, "')");
  });
}

void Model::save_weights(const std::string& path) {
  auto& m = *impl_;
  m.require_finalized("save_weights");
  // Checked before the file is touched (save_safetensors replaces it whole), so a previous one stays.
  std::error_code ec;
  const std::string tail =
      "; not writing " + path + (std::filesystem::exists(path, ec) ? ", the previous file is kept" : "");
  NamedTensors out;
  for (const auto& [name, t] : parameters_and_buffers(*m.net)) {
    check_writable("save_weights", "'" + name + "'", name, *t, tail);
    out.emplace_back(name, t->detach());
  }
  save_safetensors(path, out, {{"format", "aether-weights"}});
}

void Model::load_weights(const std::string& path) {
  auto& m = *impl_;
  m.require_finalized("load_weights");
  const SafetensorsContents file = load_safetensors(path);
  const std::string op = "load_weights: " + path;
  const nn::NamedTensors weights = parameters_and_buffers(*m.net);
  std::vector<std::string> names;
  for (const auto& [name, w] : weights) names.push_back(name);
  const std::vector<Tensor> values = take_by_name(
      file.tensors, names,
      [&](const std::string& name) {
        AETHER_CHECK(false, op, "has no tensor '", name,
                     "' (the model's weights: its parameters, then its buffers)");
      },
      [&](const std::string& name) {
        AETHER_CHECK(false, op, "tensor '", name, "' is no weight of the model");
      });
  assign_weights(weights, values, op,
                 [](size_t, const std::string& name) { return detail::cat("tensor '", name, "'"); });
}

// ---- accessors
// ---------------------------------------------------------------------------------------------------
std::string Model::summary() {
  impl_->require_finalized("summary");
  return nn::summary(*impl_->net, [&] {
    Shape s = impl_->input_shape;
    s.insert(s.begin(), 1);
    return s;
  }());
}
nn::Sequential& Model::network() { return *impl_->net; }
optim::Optimizer* Model::optimizer() { return impl_->opt.get(); }
const ModelConfig& Model::config() const { return impl_->config; }
double Model::learning_rate() const { return impl_->base_lr(); }
int64_t Model::epochs_done() const { return impl_->epochs_done; }
void Model::request_stop(bool stop) { impl_->stop_requested = stop; }
bool Model::stop_requested() const { return impl_->stop_requested; }
bool Model::is_training() const { return impl_->training; }
std::string Model::precision() const { return impl_->precision; }
double Model::loss_scale() const { return impl_->loss_scale.scale; }
int64_t Model::skipped_steps() const { return impl_->loss_scale.skipped; }
Model& Model::set_loss_scale(double scale, int64_t growth_interval) {
  AETHER_CHECK(std::isfinite(scale) && scale > 0, "set_loss_scale", "scale must be finite and > 0, got ",
               scale);
  AETHER_CHECK(growth_interval >= 1, "set_loss_scale", "growth_interval must be >= 1, got ", growth_interval);
  impl_->loss_scale.scale = scale;
  impl_->loss_scale.growth_interval = growth_interval;
  impl_->loss_scale.clean_steps = 0;
  return *this;
}
int64_t Model::steps_done() const { return impl_->steps_done; }
const Shape& Model::input_shape() const { return impl_->input_shape; }
const std::vector<float>& Model::norm_mean() const { return impl_->mean; }
const std::vector<float>& Model::norm_std() const { return impl_->std; }
std::string Model::info() const { return impl_->info.dump(); }
void Model::set_info(const std::string& json_object) {
  nlohmann::json j = parse_json(json_object, "Model::set_info");
  AETHER_CHECK(j.is_object(), "Model::set_info", "expected a JSON object, got ", json_excerpt(j));
  impl_->info = std::move(j);
}

}  // namespace aether
