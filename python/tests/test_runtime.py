"""The engine and the interpreter: the GIL is released while training runs, Ctrl-C stops training
with KeyboardInterrupt and keeps the last checkpoint, and progress goes to a terminal or Jupyter
and nowhere else."""

import os
import pty
import re
import signal
import subprocess
import sys
import textwrap
import threading
import time
import types

import numpy as np
import pytest

import aether as ae
from aether import _progress
from conftest import small_cnn

# The child restores Python's own Ctrl-C handler first: a process started in the background by a
# non-interactive shell (`cmd &`, as CI may run the suite) inherits SIGINT ignored, and Python then
# installs no handler at all, so Ctrl-C would do nothing whatever aether does. It trains "forever"
# (10**6 epochs), so a Ctrl-C that went unseen shows as a timeout, never as a finished run.
CHILD = textwrap.dedent("""
    import signal
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import sys
    import numpy as np
    import aether as ae
    (x, y), _ = ae.datasets.fashion_mnist()
    m = ae.Model(); m.manual_seed(0)
    m.add(ae.Conv2d(1, 16, 3, padding="same")); m.add(ae.ReLU()); m.add(ae.GlobalAvgPool()); m.add(ae.Dense(16, 10))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.Adam())
    m.finalize((28, 28, 1))
    def step(epoch, epochs, batch, batches, seen, loss, acc):
        print(f"step {epoch} {batch}", flush=True)
    m.train(x[:2000], y[:2000], epochs=10**6, batch_size=100, checkpoint=sys.argv[1], verbose=VERBOSE,
            callback=step)
""")


def test_ctrl_c_raises_keyboard_interrupt_and_keeps_the_checkpoint(tmp_path):
    ck = tmp_path / "ck.aether"
    p = subprocess.Popen([sys.executable, "-c", CHILD.replace("VERBOSE", "False"), str(ck)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        for line in p.stdout:  # wait until the second epoch is under way (the first is saved)
            if line.startswith("step 1 "):
                break
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=300)
    finally:
        p.kill()
    assert p.returncode != 0
    assert "KeyboardInterrupt" in err, err
    m = ae.Model.load(ck)  # intact: the last finished epoch
    assert m.epochs_done >= 1


def test_the_gil_is_released_while_training(fmnist):
    x, y, _, _ = fmnist
    m = small_cnn()
    m.finalize((28, 28, 1))
    ticks = []
    stop = threading.Event()

    def spin():
        while not stop.is_set():
            ticks.append(1)
            time.sleep(0.001)

    t = threading.Thread(target=spin)
    t.start()
    try:
        before = len(ticks)
        m.train(x[:2000], y[:2000], epochs=1, batch_size=100, verbose=False)
        during = len(ticks) - before
    finally:
        stop.set()
        t.join()
    assert during > 20  # a Python thread kept running while the engine trained


def test_progress_is_one_line_per_epoch_when_not_a_terminal(fmnist, capfd):
    """A pipe or a log file (python train.py > log) gets a line per epoch on stdout, as Keras writes
    when its output is not interactive; it got nothing before. verbose=False stays silent."""
    x, y, xt, yt = fmnist
    m = small_cnn()
    m.finalize((28, 28, 1))
    h = m.train(x[:300], y[:300], epochs=2, batch_size=100, verbose=True, validation_data=(xt[:100], yt[:100]))
    out, err = capfd.readouterr()
    lines = out.splitlines()
    assert err == "" and len(lines) == 2, out
    for e, line in enumerate(lines):
        assert re.fullmatch(rf"epoch {e + 1}/2  3/3  [\d,]+ img/s  loss {h['loss'][e]:.4f}  "
                            rf"acc {100 * h['accuracy'][e]:.2f}%  \d+\.\d s  val_loss {h['val_loss'][e]:.4f}  "
                            rf"val_acc {100 * h['val_accuracy'][e]:.2f}%", line), line
    m.train(x[:300], y[:300], epochs=3, batch_size=100, verbose=False)
    assert capfd.readouterr() == ("", "")


def test_progress_bar_in_a_terminal(tmp_path):
    code = CHILD.replace("epochs=10**6", "epochs=1").replace("x[:2000], y[:2000]", "x[:300], y[:300]").replace("VERBOSE", "True")
    pid, fd = pty.fork()
    if pid == 0:  # the child's stdin/stdout/stderr are the terminal
        os.execv(sys.executable, [sys.executable, "-c", code, str(tmp_path / "t.aether")])
    chunks = []
    while True:
        try:
            data = os.read(fd, 4096)
        except OSError:
            break
        if not data:
            break
        chunks.append(data)
    _, status = os.waitpid(pid, 0)
    text = b"".join(chunks).decode(errors="replace")
    assert os.WEXITSTATUS(status) == 0, text
    assert "epoch 1/1" in text and "loss" in text


def test_progress_in_jupyter(monkeypatch, fmnist):
    updates = []

    class Handle:
        def update(self, obj):
            updates.append(obj)

    display_mod = types.ModuleType("IPython.display")
    display_mod.HTML = lambda s: s
    display_mod.display = lambda obj, display_id=None: Handle()
    ipython = types.ModuleType("IPython")
    ipython.display = display_mod
    ipython.get_ipython = lambda: type("ZMQInteractiveShell", (), {})()
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display_mod)
    monkeypatch.setattr(_progress, "stderr_is_terminal", lambda: False)
    assert _progress.in_notebook()
    x, y, _, _ = fmnist
    m = small_cnn()
    m.finalize((28, 28, 1))
    m.train(x[:300], y[:300], epochs=1, batch_size=100, verbose=True)
    assert updates and "epoch 1/1" in updates[-1] and "3/3" in updates[-1]
