// The dtype a composite op computes in, for every file of src/ops: intermediate results of 16-bit
// floats would round (and cancel) after every primitive, so composites compute them in float32 and
// round once at the end (docs/mixed-precision.md); integers and bool compute in float32 too.
#pragma once

#include "aether/graph/tensor.h"

namespace aether::ops_detail {

// float64 stays, everything else (16-bit floats, float32, ints, bool) is float32.
inline DType compute_dtype(DType t) { return t == DType::float64 ? DType::float64 : DType::float32; }
// What a float function returns: the input's dtype when it is a float, else float32.
inline DType result_dtype(DType t) { return is_float(t) ? t : DType::float32; }
// f on x cast to its compute dtype, the result cast back to the result dtype (free in a fused kernel).
template <typename F>
Tensor in_compute(const Tensor& x, F&& f) {
  return f(x.cast(compute_dtype(x.dtype()))).cast(result_dtype(x.dtype()));
}

}  // namespace aether::ops_detail
