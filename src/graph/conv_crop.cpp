// A conv's kept outputs, forward (keep_first) and backward (unpad_conv_grad): graph/conv_crop.h.
#include "graph/conv_crop.h"

#include "graph/library_caps.h"

namespace aether::prim {
namespace {

// n, or the source of n where n is an unrealized Cast of an `op` node (the op a cast hides).
NodePtr through_cast(const NodePtr& n, Op op) {
  return n->op == Op::Cast && !n->realized() && n->srcs[0]->op == op ? n->srcs[0] : n;
}

// Makes `arg` the conv that computes only its first OH - rows, OW - cols outputs: the padding after
// less rows (cols) times the stride, where that padding covers them; else false, `arg` unchanged.
bool drop_last(Conv2dArg& arg, int64_t rows, int64_t cols) {
  const int64_t h = rows * arg.stride_h, w = cols * arg.stride_w;
  if (h > arg.pad_bottom || w > arg.pad_right) return false;
  arg.pad_bottom -= h;
  arg.pad_right -= w;
  return true;
}

}  // namespace

Tensor keep_first(const Tensor& y, int64_t rows, int64_t cols) {
  AETHER_CHECK(y.ndim() == 4 && rows >= 0 && rows <= y.shape()[1] && cols >= 0 && cols <= y.shape()[2],
               "keep_first", "cannot keep ", rows, "x", cols, " of ", to_string(y.shape()));
  const int64_t drop_h = y.shape()[1] - rows, drop_w = y.shape()[2] - cols;
  if (drop_h == 0 && drop_w == 0) return y;
  const NodePtr& n = y.node();
  const NodePtr conv = through_cast(n, Op::Conv2d);
  if (conv->op == Op::Conv2d && !conv->realized() && library_caps(y.device()).conv_pads_each_side) {
    Conv2dArg arg = std::get<Conv2dArg>(conv->arg);
    if (drop_last(arg, drop_h, drop_w)) {
      NoGradGuard no_grad;
      const Tensor kept = conv2d(Tensor(conv->srcs[0]), Tensor(conv->srcs[1]), arg);  // (N, rows, cols, O)
      return conv != n ? kept.cast(n->dtype) : kept;
    }
  }
  return y.slice(1, 0, rows).slice(2, 0, cols);
}

Tensor unpad_conv_grad(const Tensor& dy, Conv2dArg& arg) {
  if (!library_caps(dy.device()).conv_pads_each_side) return dy;
  Tensor g = dy;
  for (;;) {
    const NodePtr& n = g.node();
    const NodePtr pad = through_cast(n, Op::Pad);
    if (pad->op != Op::Pad || pad->realized() || pad->shape.size() != 4) return g;
    const auto& p = std::get<PadArg>(pad->arg);
    if (p.before != std::vector<int64_t>(4, 0) || p.after[0] != 0 || p.after[3] != 0 ||
        !drop_last(arg, p.after[1], p.after[2]))
      return g;
    const Tensor kept(pad->srcs[0]);  // (N, OH - after[1], OW - after[2], O)
    g = pad != n ? kept.cast(n->dtype) : kept;
  }
}

}  // namespace aether::prim
