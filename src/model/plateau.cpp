#include "model/plateau.h"

#include <cstdio>

#include "aether/core/error.h"

namespace aether::model_internal {

double monitored(const EpochStats& st, const std::string& monitor) {
  if (monitor == "loss") return st.train_loss;
  if (monitor == "accuracy") return st.train_accuracy;
  const std::optional<double>& v = monitor == "val_loss" ? st.val_loss : st.val_accuracy;
  AETHER_CHECK(v.has_value(), "train", "epoch ", st.epoch + 1, " has no ", monitor);
  return *v;
}

bool known_monitor(const std::string& m) {
  return m == "val_loss" || m == "val_accuracy" || m == "loss" || m == "accuracy";
}

Plateau::Plateau(const std::string& m, double delta, bool has_validation, const char* what)
    : monitor(m), min_delta(delta) {
  AETHER_CHECK(known_monitor(m), "train", what, ": unknown monitor '", m,
               "' (expected val_loss, val_accuracy, loss or accuracy)");
  AETHER_CHECK(has_validation || m.rfind("val_", 0) != 0, "train", what, " monitors ", m,
               ", which needs a validation set (TrainOptions::validation; Python: validation_data or ",
               "validation_split)");
  AETHER_CHECK(min_delta >= 0, "train", what, ": min_delta must be >= 0, got ", min_delta);
  lower_is_better = m == "loss" || m == "val_loss";
}

bool Plateau::update(const EpochStats& st) {
  const double v = monitored(st, monitor);
  PlateauState& s = state;
  const bool improved =
      s.best_epoch < 0 || (lower_is_better ? v < s.best - min_delta : v > s.best + min_delta);
  if (!improved) {
    ++s.wait;
    return false;
  }
  s = {v, st.epoch, 0};
  return true;
}

namespace {
std::string value_at_epoch(const PlateauState& s) {  // "0.3012 (epoch 4)"
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.4f (epoch %lld)", s.best, static_cast<long long>(s.best_epoch + 1));
  return buf;
}
}  // namespace

std::string Plateau::best_text() const { return monitor + " " + value_at_epoch(state); }

std::string Plateau::not_improved_text(int64_t epochs) const {
  return monitor + " has not improved on " + value_at_epoch(state) + " for " + std::to_string(epochs) +
         (epochs == 1 ? " epoch" : " epochs");
}

}  // namespace aether::model_internal
