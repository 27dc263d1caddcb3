// aether/core/shape.h - Shape (up to 8 dims) and View: how a tensor's elements sit in a buffer.
//
// A View maps a multi-index i (0 <= i[d] < shape[d]) to a buffer element
//     offset + sum_d i[d] * strides[d]          (strides in elements, may be 0 or negative)
// and, when `mask` is set, to "no element" (reads as 0) outside the box mask[d] = [lo, hi).
// Every movement op (reshape, permute, expand, slice with step, pad, flip) is a View -> View
// function: it never copies. Only a reshape of a view whose dims cannot be merged/split in place
// returns std::nullopt, and the caller then copies to a contiguous buffer first.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace aether {

constexpr int kMaxDims = 8;
constexpr int64_t kMaxElements = int64_t(1) << 60;  // so that numel * dtype_size fits in int64

using Shape = std::vector<int64_t>;

int64_t numel(const Shape& s);
std::string to_string(const Shape& s);  // "(2, 3, 4)"
Shape contiguous_strides(const Shape& s);
// Throws aether::Error naming `op` when s has more than kMaxDims dims, a negative size or more
// than kMaxElements elements.
void check_shape(const Shape& s, const char* op);
// Normalises a possibly negative axis for a tensor of `ndim` dims; throws naming `op`.
int normalize_axis(int64_t axis, int ndim, const char* op);
// NumPy broadcast of two shapes; throws naming `op` on mismatch.
Shape broadcast_shapes(const Shape& a, const Shape& b, const char* op);

struct View {
  Shape shape;
  Shape strides;
  int64_t offset = 0;
  // Optional validity box: element i is real iff mask[d].first <= i[d] < mask[d].second for all d.
  std::optional<std::vector<std::pair<int64_t, int64_t>>> mask;

  static View contiguous(const Shape& shape, int64_t offset = 0);
  int ndim() const { return int(shape.size()); }
  int64_t numel() const { return aether::numel(shape); }
  bool is_contiguous() const;  // row-major, dense, no mask

  // Movement ops. Arguments are already validated by the caller (the tensor op).
  std::optional<View> reshape(const Shape& new_shape) const;
  View permute(const std::vector<int>& perm) const;
  View expand(const Shape& new_shape) const;  // size-1 dims only, stride becomes 0
  View slice(const std::vector<int64_t>& start, const std::vector<int64_t>& stop,
             const std::vector<int64_t>& step) const;  // step >= 1, stop clamped by caller
  View pad(const std::vector<int64_t>& before, const std::vector<int64_t>& after) const;
  View flip(const std::vector<int>& axes) const;

  // Buffer element index of the multi-index `idx`, or -1 when masked out.
  int64_t index(const int64_t* idx) const;
  // The lowest and highest buffer element the view may touch (for bounds checks).
  std::pair<int64_t, int64_t> extent() const;
};

std::ostream& operator<<(std::ostream& os, const View& v);

}  // namespace aether
