"""Argument checks shared by the layers and the Model: a clear error at the call that was wrong."""

from __future__ import annotations

import os
from typing import Any, Union

import numpy as np

# What open() takes as a file's name.
PathArg = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


def integer(v: Any, what: str, least: int) -> int:
    """v as an int, if it is one (Python or NumPy, not bool) and at least `least`."""
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise TypeError(f"{what} must be an int, got {v!r}")
    if v < least:
        raise ValueError(f"{what} must be >= {least}, got {v}")
    return int(v)


def path(v: Any, what: str) -> str:
    """v as a path string, if it is one as open() takes it: a str, bytes (decoded as the file
    system's names are) or an os.PathLike such as pathlib.Path; not empty."""
    if not isinstance(v, (str, bytes, os.PathLike)):
        raise TypeError(f"{what} must be a path (str, bytes or os.PathLike), got {type(v).__name__}")
    p = os.fsdecode(v)
    if not p:
        raise ValueError(f"{what} must not be empty")
    return p
