"""Residual blocks from Python: values and input gradients against a NumPy reference, training,
saving and loading, the resnet20 preset, and errors."""

import numpy as np
import pytest

import aether as ae


def conv_ref(x, w, stride, pad):
    """x (N,H,W,C), w (O,KH,KW,C) -> (N,OH,OW,O): a zero-padded, strided cross-correlation."""
    kh, kw = w.shape[1:3]
    xp = np.pad(x, ((0, 0), (pad, pad), (pad, pad), (0, 0)))
    win = np.lib.stride_tricks.sliding_window_view(xp, (kh, kw), axis=(1, 2))  # (N,H',W',C,KH,KW)
    return np.einsum("nhwcij,oijc->nhwo", win[:, ::stride, ::stride], w)


def bn_ref(x, p, prefix, eps=1e-5):
    """BatchNorm in evaluation: the running statistics, then the affine."""
    return (x - p[prefix + "running_mean"]) / np.sqrt(p[prefix + "running_var"] + eps) * p[prefix + "weight"] + \
        p[prefix + "bias"]


def block(stride):
    """relu(conv3x3(stride) + BN + ReLU + conv3x3 + BN (x) + shortcut(x)), 3 -> 4 channels."""
    shortcut = [ae.Conv2d(3, 4, 1, stride=stride, bias=False), ae.BatchNorm()]
    return [ae.Residual([ae.Conv2d(3, 4, 3, stride=stride, padding=1, bias=False), ae.BatchNorm(), ae.ReLU(),
                         ae.Conv2d(4, 4, 3, padding=1, bias=False), ae.BatchNorm()], shortcut=shortcut),
            ae.ReLU(),
            ae.Residual([ae.Conv2d(4, 4, 3, padding=1), ae.ReLU()]),  # identity shortcut, conv with bias
            ae.GlobalAvgPool(), ae.Dense(4, 3)]


def block_ref(x, p):
    """The NumPy float64 reference of block(stride 2)'s network in evaluation mode."""
    body = conv_ref(x, p["0.body.0.weight"], 2, 1)
    body = np.maximum(bn_ref(body, p, "0.body.1."), 0)
    body = bn_ref(conv_ref(body, p["0.body.3.weight"], 1, 1), p, "0.body.4.")
    short = bn_ref(conv_ref(x, p["0.shortcut.0.weight"], 2, 0), p, "0.shortcut.1.")
    h = np.maximum(body + short, 0)
    h = h + np.maximum(conv_ref(h, p["2.body.0.weight"], 1, 1) + p["2.body.0.bias"], 0)
    return h.mean(axis=(1, 2)) @ p["4.weight"].T + p["4.bias"]


def trained_block_model():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((64, 8, 8, 3)).astype(np.float32)
    y = (x[:, :4, :, 0].mean(axis=(1, 2)) > 0).astype(np.int64) + (x[..., 1].mean(axis=(1, 2)) > 0)
    m = ae.Model(); m.manual_seed(3)
    for layer in block(2):
        m.add(layer)
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.05, momentum=0.9))
    m.finalize((8, 8, 3))
    h = m.train(x, y, epochs=4, batch_size=16, shuffle=True, verbose=False)
    return m, x, y, h


def params_f64(m):
    p = {n: np.asarray(t, dtype=np.float64) for n, t in m.named_parameters()}
    p.update({n: np.asarray(t, dtype=np.float64) for n, t in m.network.named_buffers()})
    return p


def test_residual_values_and_input_gradients_match_numpy():
    m, x, _, h = trained_block_model()
    assert h["loss"][-1] < h["loss"][0]
    names = [n for n, _ in m.named_parameters()]
    assert "0.shortcut.0.weight" in names and "2.body.0.bias" in names
    p = params_f64(m)
    assert np.abs(p["0.body.1.running_mean"]).max() > 0  # training moved the statistics
    m.network.eval()
    xs = x[:5].astype(np.float64)
    out = m(ae.tensor(x[:5]))
    np.testing.assert_allclose(np.asarray(out), block_ref(xs, p), rtol=1e-4, atol=1e-5)
    # d(sum(out * r))/dx against central differences of the float64 reference.
    r = np.random.default_rng(1).standard_normal((5, 3))
    xt = ae.tensor(x[:5], requires_grad=True)
    (m(xt) * ae.tensor(r.astype(np.float32))).sum().backward()
    grad = np.asarray(xt.grad)
    eps = 1e-6
    for idx in [(0, 0, 0, 0), (1, 3, 4, 1), (2, 7, 7, 2), (4, 5, 2, 0), (3, 1, 6, 2)]:
        xp, xm = xs.copy(), xs.copy()
        xp[idx] += eps
        xm[idx] -= eps
        fd = ((block_ref(xp, p) * r).sum() - (block_ref(xm, p) * r).sum()) / (2 * eps)
        assert grad[idx] == pytest.approx(fd, rel=1e-3, abs=1e-5), idx


def test_residual_model_saves_loads_and_summarises(tmp_path):
    m, x, _, _ = trained_block_model()
    text = m.summary(print_fn=None)
    assert "Residual(Sequential + Sequential)" in text and "Residual(Sequential + identity)" in text
    # The layers inside each block, indented under it, named as their parameters.
    assert "\n  0.body.0 Conv2d(3 -> 4, 3x3, stride 2, pad 1, no bias) " in text
    assert "\n  0.shortcut.1 BatchNorm2d(4) " in text and "\n  2.body.1 ReLU " in text
    path = tmp_path / "resnet.aether"
    m.save(path)
    again = ae.Model.load(path)
    np.testing.assert_array_equal(again.predict(x[:8]), m.predict(x[:8]))
    assert [n for n, _ in again.named_parameters()] == [n for n, _ in m.named_parameters()]


def test_resnet20_preset_builds_and_takes_one_step():
    ae.manual_seed(0)
    m = ae.Model.preset("resnet20", (32, 32, 3), classes=10)
    assert "Trainable parameters: 272474" in m.summary(print_fn=None)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 256, (16, 32, 32, 3), dtype=np.uint8)
    h = m.train(x, rng.integers(0, 10, 16), epochs=1, batch_size=16, verbose=False)
    assert np.isfinite(h["loss"]).all()
    assert m.predict(x[:2]).shape == (2, 10)


def test_residual_errors_name_the_shapes():
    m = ae.Model()
    m.add(ae.Residual([ae.Conv2d(3, 4, 3, stride=2, padding=1)]))  # no shortcut for the stride
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
    with pytest.raises(ValueError, match=r"Residual: its body gives samples of shape \(4, 4, 4\) but its input "
                                         r"\(the identity shortcut\) is \(8, 8, 3\)"):
        m.finalize((8, 8, 3))
    m = ae.Model()
    m.add(ae.Residual(ae.Conv2d(3, 4, 1), shortcut=[ae.Conv2d(3, 4, 1, stride=2)]))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
    with pytest.raises(ValueError, match=r"\(8, 8, 4\) but its shortcut gives \(4, 4, 4\)"):
        m.finalize((8, 8, 3))
    with pytest.raises(ValueError, match="at least one layer"):
        ae.Residual([])
    with pytest.raises(TypeError, match="Residual shortcut.*str"):
        ae.Residual(ae.ReLU(), shortcut="conv")
