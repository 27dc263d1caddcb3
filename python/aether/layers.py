"""Layers, with Aether-ML's names and arguments.

Built-in layers are descriptions until Model.finalize(): then each becomes aether's C++ module,
with what Aether-ML leaves out (BatchNorm's channel count) taken from the shape that reaches it.
Activations are NHWC, as in Aether-ML. `Layer` is the base for layers written in Python.
"""

from __future__ import annotations

import math
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from . import _aether
from ._aether import Tensor
from ._checks import integer

Pair = Union[int, Tuple[int, int], Sequence[int]]


def _pair(v: Pair, what: str, least: int) -> Tuple[int, int]:
    """(v, v) for an int v, else v as a pair; each value an int of at least `least`."""
    p = tuple(v) if isinstance(v, (tuple, list)) else (v, v)
    if len(p) != 2:
        raise ValueError(f"{what} must be an int or a pair of ints, got {v!r}")
    return (integer(p[0], what, least), integer(p[1], what, least))


class _Builtin:
    """A built-in layer: built into a C++ module by build(shape) when the model is finalized."""

    def build(self, shape: Tuple[int, ...]) -> _aether.Module:
        raise NotImplementedError

    def _need(self, shape: Tuple[int, ...], ndim: int, what: str) -> None:
        if len(shape) != ndim:
            raise ValueError(f"{type(self).__name__}: expects {what}, got input of shape {shape}")

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"{type(self).__name__}({args})"


class Dense(_Builtin):
    """y = x W^T + b: (N, in_features) -> (N, out_features)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True):
        self.in_features = integer(in_features, "Dense: in_features", 1)
        self.out_features, self.bias = integer(out_features, "Dense: out_features", 1), bool(bias)

    def build(self, shape):
        if shape[-1] != self.in_features:
            raise ValueError(f"Dense({self.in_features}, {self.out_features}): its input has {shape[-1]} features "
                             f"(shape {shape}), expected {self.in_features}")
        return _aether.Linear(self.in_features, self.out_features, self.bias)


class Conv2d(_Builtin):
    """2-D convolution of NHWC images; padding "valid", "same", an int or a pair."""

    def __init__(self, in_channels: int, out_channels: int, kernel_size: Pair, stride: Pair = (1, 1),
                 padding: Union[str, Pair] = "valid", dilation: Pair = 1, groups: int = 1, bias: bool = True):
        self.in_channels = integer(in_channels, "Conv2d: in_channels", 1)
        self.out_channels = integer(out_channels, "Conv2d: out_channels", 1)
        self.kernel_size = _pair(kernel_size, "Conv2d: kernel_size", 1)
        self.stride = _pair(stride, "Conv2d: stride", 1)
        if isinstance(padding, str):
            if padding not in ("valid", "same"):
                raise ValueError(f"Conv2d: padding must be 'valid', 'same', an int or a pair, got {padding!r}")
            self.padding = padding
        else:
            self.padding = _pair(padding, "Conv2d: padding", 0)
        self.dilation = _pair(dilation, "Conv2d: dilation", 1)
        self.groups, self.bias = integer(groups, "Conv2d: groups", 1), bool(bias)

    def build(self, shape):
        self._need(shape, 3, "images (H, W, C)")
        if shape[-1] != self.in_channels:
            raise ValueError(f"Conv2d({self.in_channels}, {self.out_channels}): its input has {shape[-1]} channels "
                             f"(shape {shape}), expected {self.in_channels}")
        return _aether._Conv2d(self.in_channels, self.out_channels, self.kernel_size, self.stride, self.padding,
                               self.dilation, self.groups, self.bias)


class BatchNorm(_Builtin):
    """Batch normalisation over every axis but the channels (the last).

    momentum is Aether-ML's (and Keras'): running = momentum * running + (1 - momentum) * batch.
    """

    def __init__(self, epsilon: float = 1e-5, momentum: float = 0.9):
        if not 0 <= momentum < 1:
            raise ValueError(f"BatchNorm: momentum must be in [0, 1), got {momentum}")
        if not 0 < epsilon < math.inf:
            raise ValueError(f"BatchNorm: epsilon must be finite and > 0, got {epsilon}")
        self.epsilon, self.momentum = float(epsilon), float(momentum)

    def build(self, shape):
        if len(shape) not in (1, 3):
            raise ValueError(f"BatchNorm: expects (features) or (H, W, C) input, got {shape}")
        return _aether._BatchNorm(shape[-1], 2 if len(shape) == 3 else 1, 1.0 - self.momentum, self.epsilon)


class _Pool(_Builtin):
    def __init__(self, kernel_size: Pair, stride: Pair = None, padding: Union[str, Pair] = "valid"):
        name = type(self).__name__
        self.kernel_size = _pair(kernel_size, f"{name}: kernel_size", 1)
        self.stride = self.kernel_size if stride is None else _pair(stride, f"{name}: stride", 1)
        if padding == "valid":
            self.padding = (0, 0)
        elif padding == "same":
            if self.stride != (1, 1) or any(k % 2 == 0 for k in self.kernel_size):
                raise ValueError(f"{type(self).__name__}: padding 'same' needs stride 1 and odd kernel sizes; "
                                 "give the padding as numbers")
            self.padding = (self.kernel_size[0] // 2, self.kernel_size[1] // 2)
        elif isinstance(padding, str):
            raise ValueError(f"{type(self).__name__}: padding must be 'valid', 'same', an int or a pair, "
                             f"got {padding!r}")
        else:
            self.padding = _pair(padding, f"{name}: padding", 0)


class MaxPool2d(_Pool):
    """Maximum over windows of NHWC images; stride defaults to the kernel size."""

    def build(self, shape):
        self._need(shape, 3, "images (H, W, C)")
        return _aether._MaxPool2d(self.kernel_size, self.stride, self.padding)


class AvgPool2d(_Pool):
    """Mean over windows of NHWC images (padding excluded from the count)."""

    def build(self, shape):
        self._need(shape, 3, "images (H, W, C)")
        return _aether._AvgPool2d(self.kernel_size, self.stride, self.padding)


class GlobalAvgPool(_Builtin):
    """(N, H, W, C) -> (N, C): the mean over each channel."""

    def build(self, shape):
        self._need(shape, 3, "images (H, W, C)")
        return _aether._GlobalAvgPool2d()


class GlobalMaxPool(_Builtin):
    """(N, H, W, C) -> (N, C): the maximum over each channel."""

    def build(self, shape):
        self._need(shape, 3, "images (H, W, C)")
        return _aether._GlobalMaxPool2d()


class Flatten(_Builtin):
    """(N, ...) -> (N, prod(...))."""

    def build(self, shape):
        return _aether._Flatten()


class Dropout(_Builtin):
    """Zeroes each value with probability `rate` in training, scaling the rest by 1 / (1 - rate)."""

    def __init__(self, rate: float = 0.5):
        if not 0 <= rate < 1:
            raise ValueError(f"Dropout: rate must be in [0, 1), got {rate}")
        self.rate = float(rate)

    def build(self, shape):
        return _aether._Dropout(self.rate)


class Scale(_Builtin):
    """y = factor * x, a fixed scale (airbench's output scale 1/9)."""

    def __init__(self, factor: float):
        if not math.isfinite(factor):
            raise ValueError(f"Scale: factor must be finite, got {factor}")
        self.factor = float(factor)

    def build(self, shape):
        return _aether._Scale(self.factor)


class SpatialDropout(Dropout):
    """Drops whole channels of NHWC images: one draw per (sample, channel)."""

    def build(self, shape):
        self._need(shape, 3, "images (H, W, C)")
        return _aether._SpatialDropout(self.rate)


class LayerNorm(_Builtin):
    """Layer normalisation over the last axis (the features, or an image's channels at each pixel):
    each sample by its own mean and variance, then a learned scale and offset (center/scale: Keras's).
    The same in training and evaluation."""

    def __init__(self, epsilon: float = 1e-5, affine: bool = True):
        if not 0 < epsilon < math.inf:
            raise ValueError(f"LayerNorm: epsilon must be finite and > 0, got {epsilon}")
        self.epsilon, self.affine = float(epsilon), bool(affine)

    def build(self, shape):
        return _aether._LayerNorm(shape[-1], self.epsilon, self.affine)


class ReLU(_Builtin):
    def build(self, shape):
        return _aether._ReLU()


class Sigmoid(_Builtin):
    """1 / (1 + e^-x), elementwise."""

    def build(self, shape):
        return _aether._Sigmoid()


class Tanh(_Builtin):
    def build(self, shape):
        return _aether._Tanh()


class LeakyReLU(_Builtin):
    def __init__(self, alpha: float = 0.01):
        if not math.isfinite(alpha):
            raise ValueError(f"LeakyReLU: alpha must be finite, got {alpha}")
        self.alpha = float(alpha)

    def build(self, shape):
        return _aether._LeakyReLU(self.alpha)


class GELU(_Builtin):
    """x * Phi(x) (erf form), or its tanh approximation with tanh_approx=True."""

    def __init__(self, tanh_approx: bool = False):
        self.tanh_approx = bool(tanh_approx)

    def build(self, shape):
        return _aether._GELU(self.tanh_approx)


class ELU(_Builtin):
    """x for x > 0, alpha (e^x - 1) below."""

    def __init__(self, alpha: float = 1.0):
        if not math.isfinite(alpha):
            raise ValueError(f"ELU: alpha must be finite, got {alpha}")
        self.alpha = float(alpha)

    def build(self, shape):
        return _aether._ELU(self.alpha)


class SiLU(_Builtin):
    """x * sigmoid(x) (swish)."""

    def build(self, shape):
        return _aether._SiLU()


class Softplus(_Builtin):
    """(1/beta) log(1 + e^(beta x)); x itself where beta x > threshold (as PyTorch)."""

    def __init__(self, beta: float = 1.0, threshold: float = 20.0):
        if not (math.isfinite(beta) and beta > 0):
            raise ValueError(f"Softplus: beta must be finite and > 0, got {beta}")
        if not math.isfinite(threshold):
            raise ValueError(f"Softplus: threshold must be finite, got {threshold}")
        self.beta, self.threshold = float(beta), float(threshold)

    def build(self, shape):
        return _aether._Softplus(self.beta, self.threshold)


class SoftMax(_Builtin):
    """Softmax over the last axis (use CategoricalCrossEntropy after it)."""

    def build(self, shape):
        return _aether._Softmax(-1)


def _build(layer: Any, shape: Tuple[int, ...]) -> Tuple[_aether.Module, Tuple[int, ...]]:
    """The module for `layer` (built-in layers are built for `shape`; a Layer or Module is itself)
    and the shape of one sample after it. Model.add and Residual have checked the layer's type."""
    module = layer.build(shape) if isinstance(layer, _Builtin) else layer
    return module, tuple(_aether.output_shape(module, list(shape)))


def _layers(v: Any, what: str) -> List[Any]:
    layers = list(v) if isinstance(v, (list, tuple)) else [v]
    if not layers:
        raise ValueError(f"{what} needs at least one layer")
    for l in layers:
        if not isinstance(l, (_Builtin, _aether.Module)):
            raise TypeError(f"{what}: expected aether layers, got {type(l).__name__}")
    return layers


class Residual(_Builtin):
    """y = body(x) + shortcut(x), or body(x) + x without a shortcut: a ResNet block. body and
    shortcut are a layer or a list of layers (built-in, Layer or Module), built for the block's
    input; both must give samples of one shape. ResNet's ReLU after the sum is a layer of its own:

        model.add(ae.Residual([ae.Conv2d(16, 32, 3, stride=2, padding=1, bias=False), ae.BatchNorm(),
                               ae.ReLU(), ae.Conv2d(32, 32, 3, padding=1, bias=False), ae.BatchNorm()],
                              shortcut=[ae.Conv2d(16, 32, 1, stride=2, bias=False), ae.BatchNorm()]))
        model.add(ae.ReLU())
    """

    def __init__(self, body: Any, shortcut: Optional[Any] = None):
        self.body = _layers(body, "Residual body")
        self.shortcut = None if shortcut is None else _layers(shortcut, "Residual shortcut")

    @staticmethod
    def _chain(layers: List[Any], shape: Tuple[int, ...]) -> Tuple[_aether.Sequential, Tuple[int, ...]]:
        seq = _aether.Sequential()
        for layer in layers:
            module, shape = _build(layer, shape)
            seq.add(module)
        return seq, shape

    def build(self, shape):
        body, out = self._chain(self.body, shape)
        shortcut, short = (None, shape) if self.shortcut is None else self._chain(self.shortcut, shape)
        if out != short:
            what = "its shortcut gives" if self.shortcut is not None else "its input (the identity shortcut) is"
            raise ValueError(f"Residual: its body gives samples of shape {out} but {what} {short}; "
                             "they are added, so they must match (a strided or widening body needs a shortcut "
                             "that does the same, e.g. a 1x1 Conv2d)")
        return _aether.Residual(body, shortcut)


class Layer(_aether._Layer):
    """A layer written in Python from tensor ops: gradients come from autograd, and its ops join
    the same lazy graph as the built-in layers (the scheduler fuses across them).

        class Scale(ae.Layer):
            def __init__(self, channels):
                super().__init__()
                self.channels = channels
                self.add_parameter("gain", ae.ones([channels]))
            def forward(self, x):
                return x * self.gain            # parameters are read by name
            def get_config(self):
                return {"channels": self.channels}

    Parameters and buffers are registered with add_parameter / add_buffer and read as attributes;
    the optimizer and Model.to() replace their values, so read them in forward(), do not keep them.
    A model with Python layers is saved like any other; Model.load rebuilds each layer with
    cls.from_config(get_config()) (the class must be importable under the same module name).
    """

    def __init__(self) -> None:
        super().__init__()

    def forward(self, x: Tensor) -> Tensor:
        raise NotImplementedError(f"{type(self).__name__}: a Layer subclass must define forward(self, x), "
                                  "returning a Tensor")

    def add_parameter(self, name: str, tensor: Tensor) -> Tensor:
        """Registers a trained tensor under `name` (no '.'; unique in the layer) and returns it."""
        return super().add_parameter(name, self._checked(name, tensor, "add_parameter"))

    def add_buffer(self, name: str, tensor: Tensor) -> Tensor:
        """Registers an untrained tensor (saved, moved by to()) under `name` and returns it."""
        return super().add_buffer(name, self._checked(name, tensor, "add_buffer"))

    def _checked(self, name: str, tensor: Tensor, op: str) -> Tensor:
        if not isinstance(name, str):
            raise TypeError(f"{type(self).__name__}.{op}: the name must be a str, got {type(name).__name__}")
        if not isinstance(tensor, Tensor):
            raise TypeError(f"{type(self).__name__}.{op}: '{name}' must be an aether Tensor (e.g. ae.ones([3]) or "
                            f"ae.tensor(array)), got {type(tensor).__name__}")
        return tensor

    def get_config(self) -> Dict[str, Any]:
        """The constructor's keyword arguments (JSON values): saved with the model."""
        return {}

    @classmethod
    def from_config(cls, config: Dict[str, Any]) -> "Layer":
        return cls(**config)

    def __getattr__(self, name: str) -> Tensor:
        if name.startswith("__"):
            raise AttributeError(name)
        t = self._find(name)
        if t is None:
            raise AttributeError(f"{type(self).__name__} has no attribute, parameter or buffer {name!r}")
        return t
