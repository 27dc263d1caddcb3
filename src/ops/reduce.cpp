// Reductions: sum and max are primitives; min, mean, var, argmax and prod (a Cumprod) are composites.
#include <algorithm>

#include "aether/graph/primitives.h"
#include "ops/compute.h"

namespace aether {
namespace {
Axes norm_axes(const Tensor& x, const std::vector<int64_t>& axes, const char* op) {
  Axes a;
  if (axes.empty()) {
    for (int i = 0; i < x.ndim(); ++i) a.push_back(i);
  } else {
    for (int64_t v : axes) a.push_back(normalize_axis(v, x.ndim(), op));
  }
  std::sort(a.begin(), a.end());
  AETHER_CHECK(std::adjacent_find(a.begin(), a.end()) == a.end(), op, "repeated axis in the axis list");
  return a;
}
Tensor drop_axes(const Tensor& r, const Axes& axes, bool keepdim) {
  if (keepdim) return r;
  Shape out;
  for (int d = 0; d < r.ndim(); ++d)
    if (std::find(axes.begin(), axes.end(), d) == axes.end()) out.push_back(r.shape()[d]);
  return r.reshape(out);
}
int64_t count(const Tensor& x, const Axes& axes) {
  int64_t n = 1;
  for (int a : axes) n *= x.shape()[a];
  return n;
}
}  // namespace

// Sums of bool and narrow ints accumulate in int64, like NumPy.
Tensor Tensor::sum(const std::vector<int64_t>& axes, bool keepdim) const {
  const Axes a = norm_axes(*this, axes, "sum");
  const Tensor x = (dtype() == DType::boolean || dtype() == DType::uint8 || dtype() == DType::int32)
                       ? cast(DType::int64)
                       : *this;
  return drop_axes(prim::reduce(Op::ReduceSum, x, a), a, keepdim);
}

// The product over the axes (NumPy's prod): those axes moved last and flattened, rows (R, L), and the
// last running product of each row (Cumprod, whose gradient is exact where x has zeros). Integers and
// bools in int64 (wrapping), floats in their dtype (multiplied in double, rounded once).
Tensor Tensor::prod(const std::vector<int64_t>& axes, bool keepdim) const {
  const Axes a = norm_axes(*this, axes, "prod");
  const Tensor x = is_float(dtype()) ? *this : cast(DType::int64);
  std::vector<int64_t> perm, reduced(a.begin(), a.end());
  Shape keep_shape = shape();  // the result with the reduced axes as size-1 dims
  for (int d = 0; d < ndim(); ++d)
    if (std::find(a.begin(), a.end(), d) == a.end()) perm.push_back(d);
  for (int d : a) {
    perm.push_back(d);
    keep_shape[size_t(d)] = 1;
  }
  const int64_t l = count(*this, a);
  const Tensor r =
      l == 0 ? x.sum(reduced, true) * 0 + 1  // the empty product (the gradient flows: zeros)
             : prim::cumprod(x.permute(perm).reshape({numel() / l, l})).slice(1, l - 1, l);  // (R,1)
  return drop_axes(r.reshape(keep_shape), a, keepdim);
}

Tensor Tensor::max(const std::vector<int64_t>& axes, bool keepdim) const {
  const Axes a = norm_axes(*this, axes, "max");
  AETHER_CHECK(count(*this, a) > 0, "max", "reduction over an empty axis of shape ", to_string(shape()));
  return drop_axes(prim::reduce(Op::ReduceMax, *this, a), a, keepdim);
}

Tensor Tensor::min(const std::vector<int64_t>& axes, bool keepdim) const {
  const Axes a = norm_axes(*this, axes, "min");
  AETHER_CHECK(count(*this, a) > 0, "min", "reduction over an empty axis of shape ", to_string(shape()));
  if (is_float(dtype())) return -((-*this).max(axes, keepdim));
  // Integers: c - max(c - x) with c = all one bits (-1, or 255 for uint8) never overflows, unlike -x.
  if (dtype() == DType::boolean) return cast(DType::uint8).min(axes, keepdim).cast(DType::boolean);
  const Tensor c = Tensor::full({}, dtype() == DType::uint8 ? 255.0 : -1.0, dtype(), device());
  return c - (c - *this).max(axes, keepdim);
}

Tensor Tensor::mean(const std::vector<int64_t>& axes, bool keepdim) const {
  const Axes a = norm_axes(*this, axes, "mean");
  const Tensor x = is_float(dtype()) ? *this : cast(DType::float32);
  return x.sum(std::vector<int64_t>(a.begin(), a.end()), keepdim) / double(std::max<int64_t>(count(x, a), 1));
}

Tensor Tensor::var(const std::vector<int64_t>& axes, bool keepdim, int correction) const {
  const Axes a = norm_axes(*this, axes, "var");
  const std::vector<int64_t> ax(a.begin(), a.end());
  const int64_t n = count(*this, a) - correction;
  AETHER_CHECK(n > 0, "var", "not enough elements (", count(*this, a), ") for correction ", correction);
  // In float32 for 16-bit floats (x - mean in 16 bits would cancel) and integers (ops/compute.h).
  return ops_detail::in_compute(*this, [&](const Tensor& x) {
    const Tensor d = x - x.mean(ax, true);
    return (d * d).sum(ax, keepdim) / double(n);
  });
}

Tensor Tensor::std(const std::vector<int64_t>& axes, bool keepdim, int correction) const {
  return var(axes, keepdim, correction).sqrt();
}
// A count of the false values (exact in int64; an empty reduction counts 0: all true, any false).
Tensor Tensor::all(const std::vector<int64_t>& axes, bool keepdim) const {
  return logical_not().sum(axes, keepdim).eq(0.0);
}
Tensor Tensor::any(const std::vector<int64_t>& axes, bool keepdim) const {
  return logical_not().all(axes, keepdim).logical_not();
}

namespace {
// The index of the first maximum (or minimum) of x along `axis`, int64.
Tensor arg_extreme(const Tensor& x_in, int64_t axis, bool keepdim, bool largest, const char* op) {
  const int d = normalize_axis(axis, x_in.ndim(), op);
  const int64_t n = x_in.shape()[d];
  AETHER_CHECK(n > 0, op, "empty axis ", d, " of shape ", to_string(x_in.shape()));
  NoGradGuard no_grad;
  // The first extreme wins: among positions equal to it, take the largest (n - i).
  const Tensor m = largest ? x_in.max({d}, true) : x_in.min({d}, true);
  Shape ishape(size_t(x_in.ndim()), 1);
  ishape[d] = n;
  const Tensor rev = (double(n) - Tensor::arange(n, DType::float64).to(x_in.device())).reshape(ishape);
  // NaN counts as the extreme (max and min propagate it), as in NumPy and PyTorch.
  const Tensor x = x_in.cast(is_float(x_in.dtype()) ? x_in.dtype() : DType::float64);
  const Tensor hit = where(x.ne(x), rev, where(x.eq(m.cast(x.dtype())), rev, 0.0));
  return (double(n) - hit.max({d}, keepdim)).cast(DType::int64);
}
}  // namespace

Tensor Tensor::argmax(int64_t axis, bool keepdim) const {
  return arg_extreme(*this, axis, keepdim, true, "argmax");
}
Tensor Tensor::logsumexp(const std::vector<int64_t>& axes, bool keepdim) const {
  const Axes a = norm_axes(*this, axes, "logsumexp");
  const std::vector<int64_t> all(a.begin(), a.end());
  return ops_detail::in_compute(*this, [&](const Tensor& x) {
    // The shift is a constant for autograd (the gradient is then exp(x - lse), the softmax); an
    // infinite maximum shifts by 0, so that -inf rows stay -inf and +inf is not inf - inf.
    const Tensor m = x.max(all, true).detach();
    const Tensor shift = where(m.isfinite(), m, 0.0);
    return drop_axes((x - shift).exp().sum(all, true).log() + shift, a, keepdim);
  });
}

Tensor Tensor::argmin(int64_t axis, bool keepdim) const {
  return arg_extreme(*this, axis, keepdim, false, "argmin");
}

}  // namespace aether
