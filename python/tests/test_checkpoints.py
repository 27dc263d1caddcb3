"""Checkpoints across Python, the C++ API and the CLI; bad files get clear errors and lose nothing."""

import json
import os
import subprocess

import numpy as np
import pytest

import aether as ae
from conftest import small_cnn

FMNIST = "/usr/share/datasets/fashion-mnist"


def trained(fmnist, seed=42):
    x, y, _, _ = fmnist
    m = small_cnn(seed=seed)
    m.finalize((28, 28, 1))
    m.train(x[:1000], y[:1000], epochs=1, batch_size=100, verbose=False)
    return m


def cli_predict(cli, checkpoint, n):
    """(classes, probabilities) that `aether predict` prints for the first n test images."""
    images = os.path.join(FMNIST, "t10k-images-idx3-ubyte.gz")
    if not os.path.exists(images):
        images = images[:-3]
    out = subprocess.run([cli, "predict", images, "--checkpoint", str(checkpoint), "--limit", str(n)],
                         check=True, capture_output=True, text=True).stdout
    rows = [l.split("\t") for l in out.splitlines() if l.count("\t") >= 2]  # then the class name, if saved
    assert len(rows) == n, out
    return np.array([int(r[1].split()[1]) for r in rows]), np.array([float(r[2][2:]) for r in rows])


def test_save_load_round_trip(tmp_path, fmnist):
    _, _, xt, yt = fmnist
    m = trained(fmnist)
    path = tmp_path / "m.aether"
    m.save(path)
    again = ae.Model.load(path)
    np.testing.assert_array_equal(m.predict(xt[:100]), again.predict(xt[:100]))
    assert again.evaluate(xt, yt) == m.evaluate(xt, yt)
    assert again.epochs_done == 1
    # training continues from the checkpoint (epochs counts from the start)
    x, y, _, _ = fmnist
    h = again.train(x[:1000], y[:1000], epochs=2, batch_size=100, verbose=False)
    assert len(h["loss"]) == 1 and again.epochs_done == 2


def test_python_checkpoint_in_the_cli_gives_the_same_predictions(tmp_path, fmnist, cli):
    _, _, xt, _ = fmnist
    m = trained(fmnist)
    path = tmp_path / "py.aether"
    m.save(path)
    classes, probs = cli_predict(cli, path, 20)
    p = m.predict(xt[:20])
    np.testing.assert_array_equal(classes, p.argmax(axis=1))
    np.testing.assert_allclose(probs, p.max(axis=1), atol=6e-4)  # the CLI prints 3 decimals
    # and `aether evaluate` reads it
    r = subprocess.run([cli, "evaluate", "--checkpoint", str(path), "--dataset", "fashion-mnist"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_cli_checkpoint_in_python_gives_the_same_predictions(tmp_path, fmnist, cli):
    _, _, xt, _ = fmnist
    path = tmp_path / "cli.aether"
    subprocess.run([cli, "train", "--model", "lenet", "--epochs", "1", "--max-steps-per-epoch", "30", "--quiet",
                    "--save", str(path)], check=True, capture_output=True)
    m = ae.Model.load(path)
    classes, probs = cli_predict(cli, path, 20)
    p = m.predict(xt[:20])
    np.testing.assert_array_equal(classes, p.argmax(axis=1))
    np.testing.assert_allclose(probs, p.max(axis=1), atol=6e-4)


def test_corrupt_and_missing_checkpoints_raise_clear_errors(tmp_path, fmnist):
    with pytest.raises(RuntimeError, match="nothing.aether"):
        ae.Model.load(tmp_path / "nothing.aether")
    bad = tmp_path / "bad.aether"
    bad.write_bytes(b"PK\x03\x04 not really a zip file")
    with pytest.raises(RuntimeError, match="bad.aether"):
        ae.Model.load(bad)
    good = tmp_path / "good.aether"
    m = trained(fmnist)
    m.save(good)
    data = bytearray(good.read_bytes())
    data[len(data) // 2: len(data) // 2 + 64] = b"\xff" * 64
    bad.write_bytes(bytes(data))
    with pytest.raises(RuntimeError, match="bad.aether"):
        ae.Model.load(bad)


def test_save_refuses_to_write_into_a_missing_folder_and_keeps_old_files(tmp_path, fmnist):
    m = trained(fmnist)
    with pytest.raises(RuntimeError):
        m.save(tmp_path / "no" / "such" / "dir" / "m.aether")
    path = tmp_path / "m.aether"
    m.save(path)
    before = path.read_bytes()
    with pytest.raises(RuntimeError):
        m.save(tmp_path)  # a directory, not a file
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.aether"]  # no half-written leftovers


def test_a_run_resumed_from_its_training_checkpoint_continues_as_one_run(tmp_path, fmnist):
    """train(checkpoint=) then Model.load(...).train(): the same data order and weights as one run
    (the checkpoint records the loader's seed; it used to resume with seed 0)."""
    x, y, xt, _ = fmnist

    def model():  # a constant learning rate: the schedule does not depend on the epochs asked for
        m = small_cnn(seed=5)
        m.finalize((28, 28, 1))
        return m

    whole = model()
    whole.train(x[:600], y[:600], epochs=3, batch_size=100, seed=7, verbose=False)
    ck = str(tmp_path / "run.aether")
    model().train(x[:600], y[:600], epochs=1, batch_size=100, seed=7, checkpoint=ck, verbose=False)
    resumed = ae.Model.load(ck)
    resumed.train(x[:600], y[:600], epochs=3, batch_size=100, verbose=False)
    np.testing.assert_array_equal(resumed.predict(xt[:100]), whole.predict(xt[:100]))
    path = tmp_path / "saved.aether"
    resumed.save(path)
    assert json.loads(ae.Model.load(path)._cpp.info)["seed"] == 7
