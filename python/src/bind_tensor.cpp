// aether.Tensor: the lazy tensor with autograd, and its exchange with NumPy (and anything speaking
// the buffer protocol or DLPack) without copies where the memory allows.
//
// In:  a C-contiguous host array of a dtype aether has becomes a Tensor over the same memory
//      (Buffer's external constructor keeps the array alive); anything else is copied.
// Out: a realized host tensor is handed out as a read-only view of its buffer (NumPy array via
//      __array__, Py_buffer via the buffer protocol, a DLPack capsule via __dlpack__); a tensor
//      on a GPU or behind a masked view is copied first. bfloat16
//      has no NumPy type: it comes out as float32.
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "bind.h"

namespace aether::py {

std::shared_ptr<const void> keep_alive(nb::handle obj) {
  Py_INCREF(obj.ptr());
  return std::shared_ptr<const void>(obj.ptr(), [](const void* p) {
    if (nb::detail::cleanup_guard guard{}) Py_DECREF(static_cast<PyObject*>(const_cast<void*>(p)));
  });
}

DType dtype_from_dlpack(nb::dlpack::dtype t) {
  using C = nb::dlpack::dtype_code;
  const auto code = C(t.code);
  if (t.lanes == 1) {
    if (code == C::Float && t.bits == 32) return DType::float32;
    if (code == C::Float && t.bits == 64) return DType::float64;
    if (code == C::Float && t.bits == 16) return DType::float16;
    if (code == C::Bfloat && t.bits == 16) return DType::bfloat16;
    if (code == C::Int && t.bits == 32) return DType::int32;
    if (code == C::Int && t.bits == 64) return DType::int64;
    if (code == C::UInt && t.bits == 8) return DType::uint8;
    if (code == C::Bool && t.bits == 8) return DType::boolean;
  }
  static const char* names[] = {"int", "uint", "float", "opaque", "bfloat", "complex", "bool"};
  const std::string name = t.code < 7 ? names[t.code] : "code " + std::to_string(t.code);
  throw nb::type_error(("unsupported dtype " + name + std::to_string(t.bits) +
                        " (aether has float32, float64, float16, bfloat16, int32, int64, uint8 and bool)")
                           .c_str());
}

namespace {
using Array = nb::ndarray<nb::ro>;

nb::dlpack::dtype dlpack_of(DType d) {
  switch (d) {
    case DType::float32: return nb::dtype<float>();
    case DType::float64: return nb::dtype<double>();
    case DType::float16: return {uint8_t(nb::dlpack::dtype_code::Float), 16, 1};
    case DType::bfloat16: return {uint8_t(nb::dlpack::dtype_code::Bfloat), 16, 1};
    case DType::int32: return nb::dtype<int32_t>();
    case DType::int64: return nb::dtype<int64_t>();
    case DType::uint8: return nb::dtype<uint8_t>();
    case DType::boolean: return nb::dtype<bool>();
  }
  return nb::dtype<float>();
}

bool c_contiguous(const Array& a) {
  for (size_t i = 0; i < a.ndim(); ++i)
    if (a.shape(i) == 0) return true;  // no element to place (NumPy may give any strides)
  int64_t expect = 1;
  for (size_t i = a.ndim(); i-- > 0;) {
    if (a.shape(i) != 1 && a.stride(i) != expect) return false;
    expect *= int64_t(a.shape(i));
  }
  return true;
}

// What a host view of a realized tensor needs: the buffer (kept alive by whoever holds this),
// where the first element is, and the shape and strides in elements.
struct HostView {
  BufferPtr buffer;
  void* data = nullptr;
  std::vector<size_t> shape;
  std::vector<int64_t> strides;
  DType dtype = DType::float32;
};

// Realizes `t` (GIL released meanwhile) and describes its value in host memory; copies only when
// the value is on a GPU, masked or bfloat16 (NumPy has no bfloat16: float32 then).
HostView host_view(Tensor t) {
  {
    nb::gil_scoped_release release;
    if (t.device().type != DeviceType::cpu) t = t.to(Device::cpu());
    if (t.dtype() == DType::bfloat16) t = t.cast(DType::float32);
    t.realize();
    const Node& n = *t.node();
    if (n.view.mask) t = t.contiguous().realize();
  }
  const Node& n = *t.node();
  HostView v;
  v.buffer = n.buffer;
  v.dtype = t.dtype();
  v.data = static_cast<char*>(n.buffer->data()) + n.view.offset * dtype_size(t.dtype());
  for (size_t i = 0; i < n.view.shape.size(); ++i) {
    v.shape.push_back(size_t(n.view.shape[i]));
    v.strides.push_back(n.view.strides[i]);
  }
  return v;
}

template <typename Framework>
nb::ndarray<Framework, nb::ro> as_ndarray(const Tensor& t) {
  HostView v = host_view(t);
  auto* owner = new BufferPtr(v.buffer);
  nb::capsule cap(owner, [](void* p) noexcept { delete static_cast<BufferPtr*>(p); });
  return nb::ndarray<Framework, nb::ro>(v.data, v.shape.size(), v.shape.data(), cap, v.strides.data(),
                                        dlpack_of(v.dtype), nb::device::cpu::value, 0);
}

// ---- the buffer protocol ---------------------------------------------------------------------------
struct BufferExport {
  BufferPtr buffer;
  std::vector<Py_ssize_t> shape, strides;  // strides in bytes
};

const char* struct_format(DType d) {
  switch (d) {
    case DType::float32: return "f";
    case DType::float64: return "d";
    case DType::float16: return "e";
    case DType::int32: return "i";
    case DType::int64: return "q";
    case DType::uint8: return "B";
    case DType::boolean: return "?";
    case DType::bfloat16: return nullptr;
  }
  return nullptr;
}

int tensor_getbuffer(PyObject* self, Py_buffer* view, int flags) {
  try {
    if (flags & PyBUF_WRITABLE) {
      PyErr_SetString(PyExc_BufferError, "aether.Tensor: values are read-only (copy with numpy.array(t))");
      return -1;
    }
    const Tensor& t = *nb::inst_ptr<Tensor>(self);
    HostView v = host_view(t);
    const Py_ssize_t item = dtype_size(v.dtype);
    auto* ex = new BufferExport{v.buffer, {}, {}};
    Py_ssize_t len = item;
    for (size_t i = 0; i < v.shape.size(); ++i) {
      ex->shape.push_back(Py_ssize_t(v.shape[i]));
      ex->strides.push_back(Py_ssize_t(v.strides[i]) * item);
      len *= Py_ssize_t(v.shape[i]);
    }
    std::memset(view, 0, sizeof *view);
    view->buf = v.data;
    view->obj = Py_NewRef(self);
    view->len = len;
    view->itemsize = item;
    view->readonly = 1;
    view->ndim = int(v.shape.size());
    view->format = (flags & PyBUF_FORMAT) ? const_cast<char*>(struct_format(v.dtype)) : nullptr;
    view->shape = ex->shape.data();
    view->strides = ex->strides.data();
    view->internal = ex;
    return 0;
  } catch (const std::exception& e) {
    PyErr_SetString(PyExc_BufferError, e.what());
    return -1;
  }
}

void tensor_releasebuffer(PyObject*, Py_buffer* view) { delete static_cast<BufferExport*>(view->internal); }

PyType_Slot tensor_slots[] = {{Py_bf_getbuffer, (void*)tensor_getbuffer},
                              {Py_bf_releasebuffer, (void*)tensor_releasebuffer},
                              {0, nullptr}};

std::vector<int64_t> axes_of(const nb::object& axis) {
  if (axis.is_none()) return {};
  if (nb::isinstance<nb::int_>(axis)) return {nb::cast<int64_t>(axis)};
  return nb::cast<std::vector<int64_t>>(axis);
}

Device device_of(const std::string& s) {
  if (s == "numpy") return Device::cpu();
  if (s == "cupy") return Device::parse("cuda");
  return Device::parse(s);
}

// The no_grad() context: a NoGradGuard alive between __enter__ and __exit__.
struct NoGradContext {
  std::unique_ptr<NoGradGuard> guard;
};
}  // namespace

Tensor tensor_from_array(nb::handle array, bool copy) {
  Array a = nb::cast<Array>(array);
  if (a.device_type() != nb::device::cpu::value)
    throw nb::value_error(
        "aether.tensor: only host (CPU) arrays are taken; copy device arrays to the host first");
  const DType dtype = dtype_from_dlpack(a.dtype());
  Shape shape;
  for (size_t i = 0; i < a.ndim(); ++i) shape.push_back(int64_t(a.shape(i)));
  if (!c_contiguous(a)) throw nb::value_error("aether.tensor: the array is not C-contiguous");
  if (copy || numel(shape) == 0) return Tensor::from_blob(a.data(), shape, dtype);
  return Tensor::from_external(const_cast<void*>(a.data()), shape, dtype, keep_alive(array));
}

Size2 size2_of(nb::handle v, const char* what) {
  if (PyIndex_Check(v.ptr()))
    return Size2(nb::cast<int64_t>(nb::steal(PyNumber_Index(v.ptr()))));  // int, np.int64
  std::pair<int64_t, int64_t> p;
  if (!nb::try_cast(v, p))
    throw nb::type_error((std::string(what) + " must be an int or an (h, w) pair of ints, got " +
                          nb::cast<std::string>(nb::repr(v)))
                             .c_str());
  return Size2(p.first, p.second);
}

Padding2d padding2d_of(nb::handle v, const char* what) {
  if (nb::isinstance<nb::str>(v)) return Padding2d(nb::cast<std::string>(v));
  const Size2 hw = size2_of(v, what);
  return Padding2d(hw.h, hw.w);
}

// The value of a one-element tensor for Python's bool(), float() and int(), as in NumPy: "if t:"
// on a many-element tensor is a mistake, not a test of non-emptiness.
template <typename T = double>
T one_value(const Tensor& x, const char* what) {
  if (x.numel() != 1)
    throw nb::value_error((std::string(what) + "(): a tensor of shape " + to_string(x.shape()) + " has " +
                           std::to_string(x.numel()) +
                           " elements, so its value is ambiguous; reduce it to one first, e.g. with "
                           ".max(), .min() or .sum()")
                              .c_str());
  nb::gil_scoped_release release;
  return x.item<T>();
}

void bind_tensor(nb::module_& m) {
  nb::class_<Tensor> t(m, "Tensor", nb::type_slots(tensor_slots),
                       "A lazy n-dimensional array with autograd: operations record a graph that the fusing "
                       "scheduler compiles and runs when a value is needed.");
  t.def_prop_ro("shape", [](const Tensor& x) { return nb::tuple(nb::cast(x.shape())); })
      .def_prop_ro("dtype", [](const Tensor& x) { return std::string(dtype_name(x.dtype())); })
      .def_prop_ro("device", [](const Tensor& x) { return x.device().str(); })
      .def_prop_ro("ndim", &Tensor::ndim)
      .def_prop_ro("size", &Tensor::numel, "number of elements")
      .def("numel", &Tensor::numel)
      .def("__len__",
           [](const Tensor& x) {
             if (x.ndim() == 0) throw nb::type_error("len() of a 0-d tensor");
             return x.shape()[0];
           })
      .def_prop_rw(
          "requires_grad", &Tensor::requires_grad, [](Tensor& x, bool on) { x.set_requires_grad(on); },
          "whether backward() computes this leaf's .grad")
      .def_prop_ro(
          "grad",
          [](const Tensor& x) -> std::optional<Tensor> {
            Tensor g = x.grad();
            if (!g.defined()) return std::nullopt;
            return g;
          },
          "the gradient accumulated by backward(), or None")
      .def("zero_grad", &Tensor::zero_grad)
      .def(
          "backward",
          [](const Tensor& x, std::optional<Tensor> grad, bool retain_graph) {
            nb::gil_scoped_release release;
            x.backward(grad ? *grad : Tensor(), retain_graph);
          },
          nb::arg("grad") = nb::none(), nb::arg("retain_graph") = false,
          "accumulates d(self)/d(leaf) into every leaf's .grad that requires it (self must be a scalar "
          "unless grad is given)")
      .def("detach", &Tensor::detach)
      .def(
          "realize",
          [](const Tensor& x) {
            nb::gil_scoped_release release;
            x.realize();
            return x;
          },
          "computes the value now (fusing what the graph allows); returns self")
      .def_prop_ro("is_realized", &Tensor::is_realized)
      .def(
          "item",
          [](const Tensor& x) -> nb::object {
            nb::gil_scoped_release release;
            if (is_float(x.dtype())) {
              const double v = x.item<double>();
              nb::gil_scoped_acquire acquire;
              return nb::float_(v);
            }
            const int64_t v = x.item<int64_t>();  // exact beyond 2^53
            nb::gil_scoped_acquire acquire;
            return x.dtype() == DType::boolean ? nb::object(nb::bool_(v != 0)) : nb::object(nb::int_(v));
          },
          "the value of a one-element tensor as a Python number")
      // Python's truth and number protocols (one element only)
      .def("__bool__", [](const Tensor& x) { return one_value(x, "bool") != 0; })
      .def("__float__", [](const Tensor& x) { return one_value(x, "float"); })
      .def("__int__",
           [](const Tensor& x) -> int64_t {
             if (!is_float(x.dtype())) return one_value<int64_t>(x, "int");  // exact beyond 2^53
             const double v = one_value(x, "int");
             if (!std::isfinite(v)) throw nb::value_error("int(): the tensor's value is not finite");
             return int64_t(v);
           })
      .def(
          "numpy", [](const Tensor& x) { return as_ndarray<nb::numpy>(x); },
          "a read-only NumPy view of the value (no copy for a realized host tensor)")
      .def(
          "__array__",
          [](const Tensor& x, nb::object dtype, nb::object copy) {
            nb::object a = nb::cast(as_ndarray<nb::numpy>(x));
            if (!dtype.is_none())
              a = a.attr("astype")(dtype);
            else if (!copy.is_none() && nb::cast<bool>(copy))
              a = a.attr("copy")();
            return a;
          },
          nb::arg("dtype") = nb::none(), nb::arg("copy") = nb::none())
      .def(
          "__dlpack__",
          [](const Tensor& x, nb::kwargs) {
            return nb::cast(as_ndarray<nb::no_framework>(x));  // a "dltensor" capsule (host memory)
          },
          nb::arg("kwargs"), "a DLPack capsule viewing the value (host memory; read-only by convention)")
      .def("__dlpack_device__", [](const Tensor&) { return nb::make_tuple(int(nb::device::cpu::value), 0); })
      .def(
          "to",
          [](const Tensor& x, const std::string& where) {
            for (int d = 0; d < kNumDTypes; ++d)
              if (where == dtype_name(DType(d))) return x.cast(DType(d));
            const Device device = device_of(where);  // throws ValueError for an unknown name
            nb::gil_scoped_release release;
            return x.to(device);
          },
          nb::arg("device_or_dtype"), "a copy on another device ('cpu', 'cuda:1') or of another dtype")
      .def("astype", [](const Tensor& x, const std::string& d) { return x.cast(dtype_from_name(d)); })
      .def("contiguous", &Tensor::contiguous)
      .def("_take", &Tensor::take, nb::arg("indices"), nb::arg("axis"))
      // along one axis (wrapped with NumPy's signatures in _tensor_methods.py)
      .def("_take_along_axis", &Tensor::take_along_axis, nb::arg("indices"), nb::arg("axis"))
      .def("_index_add", &Tensor::index_add, nb::arg("axis"), nb::arg("indices"), nb::arg("values"))
      .def("_cumsum", &Tensor::cumsum, nb::arg("axis"))
      .def("_cumprod", &Tensor::cumprod, nb::arg("axis"))
      .def("_argsort", &Tensor::argsort, nb::arg("axis"), nb::arg("descending"))
      .def("_sort", &Tensor::sort, nb::arg("axis"), nb::arg("descending"))
      .def("_topk", &Tensor::topk, nb::arg("k"), nb::arg("axis"), nb::arg("largest"))
      // elementwise
      .def("__neg__", [](const Tensor& a) { return -a; })
      .def(
          "__add__", [](const Tensor& a, const Tensor& b) { return a + b; }, nb::is_operator())
      .def(
          "__add__", [](const Tensor& a, double b) { return a + b; }, nb::is_operator())
      .def(
          "__radd__", [](const Tensor& a, double b) { return b + a; }, nb::is_operator())
      .def(
          "__sub__", [](const Tensor& a, const Tensor& b) { return a - b; }, nb::is_operator())
      .def(
          "__sub__", [](const Tensor& a, double b) { return a - b; }, nb::is_operator())
      .def(
          "__rsub__", [](const Tensor& a, double b) { return b - a; }, nb::is_operator())
      .def(
          "__mul__", [](const Tensor& a, const Tensor& b) { return a * b; }, nb::is_operator())
      .def(
          "__mul__", [](const Tensor& a, double b) { return a * b; }, nb::is_operator())
      .def(
          "__rmul__", [](const Tensor& a, double b) { return b * a; }, nb::is_operator())
      .def(
          "__truediv__", [](const Tensor& a, const Tensor& b) { return a / b; }, nb::is_operator())
      .def(
          "__truediv__", [](const Tensor& a, double b) { return a / b; }, nb::is_operator())
      .def(
          "__rtruediv__", [](const Tensor& a, double b) { return b / a; }, nb::is_operator())
      .def(
          "__pow__", [](const Tensor& a, const Tensor& e) { return a.pow(e); }, nb::is_operator())
      .def(
          "__pow__", [](const Tensor& a, double e) { return a.pow(e); }, nb::is_operator())
      .def(
          "__rpow__", [](const Tensor& e, double base) { return pow(base, e); }, nb::is_operator())
      .def(
          "__floordiv__", [](const Tensor& a, const Tensor& b) { return a.floor_divide(b); },
          nb::is_operator())
      .def(
          "__floordiv__", [](const Tensor& a, double b) { return a.floor_divide(b); }, nb::is_operator())
      .def(
          "__rfloordiv__", [](const Tensor& b, double a) { return floor_divide(a, b); }, nb::is_operator())
      .def(
          "__mod__", [](const Tensor& a, const Tensor& b) { return a.remainder(b); }, nb::is_operator())
      .def(
          "__mod__", [](const Tensor& a, double b) { return a.remainder(b); }, nb::is_operator())
      .def(
          "__rmod__", [](const Tensor& b, double a) { return remainder(a, b); }, nb::is_operator())
      .def(
          "__matmul__", [](const Tensor& a, const Tensor& b) { return matmul(a, b); }, nb::is_operator())
      .def(
          "__lt__", [](const Tensor& a, const Tensor& b) { return a < b; }, nb::is_operator())
      .def(
          "__lt__", [](const Tensor& a, double b) { return a < b; }, nb::is_operator())
      .def(
          "__le__", [](const Tensor& a, const Tensor& b) { return a <= b; }, nb::is_operator())
      .def(
          "__le__", [](const Tensor& a, double b) { return a <= b; }, nb::is_operator())
      .def(
          "__gt__", [](const Tensor& a, const Tensor& b) { return a > b; }, nb::is_operator())
      .def(
          "__gt__", [](const Tensor& a, double b) { return a > b; }, nb::is_operator())
      .def(
          "__ge__", [](const Tensor& a, const Tensor& b) { return a >= b; }, nb::is_operator())
      .def(
          "__ge__", [](const Tensor& a, double b) { return a >= b; }, nb::is_operator())
      .def(
          "__eq__", [](const Tensor& a, const Tensor& b) { return a.eq(b); }, nb::is_operator())
      .def(
          "__eq__", [](const Tensor& a, double b) { return a.eq(b); }, nb::is_operator())
      .def(
          "__ne__", [](const Tensor& a, const Tensor& b) { return a.ne(b); }, nb::is_operator())
      .def(
          "__ne__", [](const Tensor& a, double b) { return a.ne(b); }, nb::is_operator())
      .def("eq", nb::overload_cast<const Tensor&>(&Tensor::eq, nb::const_))
      .def("eq", [](const Tensor& x, double o) { return x.eq(o); })
      .def("ne", nb::overload_cast<const Tensor&>(&Tensor::ne, nb::const_))
      .def("ne", [](const Tensor& x, double o) { return x.ne(o); })
      .def("exp", &Tensor::exp)
      .def("log", &Tensor::log)
      .def("sqrt", &Tensor::sqrt)
      .def("rsqrt", &Tensor::rsqrt)
      .def("reciprocal", &Tensor::reciprocal)
      .def("sin", &Tensor::sin)
      .def("cos", &Tensor::cos)
      .def("abs", &Tensor::abs)
      .def("__abs__", &Tensor::abs)
      .def("sign", &Tensor::sign)
      .def("isnan", &Tensor::isnan)
      .def("isinf", &Tensor::isinf)
      .def("isfinite", &Tensor::isfinite)
      .def("log1p", [](const Tensor& x) { return aether::log1p(x); })
      .def("expm1", [](const Tensor& x) { return aether::expm1(x); })
      .def("exp2", [](const Tensor& x) { return aether::exp2(x); })
      .def("log2", [](const Tensor& x) { return aether::log2(x); })
      .def("log10", [](const Tensor& x) { return aether::log10(x); })
      .def("erf", [](const Tensor& x) { return aether::erf(x); })
      .def("clone", &Tensor::clone, "a new tensor of the same value (the gradient passes through)")
      .def("square", &Tensor::square)
      .def("pow", nb::overload_cast<const Tensor&>(&Tensor::pow, nb::const_))
      .def("pow", nb::overload_cast<double>(&Tensor::pow, nb::const_))
      .def("floor", &Tensor::floor)
      .def("ceil", &Tensor::ceil)
      .def("trunc", &Tensor::trunc)
      .def("round", &Tensor::round, "to the nearest whole number, ties to even")
      .def("floor_divide", nb::overload_cast<const Tensor&>(&Tensor::floor_divide, nb::const_))
      .def("floor_divide", [](const Tensor& x, double o) { return x.floor_divide(o); })
      .def("remainder", nb::overload_cast<const Tensor&>(&Tensor::remainder, nb::const_))
      .def("remainder", [](const Tensor& x, double o) { return x.remainder(o); })
      .def("fmod", nb::overload_cast<const Tensor&>(&Tensor::fmod, nb::const_))
      .def("fmod", [](const Tensor& x, double o) { return x.fmod(o); })
      .def("maximum", nb::overload_cast<const Tensor&>(&Tensor::maximum, nb::const_))
      .def("maximum", [](const Tensor& x, double o) { return x.maximum(o); })
      .def("minimum", nb::overload_cast<const Tensor&>(&Tensor::minimum, nb::const_))
      .def("minimum", [](const Tensor& x, double o) { return x.minimum(o); })
      .def(
          "clamp", [](const Tensor& x, double lo, double hi) { return x.clamp(lo, hi); }, nb::arg("lo"),
          nb::arg("hi"))
      .def("relu", &Tensor::relu)
      .def("sigmoid", &Tensor::sigmoid)
      .def("tanh", &Tensor::tanh)
      // reductions: axis None (all), an int or a sequence of ints
      .def(
          "sum",
          [](const Tensor& x, nb::object axis, bool keepdims) { return x.sum(axes_of(axis), keepdims); },
          nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def(
          "prod",
          [](const Tensor& x, nb::object axis, bool keepdims) { return x.prod(axes_of(axis), keepdims); },
          nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def(
          "mean",
          [](const Tensor& x, nb::object axis, bool keepdims) { return x.mean(axes_of(axis), keepdims); },
          nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def(
          "logsumexp",
          [](const Tensor& x, nb::object axis, bool keepdims) {
            return x.logsumexp(axes_of(axis), keepdims);
          },
          nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def(
          "max",
          [](const Tensor& x, nb::object axis, bool keepdims) { return x.max(axes_of(axis), keepdims); },
          nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def(
          "min",
          [](const Tensor& x, nb::object axis, bool keepdims) { return x.min(axes_of(axis), keepdims); },
          nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def(
          "var",
          [](const Tensor& x, nb::object axis, bool keepdims, int ddof) {
            return x.var(axes_of(axis), keepdims, ddof);
          },
          nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::arg("ddof") = 0)
      .def(
          "std",
          [](const Tensor& x, nb::object axis, bool keepdims, int ddof) {
            return x.std(axes_of(axis), keepdims, ddof);
          },
          nb::arg("axis") = nb::none(), nb::arg("keepdims") = false, nb::arg("ddof") = 0)
      .def(
          "any",
          [](const Tensor& x, nb::object axis, bool keepdims) { return x.any(axes_of(axis), keepdims); },
          nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def(
          "all",
          [](const Tensor& x, nb::object axis, bool keepdims) { return x.all(axes_of(axis), keepdims); },
          nb::arg("axis") = nb::none(), nb::arg("keepdims") = false)
      .def("logical_not", &Tensor::logical_not)
      .def("logical_and", &Tensor::logical_and)
      .def("logical_or", &Tensor::logical_or)
      .def("logical_xor", &Tensor::logical_xor)
      .def("argmax", &Tensor::argmax, nb::arg("axis"), nb::arg("keepdims") = false)
      .def("argmin", &Tensor::argmin, nb::arg("axis"), nb::arg("keepdims") = false)
      // movement
      .def("reshape", [](const Tensor& x, const Shape& s) { return x.reshape(s); })
      .def("reshape", [](const Tensor& x, nb::args s) { return x.reshape(nb::cast<Shape>(s)); })
      .def("flatten", &Tensor::flatten, nb::arg("start") = 0, nb::arg("end") = -1)
      .def("permute", [](const Tensor& x, const std::vector<int64_t>& p) { return x.permute(p); })
      .def("permute",
           [](const Tensor& x, nb::args p) { return x.permute(nb::cast<std::vector<int64_t>>(p)); })
      .def("transpose", &Tensor::transpose, nb::arg("a") = -2, nb::arg("b") = -1)
      .def_prop_ro("T",
                   [](const Tensor& x) {  // NumPy's: every axis reversed (a 0-d or 1-d tensor as it is)
                     std::vector<int64_t> perm;
                     for (int64_t d = x.ndim() - 1; d >= 0; --d) perm.push_back(d);
                     return x.permute(perm);
                   })
      .def("expand", &Tensor::expand)
      .def("expand", [](const Tensor& x, nb::args s) { return x.expand(nb::cast<Shape>(s)); })
      .def("slice", &Tensor::slice, nb::arg("axis"), nb::arg("start"), nb::arg("stop"), nb::arg("step") = 1)
      .def("pad", &Tensor::pad)
      .def("flip", &Tensor::flip)
      .def("flip", [](const Tensor& x, nb::args a) { return x.flip(nb::cast<std::vector<int64_t>>(a)); })
      .def("squeeze", &Tensor::squeeze, nb::arg("axis") = nb::none())
      .def("unsqueeze", &Tensor::unsqueeze)
      .def("matmul", &Tensor::matmul);

  m.def("_from_array", &tensor_from_array, nb::arg("array"), nb::arg("copy") = false);
  m.def(
      "from_dlpack",
      [](nb::object obj) {
        if (!nb::hasattr(obj, "__dlpack__"))
          throw nb::type_error(("aether.from_dlpack: expected an object with __dlpack__ (a NumPy array, a "
                                "PyTorch tensor...), got " +
                                std::string(nb::type_name(obj.type()).c_str()))
                                   .c_str());
        Array a = nb::cast<Array>(obj);
        return tensor_from_array(nb::cast(a), !c_contiguous(a));
      },
      nb::arg("obj"), "a Tensor over the memory of any object with __dlpack__ (host memory, no copy)");
  m.def("_ndarray", [](const Tensor& x) { return as_ndarray<nb::numpy>(x); });

  m.def(
      "zeros", [](const Shape& s, const std::string& d) { return Tensor::zeros(s, dtype_from_name(d)); },
      nb::arg("shape"), nb::arg("dtype") = "float32");
  m.def(
      "ones", [](const Shape& s, const std::string& d) { return Tensor::ones(s, dtype_from_name(d)); },
      nb::arg("shape"), nb::arg("dtype") = "float32");
  m.def(
      "full",
      [](const Shape& s, double v, const std::string& d) { return Tensor::full(s, v, dtype_from_name(d)); },
      nb::arg("shape"), nb::arg("value"), nb::arg("dtype") = "float32");
  m.def(
      "arange",
      [](double a, double b, double step, const std::string& d) {
        return Tensor::arange(a, b, step, dtype_from_name(d));
      },
      nb::arg("start"), nb::arg("stop"), nb::arg("step") = 1.0, nb::arg("dtype") = "float32");
  m.def(
      "rand", [](const Shape& s, const std::string& d) { return Tensor::rand(s, dtype_from_name(d)); },
      nb::arg("shape"), nb::arg("dtype") = "float32");
  m.def(
      "randn", [](const Shape& s, const std::string& d) { return Tensor::randn(s, dtype_from_name(d)); },
      nb::arg("shape"), nb::arg("dtype") = "float32");
  m.def(
      "manual_seed", [](uint64_t seed) { manual_seed(seed); }, nb::arg("seed"),
      "seeds aether's global Philox generator (weight initialisation, dropout, rand/randn)");
  m.def("matmul", [](const Tensor& a, const Tensor& b) { return matmul(a, b); });
  m.def("where", [](const Tensor& c, const Tensor& a, const Tensor& b) { return where(c, a, b); });
  m.def("where", [](const Tensor& c, const Tensor& a, double b) { return where(c, a, b); });
  m.def("where", [](const Tensor& c, double a, const Tensor& b) { return where(c, a, b); });
  m.def("cat", &cat, nb::arg("tensors"), nb::arg("axis") = 0);
  m.def("stack", &stack, nb::arg("tensors"), nb::arg("axis") = 0);
  m.def("einsum", &einsum, nb::arg("subscripts"),
        nb::arg("operands"));  // aether.einsum: (subscripts, *operands)
  m.def(
      "realize",
      [](const std::vector<Tensor>& ts) {
        nb::gil_scoped_release release;
        realize(ts);
      },
      "computes several tensors at once (one schedule: shared work is done once)");
  m.def("grad_enabled", &grad_enabled);

  nb::class_<NoGradContext>(m, "no_grad", "with aether.no_grad(): operations record no history for autograd")
      .def(nb::init<>())
      .def("__enter__", [](NoGradContext& c) { c.guard = std::make_unique<NoGradGuard>(); })
      .def("__exit__", [](NoGradContext& c, nb::args) { c.guard.reset(); });

  // functional ops that custom layers are written with (their gradients come from autograd)
  nb::module_ f = m.def_submodule("functional", "functional neural-network ops on tensors");
  f.def("relu", [](const Tensor& x) { return x.relu(); });
  f.def("leaky_relu", &leaky_relu, nb::arg("x"), nb::arg("slope") = 0.01);
  f.def("gelu", &gelu, nb::arg("x"), nb::arg("tanh_approx") = false);
  f.def("silu", &silu);
  f.def("softmax", &softmax, nb::arg("x"), nb::arg("axis") = -1);
  f.def("log_softmax", &log_softmax, nb::arg("x"), nb::arg("axis") = -1);
  f.def("linear", &linear, nb::arg("x"), nb::arg("weight"), nb::arg("bias") = Tensor());
  f.def(
      "layer_norm",
      [](const Tensor& x, std::optional<Tensor> w, std::optional<Tensor> b, int64_t axes, double eps) {
        return layer_norm(x, w ? *w : Tensor(), b ? *b : Tensor(), axes, eps);
      },
      nb::arg("x"), nb::arg("weight") = nb::none(), nb::arg("bias") = nb::none(), nb::arg("axes") = 1,
      nb::arg("eps") = 1e-5, "each sample normalised over its last `axes` dims, then * weight + bias");
  f.def(
      "conv2d",
      [](const Tensor& x, const Tensor& w, std::optional<Tensor> b, nb::object stride, nb::object padding,
         int64_t groups) {
        Conv2dOptions o;
        o.stride = size2_of(stride, "conv2d: stride");
        o.padding = padding2d_of(padding, "conv2d: padding");
        o.groups = groups;
        return conv2d(x, w, b ? *b : Tensor(), o);
      },
      nb::arg("x"), nb::arg("weight"), nb::arg("bias") = nb::none(), nb::arg("stride") = 1,
      nb::arg("padding") = "valid", nb::arg("groups") = 1,
      "x (N,H,W,C), weight (O,KH,KW,C/groups), bias (O) -> (N,OH,OW,O)");
  f.def(
      "max_pool2d",
      [](const Tensor& x, nb::object k, nb::object s) {
        return max_pool2d(x, size2_of(k, "max_pool2d: kernel"),
                          s.is_none() ? Size2(0) : size2_of(s, "max_pool2d: stride"));
      },
      nb::arg("x"), nb::arg("kernel"), nb::arg("stride") = nb::none(),
      "x (N,H,W,C) -> (N,OH,OW,C); kernel and stride an int or (h, w); stride None: the kernel");
  f.def(
      "avg_pool2d",
      [](const Tensor& x, nb::object k, nb::object s) {
        return avg_pool2d(x, size2_of(k, "avg_pool2d: kernel"),
                          s.is_none() ? Size2(0) : size2_of(s, "avg_pool2d: stride"));
      },
      nb::arg("x"), nb::arg("kernel"), nb::arg("stride") = nb::none(),
      "x (N,H,W,C) -> (N,OH,OW,C); kernel and stride an int or (h, w); stride None: the kernel");
  f.def("global_avg_pool2d", &global_avg_pool2d);
  f.def("dropout", &dropout, nb::arg("x"), nb::arg("p"), nb::arg("training") = true);
  f.def("one_hot", [](const Tensor& l, int64_t k) { return one_hot(l, k); });
  f.def("cross_entropy", &cross_entropy, nb::arg("logits"), nb::arg("labels"),
        nb::arg("label_smoothing") = 0.0);
  f.def("mse_loss", &mse_loss);
  f.def(
      "binary_cross_entropy_with_logits",
      [](const Tensor& logits, const Tensor& targets, double label_smoothing, std::optional<Tensor> weights) {
        return binary_cross_entropy_with_logits(logits, targets, label_smoothing, weights.value_or(Tensor()));
      },
      nb::arg("logits"), nb::arg("targets"), nb::arg("label_smoothing") = 0.0,
      nb::arg("weights").none() = nb::none(),
      "mean of -[t' ln sigmoid(z) + (1 - t') ln(1 - sigmoid(z))] (times weights, broadcast to logits)");
  f.def("accuracy", &accuracy);
  f.def("binary_accuracy", &binary_accuracy);
}

}  // namespace aether::py
