"""The installed package: type stubs, and a test for every public name."""

import ast
import inspect
import pathlib
import shutil
import subprocess
import sys

import pytest

import aether as ae

HERE = pathlib.Path(__file__).parent
PKG = pathlib.Path(ae.__file__).parent
STUBS = PKG / "_aether"  # a stub package: __init__.pyi, functional.pyi


def test_type_stubs_are_installed():
    assert (PKG / "py.typed").exists()
    stub = (STUBS / "__init__.pyi").read_text()
    for name in ("class Tensor", "class Module", "class Linear", "def manual_seed", "def backward"):
        assert name in stub
    assert "def relu" in (STUBS / "functional.pyi").read_text()


def test_type_stubs_declare_every_tensor_attribute():
    """Methods the package adds to Tensor in Python (sort, at, float, mT...) are in the stub too, which
    is all a type checker reads: without them `x.sort()` and `x[0]` were type errors."""
    tree = ast.parse((STUBS / "__init__.pyi").read_text())
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "Tensor")
    declared = {n.name for n in cls.body if isinstance(n, ast.FunctionDef)}
    declared |= {n.target.id for n in cls.body if isinstance(n, ast.AnnAssign)}
    public = {n for n in dir(ae.Tensor) if not n.startswith("_") or n in vars(ae.Tensor) and n.endswith("__")}
    public -= {"__dict__", "__doc__", "__module__", "__new__", "__init__", "__weakref__"}
    assert sorted(public - declared) == []
    for name in ("sort", "topk", "at", "float", "mT", "__getitem__", "__add__", "view", "dtype"):
        assert name in declared


USER_CODE = """
import numpy as np
import aether as ae

x = ae.tensor(np.arange(6, dtype=np.float32).reshape(2, 3))
values, indices = x.topk(2)
y = (x * 2 + 1).sum(axis=0, keepdims=True)
z = x.at[0].set(1.0).float().mT.clip(0, 1)
n: int = x.nbytes
ok: bool = x.dtype == "float32"
reveal_type(x[0, 1:])
reveal_type(x.sort(axis=0))
reveal_type(x == 1)
reveal_type(ae.functional.relu(x))
reveal_type(x.view(3, 2).cumsum(0))
reveal_type(divmod(x, 2))
"""


def test_type_checker_accepts_user_code(tmp_path):
    """mypy over code using the Python-added methods, and over the stubs themselves: no errors, and
    the results typed as Tensors (not Any)."""
    pytest.importorskip("mypy")
    shutil.copytree(PKG, tmp_path / "aether", ignore=shutil.ignore_patterns("*.so", "__pycache__"))
    (tmp_path / "user.py").write_text(USER_CODE)
    run = subprocess.run([sys.executable, "-m", "mypy", "--follow-imports=silent", "--no-incremental",
                          "--cache-dir=/dev/null", "user.py", "aether/_aether/__init__.pyi",
                          "aether/_aether/functional.pyi"], cwd=tmp_path, capture_output=True, text=True,
                         env={"MYPYPATH": str(tmp_path), "PATH": "/usr/bin:/bin"})
    out = run.stdout + run.stderr
    assert "error" not in out, out
    revealed = [line.split("Revealed type is ")[1] for line in out.splitlines() if "Revealed type" in line]
    tensor = '"aether._aether.Tensor"'
    assert revealed == [tensor] * 5 + ['"tuple[aether._aether.Tensor, aether._aether.Tensor]"'], out


def test_every_public_name_is_tested():
    """Each name in aether.__all__ and each public method of Model and Tensor appears in a test."""
    source = "".join(p.read_text() for p in HERE.glob("test_*.py") if p.name != "test_package.py")
    source += (HERE / "conftest.py").read_text()
    missing = [n for n in ae.__all__ if n not in source]
    for cls in (ae.Model,):
        missing += [f"{cls.__name__}.{n}" for n, _ in inspect.getmembers(cls)
                    if not n.startswith("_") and n not in source]
    assert not missing, f"public API without a test: {missing}"
