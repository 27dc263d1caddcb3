#include "model/early_stopping.h"

#include <algorithm>

#include "aether/core/error.h"

namespace aether::model_internal {

EarlyStopper::EarlyStopper(const EarlyStopping& options, bool has_validation, const EarlyStoppingRun* resume)
    : o_(options), plateau_(options.monitor, options.min_delta, has_validation, "early_stopping") {
  AETHER_CHECK(o_.patience >= 0, "train", "early_stopping: patience must be >= 0, got ", o_.patience);
  if (resume != nullptr) {
    plateau_.state = resume->plateau;
    best_state_ = resume->best;
  }
}

bool EarlyStopper::update(const EpochStats& st, const nn::NamedTensors& state) {
  last_epoch_ = st.epoch;
  if (!plateau_.update(st)) return plateau_.state.wait >= std::max<int64_t>(o_.patience, 1);
  if (o_.restore_best_weights) {
    best_state_.clear();
    for (const auto& [name, t] : state) best_state_.push_back(t->detach().clone());
    realize(best_state_);  // copies now: the tensors change with the next step
  }
  return false;
}

bool EarlyStopper::restore(const nn::NamedTensors& state) {
  if (!o_.restore_best_weights || plateau_.state.best_epoch < 0 || plateau_.state.best_epoch == last_epoch_)
    return false;
  AETHER_CHECK(state.size() == best_state_.size(), "train", "early_stopping: ", state.size(),
               " tensors to restore, ", best_state_.size(), " kept");
  // (Kept copies come from a checkpoint on the CPU when the run resumed: to the model's device.)
  for (size_t i = 0; i < state.size(); ++i)
    state[i].second->assign(best_state_[i].to(state[i].second->device()));
  std::vector<Tensor> values;
  for (const auto& [name, t] : state) values.push_back(*t);
  realize(values);
  return true;
}

std::string EarlyStopper::stop_reason() const { return plateau_.not_improved_text(plateau_.state.wait); }

}  // namespace aether::model_internal
