// python/src/bind.h - the pieces of the `aether._aether` extension module (nanobind) and the helpers
// they share. Each bind_*.cpp adds one part of the API; the Python package (python/aether) builds
// Aether-ML's Model API on top of it.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>

#include <memory>

#include "aether/aether.h"

namespace aether::py {
namespace nb = nanobind;

void bind_tensor(nb::module_& m);  // Tensor, NumPy/buffer/DLPack interop, autograd, tensor functions
void bind_nn(nb::module_& m);      // Module, the built-in layers, Layer (subclassable from Python)
void bind_model(nb::module_& m);   // Model on NumPy arrays, presets
void bind_data(nb::module_& m);    // data sets as NumPy arrays

// A reference to a Python object that a C++ owner (a Buffer, a Dataset) holds: released with the
// GIL taken, whatever thread drops it, and never after the interpreter has shut down.
std::shared_ptr<const void> keep_alive(nb::handle obj);
// The aether dtype of a DLPack dtype; throws TypeError naming it when aether has no such type.
DType dtype_from_dlpack(nb::dlpack::dtype t);
// Wraps a C-contiguous host NumPy-compatible array (anything nanobind's ndarray accepts) as a
// Tensor: without a copy unless `copy`.
Tensor tensor_from_array(nb::handle array, bool copy);
// A kernel size, stride, dilation or padding given as an int or an (h, w) pair (padding also
// "same" / "valid"), as the layers take them; throws TypeError naming `what` otherwise.
Size2 size2_of(nb::handle v, const char* what);
Padding2d padding2d_of(nb::handle v, const char* what);

}  // namespace aether::py
