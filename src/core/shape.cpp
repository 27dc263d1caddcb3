// Shape helpers and View movement ops (pure index arithmetic, never a copy).
#include "aether/core/shape.h"

#include <algorithm>
#include <limits>
#include <ostream>
#include <sstream>

#include "aether/core/error.h"

namespace aether {

int64_t numel(const Shape& s) {
  // An empty shape's other dims may multiply past int64 (check_shape allows any size beside a 0).
  if (std::find(s.begin(), s.end(), 0) != s.end()) return 0;
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

std::string to_string(const Shape& s) {
  std::ostringstream os;
  os << '(';
  for (size_t i = 0; i < s.size(); ++i) os << (i ? ", " : "") << s[i];
  if (s.size() == 1) os << ',';
  os << ')';
  return os.str();
}

Shape contiguous_strides(const Shape& s) {
  Shape st(s.size());
  int64_t acc = 1;
  for (int i = int(s.size()) - 1; i >= 0; --i) {
    st[i] = acc;
    // An empty tensor's dims may multiply past int64; its strides are never used: saturate.
    if (__builtin_mul_overflow(acc, std::max<int64_t>(s[i], 1), &acc))
      acc = std::numeric_limits<int64_t>::max();
  }
  return st;
}

void check_shape(const Shape& s, const char* op) {
  AETHER_CHECK(s.size() <= size_t(kMaxDims), op, "shape ", to_string(s), " has ", s.size(), " dims; at most ",
               kMaxDims, " are supported");
  for (int64_t d : s) AETHER_CHECK(d >= 0, op, "shape ", to_string(s), " has a negative size");
  // Every element index and byte count must fit in int64: at most 2^60 elements (8-byte dtypes).
  // An empty shape's product is 0 however large its other dims.
  if (std::find(s.begin(), s.end(), 0) != s.end()) return;
  int64_t n = 1;
  for (int64_t d : s)
    AETHER_CHECK(!__builtin_mul_overflow(n, d, &n) && n <= kMaxElements, op, "shape ", to_string(s),
                 " has more elements than a tensor can hold (at most 2^60)");
}

int normalize_axis(int64_t axis, int ndim, const char* op) {
  AETHER_CHECK(axis >= -ndim && axis < ndim, op, "axis ", axis, " is out of range for a tensor with ", ndim,
               " dims (expected ", -ndim, " <= axis < ", ndim, ")");
  return int(axis < 0 ? axis + ndim : axis);
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op) {
  const size_t n = std::max(a.size(), b.size());
  Shape out(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < n - a.size() ? 1 : a[i - (n - a.size())];
    const int64_t db = i < n - b.size() ? 1 : b[i - (n - b.size())];
    AETHER_CHECK(da == db || da == 1 || db == 1, op, "shapes ", to_string(a), " and ", to_string(b),
                 " cannot be broadcast together (dim ", i, ": ", da, " vs ", db, ")");
    out[i] = da == 1 ? db : da;
  }
  return out;
}

View View::contiguous(const Shape& shape, int64_t offset) {
  View v;
  v.shape = shape;
  v.strides = contiguous_strides(shape);
  v.offset = offset;
  return v;
}

bool View::is_contiguous() const {
  if (mask) return false;
  int64_t acc = 1;
  for (int i = ndim() - 1; i >= 0; --i) {
    if (shape[i] != 1 && strides[i] != acc) return false;
    acc *= shape[i];
  }
  return true;
}

std::optional<View> View::reshape(const Shape& new_shape) const {
  if (new_shape == shape) return *this;
  if (numel() == 0) return View::contiguous(new_shape, offset);
  if (mask) {
    // A masked view can only be reshaped if the mask covers everything (then it is not needed).
    for (int d = 0; d < ndim(); ++d)
      if ((*mask)[d].first != 0 || (*mask)[d].second != shape[d]) return std::nullopt;
  }
  // Drop size-1 dims, then match groups of old dims to groups of new dims with equal products;
  // each old group must be "mergeable" (stride[i] == stride[i+1] * shape[i+1]).
  std::vector<int64_t> os, ost;
  for (int d = 0; d < ndim(); ++d)
    if (shape[d] != 1) {
      os.push_back(shape[d]);
      ost.push_back(strides[d]);
    }
  View out;
  out.shape = new_shape;
  out.strides.assign(new_shape.size(), 0);
  out.offset = offset;
  size_t oi = 0, ni = 0;
  while (ni < new_shape.size() || oi < os.size()) {
    if (ni < new_shape.size() && new_shape[ni] == 1) {
      out.strides[ni++] = 0;
      continue;
    }
    if (oi >= os.size() || ni >= new_shape.size()) return std::nullopt;
    // Take the smallest old group [oi, oj) and new group [ni, nj) with equal products.
    size_t oj = oi + 1, nj = ni + 1;
    int64_t po = os[oi], pn = new_shape[ni];
    while (po != pn) {
      if (po < pn) {
        if (oj >= os.size()) return std::nullopt;
        po *= os[oj++];
      } else {
        if (nj >= new_shape.size()) return std::nullopt;
        pn *= new_shape[nj++];
      }
    }
    for (size_t k = oi; k + 1 < oj; ++k)
      if (ost[k] != ost[k + 1] * os[k + 1]) return std::nullopt;  // group not mergeable in place
    // The merged group has the innermost stride; split it over the new dims.
    int64_t st = ost[oj - 1];
    for (size_t k = nj; k-- > ni;) {
      out.strides[k] = new_shape[k] == 1 ? 0 : st;
      st *= new_shape[k];
    }
    oi = oj;
    ni = nj;
  }
  return out;
}

View View::permute(const std::vector<int>& perm) const {
  View out;
  out.offset = offset;
  out.shape.resize(perm.size());
  out.strides.resize(perm.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    out.shape[i] = shape[perm[i]];
    out.strides[i] = strides[perm[i]];
  }
  if (mask) {
    out.mask.emplace(perm.size());
    for (size_t i = 0; i < perm.size(); ++i) (*out.mask)[i] = (*mask)[perm[i]];
  }
  return out;
}

View View::expand(const Shape& new_shape) const {
  View out = *this;
  out.shape = new_shape;
  for (int d = 0; d < ndim(); ++d)
    if (shape[d] == 1 && new_shape[d] != 1) {
      out.strides[d] = 0;
      if (out.mask) {
        auto& m = (*out.mask)[d];
        m = (m.first == 0 && m.second == 1) ? std::make_pair(int64_t(0), new_shape[d])
                                            : std::make_pair(int64_t(0), int64_t(0));
      }
    }
  return out;
}

View View::slice(const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
                 const std::vector<int64_t>& step) const {
  View out = *this;
  for (int d = 0; d < ndim(); ++d) {
    const int64_t n = stop[d] > start[d] ? (stop[d] - start[d] + step[d] - 1) / step[d] : 0;
    out.shape[d] = n;
    out.offset += start[d] * strides[d];
    out.strides[d] = strides[d] * step[d];
    if (mask) {
      // New index j maps to old index start + j*step; valid iff lo <= start + j*step < hi.
      auto [lo, hi] = (*mask)[d];
      int64_t jlo = lo <= start[d] ? 0 : (lo - start[d] + step[d] - 1) / step[d];
      int64_t jhi = hi <= start[d] ? 0 : (hi - start[d] + step[d] - 1) / step[d];
      jlo = std::min(jlo, n);
      jhi = std::clamp(jhi, jlo, n);
      (*out.mask)[d] = {jlo, jhi};
    }
  }
  return out;
}

View View::pad(const std::vector<int64_t>& before, const std::vector<int64_t>& after) const {
  View out = *this;
  if (!out.mask) {
    out.mask.emplace(ndim());
    for (int d = 0; d < ndim(); ++d) (*out.mask)[d] = {0, shape[d]};
  }
  for (int d = 0; d < ndim(); ++d) {
    out.shape[d] = shape[d] + before[d] + after[d];
    out.offset -= before[d] * strides[d];
    auto& m = (*out.mask)[d];
    m = {m.first + before[d], m.second + before[d]};
  }
  return out;
}

View View::flip(const std::vector<int>& axes) const {
  View out = *this;
  for (int d : axes) {
    out.offset += (shape[d] - 1) * strides[d];
    out.strides[d] = -strides[d];
    if (out.mask) {
      auto [lo, hi] = (*out.mask)[d];
      (*out.mask)[d] = {shape[d] - hi, shape[d] - lo};
    }
  }
  return out;
}

int64_t View::index(const int64_t* idx) const {
  int64_t off = offset;
  if (mask) {
    for (int d = 0; d < ndim(); ++d) {
      if (idx[d] < (*mask)[d].first || idx[d] >= (*mask)[d].second) return -1;
      off += idx[d] * strides[d];
    }
    return off;
  }
  for (int d = 0; d < ndim(); ++d) off += idx[d] * strides[d];
  return off;
}

std::pair<int64_t, int64_t> View::extent() const {
  int64_t lo = offset, hi = offset;
  for (int d = 0; d < ndim(); ++d) {
    int64_t a = 0, b = shape[d] - 1;
    if (mask) {
      a = (*mask)[d].first;
      b = (*mask)[d].second - 1;
    }
    if (b < a) return {offset, offset - 1};  // empty
    lo += std::min(a * strides[d], b * strides[d]);
    hi += std::max(a * strides[d], b * strides[d]);
  }
  return {lo, hi};
}

std::ostream& operator<<(std::ostream& os, const View& v) {
  os << "View(shape=" << to_string(v.shape) << ", strides=" << to_string(v.strides)
     << ", offset=" << v.offset;
  if (v.mask) {
    os << ", mask=[";
    for (size_t i = 0; i < v.mask->size(); ++i)
      os << (i ? ", " : "") << '[' << (*v.mask)[i].first << ',' << (*v.mask)[i].second << ')';
    os << ']';
  }
  return os << ')';
}

}  // namespace aether
