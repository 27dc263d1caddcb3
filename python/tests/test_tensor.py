"""aether.Tensor from Python: NumPy round trips, zero-copy exchange, ops against NumPy, autograd."""

import numpy as np
import pytest

import aether as ae

DTYPES = ["float32", "float64", "float16", "int32", "int64", "uint8", "bool"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_numpy_round_trip_every_dtype(dtype):
    a = (np.arange(24).reshape(2, 3, 4) % 7).astype(dtype)
    t = ae.tensor(a)
    assert t.shape == (2, 3, 4) and t.dtype == dtype and t.device == "cpu"
    b = np.asarray(t)
    assert b.dtype == a.dtype and np.array_equal(a, b)
    assert np.array_equal(t.numpy(), a)


def test_bfloat16_comes_out_as_float32():
    t = ae.tensor(np.array([1.0, 2.5, -3.0], np.float32)).astype("bfloat16")
    assert t.dtype == "bfloat16"
    b = np.asarray(t)
    assert b.dtype == np.float32 and b.tolist() == [1.0, 2.5, -3.0]


def test_zero_copy_in_and_out():
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    t = ae.tensor(a)
    out = np.asarray(t)
    assert np.shares_memory(out, a)  # NumPy -> Tensor -> NumPy, one buffer
    assert not out.flags.writeable
    a[0, 0] = 100.0  # the caller's later writes show in values computed afterwards
    assert (t + 0).numpy()[0, 0] == 100.0
    c = ae.tensor(a, copy=True)
    assert not np.shares_memory(np.asarray(c), a)


def test_result_of_a_computation_is_viewed_not_copied():
    t = (ae.tensor(np.ones((4, 5), np.float32)) * 3).realize()
    v1, v2 = np.asarray(t), np.asarray(t)
    assert np.shares_memory(v1, v2)
    assert v1.sum() == 60


def test_views_keep_the_tensor_alive():
    a = np.asarray(ae.tensor(np.arange(1000, dtype=np.float64)) * 2)  # the Tensor is gone at once
    assert a[999] == 1998.0


def test_non_contiguous_input_is_copied_correctly():
    a = np.arange(20, dtype=np.float32).reshape(4, 5)[:, ::2]
    assert np.array_equal(ae.tensor(a).numpy(), a)
    t = ae.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)).T
    assert np.array_equal(np.asarray(t), np.arange(6).reshape(2, 3).T)


def test_lists_and_scalars():
    assert ae.tensor([1.5, 2.0]).dtype == "float32"
    assert ae.tensor([1, 2]).dtype == "int64"
    assert ae.tensor([[1, 2], [3, 4]]).shape == (2, 2)
    assert ae.tensor(np.array(3.0, np.float32)).item() == 3.0
    assert ae.tensor([7]).item() == 7 and isinstance(ae.tensor([7]).item(), int)
    assert ae.tensor([1.0, 2.0]).tolist() == [1.0, 2.0]
    assert len(ae.zeros([5, 2])) == 5
    # Empty arrays (NumPy may give them any strides) were refused as "not C-contiguous".
    assert ae.tensor([]).shape == (0,) and ae.tensor([]).dtype == "float32"
    assert ae.tensor(np.zeros((3, 0, 2), np.int32)).shape == (3, 0, 2)
    assert np.asarray(ae.tensor(np.zeros((0, 4), np.float32)) + 1).shape == (0, 4)


@pytest.mark.parametrize("bad", [np.zeros(3, np.int16), np.zeros(3, np.complex64), np.array(["a"]),
                                 np.zeros(2, dtype=object)])
def test_unsupported_dtypes_raise_type_error(bad):
    with pytest.raises(TypeError, match="dtype|cannot make"):
        ae.tensor(bad)


def test_buffer_protocol():
    t = ae.tensor(np.arange(6, dtype=np.float32).reshape(2, 3)) + 1
    m = memoryview(t)
    assert m.format == "f" and m.shape == (2, 3) and m.readonly and m.itemsize == 4
    assert m.tolist() == [[1, 2, 3], [4, 5, 6]]
    # and in: anything with the buffer protocol
    assert ae.tensor(memoryview(bytearray(b"\x01\x02\x03"))).tolist() == [1, 2, 3]
    assert ae.tensor(bytes([4, 5])).dtype == "uint8"


def test_dlpack_both_ways():
    a = np.arange(8, dtype=np.float32)
    t = ae.from_dlpack(a)
    assert np.shares_memory(np.asarray(t), a)
    t2 = ae.tensor(np.arange(8, dtype=np.int64)) * 2
    b = np.from_dlpack(t2)
    assert b.tolist() == [0, 2, 4, 6, 8, 10, 12, 14]
    assert t2.__dlpack_device__() == (1, 0)
    assert np.shares_memory(np.from_dlpack(t2), np.asarray(t2))
    with pytest.raises(TypeError, match="expected an object with __dlpack__.*got int"):
        ae.from_dlpack(5)  # was a RuntimeError "std::bad_cast"


def test_ops_match_numpy():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((3, 4)).astype(np.float32) + 3
    w = rng.standard_normal((4, 5)).astype(np.float32)
    A, B, W = ae.tensor(a), ae.tensor(b), ae.tensor(w)
    close = lambda t, ref: np.testing.assert_allclose(np.asarray(t), ref, rtol=1e-5, atol=1e-5)
    close(A + B, a + b); close(A - B, a - b); close(A * B, a * b); close(A / B, a / b)
    close(A + 2, a + 2); close(2 - A, 2 - a); close(3 * A, 3 * a); close(1 / B, 1 / b); close(-A, -a)
    close(A @ W, a @ w); close(ae.matmul(A, W), a @ w); close(A ** 2, a ** 2)
    close(A.exp(), np.exp(a)); close(B.log(), np.log(b)); close(B.sqrt(), np.sqrt(b)); close(abs(A), np.abs(a))
    close(A.relu(), np.maximum(a, 0)); close(A.tanh(), np.tanh(a)); close(A.sigmoid(), 1 / (1 + np.exp(-a)))
    close(A.sum(), a.sum()); close(A.sum(axis=1), a.sum(1)); close(A.mean(axis=0, keepdims=True), a.mean(0, keepdims=True))
    close(A.max(axis=1), a.max(1)); close(A.min(), a.min()); close(A.var(axis=1), a.var(1))
    close(A.reshape(4, 3), a.reshape(4, 3)); close(A.reshape([2, 6]), a.reshape(2, 6))
    close(A.transpose(0, 1), a.T); close(A.permute(1, 0), a.T); close(A.flatten(), a.ravel())
    close(A[1], a[1]); close(A[:, 1:3], a[:, 1:3]); close(A[..., ::2], a[..., ::2]); close(A[-1, -2], a[-1, -2])
    close(A.unsqueeze(0).squeeze(0), a); close(A.clamp(-0.5, 0.5), np.clip(a, -0.5, 0.5))
    assert np.array_equal(np.asarray(A > 0), a > 0)
    assert np.array_equal(np.asarray(A.argmax(1)), a.argmax(1))
    close(ae.where(A > 0, A, B), np.where(a > 0, a, b))
    close(ae.cat([A, B], 0), np.concatenate([a, b])); close(ae.stack([A, B], 1), np.stack([a, b], 1))
    close(ae.functional.softmax(A), np.exp(a) / np.exp(a).sum(1, keepdims=True))


def test_python_truth_number_and_equality_protocols_follow_numpy():
    """bool()/float()/int() take one-element tensors and == compares elementwise, as in NumPy.
    Before: bool(tensor(0.0)) was True (any tensor of length >= 1), float(t) failed parsing
    the repr, int(t) parsed the raw bytes, and t == 1 was False (identity) while t < 1 was
    elementwise."""
    assert bool(ae.tensor(0.0)) is False and bool(ae.tensor([2.0])) is True
    assert bool(ae.tensor([[0]], dtype="int32")) is False and bool(ae.tensor(True)) is True
    assert float(ae.tensor(2.5)) == 2.5 and int(ae.tensor(-2.7)) == -2 and int(ae.tensor(7, dtype="int64")) == 7
    big = 2 ** 60 + 1  # not a double: int() and item() of an int64 tensor are exact
    assert int(ae.tensor(np.array([big]))) == big and ae.tensor(np.array([big])).item() == big
    assert ae.tensor(np.array([True])).item() is True
    t = ae.tensor([[1.0, 2.0, 3.0]])
    for convert in (bool, float, int):
        with pytest.raises(ValueError, match=rf"{convert.__name__}\(\): a tensor of shape \(1, 3\) has 3 "
                                             "elements, so its value is ambiguous"):
            convert(t)
    with pytest.raises(ValueError, match="not finite"):
        int(ae.tensor(float("nan")))
    a = np.array([[1.0, 2.0, 3.0]], np.float32)
    assert np.array_equal(np.asarray(t == 2), a == 2) and np.array_equal(np.asarray(t != 2), a != 2)
    assert np.array_equal(np.asarray(t == ae.tensor([1.0, 0.0, 3.0])), a == [1, 0, 3])
    assert (t == 2).dtype == "bool" and np.array_equal(np.asarray(t.eq(3.0)), a == 3)
    # An integer tensor compares with a float scalar as float32: 2.5 equals no integer.
    assert not np.asarray(ae.tensor([2, 3], dtype="int32") == 2.5).any()
    assert (t == None) is False and (t != "x") is True  # noqa: E711 - other types: identity
    assert len({t, t, ae.tensor(1.0)}) == 2  # hashable by identity, like torch.Tensor


def test_scalars_and_0d_arrays_make_0d_tensors_as_in_numpy():
    """aether.tensor of a Python or NumPy scalar, or of a 0-d array, has shape (), as np.asarray and
    torch.tensor give. Before, np.ascontiguousarray made them (1,), so ae.tensor(2.0) * x and
    ae.tensor(2.0).sum() differed from NumPy's shapes. A 0-d tensor is not iterable (NumPy's
    TypeError; before, an empty iteration) and has no len()."""
    for value, dtype in ((3.0, "float32"), (np.float32(3), "float32"), (np.array(3.0), "float64"),
                         (np.float64(3), "float64"), (np.int64(3), "int64"), (True, "bool")):
        t = ae.tensor(value)
        assert t.shape == () and t.ndim == 0 and t.dtype == dtype, (value, t.shape, t.dtype)
        assert np.asarray(t).shape == () and t.item() == value
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    s = ae.tensor(np.float32(2.0))
    assert (s * ae.tensor(x)).shape == (2, 3) and np.array_equal(np.asarray(s * ae.tensor(x)), 2 * x)
    assert ae.stack([s, s]).shape == (2,) and s.reshape(1).shape == (1,) and s[None].shape == (1,)
    # Python ints and bools meet integer and bool tensors as 0-d tensors of their dtype: shapes stay.
    i = ae.tensor(np.array(3, np.int32))
    assert (i + 1).shape == () and (i + 1).dtype == "int32" and (ae.tensor(True) & True).shape == ()
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(s)
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(s)
    assert [r.tolist() for r in ae.tensor(x)] == x.tolist()  # iteration gives the rows
    w = ae.tensor(2.0, requires_grad=True)
    (w * ae.tensor(x)).sum().backward()
    assert w.grad.shape == () and float(w.grad) == x.sum()


def test_numpy_arrays_as_operands_give_tensors_that_keep_their_gradient():
    """t * a and a * t with an ndarray a are Tensors recorded for autograd. Before, NumPy's operators
    took over (in both orders): the result was an ndarray and the gradient was lost."""
    rng = np.random.default_rng(3)
    x0, a, m = (rng.standard_normal(s).astype(np.float32) for s in ((2, 3), (2, 3), (3, 4)))
    x = ae.tensor(x0, requires_grad=True)
    close = lambda t, ref: np.testing.assert_allclose(np.asarray(t), ref, rtol=1e-6, atol=1e-6)
    for got, ref in [(x + a, x0 + a), (a + x, a + x0), (x - a, x0 - a), (a - x, a - x0), (x * a, x0 * a),
                     (a * x, a * x0), (x / (a + 5), x0 / (a + 5)), ((a + 5) / x, (a + 5) / x0), (x @ m, x0 @ m),
                     (a.T @ x, a.T @ x0), (np.float32(2) * x, 2 * x0), (np.float64(2) - x, 2 - x0)]:
        assert isinstance(got, ae.Tensor) and got.requires_grad
        close(got, ref)
    for got, ref in [(a < x, a < x0), (x <= a, x0 <= a), (a > x, a > x0), (a >= x, a >= x0), (a == x, a == x0),
                     (x != a, x0 != a)]:
        assert isinstance(got, ae.Tensor) and got.dtype == "bool"
        assert np.array_equal(np.asarray(got), ref)
    ((a * x).sum() + (x @ m).sum()).backward()
    close(x.grad, a + m.sum(1))
    # Powers: tensor exponents and scalar or array bases, with gradients for base and exponent.
    e = ae.tensor([[2.0, 0.5, 3.0], [1.0, 2.0, -1.0]], requires_grad=True)
    xp, e0 = np.abs(x0) + 0.5, np.asarray(e)
    b = ae.tensor(xp, requires_grad=True)
    for got, ref in [(b ** e, xp ** e0), (2 ** e, 2.0 ** e0), (xp ** e, xp ** e0), (b ** e0, xp ** e0)]:
        assert isinstance(got, ae.Tensor) and got.requires_grad
        close(got, ref)
    (b ** e).sum().backward()
    close(b.grad, e0 * xp ** (e0 - 1)); close(e.grad, xp ** e0 * np.log(xp))
    # The array is copied: a later write to it does not change a lazy result.
    b = np.ones(3, np.float32)
    y = x.detach() + b
    b[:] = 100
    close(y, x0 + 1)
    # An array keeps its dtype: float32 with float64 is float64, as in NumPy and PyTorch.
    assert (x + np.ones(3)).dtype == "float64"
    with pytest.raises(TypeError):
        x + "a"


def test_numpy_reductions_on_tensors_are_tensors():
    """np.sum(t), np.mean, np.var, np.max, np.min, np.argmax call the Tensor's methods with NumPy's
    keywords (axis, dtype, out): before, each failed with nanobind's signature list."""
    a = np.array([[1.0, 5.0, 3.0], [4.0, 2.0, 6.0]], np.float32)
    t = ae.tensor(a)
    close = lambda r, ref: np.testing.assert_allclose(np.asarray(r), ref, rtol=1e-6)
    for f in (np.sum, np.mean, np.max, np.min, np.var, np.argmax):
        assert isinstance(f(t), ae.Tensor)
        close(f(t), f(a)); close(f(t, axis=1), f(a, axis=1)); close(f(t, axis=0, keepdims=True), f(a, axis=0, keepdims=True))
    close(np.var(t, axis=1, ddof=1), np.var(a, axis=1, ddof=1))
    assert np.sum(t, dtype=np.float64).dtype == "float64" and t.sum(0, True).shape == (1, 3)
    with pytest.raises(TypeError, match="out= is not supported"):
        np.sum(t, out=np.zeros(()))
    with pytest.raises(TypeError, match="takes no dtype"):
        t.max(dtype="float64")


def test_view_arguments_as_separate_ints_or_one_sequence():
    a = np.arange(6, dtype=np.float32).reshape(1, 6)
    t = ae.tensor(a)
    for x, y in [(t.expand(3, 6), t.expand([3, 6])), (t.reshape(2, 3), t.reshape((2, 3))),
                 (t.flip(1), t.flip([1])), (t.flip(0, 1), t.flip((0, 1))), (t.permute(1, 0), t.permute([1, 0]))]:
        assert x.shape == y.shape and np.array_equal(np.asarray(x), np.asarray(y))
    assert np.array_equal(np.asarray(t.flip(1)), a[:, ::-1])


def test_functional_sizes_are_an_int_or_a_pair_as_in_the_layers():
    F = ae.functional
    x = ae.randn(2, 6, 6, 3)
    w = ae.randn(4, 3, 3, 3)
    for a, b in [(F.max_pool2d(x, 2), F.max_pool2d(x, (2, 2), (2, 2))), (F.max_pool2d(x, np.int64(2)), F.max_pool2d(x, 2)),
                 (F.avg_pool2d(x, 3, 1), F.avg_pool2d(x, (3, 3), stride=(1, 1))),
                 (F.conv2d(x, w, stride=2), F.conv2d(x, w, stride=(2, 2)))]:
        assert a.shape == b.shape and np.array_equal(np.asarray(a), np.asarray(b))
    assert F.max_pool2d(x, 2).shape == (2, 3, 3, 3) and F.avg_pool2d(x, 3, 1).shape == (2, 4, 4, 3)
    with pytest.raises(TypeError, match=r"max_pool2d: kernel must be an int or an \(h, w\) pair of ints, got 'a'"):
        F.max_pool2d(x, "a")  # an int kernel was nanobind's signature dump
    with pytest.raises(TypeError, match="conv2d: stride must be an int or an"):
        F.conv2d(x, w, stride=(1, 2, 3))
    with pytest.raises(ValueError, match="leaky_relu: slope must be finite, got nan"):
        F.leaky_relu(x, float("nan"))  # gave NaN for every negative input


def test_a_shape_too_big_to_count_is_an_error_not_an_empty_tensor():
    with pytest.raises(ValueError, match=r"\(1099511627776, 1073741824\) has more elements than a tensor can hold"):
        ae.ones((1 << 40, 1 << 30))  # counted 0 elements, and summed to 0.0
    with pytest.raises(ValueError, match="2\\^60"):
        ae.ones((1 << 40, 1)) + ae.ones((1, 1 << 30))


def test_constructors_and_seed():
    assert np.asarray(ae.zeros([2, 3])).sum() == 0 and np.asarray(ae.ones([2, 3])).sum() == 6
    assert np.asarray(ae.full([2], 7.0)).tolist() == [7.0, 7.0]
    assert np.asarray(ae.arange(4)).tolist() == [0, 1, 2, 3]
    ae.manual_seed(3); r1 = np.asarray(ae.randn(5)); u1 = np.asarray(ae.rand(2, 2))
    ae.manual_seed(3); r2 = np.asarray(ae.randn(5)); u2 = np.asarray(ae.rand(2, 2))
    assert np.array_equal(r1, r2) and np.array_equal(u1, u2) and ((u1 >= 0) & (u1 < 1)).all()
    with pytest.raises(TypeError, match="randn: expected a float dtype, got int32"):
        ae.randn(2, dtype="int32")  # gave zeros


def test_numpy_dtypes_and_int_shapes_are_accepted_where_names_are():
    """np.float64, np.dtype("int32"), bool... wherever a dtype name goes (each was nanobind's signature
    list), and a single int as a shape (ae.zeros(3): "'int' object is not iterable")."""
    t = ae.tensor([1.0, 2.0])
    for d, name in [(np.float64, "float64"), (np.dtype("int32"), "int32"), (bool, "bool"), ("float16", "float16")]:
        assert ae.tensor([1, 2], dtype=d).dtype == name and t.astype(d).dtype == name and t.to(d).dtype == name
        assert ae.zeros(3, dtype=d).dtype == name and ae.ones((2,), d).dtype == name
        assert ae.full(2, 1, dtype=d).dtype == name and ae.arange(3, dtype=d).dtype == name
    assert ae.rand(2, dtype=np.float64).dtype == "float64" and ae.randn((2, 3), dtype=np.float64).shape == (2, 3)
    assert ae.zeros(3).shape == (3,) and ae.ones(np.int64(2)).shape == (2,) and ae.full(2, 5.0).tolist() == [5, 5]
    assert ae.ToTensor(np.float64)(np.ones(2, np.float32)).dtype == "float64"
    assert ae.ToTensor("bfloat16")(np.ones(2)).dtype == "bfloat16"  # NumPy has no bfloat16: was its TypeError
    # A tensor's dtype is its name and equals NumPy's dtype of that name (t.dtype == np.float32 was False).
    assert t.dtype == "float32" and t.dtype == np.float32 and t.dtype == np.dtype("float32") and t.dtype != np.int32
    assert t.astype(bool).dtype == np.bool_ and np.dtype(t.dtype) == np.float32 and t.dtype != None  # noqa: E711
    assert {t.dtype: 1}["float32"] == 1 and str(t.dtype) == "float32"
    with pytest.raises(TypeError, match="unknown dtype name 'complex64'"):
        t.astype(np.complex64)
    with pytest.raises(TypeError, match="a dtype is a name such as 'float32' or a NumPy dtype"):
        t.astype(object())
    # PyTorch's ones(2, 3) puts a size where NumPy's dtype goes: named as that, not as a bad dtype.
    for make in (ae.zeros, ae.ones):
        with pytest.raises(TypeError, match=rf"{make.__name__}: the shape is one argument, a tuple such as "
                                            rf"{make.__name__}\(\(2, 3\)\) \(NumPy's form\); got the int 3"):
            make(2, 3)
    with pytest.raises(TypeError, match="full: the shape is one argument"):
        ae.full((2, 3), 1.0, 3)


def test_index_errors():
    t = ae.zeros([2, 3])
    with pytest.raises(IndexError):
        t[2]
    with pytest.raises(IndexError):
        t[0, 0, 0]
    with pytest.raises(IndexError, match="single ellipsis"):
        t[..., ...]
    with pytest.raises(IndexError, match="got float"):
        t[0.5]
    with pytest.raises(IndexError, match="None .* together with index arrays is not supported"):
        t[[0, 1], None]
    with pytest.raises(TypeError, match=r"do not support item assignment: build the new tensor instead \(t = t.at\[index\].set"):
        t[0] = 1.0


def test_indexing_matches_numpy_with_negative_steps_and_new_axes():
    """Random basic indices (integers, slices of any step, ..., None) against NumPy, values and shapes.
    Negative steps and None were IndexErrors."""
    import random
    a = np.arange(5 * 6 * 7, dtype=np.float32).reshape(5, 6, 7)
    t = ae.tensor(a)
    rng = random.Random(0)

    def entry():
        c = rng.random()
        if c < 0.15:
            return None
        if c < 0.35:
            return rng.randint(-5, 4)
        end = lambda: rng.choice([None, rng.randint(-9, 9)])
        return slice(end(), end(), rng.choice([None, 1, 2, 3, -1, -2, -3]))

    compared = 0
    for _ in range(400):
        index = tuple(entry() for _ in range(rng.randint(1, 4)))
        if rng.random() < 0.3:
            index = index[:1] + (Ellipsis,) + index[1:]
        try:
            want = a[index]
        except IndexError:
            with pytest.raises(IndexError):
                t[index]
            continue
        got = t[index]
        assert tuple(got.shape) == want.shape and np.array_equal(np.asarray(got), want), index
        compared += 1
    assert compared > 300
    # A reversed, strided view is recorded for autograd: its gradient lands on the elements it read.
    x = ae.tensor(a, requires_grad=True)
    (x[::-2, None, 1, ::-3] * 2).sum().backward()
    g = np.zeros_like(a)
    g[::-2, 1, ::-3] = 2
    assert np.array_equal(np.asarray(x.grad), g)


def test_where_maximum_minimum_and_clamp_take_numbers_and_arrays():
    """ae.where(t > 0, t, 0.0), t.maximum(0.0), t.clamp(0, None) as in NumPy and PyTorch: each was
    nanobind's signature list."""
    a = np.array([1.0, -2.0, 3.0], np.float32)
    t = ae.tensor(a, requires_grad=True)
    same = lambda got, want: np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
    same(ae.where(t > 0, t, 0.0), np.where(a > 0, a, 0)); same(ae.where(t > 0, 0.0, t), np.where(a > 0, 0, a))
    same(ae.where(a > 0, 1.0, 0.0), [1, 0, 1]); same(ae.where([True, False, True], t, a * 2), [1, -4, 3])
    same(ae.where(np.array([False, True, False]), t, -t), -a * np.array([1, -1, 1]))
    assert ae.where(t.astype("float16") > 0, t.astype("float16"), 0.0).dtype == "float16"  # a number takes t's dtype
    same(t.maximum(0.0), np.maximum(a, 0)); same(t.minimum(0), np.minimum(a, 0))
    same(t.maximum(np.zeros(3, np.float32)), np.maximum(a, 0))
    same(t.clamp(0, None), np.clip(a, 0, None)); same(t.clamp(None, 2), np.clip(a, None, 2)); same(t.clamp(-1, 2), np.clip(a, -1, 2))
    ae.where(t > 0, t, 0.0).sum().backward()
    same(t.grad, [1, 0, 1])
    with pytest.raises(TypeError, match="give lo, hi or both"):
        t.clamp()


def test_python_ints_keep_integer_tensors_integer():
    """i + 1 with an int32 tensor is int32, as in NumPy and PyTorch (it was float32: the engine's scalar
    is a double), exact past 2^24 (i == 16777216 compared in float32), wrapping as the dtype does;
    a value the dtype cannot hold gives int64. Floats and true division still give float32."""
    i = ae.tensor(np.array([1, 2, 3], np.int32))
    for got, want in [(i + 1, [2, 3, 4]), (1 - i, [0, -1, -2]), (i * 2, [2, 4, 6]), (2 * i, [2, 4, 6]),
                      (i.maximum(2), [2, 2, 3]), (i - 2 ** 40, [1 - 2 ** 40, 2 - 2 ** 40, 3 - 2 ** 40])]:
        assert got.dtype == ("int64" if abs(np.asarray(got)).max() > 2 ** 31 else "int32") and got.tolist() == want
    assert (i + 1.5).dtype == "float32" and (i / 2).dtype == "float32" and (i ** 2).dtype == "int32"
    big = ae.tensor(np.array([16777217], np.int64))
    assert (big == 16777216).tolist() == [False] and (big + 1).tolist() == [16777218]
    assert (ae.tensor(np.array([2 ** 62], np.int64)) + (2 ** 62 - 1)).tolist() == [2 ** 63 - 1]
    u = ae.tensor(np.array([0, 2], np.uint8))
    assert (u - 1).dtype == "uint8" and (u - 1).tolist() == [255, 1] and (u + 300).tolist() == [300, 302]
    assert (ae.tensor(np.array([True, False])) + 1).tolist() == [2, 1]
    assert (ae.tensor(np.array([True, False])) + 0).dtype == "int64"  # not bool's or: 0 is an int
    assert ae.where(i > 1, i, 0).dtype == "int32" and ae.where(i > 1, 0, i).tolist() == [1, 0, 0]


def test_masks_any_all_std_and_joining_arrays():
    """~, &, |, ^ on bool tensors; any, all, std (also through np.any, np.all, np.std); cat and stack
    of tensors and arrays. Each was a TypeError or an AttributeError."""
    a = np.array([[1.0, -2.0, 3.0], [0.0, 5.0, -1.0]], np.float32)
    t = ae.tensor(a)
    m, n = t > 0, t < 4
    for got, want in [(~m, ~(a > 0)), (m & n, (a > 0) & (a < 4)), (m | n, (a > 0) | (a < 4)), (m ^ n, (a > 0) ^ (a < 4)),
                      (m & np.array([True, False, True]), (a > 0) & [True, False, True]), (True ^ m, ~(a > 0)),
                      (t.logical_and(t), (a != 0) & (a != 0)), (t.logical_not(), a == 0)]:
        assert got.dtype == "bool" and np.array_equal(np.asarray(got), want)
    for got, want in [(t.any(), a.any()), (t.all(axis=1), a.all(1)), (np.any(t, axis=0), a.any(0)),
                      (np.all(t), a.all()), (t.any(0, keepdims=True), a.any(0, keepdims=True))]:
        assert isinstance(got, ae.Tensor) and np.array_equal(np.asarray(got), want)
    for got, want in [(t.std(), a.std()), (np.std(t, axis=0, ddof=1), a.std(0, ddof=1)), (t.std(1, True), a.std(1, keepdims=True))]:
        np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5)
    assert ae.cat([t, np.zeros((1, 3), np.float32)]).shape == (3, 3) and ae.stack([t, a], axis=1).shape == (2, 2, 3)
    with pytest.raises(TypeError, match="~ takes bool tensors, got int64 .*logical_not"):
        ~ae.tensor([1, 2])
    with pytest.raises(TypeError, match="& takes bool tensors, got float32"):
        t & m


def test_floor_division_remainder_and_rounding_match_numpy():
    """//, %, divmod, fmod, floor, ceil, trunc, round: NumPy's values exactly (Python's rules for // and %,
    ties to even), for floats with zero and negative divisors and for integers (x // 0 is 0, as NumPy's).
    Before, // and % were TypeErrors and there was no rounding at all."""
    rng = np.random.default_rng(7)
    eq = np.testing.assert_array_equal  # NaN equals NaN, -0.0 equals 0.0
    for dtype in ("float32", "float64"):
        a = (rng.standard_normal(300) * 20).astype(dtype)
        b = rng.choice([-3.5, -1, -0.1, 0, 0.1, 0.7, 2, 5.25], 300).astype(dtype)
        a[:8] = [1, -1, 7, -7, 5.5, np.inf, -2.5, 0]
        b[:8] = [0.1, 0.1, -2, 2, -2, 3, 0.5, 0]
        t, u = ae.tensor(a), ae.tensor(b)
        with np.errstate(all="ignore"):
            eq(np.asarray(t // u), a // b); eq(np.asarray(t % u), a % b); eq(np.asarray(t.fmod(u)), np.fmod(a, b))
            q, r = divmod(t, u)
            eq(np.asarray(q), a // b); eq(np.asarray(r), a % b)
            eq(np.asarray(t // 0.3), a // dtype_scalar(0.3, dtype)); eq(np.asarray(2.5 % u), dtype_scalar(2.5, dtype) % b)
        assert (t // u).dtype == dtype and (1 // t).dtype == dtype
        x = np.concatenate([a, [0.5, 1.5, 2.5, -0.5, -1.5, 0.49999997, np.nan, -np.inf]]).astype(dtype)
        tx = ae.tensor(x)
        for got, ref in [(tx.floor(), np.floor(x)), (tx.ceil(), np.ceil(x)), (tx.trunc(), np.trunc(x)),
                         (tx.round(), np.round(x)), (round(tx), np.round(x)), (np.round(tx, 2), np.round(x, 2)),
                         (round(tx, 1), np.round(x, 1)), (tx.round(-1), np.round(x, -1))]:
            assert isinstance(got, ae.Tensor) and got.dtype == dtype
            if dtype == "float64":
                eq(np.asarray(got), ref)
            else:  # decimals scale by a power of ten in float32 (NumPy's does so in float32 too)
                np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-6)
    for dtype in ("int32", "int64", "uint8"):
        info = np.iinfo(dtype)
        a = rng.integers(max(info.min, -1000), 1000, 200).astype(dtype)
        b = rng.integers(0 if dtype == "uint8" else -9, 9, 200).astype(dtype)
        t, u = ae.tensor(a), ae.tensor(b)
        with np.errstate(all="ignore"):
            for got, ref in [(t // u, a // b), (t % u, a % b), (t.fmod(u), np.fmod(a, b)), (t // 3, a // 3),
                             (t % 3, a % 3), (100 // u, np.asarray(100, dtype) // b)]:
                assert got.dtype == dtype
                eq(np.asarray(got), ref)
        assert t.round().dtype == dtype and np.array_equal(np.asarray(t.floor()), a)
    eq(np.asarray(np.round(ae.tensor([15, 25, -35], dtype="int32"), -1)), [20, 20, -40])
    with pytest.raises(TypeError, match="bool"):
        ae.tensor([True]) // ae.tensor([True])
    # Gradients: % passes dy to the dividend and -floor(a / b) dy to the divisor; // and rounding are flat.
    x = ae.tensor([5.5, -2.25, 3.0], requires_grad=True)
    d = ae.tensor([2.0, 1.5, -4.0], requires_grad=True)
    ((x % d).sum() + (x // d).sum() + x.round().sum()).backward()
    eq(np.asarray(x.grad), [1, 1, 1]); eq(np.asarray(d.grad), -np.floor(np.array([5.5, -2.25, 3.0]) / [2, 1.5, -4]))


def dtype_scalar(v, dtype):
    return np.asarray(v, dtype)[()]


def test_numpy_ufuncs_on_tensors_are_tensors_with_gradients():
    """np.exp(t), np.add(a, t), np.maximum(t, 0)... go to the Tensor's operations (NumPy's
    __array_ufunc__): the result is a Tensor recorded for autograd. Before, NumPy computed an ndarray
    and the gradient was silently lost. A ufunc aether lacks still computes in NumPy, unless the
    gradient would be lost: then it is an error."""
    a = np.array([[0.5, -1.0, 2.0], [3.0, -0.25, 1.5]], np.float32)
    x = ae.tensor(a, requires_grad=True)
    close = lambda t, ref: np.testing.assert_allclose(np.asarray(t), ref, rtol=1e-6, atol=1e-7)
    cases = [(np.exp(x), np.exp(a)), (np.sin(x), np.sin(a)), (np.abs(x), np.abs(a)), (np.negative(x), -a),
             (np.square(x), a * a), (np.tanh(x), np.tanh(a)), (np.add(a, x), a + a), (np.multiply(x, 2), a * 2),
             (np.subtract(1.0, x), 1 - a), (np.true_divide(x, a + 3), a / (a + 3)), (np.maximum(x, 0), np.maximum(a, 0)),
             (np.minimum(0.5, x), np.minimum(0.5, a)), (np.power(x, 2), a ** 2), (np.matmul(a.T, x), a.T @ a),
             (np.fmod(x, 0.75), np.fmod(a, 0.75)), (np.fmod(5.0, x), np.fmod(5.0, a)), (np.remainder(x, 0.75), a % 0.75),
             (np.floor_divide(x, 0.75), a // 0.75)]
    for got, ref in cases:
        assert isinstance(got, ae.Tensor) and got.requires_grad
        close(got, ref)
    for got, ref in [(np.greater(a, x), a > a), (np.less_equal(x, 1), a <= 1), (np.floor(x), np.floor(a)),
                     (np.rint(x), np.rint(a)), (np.logical_not(x > 0), ~(a > 0))]:
        assert isinstance(got, ae.Tensor)
        close(got, ref)
    (np.exp(x) * np.add(a, x)).sum().backward()
    close(x.grad, np.exp(a) * (2 * a) + np.exp(a))
    # Integers keep their dtype; a NumPy scalar is a number (as in the operators), an array keeps its dtype.
    i = ae.tensor([7, -7], dtype="int32")
    assert np.floor_divide(i, 2).dtype == "int32" and np.add(np.int64(1), i).dtype == "int32"
    assert np.add(np.ones(2, np.int64), i).dtype == "int64" and np.multiply(np.float64(2), x).dtype == "float32"
    # A ufunc aether has no operation for: NumPy's ndarray, unless a gradient would be lost.
    y = ae.tensor(a)
    out = np.arctan2(y, y)
    assert isinstance(out, np.ndarray) and np.allclose(out, np.arctan2(a, a))
    assert isinstance(np.add.reduce(y), np.ndarray)
    with pytest.raises(TypeError, match="np.arctan2 has no aether operation"):
        np.arctan2(x, y)
    # (Not np.add.reduce(x) here: NumPy 2.4 leaks the operand of a reduce whose override raises.)
    with pytest.raises(TypeError, match="out= is not supported"):
        np.exp(y, out=np.zeros_like(a))


def test_numpy_functions_on_tensors_are_tensors_with_gradients():
    """np.concatenate, np.stack, np.where, np.clip, np.reshape, np.transpose, np.squeeze,
    np.expand_dims, np.take, np.round of tensors are Tensors recorded for autograd (NEP 18's
    __array_function__); before, each read the tensors as arrays and returned an ndarray without
    gradient. Others still compute in NumPy, unless a gradient would be lost."""
    a = np.array([[0.5, -1.25, 2.0], [3.0, -0.5, 1.5]], np.float32)
    x = ae.tensor(a, requires_grad=True)
    y = ae.tensor(a[::-1].copy())
    eq = lambda t, ref: (np.testing.assert_array_equal(np.asarray(t), ref), isinstance(t, ae.Tensor))
    for got, ref in [(np.concatenate([x, y]), np.concatenate([a, a[::-1]])), (np.concatenate([x, a], axis=1),
                     np.concatenate([a, a], axis=1)), (np.concatenate([x, y], axis=None), np.concatenate([a, a[::-1]], None)),
                     (np.stack([x, y], axis=1), np.stack([a, a[::-1]], axis=1)), (np.where(a > 0, x, 0.0), np.where(a > 0, a, 0)),
                     (np.where(x > 0, x, y), np.where(a > 0, a, a[::-1])), (np.clip(x, -1, 1), np.clip(a, -1, 1)),
                     (np.clip(x, None, 1), np.clip(a, None, 1)), (np.reshape(x, (3, 2)), a.reshape(3, 2)),
                     (np.reshape(x, -1), a.reshape(-1)), (np.transpose(x), a.T), (np.transpose(x[None], (2, 0, 1)),
                     a[None].transpose(2, 0, 1)), (np.squeeze(x[None]), a), (np.expand_dims(x, (0, 2)), a[None, :, None]),
                     (np.take(x, [2, 0], axis=1), a[:, [2, 0]]), (np.round(x * 3.3, 1), np.round(a * np.float32(3.3), 1))]:
        assert eq(got, ref)[1] and got.requires_grad
    eq(x.clip(-1, 1), np.clip(a, -1, 1))
    assert np.shape(x) == (2, 3) and np.ndim(x) == 2 and np.size(x) == 6 and np.size(x, 1) == 3
    np.testing.assert_allclose(np.asarray(np.sum(x, axis=1)), a.sum(1))  # the reductions, as before
    (np.concatenate([x, x]).sum() + np.clip(x, 0, 1).sum() + np.take(x, [0, 0], axis=0).sum()).backward()
    np.testing.assert_array_equal(np.asarray(x.grad), 2 + ((a > 0) & (a < 1)) + np.array([[2], [0]]))
    # Others: NumPy on the values, or an error when the gradient would be lost.
    assert np.allclose(y, a[::-1]) and isinstance(np.unique(y), np.ndarray)
    np.testing.assert_array_equal(np.where(y > 0)[1], np.where(a[::-1] > 0)[1])
    with pytest.raises(TypeError, match="np.unique has no aether operation"):
        np.unique(x)
    with pytest.raises(TypeError, match="out= is not supported"):
        np.concatenate([y, y], out=np.zeros((4, 3), np.float32))


def test_more_numpy_and_torch_methods_match_numpy():
    """argmin, sign, clone, ravel, view, swapaxes, moveaxis, broadcast_to, mT, tile, roll, chunk, dot,
    outer, norm, cpu, nbytes, itemsize, and zeros_like, ones_like, full_like, eye, linspace: NumPy's
    values (each was an AttributeError), through NumPy's functions too, with gradients."""
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    a[0, 1, 2] = a[0, 1, 0] = a.min() - 1  # a tie for the minimum: the first wins
    t = ae.tensor(a)
    m = a[0]
    eq = lambda got, ref: np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-6, atol=1e-6)
    for got, ref in [(t.argmin(), a.argmin()), (t.argmin(2), a.argmin(2)), (np.argmin(t, axis=1), a.argmin(1)),
                     (t.sign(), np.sign(a)), (np.sign(t), np.sign(a)), (t.clone(), a), (t.ravel(), a.ravel()),
                     (np.ravel(t), a.ravel()), (t.view(4, 6), a.reshape(4, 6)), (t.swapaxes(0, 2), a.swapaxes(0, 2)),
                     (np.moveaxis(t, 0, -1), np.moveaxis(a, 0, -1)), (t.moveaxis([0, 1], [2, 0]), np.moveaxis(a, [0, 1], [2, 0])),
                     (np.broadcast_to(ae.tensor(m[0]), (3, 4)), np.broadcast_to(m[0], (3, 4))), (t.mT, np.swapaxes(a, -1, -2)),
                     (t.tile((2, 1, 3)), np.tile(a, (2, 1, 3))), (np.tile(ae.tensor(m), 2), np.tile(m, 2)),
                     (t.roll(1, 2), np.roll(a, 1, 2)), (np.roll(t, -5), np.roll(a, -5)), (np.roll(t, (1, 2), (0, 1)),
                     np.roll(a, (1, 2), (0, 1))), (np.dot(ae.tensor(m), ae.tensor(m.T)), m @ m.T),
                     (np.dot(m[0], ae.tensor(m[1])), m[0] @ m[1]), (np.outer(ae.tensor(m[0]), m[1]), np.outer(m[0], m[1])),
                     (t.norm(), np.linalg.norm(a)), (np.linalg.norm(t, axis=2), np.linalg.norm(a, axis=2)),
                     (t.norm(1, axis=0), np.linalg.norm(a, 1, axis=0)), (t.norm(np.inf, axis=1), np.linalg.norm(a, np.inf, axis=1)),
                     (t.norm(3, axis=2, keepdims=True), np.linalg.norm(a, 3, axis=2, keepdims=True)),
                     (np.zeros_like(t), np.zeros_like(a)), (ae.ones_like(t, dtype="int32"), np.ones_like(a, np.int32)),
                     (np.full_like(t, 2.5), np.full_like(a, 2.5)), (ae.eye(3, 4, k=-1), np.eye(3, 4, k=-1)),
                     (ae.linspace(-1, 2, 7), np.linspace(-1, 2, 7)), (ae.linspace(0, 1, 4, endpoint=False), np.linspace(0, 1, 4, endpoint=False))]:
        assert isinstance(got, ae.Tensor) and got.shape == np.shape(ref), (got.shape, np.shape(ref))
        eq(got, ref)
    assert np.asarray(np.zeros_like(t)).dtype == np.float32 and ae.ones_like(t, dtype="int32").dtype == "int32"
    assert [c.shape for c in t.chunk(3, axis=2)] == [(2, 3, 2), (2, 3, 2)] and len(t.chunk(2, 1)) == 2
    eq(ae.cat(t.chunk(2, 1), 1), a)
    assert t.clone() is not t and t.cpu().device == "cpu" and t.nbytes == a.nbytes and t.itemsize == 4
    # Gradients through the views and copies.
    x = ae.tensor(m, requires_grad=True)
    (x.tile((2, 1)).sum() + x.roll(1, 1)[0, 0] + x.norm() + x.clone().mT.sum() + (x.sign() * x).sum()).backward()
    want = 2 + 1 + m / np.linalg.norm(m) + np.sign(m)
    want[0, 3] += 1  # roll(1) puts element (0, 3) at (0, 0)
    eq(x.grad, want)


def test_advanced_indexing_matches_numpy_and_keeps_gradients():
    """Integer arrays (lists, NumPy arrays, integer tensors) and bool masks as indices, alone or with
    slices, integers and each other: NumPy's values and shapes (its rules for where the broadcast
    dims go), and gradients that sum over repeated indices. Before, each was an IndexError."""
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5) - 20
    t = ae.tensor(a)
    i2 = np.array([[0, 2], [1, -1]])
    cases = [([2, 0, 2],), (np.array([-1, 0]),), (i2,), (slice(None), [3, 0, 3]), (slice(1, None), i2),
             (Ellipsis, [4, 0]), (0, [1, 2]), ([0, 2], [3, 1]), (i2, 0), (slice(None), [0, 2], [1, 4]),
             ([1, 0], slice(None), [4, 0]), (1, slice(None), [0, -1]), (a > 10,), (a[:, :, 0] > -10,),
             (slice(None), a[0, :, 0] > -18), ([True, False, True],),
             ([],), (ae.tensor(np.array([2, 1], np.int32)),), (ae.tensor(a > 0),), (np.array([0, 2])[:, None], [1, 3])]
    for idx in cases:
        got, ref = t[idx], a[tuple(np.asarray(i) if isinstance(i, ae.Tensor) else i for i in idx)]
        assert isinstance(got, ae.Tensor) and got.shape == ref.shape, (idx, got.shape, ref.shape)
        np.testing.assert_array_equal(np.asarray(got), ref)
    # take: np.take's axis and flattening, and NumPy's take on tensors.
    np.testing.assert_array_equal(np.asarray(t.take([1, 0], axis=2)), np.take(a, [1, 0], axis=2))
    np.testing.assert_array_equal(np.asarray(t.take(np.array([[59, 0]]))), np.take(a, [[59, 0]]))
    # Gradients: indexing twice picks a row twice; the sums of repeats come back.
    x = ae.tensor(a, requires_grad=True)
    (x[[0, 0, 2]].sum() + (x[x.detach() > 30] * 2).sum() + x[:, [1, 1], [4, 4]].sum()).backward()
    want = np.zeros_like(a)
    want[0] += 2; want[2] += 1; want[a > 30] += 2; want[:, 1, 4] += 2
    np.testing.assert_array_equal(np.asarray(x.grad), want)
    # Errors name what was wrong: NumPy's classes.
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        t[[0, 3], [1, 1]]
    with pytest.raises(IndexError, match="out of bounds for an axis of size 3"):
        np.asarray(t[[0, 3]])  # one index array: lazy, checked when computed
    with pytest.raises(IndexError, match="boolean index"):
        t[a[0] > 0]
    with pytest.raises(IndexError, match="could not be broadcast"):
        t[[0, 1], [0, 1, 2]]
    with pytest.raises(IndexError, match="integer or bool"):
        t[np.array([0.5])]
    with pytest.raises(TypeError, match="indices must be integers"):
        t.take([0.5])


def test_sorting_cumsum_topk_and_take_along_axis_match_numpy():
    """sort, argsort, cumsum, take_along_axis (and NumPy's functions of those names) give NumPy's
    values for every axis, axis None, ties and NaN (NumPy's stable order puts NaN last), with
    gradients; topk gives the k largest as PyTorch does. Before, np.sort(t) etc. left aether."""
    rng = np.random.default_rng(7)
    a = rng.integers(-3, 4, size=(3, 4, 5)).astype(np.float32)  # many ties
    a[1, 2, 3] = a[0, 0, 0] = np.nan
    t = ae.tensor(a)
    for axis in (0, 1, 2, -1, None):
        for got, ref in [(t.sort(axis), np.sort(a, axis)), (np.sort(t, axis), np.sort(a, axis)),
                         (t.argsort(axis), np.argsort(a, axis, kind="stable")),
                         (np.argsort(t, axis, kind="quicksort"), np.argsort(a, axis, kind="stable")),
                         (t.cumsum(axis), np.cumsum(a, axis)), (np.cumsum(t, axis), np.cumsum(a, axis))]:
            assert isinstance(got, ae.Tensor) and got.shape == ref.shape, (axis, got.shape, ref.shape)
            np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-6)
    i = np.argsort(a, 1, kind="stable")
    np.testing.assert_array_equal(np.asarray(np.take_along_axis(t, i, 1)), np.take_along_axis(a, i, 1))
    np.testing.assert_array_equal(np.asarray(t.take_along_axis(i[:, :2], 1)), np.take_along_axis(a, i[:, :2], 1))
    np.testing.assert_array_equal(np.asarray(t.take_along_axis(np.array([5, -1]), None)), a.ravel()[[5, -1]])
    # Descending: the reverse order with ties kept in place, NaN first; topk: the first k of it.
    d = np.asarray(t.argsort(2, descending=True))
    assert np.isnan(a[1, 2, d[1, 2, 0]]) and np.all(np.diff(np.nan_to_num(np.take_along_axis(a, d, 2), nan=9), axis=2) <= 0)
    v, k = ae.tensor(a[2]).topk(3, axis=1)
    np.testing.assert_array_equal(np.asarray(k), np.argsort(-a[2], 1, kind="stable")[:, :3])
    np.testing.assert_array_equal(np.asarray(v), -np.sort(-a[2], 1)[:, :3])
    # Integers: cumsum in int64 (NumPy's), sort in their own dtype.
    n = rng.integers(0, 200, size=(4, 6)).astype(np.uint8)
    assert np.cumsum(ae.tensor(n), 1).dtype == "int64" and ae.tensor(n).sort().dtype == "uint8"
    np.testing.assert_array_equal(np.asarray(np.cumsum(ae.tensor(n), 1)), np.cumsum(n, 1))
    np.testing.assert_array_equal(np.asarray(ae.tensor(n).sort(0)), np.sort(n, 0))
    assert ae.tensor(a).cumsum(dtype="float64").dtype == "float64"
    # Gradients: sorting sends each gradient back to its element; cumsum's is a sum from the end.
    b = rng.standard_normal((2, 5))
    x = ae.tensor(b, requires_grad=True)
    (x.sort(1) * ae.tensor(np.arange(5.0))).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), np.argsort(np.argsort(b, 1), 1).astype(float))
    y = ae.tensor(b, requires_grad=True)
    (np.cumsum(y, 1).sum() + y.topk(1)[0].sum()).backward()
    want = np.tile(np.arange(5.0, 0, -1), (2, 1))
    want[np.arange(2), b.argmax(1)] += 1
    np.testing.assert_allclose(np.asarray(y.grad), want)
    # Bad input: NumPy's error classes.
    with pytest.raises(ValueError, match="k must be in"):
        t.topk(6)
    with pytest.raises(TypeError, match="order="):
        np.sort(t, order="x")
    with pytest.raises(IndexError, match="out of bounds"):
        np.asarray(t.take_along_axis(np.full((3, 1, 5), 4), 1))


def test_einsum_matches_numpy_with_gradients():
    """ae.einsum and np.einsum of tensors give np.einsum's values (explicit and implicit outputs,
    '...', diagonals, traces, three operands, integers) and gradients; errors are ValueErrors."""
    rng = np.random.default_rng(3)
    a, b, c = rng.standard_normal((2, 3)), rng.standard_normal((3, 4)), rng.standard_normal((4, 3, 3))
    cases = [("ij,jk->ik", a, b), ("ij,jk", a, b), ("ji", a), ("ij->", a), ("bii->bi", c), ("bii", c),
             ("...ij,...jk->...ik", c, c), ("bij,jk,ki->b", c, b[:, :2], a),
             ("i,j", a[0], b[0]), ("ij,ij->i", a, a)]
    for spec, *ops in cases:
        want = np.einsum(spec, *ops)
        for got in (ae.einsum(spec, *[ae.tensor(o) for o in ops]), np.einsum(spec, *[ae.tensor(o) for o in ops]),
                    ae.einsum(spec, *ops)):
            assert isinstance(got, ae.Tensor) and got.shape == want.shape, spec
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12, atol=1e-12, err_msg=spec)
    i = rng.integers(-5, 5, size=(3, 4))
    got = np.einsum("ij,kj->ik", ae.tensor(i), ae.tensor(i))
    assert got.dtype == "int64" and np.array_equal(np.asarray(got), np.einsum("ij,kj->ik", i, i))
    # Gradients: d/dA of sum(w * A @ B) is w @ B^T, d/dB is A^T @ w.
    x, y = ae.tensor(a, requires_grad=True), ae.tensor(b, requires_grad=True)
    w = rng.standard_normal((2, 4))
    (ae.einsum("ij,jk->ik", x, y) * ae.tensor(w)).sum().backward()
    np.testing.assert_allclose(np.asarray(x.grad), w @ b.T, rtol=1e-12)
    np.testing.assert_allclose(np.asarray(y.grad), a.T @ w, rtol=1e-12)
    with pytest.raises(ValueError, match="'j' has size 3 in operand 0 and 2 in operand 1"):
        ae.einsum("ij,jk->ik", a, a)
    with pytest.raises(ValueError, match="names 2 operands"):
        ae.einsum("ij,jk", a)
    with pytest.raises(TypeError, match="subscripts as a string"):
        ae.einsum(a, [0, 1])


def test_prod_and_cumprod_match_numpy_with_gradients_exact_at_zeros():
    """prod and cumprod (methods, np.prod, np.cumprod) give NumPy's values and dtypes for every axis;
    their gradients are the products of the other elements, also where an element is 0 (no division)."""
    rng = np.random.default_rng(5)
    a = rng.uniform(0.5, 1.5, size=(3, 4, 5))
    t = ae.tensor(a)
    for axis in (0, 1, 2, -1, None, (0, 2)):
        for got, want in [(t.prod(axis), np.prod(a, axis)), (np.prod(t, axis), np.prod(a, axis)),
                          (t.prod(axis, keepdims=True), np.prod(a, axis, keepdims=True))]:
            assert isinstance(got, ae.Tensor) and got.shape == want.shape, axis
            np.testing.assert_allclose(np.asarray(got), want, rtol=1e-12)
        if not isinstance(axis, tuple):
            np.testing.assert_allclose(np.asarray(np.cumprod(t, axis)), np.cumprod(a, axis), rtol=1e-12)
    i = rng.integers(-3, 4, size=(4, 6)).astype(np.int32)
    for got, want in [(ae.tensor(i).prod(1), np.prod(i, 1, dtype=np.int64)),
                      (ae.tensor(i).cumprod(0), np.cumprod(i, 0, dtype=np.int64))]:
        assert got.dtype == "int64" and np.array_equal(np.asarray(got), want)
    assert np.prod(ae.tensor(np.zeros((2, 0)))).item() == 1.0 and ae.tensor(np.ones((2, 0))).prod(1).shape == (2,)
    assert ae.tensor(np.array([2, 3], np.uint8)).prod(dtype="float32").dtype == "float32"
    # Gradients with zeros: d prod / d x_i is the product of the others (nonzero only at a lone zero).
    b = np.array([[2.0, 0.0, 3.0, 4.0], [0.0, 5.0, 0.0, 1.0], [1.5, -2.0, 0.5, 3.0]])
    x = ae.tensor(b, requires_grad=True)
    x.prod(1).sum().backward()
    want = np.array([[np.prod(np.delete(r, j)) for j in range(4)] for r in b])
    np.testing.assert_allclose(np.asarray(x.grad), want, rtol=1e-12)
    assert np.asarray(x.grad)[0, 1] == 24.0
    y = ae.tensor(b, requires_grad=True)
    w = rng.standard_normal(b.shape)
    (y.cumprod(1) * ae.tensor(w)).sum().backward()
    want = np.array([[sum(w[r, k] * np.prod(np.delete(b[r, :k + 1], j)) for k in range(j, 4)) for j in range(4)]
                     for r in range(3)])
    np.testing.assert_allclose(np.asarray(y.grad), want, rtol=1e-12)


def test_split_and_array_split_match_numpy_and_pytorch():
    """np.split / np.array_split of a tensor give NumPy's pieces (sections or indices, Python's slice
    rules), t.split PyTorch's (a piece size or sizes); all views recorded for autograd."""
    a = np.arange(30.0).reshape(3, 10)
    t = ae.tensor(a)
    for args in [(5, 1), ([3, 5], 1), ([3, 20], 1), ([5, 3], 1), ([-2], 1), (3, 0), ([], 1)]:
        for np_f in (np.split, np.array_split):
            got, want = np_f(t, *args), np_f(a, *args)
            assert all(isinstance(g, ae.Tensor) for g in got) and len(got) == len(want), args
            for g, w in zip(got, want):
                np.testing.assert_array_equal(np.asarray(g), w)
    assert [p.shape for p in np.array_split(t, 4, axis=1)] == [(3, 3), (3, 3), (3, 2), (3, 2)]
    with pytest.raises(ValueError, match="equal division"):
        np.split(t, 4, axis=1)
    assert [p.shape for p in t.split(4, 1)] == [(3, 4), (3, 4), (3, 2)]
    assert [p.shape for p in t.split([2, 8], axis=1)] == [(3, 2), (3, 8)]
    np.testing.assert_array_equal(np.asarray(ae.cat(t.split(3, 1), 1)), a)
    with pytest.raises(ValueError, match="do not add up to the 10 elements"):
        t.split([2, 3], 1)
    x = ae.tensor(a, requires_grad=True)
    lo, hi = x.split([4, 6], 1)
    (lo.sum() + 2 * hi.sum()).backward()
    np.testing.assert_array_equal(np.asarray(x.grad), np.repeat([[1.0] * 4 + [2.0] * 6], 3, 0))


def test_nan_tests_logsumexp_repeat_diff_triangles_and_torch_casts_match_numpy():
    """isnan/isinf/isfinite, log1p, expm1, exp2, log2, log10, erf, logsumexp, repeat, diff, triu,
    tril, diagonal, trace, amax/amin (NumPy's functions of those names too), and PyTorch's dim,
    requires_grad_ and casts by name: NumPy's values (each was an AttributeError or an ndarray),
    with gradients."""
    import math
    rng = np.random.default_rng(11)
    a = rng.standard_normal((3, 4, 5))
    t = ae.tensor(a)
    s = np.array([1.5, np.nan, np.inf, -np.inf, 0.0], np.float32)
    eq = lambda got, ref: np.testing.assert_allclose(np.asarray(got), ref, rtol=1e-6, atol=1e-12)
    p = np.abs(a) + 0.1
    for got, ref in [(ae.tensor(s).isnan(), np.isnan(s)), (np.isinf(ae.tensor(s)), np.isinf(s)),
                     (np.isfinite(ae.tensor(s)), np.isfinite(s)), (np.log1p(ae.tensor(p)), np.log1p(p)),
                     (t.expm1(), np.expm1(a)), (np.exp2(t), np.exp2(a)), (np.log2(ae.tensor(p)), np.log2(p)),
                     (ae.tensor(p).log10(), np.log10(p)), (t.erf(), np.vectorize(math.erf)(a)),
                     (t.logsumexp(1), np.log(np.exp(a).sum(1))), (t.logsumexp((0, 2), keepdims=True),
                     np.log(np.exp(a).sum((0, 2), keepdims=True))), (np.repeat(t, 2), np.repeat(a, 2)),
                     (t.repeat([2, 0, 1], axis=0), np.repeat(a, [2, 0, 1], 0)), (np.repeat(t, 3, -1), np.repeat(a, 3, -1)),
                     (t.diff(), np.diff(a)), (np.diff(t, 2, 1), np.diff(a, 2, 1)), (np.triu(t, 1), np.triu(a, 1)),
                     (t.tril(-1), np.tril(a, -1)), (np.diagonal(t, 1, 1, 2), np.diagonal(a, 1, 1, 2)),
                     (t.diagonal(-1), np.diagonal(a, -1)), (np.trace(t[0]), np.trace(a[0])), (t.trace(2, 1, 2), np.trace(a, 2, 1, 2)),
                     (np.amax(t, 1), np.amax(a, 1)), (t.amin(), a.min())]:
        assert isinstance(got, ae.Tensor) and got.shape == np.shape(ref), (got.shape, np.shape(ref))
        eq(got, ref)
    assert ae.tensor(np.arange(3)).isnan().dtype == "bool" and not np.asarray(ae.tensor(np.arange(3)).isinf()).any()
    assert t.dim() == 3 and t.float().dtype == "float32" and t.half().dtype == "float16" and t.long().dtype == "int64"
    assert t.int().dtype == "int32" and t.bool().dtype == "bool" and t.double().dtype == "float64"
    x = ae.tensor(a[0]).requires_grad_()
    assert x.requires_grad
    (x.logsumexp(1).sum() + x.repeat(2, 1).sum() + x.triu().sum() + x.trace() + x.diff().sum()).backward()
    sm = np.exp(a[0]) / np.exp(a[0]).sum(1, keepdims=True)
    d = np.zeros((4, 5)); d[:, 0] = -1; d[:, -1] = 1  # diff's sum telescopes to x[:, -1] - x[:, 0]
    eq(x.grad, sm + 2 + np.triu(np.ones((4, 5))) + np.eye(4, 5) + d)
    with pytest.raises(ValueError, match="repeats must be non-negative"):
        t.repeat(-1)
    with pytest.raises(ValueError, match="at least 2 dimensions"):
        ae.tensor([1.0]).triu()


def test_functional_updates_give_what_numpy_writes_with_gradients():
    """t.at[index].set(v) / .add(v) give what a[index] = v and np.add.at(a, index, v) leave in an array
    (basic and advanced indices, masks, repeats: the last set wins, adds add up), index_add and
    masked_fill PyTorch's values; on floats with gradients to t and to v; integers in NumPy."""
    rng = np.random.default_rng(13)
    a = rng.standard_normal((3, 4, 5))
    t = ae.tensor(a)
    rep = ([0, 0, 2], [1, 1, 3])
    cases = [(1,), (slice(None), 2), (Ellipsis, [4, 0]), rep, (a > 0.5,), (0, slice(1, 3), [2, 2]), ([2, -1],)]
    for idx in cases:
        v = rng.standard_normal(a[idx].shape)
        want = a.copy(); want[idx] = v
        np.testing.assert_array_equal(np.asarray(t.at[idx].set(v)), want)
        want = a.copy(); np.add.at(want, idx, v)
        np.testing.assert_allclose(np.asarray(t.at[idx].add(v)), want, rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(t.at[:, 0].set(7.0)), np.where(np.arange(4)[None, :, None] == 0, 7.0, a))
    np.testing.assert_array_equal(np.asarray(t.at[rep].get()), a[rep])
    i = np.arange(6).reshape(2, 3)
    want = i.copy(); want[0, [1, 1]] = [8, 9]
    got = ae.tensor(i).at[0, [1, 1]].set([8, 9])
    assert got.dtype == "int64" and np.array_equal(np.asarray(got), want)
    want = i.copy(); np.add.at(want, (slice(None), [0, 0]), 5)
    np.testing.assert_array_equal(np.asarray(ae.tensor(i).at[:, [0, 0]].add(5)), want)
    want = a.copy(); np.add.at(want, (slice(None), [3, 3, 0]), np.ones((3, 3, 5)))
    np.testing.assert_allclose(np.asarray(t.index_add(1, [3, -1, 0], np.ones((3, 3, 5)))), want, rtol=1e-12)
    np.testing.assert_array_equal(np.asarray(t.masked_fill(t > 0, 0.0)), np.where(a > 0, 0.0, a))
    # Gradients: a set position's goes to the value (its last occurrence), an added one to both.
    x, v = ae.tensor(a[0], requires_grad=True), ae.tensor(np.array([2.0, 3.0]), requires_grad=True)
    (x.at[[1, 1], [0, 0]].set(v).sum() * 2 + x.at[2].add(v.sum()).sum()).backward()
    want_x = np.full((4, 5), 3.0); want_x[1, 0] = 1.0
    np.testing.assert_array_equal(np.asarray(x.grad), want_x)
    np.testing.assert_array_equal(np.asarray(v.grad), [5.0, 7.0])  # set: [0, 2] (the last wins); add: 5 each
    with pytest.raises(IndexError, match="out of bounds"):
        t.at[3].set(0.0)
    with pytest.raises(ValueError, match="broadcast"):
        t.at[0].set(np.ones(3))


def test_transpose_property_reverses_every_axis_as_numpy():
    """t.T is NumPy's: every axis reversed, a 1-d tensor as it is (it swapped the last two axes, and a
    1-d tensor's T was a ValueError); mT swaps the last two."""
    a = np.arange(24.0).reshape(2, 3, 4)
    for x in (a, a[0], a[0, 0], np.float64(3.0)):
        np.testing.assert_array_equal(np.asarray(ae.tensor(x).T), np.asarray(x).T)
    np.testing.assert_array_equal(np.asarray(ae.tensor(a).mT), np.swapaxes(a, -1, -2))


def test_membership_and_format_follow_numpy_and_torch():
    t = ae.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert 3.0 in t and 5.0 not in t  # was "bool(): ... ambiguous" (Python iterated the rows)
    assert f"{t.sum():.2f}" == "10.00" and f"{t.mean():>6.1f}" == "   2.5"  # a TypeError before
    assert f"{t}" == str(t)
    with pytest.raises(TypeError, match=r"one element, got shape \(2, 2\)"):
        f"{t:.2f}"


def test_shape_errors_are_value_errors_with_aethers_message():
    with pytest.raises(ValueError, match=r"\(2, 3\).*\(4, 5\)|\(4, 5\).*\(2, 3\)"):
        (ae.zeros([2, 3]) + ae.zeros([4, 5])).realize()
    with pytest.raises(ValueError, match="matmul"):
        ae.zeros([2, 3]) @ ae.zeros([2, 3])
    with pytest.raises(ValueError):
        ae.zeros([2, 3]).reshape(7)


def test_the_error_class_follows_what_went_wrong_not_the_messages_words(tmp_path):
    """aether::Error carries a kind (value, type, runtime, index, not_found) that picks the Python class. Before, the
    message's words did: a shape error that printed a tensor ("dtype=float32") was a TypeError, a
    dtype error that did not say "dtype" a ValueError, and a corrupt data file a ValueError."""
    F = ae.functional
    a = ae.zeros([2, 3])
    with pytest.raises(ValueError, match=r"mse_loss: pred Tensor\(shape=\(2, 3\), dtype=float32"):
        F.mse_loss(a, ae.zeros([3, 2]))
    with pytest.raises(ValueError, match=r"linear: x Tensor\(shape=\(2, 3\), dtype=float32"):
        F.linear(a, ae.zeros([4, 5]))
    with pytest.raises(TypeError, match=r"expected a float tensor, got \(1, 4, 4, 1\) int32"):
        F.max_pool2d(ae.tensor(np.ones((1, 4, 4, 1), np.int32)), (2, 2))
    with pytest.raises(TypeError, match="bool tensors cannot be negated"):
        -ae.tensor(np.ones(2, bool))
    for name in [f"data_batch_{i}.bin" for i in range(1, 6)] + ["test_batch.bin"]:
        (tmp_path / name).write_bytes(b"x" * 100)
    with pytest.raises(RuntimeError, match="data_batch_1.bin: offset 0: expected 30730000 bytes"):
        ae.datasets.cifar10("train", data_dir=str(tmp_path))
    # A file or data set that is not there is aether.NotFoundError: a FileNotFoundError, as Python's
    # own open() raises (it was a RuntimeError only), and still a RuntimeError.
    assert issubclass(ae.NotFoundError, FileNotFoundError) and issubclass(ae.NotFoundError, RuntimeError)
    missing = str(tmp_path / "missing.aether")
    for load in (lambda: ae.Model.load(missing), lambda: ae.datasets.fashion_mnist(data_dir=str(tmp_path / "none")),
                 lambda: ae.datasets.image_folder(str(tmp_path / "none"))):
        with pytest.raises(FileNotFoundError) as caught:
            load()
        assert isinstance(caught.value, ae.NotFoundError) and isinstance(caught.value, RuntimeError)
    with pytest.raises(FileNotFoundError, match=r"missing.aether: cannot read: No such file or directory$"):
        ae.Model.load(missing)
    with pytest.raises(RuntimeError) as other:  # a file that is there but is no checkpoint: not this class
        ae.Model.load(str(tmp_path / "data_batch_1.bin"))
    assert not isinstance(other.value, FileNotFoundError)


def test_autograd_matches_finite_differences():
    rng = np.random.default_rng(1)
    x0 = rng.standard_normal((3, 4))
    w0 = rng.standard_normal((4, 2))

    def f(x, w):  # a small network written from tensor ops
        return ((x @ w).tanh() * (x.sum(axis=1, keepdims=True))).square().mean()

    x = ae.tensor(x0, requires_grad=True)
    w = ae.tensor(w0, requires_grad=True)
    f(x, w).backward()
    gx, gw = np.asarray(x.grad), np.asarray(w.grad)
    eps = 1e-6

    def num(arr, other, which):
        g = np.zeros_like(arr)
        for i in np.ndindex(arr.shape):
            p, m = arr.copy(), arr.copy()
            p[i] += eps; m[i] -= eps
            args_p = (ae.tensor(p), ae.tensor(other)) if which == 0 else (ae.tensor(other), ae.tensor(p))
            args_m = (ae.tensor(m), ae.tensor(other)) if which == 0 else (ae.tensor(other), ae.tensor(m))
            g[i] = (f(*args_p).item() - f(*args_m).item()) / (2 * eps)
        return g

    np.testing.assert_allclose(gx, num(x0, w0, 0), rtol=1e-5, atol=1e-7)
    np.testing.assert_allclose(gw, num(w0, x0, 1), rtol=1e-5, atol=1e-7)


def test_requires_grad_grad_and_no_grad():
    x = ae.tensor([1.0, 2.0, 3.0])
    assert not x.requires_grad and x.grad is None
    x.requires_grad = True
    y = (x * x).sum()
    assert y.requires_grad and ae.grad_enabled()
    y.backward()
    assert x.grad.tolist() == [2.0, 4.0, 6.0]
    x.zero_grad()
    with ae.no_grad():
        assert not ae.grad_enabled()
        z = (x * 3).sum()
    assert ae.grad_enabled() and not z.requires_grad
    d = x.detach()
    assert not d.requires_grad
    with pytest.raises(ValueError):
        (x * 2).backward()  # not a scalar and no grad given


def test_realize_repr_and_device_names():
    t = ae.tensor([1.0, 2.0]) * 2
    assert not t.is_realized
    ae.realize([t])
    assert t.is_realized and t.realize() is not None
    assert repr(t) == "Tensor([2., 4.], dtype=float32)"
    assert t.to("numpy").device == "cpu" and t.to("cpu").device == "cpu"
    assert t.to("float64").dtype == "float64"
    with pytest.raises((ValueError, RuntimeError)):
        t.to("tpu")
