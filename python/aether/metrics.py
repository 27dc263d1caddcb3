"""Accuracy metrics, with Aether-ML's names."""

from __future__ import annotations

from typing import Any, Dict, Optional


class CategoricalAccuracy:
    """The fraction of samples whose largest output is the label's class."""

    def config(self) -> Dict[str, Any]:
        return {"metrics": ["accuracy"]}

    def __repr__(self) -> str:
        return "CategoricalAccuracy()"


class RegressionAccuracy:
    """The fraction of outputs within `precision` of their targets; precision None:
    std(training targets) / 250, fixed by the first train()."""

    def __init__(self, precision: Optional[float] = None):
        if precision is not None and not precision > 0:
            raise ValueError(f"precision must be > 0, got {precision}")
        self.precision = precision

    def config(self) -> Dict[str, Any]:
        return {"metrics": ["accuracy"], "regression_precision": float(self.precision or 0.0)}

    def __repr__(self) -> str:
        return f"RegressionAccuracy(precision={self.precision!r})"
