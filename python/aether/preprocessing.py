"""Preprocessing of NumPy arrays, with Aether-ML's names. Each transform is a callable."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

import numpy as np

from ._tensor import tensor
from ._aether import Tensor


class Rescale:
    """x * scale + offset, as float32 (Rescale(1 / 255) maps pixels to [0, 1])."""

    def __init__(self, scale: float = 1.0 / 255.0, offset: float = 0.0):
        self.scale, self.offset = float(scale), float(offset)

    def __call__(self, x: np.ndarray) -> np.ndarray:
        return (np.asarray(x, dtype=np.float32) * np.float32(self.scale) + np.float32(self.offset)).astype(np.float32)

    def __repr__(self) -> str:
        return f"Rescale(scale={self.scale}, offset={self.offset})"


class StandardScaler:
    """(x - mean) / std per channel (the last axis), with mean and std from fit() (or given)."""

    def __init__(self, mean: Optional[Sequence[float]] = None, std: Optional[Sequence[float]] = None,
                 epsilon: float = 1e-7):
        if (mean is None) != (std is None):
            raise ValueError("StandardScaler: give both mean and std, or neither (then fit(x) finds them)")
        self.mean = None if mean is None else np.atleast_1d(np.asarray(mean, dtype=np.float32))
        self.std = None if std is None else np.atleast_1d(np.asarray(std, dtype=np.float32))
        if self.mean is not None:
            if self.mean.ndim != 1 or self.mean.shape != self.std.shape:
                raise ValueError(f"StandardScaler: mean and std must be one value per channel, got shapes "
                                 f"{self.mean.shape} and {self.std.shape}")
            if not (np.isfinite(self.mean).all() and np.isfinite(self.std).all() and (self.std >= 0).all()):
                raise ValueError("StandardScaler: mean must be finite and std finite and >= 0")
        self.epsilon = float(epsilon)
        if not (self.epsilon >= 0 and np.isfinite(self.epsilon)):
            raise ValueError(f"StandardScaler: epsilon must be finite and >= 0, got {epsilon}")

    def fit(self, x: np.ndarray) -> "StandardScaler":
        a = self._channels_last(x, "fit", np.float64)
        if a.size == 0:
            raise ValueError(f"StandardScaler.fit: the data of shape {a.shape} is empty")
        axes = tuple(range(a.ndim - 1))
        self.mean = a.mean(axis=axes).astype(np.float32)
        self.std = a.std(axis=axes).astype(np.float32)
        return self

    def transform(self, x: np.ndarray) -> np.ndarray:
        a = self._channels_last(x, "transform", np.float32)
        return ((a - self.mean) / (self.std + np.float32(self.epsilon))).astype(np.float32)

    def fit_transform(self, x: np.ndarray) -> np.ndarray:
        return self.fit(x).transform(x)

    def inverse_transform(self, x: np.ndarray) -> np.ndarray:
        a = self._channels_last(x, "inverse_transform", np.float32)
        return (a * (self.std + np.float32(self.epsilon)) + self.mean).astype(np.float32)

    def _channels_last(self, x: np.ndarray, what: str, dtype) -> np.ndarray:
        """x as an array of `dtype` whose last axis holds the channels (the fitted number of them)."""
        a = np.asarray(x, dtype=dtype)
        if a.ndim == 0:
            raise ValueError(f"StandardScaler.{what}: expected an array whose last axis holds the channels, "
                             "got a scalar")
        if what == "fit":
            return a
        if self.mean is None:
            raise ValueError(f"StandardScaler.{what}: call fit(x) first (or give mean and std)")
        if a.shape[-1] != self.mean.shape[-1]:
            raise ValueError(f"StandardScaler.{what}: fitted for {self.mean.shape[-1]} channels, got an array "
                             f"of shape {a.shape} ({a.shape[-1]} on its last axis)")
        return a

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.mean is None:
            self.fit(x)
        return self.transform(x)

    def __repr__(self) -> str:
        return f"StandardScaler(mean={self.mean}, std={self.std})"


class ToTensor:
    """A NumPy array -> aether.Tensor (float32 by default; no copy when it already is one)."""

    def __init__(self, dtype: Any = "float32", device: Optional[str] = None):
        self.dtype, self.device = dtype, device

    def __call__(self, x: np.ndarray) -> Tensor:
        return tensor(np.asarray(x), dtype=self.dtype, device=self.device)


class Compose:
    """Applies transforms in order: Compose([Rescale(), StandardScaler()])(x)."""

    def __init__(self, transforms: Sequence[Callable]):
        self.transforms = list(transforms)

    def __call__(self, x):
        for t in self.transforms:
            x = t(x)
        return x

    def __repr__(self) -> str:
        return f"Compose({self.transforms!r})"
