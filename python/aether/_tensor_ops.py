"""Tensor operators and functions meeting NumPy: arrays and ints as operands, NumPy's reductions on
tensors, NumPy dtypes, where and clamp with numbers. Importing it extends aether.Tensor."""

from __future__ import annotations

from typing import Any, Optional, Tuple

import numpy as np

from . import _aether
from ._aether import Tensor
from ._tensor import dtype_name, is_int, no_out, tensor

# ---- NumPy arrays as operands, NumPy functions on tensors ----------------------------------------
# `t * mask` and `mask * t` with a NumPy array `mask` are Tensors (recorded for autograd), not
# ndarrays: before, NumPy's operators took the tensor as an array and the result lost its gradient.
# The array is copied (operations are lazy: a later write to it must not change the result) and
# keeps its dtype, so float32 * float64 is float64, as in NumPy and PyTorch. A priority above
# ndarray's makes NumPy's operators (and a NumPy scalar's) defer to the Tensor's reflected ones,
# as PyTorch's does; NumPy ufuncs (np.exp(t)) come to the Tensor's operations through _numpy_dispatch.py.
Tensor.__array_priority__ = 1000


def as_tensor(v: Any, device: Optional[str]) -> Tensor:
    """v as a tensor: a Tensor as it is, anything NumPy takes as an array (copied) on `device`."""
    return v if isinstance(v, Tensor) else tensor(np.asarray(v), device=device, copy=True)


def array_operand(v: Any, device: Optional[str]) -> Any:
    """A NumPy array as a tensor of its dtype on `device`, copied (operations are lazy: a later write to
    the array must not change a result); anything else as it is."""
    return tensor(v, device=device, copy=True) if isinstance(v, np.ndarray) else v


# The ints each integer dtype holds; none for bool (an int with a bool tensor is an int64, as in NumPy).
_INT_RANGES = {"int32": (-2 ** 31, 2 ** 31 - 1), "int64": (-2 ** 63, 2 ** 63 - 1), "uint8": (0, 255),
               "bool": (1, 0)}


def _int_operand(self: Tensor, value: int) -> Tensor:
    """A Python int with an integer or bool tensor, as a 0-d tensor: of the tensor's dtype where it fits
    (i + 1 stays int32, as in NumPy and PyTorch), else int64. The engine's scalar rule (float32 for
    integer tensors) is for floats."""
    lo, hi = _INT_RANGES[self.dtype]
    return tensor(np.array(value, dtype=self.dtype if lo <= value <= hi else np.int64), device=self.device)


def _int_as_integer(t: Tensor, v: Any) -> Any:
    """v as _int_operand where it is an int meeting an integer or bool tensor t; else v as it is."""
    return _int_operand(t, int(v)) if is_int(v) and t.dtype in _INT_RANGES else v


def _binary_operator(name: str, swapped: Optional[str] = None, ints: bool = True) -> None:
    """Tensor.<name> taking a NumPy array too, and (`ints`) a Python int with an integer tensor as an
    integer; `swapped` names the op of a reflected operator (__rsub__: other - self is
    other.__sub__(self))."""
    base = getattr(Tensor, name, None)

    def op(self: Tensor, other: Any) -> Tensor:
        o = array_operand(other, self.device)
        if o is other and ints:
            o = _int_as_integer(self, other)
        if o is other:  # neither: the engine's overloads (or NotImplemented)
            return NotImplemented if base is None else base(self, other)
        return getattr(o, swapped)(self) if swapped else base(self, o)

    op.__name__ = name
    setattr(Tensor, name, op)


# ** keeps the engine's integer-exponent path (exact repeated squaring: i ** 2 stays an integer).
for _name in ("__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__matmul__", "__lt__",
              "__le__", "__gt__", "__ge__", "__eq__", "__ne__", "maximum", "minimum", "floor_divide", "remainder",
              "fmod"):
    _binary_operator(_name)
_binary_operator("__pow__", ints=False)
for _name, _op in (("__radd__", "__add__"), ("__rsub__", "__sub__"), ("__rmul__", "__mul__"),
                   ("__rtruediv__", "__truediv__"), ("__rfloordiv__", "__floordiv__"), ("__rmod__", "__mod__"),
                   ("__rpow__", "__pow__"), ("__rmatmul__", "__matmul__")):
    _binary_operator(_name, _op)


def _pos(self: Tensor) -> Tensor:
    return self


def _divmod(self: Tensor, other: Any) -> Tuple[Tensor, Tensor]:
    return self // other, self % other


def _rdivmod(self: Tensor, other: Any) -> Tuple[Tensor, Tensor]:
    return other // self, other % self


Tensor.__pos__, Tensor.__divmod__, Tensor.__rdivmod__ = _pos, _divmod, _rdivmod

_round = Tensor.round


def _round_decimals(self: Tensor, decimals: int = 0, out: Any = None) -> Tensor:
    """To `decimals` decimal places (negative: tens, hundreds...), ties to even: np.round's rule, which
    scales by 10**decimals first, so round(2.675, 2) is 2.67 or 2.68 as the scaled value falls."""
    no_out("Tensor.round", out)
    if not is_int(decimals):
        raise TypeError(f"Tensor.round: decimals must be an int, got {decimals!r}")
    whole = self.dtype in _INT_RANGES  # integers and bool
    if decimals == 0 or whole and (decimals > 0 or self.dtype == "bool"):
        return _round(self)  # whole numbers: as they are
    if decimals > 0:
        return _round(self * 10.0 ** decimals) / 10.0 ** decimals
    scale = float(10 ** -int(decimals))  # integers stay integers (computed in float32: exact below 2**24)
    r = _round(self / scale) * scale
    return r.astype(self.dtype) if whole else r


Tensor.round = _round_decimals


def _round_builtin(self: Tensor, ndigits: Optional[int] = None) -> Tensor:
    """round(t) and round(t, n): the elements rounded (a Tensor, as NumPy's round gives an array)."""
    return _round_decimals(self, 0 if ndigits is None else ndigits)


Tensor.__round__ = _round_builtin


def _reduction(name: str, takes_dtype: bool) -> None:
    """Tensor.<name> taking NumPy's keywords, so that np.sum(t), np.mean(t, axis=0), np.var(t, ddof=1),
    np.max(t), np.argmax(t) return Tensors (NumPy calls the method with axis=, out=, dtype=...). dtype
    casts before reducing, as NumPy's accumulator type; out= cannot be honoured by immutable tensors."""
    base = getattr(Tensor, name)

    def reduce(self: Tensor, *args: Any, dtype: Any = None, out: Any = None, **kwargs: Any) -> Tensor:
        no_out(f"Tensor.{name}", out)
        if dtype is not None:
            if not takes_dtype:
                raise TypeError(f"Tensor.{name} takes no dtype")
            self = self.astype(dtype_name(dtype))
        return base(self, *args, **kwargs)

    reduce.__name__, reduce.__doc__ = name, base.__doc__
    setattr(Tensor, name, reduce)


def _any_axis(name: str) -> None:
    """Tensor.<name> (argmax, argmin: the first extreme along one axis) also over the flattened tensor,
    for axis=None (NumPy's default)."""
    base = getattr(Tensor, name)

    def arg(self: Tensor, axis: Optional[int] = None, keepdims: bool = False) -> Tensor:
        if axis is not None:
            return base(self, axis, keepdims)
        i = base(self.reshape(-1), 0, False)
        return i.reshape([1] * self.ndim) if keepdims else i

    arg.__name__, arg.__doc__ = name, f"the index of the first {'largest' if name == 'argmax' else 'smallest'} " \
        "element along axis; axis None: of the flattened tensor (NumPy)"
    setattr(Tensor, name, arg)


_any_axis("argmax")
_any_axis("argmin")
for _name, _dt in (("sum", True), ("prod", True), ("mean", True), ("var", True), ("std", True), ("max", False), ("min", False),
                   ("any", False), ("all", False), ("argmax", False), ("argmin", False)):
    _reduction(_name, _dt)

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


def _dtype(self: Tensor) -> DType:
    """the dtype's name, equal to NumPy's dtype too"""
    return DType(_dtype_of(self))


Tensor.dtype = property(_dtype)


def where(cond: Any, a: Any, b: Any) -> Tensor:
    """a where cond holds, else b, broadcast (np.where). Each may be a Tensor or a NumPy array (copied),
    cond also a bool or a list, a and b also numbers (in the other's float dtype, else float32)."""
    device = next((v.device for v in (cond, a, b) if isinstance(v, Tensor)), None)
    cond, a, b = (array_operand(v, device) for v in (cond, a, b))
    if not isinstance(cond, Tensor):
        cond = tensor(np.asarray(cond, dtype=bool), device=device, copy=True)
    if not isinstance(a, Tensor) and not isinstance(b, Tensor):
        a = tensor(a, device=device)
    # An int with an integer tensor stays an integer, as in the operators.
    if isinstance(b, Tensor):
        a = _int_as_integer(b, a)
    if isinstance(a, Tensor):
        b = _int_as_integer(a, b)
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


Tensor.clamp = Tensor.clip = _clamp_either  # clip: NumPy's and PyTorch's other name


# ~, &, |, ^ on bool tensors (masks). aether has no bitwise ops, so an integer tensor is an error
# rather than NumPy's bitwise result; logical_and/or/xor/not take truth values of any dtype.
def _mask(t: Tensor, op: str) -> Tensor:
    if t.dtype != "bool":
        raise TypeError(f"{op} takes bool tensors, got {t.dtype} (aether has no bitwise ops: for truth values "
                        "use logical_and, logical_or, logical_xor, logical_not)")
    return t


def _logical_operator(name: str, symbol: str, method: str) -> None:
    def op(self: Tensor, other: Any) -> Tensor:
        if isinstance(other, (np.ndarray, bool, np.bool_)):
            other = tensor(np.array(other), device=self.device)
        if not isinstance(other, Tensor):
            return NotImplemented
        return getattr(_mask(self, symbol), method)(_mask(other, symbol))

    setattr(Tensor, f"__{name}__", op)
    setattr(Tensor, f"__r{name}__", op)  # symmetric


for _name, _symbol, _method in (("and", "&", "logical_and"), ("or", "|", "logical_or"), ("xor", "^", "logical_xor")):
    _logical_operator(_name, _symbol, _method)


def _invert(self: Tensor) -> Tensor:
    """~mask: the logical not of a bool tensor."""
    return _mask(self, "~").logical_not()


Tensor.__invert__ = _invert


def _tensors(items: Any) -> list:
    """A sequence of Tensors and NumPy arrays (copied, on the first Tensor's device) as Tensors."""
    items = list(items)
    device = next((t.device for t in items if isinstance(t, Tensor)), None)
    return [array_operand(t, device) for t in items]


def cat(tensors: Any, axis: int = 0) -> Tensor:
    """The tensors (or NumPy arrays) joined along an existing axis (np.concatenate)."""
    return _aether.cat(_tensors(tensors), axis)


def stack(tensors: Any, axis: int = 0) -> Tensor:
    """The tensors (or NumPy arrays) joined along a new axis (np.stack)."""
    return _aether.stack(_tensors(tensors), axis)


def einsum(subscripts: str, *operands: Any) -> Tensor:
    """NumPy's einsum of tensors (or NumPy arrays): "ij,jk->ik", "bhqd,bhkd->bhqk", "...ij->...ji",
    "ii->i"; without "->" NumPy's implicit output. Size-1 dims broadcast. Recorded for autograd (it is
    built of matmul, products, sums and views)."""
    if not isinstance(subscripts, str):
        raise TypeError("einsum takes the subscripts as a string first (NumPy's sublist form is not supported)")
    return _aether.einsum(subscripts, _tensors(operands))
