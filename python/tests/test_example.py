"""examples/example.py (the README's example) and examples/example.cpp (the same program in C++)
reach the same accuracy with the same seed, on real Fashion-MNIST data; examples/resnet.py builds
the resnet20 preset's network from Python layers and learns; examples/custom_loop.py trains with a
loop of its own and learns."""

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


def test_resnet_example_is_the_resnet20_preset_and_learns():
    import importlib.util
    import aether as ae
    spec = importlib.util.spec_from_file_location("resnet_example", ROOT / "examples" / "resnet.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)  # defines resnet20(); main() runs only as a script
    built = ae.Model()
    for layer in example.resnet20(1, 10):
        built.add(layer)
    built.configure(loss=ae.SoftmaxCategoricalCrossEntropy(), optimizer=ae.SGD())
    built.finalize((28, 28, 1))
    preset = ae.Model.preset("resnet20", (28, 28, 1))
    shapes = lambda m: [(n, tuple(t.shape)) for n, t in m.named_parameters()]
    assert shapes(built) == shapes(preset)
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "resnet.py"), "--dataset", "fashion-mnist",
                          "--epochs", "1", "--limit", "3000"], capture_output=True, text=True, check=True).stdout
    assert f"parameters: {sum(t.numel() for _, t in preset.named_parameters())}\n" in out
    assert float(accuracy(out)) > 0.4  # 10 classes: chance is 0.1 (one epoch of 3000 images: about 0.6)


def test_custom_loop_example_learns():
    out = subprocess.run([sys.executable, str(ROOT / "examples" / "custom_loop.py"), "--limit", "3000", "--epochs",
                          "2"], capture_output=True, text=True, check=True).stdout
    losses = [float(v) for v in re.findall(r"epoch \d+: loss ([0-9.]+)", out)]
    assert len(losses) == 2 and losses[1] < losses[0], out
    assert float(accuracy(out)) > 0.35  # 10 classes: chance is 0.1 (measured 0.54; the whole set, 2 epochs: 0.82)
