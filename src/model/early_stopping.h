// src/model/early_stopping.h - (internal) Model::train's early stopping (TrainOptions::
// early_stopping, Keras' EarlyStopping): the plateau rule (plateau.h) after each epoch, a copy of
// the best epoch's parameters and buffers, and their restoration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aether/graph/tensor.h"
#include "aether/model/model.h"
#include "aether/nn/module.h"
#include "model/plateau.h"

namespace aether::model_internal {

class EarlyStopper {
 public:
  // Throws aether::Error for an unknown monitor, a negative patience or min_delta, or a val_*
  // monitor without a validation set (before an epoch is spent).
  EarlyStopper(const EarlyStopping& options, bool has_validation);
  // After epoch `st`: compares its monitored value with the best so far; on an improvement keeps a
  // copy of `state` (when restore_best_weights). True when the patience has run out.
  bool update(const EpochStats& st, const nn::NamedTensors& state);
  // Gives `state` the best epoch's values when restore_best_weights and a later epoch ran; true
  // when it did. `state` names the same tensors as in update().
  bool restore(const nn::NamedTensors& state);
  int64_t best_epoch() const { return plateau_.state.best_epoch; }  // -1 before the first update
  double best() const { return plateau_.state.best; }               // its monitored number
  // "val_loss has not improved on 0.3012 (epoch 4) for 2 epochs" (epochs 1-based).
  std::string stop_reason() const;
  // "val_loss 0.3012 (epoch 4)".
  std::string best_text() const { return plateau_.best_text(); }

 private:
  EarlyStopping o_;
  Plateau plateau_;
  int64_t last_epoch_ = -1;
  std::vector<Tensor> best_state_;  // copies of `state` after the best epoch, in its order
};

}  // namespace aether::model_internal
