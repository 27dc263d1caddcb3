"""Data sets as NumPy arrays, and the preprocessing transforms."""

import os
import pathlib

import numpy as np
import pytest

import aether as ae


def test_fashion_mnist_arrays():
    (x, y), (xt, yt) = ae.datasets.fashion_mnist()
    assert x.shape == (60000, 28, 28, 1) and x.dtype == np.uint8
    assert y.shape == (60000,) and y.dtype == np.int64 and set(np.unique(y)) == set(range(10))
    assert xt.shape == (10000, 28, 28, 1) and yt.shape == (10000,)
    assert not x.flags.owndata  # a view of the loaded data set, not a copy
    x2, _ = ae.datasets.fashion_mnist("test")
    assert np.array_equal(x2, xt)


def test_cifar10_arrays_when_present():
    try:
        x, y = ae.datasets.cifar10("test")
    except RuntimeError as e:  # not every machine has CIFAR-10; the error names where it looked
        assert "cifar-10" in str(e)
        pytest.skip("CIFAR-10 is not on this machine")
    assert x.shape == (10000, 32, 32, 3) and x.dtype == np.uint8 and y.shape == (10000,)


def test_missing_data_set_errors():
    with pytest.raises((ValueError, RuntimeError), match="imagenet"):
        ae.datasets.load("imagenet", "train")
    with pytest.raises((ValueError, RuntimeError), match="split"):
        ae.datasets.fashion_mnist("validation")
    with pytest.raises(RuntimeError, match=r"no fashion-mnist files found \(from data_dir\)(.|\n)*\n"
                                           r"Pass data_dir=DIR or set AETHER_DATA=DIR"):  # Python's keyword
        ae.datasets.fashion_mnist("train", data_dir="/nonexistent/dir")
    with pytest.raises(TypeError, match="data_dir must be a path .*got int"):
        ae.datasets.cifar10(data_dir=5)  # was nanobind's signature dump
    with pytest.raises(RuntimeError, match="fashion"):
        ae.datasets.fashion_mnist("train", data_dir=pathlib.Path("/nonexistent/dir"))  # a PathLike is a path


def test_image_folder_arrays(tmp_path):
    """ae.datasets.image_folder: a folder per class of PGM images; labels index the sorted class
    folders, each image's pixels as written, resized on request, and a model trains on the arrays."""
    rng = np.random.default_rng(0)
    written = {}
    for split, n in (("train", 6), ("test", 2)):
        for cls in ("ant", "bee"):
            (tmp_path / split / cls).mkdir(parents=True)
            for i in range(n):
                px = rng.integers(0, 256, (4, 3), dtype=np.uint8)
                (tmp_path / split / cls / f"{i}.pgm").write_bytes(b"P5\n3 4\n255\n" + px.tobytes())
                written[(split, cls, i)] = px
    assert ae.datasets.image_folder_classes(tmp_path) == ["ant", "bee"]
    (x, y), (xt, yt) = ae.datasets.image_folder(tmp_path)
    assert x.shape == (12, 4, 3, 1) and x.dtype == np.uint8 and xt.shape == (4, 4, 3, 1)
    # Each image with its class (in a fixed shuffle that mixes the classes).
    for split, xs, ys in (("train", x, y), ("test", xt, yt)):
        got = sorted((int(label), img[:, :, 0].tobytes()) for img, label in zip(xs, ys))
        want = sorted((["ant", "bee"].index(c), px.tobytes()) for (s, c, _), px in written.items() if s == split)
        assert got == want, split
    assert list(y) != sorted(y)  # mixed, not class after class
    m = ae.Model()
    m.add(ae.Flatten()); m.add(ae.Dense(12, 2))
    m.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD(lr=0.1)).finalize((4, 3, 1))
    assert len(m.train(x, y, epochs=2, batch_size=4, verbose=False)["loss"]) == 2
    with pytest.raises(RuntimeError, match="image-folder has no default folder"):
        ae.datasets.load("image-folder", "train")
    # Resized: every image 8x6.
    (xr, yr), _ = ae.datasets.image_folder(tmp_path, image_size=(8, 6))
    assert xr.shape == (12, 8, 6, 1)
    np.testing.assert_array_equal(yr, y)
    (tmp_path / "data_batch_1.bin").write_bytes(b"")  # found by name; refused before it is read
    with pytest.raises(ValueError, match=r"\(8x6\) is for image folders; cifar-10 has one image size"):
        ae.datasets.load("cifar10", "train", str(tmp_path), image_size=(8, 6))
    (tmp_path / "train" / "bee" / "bad.png").write_bytes(b"not a png")
    with pytest.raises(RuntimeError, match=r"bad\.png: not a readable image"):
        ae.datasets.image_folder(tmp_path, "train")


def test_preprocessing():
    x = np.arange(2 * 2 * 2 * 3, dtype=np.uint8).reshape(2, 2, 2, 3)
    r = ae.Rescale(1 / 255)(x)
    assert r.dtype == np.float32 and r.max() == pytest.approx(23 / 255)
    assert ae.Rescale(2.0, 1.0)(np.ones(2)).tolist() == [3.0, 3.0]
    s = ae.StandardScaler().fit(r)
    z = s.transform(r)
    np.testing.assert_allclose(z.reshape(-1, 3).mean(0), 0, atol=1e-5)
    np.testing.assert_allclose(z.reshape(-1, 3).std(0), 1, atol=1e-3)
    np.testing.assert_allclose(s.inverse_transform(z), r, atol=1e-6)
    np.testing.assert_allclose(ae.StandardScaler().fit_transform(r), z)
    with pytest.raises(ValueError, match="fit"):
        ae.StandardScaler().transform(r)
    with pytest.raises(ValueError, match=r"transform: fitted for 3 channels, got an array of shape \(2, 4\)"):
        s.transform(np.zeros((2, 4), np.float32))
    # Mistakes that gave NumPy's errors, warnings or NaNs (inverse_transform before fit: TypeError on None).
    with pytest.raises(ValueError, match="inverse_transform: call fit"):
        ae.StandardScaler().inverse_transform(z)
    with pytest.raises(ValueError, match=r"fit: the data of shape \(0, 3\) is empty"):
        ae.StandardScaler().fit(np.zeros((0, 3)))  # gave NaN mean and std with a RuntimeWarning
    with pytest.raises(ValueError, match="got a scalar"):
        s.transform(1.0)
    with pytest.raises(ValueError, match=r"one value per channel, got shapes \(3,\) and \(2,\)"):
        ae.StandardScaler(mean=[0.5] * 3, std=[0.2] * 2)
    with pytest.raises(ValueError, match="both mean and std"):
        ae.StandardScaler(mean=[0.5] * 3)
    with pytest.raises(ValueError, match="std finite and >= 0"):
        ae.StandardScaler(mean=[0.5], std=[-1.0])
    with pytest.raises(ValueError, match="epsilon must be finite and >= 0"):
        ae.StandardScaler(epsilon=-1)
    np.testing.assert_allclose(ae.StandardScaler(mean=0.5, std=0.25)(np.ones((2, 1), np.float32)), [[2.0], [2.0]],
                               rtol=1e-5)
    c = ae.Compose([ae.Rescale(1 / 255), ae.StandardScaler(mean=[0.5] * 3, std=[0.25] * 3)])
    np.testing.assert_allclose(c(x), (x / 255 - 0.5) / (0.25 + 1e-7), rtol=1e-5)
    f = np.ones((2, 3), np.float32)
    t = ae.ToTensor()(f)
    assert isinstance(t, ae.Tensor) and t.dtype == "float32" and np.shares_memory(np.asarray(t), f)
    assert ae.ToTensor()(x).dtype == "float32"
