"""Model: Aether-ML's Model API on aether's C++ Model.

Built-in layers become C++ modules at finalize(); training, evaluation and prediction run in the
engine with the GIL released, on data sets that view the NumPy arrays (float32 images are not
copied). Ctrl-C during train() raises KeyboardInterrupt after the current step; a checkpoint file
keeps the last finished epoch.
"""

from __future__ import annotations

import json
import time
from typing import Any, Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from . import _aether, _progress
from ._checks import integer
from ._checks import PathArg
from ._checks import path as path_arg
from .callbacks import Callback, EarlyStopping, History, LearningRateScheduler, ReduceLROnPlateau
from ._aether import Tensor
from ._tensor import device_name, tensor
from .layers import Layer, _build, _Builtin
from .losses import Loss
from .optimizers import Optimizer
from .metrics import CategoricalAccuracy, RegressionAccuracy

ArrayLike = Any


def _images(x: ArrayLike, what: str) -> np.ndarray:
    """uint8 pixels stay uint8 (scaled by 1/255 and normalised in the engine); anything else is
    used as float32 values (no copy when the array already is C-contiguous float32)."""
    if isinstance(x, Tensor):
        x = np.asarray(x)
    a = np.asarray(x)
    if a.dtype.kind not in "biuf":
        raise TypeError(f"{what}: X must be numbers (images or features), got dtype {a.dtype}")
    if a.dtype != np.uint8:
        a = a.astype(np.float32, copy=False)
    if a.ndim < 2:
        raise ValueError(f"{what}: X must have a sample axis and a feature axis, got shape {a.shape}")
    return np.ascontiguousarray(a)


# What a Callback's on_epoch_end sees of an epoch (Keras' logs, with aether's lr and seconds).
_EPOCH_LOGS = ("loss", "accuracy", "val_loss", "val_accuracy", "lr", "seconds")


def _instances(base: type) -> str:
    """"ae.SGD(), ae.Adam() or ae.Muon()": how to make each public class derived from base."""
    names = []
    todo = list(base.__subclasses__())
    while todo:
        cls = todo.pop(0)
        todo.extend(cls.__subclasses__())
        if not cls.__name__.startswith("_"):
            names.append(f"ae.{cls.__name__}()")
    return ", ".join(names[:-1]) + " or " + names[-1] if len(names) > 1 else "".join(names)


def _what(value: Any) -> str:
    """What a wrong argument is: a string's text (Keras names losses and optimizers by strings),
    else its type, with the module for another library's class (torch.optim.sgd.SGD)."""
    if isinstance(value, str):
        return f"the string {value!r}"
    if isinstance(value, type):
        return f"the class {value.__name__} itself (an instance is made by calling it: {value.__name__}())"
    t = type(value)
    return t.__name__ if t.__module__ in ("builtins", "aether") or t.__module__.startswith("aether.") \
        else f"{t.__module__}.{t.__qualname__}"


class _Callbacks(NamedTuple):
    """train()'s callbacks: those whose rules run in C++ (one of each kind at most), and the others,
    whose hooks train() calls."""
    early_stopping: Optional[EarlyStopping]
    reduce_lr: Optional[ReduceLROnPlateau]
    lr_scheduler: Optional[LearningRateScheduler]
    hooks: List[Callback]


def _callback_list(callbacks: Optional[Sequence[Callback]], what: str) -> List[Callback]:
    """`callbacks` checked: None or a list (or tuple) of aether.Callback objects."""
    if callbacks is None:
        return []
    if isinstance(callbacks, Callback) or not isinstance(callbacks, (list, tuple)):
        raise TypeError(f"{what}: callbacks must be a list of aether.Callback, got {type(callbacks).__name__}")
    for cb in callbacks:
        if not isinstance(cb, Callback):
            raise TypeError(f"{what}: callbacks must be aether.Callback objects, got {type(cb).__name__}")
    return list(callbacks)


def _sort_callbacks(callbacks: Optional[Sequence[Callback]], early_stopping: Optional[EarlyStopping],
                    reduce_lr: Optional[ReduceLROnPlateau]) -> _Callbacks:
    """The list and the keywords (early_stopping, reduce_lr) sorted."""
    lr_scheduler: Optional[LearningRateScheduler] = None
    hooks: List[Callback] = []
    for cb in _callback_list(callbacks, "train"):
        if isinstance(cb, EarlyStopping):
            if early_stopping is not None:
                raise ValueError("train: one EarlyStopping at most (callbacks and early_stopping together)")
            early_stopping = cb
        elif isinstance(cb, ReduceLROnPlateau):
            if reduce_lr is not None:
                raise ValueError("train: one ReduceLROnPlateau at most (callbacks and reduce_lr together)")
            reduce_lr = cb
        elif isinstance(cb, LearningRateScheduler):
            if lr_scheduler is not None:
                raise ValueError("train: one LearningRateScheduler at most")
            lr_scheduler = cb
        else:
            hooks.append(cb)
    return _Callbacks(early_stopping, reduce_lr, lr_scheduler, hooks)


def _sample_weights(sample_weight: Optional[ArrayLike], n: int, what: str) -> List[float]:
    """Keras' sample_weight as the engine takes it: one number per sample (n), or [] for None."""
    if sample_weight is None:
        return []
    sw = np.asarray(sample_weight.numpy() if isinstance(sample_weight, Tensor) else sample_weight)
    if sw.dtype.kind not in "biuf" or sw.ndim != 1 or len(sw) != n:
        raise ValueError(f"{what} must be numbers of shape ({n},) (one per sample), got {sw.dtype} of shape "
                         f"{sw.shape}")
    return sw.astype(np.float64).tolist()


def _eval_hooks(callbacks: Sequence[Callback], kind: str) -> Tuple[Any, Any]:
    """The engine's evaluate/predict hooks, on_batch_begin(batch) and on_batch(batch (from 1), batches,
    seen, loss, accuracy, outputs=None), that call the callbacks' on_<kind>_begin before the first
    batch, on_<kind>_batch_begin and _end around each, and on_<kind>_end after the last (kind "test":
    logs the running loss and accuracy; "predict": on_predict_batch_end's logs {"outputs": the batch's
    predictions as a NumPy array (B, K)}, as Keras', the others' empty). (None, None) when no callback
    overrides any of these hooks."""
    names = (f"on_{kind}_begin", f"on_{kind}_batch_begin", f"on_{kind}_batch_end", f"on_{kind}_end")
    active = [cb for cb in callbacks if any(cb._overrides(n) for n in names)]
    if not active:
        return None, None

    def on_batch_begin(batch: int) -> None:
        if batch == 0:
            for cb in active:
                getattr(cb, names[0])({})
        for cb in active:
            getattr(cb, names[1])(batch, {})

    def on_batch(batch: int, batches: int, seen: int, loss: float, accuracy: float,
                 outputs: Any = None) -> None:
        logs: Dict[str, Any] = {"loss": loss, "accuracy": accuracy} if kind == "test" else {}
        batch_logs = dict(logs) if outputs is None else {"outputs": np.asarray(outputs)}
        for cb in active:
            getattr(cb, names[2])(batch - 1, dict(batch_logs))
        if batch == batches:
            for cb in active:
                getattr(cb, names[3])(dict(logs))
    return on_batch_begin, on_batch


class Model:
    """A sequence of layers trained as one network: add, configure, to, finalize, train, evaluate,
    predict, save, load."""

    def __init__(self) -> None:
        self._cpp = _aether._Model()
        self._layers: List[Any] = []
        self._device = "cpu"
        self._precision = "float32"
        self._seed = 0
        self._loss: Optional[Loss] = None
        self._finalized = False
        self._defaults: Dict[str, Any] = {}

    # ---- building -------------------------------------------------------------------------------
    def add(self, layer: Any) -> "Model":
        if self._finalized:
            raise RuntimeError("Model.add: the model is finalized; add layers before finalize()")
        if not isinstance(layer, (_Builtin, _aether.Module)):
            raise TypeError(f"Model.add: expected an aether layer, got {type(layer).__name__}")
        self._layers.append(layer)
        return self

    def manual_seed(self, seed: int) -> "Model":
        """Seeds weight initialisation, dropout and the order and augmentation of training data."""
        self._seed = int(seed)
        _aether.manual_seed(self._seed)
        return self

    @staticmethod
    def _group_config(group: Dict[str, Any], main: Any, cfg: Dict[str, Any]) -> Dict[str, Any]:
        # A group's optimizer instance: its name, and its lr (as a scale of the main one's), momentum,
        # weight decay and Muon settings (shared by every muon group).
        opt = group.get("optimizer")
        if opt is None or isinstance(opt, str):
            return group
        if not hasattr(opt, "config"):
            raise TypeError(f"configure: param_groups optimizer must be an aether optimizer or a name, "
                            f"got {type(opt).__name__}")
        oc = opt.config()
        group["optimizer"] = oc["optimizer"]
        group.setdefault("lr_scale", oc["lr"] / main.lr)
        group.setdefault("weight_decay", oc["weight_decay"])
        if "momentum" in oc:
            group.setdefault("momentum", oc["momentum"])
            if oc.get("nesterov", cfg.get("nesterov", False)) != cfg.get("nesterov", False):
                raise ValueError("configure: a param group's optimizer must use the main optimizer's nesterov "
                                 f"({cfg.get('nesterov', False)})")
        for key in ("muon_ns_steps", "muon_normalize_weights"):
            if key in oc:
                cfg[key] = oc[key]
        return group

    def configure(self, loss: Loss, optimizer: Any, accuracy: Any = None,
                  param_groups: Optional[List[Dict[str, Any]]] = None,
                  lookahead: Optional[Dict[str, float]] = None) -> "Model":
        """The loss, optimizer and recipe. Called again on a finalized (or loaded) model it applies
        the whole new recipe, as Keras' compile does: groups, frozen set and a fresh optimizer (its
        momentum or moments start again); weights and epochs done stay.
        param_groups: per-parameter settings, e.g. [{"match": "*.bias", "layer": "BatchNorm2d",
        "lr_scale": 64}, {"match": "0.weight", "frozen": True}]: a parameter takes the first group
        whose glob `match` matches its name ("3.bias": layer index and parameter; "*" by default)
        and whose `layer` (a layer type, "" any) holds it; `lr_scale` multiplies the learning rate,
        `weight_decay` replaces the optimizer's, `frozen` parameters are not trained.
        A group's `train_epochs` n > 0 trains its parameters in the first n epochs only; with
        `schedule_over_train_epochs` True its learning rate runs the schedule over those n epochs
        instead of the whole training (airbench94_muon's whitening bias).
        A group's `optimizer` trains it with another optimizer: an instance (its lr, momentum and
        weight decay become the group's; e.g. Muon(lr=0.24, momentum=0.6, ns_steps=3) for the conv
        filters, as airbench94_muon) or a name ("sgd", "adam", "adamw", "muon") with the main
        optimizer's settings and the group's `momentum`.
        lookahead: {"every": k, "decay": d, "power": p, "start_epoch": e}: from epoch e (0-based), every
        k steps slow weights move toward the parameters by 1 - d (t/T)^p and the parameters take their
        value; each epoch ends on the slow weights. BatchNorm's running statistics are averaged the
        same way (airbench94: every 5, decay 0.95**5, power 3, start_epoch 3)."""
        if not isinstance(loss, Loss):
            raise TypeError(f"configure: loss must be an aether loss ({_instances(Loss)}), got {_what(loss)}")
        if not isinstance(optimizer, Optimizer):
            raise TypeError(f"configure: optimizer must be an aether optimizer ({_instances(Optimizer)}, "
                            f"e.g. ae.Adam(lr=1e-3)), got {_what(optimizer)}")
        accuracy = accuracy or (RegressionAccuracy() if loss.regression else CategoricalAccuracy())
        if not isinstance(accuracy, (CategoricalAccuracy, RegressionAccuracy)):
            raise TypeError("configure: accuracy must be an aether metric (ae.CategoricalAccuracy() or "
                            f"ae.RegressionAccuracy(precision)), got {_what(accuracy)}")
        cfg = {**optimizer.config(), **loss.config(), **accuracy.config()}
        if param_groups:
            cfg["param_groups"] = [self._group_config(dict(g), optimizer, cfg) for g in param_groups]
        if lookahead:
            unknown = set(lookahead) - {"every", "decay", "power", "start_epoch"}
            if unknown:
                raise ValueError(f"configure: unknown lookahead key(s) {sorted(unknown)} "
                                 "(every, decay, power, start_epoch)")
            what = "configure: lookahead's"
            cfg["lookahead_start_epoch"] = integer(lookahead.get("start_epoch", 0), f"{what} start_epoch", 0)
            cfg["lookahead_every"] = integer(lookahead.get("every", 5), f"{what} every", 1)
            cfg["lookahead_decay"] = float(lookahead.get("decay", 0.5))
            cfg["lookahead_power"] = float(lookahead.get("power", 0.0))
        self._cpp.configure(cfg)
        self._loss = loss
        return self

    # Aether-ML's older name
    set = configure

    def to(self, device: str) -> "Model":
        """"cpu", "cuda", "cuda:N"; Aether-ML's "numpy" and "cupy" name the CPU and the GPU."""
        name = device_name(device)
        # Checked now, finalized or not: an unknown name or a device this machine lacks raises here
        # and changes nothing (before, anything was accepted until finalize).
        self._cpp.to(name)
        self._device = name
        return self

    def set_precision(self, precision: str) -> "Model":
        """"float32" (the default), "bfloat16" or "float16" (also "fp32", "bf16", "fp16")."""
        self._cpp.set_precision(precision)  # checks the name now, finalized or not
        self._precision = precision
        return self

    def finalize(self, input_shape: Sequence[int]) -> "Model":
        """Builds the layers for one sample's shape (H, W, C) or (features,). Without it, the first
        train, evaluate or predict of a configured model calls it with X.shape[1:], as Keras builds a
        model on its first fit."""
        if self._finalized:
            raise RuntimeError("Model.finalize: already finalized")
        if isinstance(input_shape, (str, bytes)) or not isinstance(input_shape, (Sequence, np.ndarray)):
            raise TypeError(f"Model.finalize: input_shape must be a sequence of ints such as (32, 32, 3), "
                            f"got {input_shape!r}")
        input_shape = [integer(s, "Model.finalize: input_shape's sizes", 1) for s in input_shape]
        if self._loss is None:
            raise RuntimeError("Model.finalize: call configure() first")
        shape = tuple(input_shape)
        modules = []
        for layer in self._layers:
            module, shape = _build(layer, shape)
            modules.append(module)
        # Built on a fresh engine model and kept only once it stands: a finalize that fails (a
        # device or param group that does not fit) leaves this model as it was, to fix and retry.
        cpp = _aether._Model()
        cpp.configure(self._cpp.config)
        for module in modules:
            cpp.add(module)
        cpp.set_precision(self._precision)
        cpp.finalize(input_shape)
        cpp.to(self._device)
        self._cpp = cpp
        self._finalized = True
        return self

    @classmethod
    def preset(cls, name: str, input_shape: Sequence[int], classes: int = 10, device: str = "cpu") -> "Model":
        """One of aether's preset networks ("mlp", "lenet", "cifarnet", "resnet20", "airbench94",
        "airbench93", "airbench94_muon") with its training recipe
        (optimizer, schedule, batch size, augmentation), as `aether train --model NAME` builds it.
        Seed with aether.manual_seed() first."""
        layers, config, data = _aether._preset(name, [int(s) for s in input_shape],
                                               integer(classes, "Model.preset: classes", 2))
        m = cls()
        for l in layers:
            m._layers.append(l)
        m._cpp.configure(config)
        m._loss = Loss()
        m.to(device)
        m._defaults = dict(data)
        m._preset_name = name
        return m.finalize(input_shape)

    # ---- data -----------------------------------------------------------------------------------
    def _classes(self) -> int:
        shape = self._cpp.input_shape
        return int(_aether.output_shape(self._cpp.network(), list(shape))[-1])

    def _batch(self, x: ArrayLike, what: str) -> np.ndarray:
        """_images(x), which must be a batch: one sample of the model's input shape is named as that
        (it was read as a batch of its rows: "has images (28, 1, 1), the model expects (28, 28, 1)")."""
        images = _images(x, what)
        shape = tuple(self._cpp.input_shape)
        if images.shape == shape or (len(shape) == 3 and shape[2] == 1 and images.shape == shape[:2]):
            raise ValueError(f"{what}: X has the shape of one sample, {images.shape}; pass a batch of "
                             f"samples, e.g. X[None] of shape {(1,) + images.shape}")
        return images

    def _dataset(self, x: ArrayLike, y: ArrayLike, what: str) -> "_aether.Dataset":
        images = self._batch(x, what)
        y = np.asarray(y.numpy() if isinstance(y, Tensor) else y)
        if y.shape[:1] != images.shape[:1]:
            raise ValueError(f"{what}: X has {images.shape[0]} samples but y has {y.shape[0] if y.ndim else 0}")
        loss = self._cpp.config["loss"]
        regression = loss == "mse" and isinstance(self._loss, Loss) and self._loss.regression
        classes = None if regression else self._classes()  # builds the forward graph once (nothing is computed)
        # binary_cross_entropy: targets y (N, K) in [0, 1], or (N,) for one output; class labels (N,)
        # for several outputs (one-hot targets).
        binary = loss == "binary_cross_entropy" and (y.ndim == 2 or classes == 1)
        if regression or binary:
            if binary and y.dtype.kind not in "biuf":
                raise TypeError(f"{what}: binary targets must be numbers in [0, 1], got dtype {y.dtype}")
            t = np.ascontiguousarray(y.reshape(len(y), -1), dtype=np.float32)
            return _aether._dataset_from_arrays(images, images, None, t, 0, what)
        if y.ndim == 2 and y.shape[1] == 1 and classes != 1:
            y = y[:, 0]  # a column of classes (N, 1), as Keras' sparse labels and scikit-learn's columns
        if y.ndim == 2:  # one-hot rows
            if not (np.isin(y, (0, 1)).all() and (y.sum(axis=1) == 1).all()):
                raise ValueError(f"{what}: 2-D labels must be one-hot rows (a single 1 per row)")
            if y.shape[1] != classes:
                raise ValueError(f"{what}: one-hot labels have {y.shape[1]} columns, the model gives "
                                 f"{classes} classes")
            y = y.argmax(axis=1)
        elif y.ndim != 1:
            raise ValueError(f"{what}: labels must be (N,) classes or (N, K) one-hot, got shape {y.shape}")
        if y.dtype.kind not in "iub":
            if y.dtype.kind != "f":
                raise TypeError(f"{what}: class labels must be integers, got dtype {y.dtype}")
            with np.errstate(invalid="ignore"):  # inf % 1 is NaN: not whole, as NaN is not
                fractional = np.flatnonzero(~(np.mod(y, 1) == 0))
            if fractional.size:  # whole numbers stored as floats are classes
                i = int(fractional[0])
                raise ValueError(f"{what}: class labels must be whole numbers, got {y[i]} (item {i} of a "
                                 f"{y.dtype} array)")
            y = y.astype(np.int64)
        labels = np.ascontiguousarray(y, dtype=np.int64)
        return _aether._dataset_from_arrays(images, images, labels, None, classes, what)

    @staticmethod
    def _class_weight(class_weight: Any, classes: int) -> List[float]:
        """train()'s class_weight as one weight per class ([] for None); the engine checks the values."""
        if class_weight is None:
            return []
        if isinstance(class_weight, dict):
            weights = [1.0] * classes
            for c, w in class_weight.items():
                c = integer(c, "train: class_weight's classes", 0)
                if c >= classes:
                    raise ValueError(f"train: class_weight has class {c}, the model has classes 0..{classes - 1}")
                weights[c] = float(w)
            return weights
        if isinstance(class_weight, (str, bytes)) or not isinstance(class_weight, (Sequence, np.ndarray)):
            raise TypeError(f"train: class_weight must be a dict {{class: weight}} or a list of weights, "
                            f"got {type(class_weight).__name__}")
        return [float(w) for w in class_weight]

    def _require_finalized(self, what: str) -> None:
        if not self._finalized:
            raise RuntimeError(f"Model.{what}: call configure() and finalize(input_shape) first")

    def _finalize_for(self, X: Any, what: str) -> None:
        """Keras' build on first use: a configured model that train, evaluate or predict meets before
        finalize() takes one sample of X's shape, X.shape[1:], as its input shape."""
        if self._finalized:
            return
        if self._loss is None:
            raise RuntimeError(f"Model.{what}: call configure() first")
        shape = np.shape(X)[1:]
        if len(shape) == 0:
            raise ValueError(f"{what}: X must be a batch of samples, (N, features) or (N, H, W, C), got shape "
                             f"{np.shape(X)}; or finalize(input_shape) the model first")
        self.finalize(shape)

    # ---- training and use -----------------------------------------------------------------------
    def train(self, X: ArrayLike, y: ArrayLike, epochs: int = 1, batch_size: Optional[int] = None,
              shuffle: bool = True, validation_data: Optional[Tuple[ArrayLike, ...]] = None,
              verbose: bool = True, seed: Optional[int] = None, crop_padding: Optional[int] = None,
              hflip: Optional[bool] = None, checkpoint: Optional[str] = None, max_steps_per_epoch: int = 0,
              callback: Optional[Callable[..., None]] = None,
              alternate_flips: Optional[bool] = None,
              sync_batch_norm: bool = False, validation_split: Optional[float] = None,
              early_stopping: Optional[EarlyStopping] = None,
              reduce_lr: Optional[ReduceLROnPlateau] = None,
              callbacks: Optional[Sequence[Callback]] = None,
              class_weight: Optional[Union[Dict[int, float], Sequence[float]]] = None,
              sample_weight: Optional[ArrayLike] = None) -> History:
        """Trains on images X (N, H, W, C) or (N, features) and labels y: classes (N,) (or a column
        (N, 1)) or one-hot (N, K) (or float targets for MeanSquaredError; targets in [0, 1], (N,) for one output or
        (N, K), for SigmoidBinaryCrossEntropy). uint8 images are scaled to [0, 1] and
        normalised per channel with the statistics of X (saved with the model); other images are
        used as float32 as they are. Returns the history: lists of loss, accuracy, val_loss,
        val_accuracy, lr and seconds per epoch (a dict that is also Keras' History: `.history`,
        `.epoch`). `epochs` counts from the start of training: a loaded model that has done 2
        continues with the third, and asking for no more epochs than are done is an error. With
        `hflip`, `alternate_flips` flips each image in epoch 0 by a seeded coin and reverses that
        on every odd epoch (airbench's derandomised flips) instead of a new coin per epoch. On
        several ranks, `sync_batch_norm` normalises with the statistics of the global batch (every
        rank's samples) instead of each rank's own.

        `validation_data`: (X, y), or (X, y, sample_weight) to weigh the validation loss as
        evaluate(sample_weight=) does. `validation_split` (0 < f < 1) holds out the last f of X and y
        (and of sample_weight; before shuffling, as Keras does) to validate on after each epoch,
        instead of `validation_data`; the normalisation statistics come from the rest.
        `early_stopping` (aether.EarlyStopping) stops once its monitored number stops improving and
        restores the best epoch's weights; the history then has fewer epochs, and the EarlyStopping
        object records the best and the stopping epoch. `reduce_lr` (aether.ReduceLROnPlateau) multiplies the learning rate by its
        factor once its monitored number stops improving (history["lr"] shows it).

        `callbacks`: aether.Callback objects (Keras' callbacks=[...]) whose hooks run at the start
        and end of training, of each epoch and after each step (aether.callbacks.Callback says
        when and with what); an EarlyStopping or ReduceLROnPlateau among them acts as the keyword
        of that name, and a LearningRateScheduler sets each epoch's learning rate. A callback may set `model.stop_training = True` to end training after the
        epoch in progress.

        `class_weight` (Keras'): {class: weight} (a class left out weighs 1) or a list of one weight
        per class: each training sample's loss is multiplied by its class's weight, for classes that
        are rare in X. For SigmoidBinaryCrossEntropy's 0/1 targets the classes are the targets 0
        and 1 (each output's loss weighted by its target's). The loss is still the mean over the
        samples; accuracy is unweighted, and validation and evaluate do not use them. `sample_weight`
        (Keras'): one weight (N,) per sample of X, multiplying its loss (and its class's weight);
        with validation_split, the held-out samples' weights weigh the validation loss."""
        self._finalize_for(X, "train")
        if self._cpp.is_training:  # before anything changes (the C++ side checks too)
            raise RuntimeError("train: the model is training (called from a callback of train()?); "
                               "do this after train() returns")
        d = self._defaults
        epochs = integer(epochs, "train: epochs", 1)
        batch_size = integer(d.get("batch_size", 32) if batch_size is None else batch_size, "train: batch_size", 1)
        max_steps_per_epoch = integer(max_steps_per_epoch, "train: max_steps_per_epoch", 0)
        seed = integer(seed if seed is not None else self._seed or 0, "train: seed", 0)
        if crop_padding is not None:
            crop_padding = integer(crop_padding, "train: crop_padding", 0)
        if validation_data is not None and not (isinstance(validation_data, (tuple, list))
                                                and len(validation_data) in (2, 3)):
            got = type(validation_data).__name__
            got += f" of {len(validation_data)}" if isinstance(validation_data, (tuple, list)) else ""
            raise TypeError(f"train: validation_data must be (X, y) or (X, y, sample_weight), got {got}")
        if validation_split is not None:
            if validation_data is not None:
                raise ValueError("train: pass validation_data or validation_split, not both")
            if isinstance(validation_split, bool) or not isinstance(validation_split, (int, float, np.floating)):
                raise TypeError(f"train: validation_split must be a fraction, got {validation_split!r}")
        for arg, cls, name in ((early_stopping, EarlyStopping, "early_stopping"),
                               (reduce_lr, ReduceLROnPlateau, "reduce_lr")):
            if arg is not None and not isinstance(arg, cls):
                raise TypeError(f"train: {name} must be an aether.{cls.__name__}, got {type(arg).__name__}")
        early_stopping, reduce_lr, lr_scheduler, hooks = _sort_callbacks(callbacks, early_stopping, reduce_lr)
        ds = self._dataset(X, y, "train")
        weights = self._class_weight(class_weight, 2 if ds.target_dim else self._classes())
        sample_weights = _sample_weights(sample_weight, len(ds), "train: sample_weight")
        val, val_weights = None, []
        if validation_data is not None:
            val = self._dataset(validation_data[0], validation_data[1], "validation")
            if len(validation_data) == 3:
                val_weights = _sample_weights(validation_data[2], len(val), "train: validation_data's sample_weight")
        if validation_split is not None:
            ds, val = _aether._split_validation(ds, float(validation_split))
            if sample_weights:  # the held-out samples are the last ones
                sample_weights, val_weights = sample_weights[:len(ds)], sample_weights[len(ds):]
        mean: List[float] = list(self._cpp.norm_mean)
        std: List[float] = list(self._cpp.norm_std)
        if np.asarray(X).dtype == np.uint8 and (not mean or self._cpp.epochs_done == 0):
            mean, std = _aether._channel_stats(ds)
        elif np.asarray(X).dtype != np.uint8 and self._cpp.epochs_done == 0:
            mean, std = [], []
        if d.get("data_init") and self._cpp.epochs_done == 0 and self._cpp.steps_done == 0:
            # The preset's data-dependent initialisation (airbench: whitening filters from X).
            _aether._preset_init(self._preset_name, self._cpp, ds, mean, std)
        # The loader's seed, in the checkpoints written while training too (checkpoint=): a model
        # loaded from one continues with this seed's data order (Model.load takes it as the default).
        info = json.loads(self._cpp.info)
        info.setdefault("written_by", "python")
        info["seed"] = seed
        self._cpp.info = json.dumps(info)
        # Several ranks (aether launch -- python ...): rank 0 alone shows progress (and the C++ side
        # saves `checkpoint` on rank 0 only).
        bar, py_bar = _progress.choose(verbose and _aether.rank() == 0)
        def on_batch(*args: Any) -> None:
            if py_bar is not None:
                py_bar(*args)
            if callback is not None:
                callback(*args)
            if hooks:  # (epoch, epochs, batch (from 1), batches, seen, loss, accuracy)
                logs = {"loss": args[5], "accuracy": args[6]}
                for cb in hooks:
                    cb.on_train_batch_end(args[2] - 1, logs)
        batch_begins = [cb for cb in hooks if cb._overrides("on_train_batch_begin")]
        def on_batch_begin(epoch: int, batch: int) -> None:
            for cb in batch_begins:
                cb.on_train_batch_begin(batch, {})
        def on_epoch_begin(epoch: int) -> None:
            for cb in hooks:
                cb.on_epoch_begin(epoch, {})
        last_logs: Dict[str, Any] = {}
        epoch_lines = py_bar if isinstance(py_bar, _progress.EpochLines) else None
        def on_epoch_end(e: Dict[str, Any]) -> None:
            if epoch_lines is not None:
                epoch_lines.epoch_end(e)
            last_logs.clear()
            last_logs.update((k, e[k]) for k in _EPOCH_LOGS if k in e)
            for cb in hooks:
                cb.on_epoch_end(int(e["epoch"]), dict(last_logs))
        for cb in hooks:
            cb.set_model(self)
            cb.set_params({"epochs": epochs, "verbose": int(bool(verbose)), "do_validation": val is not None})
        for cb in hooks:
            cb.on_train_begin({})
        if lr_scheduler is not None:
            lr_scheduler._start()
        options = {
            "epochs": epochs, "batch_size": batch_size, "shuffle": bool(shuffle), "seed": seed,
            "crop_padding": int(d.get("crop_padding", 0) if crop_padding is None else crop_padding),
            "hflip": bool(d.get("hflip", False) if hflip is None else hflip),
            "alternate_flips": bool(d.get("alternate_flips", False) if alternate_flips is None else alternate_flips),
            "crop_reflect": bool(d.get("crop_reflect", False)), "drop_last": bool(d.get("drop_last", False)),
            "mean": mean, "std": std, "progress": bar, "checkpoint": checkpoint or "",
            "max_steps": max_steps_per_epoch, "sync_batch_norm": bool(sync_batch_norm),
            "class_weight": weights,
            "sample_weight": sample_weights, "validation_sample_weight": val_weights,
            "early_stopping": None if early_stopping is None else early_stopping._options(),
            "reduce_lr": None if reduce_lr is None else reduce_lr._options()}
        val_begin, val_end = _eval_hooks(hooks, "test")
        engine_hooks = {
            "on_batch": on_batch if (py_bar or callback or hooks) else None,
            "on_batch_begin": on_batch_begin if batch_begins else None,
            "on_epoch_begin": on_epoch_begin if hooks else None,
            "on_epoch": on_epoch_end if (hooks or epoch_lines) else None,
            "lr_schedule": None if lr_scheduler is None else lr_scheduler._lr,
            "on_validation_batch_begin": val_begin, "on_validation_batch": val_end}
        result = self._cpp.train(ds, val, options, engine_hooks)
        for cb in hooks:
            cb.on_train_end(dict(last_logs))
        if reduce_lr is not None:
            reduce_lr._finish(result)
        if early_stopping is not None:
            early_stopping._finish(result)
            if py_bar is not None and early_stopping.stopped_epoch is not None:
                print(f"early stopping after epoch {early_stopping.stopped_epoch + 1}: {early_stopping.monitor} "
                      f"best {early_stopping.best:.4f} at epoch {early_stopping.best_epoch + 1}"
                      + ("; restored its weights" if early_stopping.restored else ""))
        history = History({"loss": [], "accuracy": [], "lr": [], "seconds": []})
        for e in result["epochs"]:
            history.epoch.append(int(e["epoch"]))
            for k in ("loss", "accuracy", "lr", "seconds"):
                history[k].append(e[k])
            for k in ("val_loss", "val_accuracy"):
                if k in e:
                    history.setdefault(k, []).append(e[k])
        history.params = {"epochs": epochs, "verbose": int(bool(verbose))}
        return history

    @property
    def learning_rate(self) -> float:
        """The base learning rate: the optimizer's lr, or what a LearningRateScheduler last set
        (kept in checkpoints; configure() sets the optimizer's again)."""
        return float(self._cpp.learning_rate)

    @property
    def stop_training(self) -> bool:
        """Keras' model.stop_training: set it to True (from a callback) to end train() after the
        epoch in progress, whose validation and checkpoint still happen. train() sets it to False
        when it starts."""
        return bool(self._cpp.stop_training)

    @stop_training.setter
    def stop_training(self, stop: bool) -> None:
        self._cpp.stop_training = bool(stop)

    def evaluate(self, X: ArrayLike, y: ArrayLike, batch_size: int = 256, tta: str = "none",
                 callbacks: Optional[Sequence[Callback]] = None,
                 sample_weight: Optional[ArrayLike] = None,
                 return_confusion: bool = False, verbose: bool = False) -> Dict[str, Any]:
        """{"loss", "accuracy"} (and "top5" for 5 or more classes) over X, y, in evaluation mode.
        tta: test-time augmentation of image input, "none", "flip" (the mean logits of each image and
        its mirror image) or "flip_translate" (airbench's: also one-pixel shifts). callbacks:
        aether.Callback objects whose on_test_* hooks run (aether.callbacks.Callback says when).
        sample_weight (Keras'): one weight (N,) per sample, multiplying its loss (the mean still over
        the samples); the accuracy stays unweighted. return_confusion (class labels only): also
        "confusion_matrix", int64 (K, K) counting the samples of class `label` whose largest output
        is `predicted` at [label, predicted] (what `aether train --metrics-json` writes), and
        "class_accuracy", (K,) each class's accuracy (recall), NaN for a class without samples.
        verbose (Keras' 0, 1 or 2; a bool): print the result as one line, "evaluate: accuracy
        91.23%  loss 0.2511  (10,000 samples)  1.2 s"."""
        start = time.perf_counter()
        self._finalize_for(X, "evaluate")
        batch_size = integer(batch_size, "evaluate: batch_size", 1)
        cbs = _callback_list(callbacks, "evaluate")
        ds = self._dataset(X, y, "evaluate")
        weights = _sample_weights(sample_weight, len(ds), "evaluate: sample_weight")
        for cb in cbs:
            cb.set_model(self)
            cb.set_params({"verbose": int(bool(verbose)), "epochs": 1, "steps": -(-len(ds) // batch_size)})
        labelled = self._cpp.config["loss"] != "mse" and ds.target_dim == 0  # class labels, not targets
        if return_confusion and not labelled:
            raise ValueError(f"evaluate: return_confusion needs class labels; this model's loss "
                             f"({self._cpp.config['loss']}) takes targets, which have no classes")
        r = self._cpp.evaluate(ds, batch_size, str(tta), *_eval_hooks(cbs, "test"), weights)
        out: Dict[str, Any] = {"loss": r["loss"], "accuracy": r["accuracy"]}
        if labelled and self._classes() >= 5:
            out["top5"] = r["top5"]
        if return_confusion:
            k = len(r["class_accuracy"])
            out["confusion_matrix"] = np.asarray(r["confusion"], np.int64).reshape(k, k)
            out["class_accuracy"] = np.asarray(r["class_accuracy"], np.float64)
        if verbose and _aether.rank() == 0:
            top5 = f"  top5 {100 * out['top5']:.2f}%" if "top5" in out else ""
            print(f"evaluate: accuracy {100 * out['accuracy']:.2f}%{top5}  loss {out['loss']:.4f}  "
                  f"({len(ds):,} samples)  {time.perf_counter() - start:.1f} s", flush=True)
        return out

    def predict(self, X: ArrayLike, batch_size: int = 256,
                callbacks: Optional[Sequence[Callback]] = None, verbose: bool = False) -> np.ndarray:
        """The model's outputs (N, K) for images X, as a NumPy array: class probabilities for the
        categorical cross-entropy losses, each output's sigmoid for SigmoidBinaryCrossEntropy, raw
        outputs for MeanSquaredError. callbacks: aether.Callback objects whose on_predict_* hooks
        run. verbose (Keras' 0, 1 or 2; a bool): print "predict: 10,000 samples  0.9 s"."""
        start = time.perf_counter()
        self._finalize_for(X, "predict")
        batch_size = integer(batch_size, "predict: batch_size", 1)
        cbs = _callback_list(callbacks, "predict")
        images = self._batch(X, "predict")
        if self._cpp.config["loss"] == "mse":
            ds = _aether._dataset_from_arrays(images, images, None, np.zeros((len(images), 1), np.float32), 0,
                                              "predict")
        else:
            ds = _aether._dataset_from_arrays(images, images, np.zeros(len(images), np.int64), None,
                                              self._classes(), "predict")
        for cb in cbs:
            cb.set_model(self)
            cb.set_params({"verbose": int(bool(verbose)), "epochs": 1, "steps": -(-len(images) // batch_size)})
        out = np.asarray(self._cpp.predict(ds, batch_size, *_eval_hooks(cbs, "predict")))
        if verbose and _aether.rank() == 0:
            print(f"predict: {len(images):,} samples  {time.perf_counter() - start:.1f} s", flush=True)
        return out

    def __call__(self, x: Tensor) -> Tensor:
        """The network applied to a tensor batch, with autograd (for custom training loops)."""
        self._require_finalized("__call__")
        return self._cpp.network()(x)

    def parameters(self) -> List[Tensor]:
        self._require_finalized("parameters")
        return self._cpp.network().parameters()

    def named_parameters(self) -> List[Tuple[str, Tensor]]:
        self._require_finalized("named_parameters")
        return self._cpp.network().named_parameters()

    def get_weights(self) -> List[np.ndarray]:
        """Keras' get_weights: copies of the parameters, then the buffers (BatchNorm's running
        statistics), in named_parameters() then network.named_buffers() order, as NumPy arrays."""
        self._require_finalized("get_weights")
        return [np.array(t) for t in self._cpp.get_weights()]

    def set_weights(self, weights: Sequence[ArrayLike]) -> None:
        """Keras' set_weights: gives the parameters and buffers the values of a list such as
        get_weights() returns (of this model, or of another of the same architecture). Every value
        is checked first (count, shapes, floating-point, finite, variances >= 0) and a wrong one
        changes nothing; values are copied (later changes to the arrays do not reach the model)."""
        self._require_finalized("set_weights")
        if isinstance(weights, (np.ndarray, Tensor)) or not isinstance(weights, (list, tuple)):
            raise TypeError(f"set_weights: weights must be a list of arrays (as get_weights() returns), "
                            f"got {type(weights).__name__}")
        values = []
        for i, w in enumerate(weights):
            a = np.asarray(w)
            if a.dtype.kind not in "biuf":
                raise TypeError(f"set_weights: value {i} has dtype {a.dtype}, expected numbers")
            values.append(tensor(a))
        self._cpp.set_weights(values)

    def save_weights(self, path: PathArg) -> None:
        """Keras' save_weights: the parameters and buffers by name as a safetensors file (readable
        by the safetensors package, PyTorch, ...), written atomically; NaN/Inf weights are refused."""
        self._require_finalized("save_weights")
        self._cpp.save_weights(path_arg(path, "save_weights: path"))

    def load_weights(self, path: PathArg) -> None:
        """Keras' load_weights: the weights of a save_weights file (this model's architecture:
        every weight once, by name, and nothing else), checked as set_weights checks them."""
        self._require_finalized("load_weights")
        self._cpp.load_weights(path_arg(path, "load_weights: path"))

    @property
    def network(self) -> "_aether.Sequential":
        return self._cpp.network()

    @property
    def epochs_done(self) -> int:
        return self._cpp.epochs_done

    def summary(self, print_fn: Optional[Callable[[str], None]] = print) -> Optional[str]:
        """The layers with their output shapes and parameter counts, given to print_fn (Keras'
        summary(): printed, returning None, so that a notebook or the REPL shows it once); with
        print_fn=None the text is returned instead."""
        self._require_finalized("summary")
        text = self._cpp.summary()
        if print_fn is None:
            return text
        print_fn(text)
        return None

    # ---- files ----------------------------------------------------------------------------------
    def save(self, path: PathArg) -> None:
        """Writes a .aether checkpoint (atomically): the same format the C++ API and CLI read."""
        self._require_finalized("save")
        info = json.loads(self._cpp.info)
        info.setdefault("written_by", "python")
        info.setdefault("seed", self._seed)  # train() records the seed it used
        self._cpp.info = json.dumps(info)
        self._cpp.save(path_arg(path, "save: path"))

    @classmethod
    def load(cls, path: PathArg) -> "Model":
        """Reads a .aether checkpoint written by Python, the C++ API or the CLI."""
        m = cls()
        m._cpp = _aether._Model.load(path_arg(path, "load: path"))
        m._finalized = True
        from .losses import (CategoricalCrossEntropy, MeanSquaredError, SigmoidBinaryCrossEntropy,
                             SoftmaxCategoricalCrossEntropy)
        cfg = m._cpp.config
        m._loss = {"cross_entropy": SoftmaxCategoricalCrossEntropy(cfg["label_smoothing"]),
                   "categorical_cross_entropy": CategoricalCrossEntropy(),
                   "mse": MeanSquaredError(),
                   "binary_cross_entropy": SigmoidBinaryCrossEntropy(cfg["label_smoothing"])}[cfg["loss"]]
        info = json.loads(m._cpp.info)
        m._seed = info.get("seed", 0)
        return m
