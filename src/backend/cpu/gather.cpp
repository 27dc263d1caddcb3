// Rows by index (Gather) and its gradient (ScatterAdd). One implementation, which the reference
// backend and the fused executor both run: a gather is row copies (nothing beats memcpy), and the
// scatter's plain loop is its own oracle. Indices are checked before anything is written.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/kernels.h"

namespace aether::cpu {
namespace {
void check_indices(const char* op, const int64_t* idx, int64_t m, int64_t n) {
  for (int64_t k = 0; k < m; ++k)
    if (idx[k] < 0 || idx[k] >= n)
      throw Error(detail::cat(op, ": index ", idx[k], " is out of bounds for an axis of size ", n),
                  ErrorKind::index);
}
}  // namespace

// y (M,D) = x (N,D)[idx (M)], any dtype: row m of y is row idx[m] of x.
void gather_rows(DType dtype, const void* x, const int64_t* idx, void* y, int64_t n, int64_t m, int64_t d) {
  check_indices("gather", idx, m, n);
  const size_t row = size_t(d) * dtype_size(dtype);
  const char* xs = static_cast<const char*>(x);
  char* ys = static_cast<char*>(y);
#pragma omp parallel for schedule(static) if (int64_t(row) * m > (int64_t(1) << 18))
  for (int64_t k = 0; k < m; ++k) std::memcpy(ys + size_t(k) * row, xs + size_t(idx[k]) * row, row);
}

// dx (N,D) = 0, then dx[idx[m]] += dy[m] for m in order (float dtypes). Each task owns a block of
// columns and walks every m, so repeated indices sum in m order whatever the thread count. Sums are
// in the dtype (float32, float64) or in float32, rounded once (16-bit floats).
void scatter_add_rows(DType dtype, const void* dy, const int64_t* idx, void* dx, int64_t n, int64_t m,
                      int64_t d) {
  check_indices("scatter_add", idx, m, n);
  dispatch_float(dtype, "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* g = static_cast<const T*>(dy);
    T* out = static_cast<T*>(dx);
    std::vector<A> wide;  // (N, D): the 16-bit floats' sums
    A* acc = nullptr;
    if constexpr (std::is_same_v<T, A>) {
      acc = out;
    } else {
      wide.resize(size_t(n * d));
      acc = wide.data();
    }
    std::fill(acc, acc + n * d, A(0));
    constexpr int64_t kCols = 512;  // columns per task
    const int64_t blocks = (d + kCols - 1) / kCols;
#pragma omp parallel for schedule(static) if (blocks > 1 && m * d > (int64_t(1) << 16))
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t c0 = b * kCols, c1 = std::min(d, c0 + kCols);
      for (int64_t k = 0; k < m; ++k) {
        const T* src = g + k * d;
        A* dst = acc + idx[k] * d;
        for (int64_t c = c0; c < c1; ++c) dst[c] += A(float(src[c]));
      }
    }
    if constexpr (!std::is_same_v<T, A>)
      for (int64_t i = 0; i < n * d; ++i) out[i] = T(acc[i]);
  });
}

}  // namespace aether::cpu
