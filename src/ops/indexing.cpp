// Indexing by integer tensors (NumPy's take) on top of the Gather primitive: the indexed axis moved
// first and the others flattened, so one row gather serves every axis.
#include "aether/graph/primitives.h"
#include "ops/indices.h"

namespace aether {

Tensor ops_detail::wrap_indices(const Tensor& indices, int64_t n, const char* op) {
  AETHER_CHECK_DTYPE(!is_float(indices.dtype()) && indices.dtype() != DType::boolean, op,
                     "indices must be integers, got ", dtype_name(indices.dtype()),
                     " (a bool mask selects where it is true: index with its nonzero positions)");
  const Tensor i = indices.cast(DType::int64);
  const Tensor size = Tensor::full({}, double(n), DType::int64, i.device());
  return where((i < 0.0).logical_and(i.ge(-size)), i + size, i);
}

Tensor Tensor::take(const Tensor& indices, int64_t axis) const {
  const int a = normalize_axis(axis, ndim(), "take");
  const int64_t n = shape()[size_t(a)];
  std::vector<int64_t> first{a};  // x with `axis` first
  Shape rest;                     // the other dims, in order
  for (int d = 0; d < ndim(); ++d)
    if (d != a) {
      first.push_back(d);
      rest.push_back(shape()[size_t(d)]);
    }
  const Tensor rows = permute(first).reshape({1, n, aether::numel(rest)});  // (1, N, D)
  const Tensor i = ops_detail::wrap_indices(indices, n, "take").reshape({1, indices.numel()});
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
