"""Model.train(callbacks=[...]): Keras' Callback hooks, in order and with the epoch's numbers;
model.stop_training; LambdaCallback, ModelCheckpoint and CSVLogger; EarlyStopping and
ReduceLROnPlateau in the list; LearningRateScheduler; the on_test_* hooks of evaluate and of train's
validation, and predict's on_predict_*; errors."""
import csv

import numpy as np
import pytest

import aether as ae
from conftest import small_cnn


def data(fmnist, n=300):
    x, y, _, _ = fmnist
    return x[:n], y[:n], x[1000:1200], y[1000:1200]


def finalized(seed=5):
    m = small_cnn(seed=seed)
    m.finalize((28, 28, 1))
    return m


class Recorder(ae.Callback):
    def __init__(self):
        super().__init__()
        self.calls = []

    def on_train_begin(self, logs=None):
        self.calls.append(("train_begin", dict(logs)))

    def on_epoch_begin(self, epoch, logs=None):
        self.calls.append(("epoch_begin", epoch, self.model.epochs_done))

    def on_train_batch_begin(self, batch, logs=None):
        self.calls.append(("batch_begin", batch, self.model._cpp.steps_done))

    def on_train_batch_end(self, batch, logs=None):
        self.calls.append(("batch_end", batch, dict(logs)))

    def on_epoch_end(self, epoch, logs=None):
        self.calls.append(("epoch_end", epoch, dict(logs)))

    def on_train_end(self, logs=None):
        self.calls.append(("train_end", dict(logs)))


def test_hooks_run_in_order_with_the_epochs_numbers(fmnist):
    x, y, xv, yv = data(fmnist)
    m = finalized()
    rec = Recorder()
    h = m.train(x, y, epochs=2, batch_size=100, validation_data=(xv, yv), callbacks=[rec], verbose=False)
    assert rec.model is m
    assert rec.params == {"epochs": 2, "verbose": 0, "do_validation": True}
    names = [c[0] for c in rec.calls]
    assert names == (["train_begin"] + (["epoch_begin"] + ["batch_begin", "batch_end"] * 3 + ["epoch_end"]) * 2
                     + ["train_end"])
    # Before each step: the steps done so far.
    assert [c[1:] for c in rec.calls if c[0] == "batch_begin"] == [(0, 0), (1, 1), (2, 2), (0, 3), (1, 4), (2, 5)]
    lam = []
    finalized().train(x, y, epochs=1, batch_size=100, verbose=False,
                      callbacks=[ae.LambdaCallback(on_train_batch_begin=lambda batch, logs: lam.append(batch))])
    assert lam == [0, 1, 2]
    begins = [c for c in rec.calls if c[0] == "epoch_begin"]
    assert begins == [("epoch_begin", 0, 0), ("epoch_begin", 1, 1)]
    assert [c[1] for c in rec.calls if c[0] == "batch_end"] == [0, 1, 2, 0, 1, 2]
    ends = [c for c in rec.calls if c[0] == "epoch_end"]
    for e, (_, epoch, logs) in enumerate(ends):
        assert epoch == e
        assert set(logs) == {"loss", "accuracy", "val_loss", "val_accuracy", "lr", "seconds"}
        for k in ("loss", "accuracy", "val_loss", "val_accuracy", "lr", "seconds"):
            assert logs[k] == h[k][e]
    # A step's logs are the epoch's means so far: after the last step, the epoch's.
    last_steps = [c[2] for c in rec.calls if c[0] == "batch_end"][2::3]
    for e, logs in enumerate(last_steps):
        assert logs["loss"] == pytest.approx(h["loss"][e], rel=1e-12)
        assert logs["accuracy"] == pytest.approx(h["accuracy"][e], rel=1e-12)
    assert rec.calls[-1] == ("train_end", ends[-1][2])


def test_stop_training_from_a_callback_ends_after_that_epoch(fmnist, tmp_path):
    x, y, _, _ = data(fmnist)
    m = finalized()
    ckpt = str(tmp_path / "run.aether")

    def stop_after_two(epoch, logs):
        if epoch == 1:
            m.stop_training = True

    h = m.train(x, y, epochs=5, batch_size=100, checkpoint=ckpt, verbose=False,
                callbacks=[ae.LambdaCallback(on_epoch_end=stop_after_two)])
    assert len(h["loss"]) == 2 and m.epochs_done == 2 and m.stop_training
    ref = finalized()
    ref.train(x, y, epochs=2, batch_size=100, verbose=False)
    np.testing.assert_array_equal(m.predict(x[:50]), ref.predict(x[:50]))
    assert ae.Model.load(ckpt).epochs_done == 2
    # The next train() clears the request and continues. The history is also Keras' History.
    h = m.train(x, y, epochs=3, batch_size=100, verbose=False)
    assert len(h["loss"]) == 1 and m.epochs_done == 3 and not m.stop_training
    assert h.history is h and h.epoch == [2] and h.params["epochs"] == 3


def test_an_exception_in_a_hook_stops_at_once_and_the_checkpoint_keeps_the_epoch(fmnist, tmp_path):
    x, y, _, _ = data(fmnist)
    m = finalized()
    ckpt = str(tmp_path / "run.aether")

    def fail(epoch, logs):
        if epoch == 1:
            raise KeyError("from the callback")

    with pytest.raises(KeyError, match="from the callback"):
        m.train(x, y, epochs=4, batch_size=100, checkpoint=ckpt, verbose=False,
                callbacks=[ae.LambdaCallback(on_epoch_end=fail)])
    assert m.epochs_done == 2
    assert ae.Model.load(ckpt).epochs_done == 2


def test_model_checkpoint_saves_each_epoch_or_the_best(fmnist, tmp_path):
    """Validating on labels moved to the next class, the validation loss rises as the model learns
    the true ones: save_best_only writes after the epochs that lowered it."""
    x, y, xv, yv = data(fmnist)
    yv = (yv + 1) % 10
    m = finalized()
    every = ae.ModelCheckpoint(str(tmp_path / "new" / "e{epoch:02d}-{val_accuracy:.3f}.aether"))
    best = ae.ModelCheckpoint(str(tmp_path / "best.aether"), monitor="val_loss", save_best_only=True)
    h = m.train(x, y, epochs=4, batch_size=100, validation_data=(xv, yv), verbose=False, callbacks=[every, best])
    assert every.saved == [str(tmp_path / "new" / f"e{e + 1:02d}-{h['val_accuracy'][e]:.3f}.aether") for e in range(4)]
    for e, path in enumerate(every.saved):
        assert ae.Model.load(path).epochs_done == e + 1
    improved = [e for e in range(4) if h["val_loss"][e] < min(h["val_loss"][:e], default=np.inf)]
    assert len(best.saved) == len(improved) < 4
    assert best.best == min(h["val_loss"])
    saved = ae.Model.load(str(tmp_path / "best.aether"))
    assert saved.epochs_done == improved[-1] + 1
    assert saved.evaluate(xv, yv)["loss"] == pytest.approx(best.best, rel=1e-6)


def test_model_checkpoint_errors(fmnist, tmp_path):
    x, y, xv, yv = data(fmnist)
    m = finalized()
    with pytest.raises(ValueError, match="ModelCheckpoint monitors val_loss, which needs validation_data"):
        m.train(x, y, epochs=1, batch_size=100, verbose=False,
                callbacks=[ae.ModelCheckpoint(str(tmp_path / "b.aether"), save_best_only=True)])
    assert m.epochs_done == 0
    with pytest.raises(ValueError, match="names what the epoch's logs .* do not have: 'val_loss'"):
        m.train(x, y, epochs=1, batch_size=100, verbose=False,
                callbacks=[ae.ModelCheckpoint(str(tmp_path / "{val_loss}.aether"))])
    with pytest.raises(ValueError, match="monitor must be one of"):
        ae.ModelCheckpoint("a.aether", monitor="val_top5")


def test_csv_logger_writes_a_row_per_epoch_and_appends(fmnist, tmp_path):
    x, y, xv, yv = data(fmnist)
    m = finalized()
    path = tmp_path / "log.csv"
    h = m.train(x, y, epochs=2, batch_size=100, validation_data=(xv, yv), verbose=False,
                callbacks=[ae.CSVLogger(str(path))])
    h2 = m.train(x, y, epochs=3, batch_size=100, validation_data=(xv, yv), verbose=False,
                 callbacks=[ae.CSVLogger(str(path), append=True)])
    rows = list(csv.reader(open(path)))
    assert rows[0] == ["epoch", "accuracy", "loss", "lr", "seconds", "val_accuracy", "val_loss"]
    assert [int(r[0]) for r in rows[1:]] == [0, 1, 2]
    for r, (hist, e) in zip(rows[1:], ((h, 0), (h, 1), (h2, 0))):
        for k, v in zip(rows[0][1:], r[1:]):
            assert float(v) == hist[k][e], k
    # Without append, a new file.
    m.train(x, y, epochs=4, batch_size=100, verbose=False, callbacks=[ae.CSVLogger(str(path))])
    rows = list(csv.reader(open(path)))
    assert rows[0] == ["epoch", "accuracy", "loss", "lr", "seconds"] and [r[0] for r in rows[1:]] == ["3"]


def test_early_stopping_and_reduce_lr_in_the_list(fmnist):
    x, y, xv, yv = data(fmnist)
    yv = (yv + 1) % 10
    es, rl = ae.EarlyStopping(patience=1), ae.ReduceLROnPlateau(patience=1, factor=0.5)
    h = finalized().train(x, y, epochs=12, batch_size=100, validation_data=(xv, yv), verbose=False,
                          callbacks=[es, rl])
    assert es.stopped_epoch is not None and len(h["loss"]) == es.stopped_epoch + 1 < 12
    assert rl.reductions and rl.lrs == h["lr"]


def test_callback_errors(fmnist):
    x, y, _, _ = data(fmnist)
    m = finalized()
    with pytest.raises(TypeError, match="callbacks must be a list of aether.Callback, got Recorder"):
        m.train(x, y, callbacks=Recorder(), verbose=False)
    with pytest.raises(TypeError, match="callbacks must be aether.Callback objects, got function"):
        m.train(x, y, callbacks=[lambda: None], verbose=False)
    with pytest.raises(ValueError, match="one EarlyStopping at most"):
        m.train(x, y, callbacks=[ae.EarlyStopping(monitor="loss")], early_stopping=ae.EarlyStopping(monitor="loss"),
                verbose=False)
    with pytest.raises(ValueError, match="one ReduceLROnPlateau at most"):
        m.train(x, y, callbacks=[ae.ReduceLROnPlateau(monitor="loss"), ae.ReduceLROnPlateau(monitor="loss")],
                verbose=False)
    with pytest.raises(ValueError, match="CSVLogger: separator must be one character, got ';;'"):
        ae.CSVLogger("log.csv", separator=";;")
    with pytest.raises(TypeError, match="LambdaCallback: on_epoch_end must be callable, got int"):
        ae.LambdaCallback(on_epoch_end=3)
    assert m.epochs_done == 0


def test_a_callback_may_evaluate_but_not_train_again_or_reconfigure(fmnist):
    x, y, xv, yv = data(fmnist)
    m = finalized()
    seen = []

    class Meddler(ae.Callback):
        def on_epoch_begin(self, epoch, logs=None):
            seen.append(self.model.evaluate(xv, yv)["loss"])
            for attempt in (lambda: self.model.train(x, y, epochs=4, verbose=False),
                            lambda: self.model.configure(loss=ae.SoftmaxCategoricalCrossEntropy(),
                                                         optimizer=ae.SGD(lr=0.1)),
                            lambda: self.model.set_precision("bf16")):
                with pytest.raises((RuntimeError, ValueError), match="the model is training"):
                    attempt()

    h = m.train(x, y, epochs=2, batch_size=100, verbose=False, callbacks=[Meddler()])
    assert len(h["loss"]) == 2 and len(seen) == 2 and m.epochs_done == 2
    ref = finalized()
    ref.train(x, y, epochs=2, batch_size=100, verbose=False)
    np.testing.assert_array_equal(m.predict(x[:50]), ref.predict(x[:50]))


def test_learning_rate_scheduler_sets_each_epochs_rate_and_it_is_kept(fmnist, tmp_path, capsys):
    x, y, _, _ = data(fmnist)
    m = finalized()  # AdamW, lr 1e-3, constant
    seen = []

    def halve_after_the_first(epoch, lr):
        seen.append((epoch, lr))
        return lr if epoch == 0 else lr * 0.5

    sched = ae.LearningRateScheduler(halve_after_the_first, verbose=1)
    ck = str(tmp_path / "ck.aether")
    h = m.train(x, y, epochs=3, batch_size=100, verbose=False, checkpoint=ck, callbacks=[sched])
    assert seen == [(0, 1e-3), (1, 1e-3), (2, 5e-4)]
    assert h["lr"] == sched.lrs == [1e-3, 5e-4, 2.5e-4]
    assert m.learning_rate == 2.5e-4
    assert "Epoch 2: LearningRateScheduler setting learning rate to 0.0005." in capsys.readouterr().out
    loaded = ae.Model.load(ck)
    assert loaded.learning_rate == 2.5e-4
    # Keras' older one-argument form; a later train() without a scheduler keeps the rate.
    h = loaded.train(x, y, epochs=4, batch_size=100, verbose=False,
                     callbacks=[ae.LearningRateScheduler(lambda epoch: 0.03 if epoch == 3 else 1.0)])
    assert h["lr"] == [0.03]
    assert loaded.train(x, y, epochs=5, batch_size=100, verbose=False)["lr"] == [0.03]
    # A scheduler that returns its rate unchanged trains as none would.
    a, b = finalized(), finalized()
    a.train(x, y, epochs=2, batch_size=100, verbose=False)
    b.train(x, y, epochs=2, batch_size=100, verbose=False, callbacks=[ae.LearningRateScheduler(lambda e, lr: lr)])
    np.testing.assert_array_equal(a.predict(x[:50]), b.predict(x[:50]))
    # configure() sets the optimizer's rate again.
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.02))
    assert m.learning_rate == 0.02


def test_learning_rate_scheduler_errors(fmnist):
    x, y, _, _ = data(fmnist)
    m = finalized()
    with pytest.raises(TypeError, match="LearningRateScheduler: schedule must be callable, got float"):
        ae.LearningRateScheduler(0.1)
    with pytest.raises(TypeError, match="schedule returned '0.1' for epoch 2, expected a number"):
        m.train(x, y, epochs=2, batch_size=100, verbose=False,
                callbacks=[ae.LearningRateScheduler(lambda e, lr: lr if e == 0 else "0.1")])
    assert m.epochs_done == 1
    with pytest.raises(ValueError, match="lr_schedule returned 0 for epoch 2; a learning rate must be finite and > 0"):
        m.train(x, y, epochs=3, batch_size=100, verbose=False, callbacks=[ae.LearningRateScheduler(lambda e: 0)])
    assert m.epochs_done == 1
    with pytest.raises(ValueError, match="one LearningRateScheduler at most"):
        m.train(x, y, epochs=3, verbose=False,
                callbacks=[ae.LearningRateScheduler(lambda e: 0.1), ae.LearningRateScheduler(lambda e: 0.1)])


def test_early_stopping_continues_a_run_that_raised(fmnist):
    """A run left by an exception (here a callback's; Ctrl-C alike) continues its early stopping
    when trained again with the same options: it stops and restores as the uninterrupted run."""
    x, y, xv, yv = data(fmnist)
    yv = (yv + 1) % 10  # the validation loss rises as the model learns: its best epoch comes early
    fit = dict(epochs=12, batch_size=100, validation_data=(xv, yv), verbose=False)
    whole, whole_es = finalized(), ae.EarlyStopping(patience=3)
    whole.train(x, y, callbacks=[whole_es], **fit)
    assert whole_es.stopped_epoch is not None and whole_es.best_epoch <= 1

    def boom(epoch, logs):
        if epoch == 2:
            raise RuntimeError("interrupted")

    m = finalized()
    with pytest.raises(RuntimeError, match="interrupted"):
        m.train(x, y, callbacks=[ae.EarlyStopping(patience=3), ae.LambdaCallback(on_epoch_end=boom)], **fit)
    es = ae.EarlyStopping(patience=3)
    h = m.train(x, y, callbacks=[es], **fit)
    assert h.epoch[0] == 3
    assert (es.best_epoch, es.best, es.stopped_epoch) == (whole_es.best_epoch, whole_es.best, whole_es.stopped_epoch)
    np.testing.assert_array_equal(m.predict(xv[:50]), whole.predict(xv[:50]))


class EvalRecorder(ae.Callback):
    """Records the on_test_* and on_predict_* hooks."""
    def __init__(self):
        super().__init__()
        self.calls = []
        self.outputs = []  # on_predict_batch_end's logs["outputs"]

    def on_test_begin(self, logs=None):
        self.calls.append(("test_begin", dict(logs)))

    def on_test_batch_begin(self, batch, logs=None):
        self.calls.append(("test_batch_begin", batch))

    def on_test_batch_end(self, batch, logs=None):
        self.calls.append(("test_batch_end", batch, dict(logs)))

    def on_test_end(self, logs=None):
        self.calls.append(("test_end", dict(logs)))

    def on_predict_begin(self, logs=None):
        self.calls.append(("predict_begin",))

    def on_predict_batch_begin(self, batch, logs=None):
        self.calls.append(("predict_batch_begin", batch))

    def on_predict_batch_end(self, batch, logs=None):
        self.calls.append(("predict_batch_end", batch))
        self.outputs.append(logs["outputs"])

    def on_predict_end(self, logs=None):
        self.calls.append(("predict_end",))


def test_evaluate_and_predict_call_the_test_and_predict_hooks(fmnist):
    x, y, xv, yv = data(fmnist)
    m = finalized()
    m.train(x, y, epochs=1, batch_size=100, verbose=False)
    rec = EvalRecorder()
    r = m.evaluate(xv, yv, batch_size=64, callbacks=[rec])  # 200 samples: batches of 64, 64, 64, 8
    assert rec.model is m and rec.params["steps"] == 4
    assert [c[0] for c in rec.calls] == ["test_begin"] + ["test_batch_begin", "test_batch_end"] * 4 + ["test_end"]
    assert [c[1] for c in rec.calls if c[0].startswith("test_batch")] == [0, 0, 1, 1, 2, 2, 3, 3]
    # A batch's logs: the running means, which are evaluate's over the samples done.
    first_two = rec.calls[4][2]
    part = m.evaluate(xv[:128], yv[:128], batch_size=64)
    assert first_two["loss"] == pytest.approx(part["loss"], rel=1e-12)
    assert first_two["accuracy"] == pytest.approx(part["accuracy"], rel=1e-12)
    assert rec.calls[-1] == ("test_end", {"loss": r["loss"], "accuracy": r["accuracy"]})
    assert rec.calls[-2][2] == rec.calls[-1][1]
    assert m.evaluate(xv, yv, batch_size=64) == r  # the hooks change nothing

    rec.calls.clear()
    p = m.predict(xv, batch_size=128, callbacks=[rec])  # 128, 72
    assert rec.calls == [("predict_begin",), ("predict_batch_begin", 0), ("predict_batch_end", 0),
                         ("predict_batch_begin", 1), ("predict_batch_end", 1), ("predict_end",)]
    np.testing.assert_array_equal(p, m.predict(xv, batch_size=128))
    # Each batch's logs["outputs"] (Keras'): its rows of the result, a NumPy array.
    assert [type(o) for o in rec.outputs] == [np.ndarray, np.ndarray]
    np.testing.assert_array_equal(rec.outputs[0], p[:128])
    np.testing.assert_array_equal(rec.outputs[1], p[128:])
    lam = []
    r = m.evaluate(xv, yv, callbacks=[ae.LambdaCallback(on_test_end=lambda logs: lam.append(logs))])
    assert lam == [{"loss": r["loss"], "accuracy": r["accuracy"]}]
    with pytest.raises(TypeError, match=r"LambdaCallback: unknown hook\(s\) \['on_tset_end'\]"):
        ae.LambdaCallback(on_tset_end=print)
    with pytest.raises(TypeError, match="evaluate: callbacks must be aether.Callback objects, got function"):
        m.evaluate(xv, yv, callbacks=[lambda: None])
    with pytest.raises(TypeError, match="predict: callbacks must be a list of aether.Callback"):
        m.predict(xv, callbacks=rec)


def test_train_validation_calls_the_test_hooks_every_epoch(fmnist):
    x, y, xv, yv = data(fmnist)
    m = finalized()
    rec = EvalRecorder()
    h = m.train(x, y, epochs=2, batch_size=100, validation_data=(xv, yv), callbacks=[rec], verbose=False)
    # Validation batches are max(batch size, 256): one of 200 per epoch.
    assert [c[0] for c in rec.calls] == ["test_begin", "test_batch_begin", "test_batch_end", "test_end"] * 2
    ends = [c[1] for c in rec.calls if c[0] == "test_end"]
    assert [e["loss"] for e in ends] == h["val_loss"]
    assert [e["accuracy"] for e in ends] == h["val_accuracy"]


def test_an_exception_in_a_test_hook_ends_evaluate(fmnist):
    x, y, xv, yv = data(fmnist)
    m = finalized()
    before = m.evaluate(xv, yv, batch_size=64)

    class Stop(ae.Callback):
        def on_test_batch_end(self, batch, logs=None):
            if batch == 1:
                raise KeyError("enough")

    with pytest.raises(KeyError, match="enough"):
        m.evaluate(xv, yv, batch_size=64, callbacks=[Stop()])
    assert m.evaluate(xv, yv, batch_size=64) == before
