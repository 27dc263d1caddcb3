"""Shared fixtures: small slices of the real Fashion-MNIST data set, and the aether CLI."""

import os
import shutil
import sys

import numpy as np
import pytest

import aether as ae


@pytest.fixture(scope="session")
def fmnist():
    """(X_train, y_train, X_test, y_test): 4000 + 1000 real Fashion-MNIST images, uint8 (N,28,28,1)."""
    (x, y), (xt, yt) = ae.datasets.fashion_mnist()
    return x[:4000], y[:4000], xt[:1000], yt[:1000]


@pytest.fixture(scope="session")
def cli():
    """The `aether` command installed with the package (or $AETHER_CLI)."""
    path = os.environ.get("AETHER_CLI") or shutil.which("aether") or os.path.join(os.path.dirname(sys.executable), "aether")
    if not os.path.exists(path):
        pytest.fail("the aether CLI is not installed next to this Python (pip install . puts it there)")
    return path


def small_cnn(channels=1, seed=42, classes=10):
    """The README's example network (Conv2d, BatchNorm, ReLU, MaxPool2d, GlobalAvgPool, Dense)."""
    model = ae.Model()
    model.manual_seed(seed)
    model.add(ae.Conv2d(channels, 32, (3, 3), (1, 1), padding="same"))
    model.add(ae.BatchNorm(epsilon=1e-5, momentum=0.9))
    model.add(ae.ReLU())
    model.add(ae.MaxPool2d((2, 2), (2, 2), padding="valid"))
    model.add(ae.GlobalAvgPool())
    model.add(ae.Dense(32, classes))
    model.configure(loss=ae.SoftmaxCategoricalCrossEntropy(label_smoothing=0.05),
                    optimizer=ae.AdamW(lr=1e-3, weight_decay=0.01), accuracy=ae.CategoricalAccuracy())
    return model
