// 2-D max and average pooling on the CPU: naive loops over NHWC buffers, every float dtype.
//
// x (N,H,W,C) -> y (N,OH,OW,C). Window (oh, ow) covers input rows ih = oh*stride_h - pad_top + kh,
// kh in [0, KH) (same for columns); rows outside [0, H) are padding.
//   max: padding reads as -inf (it never wins, since every window holds a real element); NaN in a
//        window wins; the backward sends dy to the window's FIRST maximum (row-major scan order of
//        the real elements), recomputed from x.
//   avg: the sum of the real elements divided by KH*KW when count_include_pad (the padded window
//        size), else by the number of real elements.
// Arithmetic runs in double for float64, in float otherwise.
#include <algorithm>
#include <limits>
#include <type_traits>
#include <vector>

#include "kernels.h"

// `omp simd` asks for vector loops; for the 16-bit storage types (conversions through bit tricks) clang
// cannot honour it and warns: that is expected, not a defect.
#ifdef __clang__
#pragma clang diagnostic ignored "-Wpass-failed"
#endif

namespace aether::cpu {
namespace {

template <typename T>
using Acc = std::conditional_t<std::is_same_v<T, double>, double, float>;

// Below this many window reads one thread beats waking a team (tests run many tiny pools).
constexpr int64_t kParallelWork = int64_t(1) << 15;
bool parallel_worth_it(const PoolGeom& g) {
  return g.N * g.OH * g.OW * g.C * g.arg.kernel_h * g.arg.kernel_w >= kParallelWork;
}

// The real (non-padding) part of window (oh, ow): rows [h0, h1), columns [w0, w1).
struct Window {
  int64_t h0, h1, w0, w1;
};
Window window(const PoolGeom& g, int64_t oh, int64_t ow) {
  const Pool2dArg& a = g.arg;
  const int64_t hs = oh * a.stride_h - a.pad_top, ws = ow * a.stride_w - a.pad_left;
  return {std::max<int64_t>(hs, 0), std::min(hs + a.kernel_h, g.H), std::max<int64_t>(ws, 0),
          std::min(ws + a.kernel_w, g.W)};
}

// The divisor of window (oh, ow): the padded window size (clipped to the padded input), or the
// number of real elements.
int64_t avg_divisor(const PoolGeom& g, int64_t oh, int64_t ow) {
  const Pool2dArg& a = g.arg;
  if (!a.count_include_pad) {
    const Window win = window(g, oh, ow);
    return (win.h1 - win.h0) * (win.w1 - win.w0);
  }
  const int64_t hs = oh * a.stride_h - a.pad_top, ws = ow * a.stride_w - a.pad_left;
  const int64_t he = std::min(hs + a.kernel_h, g.H + a.pad_bottom);
  const int64_t we = std::min(ws + a.kernel_w, g.W + a.pad_right);
  return (he - hs) * (we - ws);
}

// The first maximum of every channel of window (oh, ow) of image n, all channels at once (the
// channel loop is innermost and contiguous, so it vectorises): best[c] gets the value and pos[c]
// the position ih * W + iw (int32: pooling checks H * W < 2^31). Row-major scan; a later element wins only if
// strictly greater, and the first NaN wins and stays. pos[c] is -1 for an empty window (cannot happen: pad <
// kernel).
template <typename T>
void window_max(const T* X, const PoolGeom& g, int64_t n, int64_t oh, int64_t ow, Acc<T>* best,
                int32_t* pos) {
  using A = Acc<T>;
  const Window win = window(g, oh, ow);
  const int64_t C = g.C;
  bool first = true;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw) {
      const T* px = X + ((n * g.H + ih) * g.W + iw) * C;  // (C)
      const int32_t p = int32_t(ih * g.W + iw);
      if (first) {
#pragma omp simd
        for (int64_t c = 0; c < C; ++c) {
          best[c] = A(px[c]);
          pos[c] = p;
        }
        first = false;
        continue;
      }
#pragma omp simd  // branch-free selects, one lane a channel (without the pragma GCC keeps the NaN branches)
      for (int64_t c = 0; c < C; ++c) {
        const A v = A(px[c]), b = best[c];
        const bool take = (v > b || v != v) && b == b;
        best[c] = take ? v : b;
        pos[c] = take ? p : pos[c];
      }
    }
  if (first)
    for (int64_t c = 0; c < C; ++c) {
      best[c] = -std::numeric_limits<A>::infinity();
      pos[c] = -1;
    }
}

}  // namespace

void maxpool2d_fwd(DType dtype, const void* x, void* y, const PoolGeom& g) {
  AETHER_CHECK(g.H * g.W < (int64_t(1) << 31), "max_pool2d", "an image of ", g.H, " x ", g.W,
               " pixels is too large (positions are 32-bit)");
  dispatch_float(dtype, "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* X = static_cast<const T*>(x);  // (N,H,W,C)
    T* Y = static_cast<T*>(y);              // (N,OH,OW,C)
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worth_it(g))
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        std::vector<A> best(size_t(g.C));       // (C)
        std::vector<int32_t> pos(size_t(g.C));  // (C)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          window_max(X, g, n, oh, ow, best.data(), pos.data());
          T* out = Y + ((n * g.OH + oh) * g.OW + ow) * g.C;
          for (int64_t c = 0; c < g.C; ++c) out[c] = T(best[size_t(c)]);
        }
      }
  });
}

void maxpool2d_bwd(DType dtype, const void* x, const void* dy, void* dx, const PoolGeom& g) {
  AETHER_CHECK(g.H * g.W < (int64_t(1) << 31), "max_pool2d_bwd", "an image of ", g.H, " x ", g.W,
               " pixels is too large (positions are 32-bit)");
  dispatch_float(dtype, "max_pool2d_bwd", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* X = static_cast<const T*>(x);    // (N,H,W,C)
    const T* DY = static_cast<const T*>(dy);  // (N,OH,OW,C)
    T* DX = static_cast<T*>(dx);              // (N,H,W,C)
    const int64_t plane = g.H * g.W * g.C;
    if (g.arg.stride_h >= g.arg.kernel_h && g.arg.stride_w >= g.arg.kernel_w) {
      // Windows do not overlap (the usual 2x2 stride 2): every dx element gets at most one dy, so
      // it is written directly (zero first), with no scratch image and no second pass.
#pragma omp parallel for schedule(static) if (parallel_worth_it(g))
      for (int64_t n = 0; n < g.N; ++n) {
        T* dxn = DX + n * plane;  // (H,W,C) of image n
        std::fill(dxn, dxn + plane, T(A(0)));
        std::vector<A> best(size_t(g.C));       // (C)
        std::vector<int32_t> pos(size_t(g.C));  // (C)
        for (int64_t oh = 0; oh < g.OH; ++oh)
          for (int64_t ow = 0; ow < g.OW; ++ow) {
            window_max(X, g, n, oh, ow, best.data(), pos.data());
            const T* d = DY + ((n * g.OH + oh) * g.OW + ow) * g.C;  // (C)
            for (int64_t c = 0; c < g.C; ++c)
              if (pos[size_t(c)] >= 0) dxn[pos[size_t(c)] * g.C + c] = T(A(d[c]));
          }
      }
      return;
    }
    // Windows overlap, so one image's sums go to a scratch buffer first: images are independent.
#pragma omp parallel for schedule(static) if (parallel_worth_it(g))
    for (int64_t n = 0; n < g.N; ++n) {
      std::vector<A> acc(size_t(plane), A(0));  // (H,W,C) of image n
      std::vector<A> best(size_t(g.C));         // (C)
      std::vector<int32_t> pos(size_t(g.C));    // (C)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          window_max(X, g, n, oh, ow, best.data(), pos.data());
          const T* d = DY + ((n * g.OH + oh) * g.OW + ow) * g.C;
          for (int64_t c = 0; c < g.C; ++c)
            if (pos[size_t(c)] >= 0) acc[size_t(pos[size_t(c)] * g.C + c)] += A(d[c]);
        }
      for (int64_t i = 0; i < plane; ++i) DX[n * plane + i] = T(acc[size_t(i)]);
    }
  });
}

void avgpool2d_fwd(DType dtype, const void* x, void* y, const PoolGeom& g) {
  dispatch_float(dtype, "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* X = static_cast<const T*>(x);  // (N,H,W,C)
    T* Y = static_cast<T*>(y);              // (N,OH,OW,C)
#pragma omp parallel for collapse(2) schedule(static) if (parallel_worth_it(g))
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const Window win = window(g, oh, ow);
          const A div = A(avg_divisor(g, oh, ow));
          for (int64_t c = 0; c < g.C; ++c) {
            A sum = 0;
            for (int64_t ih = win.h0; ih < win.h1; ++ih)
              for (int64_t iw = win.w0; iw < win.w1; ++iw) sum += A(X[((n * g.H + ih) * g.W + iw) * g.C + c]);
            Y[((n * g.OH + oh) * g.OW + ow) * g.C + c] = T(sum / div);
          }
        }
  });
}

void avgpool2d_bwd(DType dtype, const void* dy, void* dx, const PoolGeom& g) {
  dispatch_float(dtype, "avg_pool2d_bwd", [&](auto tag) {
    using T = decltype(tag);
    using A = Acc<T>;
    const T* DY = static_cast<const T*>(dy);  // (N,OH,OW,C)
    T* DX = static_cast<T*>(dx);              // (N,H,W,C)
    const int64_t plane = g.H * g.W * g.C;
#pragma omp parallel for schedule(static) if (parallel_worth_it(g))
    for (int64_t n = 0; n < g.N; ++n) {
      std::vector<A> acc(size_t(plane), A(0));  // (H,W,C) of image n
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const Window win = window(g, oh, ow);
          const A div = A(avg_divisor(g, oh, ow));
          for (int64_t c = 0; c < g.C; ++c) {
            const A share = A(DY[((n * g.OH + oh) * g.OW + ow) * g.C + c]) / div;
            for (int64_t ih = win.h0; ih < win.h1; ++ih)
              for (int64_t iw = win.w0; iw < win.w1; ++iw) acc[size_t((ih * g.W + iw) * g.C + c)] += share;
          }
        }
      for (int64_t i = 0; i < plane; ++i) DX[n * plane + i] = T(acc[size_t(i)]);
    }
  });
}

}  // namespace aether::cpu
