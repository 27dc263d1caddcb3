// Ops along one axis (NumPy's cumsum, cumprod, argsort, sort, take_along_axis; PyTorch's topk): the axis is
// moved last and the other dims flattened, so the primitives see rows (R, L), one per line along it.
// take_along_axis lives here too: sort and topk pick their values the way it does.
#include "aether/graph/primitives.h"
#include "ops/indices.h"

namespace aether {
namespace {
// x with `axis` moved last, as rows (R, L); back() puts a (R, K) result into x's layout, K at axis.
struct Rows {
  Rows(const Tensor& x, int64_t axis_, const char* op) : axis(normalize_axis(axis_, x.ndim(), op)) {
    for (int d = 0; d < x.ndim(); ++d)
      if (d != axis) {
        perm.push_back(d);
        lead.push_back(x.shape()[size_t(d)]);
      }
    perm.push_back(axis);
    rows = x.permute(perm).reshape({numel(lead), x.shape()[size_t(axis)]});
  }
  Tensor back(const Tensor& r) const {  // (R, K) -> lead dims with K inserted at axis
    Shape s = lead;
    s.push_back(r.shape()[1]);
    std::vector<int64_t> inv(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) inv[size_t(perm[i])] = int64_t(i);
    return r.reshape(s).permute(inv);
  }
  int axis;
  std::vector<int64_t> perm;  // x.permute(perm) has `axis` last
  Shape lead;                 // the other dims, in order (R is their product)
  Tensor rows;                // (R, L)
};

// Row r of the result holds x's row r at the positions idx's row r names: x (R,L), idx (R,K) int64 in
// [0, L) -> (R,K), through the Gather primitive (so its gradient sums repeated positions).
Tensor pick(const Tensor& x, const Tensor& idx) {
  const int64_t r = x.shape()[0];
  return prim::gather(x.reshape({r, x.shape()[1], 1}), idx).reshape({r, idx.shape()[1]});
}
}  // namespace

Tensor Tensor::take_along_axis(const Tensor& indices, int64_t axis) const {
  const char* op = "take_along_axis";
  AETHER_CHECK(indices.ndim() == ndim(), op, "indices need the tensor's ", ndim(), " dims, got shape ",
               to_string(indices.shape()));
  const int a = normalize_axis(axis, ndim(), op);
  Shape xs = shape(), is = indices.shape();  // the other dims broadcast together
  for (int d = 0; d < ndim(); ++d)
    if (d != a) {
      Shape one{xs[size_t(d)]}, two{is[size_t(d)]};
      xs[size_t(d)] = is[size_t(d)] = broadcast_shapes(one, two, op)[0];
    }
  const Rows x(expand(xs), a, op),
      i(ops_detail::wrap_indices(indices, shape()[size_t(a)], op).expand(is), a, op);
  return x.back(pick(x.rows, i.rows));
}

// Integers and bools sum (multiply) in int64 (NumPy's platform integer), floats in their dtype.
Tensor Tensor::cumsum(int64_t axis) const {
  const Rows x(is_float(dtype()) ? *this : cast(DType::int64), axis, "cumsum");
  return x.back(prim::cumsum(x.rows));
}

Tensor Tensor::cumprod(int64_t axis) const {
  const Rows x(is_float(dtype()) ? *this : cast(DType::int64), axis, "cumprod");
  return x.back(prim::cumprod(x.rows));
}

Tensor Tensor::argsort(int64_t axis, bool descending) const {
  const Rows x(*this, axis, "argsort");
  return x.back(prim::argsort(x.rows, descending));
}

std::pair<Tensor, Tensor> Tensor::sort(int64_t axis, bool descending) const {
  const Rows x(*this, axis, "sort");
  const Tensor idx = prim::argsort(x.rows, descending);
  return {x.back(pick(x.rows, idx)), x.back(idx)};
}

std::pair<Tensor, Tensor> Tensor::topk(int64_t k, int64_t axis, bool largest) const {
  const Rows x(*this, axis, "topk");
  const int64_t n = x.rows.shape()[1];
  AETHER_CHECK(k >= 0 && k <= n, "topk", "k must be in [0, ", n, "] for an axis of size ", n, ", got ", k);
  const Tensor idx = prim::argsort(x.rows, largest, k);  // (R, k)
  return {x.back(pick(x.rows, idx)), x.back(idx)};
}

}  // namespace aether
