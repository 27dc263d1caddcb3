// Internal: row-wise iteration over K strided views (the reference backend's fast path).
//
// An elementwise kernel over an output of shape S reads K sources through Views. Dims that are
// laid out contiguously for every operand are merged first (a dense (256,32,32,32) tensor is one
// row of 8M elements), then the rows are walked in parallel blocks; for each row the kernel gets
// the output position, the row length and each source's starting offset, and loops with each
// source's inner stride (0 for a broadcast, 1 for contiguous). Masked (padded) views are not
// handled here: callers fall back to per-element index arithmetic for those.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

#include "aether/core/shape.h"

namespace aether::cpu {

template <size_t K>
struct RowPlan {
  Shape shape;                       // merged dims, at least one
  std::array<Shape, K> strides;      // per source, per merged dim
  std::array<int64_t, K> offsets{};  // per source
  int64_t inner() const { return shape.back(); }
  int64_t inner_stride(size_t k) const { return strides[k].back(); }
};

template <size_t K>
bool any_masked(const std::array<const View*, K>& views) {
  for (const View* v : views)
    if (v->mask) return true;
  return false;
}

// Merges dims d, d+1 where every source has stride[d] == stride[d+1] * shape[d+1] (the output,
// dense row-major, always does). Size-1 dims are dropped first.
template <size_t K>
RowPlan<K> plan_rows(const Shape& shape, const std::array<const View*, K>& views) {
  RowPlan<K> p;
  for (size_t k = 0; k < K; ++k) p.offsets[k] = views[k]->offset;
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 1) continue;
    const bool merge = !p.shape.empty() && [&] {
      for (size_t k = 0; k < K; ++k)
        if (p.strides[k].back() != views[k]->strides[d] * shape[d]) return false;
      return true;
    }();
    if (merge) {
      p.shape.back() *= shape[d];
      for (size_t k = 0; k < K; ++k) p.strides[k].back() = views[k]->strides[d];
    } else {
      p.shape.push_back(shape[d]);
      for (size_t k = 0; k < K; ++k) p.strides[k].push_back(views[k]->strides[d]);
    }
  }
  if (p.shape.empty()) {
    p.shape.push_back(1);
    for (size_t k = 0; k < K; ++k) p.strides[k].push_back(0);
  }
  return p;
}

// Calls row(first output index, length, source offsets) for every row, in parallel blocks of
// about 16K elements. Blocks depend only on the shape, never on the thread count.
template <size_t K, typename Row>
void for_each_row(const RowPlan<K>& p, Row&& row) {
  const int nd = int(p.shape.size());
  const int64_t inner = p.inner();
  const int64_t rows = numel(p.shape) / std::max<int64_t>(inner, 1);
  if (inner == 0 || rows == 0) return;
  const int64_t per_block = std::max<int64_t>(1, (int64_t(1) << 14) / inner);
  const int64_t blocks = (rows + per_block - 1) / per_block;
#pragma omp parallel for schedule(static) if (blocks > 1)
  for (int64_t b = 0; b < blocks; ++b) {
    const int64_t r0 = b * per_block, r1 = std::min(rows, r0 + per_block);
    int64_t idx[kMaxDims] = {0};
    std::array<int64_t, K> off = p.offsets;
    for (int64_t r = r0, d = nd - 2; d >= 0; --d) {  // unravel the first row over the outer dims
      idx[d] = r % p.shape[size_t(d)];
      r /= p.shape[size_t(d)];
      for (size_t k = 0; k < K; ++k) off[k] += idx[d] * p.strides[k][size_t(d)];
    }
    for (int64_t r = r0; r < r1; ++r) {
      row(r * inner, inner, off);
      for (int d = nd - 2; d >= 0; --d) {  // next row: increment the outer multi-index
        for (size_t k = 0; k < K; ++k) off[k] += p.strides[k][size_t(d)];
        if (++idx[d] < p.shape[size_t(d)]) break;
        for (size_t k = 0; k < K; ++k) off[k] -= idx[d] * p.strides[k][size_t(d)];
        idx[d] = 0;
      }
    }
  }
}

}  // namespace aether::cpu
