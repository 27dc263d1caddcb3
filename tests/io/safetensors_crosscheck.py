#!/usr/bin/env python3
"""Cross-checks aether's safetensors files against the reference `safetensors` package.

Used by tests/io_python_test.cpp, which skips itself when `safetensors` or `numpy` is missing.
  safetensors_crosscheck.py read FILE    print the file as JSON, as the reference reads it:
                                          {"metadata": {...}, "tensors": {name: {dtype, shape, values}}}
  safetensors_crosscheck.py write FILE   write a fixed set of tensors with safetensors.numpy
"""
import json
import sys

import numpy as np
import safetensors
from safetensors import safe_open
from safetensors.numpy import save_file

NUMPY_DTYPES = {"F32": "<f4", "F16": "<f2", "F64": "<f8", "I32": "<i4", "I64": "<i8", "U8": "u1", "BOOL": "?"}


def values(dtype, data):
    """The elements of a raw little-endian buffer as Python numbers (BF16 widened to float32)."""
    if dtype == "BF16":
        return (np.frombuffer(data, dtype="<u2").astype(np.uint32) << 16).view(np.float32).tolist()
    return np.frombuffer(data, dtype=NUMPY_DTYPES[dtype]).tolist()


def read(path):
    with open(path, "rb") as f:
        raw = f.read()
    # deserialize() runs the reference (Rust) validation of the whole file: header, offsets, sizes.
    tensors = {
        name: {"dtype": t["dtype"], "shape": list(t["shape"]), "values": values(t["dtype"], bytes(t["data"]))}
        for name, t in safetensors.deserialize(raw)
    }
    # The public numpy API must agree (numpy has no bfloat16, so those are skipped here).
    with safe_open(path, framework="numpy") as f:
        metadata = f.metadata() or {}
        for name in f.keys():
            if tensors[name]["dtype"] == "BF16":
                continue
            array = f.get_tensor(name)
            assert list(array.shape) == tensors[name]["shape"], name
            assert array.reshape(-1).tolist() == tensors[name]["values"], name
    print(json.dumps({"metadata": metadata, "tensors": tensors}))


def write(path):
    tensors = {
        "w": np.array([[-1.0, -0.5, 0.0], [0.5, 1.0, 1.5]], dtype=np.float32),
        "h": np.array([1.0, -2.0, 65504.0], dtype=np.float16),
        "d": np.array([[1.5], [-4.0]], dtype=np.float64),
        "i": np.array([-(2**31), 7], dtype=np.int32),
        "l": np.array(-(2**40), dtype=np.int64),  # 0-d
        "u": np.array([0, 255], dtype=np.uint8),
        "b": np.array([True, False, True]),
        "e": np.zeros((0, 3), dtype=np.float32),
    }
    save_file(tensors, path, metadata={"source": "python"})


if __name__ == "__main__":
    {"read": read, "write": write}[sys.argv[1]](sys.argv[2])
