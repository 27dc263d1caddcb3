// The convolution oracle: plain loops over row-major buffers, every float dtype, no library.
// The reference backend (AETHER_FUSE=0) runs these; oneDNN (and cuDNN) are tested against them.
//
// Layouts (kernels.h): x (N,H,W,C) NHWC, w (O,KH,KW,Cg) OHWI, y (N,OH,OW,O) NHWC, with G = groups,
// Cg = C/G input channels and Og = O/G output channels per group. Output channel o belongs to
// group g = o / Og and reads input channels g*Cg + c, c in [0, Cg).
// Output (oh, ow) and kernel tap (kh, kw) meet input ih = oh*stride_h - pad_top + kh*dil_h,
// iw = ow*stride_w - pad_left + kw*dil_w; positions outside [0,H) x [0,W) are padding (zeros).
//
//   y[n,oh,ow,o]      = sum over kh, kw, c          of x[n,ih,iw,g*Cg+c] * w[o,kh,kw,c]
//   dx[n,ih,iw,g*Cg+c] = sum over kh, kw, oo < Og   of dy[n,oh,ow,g*Og+oo] * w[g*Og+oo,kh,kw,c]
//                        (over the (oh, ow) whose window puts tap (kh, kw) on (ih, iw))
//   dw[o,kh,kw,c]     = sum over n, oh, ow          of dy[n,oh,ow,o] * x[n,ih,iw,g*Cg+c]
//
// Every input is first copied to double; sums accumulate in double and each result is rounded
// once to the storage type. The loops are ordered so the innermost one runs over a contiguous row
// (channels), and each output element is written by one thread only.
#include <algorithm>
#include <vector>

#include "kernels.h"
#include "oracle.h"

namespace aether::cpu {
namespace {

template <typename T>
std::vector<double> f64_copy(const void* p, int64_t n) {
  const T* s = static_cast<const T*>(p);
  std::vector<double> v(size_t(n > 0 ? n : 0));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = to_f64(s[i]);
  return v;
}

bool worth_threads(const ConvGeom& g) {
  return g.N * g.OH * g.OW * g.O * g.KH * g.KW * (g.C / g.arg.groups) >= kOracleParallelWork;
}

}  // namespace

void conv2d_fwd_naive(DType dtype, const void* x, const void* w, void* y, const ConvGeom& g) {
  dispatch_float(dtype, "conv2d", [&](auto tag) {
    using T = decltype(tag);
    const Conv2dArg& a = g.arg;
    const int64_t G = a.groups, Cg = g.C / G, Og = g.O / G;
    const std::vector<double> X = f64_copy<T>(x, g.N * g.H * g.W * g.C);    // (N,H,W,C)
    const std::vector<double> Wt = f64_copy<T>(w, g.O * g.KH * g.KW * Cg);  // (O,KH,KW,Cg)
    // The weights with the output channel innermost, so the inner loop runs over a contiguous row:
    // wt[g,kh,kw,c,oo] = w[g*Og+oo,kh,kw,c], wt (G,KH,KW,Cg,Og).
    std::vector<double> wt(Wt.size());
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t kh = 0; kh < g.KH; ++kh)
        for (int64_t kw = 0; kw < g.KW; ++kw)
          for (int64_t c = 0; c < Cg; ++c)
            wt[size_t(((((o / Og) * g.KH + kh) * g.KW + kw) * Cg + c) * Og + o % Og)] =
                Wt[size_t(((o * g.KH + kh) * g.KW + kw) * Cg + c)];
    T* Y = static_cast<T*>(y);  // (N,OH,OW,O)
#pragma omp parallel for collapse(2) schedule(static) if (worth_threads(g))
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oh = 0; oh < g.OH; ++oh) {
        std::vector<double> acc(size_t(g.O));  // y[n,oh,ow,:] (O)
        for (int64_t ow = 0; ow < g.OW; ++ow) {
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t ih = oh * a.stride_h - a.pad_top + kh * a.dil_h;
            if (ih < 0 || ih >= g.H) continue;  // padding
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              const int64_t iw = ow * a.stride_w - a.pad_left + kw * a.dil_w;
              if (iw < 0 || iw >= g.W) continue;
              const double* xp = &X[size_t(((n * g.H + ih) * g.W + iw) * g.C)];  // x[n,ih,iw,:] (C)
              for (int64_t gi = 0; gi < G; ++gi)
                for (int64_t c = 0; c < Cg; ++c) {
                  const double xv = xp[gi * Cg + c];
                  const double* wr = &wt[size_t((((gi * g.KH + kh) * g.KW + kw) * Cg + c) * Og)];  // (Og)
                  double* ar = &acc[size_t(gi * Og)];                                              // (Og)
                  for (int64_t oo = 0; oo < Og; ++oo) ar[oo] += xv * wr[oo];
                }
            }
          }
          T* yp = Y + ((n * g.OH + oh) * g.OW + ow) * g.O;  // y[n,oh,ow,:] (O)
          for (int64_t o = 0; o < g.O; ++o) yp[o] = from_f64<T>(acc[size_t(o)]);
        }
      }
  });
}

void conv2d_bwd_data_naive(DType dtype, const void* dy, const void* w, void* dx, const ConvGeom& g) {
  dispatch_float(dtype, "conv2d_bwd_data", [&](auto tag) {
    using T = decltype(tag);
    const Conv2dArg& a = g.arg;
    const int64_t Cg = g.C / a.groups, Og = g.O / a.groups;
    const std::vector<double> DY = f64_copy<T>(dy, g.N * g.OH * g.OW * g.O);  // (N,OH,OW,O)
    const std::vector<double> Wt = f64_copy<T>(w, g.O * g.KH * g.KW * Cg);    // (O,KH,KW,Cg)
    T* DX = static_cast<T*>(dx);                                              // (N,H,W,C)
#pragma omp parallel for collapse(2) schedule(static) if (worth_threads(g))
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t ih = 0; ih < g.H; ++ih) {
        std::vector<double> acc(size_t(g.C));  // dx[n,ih,iw,:] (C)
        for (int64_t iw = 0; iw < g.W; ++iw) {
          std::fill(acc.begin(), acc.end(), 0.0);
          for (int64_t kh = 0; kh < g.KH; ++kh) {
            const int64_t th = ih + a.pad_top - kh * a.dil_h;  // = oh * stride_h for a window that uses it
            if (th < 0 || th % a.stride_h != 0 || th / a.stride_h >= g.OH) continue;
            const int64_t oh = th / a.stride_h;
            for (int64_t kw = 0; kw < g.KW; ++kw) {
              const int64_t tw = iw + a.pad_left - kw * a.dil_w;
              if (tw < 0 || tw % a.stride_w != 0 || tw / a.stride_w >= g.OW) continue;
              const int64_t ow = tw / a.stride_w;
              const double* dyp = &DY[size_t(((n * g.OH + oh) * g.OW + ow) * g.O)];  // dy[n,oh,ow,:] (O)
              for (int64_t o = 0; o < g.O; ++o) {
                const double d = dyp[o];
                const double* wr = &Wt[size_t(((o * g.KH + kh) * g.KW + kw) * Cg)];  // w[o,kh,kw,:] (Cg)
                double* ar = &acc[size_t((o / Og) * Cg)];                            // o's group (Cg)
                for (int64_t c = 0; c < Cg; ++c) ar[c] += d * wr[c];
              }
            }
          }
          T* dxp = DX + ((n * g.H + ih) * g.W + iw) * g.C;  // dx[n,ih,iw,:] (C)
          for (int64_t c = 0; c < g.C; ++c) dxp[c] = from_f64<T>(acc[size_t(c)]);
        }
      }
  });
}

void conv2d_bwd_weight_naive(DType dtype, const void* x, const void* dy, void* dw, const ConvGeom& g) {
  dispatch_float(dtype, "conv2d_bwd_weight", [&](auto tag) {
    using T = decltype(tag);
    const Conv2dArg& a = g.arg;
    const int64_t Cg = g.C / a.groups, Og = g.O / a.groups;
    const std::vector<double> X = f64_copy<T>(x, g.N * g.H * g.W * g.C);      // (N,H,W,C)
    const std::vector<double> DY = f64_copy<T>(dy, g.N * g.OH * g.OW * g.O);  // (N,OH,OW,O)
    T* DW = static_cast<T*>(dw);                                              // (O,KH,KW,Cg)
#pragma omp parallel for collapse(2) schedule(static) if (worth_threads(g))
    for (int64_t o = 0; o < g.O; ++o)
      for (int64_t kh = 0; kh < g.KH; ++kh) {
        const int64_t c0 = (o / Og) * Cg;            // o's first input channel
        std::vector<double> acc(size_t(g.KW * Cg));  // dw[o,kh,:,:] (KW,Cg)
        for (int64_t n = 0; n < g.N; ++n)
          for (int64_t oh = 0; oh < g.OH; ++oh) {
            const int64_t ih = oh * a.stride_h - a.pad_top + kh * a.dil_h;
            if (ih < 0 || ih >= g.H) continue;  // padding contributes 0
            for (int64_t ow = 0; ow < g.OW; ++ow) {
              const double d = DY[size_t(((n * g.OH + oh) * g.OW + ow) * g.O + o)];
              for (int64_t kw = 0; kw < g.KW; ++kw) {
                const int64_t iw = ow * a.stride_w - a.pad_left + kw * a.dil_w;
                if (iw < 0 || iw >= g.W) continue;
                const double* xp = &X[size_t(((n * g.H + ih) * g.W + iw) * g.C + c0)];  // x[n,ih,iw,c0:] (Cg)
                double* ar = &acc[size_t(kw * Cg)];                                     // (Cg)
                for (int64_t c = 0; c < Cg; ++c) ar[c] += d * xp[c];
              }
            }
          }
        T* dwp = DW + (o * g.KH + kh) * g.KW * Cg;  // dw[o,kh,:,:] (KW,Cg)
        for (int64_t i = 0; i < g.KW * Cg; ++i) dwp[i] = from_f64<T>(acc[size_t(i)]);
      }
  });
}

}  // namespace aether::cpu
