"""Losses, with Aether-ML's names. Each maps onto aether's ModelConfig.loss."""

from __future__ import annotations

from typing import Any, Dict


class Loss:
    regression = False

    def config(self) -> Dict[str, Any]:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{k}={v!r}' for k, v in vars(self).items())})"


class SoftmaxCategoricalCrossEntropy(Loss):
    """Softmax and cross-entropy in one, on the last layer's logits; labels as classes or one-hot."""

    def __init__(self, label_smoothing: float = 0.0):
        if not 0 <= label_smoothing < 1:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        self.label_smoothing = float(label_smoothing)

    def config(self):
        return {"loss": "cross_entropy", "label_smoothing": self.label_smoothing}


class CategoricalCrossEntropy(Loss):
    """Cross-entropy of probabilities (the model ends with SoftMax)."""

    def config(self):
        return {"loss": "categorical_cross_entropy"}


class MeanSquaredError(Loss):
    """Mean squared error against float targets (N, K) or (N,) (regression)."""

    regression = True

    def config(self):
        return {"loss": "mse"}
