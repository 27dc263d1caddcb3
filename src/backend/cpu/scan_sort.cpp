// Prefix sums (Cumsum), prefix products (Cumprod, and its gradient CumprodBwd) and stable sorting
// orders (Argsort) along the rows of a (N,L) buffer. One implementation, which the reference backend
// and the fused executor both run: each row is a plain sequential loop (the scans) or
// std::stable_sort (the order; std::partial_sort for its first few positions), rows in parallel.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <type_traits>
#include <vector>

#include "backend/cpu/kernels.h"

namespace aether::cpu {
namespace {
// A double rounded once to T (16-bit floats through float_round_odd: no double rounding).
template <typename T>
T round_to(double v) {
  if constexpr (std::is_same_v<T, half> || std::is_same_v<T, bfloat16>)
    return T(float_round_odd(v));
  else
    return T(v);
}

// y (N,L) = the running `step` (a sum, a product) of each row of x (N,L), from `init`: floats in
// double, each result rounded once to T (narrower floats do not round every partial result); int64
// as uint64 (wrapping, never overflowing). `refusal` is the error for other dtypes.
template <typename Step>
void scan_rows(DType dtype, const void* x, void* y, int64_t n, int64_t l, int init, Step step,
               const char* refusal) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatStorage<T> || std::is_same_v<T, int64_t>) {
      using S = std::conditional_t<kIsFloatStorage<T>, T, uint64_t>;       // the stored type
      using A = std::conditional_t<kIsFloatStorage<T>, double, uint64_t>;  // the accumulator
      const S* xs = static_cast<const S*>(x);
      S* ys = static_cast<S*>(y);
#pragma omp parallel for schedule(static) if (n > 1 && n * l > (int64_t(1) << 16))
      for (int64_t r = 0; r < n; ++r) {
        A acc = A(init);
        for (int64_t i = r * l; i < (r + 1) * l; ++i) {
          acc = step(acc, A(xs[i]));
          if constexpr (kIsFloatStorage<T>)
            ys[i] = round_to<T>(acc);
          else
            ys[i] = acc;
        }
      }
    } else {
      throw Error(detail::cat(refusal, dtype_name(dtype)), ErrorKind::type);
    }
  });
}
}  // namespace

// y (N,L) = running sums of x (N,L) along each row.
void cumsum_rows(DType dtype, const void* x, void* y, int64_t n, int64_t l) {
  scan_rows(
      dtype, x, y, n, l, 0, [](auto a, auto b) { return a + b; }, "cumsum: sums floats and int64, got ");
}

// y (N,L) = running products of x (N,L) along each row (as cumsum: double, int64 wrapping).
void cumprod_rows(DType dtype, const void* x, void* y, int64_t n, int64_t l) {
  scan_rows(
      dtype, x, y, n, l, 1, [](auto a, auto b) { return a * b; },
      "cumprod: multiplies floats and int64, got ");
}

// dx (N,L) = the gradient of y = cumprod(x) for dy (N,L), without dividing by x (exact where x has
// zeros): dx_i = P_{i-1} S_i, P_{i-1} = x_0 ... x_{i-1}, S_i = sum_{j>=i} dy_j x_{i+1} ... x_j, so
// S_{L-1} = dy_{L-1} and S_i = dy_i + x_{i+1} S_{i+1}. In double, each dx rounded once. Floats only.
void cumprod_bwd_rows(DType dtype, const void* x, const void* dy, void* dx, int64_t n, int64_t l) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (kIsFloatStorage<T>) {
      const T *xs = static_cast<const T*>(x), *dys = static_cast<const T*>(dy);
      T* dxs = static_cast<T*>(dx);
#pragma omp parallel for schedule(static) if (n > 1 && n * l > (int64_t(1) << 16))
      for (int64_t r = 0; r < n; ++r) {
        const int64_t o = r * l;
        std::vector<double> s(static_cast<size_t>(l));  // (L): S_i of this row
        double acc = 0;
        for (int64_t i = l - 1; i >= 0; --i) {
          acc = double(dys[o + i]) + (i + 1 < l ? double(xs[o + i + 1]) * acc : 0.0);
          s[size_t(i)] = acc;
        }
        double prefix = 1;  // P_{i-1}
        for (int64_t i = 0; i < l; ++i) {
          dxs[o + i] = round_to<T>(prefix * s[size_t(i)]);
          prefix *= double(xs[o + i]);
        }
      }
    } else {
      throw Error(detail::cat("cumprod: differentiates floats, got ", dtype_name(dtype)), ErrorKind::type);
    }
  });
}

// idx (N,K) = the first k positions of the stable sorting order of each row of x (N,L): all of them
// by std::stable_sort; a few (k < L / 8) by std::partial_sort with ties broken by position (the same
// positions, O(L log k)).
void argsort_rows(DType dtype, const void* x, int64_t* idx, int64_t n, int64_t l, int64_t k,
                  bool descending) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    using C =
        std::conditional_t<kIsFloatStorage<T>, double, T>;  // compared as double (exact for every float)
    const T* xs = static_cast<const T*>(x);
    const bool desc =
        descending;  // a local of this lambda: clang's OpenMP rejects the parameter in one below
#pragma omp parallel for schedule(static) if (n > 1 && n * l > (int64_t(1) << 14))
    for (int64_t r = 0; r < n; ++r) {
      const T* row = xs + r * l;
      // a before b in ascending order: NaN is the largest value, and a NaN never precedes another one.
      auto less = [&](int64_t a, int64_t b) {
        const C u = C(row[a]), v = C(row[b]);
        if constexpr (kIsFloatStorage<T>) {
          if (std::isnan(u) || std::isnan(v)) return !std::isnan(u);
        }
        return u < v;
      };
      auto before = [&](int64_t a, int64_t b) { return desc ? less(b, a) : less(a, b); };
      std::vector<int64_t> order(static_cast<size_t>(l));  // (L): row r's positions
      std::iota(order.begin(), order.end(), int64_t(0));
      if (k < l / 8) {
        std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int64_t a, int64_t b) {
          return before(a, b) || (!before(b, a) && a < b);  // equal values: the earlier position first
        });
      } else {
        std::stable_sort(order.begin(), order.end(), before);
      }
      std::copy(order.begin(), order.begin() + k, idx + r * k);
    }
  });
}

}  // namespace aether::cpu
