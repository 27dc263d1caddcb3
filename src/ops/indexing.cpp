// Indexing by integer tensors (NumPy's take) on top of the Gather primitive: the indexed axis moved
// first and the others flattened, so one row gather serves every axis.
#include "aether/graph/primitives.h"

namespace aether {

Tensor Tensor::take(const Tensor& indices, int64_t axis) const {
  const int a = normalize_axis(axis, ndim(), "take");
  AETHER_CHECK_DTYPE(!is_float(indices.dtype()) && indices.dtype() != DType::boolean, "take",
                     "indices must be integers, got ", dtype_name(indices.dtype()),
                     " (a bool mask selects where it is true: index with its nonzero positions)");
  const int64_t n = shape()[size_t(a)];
  std::vector<int64_t> first{a};  // x with `axis` first
  Shape rest;                     // the other dims, in order
  for (int d = 0; d < ndim(); ++d)
    if (d != a) {
      first.push_back(d);
      rest.push_back(shape()[size_t(d)]);
    }
  const Tensor rows = permute(first).reshape({n, aether::numel(rest)});  // (N, D)
  Tensor i = indices.cast(DType::int64).reshape({indices.numel()});
  // From the end: -n..-1 -> 0..n-1 (one below -n stays, for the error to name it).
  const Tensor size = Tensor::full({}, double(n), DType::int64, i.device());
  i = where((i < 0.0).logical_and(i.ge(-size)), i + size, i);
  Shape s = indices.shape();  // (indices..., rest...), then the indices' dims moved to `axis`
  s.insert(s.end(), rest.begin(), rest.end());
  const Tensor g = prim::gather(rows, i).reshape(s);
  const int64_t k = indices.ndim();
  std::vector<int64_t> perm;
  for (int64_t j = 0; j < a; ++j) perm.push_back(k + j);
  for (int64_t j = 0; j < k; ++j) perm.push_back(j);
  for (int64_t j = a; j < int64_t(rest.size()); ++j) perm.push_back(k + j);
  return g.permute(perm);
}

}  // namespace aether
