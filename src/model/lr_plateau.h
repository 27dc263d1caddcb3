// src/model/lr_plateau.h - (internal) Model::train's learning-rate reduction on a plateau
// (TrainOptions::reduce_lr_on_plateau, Keras' ReduceLROnPlateau): the plateau rule (plateau.h) after
// each epoch, a cooldown, and the factor every step's learning rate is multiplied by.
#pragma once

#include <cstdint>
#include <string>

#include "aether/model/model.h"
#include "model/plateau.h"

namespace aether::model_internal {

// Training state (Model::Impl, the checkpoint's training_state.lr_plateau).
struct LrPlateauState {
  double factor = 1;     // applied so far, in (0, 1]
  int64_t cooldown = 0;  // epochs left in which no epoch counts as one without improvement
  PlateauState plateau;
};

class LrReducer {
 public:
  // Throws aether::Error for options out of range (naming them) or a val_* monitor without a
  // validation set. `base_lr`: ModelConfig::lr, which min_lr bounds (> 0).
  LrReducer(const ReduceLrOnPlateau& options, bool has_validation, double base_lr,
            const LrPlateauState& state);
  // After epoch `st`: true when it reduced the factor (Keras' order: a cooldown epoch counts down
  // and waits for nothing; an improvement resets the wait; `patience` epochs without one reduce).
  bool update(const EpochStats& st);
  LrPlateauState state() const { return {factor_, cooldown_, plateau_.state}; }
  // "val_loss has not improved on 0.3012 (epoch 4) for 2 epochs: learning rate x0.1 (factor 0.01)".
  std::string reduced_text() const;

 private:
  ReduceLrOnPlateau o_;
  double base_lr_;
  Plateau plateau_;  // the rule and its PlateauState
  double factor_;
  int64_t cooldown_;
  int64_t waited_ = 0;  // the wait that led to the last reduction
};

}  // namespace aether::model_internal
