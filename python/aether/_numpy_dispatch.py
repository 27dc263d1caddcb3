"""NumPy's dispatch protocols on tensors, so that NumPy code keeps its gradients:

- ufuncs (__array_ufunc__): np.exp(t), np.add(a, t), np.floor_divide(t, 2)... are the Tensor's own
  operations (the operators take arrays and numbers: _tensor_ops);
- functions (NEP 18's __array_function__): np.concatenate, np.stack, np.split, np.array_split,
  np.einsum, np.where, np.clip, np.reshape, np.transpose, np.squeeze, np.expand_dims, np.take,
  np.round, np.cumsum, np.cumprod, np.sort, np.argsort, np.take_along_axis (and the others registered
  below) of tensors are Tensors, and np.sum, np.prod, np.mean, np.max... call the Tensor's reductions
  (as NumPy's method lookup did before).

Both results are recorded for autograd. Anything else computes in NumPy on the values (tensors read as
arrays) and returns what NumPy returns, as before, unless a tensor input requires grad: then it is a
TypeError, since the result would silently have no gradient."""

from __future__ import annotations

from typing import Any, Callable, List, Optional

import numpy as np

from ._aether import Tensor
from ._tensor import FLOAT_DTYPES, no_out, tensor
from ._tensor_methods import full_like, ones_like, split_at, zeros_like
from ._tensor_ops import _int_as_integer, array_operand, as_tensor, cat, einsum, stack, where


# ---- anything aether has no operation for: NumPy on the values, unless a gradient would be lost ----
def _as_arrays(v: Any) -> Any:
    """v with every Tensor in it (in lists, tuples and dicts too) read as an ndarray."""
    if isinstance(v, Tensor):
        return np.asarray(v)
    if isinstance(v, (list, tuple)):
        return type(v)(_as_arrays(x) for x in v)
    if isinstance(v, dict):
        return {k: _as_arrays(x) for k, x in v.items()}
    return v


def _requires_grad(v: Any) -> bool:
    if isinstance(v, Tensor):
        return v.requires_grad
    if isinstance(v, (list, tuple)):
        return any(_requires_grad(x) for x in v)
    if isinstance(v, dict):
        return any(_requires_grad(x) for x in v.values())
    return False


def _in_numpy(name: str, call: Callable, args: tuple, kwargs: dict) -> Any:
    if _requires_grad(args) or _requires_grad(kwargs):
        raise TypeError(f"{name} has no aether operation (for these arguments), and a NumPy result would have no "
                        "gradient: use aether's operations, or np.asarray(t.detach())")
    return call(*_as_arrays(args), **_as_arrays(kwargs))


# ---- ufuncs ---------------------------------------------------------------------------------------------
# ufunc -> the Tensor method that computes it (the operators take arrays and numbers: _tensor_ops).
_UNARY = {
    np.negative: "__neg__", np.positive: "__pos__", np.absolute: "abs", np.exp: "exp", np.log: "log",
    np.sqrt: "sqrt", np.square: "square", np.reciprocal: "reciprocal", np.sin: "sin", np.cos: "cos",
    np.tanh: "tanh", np.floor: "floor", np.ceil: "ceil", np.trunc: "trunc", np.rint: "round",
    np.logical_not: "logical_not", np.sign: "sign", np.isnan: "isnan", np.isinf: "isinf", np.isfinite: "isfinite",
    np.log1p: "log1p", np.expm1: "expm1", np.exp2: "exp2", np.log2: "log2", np.log10: "log10",
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


def _operand(v: Any, device: str) -> Any:
    """A NumPy array as a Tensor (copied); a NumPy scalar as the Python number it holds (a number beside
    a tensor, as in the operators and in PyTorch); anything else as it is."""
    return v.item() if isinstance(v, np.generic) else array_operand(v, device)


def _array_ufunc(self: Tensor, ufunc: np.ufunc, method: str, *inputs: Any, **kwargs: Any) -> Any:
    name = f"np.{ufunc.__name__}" + ("" if method == "__call__" else f".{method}")
    no_out(name, kwargs.pop("out", None))
    known = method == "__call__" and not kwargs and (ufunc in _UNARY or ufunc in _BINARY)
    if not known:
        return _in_numpy(name, getattr(ufunc, method), inputs, kwargs)
    if ufunc in _UNARY:
        return getattr(inputs[0], _UNARY[ufunc])()
    device = next(v.device for v in inputs if isinstance(v, Tensor))
    a, b = (_operand(v, device) for v in inputs)
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
    dtype = t.dtype if t.dtype in FLOAT_DTYPES else "float32"
    return tensor(np.asarray(v, dtype=np.float64), device=t.device).astype(dtype)


# ---- functions ------------------------------------------------------------------------------------------
_FUNCTIONS: dict = {}


def _implements(*funcs: Callable) -> Callable:
    def register(f: Callable) -> Callable:
        for func in funcs:
            _FUNCTIONS[func] = f
        return f

    return register


def _method(name: str) -> Callable:
    """np.<name>(t, ...) as t.<name>(...) (the reductions take NumPy's keywords); a first argument that
    is not a tensor (np.dot(array, t)) becomes one, on the tensor argument's device."""

    def call(a: Any, *args: Any, **kwargs: Any) -> Any:
        device = next((v.device for v in args if isinstance(v, Tensor)), None)
        return getattr(as_tensor(a, device), name)(*args, **kwargs)

    return call


for _name in ("sum", "prod", "mean", "var", "std", "max", "min", "argmax", "argmin", "any", "all"):
    _implements(getattr(np, _name))(_method(_name))
_implements(np.amax)(_method("max"))
_implements(np.amin)(_method("min"))


@_implements(np.concatenate)
def _concatenate(arrays: Any, axis: Optional[int] = 0, out: Any = None, **kwargs: Any) -> Tensor:
    no_out("np.concatenate", out)
    if kwargs:
        raise TypeError(f"np.concatenate on aether Tensors takes arrays and axis only, got {sorted(kwargs)}")
    if axis is None:  # NumPy: flattened first
        return cat([a.reshape(-1) if isinstance(a, Tensor) else np.ravel(a) for a in arrays], 0)
    return cat(arrays, axis)


@_implements(np.einsum)
def _einsum(subscripts: str, *operands: Any, out: Any = None, optimize: Any = False, **kwargs: Any) -> Tensor:
    no_out("np.einsum", out)
    if kwargs:
        raise TypeError(f"np.einsum on aether Tensors takes subscripts, operands and optimize, got {sorted(kwargs)}")
    return einsum(subscripts, *operands)  # optimize: aether picks its own way (left to right, pairwise)


@_implements(np.split)
def _np_split(ary: Tensor, indices_or_sections: Any, axis: int = 0) -> List[Tensor]:
    return split_at(ary, indices_or_sections, axis, True, "np.split")


@_implements(np.array_split)
def _np_array_split(ary: Tensor, indices_or_sections: Any, axis: int = 0) -> List[Tensor]:
    return split_at(ary, indices_or_sections, axis, False, "np.array_split")


@_implements(np.stack)
def _stack(arrays: Any, axis: int = 0, out: Any = None) -> Tensor:
    no_out("np.stack", out)
    return stack(arrays, axis)


@_implements(np.where)
def _where(condition: Any, *xy: Any) -> Any:
    if len(xy) != 2:  # np.where(cond): the indices of the true elements, NumPy's arrays
        return np.where(np.asarray(condition))
    return where(condition, *xy)


@_implements(np.clip)
def _clip(a: Tensor, a_min: Any = None, a_max: Any = None, out: Any = None, *, min: Any = None,
          max: Any = None) -> Tensor:
    no_out("np.clip", out)
    lo, hi = (min if a_min is None else a_min), (max if a_max is None else a_max)
    return a.clamp(lo, hi)


@_implements(np.reshape)
def _reshape(a: Tensor, shape: Any = None, *args: Any, newshape: Any = None, **kwargs: Any) -> Tensor:
    if args and args[0] not in ("C", None) or kwargs.get("order", "C") != "C":
        raise TypeError("np.reshape on aether Tensors is row-major only (order='C')")
    shape = newshape if shape is None else shape
    return a.reshape([int(shape)] if isinstance(shape, (int, np.integer)) else list(shape))


@_implements(np.transpose)
def _transpose(a: Tensor, axes: Any = None) -> Tensor:
    return a.permute(list(range(a.ndim))[::-1] if axes is None else list(axes))


@_implements(np.squeeze)
def _squeeze(a: Tensor, axis: Any = None) -> Tensor:
    if isinstance(axis, (tuple, list)):
        for d in sorted((d % a.ndim for d in axis), reverse=True):
            a = a.squeeze(d)
        return a
    return a.squeeze() if axis is None else a.squeeze(axis)


@_implements(np.expand_dims)
def _expand_dims(a: Tensor, axis: Any) -> Tensor:
    for d in sorted(axis) if isinstance(axis, (tuple, list)) else [axis]:
        a = a.unsqueeze(d)
    return a


@_implements(np.take)
def _take(a: Tensor, indices: Any, axis: Optional[int] = None, out: Any = None, mode: str = "raise") -> Tensor:
    no_out("np.take", out)
    if mode != "raise":
        raise TypeError("np.take on aether Tensors: mode='raise' only (an index out of bounds is an IndexError)")
    return a.take(indices, axis)


@_implements(np.cumsum)
def _cumsum(a: Tensor, axis: Optional[int] = None, dtype: Any = None, out: Any = None) -> Tensor:
    no_out("np.cumsum", out)
    return a.cumsum(axis, dtype)


@_implements(np.cumprod)
def _cumprod(a: Tensor, axis: Optional[int] = None, dtype: Any = None, out: Any = None) -> Tensor:
    no_out("np.cumprod", out)
    return a.cumprod(axis, dtype)


@_implements(np.round, np.around)
def _round(a: Tensor, decimals: int = 0, out: Any = None) -> Tensor:
    return a.round(decimals, out)


def _like(make: Callable, name: str) -> Callable:
    """np.zeros_like / ones_like / full_like of a tensor: a tensor of its shape and device."""
    def like(a: Tensor, *fill: Any, dtype: Any = None, order: str = "K", subok: bool = True, shape: Any = None,
             device: Any = None) -> Tensor:
        if shape is not None:
            raise TypeError(f"np.{name} of an aether Tensor: shape= is not supported")
        return make(a, *fill, dtype=dtype)

    return like


_implements(np.zeros_like)(_like(zeros_like, "zeros_like"))
_implements(np.ones_like)(_like(ones_like, "ones_like"))
_implements(np.full_like)(_like(full_like, "full_like"))


# Methods NumPy's function of the same arguments maps to (a Tensor first argument).
for _func, _name in ((np.roll, "roll"), (np.tile, "tile"), (np.moveaxis, "moveaxis"), (np.swapaxes, "swapaxes"),
                     (np.ravel, "ravel"), (np.broadcast_to, "broadcast_to"), (np.dot, "dot"), (np.outer, "outer"),
                     (np.linalg.norm, "norm"), (np.sort, "sort"), (np.argsort, "argsort"),
                     (np.take_along_axis, "take_along_axis"), (np.repeat, "repeat"), (np.diff, "diff"),
                     (np.triu, "triu"), (np.tril, "tril"), (np.diagonal, "diagonal"), (np.trace, "trace")):
    _implements(_func)(_method(_name))


@_implements(np.shape)
def _shape(a: Tensor) -> tuple:
    return tuple(a.shape)


@_implements(np.ndim)
def _ndim(a: Tensor) -> int:
    return a.ndim


@_implements(np.size)
def _size(a: Tensor, axis: Optional[int] = None) -> int:
    return a.size if axis is None else a.shape[axis]


def _array_function(self: Tensor, func: Callable, types: Any, args: tuple, kwargs: dict) -> Any:
    impl = _FUNCTIONS.get(func)
    if impl is not None:
        return impl(*args, **kwargs)
    return _in_numpy(f"np.{func.__name__}", func, args, kwargs)


Tensor.__array_ufunc__ = _array_ufunc
Tensor.__array_function__ = _array_function
