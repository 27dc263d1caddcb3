#include "model/early_stopping.h"

#include <algorithm>
#include <cstdio>

#include "aether/core/error.h"

namespace aether::model_internal {

namespace {
// The monitored number of an epoch (the constructor checked the name and the validation set).
double monitored(const EpochStats& st, const std::string& monitor) {
  if (monitor == "loss") return st.train_loss;
  if (monitor == "accuracy") return st.train_accuracy;
  const std::optional<double>& v = monitor == "val_loss" ? st.val_loss : st.val_accuracy;
  AETHER_CHECK(v.has_value(), "train", "early_stopping: epoch ", st.epoch + 1, " has no ", monitor);
  return *v;
}
}  // namespace

EarlyStopper::EarlyStopper(const EarlyStopping& options, bool has_validation) : o_(options) {
  const std::string& m = o_.monitor;
  AETHER_CHECK(m == "val_loss" || m == "val_accuracy" || m == "loss" || m == "accuracy", "train",
               "early_stopping: unknown monitor '", m,
               "' (expected val_loss, val_accuracy, loss or accuracy)");
  AETHER_CHECK(has_validation || m.rfind("val_", 0) != 0, "train", "early_stopping monitors ", m,
               ", which needs a validation set (TrainOptions::validation; Python: validation_data or ",
               "validation_split)");
  AETHER_CHECK(o_.patience >= 0, "train", "early_stopping: patience must be >= 0, got ", o_.patience);
  AETHER_CHECK(o_.min_delta >= 0, "train", "early_stopping: min_delta must be >= 0, got ", o_.min_delta);
  lower_is_better_ = m.size() >= 4 && m.compare(m.size() - 4, 4, "loss") == 0;
}

bool EarlyStopper::update(const EpochStats& st, const nn::NamedTensors& state) {
  const double v = monitored(st, o_.monitor);
  last_epoch_ = st.epoch;
  const bool improved =
      best_epoch_ < 0 || (lower_is_better_ ? v < best_ - o_.min_delta : v > best_ + o_.min_delta);
  if (!improved) return ++wait_ >= std::max<int64_t>(o_.patience, 1);
  best_ = v;
  best_epoch_ = st.epoch;
  wait_ = 0;
  if (o_.restore_best_weights) {
    best_state_.clear();
    for (const auto& [name, t] : state) best_state_.push_back(t->detach().clone());
    realize(best_state_);  // copies now: the tensors change with the next step
  }
  return false;
}

bool EarlyStopper::restore(const nn::NamedTensors& state) {
  if (!o_.restore_best_weights || best_epoch_ < 0 || best_epoch_ == last_epoch_) return false;
  AETHER_CHECK(state.size() == best_state_.size(), "train", "early_stopping: ", state.size(),
               " tensors to restore, ", best_state_.size(), " kept");
  for (size_t i = 0; i < state.size(); ++i) state[i].second->assign(best_state_[i]);
  std::vector<Tensor> values;
  for (const auto& [name, t] : state) values.push_back(*t);
  realize(values);
  return true;
}

std::string EarlyStopper::best_text() const {
  char buf[160];
  std::snprintf(buf, sizeof buf, "%s %.4f (epoch %lld)", o_.monitor.c_str(), best_,
                static_cast<long long>(best_epoch_ + 1));
  return buf;
}

std::string EarlyStopper::stop_reason() const {
  return o_.monitor + " has not improved on " + best_text().substr(o_.monitor.size() + 1) + " for " +
         std::to_string(wait_) + (wait_ == 1 ? " epoch" : " epochs");
}

}  // namespace aether::model_internal
