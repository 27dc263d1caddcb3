// The `aether._aether` extension module: aether's C++ engine for Python. Every aether::Error
// becomes a Python exception with the same message, of the class its kind names: TypeError for a
// dtype that does not fit, aether.NotFoundError (a FileNotFoundError and a RuntimeError) for a file
// or data set that is not there, RuntimeError for other trouble with files, data sets on disk,
// devices, collectives and values that went bad while running, IndexError for an index out of
// bounds, ValueError for the rest (bad shapes, arguments, settings).
#include <string>

#include "bind.h"

namespace aether::py {
namespace {
// aether.NotFoundError: a file or data set that is not there. A FileNotFoundError (so OSError), as
// Python's own file functions raise, and a RuntimeError, the class aether raised for it before.
PyObject* g_not_found = nullptr;

PyObject* exception_type(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::type: return PyExc_TypeError;
    case ErrorKind::runtime: return PyExc_RuntimeError;
    case ErrorKind::index: return PyExc_IndexError;
    case ErrorKind::not_found: return g_not_found;
    case ErrorKind::value: break;
  }
  return PyExc_ValueError;
}
}  // namespace
}  // namespace aether::py

NB_MODULE(_aether, m) {
  using namespace aether::py;
  m.doc() = "aether's C++ engine (lazy tensors, fusing scheduler, layers, Model); see the aether package";
  PyObject* bases = PyTuple_Pack(2, PyExc_FileNotFoundError, PyExc_RuntimeError);
  g_not_found = PyErr_NewExceptionWithDoc(
      "aether.NotFoundError",
      "A file or data set that is not there: a FileNotFoundError, and a RuntimeError as before.", bases,
      nullptr);
  Py_XDECREF(bases);
  if (g_not_found == nullptr) throw nb::python_error();
  m.attr("NotFoundError") = nb::handle(g_not_found);
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const aether::Error& e) {
      PyErr_SetString(exception_type(e.kind()), e.what());
    }
  });
  bind_tensor(m);
  bind_nn(m);
  bind_data(m);
  bind_model(m);
}
