"""Completes nanobind's type stub of aether._aether with what the aether package adds in Python.

nanobind's stubgen sees the C++ extension alone. Importing `aether` then adds methods to Tensor in
Python (sort, topk, at, float, mT...) and replaces some C++ ones with wrappers that take more
(NumPy arrays and ints as operands, NumPy's reduction arguments). A type checker reads only the
stub, so without this step it reported `x.sort()` or `x[0]` as errors. This script imports the
package built next to the extension, and writes the stub again with class Tensor's entries for
every attribute set in Python: signatures and docstrings taken from the Python functions, every
default written `...`. Run by python/CMakeLists.txt; tested by python/tests/test_package.py.

    python complete_stub.py --module _aether.so --package python/aether --out build/stubs
"""

from __future__ import annotations

import argparse
import ast
import builtins
import importlib
import inspect
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Set

TYPING_NAMES = {"Any", "Callable", "Dict", "Iterable", "Iterator", "List", "Optional", "Sequence", "Tuple", "Union"}


class _Text:
    """An annotation or default that inspect prints as the given text."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return self.text


class Renderer:
    """Stub text for Python attributes, and the imports their annotations need."""

    def __init__(self) -> None:
        self.imports: Set[str] = set()

    def annotation(self, ann: Any, scope: Dict[str, Any]) -> str:
        if isinstance(ann, str):
            text = ann
        elif inspect.isclass(ann):
            text = ann.__name__
        else:
            text = str(ann).replace("typing.", "")
        for name in re.findall(r"(?<![\w.'\"])([A-Za-z_]\w*)", text):
            self._need(name, scope)
        return text

    def _need(self, name: str, scope: Dict[str, Any]) -> None:
        if name in ("Tensor", "None") or hasattr(builtins, name):
            return
        if name in TYPING_NAMES:
            self.imports.add(f"from typing import {name}")
            return
        value = scope.get(name)
        if inspect.ismodule(value):
            self.imports.add(f"import {value.__name__} as {name}" if value.__name__ != name else f"import {name}")
        elif value is not None and getattr(value, "__module__", None):
            self.imports.add(f"from {value.__module__} import {name}")
        else:
            raise SystemExit(f"complete_stub.py: cannot resolve the annotation name {name!r}")

    def signature(self, fn: Any) -> str:
        sig = inspect.signature(fn)
        scope = getattr(fn, "__globals__", {})
        params = []
        for p in sig.parameters.values():
            p = p.replace(annotation=p.empty if p.annotation is p.empty else _Text(self.annotation(p.annotation, scope)),
                          default=p.empty if p.default is p.empty else _Text("..."))
            params.append(p)
        ret = sig.return_annotation
        ret = sig.empty if ret is sig.empty else _Text(self.annotation(ret, scope))
        return str(sig.replace(parameters=params, return_annotation=ret))

    @staticmethod
    def docstring(obj: Any, indent: str) -> List[str]:
        doc = inspect.getdoc(obj) if obj.__doc__ else None
        if not doc:
            return []
        lines = doc.replace('"""', "'''").splitlines()
        if len(lines) == 1:
            return [f'{indent}"""{lines[0]}"""']
        return [f'{indent}"""'] + [f"{indent}{line}" if line else "" for line in lines] + [f'{indent}"""']

    def member(self, name: str, value: Any) -> List[str]:
        """The stub lines of one class attribute set in Python (4 spaces in)."""
        ind = "    "
        if isinstance(value, property):
            fget = value.fget
            if inspect.isclass(fget):  # property(SomeClass): the attribute is an instance of it
                self._need(fget.__name__, {fget.__name__: fget})
                head = f"def {name}(self) -> {fget.__name__}:"
            else:
                head = f"def {name}{self.signature(fget)}:"
            doc = self.docstring(value, ind * 2)
            return [f"{ind}@property", f"{ind}{head}" + ("" if doc else " ...")] + doc
        if inspect.isfunction(value):
            doc = self.docstring(value, ind * 2)
            # == and != give tensors, as NumPy's and PyTorch's (whose stubs say the same)
            ignore = "  # type: ignore[override]" if name in ("__eq__", "__ne__") else ""
            return [f"{ind}def {name}{self.signature(value)}:" + ("" if doc else " ...") + ignore] + doc
        if isinstance(value, (bool, int, float, str)):
            return [f"{ind}{name}: {type(value).__name__}"]
        raise SystemExit(f"complete_stub.py: Tensor.{name} is a {type(value).__name__}: add a rule for it")


def python_attributes(tensor: type) -> Dict[str, Any]:
    """Tensor's public attributes (and dunder methods) that Python set, by name, in class order."""
    out = {}
    for name, value in vars(tensor).items():
        if name.startswith("_") and not (name.startswith("__") and name.endswith("__")):
            continue
        if name in ("__module__", "__doc__", "__new__", "__init__", "__dict__", "__weakref__"):
            continue
        fget = value.fget if isinstance(value, property) else None
        if inspect.isfunction(value) or isinstance(value, (bool, int, float, str)) or (
                fget is not None and (inspect.isfunction(fget) or inspect.isclass(fget))):
            out[name] = value
        elif getattr(value, "__name__", name) != name:  # a C++ method under a second name (view = reshape)
            out[name] = value
    return out


def class_spans(tree: ast.Module, cls: str) -> Dict[str, List[range]]:
    """Line ranges (0-based, decorators included) of each member of class `cls` in the stub."""
    node = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls)
    spans: Dict[str, List[range]] = {}
    for item in node.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([item.lineno] + [d.lineno for d in item.decorator_list])
            spans.setdefault(item.name, []).append(range(first - 1, item.end_lineno))
        elif isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name):
            spans.setdefault(item.target.id, []).append(range(item.lineno - 1, item.end_lineno))
    first = min([node.lineno] + [d.lineno for d in node.decorator_list])
    spans["<class>"] = [range(first - 1, node.end_lineno)]
    return spans


def qualify_builtins(lines: List[str], names: Set[str]) -> List[str]:
    """Class members named like builtin types (Tensor.int, .float, .bool) hide those types from the
    class's own annotations, so annotations inside the class say builtins.int."""
    if not names:
        return lines
    word = re.compile(rf"(?<![\w.'\"])({'|'.join(sorted(names))})\b(?!\()")
    out = []
    for line in lines:
        m = re.match(r"(\s+def \w+)(.*)", line) or re.match(r"(\s+\w+)(: .*)", line)
        out.append(m.group(1) + word.sub(r"builtins.\1", m.group(2)) if m else line)
    return out


def complete(stub: str, tensor: type) -> str:
    """nanobind's stub of aether._aether with class Tensor's Python attributes in it."""
    lines, tree = stub.splitlines(), ast.parse(stub)
    spans = class_spans(tree, "Tensor")
    attributes = python_attributes(tensor)
    render = Renderer()
    added: List[str] = []
    drop: Set[int] = set()
    for name, value in attributes.items():
        for span in spans.get(name, []):
            drop.update(span)
        if inspect.isfunction(value) or isinstance(value, (property, bool, int, float, str)):
            added += [""] + render.member(name, value)
        else:  # an alias of a C++ method: its stub entries under the new name
            original = spans.get(value.__name__)
            if not original:
                raise SystemExit(f"complete_stub.py: Tensor.{name} aliases {value.__name__}, which the stub lacks")
            for span in original:
                block = [lines[i] for i in span]
                added += [""] + [re.sub(rf"\bdef {value.__name__}\(", f"def {name}(", line) for line in block]
    begin, end = spans["<class>"][0].start, spans["<class>"][0].stop
    members = set(spans) | set(attributes)
    shadowed = {n for n in ("int", "float", "bool", "str", "bytes", "tuple", "list") if n in members}
    cls = qualify_builtins([line for i, line in enumerate(lines[begin:end], begin) if i not in drop] + added, shadowed)
    imports = sorted(render.imports | ({"import builtins"} if shadowed else set()))
    imported = {a.asname or a.name for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))
                for a in n.names}
    imports = [i for i in imports if i.split()[-1] not in imported]
    return "\n".join(lines[:begin] + imports + [""] * bool(imports) + cls + lines[end:]) + "\n"


def nanobind_stubs(module: str, out: str) -> None:
    """nanobind's stubs of the extension alone, named aether._aether as installed (a stub package:
    _aether/__init__.pyi and _aether/functional.pyi), in `out`."""
    with tempfile.TemporaryDirectory() as tmp:
        os.makedirs(os.path.join(tmp, "aether"))
        open(os.path.join(tmp, "aether", "__init__.py"), "w").close()
        shutil.copy(module, os.path.join(tmp, "aether"))
        subprocess.run([sys.executable, "-m", "nanobind.stubgen", "-q", "-r", "-i", tmp, "-m", "aether._aether",
                        "-O", out], check=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--module", required=True, help="the built extension (_aether*.so)")
    ap.add_argument("--package", required=True, help="the package's sources (python/aether)")
    ap.add_argument("--out", required=True, help="the folder to write _aether/__init__.pyi and the others into")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        stubs = os.path.join(tmp, "stubs")
        nanobind_stubs(args.module, stubs)
        pkg = os.path.join(tmp, "aether")
        shutil.copytree(args.package, pkg, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.pyi"))
        shutil.copy(args.module, pkg)
        sys.path.insert(0, tmp)
        aether = importlib.import_module("aether")
        init = os.path.join(stubs, "_aether", "__init__.pyi")
        with open(init, encoding="utf-8") as f:
            text = complete(f.read(), aether.Tensor)
        ast.parse(text)  # the result must be valid Python
        with open(init, "w", encoding="utf-8") as f:
            f.write(text)
        dest = os.path.join(args.out, "_aether")
        shutil.rmtree(dest, ignore_errors=True)
        shutil.copytree(os.path.join(stubs, "_aether"), dest)


if __name__ == "__main__":
    main()
