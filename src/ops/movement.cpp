// Movement tensor ops (views), cat and stack, and matmul's batching on top of the primitives.
#include <algorithm>

#include "aether/graph/primitives.h"

namespace aether {

Tensor Tensor::reshape(const Shape& shape_in) const {
  Shape s = shape_in;
  int infer = -1;
  int64_t known = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      AETHER_CHECK(infer < 0, "reshape", "only one dim may be -1, got ", to_string(shape_in));
      infer = int(i);
    } else {
      AETHER_CHECK(s[i] >= 0, "reshape", "bad size in ", to_string(shape_in));
      AETHER_CHECK(!__builtin_mul_overflow(known, s[i], &known), "reshape", "shape ", to_string(shape_in),
                   " has more elements than a tensor can hold (at most 2^60)");
    }
  }
  if (infer >= 0) {
    AETHER_CHECK(known > 0 && numel() % known == 0, "reshape", "cannot reshape ", to_string(shape()), " (",
                 numel(), " elements) to ", to_string(shape_in));
    s[infer] = numel() / known;
  }
  return prim::reshape(*this, s);
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  if (ndim() == 0) return reshape({1});
  const int s = normalize_axis(start, ndim(), "flatten"), e = normalize_axis(end, ndim(), "flatten");
  AETHER_CHECK(s <= e, "flatten", "start axis ", start, " is after end axis ", end);
  Shape out(shape().begin(), shape().begin() + s);
  int64_t m = 1;
  for (int d = s; d <= e; ++d) m *= shape()[d];
  out.push_back(m);
  out.insert(out.end(), shape().begin() + e + 1, shape().end());
  return reshape(out);
}

Tensor Tensor::permute(const std::vector<int64_t>& perm) const {
  AETHER_CHECK(int(perm.size()) == ndim(), "permute", "got ", perm.size(), " axes for a tensor of shape ",
               to_string(shape()));
  Axes p;
  for (int64_t a : perm) p.push_back(normalize_axis(a, ndim(), "permute"));
  return prim::permute(*this, p);
}

Tensor Tensor::transpose(int64_t a, int64_t b) const {
  const int x = normalize_axis(a, ndim(), "transpose"), y = normalize_axis(b, ndim(), "transpose");
  Axes p(static_cast<size_t>(ndim()));
  for (int i = 0; i < ndim(); ++i) p[i] = i;
  std::swap(p[x], p[y]);
  return prim::permute(*this, p);
}

Tensor Tensor::expand(const Shape& s) const {
  AETHER_CHECK(s.size() >= shape().size(), "expand", "cannot expand ", to_string(shape()), " to fewer dims ",
               to_string(s));
  Shape padded(s.size() - shape().size(), 1);
  padded.insert(padded.end(), shape().begin(), shape().end());
  for (size_t d = 0; d < s.size(); ++d)
    AETHER_CHECK(padded[d] == s[d] || padded[d] == 1, "expand", "cannot broadcast ", to_string(shape()),
                 " to ", to_string(s));
  return prim::expand(prim::reshape(*this, padded), s);
}

Tensor Tensor::slice(int64_t axis, int64_t start, int64_t stop, int64_t step) const {
  const int d = normalize_axis(axis, ndim(), "slice");
  const int64_t n = shape()[d];
  AETHER_CHECK(step != 0, "slice", "step must not be 0");
  if (step < 0) {
    // x[start:stop:step] with step < 0 == flip, then a positive-step slice.
    // Python semantics: defaults are handled by the caller passing explicit values.
    auto clampi = [&](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t(-1), n - 1); };
    const int64_t s0 = clampi(start), s1 = clampi(stop);
    if (s0 <= s1) return slice(d, 0, 0);
    // Elements s0, s0+step, ... > s1 ; in flipped coordinates j = n-1-i.
    return flip({d}).slice(d, n - 1 - s0, n - 1 - s1, -step);
  }
  auto clampi = [&](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t(0), n); };
  const int64_t s0 = clampi(start), s1 = std::max(clampi(stop), s0);
  SliceArg a{std::vector<int64_t>(size_t(ndim()), 0), shape(), std::vector<int64_t>(size_t(ndim()), 1)};
  a.start[d] = s0;
  a.stop[d] = s1;
  a.step[d] = step;
  return prim::slice(*this, a);
}

Tensor Tensor::pad(const std::vector<std::pair<int64_t, int64_t>>& pads) const {
  AETHER_CHECK(int(pads.size()) == ndim(), "pad", "expected ", ndim(), " (before, after) pairs for shape ",
               to_string(shape()), ", got ", pads.size());
  PadArg a;
  for (auto [b, e] : pads) {
    a.before.push_back(b);
    a.after.push_back(e);
  }
  return prim::pad(*this, a);
}

Tensor Tensor::flip(const std::vector<int64_t>& axes) const {
  Axes a;
  for (int64_t x : axes) a.push_back(normalize_axis(x, ndim(), "flip"));
  std::sort(a.begin(), a.end());
  AETHER_CHECK(std::adjacent_find(a.begin(), a.end()) == a.end(), "flip", "repeated axis");
  return prim::flip(*this, a);
}

Tensor Tensor::squeeze(std::optional<int64_t> axis) const {
  Shape out;
  if (axis) {
    const int d = normalize_axis(*axis, ndim(), "squeeze");
    AETHER_CHECK(shape()[d] == 1, "squeeze", "dim ", d, " of shape ", to_string(shape()), " is not 1");
    out = shape();
    out.erase(out.begin() + d);
  } else {
    for (int64_t s : shape())
      if (s != 1) out.push_back(s);
  }
  return reshape(out);
}

Tensor Tensor::unsqueeze(int64_t axis) const {
  const int d = normalize_axis(axis < 0 ? axis + ndim() + 1 : axis, ndim() + 1, "unsqueeze");
  Shape out = shape();
  out.insert(out.begin() + d, 1);
  return reshape(out);
}

Tensor Tensor::contiguous() const {
  if (is_realized() && node()->view.is_contiguous()) return *this;
  return prim::unary(Op::Copy, *this);
}

Tensor Tensor::clone() const { return prim::unary(Op::Copy, *this); }

Tensor cat(const std::vector<Tensor>& ts, int64_t axis) {
  AETHER_CHECK(!ts.empty(), "cat", "expected at least one tensor");
  const int nd = ts[0].ndim();
  const int d = normalize_axis(axis, nd, "cat");
  DType t = ts[0].dtype();
  int64_t total = 0;
  for (const auto& x : ts) {
    AETHER_CHECK(x.ndim() == nd, "cat", "tensors have different numbers of dims: ", to_string(ts[0].shape()),
                 " and ", to_string(x.shape()));
    for (int i = 0; i < nd; ++i)
      AETHER_CHECK(i == d || x.shape()[i] == ts[0].shape()[i], "cat", "shapes ", to_string(ts[0].shape()),
                   " and ", to_string(x.shape()), " differ outside axis ", d);
    t = promote(t, x.dtype());
    total += x.shape()[d];
  }
  // Each piece is padded with zeros to the full length and the pieces are summed: only pads and
  // adds, so the scheduler can fuse a cat into its consumer.
  Tensor out;
  int64_t at = 0;
  for (const auto& x : ts) {
    std::vector<std::pair<int64_t, int64_t>> p(size_t(nd), {0, 0});
    p[d] = {at, total - at - x.shape()[d]};
    at += x.shape()[d];
    Tensor piece = x.cast(t).pad(p);
    out = out.defined() ? out + piece : piece;
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& ts, int64_t axis) {
  AETHER_CHECK(!ts.empty(), "stack", "expected at least one tensor");
  const int d = normalize_axis(axis < 0 ? axis + ts[0].ndim() + 1 : axis, ts[0].ndim() + 1, "stack");
  std::vector<Tensor> parts;
  for (const auto& x : ts) {
    AETHER_CHECK(x.shape() == ts[0].shape(), "stack", "shapes differ: ", to_string(ts[0].shape()), " and ",
                 to_string(x.shape()));
    parts.push_back(x.unsqueeze(d));
  }
  return cat(parts, d);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  AETHER_CHECK(a.ndim() >= 1 && b.ndim() >= 1, "matmul", "scalars cannot be multiplied as matrices");
  // Promote 1-D operands like NumPy: (K) -> (1, K) on the left, (K, 1) on the right.
  Tensor x = a.ndim() == 1 ? a.unsqueeze(0) : a;
  Tensor y = b.ndim() == 1 ? b.unsqueeze(1) : b;
  const int64_t M = x.shape()[x.ndim() - 2], K = x.shape()[x.ndim() - 1];
  const int64_t K2 = y.shape()[y.ndim() - 2], N = y.shape()[y.ndim() - 1];
  AETHER_CHECK(K == K2, "matmul", "inner dims differ: ", to_string(a.shape()), " x ", to_string(b.shape()),
               " (", K, " vs ", K2, ")");
  const Shape xb(x.shape().begin(), x.shape().end() - 2), yb(y.shape().begin(), y.shape().end() - 2);
  const Shape batch = broadcast_shapes(xb, yb, "matmul");
  const DType t = promote(a.dtype(), b.dtype());
  Shape xs = batch, ys = batch;
  xs.insert(xs.end(), {M, K});
  ys.insert(ys.end(), {K, N});
  const int64_t B = numel(batch);
  Tensor r = prim::matmul(x.cast(t).expand(xs).reshape({B, M, K}), y.cast(t).expand(ys).reshape({B, K, N}));
  Shape out = batch;
  if (a.ndim() > 1) out.push_back(M);
  if (b.ndim() > 1) out.push_back(N);
  return r.reshape(out);
}
Tensor Tensor::matmul(const Tensor& o) const { return aether::matmul(*this, o); }

}  // namespace aether
