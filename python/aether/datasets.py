"""The data sets aether's CLI trains on, as NumPy arrays: images (N, H, W, C) uint8 and labels (N,)
int64 (Fashion-MNIST, CIFAR-10, and a folder of one's own images). The arrays view the loaded data (no copy). Files are found like `aether train` finds them
(data_dir, then $AETHER_DATA, then the defaults: Debian's dataset-fashion-mnist package, a
shared/data/cifar-10 folder, or what `aether data fetch cifar10` downloaded)."""

from __future__ import annotations

from typing import Optional, Tuple, Union

import numpy as np

from . import _aether
from ._checks import integer
from ._checks import PathArg
from ._checks import path as path_arg

Arrays = Tuple[np.ndarray, np.ndarray]


def load(name: str, split: Optional[str] = None, data_dir: Optional[PathArg] = None,
         image_size: Optional[Tuple[int, int]] = None) -> Union[Arrays, Tuple[Arrays, Arrays]]:
    """(X, y) of one split ("train" or "test"), or ((X_train, y_train), (X_test, y_test)).
    image_size (height, width): an image folder's images resized to it."""
    if split is None:
        return load(name, "train", data_dir, image_size), load(name, "test", data_dir, image_size)
    h, w = (0, 0) if image_size is None else (integer(image_size[0], "image_size", 1),
                                              integer(image_size[1], "image_size", 1))
    where = path_arg(data_dir, "datasets: data_dir") if data_dir is not None else ""  # "": the default place
    ds = _aether._load_dataset(name, split, where, h, w)
    return _aether._dataset_arrays(ds)


def fashion_mnist(split: Optional[str] = None, data_dir: Optional[PathArg] = None):
    """Fashion-MNIST: (60000, 28, 28, 1) / (10000, 28, 28, 1) uint8 images, 10 classes."""
    return load("fashion-mnist", split, data_dir)


def cifar10(split: Optional[str] = None, data_dir: Optional[PathArg] = None):
    """CIFAR-10: (50000, 32, 32, 3) / (10000, 32, 32, 3) uint8 images, 10 classes."""
    return load("cifar-10", split, data_dir)


def image_folder(data_dir: PathArg, split: Optional[str] = None,
                 image_size: Optional[Tuple[int, int]] = None):
    """One's own images: data_dir/train/<class>/<image> and data_dir/test/<class>/<image> (PNG, JPEG,
    BMP, GIF, binary PNM). image_size (height, width): every image resized to it; None: all must have
    one size. Labels index image_folder_classes(data_dir): the train folder's sub-folders, sorted.
    Images are (N, H, W, 1) when all are grey, else (N, H, W, 3)."""
    return load("image-folder", split, data_dir, image_size)


def image_folder_classes(data_dir: PathArg) -> list:
    """The class names of an image folder, in label order."""
    return list(_aether._image_folder_classes(path_arg(data_dir, "image_folder_classes: data_dir")))
