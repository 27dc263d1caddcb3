#include "model/lr_plateau.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "aether/core/error.h"

namespace aether::model_internal {

LrReducer::LrReducer(const ReduceLrOnPlateau& options, bool has_validation, double base_lr,
                     const LrPlateauState& state)
    : o_(options),
      base_lr_(base_lr),
      plateau_(options.monitor, options.min_delta, has_validation, "reduce_lr_on_plateau"),
      factor_(state.factor),
      cooldown_(state.cooldown) {
  const char* what = "reduce_lr_on_plateau";
  AETHER_CHECK(o_.factor > 0 && o_.factor < 1, "train", what, ": factor must be in (0, 1), got ", o_.factor);
  AETHER_CHECK(o_.patience >= 0, "train", what, ": patience must be >= 0, got ", o_.patience);
  AETHER_CHECK(o_.cooldown >= 0, "train", what, ": cooldown must be >= 0, got ", o_.cooldown);
  AETHER_CHECK(std::isfinite(o_.min_lr) && o_.min_lr >= 0, "train", what, ": min_lr must be >= 0, got ",
               o_.min_lr);
  AETHER_CHECK(base_lr > 0, "train", what, ": needs a learning rate > 0, the model's is ", base_lr);
  plateau_.state = state.plateau;
}

bool LrReducer::update(const EpochStats& st) {
  PlateauState& p = plateau_.state;
  if (cooldown_ > 0) {
    --cooldown_;
    p.wait = 0;
  }
  bool reduced = false;
  if (!plateau_.update(st)) {
    if (cooldown_ > 0) {
      p.wait = 0;  // still cooling down: not counted
    } else if (p.wait >= std::max<int64_t>(o_.patience, 1) && base_lr_ * factor_ > o_.min_lr) {
      factor_ = std::max(factor_ * o_.factor, o_.min_lr / base_lr_);
      cooldown_ = o_.cooldown;
      waited_ = p.wait;
      p.wait = 0;
      reduced = true;
    }
  }
  return reduced;
}

std::string LrReducer::reduced_text() const {
  char buf[96];
  std::snprintf(buf, sizeof buf, ": learning rate x%g (factor %g, lr %g)", o_.factor, factor_,
                base_lr_ * factor_);
  return plateau_.not_improved_text(waited_) + buf;
}

}  // namespace aether::model_internal
