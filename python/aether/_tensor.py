"""Tensor construction from Python data, indexing, and device names."""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

import numpy as np

from . import _aether
from ._aether import Tensor

_DTYPES = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}


def device_name(device: str) -> str:
    """aether's name for a device: Aether-ML's "numpy" is "cpu", "cupy" is "cuda"."""
    if not isinstance(device, str):
        raise TypeError(f"device must be a string such as 'cpu', 'cuda' or 'cuda:1', got {type(device).__name__}")
    return {"numpy": "cpu", "cupy": "cuda"}.get(device, device)


def dtype_name(dtype: Any) -> str:
    """aether's name of a dtype given by name ("float32") or as NumPy's (np.float32, np.dtype("int64"),
    bool). The engine checks the name."""
    if isinstance(dtype, str):
        return dtype
    try:
        return np.dtype(dtype).name
    except TypeError:
        raise TypeError(f"a dtype is a name such as 'float32' or a NumPy dtype, got {dtype!r}") from None


def _shape(shape: Union[int, Sequence[int]]) -> list:
    """A shape given as one int (NumPy's zeros(3)) or a sequence of them."""
    return [int(shape)] if isinstance(shape, (int, np.integer)) else list(shape)


def tensor(data: Any, dtype: Optional[str] = None, device: Optional[str] = None, requires_grad: bool = False,
           copy: bool = False) -> Tensor:
    """A Tensor from a NumPy array, anything with the buffer protocol or DLPack, or nested lists.

    A C-contiguous host array of a dtype aether has (float32, float64, float16, int32, int64, uint8,
    bool) is used without a copy unless copy=True; aether never writes it, and later writes by the
    caller show in values computed afterwards. Python floats become float32, ints int64.
    """
    if isinstance(data, Tensor):
        t = data
    else:
        if not isinstance(data, np.ndarray) and hasattr(data, "__dlpack__") and dtype is None:
            t = _aether.from_dlpack(data)
        else:
            if isinstance(data, (bytes, bytearray, memoryview)):
                data = memoryview(data)  # the buffer protocol: bytes are uint8, not strings
            a = np.asarray(data)
            if not isinstance(data, (np.ndarray, memoryview)) and a.dtype == np.float64:
                a = a.astype(np.float32)  # Python floats: aether's default float type
            if a.dtype.kind in "OUSV":
                raise TypeError(f"aether.tensor: cannot make a tensor of {a.dtype} data")
            if str(a.dtype) not in _DTYPES:
                raise TypeError(f"aether.tensor: unsupported dtype {a.dtype} (aether has float32, float64, "
                                "float16, bfloat16, int32, int64, uint8 and bool)")
            a = np.ascontiguousarray(a)
            t = _aether._from_array(a, copy)
    if dtype is not None:
        t = t.astype(dtype_name(dtype))
    if device is not None:
        t = t.to(device_name(device))
    if requires_grad:
        t.requires_grad = True
    return t


def zeros(shape: Union[int, Sequence[int]], dtype: Any = "float32") -> Tensor:
    return _aether.zeros(_shape(shape), dtype_name(dtype))


def ones(shape: Union[int, Sequence[int]], dtype: Any = "float32") -> Tensor:
    return _aether.ones(_shape(shape), dtype_name(dtype))


def full(shape: Union[int, Sequence[int]], value: float, dtype: Any = "float32") -> Tensor:
    return _aether.full(_shape(shape), value, dtype_name(dtype))


def arange(start: float, stop: Optional[float] = None, step: float = 1.0, dtype: Any = "float32") -> Tensor:
    if stop is None:
        start, stop = 0.0, start
    return _aether.arange(start, stop, step, dtype_name(dtype))


def rand(*shape: int, dtype: Any = "float32") -> Tensor:
    """Uniform [0, 1) from aether's seeded generator (aether.manual_seed)."""
    return _aether.rand(_shape(shape[0]) if len(shape) == 1 else list(shape), dtype_name(dtype))


def randn(*shape: int, dtype: Any = "float32") -> Tensor:
    """Standard normal from aether's seeded generator (aether.manual_seed)."""
    return _aether.randn(_shape(shape[0]) if len(shape) == 1 else list(shape), dtype_name(dtype))


def _getitem(self: Tensor, index: Union[int, slice, tuple, None]) -> Tensor:
    """Basic indexing as in NumPy: integers, slices (negative steps too), Ellipsis and None (a new
    axis of size 1). A view of the tensor, recorded for autograd."""
    if not isinstance(index, tuple):
        index = (index,)
    if sum(i is Ellipsis for i in index) > 1:
        raise IndexError("an index can only have a single ellipsis")
    used = sum(i is not None and i is not Ellipsis for i in index)  # entries that index an axis
    if used > self.ndim:
        raise IndexError(f"too many indices for a tensor of {self.ndim} dimensions")
    if Ellipsis in index:
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (self.ndim - used) + index[k + 1:]
    out, axis, shape = self, 0, []  # axis: of self; shape: the result's, built entry by entry
    for i in index:
        if i is None:
            shape.append(1)
            continue
        n = self.shape[axis]
        if isinstance(i, (int, np.integer)) and not isinstance(i, (bool, np.bool_)):
            j = int(i) + n if i < 0 else int(i)
            if not 0 <= j < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            out = out.slice(axis, j, j + 1)
        elif isinstance(i, slice):
            r = range(*i.indices(n))
            if r.step < 0 and len(r):  # a reversed view: flip the axis, then step forward from the mirror
                out = out.flip(axis).slice(axis, n - 1 - r.start, n - r[-1], -r.step)
            else:
                out = out.slice(axis, r.start, r[-1] + 1 if len(r) else r.start, max(r.step, 1))
            shape.append(len(r))
        else:
            raise IndexError(f"aether tensors take integers, slices, ... and None as indices, got {type(i).__name__}")
        axis += 1
    shape += self.shape[axis:]
    return out if tuple(shape) == tuple(out.shape) else out.reshape(shape)


def _setitem(self: Tensor, index: Any, value: Any) -> None:
    raise TypeError("aether tensors are values and do not support item assignment: build the new tensor instead "
                    "(ae.where(mask, value, t), ae.cat, or an optimizer's step for parameters)")


def _contains(self: Tensor, value: Any) -> bool:
    """`value in t`: whether any element equals value, as in NumPy."""
    return bool(np.asarray(self == value).any())


def _format(self: Tensor, spec: str) -> str:
    """f"{loss:.4f}" formats a one-element tensor's value; an empty spec gives str(t)."""
    if not spec:
        return str(self)
    if self.size != 1:
        raise TypeError(f"format spec {spec!r} needs a tensor of one element, got shape {tuple(self.shape)}")
    return format(self.item(), spec)


def _tolist(self: Tensor) -> Any:
    return np.asarray(self).tolist()


Tensor.__getitem__ = _getitem
Tensor.__setitem__ = _setitem
Tensor.__contains__ = _contains
Tensor.__format__ = _format
Tensor.tolist = _tolist


# ---- NumPy arrays as operands, NumPy functions on tensors ----------------------------------------
# `t * mask` and `mask * t` with a NumPy array `mask` are Tensors (recorded for autograd), not
# ndarrays: before, NumPy's operators took the tensor as an array and the result lost its gradient.
# The array is copied (operations are lazy: a later write to it must not change the result) and
# keeps its dtype, so float32 * float64 is float64, as in NumPy and PyTorch. A priority above
# ndarray's makes NumPy's operators (and a NumPy scalar's) defer to the Tensor's reflected ones,
# as PyTorch's does; NumPy ufuncs (np.exp(t)) still take the tensor as an array.
Tensor.__array_priority__ = 1000


_INT_RANGES = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1), "uint8": (0, 255),
               "bool": (0, 0)}


def _int_operand(self: Tensor, value: int) -> Tensor:
    """A Python int with an integer or bool tensor, as a 0-d tensor: of the tensor's dtype where it fits
    (i + 1 stays int32, as in NumPy and PyTorch), else int64. The engine's scalar rule (float32 for
    integer tensors) is for floats."""
    lo, hi = _INT_RANGES[self.dtype]
    dtype = self.dtype if lo <= value <= hi else "int64"
    return _aether.full([], float(value), dtype).to(self.device) if abs(value) < 2 ** 53 else \
        tensor(np.array(value, dtype=np.int64), device=self.device)


def _binary_operator(name: str, swapped: Optional[str] = None, ints: bool = True) -> None:
    """Tensor.<name> taking a NumPy array too, and (`ints`) a Python int with an integer tensor as an
    integer; `swapped` names the op of a reflected operator (__rsub__: other - self is
    other.__sub__(self))."""
    base = getattr(Tensor, name, None)

    def op(self: Tensor, other: Any) -> Any:
        if isinstance(other, np.ndarray):
            other = tensor(other, device=self.device, copy=True)
        elif (ints and isinstance(other, (int, np.integer)) and not isinstance(other, (bool, np.bool_))
              and self.dtype in _INT_RANGES):
            other = _int_operand(self, int(other))
        else:
            return NotImplemented if base is None else base(self, other)
        return getattr(other, swapped)(self) if swapped else base(self, other)

    op.__name__ = name
    setattr(Tensor, name, op)


# ** keeps the engine's integer-exponent path (exact repeated squaring: i ** 2 stays an integer).
for _name in ("__add__", "__sub__", "__mul__", "__truediv__", "__matmul__", "__lt__", "__le__", "__gt__", "__ge__",
              "__eq__", "__ne__", "maximum", "minimum"):
    _binary_operator(_name)
_binary_operator("__pow__", ints=False)
for _name, _op in (("__radd__", "__add__"), ("__rsub__", "__sub__"), ("__rmul__", "__mul__"),
                   ("__rtruediv__", "__truediv__"), ("__rpow__", "__pow__"), ("__rmatmul__", "__matmul__")):
    _binary_operator(_name, _op)


def _reduction(name: str, takes_dtype: bool) -> None:
    """Tensor.<name> taking NumPy's keywords, so that np.sum(t), np.mean(t, axis=0), np.var(t, ddof=1),
    np.max(t), np.argmax(t) return Tensors (NumPy calls the method with axis=, out=, dtype=...). dtype
    casts before reducing, as NumPy's accumulator type; out= cannot be honoured by immutable tensors."""
    base = getattr(Tensor, name)

    def reduce(self: Tensor, *args: Any, dtype: Any = None, out: Any = None, **kwargs: Any) -> Tensor:
        if out is not None:
            raise TypeError(f"Tensor.{name}: out= is not supported (tensors are values: use the result)")
        if dtype is not None:
            if not takes_dtype:
                raise TypeError(f"Tensor.{name} takes no dtype")
            self = self.astype(dtype_name(dtype))
        return base(self, *args, **kwargs)

    reduce.__name__, reduce.__doc__ = name, base.__doc__
    setattr(Tensor, name, reduce)


for _name, _dt in (("sum", True), ("mean", True), ("var", True), ("max", False), ("min", False)):
    _reduction(_name, _dt)

_argmax = Tensor.argmax


def _argmax_any_axis(self: Tensor, axis: Optional[int] = None, keepdims: bool = False, *, out: Any = None) -> Tensor:
    """The index of the largest element along axis; axis=None: of the flattened tensor (NumPy)."""
    if out is not None:
        raise TypeError("Tensor.argmax: out= is not supported (tensors are values: use the result)")
    if axis is not None:
        return _argmax(self, axis, keepdims)
    i = _argmax(self.reshape(-1), 0, False)
    return i.reshape([1] * self.ndim) if keepdims else i


Tensor.argmax = _argmax_any_axis

_astype, _to = Tensor.astype, Tensor.to


def _astype_any(self: Tensor, dtype: Any) -> Tensor:
    """A copy of another dtype, named ("float16") or NumPy's (np.float16)."""
    return _astype(self, dtype_name(dtype))


def _to_any(self: Tensor, device_or_dtype: Any) -> Tensor:
    """A copy on another device ("cpu", "cuda:1") or of another dtype ("float64", np.float64)."""
    return _to(self, device_or_dtype if isinstance(device_or_dtype, str) else dtype_name(device_or_dtype))


Tensor.astype, Tensor.to = _astype_any, _to_any


class DType(str):
    """A tensor's dtype: its name ("float32"), which also equals NumPy's dtype of that name, so
    `t.dtype == np.float32` holds as it does for an ndarray (and `t.dtype == "float32"` as before)."""

    __slots__ = ()

    def __eq__(self, other: Any) -> Any:
        if isinstance(other, str):
            return str.__eq__(self, other)
        if other is None:  # np.dtype(None) is float64
            return NotImplemented
        try:
            return str.__eq__(self, np.dtype(other).name)
        except TypeError:
            return NotImplemented

    def __ne__(self, other: Any) -> Any:
        eq = self.__eq__(other)
        return eq if eq is NotImplemented else not eq

    __hash__ = str.__hash__


_dtype_of = Tensor.dtype.fget
Tensor.dtype = property(lambda self: DType(_dtype_of(self)), doc="the dtype's name, equal to NumPy's dtype too")


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """a where cond holds, else b, broadcast (np.where). Each may be a Tensor or a NumPy array (copied),
    cond also a bool or a list, a and b also numbers (in the other's float dtype, else float32)."""
    device = next((v.device for v in (cond, a, b) if isinstance(v, Tensor)), None)
    as_tensor = lambda v: tensor(v, device=device, copy=True) if isinstance(v, np.ndarray) else v
    cond, a, b = as_tensor(cond), as_tensor(a), as_tensor(b)
    if not isinstance(cond, Tensor):
        cond = tensor(np.asarray(cond, dtype=bool), device=device, copy=True)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = tensor(a, device=device)
    is_int = lambda v: isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))
    if is_int(a) and b.dtype in _INT_RANGES:  # an int with an integer tensor stays an integer, as in +
        a = _int_operand(b, int(a))
    if is_int(b) and a.dtype in _INT_RANGES:
        b = _int_operand(a, int(b))
    return _aether.where(cond, a, b)


_clamp = Tensor.clamp


def _clamp_either(self: Tensor, lo: Optional[float] = None, hi: Optional[float] = None) -> Tensor:
    """Values below lo raised to lo and above hi lowered to hi; either bound may be None (no bound)."""
    if lo is None and hi is None:
        raise TypeError("clamp: give lo, hi or both")
    if hi is None:
        return self.maximum(float(lo))
    if lo is None:
        return self.minimum(float(hi))
    return _clamp(self, lo, hi)


Tensor.clamp = _clamp_either
