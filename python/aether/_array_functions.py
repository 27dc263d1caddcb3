"""NumPy's functions on tensors (NEP 18's __array_function__): np.concatenate, np.stack, np.where,
np.clip, np.reshape, np.transpose, np.squeeze, np.expand_dims, np.take, np.round of Tensors are
Tensors recorded for autograd, and np.sum, np.mean, np.max... call the Tensor's reductions (as they
did through NumPy's method lookup). Any other NumPy function computes in NumPy on the values (tensors
read as arrays) and returns what NumPy returns, as before, unless a tensor requires grad: then it is a
TypeError (the result would silently have no gradient)."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from ._aether import Tensor
from ._tensor_ops import cat, stack, where

_FUNCTIONS: dict = {}


def _implements(*funcs: Callable) -> Callable:
    def register(f: Callable) -> Callable:
        for func in funcs:
            _FUNCTIONS[func] = f
        return f

    return register


def _method(name: str) -> Callable:
    """np.<name>(t, ...) as t.<name>(...): the reductions, which take NumPy's keywords."""
    return lambda a, *args, **kwargs: getattr(a, name)(*args, **kwargs)


for _name in ("sum", "mean", "var", "std", "max", "min", "argmax", "any", "all"):
    _implements(getattr(np, _name))(_method(_name))
_implements(np.amax)(_method("max"))
_implements(np.amin)(_method("min"))


def _no_out(name: str, out: Any) -> None:
    if out is not None:
        raise TypeError(f"np.{name}: out= is not supported on aether Tensors (tensors are values: use the result)")


@_implements(np.concatenate)
def _concatenate(arrays: Any, axis: Optional[int] = 0, out: Any = None, **kwargs: Any) -> Tensor:
    _no_out("concatenate", out)
    if kwargs:
        raise TypeError(f"np.concatenate on aether Tensors takes arrays and axis only, got {sorted(kwargs)}")
    if axis is None:  # NumPy: flattened first
        return cat([a.reshape(-1) if isinstance(a, Tensor) else np.ravel(a) for a in arrays], 0)
    return cat(arrays, axis)


@_implements(np.stack)
def _stack(arrays: Any, axis: int = 0, out: Any = None) -> Tensor:
    _no_out("stack", out)
    return stack(arrays, axis)


@_implements(np.where)
def _where(condition: Any, *xy: Any) -> Any:
    if len(xy) != 2:  # np.where(cond): the indices of the true elements, NumPy's arrays
        return np.where(np.asarray(condition))
    return where(condition, *xy)


@_implements(np.clip)
def _clip(a: Tensor, a_min: Any = None, a_max: Any = None, out: Any = None, *, min: Any = None,
          max: Any = None) -> Tensor:
    _no_out("clip", out)
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
    _no_out("take", out)
    if mode != "raise":
        raise TypeError("np.take on aether Tensors: mode='raise' only (an index out of bounds is an IndexError)")
    return a.take(indices, axis)


@_implements(np.round, np.around)
def _round(a: Tensor, decimals: int = 0, out: Any = None) -> Tensor:
    return a.round(decimals, out)


@_implements(np.shape)
def _shape(a: Tensor) -> tuple:
    return tuple(a.shape)


@_implements(np.ndim)
def _ndim(a: Tensor) -> int:
    return a.ndim


@_implements(np.size)
def _size(a: Tensor, axis: Optional[int] = None) -> int:
    return a.size if axis is None else a.shape[axis]


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


def _array_function(self: Tensor, func: Callable, types: Any, args: tuple, kwargs: dict) -> Any:
    impl = _FUNCTIONS.get(func)
    if impl is not None:
        return impl(*args, **kwargs)
    if _requires_grad(args) or _requires_grad(kwargs):
        raise TypeError(f"np.{func.__name__} has no aether operation, and a NumPy result would have no gradient: "
                        "use aether's operations, or np.asarray(t.detach())")
    return func(*_as_arrays(args), **_as_arrays(kwargs))


Tensor.__array_function__ = _array_function
