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

// Early stopping's run (Model::Impl::early_stopping_run; in the checkpoint, training_state.
// early_stopping and the "training" tensors): its options, the rule's state, the best epoch's
// parameters and buffers, and whether it ended (train() returned). A train() with the same
// options continues a run that did not end: one that train() left by an exception (an error,
// Ctrl-C, a failed rank whose job resumes from the checkpoint).
struct EarlyStoppingRun {
  EarlyStopping options;
  PlateauState plateau;
  std::vector<Tensor> best;  // parameters_and_buffers() order; empty without restore_best_weights
  bool ended = false;
};

class EarlyStopper {
 public:
  // Throws aether::Error for an unknown monitor, a negative patience or min_delta, or a val_*
  // monitor without a validation set (before an epoch is spent). `resume`: a run of these options
  // to continue (its best epoch, the epochs waited, the best weights), nullptr for a new one.
  EarlyStopper(const EarlyStopping& options, bool has_validation, const EarlyStoppingRun* resume = nullptr);
  // After epoch `st`: compares its monitored value with the best so far; on an improvement keeps a
  // copy of `state` (when restore_best_weights). True when the patience has run out.
  bool update(const EpochStats& st, const nn::NamedTensors& state);
  // Gives `state` the best epoch's values when restore_best_weights and a later epoch ran; true
  // when it did. `state` names the same tensors as in update().
  bool restore(const nn::NamedTensors& state);
  EarlyStoppingRun run(bool ended) const { return {o_, plateau_.state, best_state_, ended}; }
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
