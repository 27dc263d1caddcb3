"""Where training progress goes: a terminal gets aether's own bar (drawn by the C++ loop on
stderr); Jupyter gets an HTML line updated in place; anything else (a pipe, a log file) one line per
epoch on sys.stdout, as Keras writes when its output is not interactive."""

from __future__ import annotations

import sys
import time
from typing import Callable, Optional


def in_notebook() -> bool:
    ipython = sys.modules.get("IPython")
    if ipython is None:
        return False
    try:
        shell = ipython.get_ipython()
    except Exception:  # pragma: no cover - IPython without a shell
        return False
    return shell is not None and type(shell).__name__ == "ZMQInteractiveShell"


def stderr_is_terminal() -> bool:
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class NotebookBar:
    """A progress line in a Jupyter cell, redrawn at most 5 times a second."""

    def __init__(self) -> None:
        from IPython.display import HTML, display

        self._html = HTML
        self._handle = display(HTML(""), display_id=True)
        self._last = 0.0
        self._start = time.monotonic()

    def __call__(self, epoch: int, epochs: int, batch: int, batches: int, seen: int, loss: float,
                 accuracy: float) -> None:
        now = time.monotonic()
        if batch != 1 and batch != batches and now - self._last < 0.2:
            return
        if batch == 1:
            self._start = now
        self._last = now
        frac = batch / max(batches, 1)
        rate = seen / max(now - self._start, 1e-9)
        self._handle.update(self._html(
            f"<pre>epoch {epoch + 1}/{epochs} [{'#' * int(30 * frac):<30}] {batch}/{batches} "
            f"loss {loss:.4f} acc {100 * accuracy:.2f}% {rate:,.0f} img/s</pre>"))


class EpochLines:
    """One line per epoch, written when it ends (validation included) and flushed:
    "epoch 1/2  32/32  4,133 img/s  loss 0.8765  acc 70.47%  1.0 s  val_loss 0.5667  val_acc 80.20%".
    Before, a pipe or a log file (python train.py > log) got nothing."""

    def __init__(self) -> None:
        self._batches = 0
        self._seen = 0

    def __call__(self, epoch: int, epochs: int, batch: int, batches: int, seen: int, loss: float,
                 accuracy: float) -> None:
        self._epochs, self._batches, self._seen = epochs, batch, seen

    def epoch_end(self, e: dict) -> None:
        seconds = float(e.get("seconds", 0.0))
        line = (f"epoch {int(e['epoch']) + 1}/{self._epochs}  {self._batches}/{self._batches}  "
                f"{self._seen / max(seconds, 1e-9):,.0f} img/s  loss {e['loss']:.4f}  "
                f"acc {100 * e['accuracy']:.2f}%  {seconds:.1f} s")
        if "val_loss" in e:
            line += f"  val_loss {e['val_loss']:.4f}  val_acc {100 * e['val_accuracy']:.2f}%"
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def choose(verbose: bool) -> "tuple[bool, Optional[Callable]]":
    """(draw aether's terminal bar, a Python callback for each step; an EpochLines also has
    epoch_end(epoch logs))."""
    if not verbose:
        return False, None
    if stderr_is_terminal():
        return True, None
    if in_notebook():
        return False, NotebookBar()
    return False, EpochLines()
