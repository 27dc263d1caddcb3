// The pooling oracle: plain loops over row-major buffers, every float dtype. The reference backend
// (AETHER_FUSE=0) runs these; the library loops (pool.cpp), the generated tiling-window kernels
// (graph/pool_windows.cpp) and the CUDA kernels are tested against them.
//
// x (N,H,W,C) -> y (N,OH,OW,C). Window (oh, ow) covers input rows ih = oh*stride_h - pad_top + kh,
// kh in [0, KH), and columns iw = ow*stride_w - pad_left + kw, kw in [0, KW); positions outside
// [0,H) x [0,W) are padding.
//   max: y = the largest real element of the window (padding never wins; a NaN wins); the
//        backward adds dy to the window's FIRST maximum in row-major order (the first NaN if any).
//   avg: y = (sum of the real elements) / divisor, divisor = KH*KW when count_include_pad, else the
//        number of real elements. The output size floor((H + pads - KH) / stride) + 1 keeps every
//        window inside the padded input, so KH*KW is the padded window's size.
// Sums accumulate in double; each result is rounded once to the storage type. Images are
// independent, so the backward passes run one image per thread.
#include <algorithm>
#include <limits>
#include <vector>

#include "kernels.h"
#include "oracle.h"

namespace aether::cpu {
namespace {

// The real part of window (oh, ow): rows [h0, h1), columns [w0, w1).
struct Win {
  int64_t h0, h1, w0, w1;
};
Win real_window(const PoolGeom& g, int64_t oh, int64_t ow) {
  const Pool2dArg& a = g.arg;
  const int64_t hs = oh * a.stride_h - a.pad_top, ws = ow * a.stride_w - a.pad_left;
  return {std::max<int64_t>(hs, 0), std::min(hs + a.kernel_h, g.H), std::max<int64_t>(ws, 0),
          std::min(ws + a.kernel_w, g.W)};
}

// Position ih*W + iw of the first maximum of channel c in window (oh, ow) of image n (-1: no real
// element). A later element replaces the best only if the best is not NaN and it is greater or NaN.
template <typename T>
int64_t first_max(const T* X, const PoolGeom& g, int64_t n, int64_t oh, int64_t ow, int64_t c) {
  const Win win = real_window(g, oh, ow);
  int64_t best = -1;
  double bv = 0;
  for (int64_t ih = win.h0; ih < win.h1; ++ih)
    for (int64_t iw = win.w0; iw < win.w1; ++iw) {
      const double v = to_f64(X[((n * g.H + ih) * g.W + iw) * g.C + c]);
      if (best < 0 || (bv == bv && (v > bv || v != v))) {
        best = ih * g.W + iw;
        bv = v;
      }
    }
  return best;
}

double divisor(const PoolGeom& g, int64_t oh, int64_t ow) {
  if (g.arg.count_include_pad) return double(g.arg.kernel_h * g.arg.kernel_w);
  const Win win = real_window(g, oh, ow);
  return double((win.h1 - win.h0) * (win.w1 - win.w0));
}

bool worth_threads(const PoolGeom& g) {
  return g.N * g.OH * g.OW * g.C * g.arg.kernel_h * g.arg.kernel_w >= kOracleParallelWork;
}

}  // namespace

void maxpool2d_fwd_naive(DType dtype, const void* x, void* y, const PoolGeom& g) {
  dispatch_float(dtype, "max_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(x);  // (N,H,W,C)
    T* Y = static_cast<T*>(y);              // (N,OH,OW,C)
#pragma omp parallel for collapse(2) schedule(static) if (worth_threads(g))
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          for (int64_t c = 0; c < g.C; ++c) {
            const int64_t p = first_max(X, g, n, oh, ow, c);
            Y[((n * g.OH + oh) * g.OW + ow) * g.C + c] =
                p < 0 ? from_f64<T>(-std::numeric_limits<double>::infinity())
                      : X[(n * g.H * g.W + p) * g.C + c];
          }
  });
}

void maxpool2d_bwd_naive(DType dtype, const void* x, const void* dy, void* dx, const PoolGeom& g) {
  dispatch_float(dtype, "max_pool2d_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(x);    // (N,H,W,C)
    const T* DY = static_cast<const T*>(dy);  // (N,OH,OW,C)
    T* DX = static_cast<T*>(dx);              // (N,H,W,C)
    const int64_t plane = g.H * g.W * g.C;
#pragma omp parallel for schedule(static) if (worth_threads(g))
    for (int64_t n = 0; n < g.N; ++n) {
      std::vector<double> acc(size_t(plane), 0.0);  // dx[n] (H,W,C)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow)
          for (int64_t c = 0; c < g.C; ++c) {
            const int64_t p = first_max(X, g, n, oh, ow, c);
            if (p >= 0) acc[size_t(p * g.C + c)] += to_f64(DY[((n * g.OH + oh) * g.OW + ow) * g.C + c]);
          }
      for (int64_t i = 0; i < plane; ++i) DX[n * plane + i] = from_f64<T>(acc[size_t(i)]);
    }
  });
}

void avgpool2d_fwd_naive(DType dtype, const void* x, void* y, const PoolGeom& g) {
  dispatch_float(dtype, "avg_pool2d", [&](auto tag) {
    using T = decltype(tag);
    const T* X = static_cast<const T*>(x);  // (N,H,W,C)
    T* Y = static_cast<T*>(y);              // (N,OH,OW,C)
#pragma omp parallel for collapse(2) schedule(static) if (worth_threads(g))
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const Win win = real_window(g, oh, ow);
          const double div = divisor(g, oh, ow);
          for (int64_t c = 0; c < g.C; ++c) {
            double sum = 0;
            for (int64_t ih = win.h0; ih < win.h1; ++ih)
              for (int64_t iw = win.w0; iw < win.w1; ++iw)
                sum += to_f64(X[((n * g.H + ih) * g.W + iw) * g.C + c]);
            Y[((n * g.OH + oh) * g.OW + ow) * g.C + c] = from_f64<T>(sum / div);
          }
        }
  });
}

void avgpool2d_bwd_naive(DType dtype, const void* dy, void* dx, const PoolGeom& g) {
  dispatch_float(dtype, "avg_pool2d_bwd", [&](auto tag) {
    using T = decltype(tag);
    const T* DY = static_cast<const T*>(dy);  // (N,OH,OW,C)
    T* DX = static_cast<T*>(dx);              // (N,H,W,C)
    const int64_t plane = g.H * g.W * g.C;
#pragma omp parallel for schedule(static) if (worth_threads(g))
    for (int64_t n = 0; n < g.N; ++n) {
      std::vector<double> acc(size_t(plane), 0.0);  // dx[n] (H,W,C)
      for (int64_t oh = 0; oh < g.OH; ++oh)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          const Win win = real_window(g, oh, ow);
          const double div = divisor(g, oh, ow);
          for (int64_t c = 0; c < g.C; ++c) {
            const double share = to_f64(DY[((n * g.OH + oh) * g.OW + ow) * g.C + c]) / div;
            for (int64_t ih = win.h0; ih < win.h1; ++ih)
              for (int64_t iw = win.w0; iw < win.w1; ++iw) acc[size_t((ih * g.W + iw) * g.C + c)] += share;
          }
        }
      for (int64_t i = 0; i < plane; ++i) DX[n * plane + i] = from_f64<T>(acc[size_t(i)]);
    }
  });
}

}  // namespace aether::cpu
