"""NumPy's ufuncs on tensors: np.exp(t), np.add(a, t), np.floor_divide(t, 2)... are Tensors, recorded for
autograd, through the Tensor's own operations (NumPy's __array_ufunc__ protocol). A ufunc aether has
no operation for computes in NumPy on the values and returns an ndarray, as before, unless a tensor
input requires grad: then it is an error (the result would silently have no gradient)."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._aether import Tensor
from ._tensor import tensor
from ._tensor_ops import _int_as_integer

# ufunc -> the Tensor method that computes it (the operators take arrays and numbers: _tensor_ops).
_UNARY = {
    np.negative: "__neg__", np.positive: "__pos__", np.absolute: "abs", np.exp: "exp", np.log: "log",
    np.sqrt: "sqrt", np.square: "square", np.reciprocal: "reciprocal", np.sin: "sin", np.cos: "cos",
    np.tanh: "tanh", np.floor: "floor", np.ceil: "ceil", np.trunc: "trunc", np.rint: "round",
    np.logical_not: "logical_not",
}
# ufunc -> (method on a Tensor first operand, method on a Tensor second operand with the operands swapped).
_BINARY = {
    np.add: ("__add__", "__radd__"), np.subtract: ("__sub__", "__rsub__"), np.multiply: ("__mul__", "__rmul__"),
    np.true_divide: ("__truediv__", "__rtruediv__"), np.floor_divide: ("__floordiv__", "__rfloordiv__"),
    np.remainder: ("__mod__", "__rmod__"), np.power: ("__pow__", "__rpow__"), np.matmul: ("__matmul__", "__rmatmul__"),
    np.maximum: ("maximum", "maximum"), np.minimum: ("minimum", "minimum"), np.less: ("__lt__", "__gt__"),
    np.less_equal: ("__le__", "__ge__"), np.greater: ("__gt__", "__lt__"), np.greater_equal: ("__ge__", "__le__"),
    np.equal: ("__eq__", "__eq__"), np.not_equal: ("__ne__", "__ne__"),
    np.logical_and: ("logical_and", "logical_and"), np.logical_or: ("logical_or", "logical_or"),
    np.logical_xor: ("logical_xor", "logical_xor"), np.fmod: ("fmod", None),
}


def _operand(v: Any, like: Tensor) -> Any:
    """A NumPy array as a Tensor on like's device (copied); a NumPy scalar as the Python number it holds
    (a number beside a tensor, as in the operators and in PyTorch); anything else as it is."""
    if isinstance(v, np.ndarray):
        return tensor(v, device=like.device, copy=True)
    return v.item() if isinstance(v, np.generic) else v


def _array_ufunc(self: Tensor, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    tensors = [v for v in inputs if isinstance(v, Tensor)]
    name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    if kwargs.get("out", None) is None:
        kwargs.pop("out", None)
    else:
        raise TypeError(f"{name}: out= is not supported on aether Tensors (tensors are values: use the result)")
    known = method == "__call__" and not kwargs and (ufunc in _UNARY or ufunc in _BINARY)
    if not known:
        if any(t.requires_grad for t in tensors):
            raise TypeError(f"{name} has no aether operation (or takes these arguments only in NumPy), and a "
                            "NumPy result would have no gradient: use aether's operations, or np.asarray(t.detach())")
        arrays = [np.asarray(v) if isinstance(v, Tensor) else v for v in inputs]
        return getattr(ufunc, method)(*arrays, **kwargs)
    if ufunc in _UNARY:
        return getattr(inputs[0], _UNARY[ufunc])()
    a, b = (_operand(v, tensors[0]) for v in inputs)
    method_a, method_b = _BINARY[ufunc]
    if isinstance(a, Tensor):
        return getattr(a, method_a)(b)
    if method_b is None:  # no reflected form: the number as a tensor of its own
        return getattr(_number_as_tensor(a, b), method_a)(b)
    return getattr(b, method_b)(a)


def _number_as_tensor(v: Any, t: Tensor) -> Tensor:
    """A Python number beside tensor t as a 0-d tensor, by the operators' rules: an int with an integer
    tensor in its dtype, otherwise t's float dtype, else float32 (aether's scalar rule)."""
    v = _int_as_integer(t, v)
    if isinstance(v, Tensor):
        return v
    floats = ("float16", "bfloat16", "float32", "float64")
    return tensor(np.asarray(v, dtype=np.float64), device=t.device).astype(t.dtype if t.dtype in floats else "float32")


Tensor.__array_ufunc__ = _array_ufunc
