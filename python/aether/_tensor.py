"""Tensor construction from Python data, dtype names, indexing and Python protocols (in, format)."""

from __future__ import annotations

from typing import Any, Iterator, Optional, Sequence, Union

import numpy as np

from . import _aether
from ._aether import Tensor

_DTYPES = {"float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"}
FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def no_out(name: str, out: Any) -> None:
    """The refusal of NumPy's out= (tensors are values, never written in place)."""
    if out is not None:
        raise TypeError(f"{name}: out= is not supported on aether Tensors (tensors are values: use the result)")


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


def is_int(v: Any) -> bool:
    """A Python or NumPy integer that is not a bool."""
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _shape(shape: Union[int, Sequence[int]]) -> list:
    """A shape given as one int (NumPy's zeros(3)) or a sequence of them."""
    return [int(shape)] if isinstance(shape, (int, np.integer)) else list(shape)


def tensor(data: Any, dtype: Optional[str] = None, device: Optional[str] = None, requires_grad: bool = False,
           copy: bool = False) -> Tensor:
    """A Tensor from a NumPy array, anything with the buffer protocol or DLPack, or nested lists.

    A C-contiguous host array of a dtype aether has (float32, float64, float16, int32, int64, uint8,
    bool) is used without a copy unless copy=True; aether never writes it, and later writes by the
    caller show in values computed afterwards. Python floats become float32, ints int64; NumPy scalars
    keep their dtype.
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
            # Python floats: aether's default float type. NumPy's float64 scalars keep their dtype, as
            # its arrays and its other scalars do (np.float64(2.5) became float32, np.float16(1) not).
            if not isinstance(data, (np.ndarray, np.generic, memoryview)) and a.dtype == np.float64:
                a = a.astype(np.float32)
            if a.dtype.kind in "OUSV":
                raise TypeError(f"aether.tensor: cannot make a tensor of {a.dtype} data")
            if str(a.dtype) not in _DTYPES:
                raise TypeError(f"aether.tensor: unsupported dtype {a.dtype} (aether has float32, float64, "
                                "float16, bfloat16, int32, int64, uint8 and bool)")
            if not a.flags.c_contiguous:  # not np.ascontiguousarray, which makes a 0-d array 1-d
                a = np.ascontiguousarray(a)
            t = _aether._from_array(a, copy)
    if dtype is not None:
        t = t.astype(dtype_name(dtype))
    if device is not None:
        t = t.to(device_name(device))
    if requires_grad:
        t.requires_grad = True
    return t


def _creation_dtype(name: str, dtype: Any) -> str:
    """The dtype argument of zeros/ones/full, where PyTorch's habit ones(2, 3) puts a size."""
    if is_int(dtype):
        raise TypeError(f"{name}: the shape is one argument, a tuple such as {name}((2, 3)) (NumPy's form); "
                        f"got the int {dtype} where the dtype goes")
    return dtype_name(dtype)


def zeros(shape: Union[int, Sequence[int]], dtype: Any = "float32") -> Tensor:
    """A tensor of zeros of `shape` (an int or a tuple, as np.zeros)."""
    return _aether.zeros(_shape(shape), _creation_dtype("zeros", dtype))


def ones(shape: Union[int, Sequence[int]], dtype: Any = "float32") -> Tensor:
    """A tensor of ones of `shape` (an int or a tuple, as np.ones)."""
    return _aether.ones(_shape(shape), _creation_dtype("ones", dtype))


def full(shape: Union[int, Sequence[int]], value: float, dtype: Any = "float32") -> Tensor:
    """A tensor of `shape` (an int or a tuple, as np.full) holding `value` everywhere."""
    return _aether.full(_shape(shape), value, _creation_dtype("full", dtype))


def arange(start: float, stop: Optional[float] = None, step: float = 1.0, dtype: Any = "float32") -> Tensor:
    """Values from start (0 when only one bound is given) up to, not including, stop (np.arange)."""
    if stop is None:
        start, stop = 0.0, start
    return _aether.arange(start, stop, step, dtype_name(dtype))


def rand(*shape: int, dtype: Any = "float32") -> Tensor:
    """Uniform [0, 1) from aether's seeded generator (aether.manual_seed)."""
    return _aether.rand(_shape(shape[0]) if len(shape) == 1 else list(shape), dtype_name(dtype))


def randn(*shape: int, dtype: Any = "float32") -> Tensor:
    """Standard normal from aether's seeded generator (aether.manual_seed)."""
    return _aether.randn(_shape(shape[0]) if len(shape) == 1 else list(shape), dtype_name(dtype))


def _check_index(self: Tensor, index: tuple, used: int) -> None:
    """At most one Ellipsis, and at most ndim axes indexed (`used`: those the entries index)."""
    if sum(i is Ellipsis for i in index) > 1:
        raise IndexError("an index can only have a single ellipsis")
    if used > self.ndim:
        raise IndexError(f"too many indices for a tensor of {self.ndim} dimensions")


def _getitem(self: Tensor, index: Any) -> Tensor:
    """NumPy's indexing, recorded for autograd. Basic: integers, slices (negative steps too), Ellipsis
    and None (a new axis of size 1), giving a view. Advanced: integer arrays (NumPy arrays, lists,
    integer Tensors) and bool masks, giving a copy (see _advanced)."""
    if not isinstance(index, tuple):
        index = (index,)
    if any(isinstance(i, (Tensor, np.ndarray, list)) for i in index):
        return _advanced(self, index)
    used = sum(i is not None and i is not Ellipsis for i in index)  # entries that index an axis
    _check_index(self, index, used)
    if Ellipsis in index:
        k = index.index(Ellipsis)
        index = index[:k] + (slice(None),) * (self.ndim - used) + index[k + 1:]
    out, axis, shape = self, 0, []  # axis: of self; shape: the result's, built entry by entry
    for i in index:
        if i is None:
            shape.append(1)
            continue
        n = self.shape[axis]
        if is_int(i):
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


def index_tensor(indices: Any, device: str, op: str) -> Tensor:
    """Integer indices (a Tensor, a NumPy array, a list or an int) as a Tensor on `device` (an int64
    copy of anything else; the engine checks a Tensor's dtype)."""
    if isinstance(indices, Tensor):
        return indices
    a = np.asarray(indices)
    if a.dtype.kind not in "iu":
        raise TypeError(f"{op}: indices must be integers, got {a.dtype}")
    return tensor(a.astype(np.int64), device=device, copy=True)


def _take(self: Tensor, indices: Any, axis: Optional[int] = None) -> Tensor:
    """The elements at integer indices along axis (np.take; axis None: of the flattened tensor).
    indices may be a Tensor, a NumPy array, a list or an int; negative ones count from the end; one
    out of bounds is an IndexError when the result is computed. Recorded for autograd."""
    indices = index_tensor(indices, self.device, "take")
    return self.reshape(-1)._take(indices, 0) if axis is None else self._take(indices, int(axis))


def _advanced(self: Tensor, index: tuple) -> Tensor:
    """NumPy's advanced indexing: integer arrays and bool masks (a mask of k dims stands for the k
    integer arrays of its nonzero positions), with slices and integers beside them. The index arrays
    broadcast together; their result dims replace the indexed axes where those are adjacent, else
    they come first. One index array (t[idx], t[:, idx]) stays lazy (take: bounds checked when
    computed); several, and masks, are read (realized) and checked at once. A copy, not a view."""
    entries = []  # (kind, value): "slice", "array" (NumPy int64 array or an integer Tensor)
    for i in index:
        if i is None:
            raise IndexError("aether: None (a new axis) together with index arrays is not supported: "
                             "add the axis with reshape first")
        if i is Ellipsis:
            entries.append(("...", None))
        elif isinstance(i, slice):
            entries.append(("slice", i))
        elif is_int(i):
            entries.append(("array", np.asarray(int(i), np.int64)))
        elif isinstance(i, Tensor) and i.dtype != "bool" and i.dtype not in FLOAT_DTYPES:
            entries.append(("array", i))
        else:
            a = np.asarray(i)
            if a.dtype == bool:
                if a.ndim == 0:
                    raise IndexError("aether: a 0-d bool index is not supported")
                entries += [("mask", a)]
            elif a.dtype.kind in "iu" or a.size == 0:
                entries.append(("array", a.astype(np.int64)))
            else:
                raise IndexError(f"arrays used as indices must be of integer or bool type, got {a.dtype}")
    width = lambda e: e[1].ndim if e[0] == "mask" else (0 if e[0] == "..." else 1)
    used = sum(width(e) for e in entries)
    _check_index(self, index, used)
    full = []  # one entry per axis of self
    for kind, v in entries:
        if kind == "...":
            full += [("slice", slice(None))] * (self.ndim - used)
        elif kind == "mask":
            axis = len(full)
            if tuple(v.shape) != tuple(self.shape[axis:axis + v.ndim]):
                raise IndexError(f"boolean index of shape {v.shape} does not match the indexed dims "
                                 f"{tuple(self.shape[axis:axis + v.ndim])}")
            full += [("array", a.astype(np.int64)) for a in np.nonzero(v)]
        else:
            full.append((kind, v))
    full += [("slice", slice(None))] * (self.ndim - len(full))
    out = _getitem(self, tuple(v if k == "slice" else slice(None) for k, v in full))  # slices: a view
    axes = [d for d, (k, _) in enumerate(full) if k == "array"]
    arrays = [full[d][1] for d in axes]
    if len(arrays) == 1:
        return _take(out, arrays[0], axes[0])
    # Several: the row-major position in the indexed dims, from the broadcast (bounds-checked) indices.
    arrays = [np.asarray(a) if isinstance(a, Tensor) else a for a in arrays]
    try:
        arrays = np.broadcast_arrays(*arrays)
    except ValueError:
        raise IndexError("shape mismatch: indexing arrays could not be broadcast together with shapes "
                         + " ".join(str(a.shape) for a in arrays)) from None
    sizes = [out.shape[d] for d in axes]
    linear = np.zeros(arrays[0].shape, np.int64)
    for a, n, d in zip(arrays, sizes, axes):
        if a.size and (a.min() < -n or a.max() >= n):
            bad = a[(a < -n) | (a >= n)].flat[0]
            raise IndexError(f"index {bad} is out of bounds for axis {d} with size {n}")
        linear = linear * n + np.where(a < 0, a + n, a)
    others = [d for d in range(out.ndim) if d not in axes]
    flat = out.permute(axes + others).reshape([int(np.prod(sizes))] + [out.shape[d] for d in others])
    r = _take(flat, linear, 0)
    if axes != list(range(axes[0], axes[0] + len(axes))):
        return r  # not adjacent: the broadcast dims first
    k, first = linear.ndim, axes[0]  # adjacent: the broadcast dims where the indexed axes were
    perm = [k + j for j in range(first)] + list(range(k)) + [k + j for j in range(first, len(others))]
    return r.permute(perm)


def _setitem(self: Tensor, index: Any, value: Any) -> None:
    raise TypeError("aether tensors are values and do not support item assignment: build the new tensor instead "
                    "(t = t.at[index].set(value), t.at[index].add(value), ae.where(mask, value, t), or an "
                    "optimizer's step for parameters)")


def _contains(self: Tensor, value: Any) -> bool:
    """`value in t`: whether any element equals value, as in NumPy."""
    return bool(np.asarray(self == value).any())


def _repr(self: Tensor) -> str:
    """Tensor([[1., 2.],
            [3., 4.]], dtype=float32): the values as NumPy prints them (np.set_printoptions applies:
    over 1000 elements the long axes show their ends, and the shape is added, as for an empty (0, 3)),
    then the dtype, the device when it is not the CPU, and requires_grad when set, as torch's repr."""
    values = np.asarray(self.detach())  # bfloat16 reads as float32
    text = np.array2string(values, separator=", ", prefix="Tensor(")
    extra = [f"dtype={self.dtype}"]
    if values.size > np.get_printoptions()["threshold"] or (values.size == 0 and values.ndim != 1):
        extra.insert(0, f"shape={tuple(self.shape)}")
    if self.device != "cpu":
        extra.append(f"device={self.device!r}")
    if self.requires_grad:
        extra.append("requires_grad=True")
    return f"Tensor({text}, {', '.join(extra)})"


def _format(self: Tensor, spec: str) -> str:
    """f"{loss:.4f}" formats a one-element tensor's value; an empty spec gives str(t)."""
    if not spec:
        return str(self)
    if self.size != 1:
        raise TypeError(f"format spec {spec!r} needs a tensor of one element, got shape {tuple(self.shape)}")
    return format(self.item(), spec)


def _tolist(self: Tensor) -> Any:
    return np.asarray(self).tolist()


def _iter(self: Tensor) -> Iterator[Tensor]:
    """The sub-tensors along the first axis, as NumPy's; a 0-d tensor is not iterable (TypeError)."""
    if self.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (self[i] for i in range(self.shape[0]))


Tensor.__getitem__ = _getitem
Tensor.take = _take
Tensor.__setitem__ = _setitem
Tensor.__contains__ = _contains
Tensor.__format__ = _format
Tensor.__repr__ = _repr
Tensor.__str__ = _repr
Tensor.tolist = _tolist
Tensor.__iter__ = _iter
