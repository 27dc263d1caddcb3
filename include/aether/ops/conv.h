// aether/ops/conv.h - functional 2-D convolution and pooling over NHWC tensors.
//
// Layouts: activations x (N, H, W, C), conv weights w (O, KH, KW, C/groups), bias (O).
// conv2d, max_pool2d and avg_pool2d record one library primitive (oneDNN or a naive loop on the
// CPU) and get gradients from its rule; the global pools are composites (reductions).
//
//   Tensor y = conv2d(x, w, b, {.stride = {2, 2}, .padding = "same"});
//   Tensor p = max_pool2d(y, {2, 2});                  // stride defaults to the kernel
//   Tensor v = global_avg_pool2d(p);                   // (N, C)
#pragma once

#include <concepts>
#include <cstdint>
#include <string>

#include "aether/graph/op.h"
#include "aether/graph/tensor.h"

namespace aether {

// A pair of sizes (rows, columns); one number means both.
struct Size2 {
  int64_t h = 0, w = 0;
  Size2(int64_t v = 0) : h(v), w(v) {}  // NOLINT: implicit, so `2` reads as {2, 2}
  Size2(int64_t h_, int64_t w_) : h(h_), w(w_) {}
};

// Convolution padding: symmetric {h, w}, explicit {top, bottom, left, right}, or "same" / "valid".
// "same" is resolved against the input like TensorFlow: per spatial dim,
//   total = max((ceil(in / stride) - 1) * stride + dil * (k - 1) + 1 - in, 0),
//   before = total / 2, after = total - before  (the odd pixel goes after),
// so the output has ceil(in / stride) rows and columns.
struct Padding2d {
  bool same = false;
  int64_t top = 0, bottom = 0, left = 0, right = 0;
  Padding2d() = default;
  // A template, so that a literal 0 picks it rather than the const char* overload.
  template <std::integral I>
  Padding2d(I p) : top(p), bottom(p), left(p), right(p) {}  // NOLINT: implicit, `1` reads as {1, 1}
  Padding2d(int64_t h, int64_t w) : top(h), bottom(h), left(w), right(w) {}
  Padding2d(int64_t t, int64_t b, int64_t l, int64_t r) : top(t), bottom(b), left(l), right(r) {}
  Padding2d(const char* mode);         // NOLINT: "same" or "valid"; anything else throws
  Padding2d(const std::string& mode);  // NOLINT
};

struct Conv2dOptions {
  Size2 stride = 1;
  Padding2d padding = 0;
  Size2 dilation = 1;
  int64_t groups = 1;
};

// The explicit primitive geometry of a convolution of x (N,H,W,C) with w (O,KH,KW,C/groups) under
// `opt` ("same" resolved). Throws aether::Error naming "conv2d" on bad shapes or options.
Conv2dArg conv2d_arg(const Shape& x_shape, const Shape& w_shape, const Conv2dOptions& opt = {});

// y (N,OH,OW,O) = conv(x (N,H,W,C), w (O,KH,KW,C/groups)) + bias (O), where `bias` may be an empty
// Tensor(). x, w and bias are promoted to one dtype (promote()), which must be a float type.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor(), const Conv2dOptions& opt = {});

// Pooling of x (N,H,W,C) -> (N,OH,OW,C), OH = floor((H + 2*padding.h - kernel.h) / stride.h) + 1.
// A stride of 0 means the kernel size (the PyTorch default). Padding must be smaller than the
// kernel. x must be a float tensor.
// Max: padding reads as -inf; NaN in a window propagates; the gradient goes to each window's first
// maximum. Avg: the divisor is kernel.h * kernel.w with count_include_pad, else the number of real
// (non-padding) elements in the window.
Tensor max_pool2d(const Tensor& x, Size2 kernel, Size2 stride = 0, Size2 padding = 0);
Tensor avg_pool2d(const Tensor& x, Size2 kernel, Size2 stride = 0, Size2 padding = 0,
                  bool count_include_pad = false);

// Mean / max over H and W: x (N,H,W,C) -> (N,C). Composites of reductions.
Tensor global_avg_pool2d(const Tensor& x);
Tensor global_max_pool2d(const Tensor& x);

}  // namespace aether
