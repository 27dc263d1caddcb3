"""More of NumPy's and PyTorch's tensor methods and functions, composed of the engine's operations
(views where the result is one, copies otherwise), so each is recorded for autograd: ravel, view,
swapaxes, moveaxis, broadcast_to, mT, tile, roll, chunk, split, dot, outer, norm, cpu, cuda, nbytes,
itemsize, cumsum, cumprod, sort, argsort, topk, take_along_axis, repeat, diff, triu, tril, diagonal,
trace, amax, amin, dim, requires_grad_, PyTorch's casts (float, double, half, int, long, bool...), and
zeros_like, ones_like, full_like, eye, linspace."""

from __future__ import annotations

import math
from typing import Any, Callable, List, Optional, Sequence, Union

import numpy as np

from . import _aether
from ._aether import Tensor
from ._tensor import _shape, dtype_name, index_tensor, is_int, tensor
from ._tensor_ops import as_tensor, cat, where

_ITEMSIZE = {"float32": 4, "float64": 8, "float16": 2, "bfloat16": 2, "int32": 4, "int64": 8, "uint8": 1, "bool": 1}


def _axis(axis: int, ndim: int) -> int:
    if not -ndim <= axis < ndim:
        raise ValueError(f"axis {axis} is out of range for a tensor of {ndim} dimensions")
    return axis % ndim


def _moveaxis(self: Tensor, source: Union[int, Sequence[int]], destination: Union[int, Sequence[int]]) -> Tensor:
    """Axes moved to new positions, the others keeping their order (np.moveaxis): a view."""
    src = [_axis(a, self.ndim) for a in ([source] if isinstance(source, int) else source)]
    dst = [_axis(a, self.ndim) for a in ([destination] if isinstance(destination, int) else destination)]
    if len(src) != len(dst) or len(set(src)) != len(src) or len(set(dst)) != len(dst):
        raise ValueError("moveaxis: source and destination must be as many distinct axes")
    order = [a for a in range(self.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return self.permute(order)


def _tile(self: Tensor, reps: Union[int, Sequence[int]]) -> Tensor:
    """The tensor repeated reps times along each axis (np.tile; torch's Tensor.repeat): a copy."""
    reps = [int(reps)] if isinstance(reps, (int, np.integer)) else [int(r) for r in reps]
    n = max(len(reps), self.ndim)
    reps = [1] * (n - len(reps)) + reps
    shape = [1] * (n - self.ndim) + list(self.shape)
    x = self.reshape([v for s in shape for v in (1, s)])  # (1, s0, 1, s1, ...)
    x = x.expand([v for r, s in zip(reps, shape) for v in (r, s)])
    return x.reshape([r * s for r, s in zip(reps, shape)])


def _roll(self: Tensor, shift: Union[int, Sequence[int]], axis: Union[int, Sequence[int], None] = None) -> Tensor:
    """Elements shifted along axis, those past the end coming back at the start (np.roll); axis None:
    over the flattened tensor."""
    if axis is None:
        return _roll(self.reshape(-1), shift, 0).reshape(list(self.shape))
    shifts = [shift] if isinstance(shift, int) else list(shift)
    axes = [axis] if isinstance(axis, int) else list(axis)
    if len(shifts) != len(axes):
        raise ValueError("roll: give one shift per axis")
    out = self
    for s, a in zip(shifts, axes):
        a = _axis(a, out.ndim)
        n = out.shape[a]
        s = s % n if n else 0
        if s:
            out = cat([out.slice(a, n - s, n), out.slice(a, 0, n - s)], a)
    return out


def _chunk(self: Tensor, chunks: int, axis: int = 0) -> List[Tensor]:
    """At most `chunks` views along axis, of ceil(n / chunks) elements each but the last (torch.chunk)."""
    if chunks < 1:
        raise ValueError(f"chunk: chunks must be >= 1, got {chunks}")
    a = _axis(axis, self.ndim)
    n = self.shape[a]
    size = max(1, math.ceil(n / chunks))
    return [self.slice(a, i, min(i + size, n)) for i in range(0, n, size)] or [self]


def _split(self: Tensor, split_size_or_sections: Union[int, Sequence[int]], axis: int = 0) -> List[Tensor]:
    """PyTorch's split: views along axis of split_size elements each (the last may be shorter), or of
    the given sizes, which must add up to the axis's length. NumPy's split is np.split(t, ...)."""
    a = _axis(axis, self.ndim)
    n = self.shape[a]
    if is_int(split_size_or_sections):
        size = int(split_size_or_sections)
        if size < 1:
            raise ValueError(f"split: the size of a piece must be >= 1, got {size}")
        return [self.slice(a, i, min(i + size, n)) for i in range(0, n, size)] or [self]
    sizes = [int(s) for s in split_size_or_sections]
    if any(s < 0 for s in sizes) or sum(sizes) != n:
        raise ValueError(f"split: sizes {sizes} do not add up to the {n} elements of axis {axis}")
    starts = np.cumsum([0] + sizes)
    return [self.slice(a, int(lo), int(hi)) for lo, hi in zip(starts[:-1], starts[1:])]


def split_at(t: Tensor, indices_or_sections: Any, axis: int, equal: bool, name: str) -> List[Tensor]:
    """NumPy's split (equal) and array_split: `sections` pieces (array_split: the first n % sections one
    longer), or pieces between the indices (Python's slice rules: negative from the end, clipped). Views."""
    a = _axis(axis, t.ndim)
    n = t.shape[a]
    if is_int(indices_or_sections):
        k = int(indices_or_sections)
        if k < 1:
            raise ValueError(f"{name}: the number of sections must be >= 1, got {k}")
        if equal and n % k:
            raise ValueError(f"{name}: array split does not result in an equal division ({n} elements in {k})")
        sizes = [n // k + (i < n % k) for i in range(k)]
        bounds = [int(b) for b in np.cumsum([0] + sizes)]
    else:
        bounds = [0] + [int(i) for i in indices_or_sections] + [n]
    return [t.slice(a, lo, hi) for lo, hi in zip(bounds[:-1], bounds[1:])]


def _dot(self: Tensor, other: Any) -> Tensor:
    """np.dot for tensors of at most 2 dims: the inner product of vectors, else matmul."""
    other = as_tensor(other, self.device)
    if self.ndim > 2 or other.ndim > 2:
        raise ValueError("dot: tensors of at most 2 dims (use matmul for batches)")
    if self.ndim == 0 or other.ndim == 0:
        return self * other
    return self @ other


def _outer(self: Tensor, other: Any) -> Tensor:
    """The outer product of the flattened tensors (np.outer): (m, n)."""
    return self.reshape(-1, 1) * as_tensor(other, self.device).reshape(1, -1)


def _norm(self: Tensor, ord: Any = None, axis: Any = None, keepdims: bool = False) -> Tensor:
    """The vector norm over axis (all elements when None): 2 (the default, and "fro"), 1, inf, -inf, or
    any other p as (sum |x|^p)^(1/p) (np.linalg.norm's vector norms; matrix norms other than "fro" are
    not supported)."""
    x = self.abs()
    if ord in (None, 2, "fro"):
        return (self * self).sum(axis, keepdims).sqrt()
    if ord == 1:
        return x.sum(axis, keepdims)
    if ord == math.inf:
        return x.max(axis, keepdims)
    if ord == -math.inf:
        return x.min(axis, keepdims)
    if isinstance(ord, (int, float)) and ord > 0:
        return (x ** float(ord)).sum(axis, keepdims) ** (1.0 / ord)
    raise ValueError(f"norm: unsupported ord {ord!r}")


# ---- along one axis: axis None is the flattened tensor, as in NumPy ----
def _cumsum(self: Tensor, axis: Optional[int] = None, dtype: Any = None) -> Tensor:
    """Running sums along axis (np.cumsum): floats keep their dtype (float32 and 16-bit sums are each
    rounded once from a float64 sum), integers and bools sum in int64; dtype= casts first."""
    t = self if dtype is None else self.astype(dtype_name(dtype))
    return t.reshape(-1)._cumsum(0) if axis is None else t._cumsum(int(axis))


def _cumprod(self: Tensor, axis: Optional[int] = None, dtype: Any = None) -> Tensor:
    """Running products along axis (np.cumprod), with cumsum's dtypes (floats rounded once from a
    float64 product, integers and bools in int64, wrapping); the gradient is exact where x is 0."""
    t = self if dtype is None else self.astype(dtype_name(dtype))
    return t.reshape(-1)._cumprod(0) if axis is None else t._cumprod(int(axis))


def _sort_args(self: Tensor, axis: Optional[int], kind: Any, order: Any, name: str) -> tuple:
    if order is not None:
        raise TypeError(f"{name}: order= sorts structured arrays; aether tensors have no fields")
    # kind: every sort here is stable, which is what any kind NumPy names may give
    return (self.reshape(-1), 0) if axis is None else (self, int(axis))


def _sort(self: Tensor, axis: Optional[int] = -1, kind: Any = None, order: Any = None, *, descending: bool = False,
          stable: Any = None) -> Tensor:
    """The values sorted along axis (np.sort: a new tensor; NaN last, or first when descending).
    Stable; recorded for autograd (each value's gradient goes back to its position)."""
    t, a = _sort_args(self, axis, kind, order, "sort")
    return t._sort(a, bool(descending))[0]


def _argsort(self: Tensor, axis: Optional[int] = -1, kind: Any = None, order: Any = None, *,
             descending: bool = False, stable: Any = None) -> Tensor:
    """The int64 positions that sort each line along axis (np.argsort; PyTorch's descending=), stably:
    equal values keep their order; NaN is the largest value."""
    t, a = _sort_args(self, axis, kind, order, "argsort")
    return t._argsort(a, bool(descending))


def _topk(self: Tensor, k: int, axis: int = -1, largest: bool = True) -> tuple:
    """(values, indices) of the k largest (smallest) elements along axis, in order (PyTorch's topk;
    ties keep the earlier position first)."""
    return self._topk(int(k), int(axis), bool(largest))


def _take_along_axis(self: Tensor, indices: Any, axis: Optional[int]) -> Tensor:
    """np.take_along_axis: indices with the tensor's ndim, broadcast against it in the other axes
    (axis None: both flattened). Negative indices count from the end; recorded for autograd."""
    indices = index_tensor(indices, self.device, "take_along_axis")
    if axis is None:
        return self.reshape(-1)._take_along_axis(indices.reshape(-1), 0)
    return self._take_along_axis(indices, int(axis))


# ---- NumPy's repeat, diff, triu/tril, diagonal and trace: copies through take and where ----
def _repeat(self: Tensor, repeats: Any, axis: Optional[int] = None) -> Tensor:
    """Each element repeated along axis (np.repeat; PyTorch's repeat_interleave; torch's repeat is
    tile): repeats an int or one count per element; axis None repeats the flattened tensor."""
    t, a = (self.reshape(-1), 0) if axis is None else (self, _axis(int(axis), self.ndim))
    counts = np.asarray(repeats)
    if counts.dtype.kind not in "iu" or counts.ndim > 1 or np.any(counts < 0):
        raise ValueError(f"repeat: repeats must be non-negative integers, one or one per element, got {repeats!r}")
    return t.take(np.repeat(np.arange(t.shape[a]), counts), a)


def _diff(self: Tensor, n: int = 1, axis: int = -1) -> Tensor:
    """The n-th differences along axis (np.diff): out[i] = x[i + 1] - x[i], n times."""
    a = _axis(int(axis), self.ndim)
    if int(n) < 0:
        raise ValueError(f"diff: n must be >= 0, got {n}")
    out = self
    for _ in range(int(n)):
        head = (slice(None),) * a
        out = out[head + (slice(1, None),)] - out[head + (slice(None, -1),)]
    return out


def _triangle(upper: bool) -> Any:
    def tri(self: Tensor, k: int = 0) -> Tensor:
        if self.ndim < 2:
            raise ValueError(f"{'triu' if upper else 'tril'}: needs at least 2 dimensions, got shape {self.shape}")
        m, n = self.shape[-2:]
        keep = np.triu(np.ones((m, n), bool), int(k)) if upper else np.tril(np.ones((m, n), bool), int(k))
        return where(tensor(keep, device=self.device), self, 0)

    tri.__doc__ = (f"The {'upper' if upper else 'lower'} triangle of the last two axes from diagonal k "
                   f"(np.{'triu' if upper else 'tril'}), zeros elsewhere.")
    return tri


def _diagonal(self: Tensor, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The diagonal of axes axis1 and axis2 (np.diagonal: those axes removed, the diagonal last)."""
    a, b = _axis(int(axis1), self.ndim), _axis(int(axis2), self.ndim)
    if a == b:
        raise ValueError("diagonal: axis1 and axis2 must be different axes")
    t = self.moveaxis([a, b], [-2, -1])
    m, n = t.shape[-2:]
    rows = np.arange(max(0, -int(offset)), min(m, n - int(offset)))
    return t.reshape(*t.shape[:-2], m * n).take(rows * n + rows + int(offset), -1)


def _trace(self: Tensor, offset: int = 0, axis1: int = 0, axis2: int = 1) -> Tensor:
    """The sum of the diagonal (np.trace)."""
    return _diagonal(self, offset, axis1, axis2).sum(-1)


def _requires_grad_(self: Tensor, requires_grad: bool = True) -> Tensor:
    """PyTorch's: sets requires_grad and returns the tensor."""
    self.requires_grad = bool(requires_grad)
    return self


Tensor.repeat = _repeat
Tensor.repeat_interleave = _repeat
Tensor.diff = _diff
Tensor.triu = _triangle(True)
Tensor.tril = _triangle(False)
Tensor.diagonal = _diagonal
Tensor.trace = _trace
Tensor.amax = Tensor.max
Tensor.amin = Tensor.min


def _dim(self: Tensor) -> int:
    """PyTorch's name of ndim."""
    return self.ndim


Tensor.dim = _dim
Tensor.requires_grad_ = _requires_grad_


def _cast_to(name: str, dtype: str) -> Callable[[Tensor], Tensor]:
    def cast(self: Tensor) -> Tensor:
        return self.astype(dtype)

    cast.__name__, cast.__doc__ = name, f'PyTorch\'s cast to {dtype}: self.astype("{dtype}")'
    return cast


# PyTorch's casts by name.
for _name, _dtype in (("float", "float32"), ("double", "float64"), ("half", "float16"), ("bfloat16", "bfloat16"),
                      ("int", "int32"), ("long", "int64"), ("bool", "bool")):
    setattr(Tensor, _name, _cast_to(_name, _dtype))

Tensor.cumsum = _cumsum
Tensor.cumprod = _cumprod
Tensor.sort = _sort
Tensor.argsort = _argsort
Tensor.topk = _topk
Tensor.take_along_axis = _take_along_axis


def _ravel(self: Tensor) -> Tensor:
    """The elements as one axis (np.ravel): a view where the layout allows."""
    return self.reshape(-1)


def _swapaxes(self: Tensor, a: int, b: int) -> Tensor:
    """Axes a and b exchanged (np.swapaxes): a view."""
    return self.transpose(a, b)


def _broadcast_to(self: Tensor, shape: Union[int, Sequence[int]]) -> Tensor:
    """The tensor broadcast to shape (np.broadcast_to): a view."""
    return self.expand(_shape(shape))


def _mT(self: Tensor) -> Tensor:
    """the last two axes swapped"""
    return self.transpose(-2, -1)


def _cpu(self: Tensor) -> Tensor:
    """A copy on the CPU (self when it is there)."""
    return self.to("cpu")


def _cuda(self: Tensor, index: Optional[int] = None) -> Tensor:
    """A copy on a GPU: cuda:index, or the default one."""
    return self.to("cuda" if index is None else f"cuda:{index}")


def _itemsize(self: Tensor) -> int:
    """bytes per element"""
    return _ITEMSIZE[self.dtype]


def _nbytes(self: Tensor) -> int:
    """bytes of all the elements"""
    return self.size * _ITEMSIZE[self.dtype]


Tensor.ravel = _ravel
Tensor.view = Tensor.reshape
Tensor.swapaxes = _swapaxes
Tensor.moveaxis = _moveaxis
Tensor.broadcast_to = _broadcast_to
Tensor.mT = property(_mT)
Tensor.tile = _tile
Tensor.roll = _roll
Tensor.chunk = _chunk
Tensor.split = _split
Tensor.dot = _dot
Tensor.outer = _outer
Tensor.norm = _norm
Tensor.cpu = _cpu
Tensor.cuda = _cuda
Tensor.itemsize = property(_itemsize)
Tensor.nbytes = property(_nbytes)


def _like(t: Tensor, dtype: Any) -> str:
    return t.dtype if dtype is None else dtype_name(dtype)


def zeros_like(t: Tensor, dtype: Any = None) -> Tensor:
    """Zeros of t's shape, dtype (or `dtype`) and device."""
    return _aether.zeros(list(t.shape), _like(t, dtype)).to(t.device)


def ones_like(t: Tensor, dtype: Any = None) -> Tensor:
    """Ones of t's shape, dtype (or `dtype`) and device."""
    return _aether.ones(list(t.shape), _like(t, dtype)).to(t.device)


def full_like(t: Tensor, value: float, dtype: Any = None) -> Tensor:
    """`value` in t's shape, dtype (or `dtype`) and device."""
    return _aether.full(list(t.shape), value, _like(t, dtype)).to(t.device)


def eye(n: int, m: Optional[int] = None, k: int = 0, dtype: Any = "float32") -> Tensor:
    """Ones on the k-th diagonal of an (n, m) matrix (np.eye)."""
    m = n if m is None else m
    rows = _aether.arange(0.0, float(n), 1.0, "int64").reshape(n, 1)
    cols = _aether.arange(0.0, float(m), 1.0, "int64").reshape(1, m)
    return ((cols - rows) == k).astype(dtype_name(dtype))


def linspace(start: float, stop: float, num: int = 50, endpoint: bool = True, dtype: Any = "float32") -> Tensor:
    """num evenly spaced values from start to stop (included when endpoint), as np.linspace computes them."""
    return tensor(np.linspace(start, stop, num, endpoint=endpoint), dtype=dtype_name(dtype))
