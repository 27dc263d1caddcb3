// Rows by index (Gather) and its gradient (ScatterAdd), in batches. One implementation, which the
// reference backend and the fused executor both run: a gather is row copies (nothing beats memcpy),
// and the scatter's plain loop is its own oracle. Indices are checked before anything is written.
#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "backend/cpu/kernels.h"

namespace aether::cpu {
namespace {
void check_indices(const char* op, const int64_t* idx, int64_t count, int64_t n) {
  for (int64_t k = 0; k < count; ++k)
    if (idx[k] < 0 || idx[k] >= n)
      throw Error(detail::cat(op, ": index ", idx[k], " is out of bounds for an axis of size ", n),
                  ErrorKind::index);
}
}  // namespace

// y (B,M,D) = x (B,N,D)[b, idx (B,M)], any dtype: row (b,m) of y is row idx[b,m] of batch b of x.
void gather_rows(DType dtype, const void* x, const int64_t* idx, void* y, const RowsGeom& g) {
  check_indices("gather", idx, g.b * g.m, g.n);
  const size_t row = size_t(g.d) * dtype_size(dtype);
  const char* xs = static_cast<const char*>(x);
  char* ys = static_cast<char*>(y);
  const int64_t rows = g.b * g.m;
#pragma omp parallel for schedule(static) if (int64_t(row) * rows > (int64_t(1) << 18))
  for (int64_t k = 0; k < rows; ++k)
    std::memcpy(ys + size_t(k) * row, xs + size_t(k / g.m * g.n + idx[k]) * row, row);
}

// dx (B,N,D) = 0, then dx[b, idx[b,m]] += dy[b,m] for m in order (float dtypes). Each task owns a
// batch's block of columns and walks every m, so repeated indices sum in m order whatever the thread
// count. Sums are in the dtype (float32, float64) or in float32, rounded once (16-bit floats).
void scatter_add_rows(DType dtype, const void* dy, const int64_t* idx, void* dx, const RowsGeom& g) {
  check_indices("scatter_add", idx, g.b * g.m, g.n);
  dispatch_float(dtype, "scatter_add", [&](auto tag) {
    using T = decltype(tag);
    using A = std::conditional_t<std::is_same_v<T, double>, double, float>;
    const T* gy = static_cast<const T*>(dy);
    T* out = static_cast<T*>(dx);
    const int64_t size = g.b * g.n * g.d;
    std::vector<A> wide;  // (B,N,D): the 16-bit floats' sums
    A* acc = nullptr;
    if constexpr (std::is_same_v<T, A>) {
      acc = out;
    } else {
      wide.resize(size_t(size));
      acc = wide.data();
    }
    std::fill(acc, acc + size, A(0));
    constexpr int64_t kCols = 512;  // columns per task
    const int64_t blocks = (g.d + kCols - 1) / kCols, tasks = g.b * blocks;
#pragma omp parallel for schedule(static) if (tasks > 1 && g.b * g.m * g.d > (int64_t(1) << 16))
    for (int64_t t = 0; t < tasks; ++t) {
      const int64_t b = t / blocks, c0 = t % blocks * kCols, c1 = std::min(g.d, c0 + kCols);
      for (int64_t k = b * g.m; k < (b + 1) * g.m; ++k) {
        const T* src = gy + k * g.d;
        A* dst = acc + (b * g.n + idx[k]) * g.d;
        for (int64_t c = c0; c < c1; ++c) dst[c] += static_cast<A>(src[c]);  // float64 stays float64
      }
    }
    if constexpr (!std::is_same_v<T, A>)
      for (int64_t i = 0; i < size; ++i) out[i] = T(acc[i]);
  });
}

}  // namespace aether::cpu
