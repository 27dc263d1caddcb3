"""Model from Python: the Aether-ML example on real Fashion-MNIST data, labels as classes or
one-hot, evaluate/predict, errors, presets, regression, binary and multi-label classification,
summary."""

import os
import re

import numpy as np
import pytest

import aether as ae
from conftest import small_cnn


def test_the_example_trains_on_real_fashion_mnist(fmnist):
    x, y, xt, yt = fmnist
    model = small_cnn()
    model.to("cpu")
    model.finalize(input_shape=(28, 28, 1))
    history = model.train(x, y, epochs=2, batch_size=128, shuffle=True, validation_data=(xt, yt), verbose=False)
    assert set(history) >= {"loss", "accuracy", "val_loss", "val_accuracy", "lr", "seconds"}
    assert len(history["loss"]) == 2 and history["loss"][1] < history["loss"][0]
    assert history["val_accuracy"][-1] > 0.25  # 10 classes: chance is 0.10 (measured: 0.297)
    r = model.evaluate(xt, yt)
    assert r["accuracy"] == pytest.approx(history["val_accuracy"][-1], abs=1e-9)
    p = model.predict(xt[:50])
    assert p.shape == (50, 10) and p.dtype == np.float32
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
    assert model.epochs_done == 2
    # The confusion matrix, as `aether train --metrics-json` writes it: [label, predicted] counts of
    # the first maximum of each sample's outputs, which predict() gives too.
    c = model.evaluate(xt, yt, return_confusion=True)
    m = c["confusion_matrix"]
    assert m.shape == (10, 10) and m.dtype == np.int64 and c["accuracy"] == r["accuracy"]
    expected = np.zeros((10, 10), np.int64)
    np.add.at(expected, (yt, model.predict(xt).argmax(axis=1)), 1)
    assert np.array_equal(m, expected)
    assert np.trace(m) / len(yt) == pytest.approx(r["accuracy"], abs=1e-12)
    np.testing.assert_allclose(c["class_accuracy"], np.diag(m) / np.bincount(yt, minlength=10))
    assert "confusion_matrix" not in r  # only when asked: evaluate's dict stays Keras' metrics


def test_float_images_one_hot_labels_and_preprocessing(fmnist):
    x, y, xt, yt = fmnist
    prep = ae.Compose([ae.Rescale(1 / 255), ae.StandardScaler()])
    xf = prep(x[:1000])
    assert xf.dtype == np.float32
    one_hot = np.eye(10, dtype=np.float32)[y[:1000]]

    def run(labels):
        m = small_cnn(seed=7)
        m.finalize((28, 28, 1))
        return m.train(xf, labels, epochs=1, batch_size=100, verbose=False)

    a, b = run(y[:1000]), run(one_hot)
    assert a["loss"] == b["loss"] and a["accuracy"] == b["accuracy"]  # the same training, bit for bit


def test_same_seed_same_result_and_seed_matters(fmnist):
    x, y, _, _ = fmnist

    def run(seed):
        m = small_cnn(seed=seed)
        m.finalize((28, 28, 1))
        return m.train(x[:600], y[:600], epochs=1, batch_size=100, verbose=False)["loss"][0]

    assert run(1) == run(1)
    assert run(1) != run(2)


def test_mixed_precision_tracks_float32(fmnist):
    """bfloat16 and float16 (float32 master weights) train like float32 with the same seed."""
    x, y, _, _ = fmnist

    def run(precision):
        m = small_cnn(seed=3)
        m.set_precision(precision)
        m.finalize((28, 28, 1))
        return m.train(x[:600], y[:600], epochs=1, batch_size=100, verbose=False)["loss"][0]

    base = run("float32")
    for precision in ("bf16", "fp16"):
        assert run(precision) == pytest.approx(base, abs=0.05 + 0.1 * base)


def test_dense_network_on_flat_features(fmnist):
    x, y, xt, yt = fmnist
    m = ae.Model()
    m.manual_seed(0)
    m.add(ae.Flatten()); m.add(ae.Dense(784, 64)); m.add(ae.LeakyReLU(0.1)); m.add(ae.Dropout(0.1))
    m.add(ae.Dense(64, 10)); m.add(ae.SoftMax())
    m.configure(loss=ae.CategoricalCrossEntropy(), optimizer=ae.Adam(lr=1e-3))
    m.to("numpy")  # Aether-ML's name for the CPU
    m.finalize((28, 28, 1))
    h = m.train(x, y, epochs=2, batch_size=64, verbose=False, validation_data=(xt, yt))
    assert h["val_accuracy"][-1] > 0.7
    # (N, features) input
    m2 = ae.Model(); m2.add(ae.Dense(784, 10))
    m2.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.05, momentum=0.9, nesterov=True))
    m2.finalize((784,))
    h2 = m2.train(x.reshape(len(x), -1), y, epochs=1, batch_size=50, verbose=False)
    assert h2["accuracy"][0] > 0.5


def test_every_layer_builds_and_trains():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 12, 12, 3)).astype(np.float32)
    y = rng.integers(0, 4, 64)
    m = ae.Model(); m.manual_seed(1)
    for layer in [ae.Conv2d(3, 8, 3, padding=1), ae.BatchNorm(), ae.ReLU(), ae.SpatialDropout(0.1),
                  ae.AvgPool2d(2), ae.Conv2d(8, 8, (3, 3), (1, 1), padding="same"), ae.LayerNorm(), ae.Tanh(),
                  ae.MaxPool2d(3, 1, "same"), ae.GlobalMaxPool(), ae.BatchNorm(), ae.Sigmoid(), ae.Dense(8, 4)]:
        m.add(layer)
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.01, schedule="cosine",
                                                                           clip_grad_norm=1.0))
    m.finalize((12, 12, 3))
    text = m.summary(print_fn=None)
    printed = []
    assert m.summary(print_fn=printed.append) is None and printed == [text]  # Keras': printed once, no echo
    for name in ("Conv2d", "BatchNorm2d", "AvgPool2d", "LayerNorm", "Tanh", "MaxPool2d", "GlobalMaxPool2d",
                 "BatchNorm1d", "Sigmoid", "Linear"):
        assert name in text
    h = m.train(x, y, epochs=2, batch_size=16, verbose=False)
    assert np.isfinite(h["loss"]).all() and h["lr"][-1] < h["lr"][0]
    assert len(m.parameters()) == len(m.named_parameters()) > 0
    out = m(ae.tensor(x[:2]))
    assert out.shape == (2, 4)


def test_regression_with_mean_squared_error():
    rng = np.random.default_rng(0)
    x = rng.uniform(-1, 1, (512, 4)).astype(np.float32)
    w = np.array([[1.0], [-2.0], [0.5], [3.0]], np.float32)
    y = (x @ w).ravel()
    m = ae.Model(); m.manual_seed(0)
    m.add(ae.Dense(4, 16)); m.add(ae.ReLU()); m.add(ae.Dense(16, 1))
    m.configure(loss=ae.MeanSquaredError(), optimizer=ae.Adam(lr=1e-2), accuracy=ae.RegressionAccuracy(precision=0.25))
    m.finalize((4,))
    h = m.train(x, y, epochs=20, batch_size=32, verbose=False)
    assert h["loss"][-1] < 0.1 * h["loss"][0]
    assert h["accuracy"][-1] > h["accuracy"][0]
    r = m.evaluate(x, y)
    assert r["loss"] < 0.2 and r["accuracy"] > 0.5
    with pytest.raises(ValueError, match=r"evaluate: return_confusion needs class labels; this model's loss "
                                         r"\(mse\) takes targets"):
        m.evaluate(x, y, return_confusion=True)
    p = m.predict(x[:3])
    assert p.shape == (3, 1)
    np.testing.assert_allclose(p.ravel(), y[:3], atol=0.6)


def _bce(p, t):
    """The textbook binary cross-entropy of probabilities p against targets t, in float64 (a term of
    weight 0 counts 0: p may round to 0 or 1)."""
    p, t = p.astype(np.float64), t.astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        terms = np.where(t != 0, t * np.log(p), 0) + np.where(t != 1, (1 - t) * np.log(1 - p), 0)
    return float(-terms.mean())


def test_binary_and_multi_label_classification_with_sigmoid_binary_cross_entropy(tmp_path):
    rng = np.random.default_rng(1)
    x = rng.uniform(-1, 1, (512, 4)).astype(np.float32)
    y1 = (x[:, 0] + x[:, 1] > x[:, 2]).astype(np.int64)                        # (N,) of 0/1
    y3 = np.stack([x[:, 0] > 0, x[:, 1] + x[:, 3] > 0, x[:, 2] < x[:, 0]], 1)  # (N, 3) bool
    for y, outputs in ((y1, 1), (y3, 3)):
        m = ae.Model(); m.manual_seed(0)
        m.add(ae.Dense(4, 16)); m.add(ae.ReLU()); m.add(ae.Dense(16, outputs))
        m.configure(loss=ae.SigmoidBinaryCrossEntropy(), optimizer=ae.Adam(lr=2e-2))
        m.finalize((4,))
        h = m.train(x, y, epochs=15, batch_size=32, verbose=False)
        assert h["loss"][-1] < 0.5 * h["loss"][0]
        r = m.evaluate(x, y)
        assert set(r) == {"loss", "accuracy"}  # no top-5 of targets
        p = m.predict(x)                        # sigmoid probabilities
        assert p.shape == (512, outputs) and ((p >= 0) & (p <= 1)).all()
        t = y.reshape(512, -1)
        assert r["loss"] == pytest.approx(_bce(p, t), rel=1e-5)
        assert r["accuracy"] == pytest.approx(((p > 0.5) == (t > 0.5)).mean(), abs=1e-7)
        assert r["accuracy"] > 0.95
        logits, targets = m(ae.tensor(x)), ae.tensor(t.astype(np.float32))  # the functional form
        assert ae.functional.binary_cross_entropy_with_logits(logits, targets).item() == pytest.approx(r["loss"],
                                                                                                       rel=1e-5)
        assert ae.functional.binary_accuracy(logits, targets).item() == pytest.approx(r["accuracy"], abs=1e-7)
    m.save(tmp_path / "bce.aether")
    back = ae.Model.load(tmp_path / "bce.aether")
    assert isinstance(back._loss, ae.SigmoidBinaryCrossEntropy)
    np.testing.assert_array_equal(back.predict(x), p)
    with pytest.raises(ValueError, match=r"train: data set 'train' has target 2 \(sample 5, output 1\); "
                                         r"the binary_cross_entropy loss takes targets in \[0, 1\]"):
        bad = y3.astype(np.float32); bad[5, 1] = 2
        m.train(x, bad, epochs=16, verbose=False)
    with pytest.raises(ValueError, match="binary_cross_entropy takes logits and applies the sigmoid itself, "
                                         "but the model ends with Sigmoid"):
        s = ae.Model(); s.add(ae.Dense(4, 1)); s.add(ae.Sigmoid())
        s.configure(loss=ae.SigmoidBinaryCrossEntropy(), optimizer=ae.SGD(lr=0.1)).finalize((4,))


def test_class_and_sample_weights_move_an_imbalanced_problem_toward_the_rare_class():
    rng = np.random.default_rng(2)
    y = (np.arange(400) % 10 == 0).astype(np.int64)                     # 10% are class 1
    x = (rng.normal(0, 1, (400, 2)) + np.where(y[:, None] == 1, 0.8, -0.2)).astype(np.float32)

    def predicted_ones(**kw):
        m = ae.Model(); m.manual_seed(3)
        m.add(ae.Dense(2, 2))
        m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.Adam(lr=0.05)).finalize((2,))
        m.train(x, y, epochs=20, batch_size=40, verbose=False, **kw)
        return int((m.predict(x).argmax(1) == 1).sum())

    plain = predicted_ones()
    weighted = predicted_ones(class_weight={1: 9.0})                # class 0 left out: weight 1
    assert weighted > plain + 20
    assert predicted_ones(class_weight=[1.0, 9.0]) == predicted_ones(class_weight={0: 1.0, 1: 9.0})
    # sample_weight: each sample's own weight; the class's weight for each sample is the same loss.
    assert predicted_ones(sample_weight=np.where(y == 1, 9.0, 1.0)) == weighted
    # With validation_split the held-out (last) samples' weights weigh the validation loss.
    predicted_ones(sample_weight=np.ones(400), validation_split=0.25)
    m = ae.Model(); m.add(ae.Dense(2, 2))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.1)).finalize((2,))
    with pytest.raises(ValueError, match=r"class_weight has class 2, the model has classes 0\.\.1"):
        m.train(x, y, class_weight={2: 1.0}, verbose=False)
    with pytest.raises(ValueError, match=r"train: class_weight\[0\] is -1; a weight must be finite and >= 0"):
        m.train(x, y, class_weight=[-1, 1], verbose=False)
    with pytest.raises(TypeError, match="class_weight must be a dict"):
        m.train(x, y, class_weight="balanced", verbose=False)
    with pytest.raises(ValueError, match=r"train: sample_weight must be numbers of shape \(400,\)"):
        m.train(x, y, sample_weight=np.ones(10), verbose=False)
    with pytest.raises(ValueError, match=r"train: sample_weight\[3\] is nan"):
        m.train(x, y, sample_weight=np.where(np.arange(400) == 3, np.nan, 1.0), verbose=False)
    assert m.epochs_done == 0


def test_evaluate_and_validation_take_sample_weights():
    """evaluate(sample_weight=w): the mean over the samples of w_i times sample i's loss, computed here
    from predict's probabilities; the accuracy unweighted. train()'s validation_data=(X, y, w) and
    validation_split with sample_weight give that val_loss."""
    rng = np.random.default_rng(4)
    x = rng.normal(0, 1, (300, 5)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64) + (x[:, 2] > 0.5)     # classes 0..2
    w = rng.uniform(0, 3, 300)

    def model():
        m = ae.Model(); m.manual_seed(5)
        m.add(ae.Dense(5, 3))
        m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.1)).finalize((5,))
        return m

    m = model()
    p = m.predict(x).astype(np.float64)
    want = np.mean(w * -np.log(p[np.arange(300), y]))
    for batch in (32, 300):
        r = m.evaluate(x, y, batch_size=batch, sample_weight=w)
        assert r["loss"] == pytest.approx(want, rel=1e-5)
        assert r["accuracy"] == m.evaluate(x, y, batch_size=batch)["accuracy"]
    assert m.evaluate(x, y, sample_weight=ae.tensor(w))["loss"] == \
        pytest.approx(want, rel=1e-5)
    h = m.train(x[:200], y[:200], epochs=1, batch_size=50, shuffle=False, verbose=False,
                validation_data=(x[200:], y[200:], w[200:]))
    assert h["val_loss"][0] == pytest.approx(m.evaluate(x[200:], y[200:], sample_weight=w[200:])["loss"], rel=1e-12)
    assert h["val_loss"][0] != pytest.approx(m.evaluate(x[200:], y[200:])["loss"], rel=1e-3)
    # validation_split: the held-out samples' weights go with them.
    split = model().train(x, y, epochs=2, batch_size=50, shuffle=False, verbose=False, validation_split=1 / 3,
                          sample_weight=w)
    given = model().train(x[:200], y[:200], epochs=2, batch_size=50, shuffle=False, verbose=False,
                          sample_weight=w[:200], validation_data=(x[200:], y[200:], w[200:]))
    assert split["val_loss"] == given["val_loss"] and split["loss"] == given["loss"]
    with pytest.raises(ValueError, match=r"evaluate: sample_weight must be numbers of shape \(300,\)"):
        m.evaluate(x, y, sample_weight=w[:10])
    with pytest.raises(ValueError, match=r"evaluate: sample_weight\[1\] is -1; a weight must be finite"):
        m.evaluate(x, y, sample_weight=np.where(np.arange(300) == 1, -1.0, 1.0))
    with pytest.raises(ValueError, match=r"train: validation_data's sample_weight must be numbers of shape \(100,\)"):
        m.train(x[:200], y[:200], validation_data=(x[200:], y[200:], w), verbose=False)


def test_preset_lenet_matches_the_cli_recipe(fmnist):
    x, y, _, _ = fmnist
    ae.manual_seed(0)
    m = ae.Model.preset("lenet", (28, 28, 1), 10)
    assert "Conv2d" in m.summary(print_fn=None)
    h = m.train(x[:512], y[:512], epochs=1, verbose=False)
    assert np.isfinite(h["loss"][0])


def test_the_first_train_evaluate_or_predict_finalizes_for_the_shape_of_x(fmnist):
    """Keras builds a model on its first fit; train, evaluate and predict here finalize a configured
    model with one sample's shape, X.shape[1:] (they raised "call configure() and finalize(input_shape)
    first")."""
    x, y, _, _ = fmnist
    auto = small_cnn()  # seeds the generator that finalize initialises the weights from
    h = auto.train(x[:256], y[:256], epochs=1, batch_size=64, verbose=False)
    explicit = small_cnn().finalize((28, 28, 1))
    g = explicit.train(x[:256], y[:256], epochs=1, batch_size=64, verbose=False)
    assert (h["loss"], h["accuracy"]) == (g["loss"], g["accuracy"])  # same seed, same model
    assert "(1, 28, 28, 32)" in auto.summary(print_fn=None)
    assert small_cnn().predict(x[:3]).shape == (3, 10)
    assert set(small_cnn().evaluate(x[:64], y[:64])) == {"loss", "accuracy", "top5"}
    unconfigured = ae.Model()
    unconfigured.add(ae.Dense(4, 2))
    with pytest.raises(RuntimeError, match=r"Model.train: call configure\(\) first"):
        unconfigured.train(np.zeros((2, 4), np.float32), [0, 1])
    with pytest.raises(ValueError, match=r"predict: X must be a batch of samples, .* got shape \(\)"):
        small_cnn().predict(np.float32(1.0))
    with pytest.raises(ValueError, match=r"Dense\(32, 10\): its input has 16 features"):
        m = ae.Model(); m.add(ae.Dense(32, 10))
        m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
        m.predict(np.zeros((2, 16), np.float32))


def test_bad_input_gets_clear_errors(fmnist):
    x, y, _, _ = fmnist
    m = small_cnn()
    with pytest.raises(RuntimeError, match=r"Model.parameters: call configure\(\) and finalize\(input_shape\) first"):
        m.parameters()
    with pytest.raises(TypeError):
        m.add("Conv2d")
    with pytest.raises(TypeError):
        m.configure(loss="mse", optimizer=ae.Adam())
    with pytest.raises(ValueError, match="in_channels|channels"):
        bad = small_cnn(channels=3)
        bad.finalize((28, 28, 1))
    with pytest.raises(ValueError, match="Dense"):
        bad = ae.Model(); bad.add(ae.Dense(5, 2))
        bad.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
        bad.finalize((4,))
    flat = ae.Model(); flat.add(ae.Dense(4, 2))
    flat.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
    flat.finalize((4,))
    with pytest.raises(ValueError, match=r"train: data set 'train' has 3 values per sample, the model expects 4$"):
        flat.train(np.zeros((10, 3), np.float32), np.zeros(10, np.int64), verbose=False)
    m.finalize((28, 28, 1))
    with pytest.raises(ValueError, match=r"\(32, 32, 3\)|28, 28, 1"):
        m.train(np.zeros((10, 32, 32, 3), np.uint8), np.zeros(10, np.int64), verbose=False)
    with pytest.raises(ValueError, match="out of range"):
        m.train(x[:10], np.full(10, 12), verbose=False)
    # X is named X, not "images": it may be tabular (N, features) too.
    with pytest.raises(ValueError, match=r"^train: X has 10 samples but y has 9$"):
        m.train(x[:10], y[:9], verbose=False)
    with pytest.raises(ValueError, match=r"^train: X has 4 samples but y has 3$"):
        flat.train(np.zeros((4, 4), np.float32), np.zeros(3, np.int64), verbose=False)
    with pytest.raises(TypeError, match=r"^evaluate: X must be numbers \(images or features\), got dtype <U1$"):
        flat.evaluate(np.array([["a"] * 4] * 2), np.zeros(2, np.int64))
    with pytest.raises(ValueError, match=r"^predict: X must have a sample axis and a feature axis, got shape \(4,\)$"):
        flat.predict(np.zeros(4, np.float32))
    # Whole numbers stored as floats are classes; others name the value. Was a TypeError "must be
    # integers, got dtype float64", which read as if float labels were refused.
    with pytest.raises(ValueError, match=r"class labels must be whole numbers, got \d\.5 \(item 0 of a float64 "
                                         r"array\)"):
        m.train(x[:10], y[:10] + 0.5, verbose=False)
    with pytest.raises(ValueError, match=r"whole numbers, got nan \(item 2 "):
        m.train(x[:10], np.where(np.arange(10) == 2, np.nan, y[:10]), verbose=False)
    assert m.evaluate(x[:50], y[:50].astype(np.float32)) == m.evaluate(x[:50], y[:50])
    with pytest.raises(TypeError, match="class labels must be integers, got dtype <U1"):
        m.train(x[:2], np.array(["a", "b"]), verbose=False)
    with pytest.raises(ValueError, match="one-hot"):
        m.train(x[:10], np.full((10, 10), 0.1), verbose=False)
    # One sample where a batch goes is named as that (it was read as 28 samples of 28 x 1).
    for one in (x[0], x[0, :, :, 0]):
        with pytest.raises(ValueError, match=re.escape(f"predict: X has the shape of one sample, {one.shape}; "
                                                       f"pass a batch of samples, e.g. X[None] of shape (1, 28, 28")):
            m.predict(one)
    with pytest.raises(ValueError, match="evaluate: X has the shape of one sample"):
        m.evaluate(x[0], y[:1])
    # A column of classes (N, 1) is the classes (Keras' sparse labels); it was "must be one-hot rows".
    assert m.evaluate(x[:50], y[:50, None]) == m.evaluate(x[:50], y[:50])
    with pytest.raises(ValueError, match="one-hot labels have 2 columns"):
        m.evaluate(x[:10], np.eye(2, dtype=np.int64)[y[:10] % 2])
    with pytest.raises(TypeError, match="numbers"):
        m.predict(np.array([["a"]]))
    with pytest.raises(ValueError, match="epochs"):
        m.train(x[:10], y[:10], epochs=0, verbose=False)
    with pytest.raises(ValueError, match="unknown precision"):
        m.set_precision("float8")
    with pytest.raises((ValueError, RuntimeError), match="cuda|CUDA|device"):
        m.to("cupy")  # this machine has no GPU (or aether was built without CUDA)
    with pytest.raises(ValueError, match="label_smoothing"):
        ae.SoftmaxCategoricalCrossEntropy(label_smoothing=1.5)
    with pytest.raises(ValueError, match="lr"):
        ae.Adam(lr=0)
    with pytest.raises(ValueError, match="padding"):
        ae.Conv2d(1, 2, 3, padding="full")
    with pytest.raises(ValueError, match="momentum"):
        ae.BatchNorm(momentum=1.5)
    with pytest.raises(ValueError, match="rate"):
        ae.Dropout(1.0)



def test_a_finalize_that_fails_changes_nothing_and_can_be_retried():
    """A failed finalize had added the layers to the engine's model already: the retry failed with
    "Model::add: the model is finalized" (a bad device) or doubled the layers (a bad second layer)."""
    def model(*layers):
        m = ae.Model()
        for layer in layers:
            m.add(layer)
        m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
        return m

    m = model(ae.Dense(4, 3), ae.Dense(3, 2))
    # A device is checked by to() itself (it was accepted until finalize), and a failed to() keeps
    # the device.
    for bad, error in (("tpu", "unknown device 'tpu'"), ("cuda:99999999999999", "bad device index")):
        with pytest.raises(ValueError, match=error):
            m.to(bad)
    with pytest.raises(ValueError, match="unknown device 'tpu'"):
        ae.Model.preset("mlp", (28, 28, 1), device="tpu")
    m.finalize((4,))
    assert [n for n, _ in m.named_parameters()] == ["0.weight", "0.bias", "1.weight", "1.bias"]
    with pytest.raises(ValueError, match="unknown precision 'fp8'"):
        model(ae.Dense(4, 2)).set_precision("fp8")  # said so only at finalize
    bad_group = ae.Model()
    bad_group.add(ae.Dense(4, 2))
    bad_group.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(),
                        param_groups=[{"match": "9.*", "frozen": True}])
    with pytest.raises(ValueError, match=r"param_groups\[0\].*matches no parameter"):
        bad_group.finalize((4,))
    bad_group.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
    assert len(bad_group.finalize((4,)).network) == 1


def test_data_and_settings_that_cannot_work_are_errors(fmnist):
    """Each used to pass silently or fail late: empty data trained "an epoch" of loss 0 and
    evaluated to accuracy 0; batch_size=0 meant the default; NaN pixels ended in "the loss became
    nan ... try a lower learning rate"; crops and flips of flat samples moved feature values; layer
    arguments out of range surfaced at finalize, if at all (a pool's stride 0 became the kernel)."""
    x, y, _, _ = fmnist
    m = small_cnn()
    m.finalize((28, 28, 1))
    empty_x, empty_y = np.zeros((0, 28, 28, 1), np.uint8), np.zeros(0, np.int64)
    with pytest.raises(ValueError, match="data set 'train' is empty"):
        m.train(empty_x, empty_y, verbose=False)
    with pytest.raises(ValueError, match="data set 'evaluate' is empty"):
        m.evaluate(empty_x, empty_y)
    with pytest.raises(ValueError, match="train: batch_size must be >= 1, got 0"):
        m.train(x[:10], y[:10], batch_size=0, verbose=False)
    with pytest.raises(ValueError, match="train: max_steps_per_epoch must be >= 0, got -1"):
        m.train(x[:10], y[:10], max_steps_per_epoch=-1, verbose=False)
    bad = (x[:10] / 255.0).astype(np.float32)
    bad[7, 3, 4, 0] = np.nan
    with pytest.raises(ValueError, match="the image of item 7 holds NaN"):
        m.train(bad, y[:10], verbose=False)
    with pytest.raises(ValueError, match="the image of item 7 holds NaN"):
        m.predict(bad)
    bad[7, 3, 4, 0] = np.inf
    with pytest.raises(ValueError, match="the image of item 7 holds Inf"):
        m.evaluate(bad, y[:10])
    assert m.epochs_done == 0
    flat = ae.Model()
    flat.add(ae.Dense(784, 10))
    flat.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.1))
    flat.finalize((784,))
    features = x[:10].reshape(10, -1)
    for kw in ({"crop_padding": 2}, {"hflip": True}):
        with pytest.raises(ValueError, match=r"need image input \(H, W, C\), the model takes \(784,\)"):
            flat.train(features, y[:10], verbose=False, **kw)
    assert flat.train(features, y[:10], verbose=False)["loss"][0] > 0
    # epochs counts from the start of training: a second train(epochs=1) would train nothing (it
    # returned an empty history, silently).
    with pytest.raises(ValueError, match=r"epochs is 1 and the model has trained 1 already.*\(pass more than 1\)"):
        flat.train(features, y[:10], verbose=False)
    assert len(flat.train(features, y[:10], epochs=2, verbose=False)["loss"]) == 1
    with pytest.raises(TypeError, match=r"input_shape must be a sequence of ints such as \(32, 32, 3\), got '784'"):
        ae.Model().finalize("784")  # a string was read as (7, 8, 4)
    with pytest.raises(ValueError, match="Model.preset: classes must be >= 2, got 1"):
        ae.Model.preset("mlp", (28, 28, 1), classes=1)
    regression = ae.Model()
    regression.add(ae.Dense(784, 2))
    regression.configure(loss=ae.MeanSquaredError(), optimizer=ae.SGD(lr=0.01))
    regression.finalize(np.array([784]))
    with pytest.raises(ValueError, match="train: data set 'train' has 1 targets per sample, the model gives 2"):
        regression.train(features, y[:10], verbose=False)  # class labels given to a regression model
    with pytest.raises(ValueError, match="one-hot labels have 3 columns, the model gives 10 classes"):
        flat.train(features, np.eye(3, dtype=np.float32)[y[:10] % 3], epochs=3, verbose=False)  # trained
    # configure on a finalized model applies the whole recipe: a layer frozen afterwards still
    # trained (the optimizer finalize built stayed).
    (w, weight), (_, bias) = [(n, np.asarray(t).copy()) for n, t in flat.named_parameters()]
    flat.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.1),
                   param_groups=[{"match": "*.weight", "frozen": True}])
    flat.train(features, y[:10], epochs=3, verbose=False)
    after = dict((n, np.asarray(t)) for n, t in flat.named_parameters())
    assert w == "0.weight" and np.array_equal(after["0.weight"], weight) and not np.array_equal(after["0.bias"], bias)
    with pytest.raises(ValueError, match="MaxPool2d: stride must be >= 1, got 0"):
        ae.MaxPool2d(2, 0)
    with pytest.raises(ValueError, match="AvgPool2d: kernel_size must be >= 1"):
        ae.AvgPool2d(0)
    with pytest.raises(ValueError, match="MaxPool2d: padding must be >= 0"):
        ae.MaxPool2d(3, 1, padding=-1)
    with pytest.raises(ValueError, match="Conv2d: dilation must be >= 1"):
        ae.Conv2d(3, 4, 3, dilation=0)
    with pytest.raises(ValueError, match="Conv2d: stride must be >= 1"):
        ae.Conv2d(3, 4, 3, stride=(1, -1))
    with pytest.raises(ValueError, match="Conv2d: padding must be >= 0"):
        ae.Conv2d(3, 4, 3, padding=-1)
    with pytest.raises(ValueError, match="Conv2d: groups must be >= 1, got 0"):
        ae.Conv2d(3, 4, 3, groups=0)
    with pytest.raises(ValueError, match="Dense: in_features must be >= 1, got -1"):
        ae.Dense(-1, 3)
    with pytest.raises(TypeError, match="Dense: out_features must be an int, got 2.5"):
        ae.Dense(4, 2.5)
    with pytest.raises(ValueError, match="BatchNorm: epsilon must be finite and > 0, got -1"):
        ae.BatchNorm(epsilon=-1)
    with pytest.raises(ValueError, match="Scale: factor must be finite, got nan"):
        ae.Scale(float("nan"))
    assert ae.MaxPool2d(np.int64(2)).stride == (2, 2)  # NumPy ints are ints
    with pytest.raises(TypeError, match="train: epochs must be an int, got 2.5"):
        m.train(x[:10], y[:10], epochs=2.5, verbose=False)
    with pytest.raises(ValueError, match="train: seed must be >= 0, got -1"):
        m.train(x[:10], y[:10], seed=-1, verbose=False)
    with pytest.raises(TypeError, match=r"validation_data must be \(X, y\) or \(X, y, sample_weight\), got ndarray"):
        m.train(x[:10], y[:10], validation_data=x[:10], verbose=False)
    with pytest.raises(TypeError, match=r"validation_data must be .*, got tuple of 4"):
        m.train(x[:10], y[:10], validation_data=(x[:10], y[:10], y[:10], y[:10]), verbose=False)
    with pytest.raises(ValueError, match="evaluate: batch_size must be >= 1, got 0"):
        m.evaluate(x[:10], y[:10], batch_size=0)
    # A checkpoint that cannot be written is an error before the first epoch, not after it.
    with pytest.raises(RuntimeError, match=r"train: checkpoint '/nonexistent-dir/c.aether': directory "
                                           r"'/nonexistent-dir' does not exist"):
        m.train(x[:10], y[:10], checkpoint="/nonexistent-dir/c.aether", verbose=False)
    assert m.epochs_done == 0

def test_alternating_flips_match_random_flips_in_epoch_0_only(fmnist):
    # alternate_flips: epoch 0 flips the same seeded half as random flips; epoch 1 flips the others.
    x, y, _, _ = fmnist

    def run(alternate):
        m = small_cnn(seed=3)
        m.finalize((28, 28, 1))
        return m.train(x[:512], y[:512], epochs=2, batch_size=64, seed=4, hflip=True,
                       alternate_flips=alternate, verbose=False)["loss"]

    random_flips, alternating, again = run(False), run(True), run(True)
    assert alternating == again
    assert alternating[0] == random_flips[0]
    assert alternating[1] != random_flips[1]


def test_param_groups_freeze_and_scale_parameters(fmnist):
    # The conv is frozen (keeps its values, gets no gradient); the BatchNorm's bias trains 10x faster.
    x, y, _, _ = fmnist
    m = ae.Model()
    m.manual_seed(3)
    m.add(ae.Conv2d(1, 8, (3, 3), (1, 1), padding="same"))
    m.add(ae.BatchNorm())
    m.add(ae.ReLU())
    m.add(ae.GlobalAvgPool())
    m.add(ae.Dense(8, 10))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.05),
                param_groups=[{"match": "0.*", "frozen": True},
                              {"match": "*.bias", "layer": "BatchNorm2d", "lr_scale": 10}])
    m.finalize((28, 28, 1))
    before = {n: t.numpy().copy() for n, t in m.named_parameters()}
    m.train(x[:256], y[:256], epochs=1, batch_size=64, verbose=False)
    after = {n: t.numpy() for n, t in m.named_parameters()}
    assert np.array_equal(before["0.weight"], after["0.weight"])
    assert np.array_equal(before["0.bias"], after["0.bias"])
    assert not np.array_equal(before["1.bias"], after["1.bias"])
    with pytest.raises(ValueError, match="unknown param_groups key 'lr'"):
        ae.Model().configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.05),
                             param_groups=[{"match": "*", "lr": 2}])


def test_param_group_schedule_over_its_train_epochs(fmnist):
    # The bias trains in epoch 1 of 2 with the falling schedule run over that epoch: the setting is
    # kept in the config; it needs train_epochs.
    x, y, _, _ = fmnist
    m = ae.Model()
    m.manual_seed(3)
    m.add(ae.Conv2d(1, 4, (3, 3), (1, 1), padding="same"))
    m.add(ae.ReLU())
    m.add(ae.GlobalAvgPool())
    m.add(ae.Dense(4, 10))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.05),
                param_groups=[{"match": "0.bias", "train_epochs": 1, "schedule_over_train_epochs": True}])
    m.finalize((28, 28, 1))
    assert m._cpp.config["param_groups"][0]["schedule_over_train_epochs"] is True
    m.train(x[:128], y[:128], epochs=2, batch_size=64, verbose=False)
    with pytest.raises(ValueError, match="schedule_over_train_epochs needs train_epochs"):
        ae.Model().configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.05),
                             param_groups=[{"match": "*", "schedule_over_train_epochs": True}])


def muon_cnn(conv_optimizer):
    m = ae.Model()
    m.manual_seed(4)
    m.add(ae.Conv2d(1, 8, (3, 3), (1, 1), padding="same"))
    m.add(ae.BatchNorm())
    m.add(ae.ReLU())
    m.add(ae.GlobalAvgPool())
    m.add(ae.Dense(8, 10))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.05, momentum=0.9, nesterov=True),
                param_groups=[{"match": "0.weight", "optimizer": conv_optimizer}])
    m.finalize((28, 28, 1))
    return m


def test_a_param_group_trained_by_muon(fmnist):
    # The conv filter under Muon (its lr, momentum and Newton-Schulz steps), the rest under SGD; a
    # group under SGD instead trains the filter differently.
    x, y, _, _ = fmnist
    m = muon_cnn(ae.Muon(lr=0.02, momentum=0.6, ns_steps=3, normalize_weights=True))
    group = m._cpp.config["param_groups"][0]
    assert group["optimizer"] == "muon" and group["momentum"] == 0.6
    assert group["lr_scale"] == pytest.approx(0.4)
    assert m._cpp.config["muon_ns_steps"] == 3 and m._cpp.config["muon_normalize_weights"]
    before = {n: t.numpy().copy() for n, t in m.named_parameters()}
    m.train(x[:256], y[:256], epochs=1, batch_size=64, verbose=False)
    after = {n: t.numpy() for n, t in m.named_parameters()}
    assert all(not np.array_equal(before[n], after[n]) for n in before)
    s = muon_cnn(ae.SGD(lr=0.02, momentum=0.6, nesterov=True))
    s.train(x[:256], y[:256], epochs=1, batch_size=64, verbose=False)
    assert not np.allclose(dict((n, t.numpy()) for n, t in s.named_parameters())["0.weight"], after["0.weight"])
    with pytest.raises(ValueError, match="nesterov"):
        muon_cnn(ae.Muon(lr=0.02, nesterov=False))
    with pytest.raises(ValueError, match="parameter '0.bias'.*muon"):
        bad = ae.Model()
        bad.add(ae.Conv2d(1, 8, (3, 3), (1, 1), padding="same")).add(ae.GlobalAvgPool()).add(ae.Dense(8, 10))
        bad.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.05),
                      param_groups=[{"match": "0.*", "optimizer": "muon"}])
        bad.finalize((28, 28, 1))


def test_evaluate_with_test_time_augmentation(fmnist):
    x, y, xt, yt = fmnist
    m = small_cnn(seed=2)
    m.finalize((28, 28, 1))
    m.train(x[:512], y[:512], epochs=1, batch_size=64, verbose=False)
    plain, flip, both = (m.evaluate(xt[:200], yt[:200], tta=t) for t in ("none", "flip", "flip_translate"))
    assert plain == m.evaluate(xt[:200], yt[:200])
    assert flip["loss"] != plain["loss"] and both["loss"] != flip["loss"]
    with pytest.raises(Exception, match="unknown test-time augmentation 'mirror'"):
        m.evaluate(xt[:10], yt[:10], tta="mirror")


def test_airbench_preset_whitens_from_the_training_images_and_trains():
    # The preset's first train() sets the frozen whitening filters from its images (nn::init::
    # patch_whitening); the BatchNorm weights stay 1; GELU and Scale are layers of their own.
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, size=(64, 32, 32, 3), dtype=np.uint8)
    y = rng.integers(0, 10, size=64)
    ae.manual_seed(4)
    m = ae.Model.preset("airbench93", (32, 32, 3))
    assert m._cpp.config["schedule"] == "triangle" and m._cpp.config["lookahead_start_epoch"] == 3
    before = {n: t.numpy().copy() for n, t in m.named_parameters()}
    h = m.train(x, y, epochs=2, batch_size=16, max_steps_per_epoch=2, verbose=False)
    after = {n: t.numpy() for n, t in m.named_parameters()}
    assert np.isfinite(h["loss"]).all()
    assert not np.array_equal(before["0.weight"], after["0.weight"])  # whitened, then frozen
    assert not np.array_equal(before["0.bias"], after["0.bias"])      # trains in its first 3 epochs
    assert np.array_equal(after["4.weight"], np.ones(64, np.float32))  # a BatchNorm weight, frozen
    assert ae.GELU().build((4,)) is not None
    assert ae.Scale(0.5).build((4,)) is not None


def test_a_training_loop_of_ones_own_with_a_built_optimizer():
    """SGD(...).build(parameters) gives the engine's optimizer for a loop written in Python: model(x),
    a loss from ae.functional, backward(), step(), zero_grad(). Before, Python had no way to update a
    parameter, so model(x)'s autograd could not train anything."""
    p = ae.tensor([1.0, -2.0, 3.0], requires_grad=True)
    opt = ae.SGD(lr=0.1, momentum=0.9).build([p])
    want, buf = np.array([1.0, -2.0, 3.0]), None
    for _ in range(2):
        (p * p).sum().backward()  # gradient 2p
        opt.step(); opt.zero_grad()
        g = 2 * want
        buf = g if buf is None else 0.9 * buf + g
        want = want - 0.1 * buf
    np.testing.assert_allclose(np.asarray(p), want, rtol=1e-6)
    assert opt.steps == 2 and p.grad is None
    q = ae.tensor([1.0, -2.0], requires_grad=True)
    adam = ae.Adam(lr=0.5).build([q])
    (q * q * q).sum().backward(); adam.step()  # Adam's first step moves each value by lr, against its gradient
    np.testing.assert_allclose(np.asarray(q), [0.5, -2.5], rtol=1e-6)
    adam.lr = 0.25
    assert adam.lr == 0.25

    ae.manual_seed(0)
    m = ae.Model()
    m.add(ae.Dense(4, 16)); m.add(ae.ReLU()); m.add(ae.Dense(16, 3))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
    m.finalize((4,))
    rng = np.random.default_rng(0)
    X = rng.standard_normal((64, 4)).astype(np.float32)
    y = (X[:, 0] > 0).astype(np.int64) + (X[:, 1] > 0)
    opt = ae.Adam(lr=0.01).build(m.parameters())
    losses = []
    for _ in range(40):
        loss = ae.functional.cross_entropy(m(ae.tensor(X)), ae.tensor(y))
        loss.backward(); opt.step(); opt.zero_grad()
        losses.append(loss.item())
    assert losses[-1] < 0.5 * losses[0]
    assert m.evaluate(X, y)["loss"] == pytest.approx(ae.functional.cross_entropy(m(ae.tensor(X)), ae.tensor(y)).item(),
                                                     rel=1e-5)  # the model's own parameters moved

    # A schedule spans total_steps: each step takes its rate (cosine: lr (1 + cos(pi k / n)) / 2).
    s = ae.tensor([0.0, 0.0], dtype="float64", requires_grad=True)
    cos = ae.SGD(lr=0.5, schedule="cosine").build([s], total_steps=4)
    assert '"cosine"' in cos.schedule and opt.schedule is None
    rates = [0.5 * (1 + np.cos(np.pi * k / 4)) / 2 for k in range(4)]
    for k in range(4):
        s.sum().backward(); cos.step(); cos.zero_grad()
        assert cos.lr == pytest.approx(rates[k])
    np.testing.assert_allclose(np.asarray(s), -sum(rates), rtol=1e-12)
    with pytest.raises(ValueError, match="schedule 'cosine' needs total_steps"):
        ae.SGD(schedule="cosine").build([p])
    with pytest.raises(ValueError, match="total_steps must be a positive int"):
        ae.SGD(schedule="cosine").build([p], total_steps=0)
    with pytest.raises(ValueError, match=r"clip_grad_norm is Model::train's; call clip_grad_norm\(parameters"):
        ae.AdamW(clip_grad_norm=1.0).build([p])
    r = ae.tensor([3.0, 4.0], requires_grad=True)
    (r * r).sum().backward()  # gradient (6, 8): norm 10
    assert ae.clip_grad_norm([r], 5.0).item() == pytest.approx(10.0)
    np.testing.assert_allclose(np.asarray(r.grad), [3.0, 4.0], rtol=1e-5)
    with pytest.raises(ValueError, match="max_norm must be > 0"):
        ae.clip_grad_norm([r], 0.0)
    with pytest.raises(ValueError, match="parameter 0 does not require grad"):
        ae.SGD().build([ae.tensor([1.0])])
    with pytest.raises(TypeError, match="parameter 0 is a ndarray, not a Tensor"):
        ae.SGD().build([np.ones(2)])
    # PyTorch's form read the parameters as lr: "SGD.__init__() got multiple values for argument 'lr'".
    with pytest.raises(TypeError, match=r"SGD: the first argument is lr, got list: .* opt = ae.SGD\(lr=0.1\)"
                                        r"\.build\(params\)"):
        ae.SGD([p], lr=0.1)
    with pytest.raises(TypeError, match=r"Adam: the first argument is lr, got generator"):
        ae.Adam(q for q in [p])
    with pytest.raises(TypeError, match="lr must be a number, got str"):
        ae.SGD(lr="0.1")
    assert ae.SGD(np.float32(0.5)).lr == 0.5 and ae.Muon(0.02, momentum=0.9).momentum == 0.9


def test_configure_says_which_objects_it_takes_for_keras_strings_and_classes():
    # Keras' compile(loss="categorical_crossentropy", optimizer="adam", metrics=["accuracy"]) habits,
    # and a class passed uncalled. Was "loss must be an aether loss, got str", "got type".
    m = ae.Model()
    m.add(ae.Dense(4, 3))
    with pytest.raises(TypeError, match=r"loss must be an aether loss \(ae.SoftmaxCategoricalCrossEntropy\(\), "
                                        r".*ae.MeanSquaredError\(\)\), got the string 'categorical_crossentropy'"):
        m.configure(loss="categorical_crossentropy", optimizer="adam")
    loss = ae.SoftmaxCategoricalCrossEntropy()
    with pytest.raises(TypeError, match=r"optimizer must be an aether optimizer \(ae.SGD\(\), ae.Adam\(\), "
                                        r".*e.g. ae.Adam\(lr=1e-3\)\), got the string 'adam'"):
        m.configure(loss, "adam")
    with pytest.raises(TypeError, match=r"got the class Adam itself \(an instance is made by calling it: Adam\(\)\)"):
        m.configure(loss, ae.Adam)
    with pytest.raises(TypeError, match=r"accuracy must be an aether metric .* got the string 'accuracy'"):
        m.configure(loss, ae.Adam(), accuracy="accuracy")
    with pytest.raises(TypeError, match=r"got numpy.float32"):  # another library's type, with its module
        m.configure(loss, np.float32(0.1))
    assert m.configure(loss, ae.AdamW(lr=1e-3)) is m


def test_validation_split_holds_out_the_last_fraction(fmnist):
    """validation_split=0.2 trains exactly as the first 80% with the last 20% as validation_data."""
    x, y, _, _ = fmnist

    def run(**kw):
        m = small_cnn(seed=3)
        m.finalize((28, 28, 1))
        return m.train(x[:500] if "validation_split" in kw else x[:400], y[:500] if "validation_split" in kw
                       else y[:400], epochs=2, batch_size=100, verbose=False, **kw)

    split = run(validation_split=0.2)
    given = run(validation_data=(x[400:500], y[400:500]))
    for k in ("loss", "accuracy", "val_loss", "val_accuracy"):
        assert split[k] == given[k], k
    m = small_cnn()
    m.finalize((28, 28, 1))
    with pytest.raises(ValueError, match="validation_data or validation_split, not both"):
        m.train(x[:100], y[:100], validation_split=0.1, validation_data=(x[:10], y[:10]), verbose=False)
    with pytest.raises(ValueError, match=r"validation_split: must be in \(0, 1\), got 1"):
        m.train(x[:100], y[:100], validation_split=1.0, verbose=False)
    with pytest.raises(ValueError, match="leaves 100 to train on and 0 to validate on"):
        m.train(x[:100], y[:100], validation_split=0.001, verbose=False)
    with pytest.raises(TypeError, match="validation_split must be a fraction"):
        m.train(x[:100], y[:100], validation_split="0.1", verbose=False)
    assert m.epochs_done == 0


def swapped_validation(fmnist):
    """(x, y, xv, yv): training images and labels, and 200 others with every label moved to the
    next class, whose loss rises as a model learns the true ones."""
    x, y, _, _ = fmnist
    return x, y, x[500:700], (y[500:700] + 1) % 10


def finalized_cnn():
    m = small_cnn(seed=5)
    m.finalize((28, 28, 1))
    return m


def test_early_stopping_stops_and_restores_the_best_epoch(fmnist):
    """Validating on swapped labels, the validation loss rises as the model learns: training
    stops `patience` epochs after the best one, whose weights the model gets back."""
    x, y, xv, yv = swapped_validation(fmnist)
    model = finalized_cnn
    es = ae.EarlyStopping(monitor="val_loss", patience=2)
    m = model()
    h = m.train(x[:500], y[:500], epochs=15, batch_size=50, validation_data=(xv, yv), early_stopping=es,
                verbose=False)
    assert es.stopped_epoch is not None and es.best_epoch is not None and es.restored
    assert len(h["loss"]) == es.stopped_epoch + 1 == es.best_epoch + 3 < 15
    assert es.best == min(h["val_loss"]) == h["val_loss"][es.best_epoch]
    assert m.epochs_done == len(h["loss"])
    ref = model()
    ref.train(x[:500], y[:500], epochs=es.best_epoch + 1, batch_size=50, validation_data=(xv, yv), verbose=False)
    np.testing.assert_array_equal(m.predict(xv), ref.predict(xv))
    assert m.evaluate(xv, yv)["loss"] == es.best


def test_early_stopping_on_a_model_trained_before_counts_epochs_from_the_start(fmnist):
    """A second train() (or a loaded model's) runs epochs 2.. : the best epoch is one of those, and
    its number is its epoch's (before, EarlyStopping read the run's list at that index: IndexError)."""
    x, y, xv, yv = swapped_validation(fmnist)
    m = finalized_cnn()
    m.train(x[:500], y[:500], epochs=2, batch_size=50, verbose=False)
    es = ae.EarlyStopping(monitor="loss", patience=10)
    h = m.train(x[:500], y[:500], epochs=6, batch_size=50, early_stopping=es, verbose=False)
    assert h.epoch == [2, 3, 4, 5] and es.best_epoch in h.epoch and es.stopped_epoch is None
    assert es.best == min(h["loss"]) == h["loss"][h.epoch.index(es.best_epoch)]


def test_early_stopping_errors(fmnist):
    x, y, _, _ = fmnist
    assert ae.callbacks.EarlyStopping is ae.EarlyStopping
    assert repr(ae.EarlyStopping(patience=2)) == ("EarlyStopping(monitor='val_loss', patience=2, min_delta=0.0, "
                                                  "restore_best_weights=True)")
    with pytest.raises(ValueError, match="monitor must be one of val_loss, val_accuracy, loss, accuracy"):
        ae.EarlyStopping(monitor="val_acc")
    with pytest.raises(ValueError, match="patience must be >= 0"):
        ae.EarlyStopping(patience=-1)
    with pytest.raises(ValueError, match="min_delta must be a number >= 0"):
        ae.EarlyStopping(min_delta=-0.1)
    m = small_cnn()
    m.finalize((28, 28, 1))
    with pytest.raises(ValueError, match="early_stopping monitors val_loss, which needs a validation set"):
        m.train(x[:100], y[:100], early_stopping=ae.EarlyStopping(), verbose=False)
    with pytest.raises(TypeError, match="early_stopping must be an aether.EarlyStopping, got dict"):
        m.train(x[:100], y[:100], early_stopping={"patience": 1}, verbose=False)
    assert m.epochs_done == 0


def test_reduce_lr_on_plateau_lowers_the_learning_rate_and_resumes(fmnist, tmp_path):
    """Validating on swapped labels, the validation loss stops improving: the learning rate halves
    after each epoch that does not beat the best; a run resumed from its checkpoint continues it."""
    x, y, xv, yv = swapped_validation(fmnist)
    model = finalized_cnn
    r = ae.ReduceLROnPlateau(factor=0.5, patience=1, min_delta=0)
    m = model()
    h = m.train(x[:500], y[:500], epochs=5, batch_size=50, validation_data=(xv, yv), reduce_lr=r, verbose=False)
    lr, best, expected = 1e-3, float("inf"), []
    for e, v in enumerate(h["val_loss"]):
        assert h["lr"][e] == pytest.approx(lr, rel=1e-12), e
        if v < best:
            best = v
        else:
            lr *= 0.5
            expected.append(e)
    assert r.reductions == expected and len(expected) >= 2
    assert r.lrs == h["lr"]
    # Stopped after epoch 3 and resumed: the same learning rates and predictions.
    part = model()
    ck = str(tmp_path / "run.aether")
    part.train(x[:500], y[:500], epochs=3, batch_size=50, validation_data=(xv, yv), checkpoint=ck,
               reduce_lr=ae.ReduceLROnPlateau(factor=0.5, patience=1, min_delta=0), verbose=False)
    resumed = ae.Model.load(ck)
    hr = resumed.train(x[:500], y[:500], epochs=5, batch_size=50, validation_data=(xv, yv),
                       reduce_lr=ae.ReduceLROnPlateau(factor=0.5, patience=1, min_delta=0), verbose=False)
    assert hr["lr"] == h["lr"][3:]
    np.testing.assert_array_equal(resumed.predict(xv), m.predict(xv))
    with pytest.raises(ValueError, match=r"ReduceLROnPlateau: factor must be a number in \(0, 1\), got 1"):
        ae.ReduceLROnPlateau(factor=1)
    with pytest.raises(ValueError, match="ReduceLROnPlateau: min_lr must be a number >= 0"):
        ae.ReduceLROnPlateau(min_lr=float("nan"))
    with pytest.raises(TypeError, match="reduce_lr must be an aether.ReduceLROnPlateau, got EarlyStopping"):
        m.train(x[:100], y[:100], epochs=6, reduce_lr=ae.EarlyStopping(), verbose=False)
    assert "ReduceLROnPlateau(monitor='val_loss', factor=0.1, patience=10" in repr(ae.ReduceLROnPlateau())


def test_get_and_set_weights_copy_a_model(fmnist):
    x, y, _, _ = fmnist
    a = finalized_cnn()
    a.train(x[:300], y[:300], epochs=1, batch_size=100, verbose=False)
    w = a.get_weights()
    names = [n for n, _ in a.named_parameters()] + [n for n, _ in a.network.named_buffers()]
    assert len(w) == len(names) and all(isinstance(v, np.ndarray) for v in w)
    assert [v.shape for v in w] == [tuple(t.shape) for _, t in a.named_parameters()] + \
        [tuple(t.shape) for _, t in a.network.named_buffers()]
    b = small_cnn(seed=9)
    b.finalize((28, 28, 1))
    b.set_weights([v.astype(np.float64) for v in w])  # cast to the weights' float32
    for (_, ta), (_, tb) in zip(a.named_parameters(), b.named_parameters()):
        np.testing.assert_array_equal(np.asarray(ta), np.asarray(tb))
    # Copies both ways: changing the arrays later changes neither model.
    c = small_cnn(seed=11)
    c.finalize((28, 28, 1))
    c.set_weights(w)  # float32 arrays, which aether could have used in place
    w[0][...] = 0
    assert np.abs(np.asarray(a.named_parameters()[0][1])).sum() > 0
    np.testing.assert_array_equal(np.asarray(c.named_parameters()[0][1]), np.asarray(a.named_parameters()[0][1]))
    good = a.get_weights()
    with pytest.raises(ValueError, match=r"set_weights: got 1 values for the model's \d+ weights"):
        b.set_weights(good[:1])
    with pytest.raises(ValueError, match=r"set_weights: value 0 \('0.weight'\) has shape \(2,\)"):
        b.set_weights([np.zeros(2, np.float32)] + good[1:])
    bad = list(good)
    bad[-1] = np.full_like(good[-1], np.nan)
    with pytest.raises(ValueError, match=r"holds NaN"):
        b.set_weights(bad)
    with pytest.raises(TypeError, match="set_weights: weights must be a list of arrays"):
        b.set_weights(good[0])
    with pytest.raises(TypeError, match="set_weights: value 0 has dtype <U1, expected numbers"):
        b.set_weights([np.array(["x"])] + good[1:])
    np.testing.assert_array_equal(b.get_weights()[0], good[0])  # the failed calls changed nothing


def test_save_and_load_weights_as_safetensors(fmnist, tmp_path):
    x, y, _, _ = fmnist
    a = finalized_cnn()
    a.train(x[:300], y[:300], epochs=1, batch_size=100, verbose=False)
    path = str(tmp_path / "w.safetensors")
    a.save_weights(path)
    b = small_cnn(seed=9)
    b.finalize((28, 28, 1))
    b.load_weights(path)
    for wa, wb in zip(a.get_weights(), b.get_weights()):
        np.testing.assert_array_equal(wa, wb)
    # The file is plain safetensors: its header names every weight.
    import json
    import struct
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    names = [k for k in header if k != "__metadata__"]
    assert sorted(names) == sorted([n for n, _ in a.named_parameters()] + [n for n, _ in a.network.named_buffers()])
    assert header["__metadata__"] == {"format": "aether-weights"}
    other = ae.Model()
    other.add(ae.Flatten()); other.add(ae.Dense(784, 10))
    other.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.1))
    other.finalize((28, 28, 1))
    with pytest.raises(ValueError, match=r"load_weights: .*w.safetensors: tensor '0.weight' is no weight of the model"):
        other.load_weights(path)


def test_file_arguments_take_what_open_takes(tmp_path):
    # str, bytes and os.PathLike name files, as for open(); anything else is a TypeError. Was str(path):
    # save(b"/d/m.aether") wrote to a file named "b'/d/m.aether'" (or failed naming it), save(None) wrote
    # "./None" and save(5) "./5".
    m = ae.Model()
    m.add(ae.Dense(4, 3))
    m.configure(ae.SoftmaxCategoricalCrossEntropy(), ae.SGD(lr=0.1)).finalize((4,))
    m.save(os.fsencode(tmp_path / "bytes.aether"))
    m.save_weights(os.fsencode(tmp_path / "bytes.safetensors"))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bytes.aether", "bytes.safetensors"]
    back = ae.Model.load(os.fsencode(tmp_path / "bytes.aether"))
    back.load_weights(tmp_path / "bytes.safetensors")
    np.testing.assert_array_equal(back.predict(np.ones((2, 4), np.float32)), m.predict(np.ones((2, 4), np.float32)))
    for bad, kind in [(None, "NoneType"), (5, "int"), (["m.aether"], "list")]:
        with pytest.raises(TypeError, match=f"save: path must be a path \\(str, bytes or os.PathLike\\), got {kind}"):
            m.save(bad)
        with pytest.raises(TypeError, match=f"load: path must be a path .*got {kind}"):
            ae.Model.load(bad)
    with pytest.raises(ValueError, match="save_weights: path must not be empty"):
        m.save_weights("")
    with pytest.raises(TypeError, match="ModelCheckpoint: filepath must be a path .*got NoneType"):
        ae.ModelCheckpoint(None)
    assert ae.ModelCheckpoint(b"ck-{epoch}.aether").filepath == "ck-{epoch}.aether"
    assert ae.CSVLogger(tmp_path / "log.csv").filename == str(tmp_path / "log.csv")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bytes.aether", "bytes.safetensors"]
    assert not os.path.exists("None") and not os.path.exists("5")


def test_evaluate_and_predict_take_keras_verbose(capsys):
    # model.evaluate(x, y, verbose=2) (Keras' habit) was "got an unexpected keyword argument 'verbose'".
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((64, 4)).astype(np.float32), rng.integers(0, 3, 64)
    m = ae.Model()
    m.add(ae.Dense(4, 3))
    m.configure(ae.SoftmaxCategoricalCrossEntropy(), ae.SGD(lr=0.1)).finalize((4,))
    quiet = m.evaluate(x, y, verbose=0)
    m.predict(x, verbose=False)
    assert capsys.readouterr().out == ""
    loud = m.evaluate(x, y, verbose=2)
    assert loud == quiet
    line = capsys.readouterr().out
    assert re.fullmatch(rf"evaluate: accuracy {100 * loud['accuracy']:.2f}%  loss {loud['loss']:.4f}  "
                        r"\(64 samples\)  \d+\.\d s\n", line), line
    np.testing.assert_array_equal(m.predict(x, verbose=1), m.predict(x))
    assert re.fullmatch(r"predict: 64 samples  \d+\.\d s\n", capsys.readouterr().out)
