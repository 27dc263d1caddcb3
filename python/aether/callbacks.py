"""Callbacks of Model.train (Keras'): the Callback base class whose hooks train() calls,
LambdaCallback, ModelCheckpoint and CSVLogger, and EarlyStopping, ReduceLROnPlateau and
LearningRateScheduler, whose rules run in the C++ training loop; and History, what train() returns."""

from __future__ import annotations

import csv
import inspect
import math
import numbers
import os
from typing import Any, Callable, Dict, List, Optional

from . import _aether
from ._checks import integer
from ._checks import PathArg
from ._checks import path as path_arg

Logs = Optional[Dict[str, Any]]

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


class Callback:
    """What Model.train(callbacks=[...]) calls, as Keras does: `on_train_begin(logs)`, then for each
    epoch `on_epoch_begin(epoch, logs)`, `on_train_batch_begin(batch, logs)` before each step
    (`logs` empty) and `on_train_batch_end(batch, logs)` after it (`logs`:
    the epoch's mean "loss" and "accuracy" so far) and `on_epoch_end(epoch, logs)` after the epoch's
    validation and checkpoint (`logs`: "loss", "accuracy", "val_loss" and "val_accuracy" with a
    validation set, "lr", "seconds"), then `on_train_end(logs)` with the last epoch's logs. Epochs and
    batches count from 0; epochs from the start of training (a resumed model's first is its next).
    `self.model` is the model being trained and `self.params` {"epochs", "verbose",
    "do_validation"}. Setting `self.model.stop_training = True` ends training after the epoch in
    progress (on several ranks, rank 0's setting decides). An exception raised by a hook stops
    training at once and propagates; the checkpoint keeps the last finished epoch. A hook may
    evaluate, predict and save the model, but not train it again or change its recipe (configure,
    to, set_precision: errors until train() returns).

    Evaluation calls the `on_test_*` hooks: Model.evaluate(callbacks=[...]) and train()'s validation
    after each epoch (the train() callbacks'): `on_test_begin(logs)`, `on_test_batch_begin(batch,
    logs)` and `on_test_batch_end(batch, logs)` around each batch (`logs`: the running "loss" and
    "accuracy" so far), then `on_test_end(logs)` with the evaluation's "loss" and "accuracy".
    Model.predict(callbacks=[...]) calls `on_predict_begin`, `on_predict_batch_begin`,
    `on_predict_batch_end` (`logs` {"outputs": the batch's predictions, a NumPy array (B, K)}, as
    Keras') and `on_predict_end`.
    """

    def __init__(self) -> None:
        self.model: Any = None
        self.params: Dict[str, Any] = {}

    def set_model(self, model: Any) -> None:
        self.model = model

    def set_params(self, params: Dict[str, Any]) -> None:
        self.params = params

    def on_train_begin(self, logs: Logs = None) -> None:
        pass

    def on_train_end(self, logs: Logs = None) -> None:
        pass

    def on_epoch_begin(self, epoch: int, logs: Logs = None) -> None:
        pass

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        pass

    def on_train_batch_begin(self, batch: int, logs: Logs = None) -> None:
        pass

    def on_train_batch_end(self, batch: int, logs: Logs = None) -> None:
        pass

    def on_test_begin(self, logs: Logs = None) -> None:
        pass

    def on_test_end(self, logs: Logs = None) -> None:
        pass

    def on_test_batch_begin(self, batch: int, logs: Logs = None) -> None:
        pass

    def on_test_batch_end(self, batch: int, logs: Logs = None) -> None:
        pass

    def on_predict_begin(self, logs: Logs = None) -> None:
        pass

    def on_predict_end(self, logs: Logs = None) -> None:
        pass

    def on_predict_batch_begin(self, batch: int, logs: Logs = None) -> None:
        pass

    def on_predict_batch_end(self, batch: int, logs: Logs = None) -> None:
        pass

    def _overrides(self, hook: str) -> bool:
        """Whether this callback does something in `hook` (train() skips the per-step hooks none
        override)."""
        return hook in vars(self) or getattr(type(self), hook) is not getattr(Callback, hook)


class LambdaCallback(Callback):
    """A Callback from functions (Keras' LambdaCallback), each given by the name of its hook:
    on_train_begin(logs), on_train_end(logs), on_epoch_begin(epoch, logs), on_epoch_end(epoch, logs),
    on_train_batch_begin(batch, logs), on_train_batch_end(batch, logs), and the on_test_* and
    on_predict_* hooks as keywords."""

    _HOOKS = ("on_train_begin", "on_train_end", "on_epoch_begin", "on_epoch_end", "on_train_batch_begin",
              "on_train_batch_end", "on_test_begin", "on_test_end", "on_test_batch_begin", "on_test_batch_end",
              "on_predict_begin", "on_predict_end", "on_predict_batch_begin", "on_predict_batch_end")

    def __init__(self, on_train_begin: Optional[Callable[..., None]] = None,
                 on_train_end: Optional[Callable[..., None]] = None,
                 on_epoch_begin: Optional[Callable[..., None]] = None,
                 on_epoch_end: Optional[Callable[..., None]] = None,
                 on_train_batch_begin: Optional[Callable[..., None]] = None,
                 on_train_batch_end: Optional[Callable[..., None]] = None,
                 **more: Optional[Callable[..., None]]):
        super().__init__()
        unknown = sorted(set(more) - set(self._HOOKS))
        if unknown:
            raise TypeError(f"LambdaCallback: unknown hook(s) {unknown}")
        given = {"on_train_begin": on_train_begin, "on_train_end": on_train_end, "on_epoch_begin": on_epoch_begin,
                 "on_epoch_end": on_epoch_end, "on_train_batch_begin": on_train_batch_begin,
                 "on_train_batch_end": on_train_batch_end, **more}
        for name, fn in given.items():
            if fn is not None:
                if not callable(fn):
                    raise TypeError(f"LambdaCallback: {name} must be callable, got {type(fn).__name__}")
                setattr(self, name, fn)


class History(Dict[str, List[float]]):
    """Model.train's result: the lists per epoch ("loss", "accuracy", "val_loss", "val_accuracy",
    "lr", "seconds"), as a dict, and as Keras' History object: `history` (this dict), `epoch` (the
    0-based epochs that ran, counted from the start of training) and `params`."""

    def __init__(self, lists: Dict[str, List[float]]) -> None:
        super().__init__(lists)
        self.epoch: List[int] = []
        self.params: Dict[str, Any] = {}

    @property
    def history(self) -> Dict[str, List[float]]:
        return self


def _improves(monitor: str, value: float, best: Optional[float]) -> bool:
    """Losses improve by falling, accuracies by rising."""
    return best is None or (value < best if monitor.endswith("loss") else value > best)


class ModelCheckpoint(Callback):
    """Saves the model (a whole .aether checkpoint, atomically) after each epoch (Keras'
    ModelCheckpoint). `filepath` may name the epoch (from 1) and the epoch's logs:
    "ckpt-{epoch:02d}-{val_loss:.3f}.aether". With `save_best_only`, only after an epoch whose
    `monitor` improved on the best so far (losses lower, accuracies higher); `best` holds that value
    and `saved` the paths written. On several ranks, rank 0 writes. A monitor that needs a
    validation set without one is an error before the first epoch.
    """

    def __init__(self, filepath: PathArg, monitor: str = "val_loss", save_best_only: bool = False,
                 verbose: int = 0):
        super().__init__()
        self.filepath = path_arg(filepath, "ModelCheckpoint: filepath")
        self.monitor = _monitor(monitor, "ModelCheckpoint")
        self.save_best_only = bool(save_best_only)
        self.verbose = integer(verbose, "ModelCheckpoint: verbose", 0)
        self.best: Optional[float] = None
        self.saved: List[str] = []

    def on_train_begin(self, logs: Logs = None) -> None:
        if self.save_best_only and self.monitor.startswith("val_") and not self.params.get("do_validation"):
            raise ValueError(f"ModelCheckpoint monitors {self.monitor}, which needs validation_data or "
                             f"validation_split")

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        logs = logs or {}
        if self.save_best_only:
            value = float(logs[self.monitor])
            if not _improves(self.monitor, value, self.best):
                return
            self.best = value
        try:
            path = self.filepath.format(epoch=epoch + 1, **logs)
        except (KeyError, IndexError, ValueError) as e:
            raise ValueError(f"ModelCheckpoint: filepath {self.filepath!r} names what the epoch's logs "
                             f"({', '.join(sorted(logs))}) do not have: {e}") from None
        if _aether.rank() == 0:
            if os.path.dirname(path):  # as Keras, the directories it names
                os.makedirs(os.path.dirname(path), exist_ok=True)
            self.model.save(path)
            if self.verbose:
                print(f"epoch {epoch + 1}: saved {path}")
        self.saved.append(path)

    def __repr__(self) -> str:
        return (f"ModelCheckpoint({self.filepath!r}, monitor={self.monitor!r}, "
                f"save_best_only={self.save_best_only})")


class CSVLogger(Callback):
    """Writes each epoch's logs as a row of a CSV file (Keras' CSVLogger): a header of "epoch" and
    the first epoch's log keys, then a row per epoch, each written and closed when its epoch ends.
    With `append`, adds rows to an existing file under its header. On several ranks, rank 0 writes."""

    def __init__(self, filename: PathArg, separator: str = ",", append: bool = False):
        super().__init__()
        if not isinstance(separator, str) or len(separator) != 1:
            raise ValueError(f"CSVLogger: separator must be one character, got {separator!r}")
        self.filename = path_arg(filename, "CSVLogger: filename")
        self.separator = separator
        self.append = bool(append)
        self._keys: List[str] = []

    def on_train_begin(self, logs: Logs = None) -> None:
        self._keys = []
        if _aether.rank() != 0:
            return
        if self.append and os.path.exists(self.filename) and os.path.getsize(self.filename) > 0:
            with open(self.filename, newline="") as f:  # the file's columns
                self._keys = next(csv.reader(f, delimiter=self.separator))[1:]
        elif not self.append:
            open(self.filename, "w").close()

    def on_epoch_end(self, epoch: int, logs: Logs = None) -> None:
        if _aether.rank() != 0:
            return
        logs = logs or {}
        with open(self.filename, "a", newline="") as f:
            w = csv.writer(f, delimiter=self.separator)
            if not self._keys:
                self._keys = sorted(logs)
                w.writerow(["epoch"] + self._keys)
            w.writerow([epoch] + [logs.get(k, "") for k in self._keys])


class EarlyStopping(Callback):
    """Stops Model.train once `monitor` has stopped improving (Keras' EarlyStopping).

    After each epoch, the monitored number (val_loss or val_accuracy, which need validation_data
    or validation_split; loss or accuracy of the training epoch) improves when it is lower (losses)
    or higher (accuracies) than the best so far by more than `min_delta`. After `patience` epochs
    in a row without improvement (0 acts as 1, as in Keras) training stops. With
    `restore_best_weights` the model's weights and BatchNorm statistics then become the best
    epoch's, also when the last epoch ran (Keras restores only when it stops), and a `checkpoint`
    file is saved again with them. Each train() call starts a run of its own, unless the model's
    last run with the same options did not end (train() raised: an error, Ctrl-C, a failed rank):
    then it continues that run, also from the checkpoint that run wrote, so that a resumed job
    stops and restores as the uninterrupted one would.

    After train(): `best_epoch` (0-based) and `best` (its value), `stopped_epoch` (the 0-based
    epoch after which training stopped, None when every epoch ran) and `restored` (whether the best
    epoch's weights replaced the last's).
    """

    def __init__(self, monitor: str = "val_loss", patience: int = 0, min_delta: float = 0.0,
                 restore_best_weights: bool = True):
        super().__init__()
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
        best = int(result["best_epoch"])  # counted from the start of training, as the epochs are
        self.best_epoch = best if best >= 0 else None
        self.best = None if self.best_epoch is None else float(result["best"])
        self.stopped_epoch = int(result["epochs"][-1]["epoch"]) if result["stopped_early"] else None
        self.restored = bool(result["restored_best"])

    def __repr__(self) -> str:
        return (f"EarlyStopping(monitor={self.monitor!r}, patience={self.patience}, min_delta={self.min_delta}, "
                f"restore_best_weights={self.restore_best_weights})")


class ReduceLROnPlateau(Callback):
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
        super().__init__()
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


class LearningRateScheduler(Callback):
    """Sets the learning rate before each epoch (Keras' LearningRateScheduler).

    `schedule(epoch, lr)` gets the epoch (0-based, from the start of training) and the learning
    rate in force (Model.learning_rate: what it last returned, in this train() or an earlier one or
    the run of a loaded checkpoint; the optimizer's lr before that), and returns the epoch's, a
    number > 0; `schedule(epoch)` (Keras' older form) gets the epoch alone. Every step of the epoch
    trains at that rate (with an optimizer schedule other than "constant": the schedule's rate scaled
    by it / the optimizer's lr), times a ReduceLROnPlateau's factor. The rate is kept in checkpoints
    and by later train() calls until configure(). On several ranks, rank 0's value is used. With
    `verbose`, prints the rate set. After train(): `lrs`, what schedule returned for each epoch.
    """

    def __init__(self, schedule: Callable[..., Any], verbose: int = 0):
        super().__init__()
        if not callable(schedule):
            raise TypeError(f"LearningRateScheduler: schedule must be callable, got {type(schedule).__name__}")
        self.schedule = schedule
        self.verbose = integer(verbose, "LearningRateScheduler: verbose", 0)
        self._with_lr = _takes_two(schedule)
        self.lrs: List[float] = []

    def _start(self) -> None:
        """Model.train calls it before training."""
        self.lrs = []

    def _lr(self, epoch: int, lr: float) -> float:
        """The epoch's learning rate (the C++ training loop calls it before each epoch)."""
        v = self.schedule(epoch, lr) if self._with_lr else self.schedule(epoch)
        if isinstance(v, bool) or not isinstance(v, numbers.Real):
            raise TypeError(f"LearningRateScheduler: schedule returned {v!r} for epoch {epoch + 1}, "
                            f"expected a number")
        v = float(v)
        if self.verbose and _aether.rank() == 0:
            print(f"Epoch {epoch + 1}: LearningRateScheduler setting learning rate to {v}.")
        self.lrs.append(v)
        return v

    def __repr__(self) -> str:
        return f"LearningRateScheduler({self.schedule!r}, verbose={self.verbose})"


def _takes_two(fn: Callable[..., Any]) -> bool:
    """Whether fn accepts two positional arguments (schedule(epoch, lr)); one it cannot inspect
    (a builtin) is taken to."""
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return True
    try:
        sig.bind(0, 0.0)
        return True
    except TypeError:
        return False
