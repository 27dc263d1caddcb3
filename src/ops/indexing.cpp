// Indexing by integer tensors on top of the Gather and ScatterAdd primitives: NumPy's take and
// PyTorch's index_add. The indexed axis is moved first and the others flattened, so one row gather
// (scatter) serves every axis.
#include "aether/graph/primitives.h"
#include "ops/indices.h"

namespace aether {
namespace {
// x's `axis` moved first, the other dims (`rest`, in order) flattened: x as rows (1, N, D).
struct AxisFirst {
  AxisFirst(const Tensor& x, int64_t axis_, const char* op) : axis(normalize_axis(axis_, x.ndim(), op)) {
    perm.push_back(axis);
    for (int d = 0; d < x.ndim(); ++d)
      if (d != axis) {
        perm.push_back(d);
        rest.push_back(x.shape()[size_t(d)]);
      }
  }
  Tensor rows(const Tensor& t) const {  // t (this layout, any length along axis) -> (1, len, D)
    return t.permute(perm).reshape({1, t.shape()[size_t(axis)], numel(rest)});
  }
  int axis;
  std::vector<int64_t> perm;  // x.permute(perm) has `axis` first
  Shape rest;                 // the other dims, in order (D is their product)
};
}  // namespace

Tensor ops_detail::wrap_indices(const Tensor& indices, int64_t n, const char* op) {
  AETHER_CHECK_DTYPE(!is_float(indices.dtype()) && indices.dtype() != DType::boolean, op,
                     "indices must be integers, got ", dtype_name(indices.dtype()),
                     " (a bool mask selects where it is true: index with its nonzero positions)");
  const Tensor i = indices.cast(DType::int64);
  const Tensor size = Tensor::full({}, double(n), DType::int64, i.device());
  return where((i < 0.0).logical_and(i.ge(-size)), i + size, i);
}

Tensor Tensor::take(const Tensor& indices, int64_t axis) const {
  const AxisFirst x(*this, axis, "take");
  const int64_t n = shape()[size_t(x.axis)];
  const Tensor i = ops_detail::wrap_indices(indices, n, "take").reshape({1, indices.numel()});
  Shape s = indices.shape();  // (indices..., rest...), then the indices' dims moved to `axis`
  s.insert(s.end(), x.rest.begin(), x.rest.end());
  const Tensor g = prim::gather(x.rows(*this), i).reshape(s);
  const int64_t k = indices.ndim();
  std::vector<int64_t> perm;
  for (int64_t j = 0; j < x.axis; ++j) perm.push_back(k + j);
  for (int64_t j = 0; j < k; ++j) perm.push_back(j);
  for (int64_t j = x.axis; j < int64_t(x.rest.size()); ++j) perm.push_back(k + j);
  return g.permute(perm);
}

Tensor Tensor::index_add(int64_t axis, const Tensor& indices, const Tensor& values) const {
  const char* op = "index_add";
  const AxisFirst x(*this, axis, op);
  AETHER_CHECK_DTYPE(is_float(dtype()), op, "adds into float tensors, got ", dtype_name(dtype()));
  AETHER_CHECK(indices.ndim() == 1, op, "indices must be 1-D, got shape ", to_string(indices.shape()));
  Shape want = shape();
  want[size_t(x.axis)] = indices.shape()[0];
  AETHER_CHECK(values.shape() == want, op, "values must have shape ", to_string(want), " (the tensor's with ",
               indices.shape()[0], " along axis ", x.axis, "), got ", to_string(values.shape()));
  const int64_t n = shape()[size_t(x.axis)];
  const Tensor i = ops_detail::wrap_indices(indices, n, op).reshape({1, indices.shape()[0]});
  Shape first{n};  // the sums, axis first, then back in this tensor's layout
  first.insert(first.end(), x.rest.begin(), x.rest.end());
  std::vector<int64_t> back(x.perm.size());
  for (size_t j = 0; j < x.perm.size(); ++j) back[size_t(x.perm[j])] = int64_t(j);
  const Tensor sums = prim::scatter_add(x.rows(values.cast(dtype())), i, n).reshape(first).permute(back);
  return *this + sums;
}

}  // namespace aether
