// aether/graph/primitives.h - checked constructors for the primitive ops (low level).
//
// Each function validates its arguments (throwing aether::Error naming the op, what it got and
// what it expected), then records one node with prim::apply, which also records the autograd
// history. The public Tensor API (broadcasting, promotion, negative axes...) is built on these.
#pragma once

#include <vector>

#include "aether/core/tensor.h"

namespace aether::prim {

// Records one node; records a GradFn when grad mode is on and a source requires grad.
Tensor apply(Op op, const std::vector<Tensor>& srcs, OpArg arg, DType dtype, Shape shape);

Tensor constant(double value, const Shape& shape, DType dtype, Device device = default_device());
Tensor rand(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream);
Tensor unary(Op op, const Tensor& x);            // Copy, Neg, Exp, Log, Sqrt, Recip, Sin
Tensor cast(const Tensor& x, DType dtype);
Tensor binary(Op op, const Tensor& a, const Tensor& b);  // equal shapes and dtypes
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // equal shapes
Tensor reduce(Op op, const Tensor& x, Axes axes);  // keeps reduced axes as size 1
Tensor reshape(const Tensor& x, const Shape& shape);
Tensor permute(const Tensor& x, const Axes& perm);
Tensor expand(const Tensor& x, const Shape& shape);  // same ndim; size-1 dims grow
Tensor slice(const Tensor& x, const SliceArg& s);
Tensor pad(const Tensor& x, const PadArg& p);
Tensor flip(const Tensor& x, const Axes& axes);
Tensor matmul(const Tensor& a, const Tensor& b);  // (B,M,K) x (B,K,N)
Tensor conv2d(const Tensor& x, const Tensor& w, const Conv2dArg& arg);
Tensor conv2d_bwd_data(const Tensor& dy, const Tensor& w, const Shape& x_shape, const Conv2dArg& arg);
Tensor conv2d_bwd_weight(const Tensor& x, const Tensor& dy, const Shape& w_shape, const Conv2dArg& arg);
Tensor maxpool2d(const Tensor& x, const Pool2dArg& arg);
Tensor maxpool2d_bwd(const Tensor& x, const Tensor& dy, const Pool2dArg& arg);
Tensor avgpool2d(const Tensor& x, const Pool2dArg& arg);
Tensor avgpool2d_bwd(const Tensor& dy, const Shape& x_shape, const Pool2dArg& arg);

}  // namespace aether::prim
