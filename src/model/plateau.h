// src/model/plateau.h - (internal) whether a number measured after each epoch keeps improving: the
// rule that early stopping (early_stopping.h) and the learning-rate reduction on a plateau
// (TrainOptions::reduce_lr_on_plateau, lr_plateau.h) share, as Keras' callbacks apply it.
#pragma once

#include <cstdint>
#include <string>

#include "aether/model/model.h"

namespace aether::model_internal {

// The monitored number of an epoch: "val_loss", "val_accuracy", "loss" or "accuracy".
double monitored(const EpochStats& st, const std::string& monitor);
bool known_monitor(const std::string& monitor);  // one of those four

// Where the rule stands: saved in the checkpoint for the learning-rate reduction.
struct PlateauState {
  double best = 0;
  int64_t best_epoch = -1;  // 0-based; -1 before the first update
  int64_t wait = 0;         // epochs since the best without improvement
};

struct Plateau {
  // Throws aether::Error (`what`: the option's name) for an unknown monitor, min_delta < 0, or a
  // val_* monitor without a validation set.
  Plateau(const std::string& monitor, double min_delta, bool has_validation, const char* what);
  // After epoch `st`: true when its value is better than the best by more than min_delta (then it
  // is the best, wait 0); else ++wait. Losses improve by falling, accuracies by rising.
  bool update(const EpochStats& st);
  // "val_loss 0.3012 (epoch 4)".
  std::string best_text() const;
  // "val_loss has not improved on 0.3012 (epoch 4) for 2 epochs" (epochs 1-based).
  std::string not_improved_text(int64_t epochs) const;

  std::string monitor;
  double min_delta;
  bool lower_is_better;
  PlateauState state;
};

}  // namespace aether::model_internal
