// Optimizer bookkeeping and the SGD / Adam / AdamW updates.
#include "aether/optim/optimizer.h"

#include <cmath>
#include <nlohmann/json.hpp>

namespace aether::optim {

Optimizer::Optimizer(std::vector<Tensor> params, double lr) : params_(std::move(params)), lr_(lr) {
  AETHER_CHECK(lr >= 0 && std::isfinite(lr), "optimizer", "learning rate must be finite and >= 0, got ", lr);
  for (size_t i = 0; i < params_.size(); ++i)
    AETHER_CHECK(params_[i].defined() && params_[i].requires_grad(), "optimizer", "parameter ", i,
                 " does not require grad");
  state_.resize(params_.size());
  popts_.resize(params_.size());
  own_lr_.assign(params_.size(), -1.0);
}

void Optimizer::set_param_options(size_t i, ParamOptions o) {
  AETHER_CHECK(i < params_.size(), "optimizer", "options for parameter ", i, " but there are ",
               params_.size());
  AETHER_CHECK(o.lr_scale > 0 && std::isfinite(o.lr_scale), "optimizer", "parameter ", i,
               ": lr_scale must be finite and > 0, got ", o.lr_scale);
  AETHER_CHECK(std::isfinite(o.weight_decay), "optimizer", "parameter ", i,
               ": weight_decay must be finite, got ", o.weight_decay);
  popts_[i] = o;
}

void Optimizer::set_param_lr(size_t i, double lr) {
  AETHER_CHECK(i < params_.size(), "optimizer", "learning rate for parameter ", i, " but there are ",
               params_.size());
  AETHER_CHECK(std::isfinite(lr), "optimizer", "parameter ", i, ": learning rate must be finite, got ", lr);
  own_lr_[i] = lr;
}

void Optimizer::set_lookahead(int64_t every, double alpha) {
  AETHER_CHECK(every >= 0, "optimizer", "lookahead every ", every, " steps: must be >= 0 (0: off)");
  set_lookahead_alpha(alpha);
  la_every_ = every;
}

void Optimizer::set_lookahead_alpha(double alpha) {
  AETHER_CHECK(alpha >= 0 && alpha <= 1, "optimizer", "lookahead alpha must be in [0, 1], got ", alpha);
  la_alpha_ = alpha;
}

void Optimizer::set_lookahead_buffers(std::vector<Tensor> buffers) {
  AETHER_CHECK(steps_ == 0, "optimizer",
               "lookahead buffers must be set before the first step (this one has taken ", steps_, ")");
  for (size_t j = 0; j < buffers.size(); ++j)
    AETHER_CHECK(
        buffers[j].defined() && is_float(buffers[j].dtype()), "optimizer", "lookahead buffer ", j,
        buffers[j].defined() ? " is " + std::string(dtype_name(buffers[j].dtype())) : " is undefined",
        ", not a floating-point tensor");
  la_buffers_ = std::move(buffers);
  state_.resize(params_.size() + la_buffers_.size());
}

void Optimizer::lookahead_finish() {
  if (la_every_ == 0) return;
  NoGradGuard no_grad;
  std::vector<Tensor> touched;
  for (size_t i = 0; i < state_.size(); ++i)
    if (has_slot(i, "lookahead")) {
      Tensor t = state_owner(i);  // a handle: the parameter or buffer itself
      t.assign(slot(i, "lookahead"));
      touched.push_back(t);
    }
  realize(touched);
}

const Tensor& Optimizer::state_owner(size_t i) const {
  return i < params_.size() ? params_[i] : la_buffers_.at(i - params_.size());
}

std::string Optimizer::with_param_options(const std::string& json) const {
  nlohmann::json j = nlohmann::json::parse(json), own = nlohmann::json::array();
  if (la_every_ > 0) j["lookahead_every"] = la_every_;
  for (size_t i = 0; i < popts_.size(); ++i)
    if (!(popts_[i] == ParamOptions{})) own.push_back({i, popts_[i].lr_scale, popts_[i].weight_decay});
  if (!own.empty()) j["param_options"] = own;
  return j.dump();
}

void Optimizer::set_lr(double lr) {
  AETHER_CHECK(lr >= 0 && std::isfinite(lr), "optimizer", "learning rate must be finite and >= 0, got ", lr);
  lr_ = lr;
}

Tensor& Optimizer::slot(size_t i, const std::string& name) {
  if (host_ != nullptr) return host_->slot(host_index_[i], name);
  for (auto& [n, t] : state_[i])
    if (n == name) return t;
  const Tensor& owner = state_owner(i);
  state_[i].emplace_back(name,
                         Tensor::zeros(owner.shape(), owner.dtype(), owner.device()).realize().detach());
  return state_[i].back().second;
}

bool Optimizer::has_slot(size_t i, const std::string& name) const {
  if (host_ != nullptr) return host_->has_slot(host_index_[i], name);
  for (const auto& [n, t] : state_[i])
    if (n == name) return true;
  return false;
}

std::vector<std::pair<std::string, Tensor*>> Optimizer::named_state() {
  std::vector<std::pair<std::string, Tensor*>> out;
  for (size_t i = 0; i < state_.size(); ++i)
    for (auto& [n, t] : state_[i]) out.emplace_back(std::to_string(i) + "." + n, &t);
  return out;
}

void Optimizer::set_state(size_t i, const std::string& name, const Tensor& value) {
  AETHER_CHECK(i < state_.size(), "optimizer", "state for parameter ", i, " but there are ", params_.size(),
               " and ", la_buffers_.size(), " lookahead buffers");
  AETHER_CHECK(i < params_.size() || name == "lookahead", "optimizer", "state '", name,
               "' of lookahead buffer ", i - params_.size(), ": a buffer has only \"lookahead\"");
  const Tensor& owner = state_owner(i);
  AETHER_CHECK(value.shape() == owner.shape() && value.dtype() == owner.dtype(), "optimizer", "state '", name,
               "' of ", i < params_.size() ? "parameter " : "lookahead buffer ",
               i < params_.size() ? i : i - params_.size(), " has shape ", to_string(value.shape()), " ",
               dtype_name(value.dtype()), ", expected ", to_string(owner.shape()), " ",
               dtype_name(owner.dtype()));
  slot(i, name) = value.detach();
}

std::vector<Tensor> Optimizer::record_step(const std::vector<Tensor>& also_realize) {
  NoGradGuard no_grad;
  if (schedule_) set_lr(schedule_->lr(steps_));
  ++steps_;
  const bool la_step = lookahead_step();  // every la_every_ steps; first, the slow weights start
  std::vector<Tensor> touched = also_realize;
  for (size_t i = 0; i < params_.size(); ++i) {
    Tensor g = params_[i].grad();
    if (!g.defined()) continue;
    AETHER_CHECK(g.shape() == params_[i].shape(), "optimizer", "gradient of parameter ", i, " has shape ",
                 to_string(g.shape()), ", expected ", to_string(params_[i].shape()));
    Tensor p = params_[i].detach();
    Tensor next = update(i, p, g.cast(p.dtype()), steps_);
    if (la_step) {
      const bool first = !has_slot(i, "lookahead");
      Tensor& slow = slot(i, "lookahead");
      if (first) {
        slow = next;
      } else {
        slow = slow + (next - slow) * la_alpha_;
        next = slow;
      }
    }
    params_[i].assign(next);
    touched.push_back(params_[i]);
  }
  // The buffers: the same lookahead step from their current (lazy) values. The buffer shares its
  // slow values' node, so realizing the state realizes it.
  for (size_t j = 0; la_step && j < la_buffers_.size(); ++j) {
    const size_t i = params_.size() + j;
    const bool first = !has_slot(i, "lookahead");
    Tensor& slow = slot(i, "lookahead");
    const Tensor b = la_buffers_[j].detach();
    slow = first ? b : slow + (b - slow) * la_alpha_;
    la_buffers_[j].assign(slow);
  }
  for (auto& per_param : state_)
    for (auto& [n, t] : per_param) touched.push_back(t);
  return touched;
}

void Optimizer::step(const std::vector<Tensor>& also_realize) {
  realize(record_step(also_realize));  // one schedule for the whole update
}

void Optimizer::zero_grad() {
  for (auto& p : params_) p.zero_grad();
}

// ---- SGD ----------------------------------------------------------------------------------------------
SGD::SGD(std::vector<Tensor> params, SGDOptions o) : Optimizer(std::move(params), o.lr), o_(o) {
  AETHER_CHECK(o.momentum >= 0 && o.weight_decay >= 0, "SGD", "momentum and weight_decay must be >= 0");
  AETHER_CHECK(!o.nesterov || (o.momentum > 0 && o.dampening == 0), "SGD",
               "Nesterov momentum needs momentum > 0 and dampening 0");
}

Tensor SGD::update(size_t i, const Tensor& p, const Tensor& grad, int64_t /*t*/) {
  const double wd = weight_decay_of(i, o_.weight_decay);
  Tensor g = wd != 0 ? grad + p * wd : grad;
  if (o_.momentum != 0) {
    // The buffer starts as g on this parameter's first step with a gradient (not the optimizer's
    // first step: a parameter may get its first gradient later).
    const bool first = !has_slot(i, "momentum");
    Tensor& buf = slot(i, "momentum");
    const Tensor nb = first ? g : buf * o_.momentum + g * (1 - o_.dampening);
    buf = nb;
    g = o_.nesterov ? g + nb * o_.momentum : nb;
  }
  return p - g * lr_of(i);
}

std::string SGD::config() const {
  return with_param_options(nlohmann::json{
      {"type", "SGD"},
      {"lr", lr_},
      {"momentum", o_.momentum},
      {"dampening", o_.dampening},
      {"nesterov", o_.nesterov},
      {"weight_decay",
       o_.weight_decay}}.dump());
}

// ---- Adam / AdamW -----------------------------------------------------------------------------------------
Adam::Adam(std::vector<Tensor> params, AdamOptions o, bool decoupled)
    : Optimizer(std::move(params), o.lr), o_(o), decoupled_(decoupled) {
  AETHER_CHECK(o.beta1 >= 0 && o.beta1 < 1 && o.beta2 >= 0 && o.beta2 < 1 && o.eps > 0 && o.weight_decay >= 0,
               type_name(), "need 0 <= beta < 1, eps > 0, weight_decay >= 0");
}

Tensor Adam::update(size_t i, const Tensor& p0, const Tensor& grad, int64_t t) {
  Tensor p = p0, g = grad;
  const double wd = weight_decay_of(i, o_.weight_decay), lr = lr_of(i);
  if (wd != 0) {
    if (decoupled_)
      p = p * (1 - lr * wd);
    else
      g = g + p * wd;
  }
  Tensor& m = slot(i, "exp_avg");
  Tensor& v = slot(i, "exp_avg_sq");
  m = m * o_.beta1 + g * (1 - o_.beta1);
  v = v * o_.beta2 + g * g * (1 - o_.beta2);
  const double bc1 = 1 - std::pow(o_.beta1, double(t)), bc2 = 1 - std::pow(o_.beta2, double(t));
  return p - (m / bc1) / ((v / bc2).sqrt() + o_.eps) * lr;
}

std::string Adam::config() const {
  return with_param_options(nlohmann::json{
      {"type", type_name()},
      {"lr", lr_},
      {"beta1", o_.beta1},
      {"beta2", o_.beta2},
      {"eps", o_.eps},
      {"weight_decay",
       o_.weight_decay}}.dump());
}

// ---- clipping --------------------------------------------------------------------------------------------
Tensor clip_grad_norm(const std::vector<Tensor>& params, double max_norm) {
  AETHER_CHECK(max_norm > 0, "clip_grad_norm", "max_norm must be > 0, got ", max_norm);
  NoGradGuard no_grad;
  Tensor total;
  for (const auto& p : params) {
    const Tensor g = p.grad();
    if (!g.defined()) continue;
    const Tensor s = g.cast(DType::float32).square().sum();
    total = total.defined() ? total + s : s;
  }
  if (!total.defined()) return Tensor::scalar(0);
  const Tensor norm = total.sqrt();
  const Tensor scale = (max_norm / (norm + 1e-6)).minimum(Tensor::scalar(1.0));
  for (const auto& p : params) {
    const Tensor g = p.grad();
    if (g.defined()) const_cast<Tensor&>(p).set_grad(g * scale.cast(g.dtype()));
  }
  return norm;
}

}  // namespace aether::optim
