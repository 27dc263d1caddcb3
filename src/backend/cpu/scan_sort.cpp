// Prefix sums (Cumsum) and stable sorting orders (Argsort) along the rows of a (N,L) buffer. One
// implementation, which the reference backend and the fused executor both run: each row is a plain
// sequential loop (the scan) or std::stable_sort (the order), rows in parallel.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>

#include "backend/cpu/kernels.h"

namespace aether::cpu {
namespace {
template <typename T>
constexpr bool is_float_storage =
    std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;
// A double rounded once to T (16-bit floats through float_round_odd: no double rounding).
template <typename T>
T round_to(double v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    return T(float_round_odd(v));
  else
    return T(v);
}
}  // namespace

// y (N,L) = running sums of x (N,L) along each row.
void cumsum_rows(DType dtype, const void* x, void* y, int64_t n, int64_t l) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (is_float_storage<T>) {
      const T* xs = static_cast<const T*>(x);
      T* ys = static_cast<T*>(y);
#pragma omp parallel for schedule(static) if (n > 1 && n * l > (int64_t(1) << 16))
      for (int64_t r = 0; r < n; ++r) {
        double acc = 0;  // narrower floats: every prefix sum rounded once
        for (int64_t i = r * l; i < (r + 1) * l; ++i) ys[i] = round_to<T>(acc += double(xs[i]));
      }
    } else if constexpr (std::is_same_v<T, int64_t>) {
      const uint64_t* xs = static_cast<const uint64_t*>(x);  // unsigned: wraps, never overflows
      uint64_t* ys = static_cast<uint64_t*>(y);
#pragma omp parallel for schedule(static) if (n > 1 && n * l > (int64_t(1) << 16))
      for (int64_t r = 0; r < n; ++r) {
        uint64_t acc = 0;
        for (int64_t i = r * l; i < (r + 1) * l; ++i) ys[i] = acc += xs[i];
      }
    } else {
      throw Error(detail::cat("cumsum: sums floats and int64, got ", dtype_name(dtype)), ErrorKind::type);
    }
  });
}

// idx (N,L) = the stable sorting order of each row of x (N,L).
void argsort_rows(DType dtype, const void* x, int64_t* idx, int64_t n, int64_t l, bool descending) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C = std::conditional_t<is_float_storage<T>, double, T>;  // compared as (exact for every float)
    const T* xs = static_cast<const T*>(x);
#pragma omp parallel for schedule(static) if (n > 1 && n * l > (int64_t(1) << 14))
    for (int64_t r = 0; r < n; ++r) {
      const T* row = xs + r * l;
      int64_t* out = idx + r * l;
      std::iota(out, out + l, int64_t(0));
      auto key = [&](int64_t i) { return C(row[i]); };
      // a before b: NaN is the largest value, and a NaN never precedes another one (a strict order).
      auto less = [&](int64_t a, int64_t b) {
        const C u = key(a), v = key(b);
        if constexpr (is_float_storage<T>) {
          if (std::isnan(u) || std::isnan(v)) return !std::isnan(u);
        }
        return u < v;
      };
      if (descending)
        std::stable_sort(out, out + l, [&](int64_t a, int64_t b) { return less(b, a); });
      else
        std::stable_sort(out, out + l, less);
    }
  });
}

}  // namespace aether::cpu
