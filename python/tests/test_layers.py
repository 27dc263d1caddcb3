"""Layers written in Python: parameters, autograd gradients, training, saving and loading."""

import numpy as np
import pytest

import aether as ae


class Scale(ae.Layer):
    """y = x * gain + shift per channel: a layer written from tensor ops."""

    def __init__(self, channels):
        super().__init__()
        self.channels = channels
        self.add_parameter("gain", ae.ones([channels]))
        self.add_parameter("shift", ae.zeros([channels]))
        self.add_buffer("calls", ae.zeros([1]))

    def forward(self, x):
        return x * self.gain + self.shift

    def get_config(self):
        return {"channels": self.channels}


class Swish(ae.Layer):
    def forward(self, x):
        return x * x.sigmoid()


def test_python_layer_gradients_match_finite_differences():
    layer = Scale(3)
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal((4, 3))
    x = ae.tensor(x0, requires_grad=True)
    (layer(x).square().sum()).backward()
    np.testing.assert_allclose(np.asarray(x.grad), 2 * x0, rtol=1e-6)
    g = dict(layer.named_parameters())
    assert set(g) == {"gain", "shift"}
    np.testing.assert_allclose(np.asarray(g["gain"].grad), (2 * x0 * x0).sum(0), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(g["shift"].grad), (2 * x0).sum(0), rtol=1e-5)
    s = Swish()
    t = ae.tensor(x0, requires_grad=True)
    s(t).sum().backward()
    sig = 1 / (1 + np.exp(-x0))
    np.testing.assert_allclose(np.asarray(t.grad), sig + x0 * sig * (1 - sig), rtol=1e-5)


def test_python_layers_train_save_and_load(tmp_path):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((256, 6)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    m = ae.Model(); m.manual_seed(0)
    m.add(ae.Dense(6, 8)); m.add(Scale(8)); m.add(Swish()); m.add(ae.Dense(8, 2))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.Adam(lr=1e-2))
    m.finalize((6,))
    names = [n for n, _ in m.named_parameters()]
    assert "1.gain" in names and "1.shift" in names
    gain0 = np.asarray(dict(m.named_parameters())["1.gain"]).copy()
    h = m.train(x, y, epochs=5, batch_size=32, verbose=False)
    assert h["accuracy"][-1] > 0.8
    assert not np.array_equal(np.asarray(dict(m.named_parameters())["1.gain"]), gain0)  # trained
    path = tmp_path / "py_layers.aether"
    m.save(path)
    again = ae.Model.load(path)
    np.testing.assert_array_equal(again.predict(x[:10]), m.predict(x[:10]))
    assert type(again.network[1]).__name__ == "Scale"


class NeedsArg(ae.Layer):
    """No get_config: its constructor's argument is not saved."""

    def __init__(self, k):
        super().__init__()
        self.k = k

    def forward(self, x):
        return x * self.k


def test_a_layer_that_cannot_be_rebuilt_names_itself_on_load(tmp_path):
    class Local(ae.Layer):  # not importable: defined in a function
        def forward(self, x):
            return x

    for layer, error in [(NeedsArg(2.0), r"rebuilding the Python layer \S*NeedsArg with from_config\(\{\}\) "
                                         r"failed: TypeError: .*missing 1 required positional argument: 'k'.*"
                                         r"returns them from get_config\(\)"),
                         (Local(), r"the Python layer class '\S*Local' cannot be found")]:
        m = ae.Model()
        m.add(ae.Dense(4, 3)); m.add(layer)
        m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
        m.finalize((4,))
        m.save(tmp_path / "m.aether")
        with pytest.raises(RuntimeError, match=error):  # was the bare TypeError / AttributeError
            ae.Model.load(tmp_path / "m.aether")


def test_layer_errors():
    with pytest.raises(AttributeError, match="nope"):
        Scale(2).nope
    with pytest.raises(NotImplementedError):
        ae.Layer()(ae.zeros([1]))


def test_python_layer_mistakes_are_clear_errors():
    class Returns5(ae.Layer):
        def forward(self, x):
            return 5

    m = ae.Model()
    m.add(ae.Dense(4, 3)); m.add(Returns5())
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
    with pytest.raises(TypeError, match="Returns5.forward must return an aether Tensor, got int"):
        m.finalize((4,))  # was RuntimeError "std::bad_cast"
    layer = ae.Layer()
    layer.add_parameter("w", ae.ones([2]))
    with pytest.raises(ValueError, match="'w' is already a parameter, buffer or layer"):
        layer.add_parameter("w", ae.zeros([2]))  # was accepted, and "w" read the first
    with pytest.raises(ValueError, match="'w' is already"):
        layer.add_buffer("w", ae.zeros([2]))
    with pytest.raises(ValueError, match="name 'a.b' must be non-empty and hold no '.'"):
        layer.add_parameter("a.b", ae.ones([2]))
    with pytest.raises(TypeError, match="add_parameter: 'g' must be an aether Tensor .*got int"):
        layer.add_parameter("g", 5)  # was nanobind's signature dump
    assert [n for n, _ in layer.named_parameters()] == ["w"] and np.asarray(layer.w).tolist() == [1, 1]
    with pytest.raises(TypeError, match=r"accuracy must be an aether metric \(.*\), got int"):
        ae.Model().configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(), accuracy=5)
    with pytest.raises(ValueError, match="lookahead's every must be >= 1, got 0"):
        ae.Model().configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(), lookahead={"every": 0})


def test_layers_that_lose_the_batch_axis_or_lack_forward_are_named():
    class Flat(ae.Layer):
        def forward(self, x):
            return x.reshape(-1)  # drops the batch axis

    class Total(ae.Layer):
        def forward(self, x):
            return x.sum()

    class NoForward(ae.Layer):
        pass

    for layer, shape in [(Flat(), r"\(384,\)"), (Total(), r"\(\)")]:
        m = ae.Model()
        m.add(layer); m.add(ae.Dense(192, 2))
        m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
        with pytest.raises(ValueError, match=rf"{type(layer).__name__}: a layer must keep the batch axis first: "
                                             rf"a batch of 2 samples \(2, 8, 8, 3\) gave {shape}"):
            m.finalize((8, 8, 3))  # was IndexError "tuple index out of range"
    m = ae.Model()
    m.add(NoForward())
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
    with pytest.raises(NotImplementedError, match="NoForward: a Layer subclass must define forward"):
        m.finalize((4,))
    with pytest.raises(ValueError, match="LeakyReLU: alpha must be finite, got nan"):
        ae.LeakyReLU(float("nan"))


def test_categorical_cross_entropy_needs_a_model_that_gives_probabilities():
    """CategoricalCrossEntropy takes probabilities; on a Dense layer's scores it trained on clamped
    values without a word. A Python layer last may compute probabilities itself: not refused."""
    class Probabilities(ae.Layer):
        def forward(self, x):
            return ae.functional.softmax(x)

    def finalize(*layers):
        m = ae.Model()
        for layer in layers:
            m.add(layer)
        m.configure(loss=ae.CategoricalCrossEntropy(), optimizer=ae.SGD())
        m.finalize((4,))
        return m

    with pytest.raises(ValueError, match="categorical_cross_entropy takes probabilities, but the model ends with "
                                         r"Linear \(layer 0\).*Softmax layer.*SoftmaxCategoricalCrossEntropy"):
        finalize(ae.Dense(4, 3))
    for last in (ae.LayerNorm(), ae.Tanh()):  # scores too (Sigmoid's are in [0, 1]: not refused)
        with pytest.raises(ValueError, match=f"model ends with {type(last).__name__} \\(layer 1\\)"):
            finalize(ae.Dense(4, 3), last)
    finalize(ae.Dense(4, 3), ae.SoftMax())
    m = finalize(ae.Dense(4, 3), Probabilities())
    p = m.predict(np.ones((2, 4), np.float32))
    assert np.allclose(np.asarray(p).sum(1), 1, atol=1e-5)


def test_layer_norm_matches_numpy_and_survives_save_and_load(tmp_path):
    """ae.LayerNorm normalises each sample over its last axis (each pixel's channels in NHWC), with a
    learned scale and offset, as NumPy computes it; functional.layer_norm over several axes too; a
    model with it saves and loads to the same predictions."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 4, 4, 6)) * 3 + 1
    def ref(v, axes, eps=1e-5):
        dims = tuple(range(v.ndim - axes, v.ndim))
        return (v - v.mean(dims, keepdims=True)) / np.sqrt(v.var(dims, keepdims=True) + eps)
    w, b = rng.standard_normal(6), rng.standard_normal(6)
    got = ae.functional.layer_norm(ae.tensor(x), ae.tensor(w), ae.tensor(b))
    np.testing.assert_allclose(np.asarray(got), ref(x, 1) * w + b, rtol=1e-10, atol=1e-10)
    np.testing.assert_allclose(np.asarray(ae.functional.layer_norm(ae.tensor(x), axes=3)), ref(x, 3), atol=1e-10)
    m = ae.Model(); m.manual_seed(2)
    for layer in (ae.Conv2d(6, 4, 3, padding="same"), ae.LayerNorm(epsilon=1e-3), ae.Tanh(), ae.Flatten(),
                  ae.Dense(64, 3), ae.Sigmoid()):
        m.add(layer)
    m.configure(loss=ae.MeanSquaredError(), optimizer=ae.Adam(lr=0.01))
    m.finalize((4, 4, 6))
    xs = x.astype(np.float32)
    m.train(xs, rng.random((5, 3)).astype(np.float32), epochs=2, batch_size=5, verbose=False)
    names = [n for n, _ in m.named_parameters()]
    assert any(n.endswith(".weight") and n.startswith("1.") for n in names), names  # LayerNorm's scale
    before = np.asarray(m.predict(xs))
    assert np.all((before > 0) & (before < 1))  # Sigmoid's range
    m.save(str(tmp_path / "ln.aether"))
    np.testing.assert_allclose(np.asarray(ae.Model.load(str(tmp_path / "ln.aether")).predict(xs)), before, rtol=1e-6)
    with pytest.raises(ValueError, match="epsilon must be finite and > 0"):
        ae.LayerNorm(0)


def test_elu_silu_softplus_layers_match_numpy_and_survive_save_and_load(tmp_path):
    """ae.ELU, ae.SiLU and ae.Softplus give NumPy's formulas inside a model (each after a Dense layer
    whose weight is the identity), and a model with them trains, saves and loads to the same
    predictions."""
    x = np.linspace(-6, 6, 40, dtype=np.float32).reshape(10, 4)
    refs = {"elu": (ae.ELU(0.5), np.where(x > 0, x, 0.5 * np.expm1(np.minimum(x, 0)))),
            "silu": (ae.SiLU(), x / (1 + np.exp(-x))),
            "softplus": (ae.Softplus(2.0, 5.0), np.where(2 * x > 5, x, np.log1p(np.exp(2 * x)) / 2))}
    for name, (layer, want) in refs.items():
        m = ae.Model()
        m.add(ae.Dense(4, 4)); m.add(layer)
        m.configure(loss=ae.MeanSquaredError(), optimizer=ae.SGD()).finalize((4,))
        m.set_weights([np.eye(4, dtype=np.float32), np.zeros(4, np.float32)])
        np.testing.assert_allclose(m.predict(x), want, rtol=1e-5, atol=1e-6, err_msg=name)
    rng = np.random.default_rng(4)
    xs = rng.standard_normal((32, 6)).astype(np.float32)
    m = ae.Model(); m.manual_seed(3)
    for layer in (ae.Dense(6, 8), ae.ELU(), ae.Dense(8, 8), ae.SiLU(), ae.Dense(8, 8), ae.Softplus(), ae.Dense(8, 3)):
        m.add(layer)
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.Adam(lr=0.01)).finalize((6,))
    h = m.train(xs, (xs[:, 0] > 0).astype(np.int64) + (xs[:, 1] > 0), epochs=5, batch_size=8, verbose=False)
    assert h["loss"][-1] < h["loss"][0]
    assert "SiLU" in m.summary(print_fn=None) and "Softplus(1)" in m.summary(print_fn=None)
    m.save(str(tmp_path / "act.aether"))
    np.testing.assert_array_equal(ae.Model.load(str(tmp_path / "act.aether")).predict(xs), m.predict(xs))
    with pytest.raises(ValueError, match="ELU: alpha must be finite, got nan"):
        ae.ELU(float("nan"))
    with pytest.raises(ValueError, match="Softplus: beta must be finite and > 0, got 0"):
        ae.Softplus(0)
