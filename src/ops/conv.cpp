// Functional conv2d and pooling (aether/ops/conv.h): option resolution, dtype promotion and
// validation on top of the library primitives; the global pools as reductions.
#include "aether/ops/conv.h"

#include <algorithm>
#include <string>
#include <tuple>
#include <utility>

#include "aether/graph/primitives.h"

namespace aether {
namespace {

std::string desc(const Tensor& t) { return detail::cat(to_string(t.shape()), " ", dtype_name(t.dtype())); }

// TensorFlow's "same": the total padding that gives ceil(in / stride) outputs, odd pixel after.
std::pair<int64_t, int64_t> same_pads(int64_t in, int64_t k, int64_t stride, int64_t dil) {
  const int64_t out = (in + stride - 1) / stride;
  const int64_t total = std::max<int64_t>((out - 1) * stride + dil * (k - 1) + 1 - in, 0);
  return {total / 2, total - total / 2};
}

Padding2d padding_from_mode(const std::string& mode) {
  Padding2d p;
  if (mode == "same") {
    p.same = true;
  } else {
    AETHER_CHECK(mode == "valid", "conv2d", "padding mode must be \"same\" or \"valid\", got \"", mode, "\"");
  }
  return p;
}

void check_pool_x(const Tensor& x, const char* op) {
  AETHER_CHECK(x.ndim() == 4, op, "expected a 4-D NHWC input (N, H, W, C), got shape ", to_string(x.shape()));
  AETHER_CHECK_DTYPE(is_float(x.dtype()), op, "expected a float tensor, got ", desc(x), " (cast it first)");
}

Pool2dArg pool_arg(Size2 kernel, Size2 stride, Size2 padding, bool count_include_pad) {
  Pool2dArg a;
  a.kernel_h = kernel.h;
  a.kernel_w = kernel.w;
  a.stride_h = stride.h == 0 ? kernel.h : stride.h;
  a.stride_w = stride.w == 0 ? kernel.w : stride.w;
  a.pad_top = a.pad_bottom = padding.h;
  a.pad_left = a.pad_right = padding.w;
  a.count_include_pad = count_include_pad;
  return a;
}

}  // namespace

Padding2d::Padding2d(const char* mode) : Padding2d(padding_from_mode(mode ? mode : "")) {}
Padding2d::Padding2d(const std::string& mode) : Padding2d(padding_from_mode(mode)) {}

Conv2dArg conv2d_arg(const Shape& x, const Shape& w, const Conv2dOptions& opt) {
  AETHER_CHECK(x.size() == 4, "conv2d", "expected x of shape (N, H, W, C), got ", to_string(x));
  AETHER_CHECK(w.size() == 4, "conv2d", "expected w of shape (O, KH, KW, C/groups), got ", to_string(w));
  const int64_t g = opt.groups;
  AETHER_CHECK(g >= 1, "conv2d", "groups must be >= 1, got ", g);
  AETHER_CHECK(opt.stride.h >= 1 && opt.stride.w >= 1, "conv2d", "stride must be >= 1, got ", opt.stride.h,
               "x", opt.stride.w);
  AETHER_CHECK(opt.dilation.h >= 1 && opt.dilation.w >= 1, "conv2d", "dilation must be >= 1, got ",
               opt.dilation.h, "x", opt.dilation.w);
  AETHER_CHECK(w[1] >= 1 && w[2] >= 1, "conv2d", "kernel must be at least 1x1, got w ", to_string(w));
  AETHER_CHECK(x[3] % g == 0, "conv2d", "input channels (", x[3], ") must be divisible by groups (", g, ")");
  AETHER_CHECK(w[0] % g == 0, "conv2d", "output channels (", w[0], ") must be divisible by groups (", g, ")");
  AETHER_CHECK(w[3] * g == x[3], "conv2d", "channel mismatch: x ", to_string(x), " has ", x[3],
               " channels, but w ", to_string(w), " with groups=", g, " expects ", w[3] * g);
  Conv2dArg a;
  a.stride_h = opt.stride.h;
  a.stride_w = opt.stride.w;
  a.dil_h = opt.dilation.h;
  a.dil_w = opt.dilation.w;
  a.groups = g;
  if (opt.padding.same) {
    std::tie(a.pad_top, a.pad_bottom) = same_pads(x[1], w[1], a.stride_h, a.dil_h);
    std::tie(a.pad_left, a.pad_right) = same_pads(x[2], w[2], a.stride_w, a.dil_w);
  } else {
    const Padding2d& p = opt.padding;
    AETHER_CHECK(p.top >= 0 && p.bottom >= 0 && p.left >= 0 && p.right >= 0, "conv2d",
                 "padding must be >= 0, got (top ", p.top, ", bottom ", p.bottom, ", left ", p.left,
                 ", right ", p.right, ")");
    a.pad_top = p.top;
    a.pad_bottom = p.bottom;
    a.pad_left = p.left;
    a.pad_right = p.right;
  }
  const int64_t kh = a.dil_h * (w[1] - 1) + 1, kw = a.dil_w * (w[2] - 1) + 1;  // dilated kernel extent
  AETHER_CHECK(x[1] + a.pad_top + a.pad_bottom >= kh && x[2] + a.pad_left + a.pad_right >= kw, "conv2d",
               "input too small: x ", to_string(x), " padded to ", x[1] + a.pad_top + a.pad_bottom, "x",
               x[2] + a.pad_left + a.pad_right, " is smaller than the (dilated) kernel ", kh, "x", kw);
  return a;
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias, const Conv2dOptions& opt) {
  DType t = promote(x.dtype(), w.dtype());
  if (bias.defined()) t = promote(t, bias.dtype());
  AETHER_CHECK_DTYPE(is_float(t), "conv2d", "expected float tensors, got x ", desc(x), " and w ", desc(w),
                     bias.defined() ? detail::cat(" and bias ", desc(bias)) : std::string(),
                     " (cast them first)");
  const Conv2dArg arg = conv2d_arg(x.shape(), w.shape(), opt);
  if (bias.defined())
    AETHER_CHECK(bias.ndim() == 1 && bias.shape()[0] == w.shape()[0], "conv2d", "expected bias of shape (",
                 w.shape()[0], ") for w ", to_string(w.shape()), ", got ", to_string(bias.shape()));
  Tensor y = prim::conv2d(x.cast(t), w.cast(t), arg);  // (N,OH,OW,O)
  if (bias.defined()) y = y + bias.cast(t);            // (O) broadcast over N, OH, OW
  return y;
}

Tensor max_pool2d(const Tensor& x, Size2 kernel, Size2 stride, Size2 padding) {
  check_pool_x(x, "max_pool2d");
  const Pool2dArg arg = pool_arg(kernel, stride, padding, false);
  if (!prim::pool_windows_tile(arg)) return prim::maxpool2d(x, arg);  // overlapping or padded: library op
  // Tiling windows: primitives the scheduler fuses, with the library op's gradient (first maximum).
  // Rows and columns past the last window are dropped first: a conv producing x computes only the
  // kept ones (graph/conv_crop.h), and the gradient rule reads that part (its rest gets 0).
  const Tensor kept = prim::pool_windows_input(x, arg);  // (N,OH*KH,OW*KW,C)
  return prim::record_grad(prim::maxpool2d_windows(kept, arg), Op::MaxPool2d, {x}, {kept.node()}, arg);
}

Tensor avg_pool2d(const Tensor& x, Size2 kernel, Size2 stride, Size2 padding, bool count_include_pad) {
  check_pool_x(x, "avg_pool2d");
  return prim::avgpool2d(x, pool_arg(kernel, stride, padding, count_include_pad));
}

Tensor global_avg_pool2d(const Tensor& x) {
  check_pool_x(x, "global_avg_pool2d");
  AETHER_CHECK(x.shape()[1] > 0 && x.shape()[2] > 0, "global_avg_pool2d", "empty spatial dims in ", desc(x));
  return x.mean({1, 2});  // (N,C)
}

Tensor global_max_pool2d(const Tensor& x) {
  check_pool_x(x, "global_max_pool2d");
  AETHER_CHECK(x.shape()[1] > 0 && x.shape()[2] > 0, "global_max_pool2d", "empty spatial dims in ", desc(x));
  return x.max({1, 2});  // (N,C)
}

}  // namespace aether
