"""How tensors print from Python: NumPy's text for their values, then dtype, device and grad."""

import numpy as np

import aether as ae


def test_repr_prints_the_values_as_numpy_does():
    # Was one flat line, "Tensor(shape=(2, 2), dtype=float32, device=cpu, requires_grad) [1, 2, 3, 4]",
    # and a 0-d tensor printed as "[3.5]", booleans as 1 / 0, and over 64 elements no values at all.
    t = ae.tensor([[1.0, 2.5], [3.0, 4.0]], requires_grad=True)
    assert repr(t) == "Tensor([[1. , 2.5],\n        [3. , 4. ]], dtype=float32, requires_grad=True)"
    assert str(t) == repr(t) and f"{t}" == repr(t)
    assert repr(ae.tensor(3.5)) == "Tensor(3.5, dtype=float32)"
    assert repr(ae.tensor([True, False])) == "Tensor([ True, False], dtype=bool)"
    assert repr(ae.tensor([7, 8])) == "Tensor([7, 8], dtype=int64)"
    assert repr(ae.tensor([1.5, 2.25]).astype("bfloat16")) == "Tensor([1.5 , 2.25], dtype=bfloat16)"
    assert repr(ae.zeros((0, 3))) == "Tensor([], shape=(0, 3), dtype=float32)"
    # Over np.get_printoptions()["threshold"] elements, NumPy's summary and the shape it hides.
    big = ae.tensor(np.arange(2000).reshape(1000, 2))
    assert repr(big) == ("Tensor([[   0,    1],\n        [   2,    3],\n        [   4,    5],\n        ...,\n"
                         "        [1994, 1995],\n        [1996, 1997],\n        [1998, 1999]], shape=(1000, 2), "
                         "dtype=int64)")
    with np.printoptions(precision=2):
        assert repr(ae.tensor([1 / 3])) == "Tensor([0.33], dtype=float32)"


def test_a_large_tensor_prints_as_numpy_prints_the_whole_array():
    # The text is NumPy's for the whole array, under any print options. Axes of 2 * edgeitems
    # entries are not summarised, those of 2 * edgeitems + 1 are; magnitudes vary, so the columns'
    # widths come from the shown entries only, as NumPy's do.
    rng = np.random.default_rng(0)
    for shape in [(1001,), (7, 7, 30), (1000, 2), (2, 3, 200), (6, 6, 6, 6), (5, 0, 3000)]:
        a = (rng.standard_normal(shape) * 10.0 ** rng.integers(-3, 4, size=shape)).astype(np.float32)
        for options in [{}, {"edgeitems": 1}, {"edgeitems": 2, "threshold": 10}, {"threshold": 5000}]:
            with np.printoptions(**options):
                expected = np.array2string(a, separator=", ", prefix="Tensor(")
                text = repr(ae.tensor(a))
            assert text.startswith(f"Tensor({expected}, "), (shape, options)
            summarised = a.size > options.get("threshold", 1000)
            assert ("shape=" in text) == (summarised or a.size == 0), (shape, options)
