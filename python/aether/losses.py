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


class SigmoidBinaryCrossEntropy(Loss):
    """A sigmoid and binary cross-entropy in one, on each of the last layer's logits (Keras'
    BinaryCrossentropy(from_logits=True)): binary classification (one output, y (N,) of 0/1) and
    multi-label classification (K outputs, y (N, K) of probabilities in [0, 1]). The accuracy is
    then Keras' binary accuracy (logit > 0 against y > 0.5); class labels (N,) for K > 1 outputs are
    one-hot targets, scored by argmax. predict() gives sigmoid probabilities. The model must not end
    with a sigmoid or SoftMax itself. label_smoothing s trains on targets (1 - s) y + s / 2."""

    def __init__(self, label_smoothing: float = 0.0):
        if not 0 <= label_smoothing < 1:
            raise ValueError(f"label_smoothing must be in [0, 1), got {label_smoothing}")
        self.label_smoothing = float(label_smoothing)

    def config(self):
        return {"loss": "binary_cross_entropy", "label_smoothing": self.label_smoothing}


class MeanSquaredError(Loss):
    """Mean squared error against float targets (N, K) or (N,) (regression)."""

    regression = True

    def config(self):
        return {"loss": "mse"}
