// Composite: forwards each parameter's update to its part; the parts keep their state in it.
#include "aether/optim/composite.h"

#include <nlohmann/json.hpp>
#include <utility>

#include "aether/core/error.h"

namespace aether::optim {

Composite::Composite(std::vector<Tensor> params, double lr, std::vector<Part> parts)
    : Optimizer(std::move(params), lr), parts_(std::move(parts)) {
  constexpr size_t kNone = size_t(-1);
  where_.assign(params_.size(), {kNone, kNone});
  for (size_t k = 0; k < parts_.size(); ++k) {
    Part& part = parts_[k];
    AETHER_CHECK(part.optimizer != nullptr, "Composite", "part ", k, " has no optimizer");
    Optimizer& o = *part.optimizer;
    AETHER_CHECK(part.index.size() == o.params().size(), "Composite", "part ", k, " (", o.type_name(),
                 ") has ", o.params().size(), " parameters but ", part.index.size(), " indices");
    AETHER_CHECK(o.steps() == 0 && o.named_state().empty() && o.host_ == nullptr, "Composite", "part ", k,
                 " (", o.type_name(), ") has taken steps, holds state or is part of another Composite");
    for (size_t j = 0; j < part.index.size(); ++j) {
      const size_t i = part.index[j];
      AETHER_CHECK(i < params_.size(), "Composite", "part ", k, " names parameter ", i, " but there are ",
                   params_.size());
      AETHER_CHECK(where_[i].first == kNone, "Composite", "parameter ", i, " is in parts ", where_[i].first,
                   " and ", k);
      AETHER_CHECK(o.params()[j].same(params_[i]), "Composite", "part ", k, "'s parameter ", j,
                   " is not the Composite's parameter ", i);
      where_[i] = {k, j};
    }
    o.host_ = this;
    o.host_index_ = part.index;
  }
  for (size_t i = 0; i < params_.size(); ++i)
    AETHER_CHECK(where_[i].first != kNone, "Composite", "parameter ", i, " is in no part");
}

Tensor Composite::update(size_t i, const Tensor& p, const Tensor& g, int64_t t) {
  const auto [k, j] = where_[i];
  Optimizer& part = *parts_[k].optimizer;
  part.lr_ = lr_;  // the schedule's learning rate (or the parameter's own)...
  part.own_lr_[j] = own_lr_[i];
  part.popts_[j] = popts_[i];  // ...x this parameter's scale, with its weight decay
  return part.update(j, p, g, t);
}

std::string Composite::config() const {
  nlohmann::json parts = nlohmann::json::array();
  for (const Part& part : parts_) {
    nlohmann::json o = nlohmann::json::parse(part.optimizer->config());
    o.erase("lr");  // the Composite's own
    o.erase("param_options");
    parts.push_back({{"params", part.index}, {"optimizer", o}});
  }
  return with_param_options(nlohmann::json{{"type", "Composite"}, {"lr", lr_}, {"parts", parts}}.dump());
}

}  // namespace aether::optim
