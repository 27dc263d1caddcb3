"""aether: train neural networks fast on the CPU and on NVIDIA GPUs, from Python.

The Model API is Aether-ML's (same class names and arguments); the engine under it is aether's C++
core: a lazy op graph with a fusing scheduler that compiles its kernels. NumPy arrays go in and
come out, without copies where the memory allows.

    import aether as ae
    model = ae.Model(); model.manual_seed(42)
    model.add(ae.Conv2d(3, 32, (3, 3), (1, 1), padding="same"))
    model.add(ae.BatchNorm(epsilon=1e-5, momentum=0.9)); model.add(ae.ReLU())
    model.add(ae.MaxPool2d((2, 2), (2, 2), padding="valid"))
    model.add(ae.GlobalAvgPool()); model.add(ae.Dense(32, 10))
    model.configure(loss=ae.SoftmaxCategoricalCrossEntropy(label_smoothing=0.05),
                    optimizer=ae.AdamW(lr=1e-3, weight_decay=0.01),
                    accuracy=ae.CategoricalAccuracy())
    model.to("cpu"); model.finalize(input_shape=(32, 32, 3))
    history = model.train(X, y, epochs=2, batch_size=128, shuffle=True, validation_data=(Xt, yt))
"""

from . import _aether
from ._aether import (
    Module,
    NotFoundError,
    Tensor,
    clip_grad_norm,
    from_dlpack,
    functional,
    grad_enabled,
    manual_seed,
    matmul,
    no_grad,
    rank,
    realize,
    world_size,
)
from ._tensor import arange, full, ones, rand, randn, tensor, zeros
from ._tensor_ops import cat, einsum, stack, where
from ._tensor_methods import eye, full_like, linspace, ones_like, zeros_like
from . import _numpy_dispatch  # noqa: F401 (NumPy's ufuncs and functions on Tensors)
from . import _updates  # noqa: F401 (t.at[...].set/add, index_add, masked_fill)
from .layers import (
    AvgPool2d,
    BatchNorm,
    Conv2d,
    Dense,
    Dropout,
    ELU,
    Flatten,
    GELU,
    GlobalAvgPool,
    GlobalMaxPool,
    Layer,
    LayerNorm,
    LeakyReLU,
    MaxPool2d,
    ReLU,
    Residual,
    Scale,
    Sigmoid,
    SiLU,
    SoftMax,
    Softplus,
    SpatialDropout,
    Tanh,
)
from .callbacks import (Callback, CSVLogger, EarlyStopping, LambdaCallback, LearningRateScheduler, ModelCheckpoint,
                        ReduceLROnPlateau)
from .losses import CategoricalCrossEntropy, MeanSquaredError, SigmoidBinaryCrossEntropy, SoftmaxCategoricalCrossEntropy
from .metrics import CategoricalAccuracy, RegressionAccuracy
from .model import Model
from .optimizers import SGD, Adam, AdamW, Muon
from .preprocessing import Compose, Rescale, StandardScaler, ToTensor
from . import callbacks, datasets

__version__ = "0.1.0"

__all__ = [
    "Adam", "AdamW", "AvgPool2d", "BatchNorm", "CSVLogger", "Callback", "CategoricalAccuracy", "CategoricalCrossEntropy", "Compose",
    "Conv2d", "Dense", "Dropout", "ELU", "EarlyStopping", "Flatten", "GELU", "GlobalAvgPool", "GlobalMaxPool", "LambdaCallback", "Layer", "LearningRateScheduler", "LayerNorm", "LeakyReLU",
    "MaxPool2d", "MeanSquaredError", "Model", "ModelCheckpoint", "Module", "Muon", "NotFoundError", "ReLU", "ReduceLROnPlateau", "RegressionAccuracy", "Rescale", "Residual",
    "SGD", "Scale", "SiLU", "Sigmoid", "SigmoidBinaryCrossEntropy", "SoftMax", "SoftmaxCategoricalCrossEntropy", "Softplus", "SpatialDropout", "StandardScaler", "Tanh",
    "Tensor",
    "ToTensor", "arange", "callbacks", "cat", "clip_grad_norm", "datasets", "einsum", "eye", "from_dlpack", "full", "full_like",
    "functional", "grad_enabled", "linspace", "manual_seed", "matmul", "no_grad", "ones", "ones_like", "rand",
    "randn", "rank", "realize", "stack", "tensor", "where", "world_size", "zeros", "zeros_like",
]
