"""examples/example.py (the README's example) and examples/example.cpp (the same program in C++)
reach the same accuracy with the same seed, on real Fashion-MNIST data."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
ARGS = ["--dataset", "fashion-mnist", "--epochs", "2", "--limit", "6000", "--seed", "42"]


def accuracy(out: str) -> str:
    m = re.search(r"test accuracy: ([0-9.]+)", out)
    assert m, out
    return m.group(1)


def test_python_example_matches_the_cpp_api():
    exe = os.environ.get("AETHER_EXAMPLE")
    if not exe:
        exe = str(ROOT / "build" / "test" / "examples" / "aether_example")
    if not os.path.exists(exe):
        pytest.fail(f"the C++ example is not built ({exe}); scripts/test.sh builds it (or set AETHER_EXAMPLE)")
    py = subprocess.run([sys.executable, str(ROOT / "examples" / "example.py"), *ARGS], capture_output=True,
                        text=True, check=True)
    cpp = subprocess.run([exe, *ARGS], capture_output=True, text=True, check=True)
    a_py, a_cpp = accuracy(py.stdout), accuracy(cpp.stdout)
    assert a_py == a_cpp
    assert float(a_py) > 0.2  # 10 classes: chance is 0.1
