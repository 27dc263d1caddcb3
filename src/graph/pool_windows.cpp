// Max-pooling over tiling windows (stride = kernel, no padding) written with primitives, so the
// fusing scheduler generates it and fuses it with its neighbours instead of calling a library loop.
//
// x (N,H,W,C) is seen as x6 (N,OH,KH,OW,KW,C) (rows and columns past OH*KH, OW*KW belong to no window
// and are sliced off first). Semantics are those of the library op (backend/cpu/pool.cpp), which the
// tests hold these against: the maximum of each window, NaN winning; the backward sends dy to the
// window's FIRST maximum in row-major order (the first NaN if there is one), recomputed from x:
//   forward:  y   = ReduceMax over axes (2, 4) of x6                      (one reduce kernel)
//   backward: dx6 = (position == first_max(window)) ? dy : 0              (one elementwise kernel)
// where first_max is a chain of KH*KW selects over the window's elements, evaluated at every dx
// element (the window is in cache), and `position` a tiny (KH*KW) int32 table.
#include <cstdlib>

#include "aether/graph/primitives.h"
#include "core/config.h"
#include "graph/conv_crop.h"

namespace aether::prim {
namespace {

struct Tile {
  int64_t n, h, w, c, oh, ow, kh, kw;
};
Tile tile_of(const Shape& x, const Pool2dArg& a) {
  return {x[0], x[1], x[2], x[3], x[1] / a.kernel_h, x[2] / a.kernel_w, a.kernel_h, a.kernel_w};
}

// x (N,H,W,C) -> x6 (N,OH,KH,OW,KW,C): the windows as axes 2 and 4.
Tensor windows(const Tensor& x, const Tile& t) {
  Tensor v = x;
  if (t.oh * t.kh != t.h) v = v.slice(1, 0, t.oh * t.kh);
  if (t.ow * t.kw != t.w) v = v.slice(2, 0, t.ow * t.kw);
  return v.reshape({t.n, t.oh, t.kh, t.ow, t.kw, t.c});
}

}  // namespace

bool pool_windows_tile(const Pool2dArg& a) {
  return !config().pool_library && a.stride_h == a.kernel_h && a.stride_w == a.kernel_w && a.pad_top == 0 &&
         a.pad_left == 0 && a.pad_bottom == 0 && a.pad_right == 0;
}

Tensor pool_windows_input(const Tensor& x, const Pool2dArg& arg) {
  pool2d_shape("max_pool2d", x, arg);  // the library op's checks and messages
  NoGradGuard no_grad;
  const Tile t = tile_of(x.shape(), arg);
  return keep_first(x, t.oh * t.kh, t.ow * t.kw);  // (N,OH*KH,OW*KW,C)
}

Tensor maxpool2d_windows(const Tensor& x, const Pool2dArg& arg) {
  const Shape out = pool2d_shape("max_pool2d", x, arg);  // the library op's checks and messages
  AETHER_CHECK(pool_windows_tile(arg), "max_pool2d", "tiling windows need stride = kernel and no padding");
  NoGradGuard no_grad;
  const Tile t = tile_of(x.shape(), arg);
  AETHER_CHECK(out == Shape({t.n, t.oh, t.ow, t.c}), "max_pool2d", "window shape mismatch");
  return reduce(Op::ReduceMax, windows(x, t), {2, 4}).reshape({t.n, t.oh, t.ow, t.c});  // (N,OH,OW,C)
}

Tensor maxpool2d_windows_bwd(const Tensor& x, const Tensor& dy, const Pool2dArg& arg) {
  AETHER_CHECK(pool2d_shape("max_pool2d_bwd", x, arg) == dy.shape() && dy.dtype() == x.dtype(),
               "max_pool2d_bwd", "dy ", to_string(dy.shape()), " ", dtype_name(dy.dtype()),
               " does not match the pooled shape of ", to_string(x.shape()), " ", dtype_name(x.dtype()));
  NoGradGuard no_grad;
  const Tile t = tile_of(x.shape(), arg);
  const Shape full{t.n, t.oh, t.kh, t.ow, t.kw, t.c};
  const Tensor x6 = windows(x, t);  // (N,OH,KH,OW,KW,C)
  // The first maximum of each window: best value and its position q = i*KW + j, (N,OH,1,OW,1,C).
  Tensor best, first;
  for (int64_t i = 0; i < t.kh; ++i)
    for (int64_t j = 0; j < t.kw; ++j) {
      const Tensor v = x6.slice(2, i, i + 1).slice(4, j, j + 1);  // (N,OH,1,OW,1,C)
      const double q = double(i * t.kw + j);
      if (!best.defined()) {
        best = v;
        first = constant(q, v.shape(), DType::int32, x.device());
        continue;
      }
      // A later element wins only if strictly greater, or if it is the first NaN. Written as selects
      // on comparisons only (no bool arithmetic), which compilers vectorise.
      const Tensor gt = v.gt(best), v_nan = v.ne(v), best_nan = best.ne(best);
      const Tensor qt = constant(q, v.shape(), DType::int32, x.device());
      first = aether::where(best_nan, first, aether::where(v_nan, qt, aether::where(gt, qt, first)));
      best = aether::where(best_nan, best, aether::where(v_nan, v, aether::where(gt, v, best)));
    }
  std::vector<int32_t> pos(size_t(t.kh * t.kw));
  for (size_t q = 0; q < pos.size(); ++q) pos[q] = int32_t(q);
  const Tensor position =
      Tensor::from_vector(pos, {1, 1, t.kh, 1, t.kw, 1}).to(x.device());  // (1,1,KH,1,KW,1) int32
  const Tensor dy6 = dy.reshape({t.n, t.oh, 1, t.ow, 1, t.c});            // (N,OH,1,OW,1,C)
  Tensor dx = aether::where(position.eq(first), dy6.expand(full), 0.0);   // (N,OH,KH,OW,KW,C)
  dx = dx.reshape({t.n, t.oh * t.kh, t.ow * t.kw, t.c});
  if (t.oh * t.kh != t.h || t.ow * t.kw != t.w)
    dx = dx.pad({{0, 0}, {0, t.h - t.oh * t.kh}, {0, t.w - t.ow * t.kw}, {0, 0}});
  return dx;  // (N,H,W,C)
}

}  // namespace aether::prim
