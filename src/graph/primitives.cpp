// Checked constructors of primitive nodes, and prim::apply (node + autograd record).
#include "aether/graph/primitives.h"

#include <algorithm>

#include "aether/graph/autograd.h"

namespace aether::prim {
namespace {
std::string desc(const Tensor& t) { return detail::cat(to_string(t.shape()), " ", dtype_name(t.dtype())); }

void check_pool_input(const char* op, const Tensor& x) {
  AETHER_CHECK(x.ndim() == 4, op, "expected a 4-D NHWC input (N, H, W, C), got shape ", to_string(x.shape()));
  AETHER_CHECK_DTYPE(is_float(x.dtype()), op, "expected a float tensor, got ", dtype_name(x.dtype()));
}
Shape pool_out_shape(const char* op, const Shape& x, const Pool2dArg& a) {
  AETHER_CHECK(a.kernel_h > 0 && a.kernel_w > 0 && a.stride_h > 0 && a.stride_w > 0, op,
               "kernel and stride must be positive, got kernel ", a.kernel_h, "x", a.kernel_w, " stride ",
               a.stride_h, "x", a.stride_w);
  AETHER_CHECK(a.pad_top >= 0 && a.pad_left >= 0 && a.pad_bottom >= 0 && a.pad_right >= 0, op,
               "padding must be >= 0");
  AETHER_CHECK(a.pad_top < a.kernel_h && a.pad_bottom < a.kernel_h && a.pad_left < a.kernel_w &&
                   a.pad_right < a.kernel_w,
               op, "padding must be smaller than the kernel");
  const int64_t oh = conv_out_size(x[1], a.kernel_h, a.stride_h, a.pad_top, a.pad_bottom, 1);
  const int64_t ow = conv_out_size(x[2], a.kernel_w, a.stride_w, a.pad_left, a.pad_right, 1);
  AETHER_CHECK(oh > 0 && ow > 0, op, "input ", to_string(x), " is smaller than the ", a.kernel_h, "x",
               a.kernel_w, " window");
  return {x[0], oh, ow, x[3]};
}
Shape conv_out_shape(const char* op, const Shape& x, const Shape& w, const Conv2dArg& a) {
  AETHER_CHECK(x.size() == 4, op, "expected x of shape (N, H, W, C), got ", to_string(x));
  AETHER_CHECK(w.size() == 4, op, "expected w of shape (O, KH, KW, C/groups), got ", to_string(w));
  AETHER_CHECK(a.groups >= 1 && a.stride_h >= 1 && a.stride_w >= 1 && a.dil_h >= 1 && a.dil_w >= 1, op,
               "groups, strides and dilations must be >= 1");
  AETHER_CHECK(a.pad_top >= 0 && a.pad_left >= 0 && a.pad_bottom >= 0 && a.pad_right >= 0, op,
               "padding must be >= 0");
  AETHER_CHECK(x[3] % a.groups == 0 && w[0] % a.groups == 0, op, "channels in (", x[3], ") and out (", w[0],
               ") must be divisible by groups (", a.groups, ")");
  AETHER_CHECK(w[3] * a.groups == x[3], op, "w ", to_string(w), " expects ", w[3] * a.groups,
               " input channels, x ", to_string(x), " has ", x[3]);
  const int64_t oh = conv_out_size(x[1], w[1], a.stride_h, a.pad_top, a.pad_bottom, a.dil_h);
  const int64_t ow = conv_out_size(x[2], w[2], a.stride_w, a.pad_left, a.pad_right, a.dil_w);
  AETHER_CHECK(oh > 0 && ow > 0, op, "input ", to_string(x), " is too small for kernel ", w[1], "x", w[2],
               " with this padding and dilation");
  return {x[0], oh, ow, w[0]};
}

// A lazy value without data (built only from Const and Rand sources, like the scalar constants and
// dropout masks composite ops make on the CPU by default) belongs to no device yet.
bool device_free(const Node& n, int depth = 0) {
  if (n.realized() || depth > 64) return false;
  if (n.op == Op::Const || n.op == Op::Rand) return true;
  if (n.srcs.empty()) return false;
  for (const NodePtr& s : n.srcs)
    if (!device_free(*s, depth + 1)) return false;
  return true;
}
NodePtr rebuild_on(const NodePtr& n, Device device) {
  if (n->device == device) return n;
  std::vector<NodePtr> srcs;
  for (const NodePtr& s : n->srcs) srcs.push_back(rebuild_on(s, device));
  return make_node(n->op, n->dtype, n->shape, device, std::move(srcs), n->arg);
}
}  // namespace

Tensor apply(Op op, const std::vector<Tensor>& srcs, OpArg arg, DType dtype, Shape shape) {
  check_shape(shape, op_name(op));  // a broadcast or matmul of valid shapes may still be too big
  std::vector<NodePtr> ns;
  ns.reserve(srcs.size());
  // The inputs' device: the first one's that holds (or derives from) data; device-free inputs
  // without autograd history are rebuilt there. Anything else on another device is an error.
  Device device = srcs.empty() ? default_device() : srcs[0].device();
  for (const auto& t : srcs)
    if (!device_free(*t.node())) {
      device = t.device();
      break;
    }
  for (size_t i = 0; i < srcs.size(); ++i) {
    NodePtr n = srcs[i].node();
    if (n->device != device && !srcs[i].requires_grad() && device_free(*n)) n = rebuild_on(n, device);
    AETHER_CHECK(n->device == device, op_name(op), "all inputs must be on one device: input 0 (",
                 to_string(srcs[0].shape()), ") is on ", srcs[0].device().str(), ", input ", i, " (",
                 to_string(srcs[i].shape()), ") on ", srcs[i].device().str(),
                 "; move tensors with Tensor::to(device) first");
    ns.push_back(std::move(n));
  }
  std::vector<NodePtr> inputs = ns;
  Tensor out(make_node(op, dtype, shape, device, std::move(ns), arg));
  return record_grad(out, op, srcs, inputs, std::move(arg));
}

Tensor record_grad(const Tensor& out, Op op, const std::vector<Tensor>& srcs,
                   const std::vector<NodePtr>& inputs, OpArg arg) {
  if (!grad_enabled() || !is_differentiable(op)) return out;
  bool any = false;
  for (const auto& s : srcs) any = any || s.requires_grad();
  if (!any) return out;
  auto fn = std::make_shared<GradFn>();
  fn->op = op;
  fn->arg = std::move(arg);
  fn->output_shape = out.shape();
  for (size_t i = 0; i < srcs.size(); ++i) {
    fn->inputs.push_back(saves_input(op, int(i)) ? inputs[i] : nullptr);
    fn->input_shapes.push_back(srcs[i].shape());
    fn->input_dtypes.push_back(srcs[i].dtype());
    fn->next.push_back(srcs[i].requires_grad() ? srcs[i].impl() : nullptr);
  }
  if (saves_output(op)) fn->output = out.node();
  Tensor result(out.node());  // a fresh handle: `out` may be shared, its history must not change
  result.impl()->grad_fn = std::move(fn);
  result.impl()->requires_grad = true;
  return result;
}

Tensor constant(double value, const Shape& shape, DType dtype, Device device) {
  check_shape(shape, "constant");
  // One scalar node, broadcast by Expand: no big constant is ever materialised.
  auto node = make_node(Op::Const, dtype, Shape(shape.size(), 1), device, {}, value);
  Tensor t(node);
  return shape.empty() || numel(shape) == 1 ? (shape.empty() ? t : t.reshape(shape)) : expand(t, shape);
}

Tensor rand(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream) {
  check_shape(shape, "rand");
  AETHER_CHECK_DTYPE(is_float(dtype), "rand", "expected a float dtype, got ", dtype_name(dtype));
  return apply(Op::Rand, {}, RandArg{seed, stream}, dtype, shape);
}

Tensor unary(Op op, const Tensor& x) {
  AETHER_CHECK(op_kind(op) == OpKind::Unary && op != Op::Cast, "unary", op_name(op), " is not a unary op");
  if (op_has(op, kFloatOnly))
    AETHER_CHECK_DTYPE(is_float(x.dtype()), op_name(op), "expected a float tensor, got ", desc(x),
                       " (cast it first)");
  return apply(op, {x}, {}, x.dtype(), x.shape());
}

Tensor cast(const Tensor& x, DType dtype) { return apply(Op::Cast, {x}, {}, dtype, x.shape()); }

Tensor binary(Op op, const Tensor& a, const Tensor& b) {
  AETHER_CHECK(op_kind(op) == OpKind::Binary, "binary", op_name(op), " is not a binary op");
  AETHER_CHECK(a.shape() == b.shape(), op_name(op), "expected equal shapes, got ", desc(a), " and ", desc(b));
  AETHER_CHECK_DTYPE(a.dtype() == b.dtype(), op_name(op), "expected equal dtypes, got ", desc(a), " and ",
                     desc(b));
  if (op_has(op, kFloatOnly))
    AETHER_CHECK_DTYPE(is_float(a.dtype()), op_name(op), "expected float tensors, got ", desc(a),
                       " (cast them first)");
  return apply(op, {a, b}, {}, op_has(op, kBoolResult) ? DType::boolean : a.dtype(), a.shape());
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  AETHER_CHECK_DTYPE(cond.dtype() == DType::boolean, "where", "expected a bool condition, got ", desc(cond));
  AETHER_CHECK(cond.shape() == a.shape() && a.shape() == b.shape(), "where", "expected equal shapes, got ",
               to_string(cond.shape()), ", ", to_string(a.shape()), " and ", to_string(b.shape()));
  AETHER_CHECK_DTYPE(a.dtype() == b.dtype(), "where", "expected equal dtypes, got ", desc(a), " and ",
                     desc(b));
  return apply(Op::Where, {cond, a, b}, {}, a.dtype(), a.shape());
}

Tensor reduce(Op op, const Tensor& x, Axes axes) {
  AETHER_CHECK(op_kind(op) == OpKind::Reduce, "reduce", op_name(op), " is not a reduce op");
  std::sort(axes.begin(), axes.end());
  Shape out = x.shape();
  for (size_t i = 0; i < axes.size(); ++i) {
    AETHER_CHECK(axes[i] >= 0 && axes[i] < x.ndim(), op_name(op), "axis ", axes[i], " out of range for ",
                 desc(x));
    AETHER_CHECK(i == 0 || axes[i] != axes[i - 1], op_name(op), "axis ", axes[i], " repeated");
    out[axes[i]] = 1;
  }
  return apply(op, {x}, axes, x.dtype(), out);
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  check_shape(shape, "reshape");
  AETHER_CHECK(numel(shape) == x.numel(), "reshape", "cannot reshape ", desc(x), " (", x.numel(),
               " elements) to ", to_string(shape), " (", numel(shape), " elements)");
  if (shape == x.shape()) return x;
  return apply(Op::Reshape, {x}, {}, x.dtype(), shape);
}

Tensor permute(const Tensor& x, const Axes& perm) {
  AETHER_CHECK(int(perm.size()) == x.ndim(), "permute", "permutation of ", perm.size(), " axes for ",
               desc(x));
  std::vector<bool> seen(perm.size(), false);
  for (int p : perm) {
    AETHER_CHECK(p >= 0 && p < x.ndim() && !seen[p], "permute", "invalid permutation for ", desc(x));
    seen[p] = true;
  }
  Shape out(perm.size());
  bool identity = true;
  for (size_t i = 0; i < perm.size(); ++i) {
    out[i] = x.shape()[perm[i]];
    identity = identity && perm[i] == int(i);
  }
  if (identity) return x;
  return apply(Op::Permute, {x}, perm, x.dtype(), out);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  check_shape(shape, "expand");
  AETHER_CHECK(int(shape.size()) == x.ndim(), "expand", "cannot expand ", desc(x), " to ", to_string(shape),
               " (different number of dims; reshape first)");
  for (int d = 0; d < x.ndim(); ++d)
    AETHER_CHECK(x.shape()[d] == shape[d] || x.shape()[d] == 1, "expand", "cannot expand ", desc(x), " to ",
                 to_string(shape), " (dim ", d, " is ", x.shape()[d], ", not 1)");
  if (shape == x.shape()) return x;
  return apply(Op::Expand, {x}, {}, x.dtype(), shape);
}

Tensor slice(const Tensor& x, const SliceArg& s) {
  const int nd = x.ndim();
  AETHER_CHECK(int(s.start.size()) == nd && int(s.stop.size()) == nd && int(s.step.size()) == nd, "slice",
               "expected start/stop/step for each of ", nd, " dims");
  Shape out(nd);
  bool identity = true;
  for (int d = 0; d < nd; ++d) {
    AETHER_CHECK(s.step[d] >= 1, "slice", "step must be >= 1 at the primitive level, got ", s.step[d]);
    AETHER_CHECK(0 <= s.start[d] && s.start[d] <= s.stop[d] && s.stop[d] <= x.shape()[d], "slice", "range [",
                 s.start[d], ", ", s.stop[d], ") out of bounds for dim ", d, " of ", desc(x));
    out[d] = (s.stop[d] - s.start[d] + s.step[d] - 1) / s.step[d];
    identity = identity && s.start[d] == 0 && s.stop[d] == x.shape()[d] && s.step[d] == 1;
  }
  if (identity) return x;
  return apply(Op::Slice, {x}, s, x.dtype(), out);
}

Tensor pad(const Tensor& x, const PadArg& p) {
  const int nd = x.ndim();
  AETHER_CHECK(int(p.before.size()) == nd && int(p.after.size()) == nd, "pad", "expected ", nd,
               " (before, after) pairs for ", desc(x));
  Shape out(nd);
  bool identity = true;
  for (int d = 0; d < nd; ++d) {
    AETHER_CHECK(p.before[d] >= 0 && p.after[d] >= 0, "pad", "padding must be >= 0 (use slice to crop)");
    out[d] = x.shape()[d] + p.before[d] + p.after[d];
    identity = identity && p.before[d] == 0 && p.after[d] == 0;
  }
  check_shape(out, "pad");
  if (identity) return x;
  return apply(Op::Pad, {x}, p, x.dtype(), out);
}

Tensor flip(const Tensor& x, const Axes& axes) {
  for (int a : axes) AETHER_CHECK(a >= 0 && a < x.ndim(), "flip", "axis ", a, " out of range for ", desc(x));
  if (axes.empty()) return x;
  return apply(Op::Flip, {x}, axes, x.dtype(), x.shape());
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  AETHER_CHECK(a.ndim() == 3 && b.ndim() == 3 && a.shape()[0] == b.shape()[0] && a.shape()[2] == b.shape()[1],
               "matmul", "expected (B,M,K) x (B,K,N), got ", desc(a), " x ", desc(b));
  AETHER_CHECK_DTYPE(a.dtype() == b.dtype(), "matmul", "expected equal dtypes, got ", desc(a), " x ",
                     desc(b));
  AETHER_CHECK_DTYPE(a.dtype() != DType::boolean, "matmul", "bool is not supported, got ", desc(a), " x ",
                     desc(b));
  return apply(Op::Matmul, {a, b}, {}, a.dtype(), {a.shape()[0], a.shape()[1], b.shape()[2]});
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Conv2dArg& arg) {
  AETHER_CHECK_DTYPE(x.dtype() == w.dtype() && is_float(x.dtype()), "conv2d",
                     "expected float x and w of one dtype, got ", desc(x), " and ", desc(w));
  return apply(Op::Conv2d, {x, w}, arg, x.dtype(), conv_out_shape("conv2d", x.shape(), w.shape(), arg));
}

Tensor conv2d_bwd_data(const Tensor& dy, const Tensor& w, const Shape& x_shape, const Conv2dArg& arg) {
  AETHER_CHECK_DTYPE(dy.dtype() == w.dtype(), "conv2d_bwd_data", "dtypes differ: ", desc(dy), " and ",
                     desc(w));
  const Shape y = conv_out_shape("conv2d_bwd_data", x_shape, w.shape(), arg);
  AETHER_CHECK(y == dy.shape(), "conv2d_bwd_data", "dy ", desc(dy), " does not match the output shape ",
               to_string(y));
  return apply(Op::Conv2dBwdData, {dy, w}, arg, dy.dtype(), x_shape);
}

Tensor conv2d_bwd_weight(const Tensor& x, const Tensor& dy, const Shape& w_shape, const Conv2dArg& arg) {
  AETHER_CHECK_DTYPE(dy.dtype() == x.dtype(), "conv2d_bwd_weight", "dtypes differ: ", desc(x), " and ",
                     desc(dy));
  const Shape y = conv_out_shape("conv2d_bwd_weight", x.shape(), w_shape, arg);
  AETHER_CHECK(y == dy.shape(), "conv2d_bwd_weight", "dy ", desc(dy), " does not match the output shape ",
               to_string(y));
  return apply(Op::Conv2dBwdWeight, {x, dy}, arg, x.dtype(), w_shape);
}

Shape pool2d_shape(const char* op, const Tensor& x, const Pool2dArg& arg) {
  check_pool_input(op, x);
  return pool_out_shape(op, x.shape(), arg);
}

Tensor maxpool2d(const Tensor& x, const Pool2dArg& arg) {
  check_pool_input("max_pool2d", x);
  return apply(Op::MaxPool2d, {x}, arg, x.dtype(), pool_out_shape("max_pool2d", x.shape(), arg));
}

Tensor maxpool2d_bwd(const Tensor& x, const Tensor& dy, const Pool2dArg& arg) {
  check_pool_input("max_pool2d_bwd", x);
  AETHER_CHECK(pool_out_shape("max_pool2d_bwd", x.shape(), arg) == dy.shape() && dy.dtype() == x.dtype(),
               "max_pool2d_bwd", "dy ", desc(dy), " does not match the pooled shape of ", desc(x));
  return apply(Op::MaxPool2dBwd, {x, dy}, arg, x.dtype(), x.shape());
}

Tensor avgpool2d(const Tensor& x, const Pool2dArg& arg) {
  check_pool_input("avg_pool2d", x);
  return apply(Op::AvgPool2d, {x}, arg, x.dtype(), pool_out_shape("avg_pool2d", x.shape(), arg));
}

Tensor avgpool2d_bwd(const Tensor& dy, const Shape& x_shape, const Pool2dArg& arg) {
  AETHER_CHECK(x_shape.size() == 4 && pool_out_shape("avg_pool2d_bwd", x_shape, arg) == dy.shape(),
               "avg_pool2d_bwd", "dy ", desc(dy), " does not match the pooled shape of ", to_string(x_shape));
  return apply(Op::AvgPool2dBwd, {dy}, arg, dy.dtype(), x_shape);
}

Tensor gather(const Tensor& x, const Tensor& idx) {
  AETHER_CHECK(x.ndim() == 3 && idx.ndim() == 2 && x.shape()[0] == idx.shape()[0], "gather",
               "takes x (B,N,D) and idx (B,M), got x ", desc(x), " and idx ", desc(idx));
  AETHER_CHECK_DTYPE(idx.dtype() == DType::int64, "gather", "indices must be int64, got ", desc(idx));
  AETHER_CHECK(idx.device() == x.device(), "gather", "x ", desc(x), " and idx ", desc(idx),
               " are on different devices");
  return apply(Op::Gather, {x, idx}, std::monostate{}, x.dtype(),
               {x.shape()[0], idx.shape()[1], x.shape()[2]});
}

Tensor scatter_add(const Tensor& dy, const Tensor& idx, int64_t n) {
  AETHER_CHECK(dy.ndim() == 3 && idx.ndim() == 2 && dy.shape()[0] == idx.shape()[0] &&
                   dy.shape()[1] == idx.shape()[1] && n >= 0,
               "scatter_add", "takes dy (B,M,D), idx (B,M) and N >= 0, got dy ", desc(dy), ", idx ",
               desc(idx), ", N ", n);
  AETHER_CHECK_DTYPE(idx.dtype() == DType::int64, "scatter_add", "indices must be int64, got ", desc(idx));
  AETHER_CHECK_DTYPE(is_float(dy.dtype()), "scatter_add", "sums floats, got ", desc(dy));
  AETHER_CHECK(idx.device() == dy.device(), "scatter_add", "dy ", desc(dy), " and idx ", desc(idx),
               " are on different devices");
  return apply(Op::ScatterAdd, {dy, idx}, std::monostate{}, dy.dtype(), {dy.shape()[0], n, dy.shape()[2]});
}

Tensor cumsum(const Tensor& x) {
  AETHER_CHECK(x.ndim() == 2, "cumsum", "takes x (N,L), got ", desc(x));
  AETHER_CHECK_DTYPE(is_float(x.dtype()) || x.dtype() == DType::int64, "cumsum",
                     "sums floats and int64, got ", desc(x));
  return apply(Op::Cumsum, {x}, std::monostate{}, x.dtype(), x.shape());
}

Tensor cumprod(const Tensor& x) {
  AETHER_CHECK(x.ndim() == 2, "cumprod", "takes x (N,L), got ", desc(x));
  AETHER_CHECK_DTYPE(is_float(x.dtype()) || x.dtype() == DType::int64, "cumprod",
                     "multiplies floats and int64, got ", desc(x));
  return apply(Op::Cumprod, {x}, std::monostate{}, x.dtype(), x.shape());
}

Tensor cumprod_bwd(const Tensor& x, const Tensor& dy) {
  AETHER_CHECK(x.ndim() == 2 && dy.shape() == x.shape(), "cumprod_bwd", "takes x (N,L) and dy (N,L), got x ",
               desc(x), ", dy ", desc(dy));
  AETHER_CHECK_DTYPE(is_float(x.dtype()) && dy.dtype() == x.dtype(), "cumprod_bwd",
                     "takes floats of one dtype, got x ", desc(x), ", dy ", desc(dy));
  return apply(Op::CumprodBwd, {x, dy}, std::monostate{}, x.dtype(), x.shape());
}

Tensor argsort(const Tensor& x, bool descending, int64_t k) {
  AETHER_CHECK(x.ndim() == 2, "argsort", "takes x (N,L), got ", desc(x));
  const int64_t l = x.shape()[1];
  AETHER_CHECK(k <= l, "argsort", "keeps at most the row's ", l, " positions, got k = ", k);
  const int64_t kept = k < 0 ? l : k;
  return apply(Op::Argsort, {x}, SortArg{descending, kept}, DType::int64, {x.shape()[0], kept});
}

}  // namespace aether::prim
