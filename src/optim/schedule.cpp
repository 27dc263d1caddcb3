// Learning-rate schedules.
#include "aether/optim/schedule.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "aether/core/error.h"
#include "io/json.h"

namespace aether::optim {
namespace {
double cos_anneal(double from, double to, double frac) {
  return to + (from - to) * (1 + std::cos(std::numbers::pi * std::clamp(frac, 0.0, 1.0))) / 2;
}
}  // namespace

StepLR::StepLR(double base, int64_t step_size, double gamma)
    : base_(base), step_size_(step_size), gamma_(gamma) {
  AETHER_CHECK(step_size > 0, "StepLR", "step_size must be > 0, got ", step_size);
}
double StepLR::lr(int64_t step) const { return base_ * std::pow(gamma_, double(step / step_size_)); }
std::string StepLR::config() const {
  return nlohmann::json{{"type", "step"}, {"base", base_}, {"step_size", step_size_}, {"gamma", gamma_}}
      .dump();
}

CosineLR::CosineLR(double base, int64_t total, double min_lr) : base_(base), total_(total), min_(min_lr) {
  AETHER_CHECK(total > 0, "CosineLR", "total_steps must be > 0, got ", total);
}
double CosineLR::lr(int64_t step) const { return cos_anneal(base_, min_, double(step) / double(total_)); }
std::string CosineLR::config() const {
  return nlohmann::json{{"type", "cosine"}, {"base", base_}, {"total", total_}, {"min", min_}}.dump();
}

WarmupLinearLR::WarmupLinearLR(double base, int64_t warmup, int64_t total, double final_lr)
    : base_(base), warmup_(warmup), total_(total), final_(final_lr) {
  AETHER_CHECK(warmup >= 0 && total > warmup, "WarmupLinearLR", "need 0 <= warmup < total, got ", warmup,
               ", ", total);
}
double WarmupLinearLR::lr(int64_t step) const {
  if (step < warmup_) return base_ * double(step + 1) / double(warmup_);
  const double frac = std::clamp(double(step - warmup_) / double(total_ - warmup_), 0.0, 1.0);
  return base_ + (final_ - base_) * frac;
}
std::string WarmupLinearLR::config() const {
  return nlohmann::json{
      {"type", "warmup_linear"}, {"base", base_}, {"warmup", warmup_}, {"total", total_}, {"final", final_}}
      .dump();
}

OneCycleLR::OneCycleLR(double max_lr, int64_t total, double pct, double div, double final_div)
    : max_(max_lr), total_(total), pct_(pct), div_(div), final_div_(final_div) {
  AETHER_CHECK(total > 1 && pct > 0 && pct < 1 && div > 0 && final_div > 0, "OneCycleLR",
               "need total > 1, 0 < pct_start < 1, positive div factors");
}
double OneCycleLR::lr(int64_t step) const {
  const double initial = max_ / div_, final_lr = initial / final_div_;
  const double up_end = pct_ * double(total_) - 1;  // torch: the peak is at step pct*total - 1
  const double s = double(step);
  if (s <= up_end) return cos_anneal(initial, max_, up_end > 0 ? s / up_end : 1.0);
  return cos_anneal(max_, final_lr, (s - up_end) / (double(total_ - 1) - up_end));
}
std::string OneCycleLR::config() const {
  return nlohmann::json{{"type", "one_cycle"}, {"max", max_},        {"total", total_},
                        {"pct_start", pct_},   {"div_factor", div_}, {"final_div_factor", final_div_}}
      .dump();
}

TriangleLR::TriangleLR(double base, int64_t total, double pct, double start, double end)
    : base_(base), total_(total), peak_(int64_t(pct * double(total))), pct_(pct), start_(start), end_(end) {
  AETHER_CHECK(total > 1 && pct >= 0 && pct < 1 && start >= 0 && end >= 0 && std::isfinite(start) &&
                   std::isfinite(end),
               "TriangleLR", "need total > 1, 0 <= peak_fraction < 1 and finite start, end >= 0; got total ",
               total, ", peak_fraction ", pct, ", start ", start, ", end ", end);
}
double TriangleLR::lr(int64_t step) const {
  const double s = double(std::min(step, total_));
  if (step < peak_) return base_ * (start_ + (1 - start_) * s / double(peak_));
  return base_ * (1 + (end_ - 1) * (s - double(peak_)) / double(total_ - peak_));
}
std::string TriangleLR::config() const {
  return nlohmann::json{{"type", "triangle"},    {"base", base_},   {"total", total_},
                        {"peak_fraction", pct_}, {"start", start_}, {"end", end_}}
      .dump();
}

std::string ConstantLR::config() const {
  return nlohmann::json{{"type", "constant"}, {"base", base_}}.dump();
}

std::unique_ptr<LRSchedule> schedule_from_config(const std::string& config_json) {
  const nlohmann::json c = parse_json(config_json, "schedule config");
  AETHER_CHECK(c.is_object() && c.contains("type") && c.at("type").is_string(), "schedule_from_config",
               "expected an object with a \"type\", got ", json_excerpt(c));
  const std::string t = c.at("type");
  try {
    if (t == "constant") return std::make_unique<ConstantLR>(c.at("base"));
    if (t == "step") return std::make_unique<StepLR>(c.at("base"), c.at("step_size"), c.at("gamma"));
    if (t == "cosine") return std::make_unique<CosineLR>(c.at("base"), c.at("total"), c.at("min"));
    if (t == "warmup_linear")
      return std::make_unique<WarmupLinearLR>(c.at("base"), c.at("warmup"), c.at("total"), c.at("final"));
    if (t == "one_cycle")
      return std::make_unique<OneCycleLR>(c.at("max"), c.at("total"), c.at("pct_start"), c.at("div_factor"),
                                          c.at("final_div_factor"));
    if (t == "triangle")
      return std::make_unique<TriangleLR>(c.at("base"), c.at("total"), c.at("peak_fraction"), c.at("start"),
                                          c.at("end"));
  } catch (const nlohmann::json::exception& e) {
    throw Error(detail::cat("schedule_from_config: bad ", text_excerpt(t), " config ", json_excerpt(c), ": ",
                            e.what()));
  }
  throw Error("schedule_from_config: unknown schedule '" + text_excerpt(t) +
              "' (expected constant, step, cosine, "
              "warmup_linear, one_cycle or triangle)");
}

}  // namespace aether::optim
