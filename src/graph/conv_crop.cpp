// A conv's kept outputs, forward (keep_first) and backward (unpad_conv_grad): graph/conv_crop.h.
#include "graph/conv_crop.h"

#include "graph/library_caps.h"

namespace aether::prim {

Tensor keep_first(const Tensor& y, int64_t rows, int64_t cols) {
  AETHER_CHECK(y.ndim() == 4 && rows >= 0 && rows <= y.shape()[1] && cols >= 0 && cols <= y.shape()[2],
               "keep_first", "cannot keep ", rows, "x", cols, " of ", to_string(y.shape()));
  const int64_t drop_h = y.shape()[1] - rows, drop_w = y.shape()[2] - cols;
  if (drop_h == 0 && drop_w == 0) return y;
  const NodePtr& n = y.node();
  const bool cast = n->op == Op::Cast && !n->realized() && n->srcs[0]->op == Op::Conv2d;
  const NodePtr conv = cast ? n->srcs[0] : n;
  if (conv->op == Op::Conv2d && !conv->realized() && library_caps(y.device()).conv_pads_each_side) {
    Conv2dArg arg = std::get<Conv2dArg>(conv->arg);
    if (drop_h * arg.stride_h <= arg.pad_bottom && drop_w * arg.stride_w <= arg.pad_right) {
      arg.pad_bottom -= drop_h * arg.stride_h;
      arg.pad_right -= drop_w * arg.stride_w;
      NoGradGuard no_grad;
      const Tensor kept = conv2d(Tensor(conv->srcs[0]), Tensor(conv->srcs[1]), arg);  // (N, rows, cols, O)
      return cast ? kept.cast(n->dtype) : kept;
    }
  }
  return y.slice(1, 0, rows).slice(2, 0, cols);
}

Tensor unpad_conv_grad(const Tensor& dy, Conv2dArg& arg) {
  if (!library_caps(dy.device()).conv_pads_each_side) return dy;
  Tensor g = dy;
  for (;;) {
    const NodePtr& n = g.node();
    const bool cast = n->op == Op::Cast && !n->realized() && n->srcs[0]->op == Op::Pad;
    const NodePtr pad = cast ? n->srcs[0] : n;
    if (pad->op != Op::Pad || pad->realized() || pad->shape.size() != 4) return g;
    const auto& p = std::get<PadArg>(pad->arg);
    const int64_t drop_h = p.after[1] * arg.stride_h, drop_w = p.after[2] * arg.stride_w;
    if (p.before != std::vector<int64_t>(4, 0) || p.after[0] != 0 || p.after[3] != 0 ||
        drop_h > arg.pad_bottom || drop_w > arg.pad_right)
      return g;
    arg.pad_bottom -= drop_h;
    arg.pad_right -= drop_w;
    const Tensor kept(pad->srcs[0]);  // (N, OH - after[1], OW - after[2], O)
    g = cast ? kept.cast(n->dtype) : kept;
  }
}

}  // namespace aether::prim
