// The `aether._aether` extension module: aether's C++ engine for Python. Every aether::Error
// becomes a Python exception with the same message: TypeError for a dtype that does not fit,
// RuntimeError for files, GPUs and values that went bad while running, ValueError for the rest
// (bad shapes, arguments and settings). aether::Error has no kinds, so the message decides.
#include <string>

#include "bind.h"

namespace aether::py {
namespace {
PyObject* exception_type(const std::string& what) {
  auto has = [&](const char* s) { return what.find(s) != std::string::npos; };
  auto starts = [&](const char* s) { return what.rfind(s, 0) == 0; };
  if (has("dtype")) return PyExc_TypeError;
  // Files, data sets on disk, devices, and values that went bad while running.
  if (starts("load") || starts("save") || starts("resolve_data_dir") || has("No such file") ||
      has("cannot open") || has("files found") || has("CUDA") || has("GPU") || has("not finite") ||
      has("became") || has("diverged") || has("out of memory"))
    return PyExc_RuntimeError;
  return PyExc_ValueError;  // shapes, arguments, settings
}
}  // namespace
}  // namespace aether::py

NB_MODULE(_aether, m) {
  using namespace aether::py;
  m.doc() = "aether's C++ engine (lazy tensors, fusing scheduler, layers, Model); see the aether package";
  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const aether::Error& e) {
      PyErr_SetString(exception_type(e.what()), e.what());
    }
  });
  bind_tensor(m);
  bind_nn(m);
  bind_data(m);
  bind_model(m);
}
