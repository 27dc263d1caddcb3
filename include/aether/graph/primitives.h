// aether/graph/primitives.h - checked constructors for the primitive ops (low level).
//
// Each function validates its arguments (throwing aether::Error naming the op, what it got and
// what it expected), then records one node with prim::apply, which also records the autograd
// history. The public Tensor API (broadcasting, promotion, negative axes...) is built on these.
#pragma once

#include <vector>

#include "aether/graph/tensor.h"

namespace aether::prim {

// Records one node; records a GradFn when grad mode is on and a source requires grad.
Tensor apply(Op op, const std::vector<Tensor>& srcs, OpArg arg, DType dtype, Shape shape);
// Gives `out` (a value computed from `srcs`, or by a subgraph of other primitives built from them
// without history) the gradient of primitive `op` applied to `srcs`: a new handle on out's node
// whose backward is op's rule (grad.cpp), with `inputs` (the srcs' nodes) saved where it needs them.
Tensor record_grad(const Tensor& out, Op op, const std::vector<Tensor>& srcs,
                   const std::vector<NodePtr>& inputs, OpArg arg);

Tensor constant(double value, const Shape& shape, DType dtype, Device device = default_device());
Tensor rand(const Shape& shape, DType dtype, uint64_t seed, uint64_t stream);
Tensor unary(Op op, const Tensor& x);  // Copy, Neg, Exp, Log, Sqrt, Recip, Sin
Tensor cast(const Tensor& x, DType dtype);
Tensor binary(Op op, const Tensor& a, const Tensor& b);              // equal shapes and dtypes
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);  // equal shapes
Tensor reduce(Op op, const Tensor& x, Axes axes);                    // keeps reduced axes as size 1
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
// The pooled shape (N,OH,OW,C) of x (N,H,W,C), after the checks every pooling op makes (named `op`).
Shape pool2d_shape(const char* op, const Tensor& x, const Pool2dArg& arg);
Tensor maxpool2d(const Tensor& x, const Pool2dArg& arg);
Tensor maxpool2d_bwd(const Tensor& x, const Tensor& dy, const Pool2dArg& arg);
// Max-pooling over tiling windows (stride = kernel, no padding: every input element in at most one
// window) written with primitives, so the scheduler generates and fuses it (graph/pool_windows.cpp):
// the forward is a ReduceMax over window axes, the backward one elementwise select that recomputes
// each window's first maximum from x (no index tensor). The same semantics as maxpool2d /
// maxpool2d_bwd (the library op, their reference). pool_windows_tile says whether `arg` qualifies;
// AETHER_POOL_LIBRARY=1 turns it off (always the library op), for measuring.
bool pool_windows_tile(const Pool2dArg& arg);
// The rows and columns of x (N,H,W,C) that some window covers, (N,OH*KH,OW*KW,C): the pool's input
// and what its gradient rule reads. Where x is a conv's output, a conv that computes only those
// (graph/conv_crop.h); else a slice of x.
Tensor pool_windows_input(const Tensor& x, const Pool2dArg& arg);                       // no history
Tensor maxpool2d_windows(const Tensor& x, const Pool2dArg& arg);                        // no history
Tensor maxpool2d_windows_bwd(const Tensor& x, const Tensor& dy, const Pool2dArg& arg);  // no history
Tensor avgpool2d(const Tensor& x, const Pool2dArg& arg);
Tensor avgpool2d_bwd(const Tensor& dy, const Shape& x_shape, const Pool2dArg& arg);
// Rows by index, in B batches: x (B,N,D) any dtype, idx (B,M) int64 -> (B,M,D), row (b,m) =
// x[b, idx[b,m]]; an index outside [0, N) is an error (ErrorKind::index) when the op runs. Its
// gradient is scatter_add.
Tensor gather(const Tensor& x, const Tensor& idx);
// v (B,M,D) float, idx (B,M) int64 -> (B,N,D): zeros, with v's row (b,m) added to row
// (b, idx[b,m]) (repeated indices sum, in m order: deterministic). Gather's gradient, and index_add's
// op; its own gradient is a gather.
Tensor scatter_add(const Tensor& dy, const Tensor& idx, int64_t n);
// Running sums along each row: x (N,L) float or int64 -> (N,L) (floats summed in double, so
// float32 and 16-bit sums are rounded once each; int64 wraps).
Tensor cumsum(const Tensor& x);
// Running products along each row: x (N,L) float or int64 -> (N,L) (floats multiplied in double and
// rounded once each; int64 wraps). Its gradient is cumprod_bwd.
Tensor cumprod(const Tensor& x);
// x (N,L), dy (N,L) floats -> dx (N,L): dx_i = sum_{j>=i} dy_j * prod_{k<=j, k!=i} x_k, computed
// without dividing by x (exact where x has zeros). Not differentiable.
Tensor cumprod_bwd(const Tensor& x, const Tensor& dy);
// The positions that sort each row, stably: x (N,L) any dtype -> (N,K) int64, the first k of them
// (k < 0: all, K = L); NaN is the largest value. Not differentiable (the sorted values are a gather
// by these positions).
Tensor argsort(const Tensor& x, bool descending, int64_t k = -1);

}  // namespace aether::prim
