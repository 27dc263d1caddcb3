"""Callbacks of Model.train: EarlyStopping and ReduceLROnPlateau (Keras')."""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional

from ._checks import integer

_MONITORS = ("val_loss", "val_accuracy", "loss", "accuracy")


def _monitor(monitor: str, what: str) -> str:
    if monitor not in _MONITORS:
        raise ValueError(f"{what}: monitor must be one of {', '.join(_MONITORS)}, got {monitor!r}")
    return monitor


def _number(v: Any, what: str, ok: bool, expected: str) -> float:
    """v as a float, if it is a real number (not bool) and `ok` holds for it."""
    if isinstance(v, bool) or not isinstance(v, (int, float)) or not math.isfinite(v) or not ok:
        raise ValueError(f"{what} must be {expected}, got {v!r}")
    return float(v)


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
        self.monitor = _monitor(monitor, "EarlyStopping")
        self.patience = integer(patience, "EarlyStopping: patience", 0)
        self.min_delta = _number(min_delta, "EarlyStopping: min_delta", min_delta >= 0, "a number >= 0")
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


class ReduceLROnPlateau:
    """Multiplies the learning rate by `factor` once `monitor` has stopped improving (Keras'
    ReduceLROnPlateau).

    After `patience` epochs in a row without an improvement (EarlyStopping's rule: lower losses,
    higher accuracies, by more than `min_delta`; 0 acts as 1) the factor is applied, then not again
    for `cooldown` epochs; the learning rate never falls below `min_lr`. Every step's learning rate
    is the optimizer's schedule times the factor so far; the factor and the rule's state are saved
    in checkpoints (a resumed run continues as an uninterrupted one) and kept by later train() calls
    until configure() sets a new recipe. After train(): `lrs`, the learning rate at the end of each
    epoch (history["lr"]), and `reductions`, the 0-based epochs after which it was reduced.
    """

    def __init__(self, monitor: str = "val_loss", factor: float = 0.1, patience: int = 10,
                 min_delta: float = 1e-4, cooldown: int = 0, min_lr: float = 0.0):
        self.monitor = _monitor(monitor, "ReduceLROnPlateau")
        self.factor = _number(factor, "ReduceLROnPlateau: factor", 0 < factor < 1, "a number in (0, 1)")
        self.patience = integer(patience, "ReduceLROnPlateau: patience", 0)
        self.min_delta = _number(min_delta, "ReduceLROnPlateau: min_delta", min_delta >= 0, "a number >= 0")
        self.cooldown = integer(cooldown, "ReduceLROnPlateau: cooldown", 0)
        self.min_lr = _number(min_lr, "ReduceLROnPlateau: min_lr", min_lr >= 0, "a number >= 0")
        self.lrs: List[float] = []
        self.reductions: List[int] = []

    def _options(self) -> Dict[str, Any]:
        return {"monitor": self.monitor, "factor": self.factor, "patience": self.patience,
                "min_delta": self.min_delta, "cooldown": self.cooldown, "min_lr": self.min_lr}

    def _finish(self, result: Dict[str, Any]) -> None:
        """Records the outcome of Model.train's C++ call."""
        epochs = result["epochs"]
        self.lrs = [float(e["lr"]) for e in epochs]
        self.reductions = [int(e["epoch"]) for e in epochs if e.get("lr_reduced")]

    def __repr__(self) -> str:
        return (f"ReduceLROnPlateau(monitor={self.monitor!r}, factor={self.factor}, patience={self.patience}, "
                f"min_delta={self.min_delta}, cooldown={self.cooldown}, min_lr={self.min_lr})")
