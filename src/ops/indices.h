// Integer index tensors, for the ops that take them (take, take_along_axis: src/ops/indexing.cpp).
#pragma once

#include "aether/graph/tensor.h"

namespace aether::ops_detail {

// `indices` (any integer dtype; floats and bools are refused, naming `op`) as int64, the negative
// ones (-n..-1: from the end of an axis of size n) moved to 0..n-1; one below -n stays, for the
// Gather's bounds error to name it.
Tensor wrap_indices(const Tensor& indices, int64_t n, const char* op);

}  // namespace aether::ops_detail
