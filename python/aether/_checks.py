"""Argument checks shared by the layers and the Model: a clear error at the call that was wrong."""

from __future__ import annotations

from typing import Any

import numpy as np


def integer(v: Any, what: str, least: int) -> int:
    """v as an int, if it is one (Python or NumPy, not bool) and at least `least`."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {v!r}")
    if v < least:
        raise ValueError(f"{what} must be >= {least}, got {v}")
    return int(v)
