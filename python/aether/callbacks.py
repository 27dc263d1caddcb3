"""Callbacks of Model.train: EarlyStopping (Keras')."""

from __future__ import annotations

from typing import Any, Dict, Optional

from ._checks import integer

_MONITORS = ("val_loss", "val_accuracy", "loss", "accuracy")


class EarlyStopping:
    """Stops Model.train once `monitor` has stopped improving (Keras' EarlyStopping).

    After each epoch, the monitored number (val_loss or val_accuracy, which need validation_data
    or validation_split; loss or accuracy of the training epoch) improves when it is lower (losses)
    or higher (accuracies) than the best so far by more than `min_delta`. After `patience` epochs
    in a row without improvement (0 acts as 1, as in Keras) training stops. With
    `restore_best_weights` the model's weights and BatchNorm statistics then become the best
    epoch's, also when the last epoch ran (Keras restores only when it stops), and a `checkpoint`
    file is saved again with them. Each train() call counts from its own first epoch.

    After train(): `best_epoch` (0-based) and `best` (its value), `stopped_epoch` (the 0-based
    epoch after which training stopped, None when every epoch ran) and `restored` (whether the best
    epoch's weights replaced the last's).
    """

    def __init__(self, monitor: str = "val_loss", patience: int = 0, min_delta: float = 0.0,
                 restore_best_weights: bool = True):
        if monitor not in _MONITORS:
            raise ValueError(f"EarlyStopping: monitor must be one of {', '.join(_MONITORS)}, got {monitor!r}")
        self.monitor = monitor
        self.patience = integer(patience, "EarlyStopping: patience", 0)
        if isinstance(min_delta, bool) or not isinstance(min_delta, (int, float)) or not min_delta >= 0:
            raise ValueError(f"EarlyStopping: min_delta must be a number >= 0, got {min_delta!r}")
        self.min_delta = float(min_delta)
        self.restore_best_weights = bool(restore_best_weights)
        self.best_epoch: Optional[int] = None
        self.best: Optional[float] = None
        self.stopped_epoch: Optional[int] = None
        self.restored = False

    def _options(self) -> Dict[str, Any]:
        return {"monitor": self.monitor, "patience": self.patience, "min_delta": self.min_delta,
                "restore_best_weights": self.restore_best_weights}

    def _finish(self, result: Dict[str, Any]) -> None:
        """Records the outcome of Model.train's C++ call."""
        epochs = result["epochs"]
        best = int(result["best_epoch"])
        self.best_epoch = best if best >= 0 else None
        self.best = None if self.best_epoch is None else float(epochs[best][self.monitor])
        self.stopped_epoch = int(epochs[-1]["epoch"]) if result["stopped_early"] else None
        self.restored = bool(result["restored_best"])

    def __repr__(self) -> str:
        return (f"EarlyStopping(monitor={self.monitor!r}, patience={self.patience}, min_delta={self.min_delta}, "
                f"restore_best_weights={self.restore_best_weights})")
