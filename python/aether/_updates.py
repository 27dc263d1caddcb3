"""Functional updates: a new tensor where NumPy and PyTorch would write into one (aether's tensors are
values of a lazy graph). `t.at[index].set(v)` and `.add(v)` (JAX's spelling) give what `a[index] = v`
and `np.add.at(a, index, v)` leave in an array, for every index NumPy takes; `t.index_add(axis,
indices, values)` and `t.masked_fill(mask, value)` are PyTorch's, without the underscore. On float
tensors each is recorded for autograd (a set position's gradient goes to the value, not to t);
integer and bool tensors, which carry no gradient, are updated in NumPy at once."""

from __future__ import annotations

from typing import Any

import numpy as np

from ._aether import Tensor
from ._tensor import FLOAT_DTYPES, index_tensor, tensor
from ._tensor_methods import zeros_like
from ._tensor_ops import as_tensor, where


def _numpy_index(index: Any) -> Any:
    """index with its tensors read as arrays (NumPy applies every indexing rule to positions)."""
    items = index if isinstance(index, tuple) else (index,)
    out = tuple(np.asarray(i) if isinstance(i, Tensor) else i for i in items)
    return out if isinstance(index, tuple) else out[0]


class _AtIndex:
    def __init__(self, t: Tensor, index: Any):
        self._t, self._index = t, _numpy_index(index)

    def _positions(self) -> np.ndarray:
        """The flat positions t[index] reads, in t[index]'s shape (NumPy's rules and errors)."""
        return np.arange(self._t.size, dtype=np.int64).reshape(self._t.shape)[self._index]

    def _values(self, v: Any, shape: tuple) -> Tensor:
        """v broadcast to the indexed shape, flattened, on t's device."""
        return as_tensor(v, self._t.device).broadcast_to(shape).reshape(-1)

    def get(self) -> Tensor:
        """t[index], for symmetry with set and add."""
        return self._t[self._index]

    def add(self, v: Any) -> Tensor:
        """t with v added at index; repeated positions add up (np.add.at's result)."""
        t = self._t
        if t.dtype not in FLOAT_DTYPES:
            a = np.asarray(t).copy()
            np.add.at(a, self._index, np.asarray(v))
            return tensor(a, device=t.device)
        pos = self._positions()
        return t.reshape(-1).index_add(0, pos.reshape(-1), self._values(v, pos.shape)).reshape(t.shape)

    def set(self, v: Any) -> Tensor:
        """t with v at index (where a position repeats, its last value, as a[index] = v leaves it)."""
        t = self._t
        if t.dtype not in FLOAT_DTYPES:
            a = np.asarray(t).copy()
            a[self._index] = np.asarray(v)
            return tensor(a, device=t.device)
        pos = self._positions()
        flat = pos.reshape(-1)
        _, first_from_end = np.unique(flat[::-1], return_index=True)
        last = np.sort(flat.size - 1 - first_from_end)  # each position's last occurrence
        placed = zeros_like(t.reshape(-1)).index_add(0, flat[last], self._values(v, pos.shape).take(last))
        mask = np.zeros(t.size, bool)
        mask[flat] = True
        return where(tensor(mask.reshape(t.shape), device=t.device), placed.reshape(t.shape), t)


class _At:
    """t.at[index]: .set(v), .add(v) or .get() give a new tensor (JAX's functional update)."""

    __slots__ = ("_t",)

    def __init__(self, t: Tensor):
        self._t = t

    def __getitem__(self, index: Any) -> _AtIndex:
        return _AtIndex(self._t, index)


def _index_add(self: Tensor, axis: int, indices: Any, values: Any) -> Tensor:
    """PyTorch's index_add, as a new tensor: values added along axis at 1-D integer indices (repeats add up)."""
    return self._index_add(int(axis), index_tensor(indices, self.device, "index_add"), as_tensor(values, self.device))


def _masked_fill(self: Tensor, mask: Any, value: Any) -> Tensor:
    """PyTorch's masked_fill, as a new tensor: value where mask (broadcast) is true."""
    return where(mask, value, self)


Tensor.at = property(_At, doc=_At.__doc__)
Tensor.index_add = _index_add
Tensor.masked_fill = _masked_fill
