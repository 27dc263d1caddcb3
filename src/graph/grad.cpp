// The gradient rules: one per primitive, in one place. Composite ops have no rules of their own.
//
// Conventions: `dy` is the upstream gradient (shape of the op's output; its dtype is kept: a
// float16 output with a float32 dy gives float32 gradients). Rules are written with tensor ops,
// so backward graphs are lazy and get scheduled and fused like forward ones.
#include <algorithm>
#include <numbers>

#include "aether/graph/autograd.h"
#include "aether/graph/collective.h"
#include "aether/graph/primitives.h"
#include "graph/conv_crop.h"

namespace aether {
namespace {
// A value the rule of fn.op reads (source i, or its result for i < 0): one its row in
// aether/graph/op.h saves, else an error naming it.
Tensor saved(const GradFn& fn, const NodePtr& n, int i) {
  AETHER_CHECK(
      n != nullptr, "autograd", "the gradient rule of ", op_name(fn.op), " reads ",
      i < 0 ? std::string("its result (kSavesOut)") : detail::cat("source ", i, " (kSavesIn", i, ")"),
      ", which its row in aether/graph/op.h does not save");
  return Tensor(n);
}
// The gradient in the dtype it should have: dy's dtype promoted with the input's (floats only).
DType grad_dtype(DType dy, DType in) { return is_float(in) ? promote(dy, in) : dy; }
// The dtype the backward passes of conv and matmul compute in: a 16-bit forward's own (the
// incoming gradient is rounded to it, as under PyTorch's autocast, so the library runs its 16-bit
// kernels: on a CPU with native bfloat16 these are the fast ones), else the gradient's dtype t.
// Their results are cast to t, so the gradient's dtype follows the rule above either way.
DType library_dtype(DType t, DType in) { return is_16bit_float(in) ? in : t; }
// Whether t swaps the last two dims of its source, possibly under a reshape that only adds or drops
// leading size-1 dims: a linear layer's w^T, (1,K,N) over w (N,K). Its gradient is best made as the
// transpose of a dense product, so that the permute back lands in the source's own (dense) layout:
// otherwise every later reader of w's gradient (the optimizer's update) reads it strided.
bool transposed_view(const Tensor& t) {
  auto trimmed = [](const Shape& s) {
    return Shape(std::find_if(s.begin(), s.end(), [](int64_t d) { return d != 1; }), s.end());
  };
  const Node* n = t.node().get();
  while (n->op == Op::Reshape && n->srcs.size() == 1 && trimmed(n->shape) == trimmed(n->srcs[0]->shape))
    n = n->srcs[0].get();
  if (n->op != Op::Permute) return false;
  const Axes& ax = std::get<Axes>(n->arg);
  const int k = int(ax.size());
  if (k < 2 || ax[size_t(k - 1)] != k - 2 || ax[size_t(k - 2)] != k - 1) return false;
  for (int i = 0; i < k - 2; ++i)
    if (ax[size_t(i)] != i) return false;
  return true;
}
// Inverse of a permutation.
Axes inverse(const Axes& p) {
  Axes inv(p.size());
  for (size_t i = 0; i < p.size(); ++i) inv[p[i]] = int(i);
  return inv;
}
}  // namespace

// From the op table (aether/graph/op.h): kNoGrad, and what each rule reads (kSavesIn0/1/2, kSavesOut):
// only those values are kept alive for backward (flashlight's lesson: tanh keeps its result, not its
// input). A rule that reads a value its row does not save throws (below), and
// OpTable.EveryOpHasAGradientRuleOrIsMarkedWithoutOne runs every rule.
bool is_differentiable(Op op) { return !op_has(op, kNoGrad); }
bool saves_input(Op op, int i) { return i >= 0 && i < 3 && op_has(op, kSavesIn0 << i); }
bool saves_output(Op op) { return op_has(op, kSavesOut); }

std::vector<Tensor> grad_rule(const GradFn& fn, const Tensor& dy) {
  const auto& in = fn.inputs;
  auto x = [&](int i) { return saved(fn, in[size_t(i)], i); };
  auto out = [&] { return saved(fn, fn.output, -1); };
  switch (fn.op) {
    case Op::Copy: return {dy};
    case Op::Cast: return {dy.cast(grad_dtype(dy.dtype(), fn.input_dtypes[0]))};
    case Op::Neg: return {-dy};
    case Op::Exp: return {dy * out()};             // d e^x = e^x
    case Op::Log: return {dy / x(0)};              // d ln x = 1/x
    case Op::Sqrt: return {dy / (out() * 2.0)};    // d sqrt x = 1/(2 sqrt x)
    case Op::Recip: return {-dy * out() * out()};  // d 1/x = -1/x^2
    case Op::Sin: return {dy * x(0).cos()};
    case Op::Floor:
      return {Tensor::zeros(dy.shape(), grad_dtype(dy.dtype(), fn.input_dtypes[0]), dy.device())};
    case Op::Add: return {dy, dy};
    case Op::Sub: return {dy, -dy};
    case Op::Mul: return {dy * x(1), dy * x(0)};
    case Op::Div: return {dy / x(1), -dy * x(0) / (x(1) * x(1))};
    case Op::Pow: {
      // d x^e/dx = e x^(e-1), 0 where e = 0 (x^0 is flat, also at x = 0); d x^e/de = x^e ln x, 0 at
      // x = 0 with e >= 0 (its limit). PyTorch's rules.
      const Tensor b = x(0), e = x(1), zero = Tensor::zeros_like(b);
      const Tensor de = out() * b.log();
      return {dy * where(e.eq(0.0), zero, e * prim::binary(Op::Pow, b, e - 1.0)),
              dy * where(b.eq(0.0), where(e >= 0.0, zero, de), de)};
    }
    case Op::Fmod: {
      // a - trunc(a / b) b, trunc's gradient being 0 (PyTorch's rule). The quotient of 16-bit floats
      // is taken in float32 (a rounded one can cross a whole number); the whole number is exact again.
      const Tensor a = x(0), b = x(1);
      const DType c = a.dtype() == DType::float64 ? DType::float64 : DType::float32;
      return {dy, -dy * (a.cast(c) / b.cast(c)).trunc().cast(a.dtype())};
    }
    case Op::Max: {
      // Ties split the gradient evenly, so max(a, a) has gradient 1 in total.
      const Tensor a = x(0), b = x(1);
      const Tensor wa = where(a.gt(b), 1.0, where(a.eq(b), 0.5, Tensor::zeros_like(a)));
      return {dy * wa, dy * (1.0 - wa)};
    }
    case Op::Where: {
      // One select per branch: cond ? dy : 0 and cond ? 0 : dy. An upstream NaN at an unselected
      // element gives 0, not NaN (this is how ReLU's backward is a single select).
      const Tensor c = x(0);
      return {Tensor(), where(c, dy, 0.0), where(c, 0.0, dy)};
    }
    case Op::ReduceSum: return {dy.expand(fn.input_shapes[0])};
    case Op::ReduceMax: {
      // Split among ties: mask / count(mask) per reduced group.
      const Tensor xin = x(0);
      const auto& axes = std::get<Axes>(fn.arg);
      const DType gd = grad_dtype(dy.dtype(), xin.dtype());
      const Tensor eq = xin.eq(out().expand(xin.shape()));
      const Tensor mask = eq.cast(gd);
      // The ties counted in int32 (exact; it accumulates in 32-bit lanes, where a float count
      // widened every value to a double): the global max-pool's backward count of (256, 4, 4,
      // 256) ran at 31-37% of the copy bandwidth.
      int64_t group = 1;
      for (int a : axes) group *= xin.shape()[size_t(a)];
      const Tensor count = group < (int64_t(1) << 31)
                               ? prim::reduce(Op::ReduceSum, eq.cast(DType::int32), axes).cast(gd)
                               : prim::reduce(Op::ReduceSum, mask, axes);
      return {(dy / count).expand(xin.shape()) * mask};
    }
    case Op::Reshape: return {dy.reshape(fn.input_shapes[0])};
    case Op::Permute: return {prim::permute(dy, inverse(std::get<Axes>(fn.arg)))};
    case Op::Expand: {
      Axes axes;
      for (size_t d = 0; d < fn.input_shapes[0].size(); ++d)
        if (fn.input_shapes[0][d] != fn.output_shape[d]) axes.push_back(int(d));
      return {prim::reduce(Op::ReduceSum, dy, axes)};
    }
    case Op::Slice: {
      // Scatter dy back: for step s, interleave s-1 zeros (pad a new axis, merge), then pad the ends.
      const auto& s = std::get<SliceArg>(fn.arg);
      const Shape& xs = fn.input_shapes[0];
      Tensor g = dy;
      PadArg ends;
      for (size_t d = 0; d < xs.size(); ++d) {
        int64_t covered = g.shape()[d];
        if (s.step[d] > 1 && covered > 0) {
          Shape sh = g.shape();
          Shape split = sh;
          split.insert(split.begin() + d + 1, 1);
          g = g.reshape(split);
          PadArg p{std::vector<int64_t>(split.size(), 0), std::vector<int64_t>(split.size(), 0)};
          p.after[d + 1] = s.step[d] - 1;
          g = prim::pad(g, p);
          sh[d] = covered * s.step[d];
          g = g.reshape(sh);
          covered = sh[d];
        }
        ends.before.push_back(s.start[d]);
        int64_t after = xs[d] - s.start[d] - covered;
        if (after < 0) {  // the interleaved tail ran past the end: crop it
          SliceArg c{std::vector<int64_t>(xs.size(), 0), g.shape(), std::vector<int64_t>(xs.size(), 1)};
          c.stop[d] = covered + after;
          g = prim::slice(g, c);
          after = 0;
        }
        ends.after.push_back(after);
      }
      return {prim::pad(g, ends)};
    }
    case Op::Pad: {
      const auto& p = std::get<PadArg>(fn.arg);
      const Shape& xs = fn.input_shapes[0];
      SliceArg s{p.before, {}, std::vector<int64_t>(xs.size(), 1)};
      for (size_t d = 0; d < xs.size(); ++d) s.stop.push_back(p.before[d] + xs[d]);
      return {prim::slice(dy, s)};
    }
    case Op::Flip: return {prim::flip(dy, std::get<Axes>(fn.arg))};
    case Op::Matmul: {
      // c = a b: da = dc b^T, db = a^T dc   (all (B, ., .)), computed in library_dtype, returned in
      // the gradient's dtype t
      const DType t = grad_dtype(dy.dtype(), fn.input_dtypes[0]), c = library_dtype(t, fn.input_dtypes[0]);
      // An operand that is a transposed view gets its gradient as a transposed product (da^T = b dc^T,
      // db^T = dc^T a), which its view's gradient permutes back to dense (transposed_view).
      const Tensor a = x(0).cast(c), b = x(1).cast(c), d = dy.cast(c);
      auto tr = [](const Tensor& m) { return prim::permute(m, {0, 2, 1}); };
      const Tensor da = transposed_view(x(0)) ? tr(prim::matmul(b, tr(d))) : prim::matmul(d, tr(b));
      const Tensor db = transposed_view(x(1)) ? tr(prim::matmul(tr(d), a)) : prim::matmul(tr(a), d);
      return {da.cast(t), db.cast(t)};
    }
    case Op::Conv2d: {
      // dx = conv2d_bwd_data(dy, w), dw = conv2d_bwd_weight(x, dy): as matmul
      Conv2dArg arg = std::get<Conv2dArg>(fn.arg);
      const DType t = grad_dtype(dy.dtype(), fn.input_dtypes[0]), c = library_dtype(t, fn.input_dtypes[0]);
      const Tensor xx = x(0).cast(c), w = x(1).cast(c), d = prim::unpad_conv_grad(dy, arg).cast(c);
      return {prim::conv2d_bwd_data(d, w, xx.shape(), arg).cast(t),
              prim::conv2d_bwd_weight(xx, d, w.shape(), arg).cast(t)};
    }
    case Op::MaxPool2d: {
      const DType t = grad_dtype(dy.dtype(), fn.input_dtypes[0]);
      const auto& arg = std::get<Pool2dArg>(fn.arg);
      if (prim::pool_windows_tile(arg)) {
        // x(0) is the pooled part of the input (max_pool2d saves prim::pool_windows_input): the rows
        // and columns past it, in no window, get 0.
        const Tensor dx = prim::maxpool2d_windows_bwd(x(0).cast(t), dy.cast(t), arg);  // (N,OH*KH,OW*KW,C)
        const Shape& xs = fn.input_shapes[0];                                          // (N,H,W,C)
        if (dx.shape() == xs) return {dx};
        return {dx.pad({{0, 0}, {0, xs[1] - dx.shape()[1]}, {0, xs[2] - dx.shape()[2]}, {0, 0}})};
      }
      return {prim::maxpool2d_bwd(x(0).cast(t), dy.cast(t), arg)};
    }
    case Op::AvgPool2d: {
      const DType t = grad_dtype(dy.dtype(), fn.input_dtypes[0]);
      return {prim::avgpool2d_bwd(dy.cast(t), fn.input_shapes[0], std::get<Pool2dArg>(fn.arg))};
    }
    case Op::Gather:  // y = x[idx]: dx = dy's rows summed into the rows they came from
      return {
          prim::scatter_add(dy.cast(grad_dtype(dy.dtype(), fn.input_dtypes[0])), x(1), fn.input_shapes[0][1]),
          Tensor()};
    case Op::ScatterAdd:  // y = zeros + v's rows added at idx: dv = dy's rows at idx
      return {prim::gather(dy.cast(grad_dtype(dy.dtype(), fn.input_dtypes[0])), x(1)), Tensor()};
    case Op::Cumsum: {  // y_i = sum_{j<=i} x_j: dx_j = sum_{i>=j} dy_i, a running sum from the end
      const Tensor d = dy.cast(grad_dtype(dy.dtype(), fn.input_dtypes[0]));
      return {prim::flip(prim::cumsum(prim::flip(d, {1})), {1})};
    }
    case Op::Cumprod: {  // y_i = x_0 ... x_i: dx by CumprodBwd (no division: exact where x is 0)
      const DType t = grad_dtype(dy.dtype(), fn.input_dtypes[0]);
      return {prim::cumprod_bwd(x(0).cast(t), dy.cast(t))};
    }
    case Op::AllReduce:  // y = sum over the ranks of x: dx = sum over the ranks of dy
      return {all_reduce(dy.cast(grad_dtype(dy.dtype(), fn.input_dtypes[0])),
                         std::get<CollectiveArg>(fn.arg).group)};
    case Op::Load:
    case Op::Const:
    case Op::Rand:
    case Op::CmpLt:
    case Op::CmpLe:
    case Op::CmpEq:
    case Op::CmpNe:
    case Op::Conv2dBwdData:
    case Op::Conv2dBwdWeight:
    case Op::MaxPool2dBwd:
    case Op::AvgPool2dBwd:
    case Op::CumprodBwd:
    case Op::Argsort: break;
  }
  throw Error(detail::cat("backward: ", op_name(fn.op), " is not differentiable"));
}

}  // namespace aether
