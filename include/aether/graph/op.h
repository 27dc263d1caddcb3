// aether/graph/op.h - THE op table: every primitive of the lazy graph, in one X-macro.
//
// This list drives the Op enum, op names, op kinds (how a backend and the scheduler treat an
// op), the reference backend's dispatch (src/backend/cpu/reference.cpp) and the gradient rules
// (src/graph/grad.cpp). Those use switches without `default:`, and the build uses
// -Werror=switch, so adding a line here fails to compile until every place handles the new op.
// Composite ops (relu, softmax, batch norm, cross-entropy...) are NOT here: they are written in
// terms of these primitives in src/ops/, and get gradients, fusion and every backend for free.
//
// X(name, kind, number of sources)
#pragma once

#include <cstdint>
#include <iosfwd>
#include <variant>
#include <vector>

#include "aether/core/dtype.h"

namespace aether {

// clang-format off
#define AETHER_OPS(X)                                                                   \
  /* sources: no inputs */                                                              \
  X(Load,            Source,   0) /* a realized buffer seen through a View            */ \
  X(Const,           Source,   0) /* one scalar, broadcast to the node's shape        */ \
  X(Rand,            Source,   0) /* uniform [0,1): Philox4x32-10(seed, stream, index) */ \
  /* elementwise unary */                                                               \
  X(Copy,            Unary,    1) /* identity into a fresh contiguous buffer          */ \
  X(Cast,            Unary,    1) /* convert to the node's dtype                      */ \
  X(Neg,             Unary,    1)                                                       \
  X(Exp,             Unary,    1)                                                       \
  X(Log,             Unary,    1)                                                       \
  X(Sqrt,            Unary,    1)                                                       \
  X(Recip,           Unary,    1)                                                       \
  X(Sin,             Unary,    1)                                                       \
  /* elementwise binary (sources have the node's shape; broadcasting is an Expand)   */ \
  X(Add,             Binary,   2)                                                       \
  X(Sub,             Binary,   2)                                                       \
  X(Mul,             Binary,   2)                                                       \
  X(Div,             Binary,   2)                                                       \
  X(Max,             Binary,   2)                                                       \
  X(CmpLt,           Binary,   2) /* results are bool                                 */ \
  X(CmpLe,           Binary,   2)                                                       \
  X(CmpEq,           Binary,   2)                                                       \
  X(CmpNe,           Binary,   2)                                                       \
  /* elementwise ternary */                                                             \
  X(Where,           Ternary,  3) /* cond ? a : b                                     */ \
  /* reductions over `axes`, keeping them as size-1 dims */                             \
  X(ReduceSum,       Reduce,   1)                                                       \
  X(ReduceMax,       Reduce,   1)                                                       \
  /* movement: views, never copies */                                                   \
  X(Reshape,         Movement, 1)                                                       \
  X(Permute,         Movement, 1)                                                       \
  X(Expand,          Movement, 1)                                                       \
  X(Slice,           Movement, 1) /* start, stop, step >= 1 per dim                   */ \
  X(Pad,             Movement, 1) /* zeros before/after per dim                       */ \
  X(Flip,            Movement, 1)                                                       \
  /* opaque ops computed by a library (oneDNN) or a naive loop */                       \
  X(Matmul,          Library,  2) /* (B,M,K) x (B,K,N) -> (B,M,N)                     */ \
  X(Conv2d,          Library,  2) /* x (N,H,W,C), w (O,KH,KW,C/g) -> (N,OH,OW,O)      */ \
  X(Conv2dBwdData,   Library,  2) /* dy (N,OH,OW,O), w -> dx (N,H,W,C)                */ \
  X(Conv2dBwdWeight, Library,  2) /* x (N,H,W,C), dy (N,OH,OW,O) -> dw (O,KH,KW,C/g)  */ \
  X(MaxPool2d,       Library,  1) /* x (N,H,W,C) -> (N,OH,OW,C)                       */ \
  X(MaxPool2dBwd,    Library,  2) /* x, dy -> dx; argmax recomputed from x            */ \
  X(AvgPool2d,       Library,  1)                                                       \
  X(AvgPool2dBwd,    Library,  1) /* dy -> dx (node shape is x's)                     */
// clang-format on

enum class Op : uint8_t {
#define AETHER_X(name, kind, nsrc) name,
  AETHER_OPS(AETHER_X)
#undef AETHER_X
};

enum class OpKind : uint8_t { Source, Unary, Binary, Ternary, Reduce, Movement, Library };

constexpr int kNumOps = 0
#define AETHER_X(name, kind, nsrc) +1
    AETHER_OPS(AETHER_X)
#undef AETHER_X
    ;
static_assert(kNumOps == 37, "op table changed: update the op tests and CONTRIBUTING.md");

const char* op_name(Op op);
OpKind op_kind(Op op);
int op_num_srcs(Op op);
const char* op_kind_name(OpKind k);
std::ostream& operator<<(std::ostream& os, Op op);
inline bool is_elementwise(Op op) {
  const OpKind k = op_kind(op);
  return k == OpKind::Unary || k == OpKind::Binary || k == OpKind::Ternary;
}

// ---- op arguments ---------------------------------------------------------------------------------
struct RandArg {
  uint64_t seed = 0;
  uint64_t stream = 0;  // distinguishes draws with the same seed (one per rand() call)
};
struct SliceArg {
  std::vector<int64_t> start, stop, step;
};
struct PadArg {
  std::vector<int64_t> before, after;
};
// Convolution geometry. Padding is explicit per side; "same" is resolved by nn::Conv2d.
struct Conv2dArg {
  int64_t stride_h = 1, stride_w = 1;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  int64_t dil_h = 1, dil_w = 1;
  int64_t groups = 1;
  bool operator==(const Conv2dArg&) const = default;
};
// Pooling window. Padding reads as -inf for max, and counts (or not) for average.
struct Pool2dArg {
  int64_t kernel_h = 2, kernel_w = 2;
  int64_t stride_h = 2, stride_w = 2;
  int64_t pad_top = 0, pad_left = 0, pad_bottom = 0, pad_right = 0;
  bool count_include_pad = false;
  bool operator==(const Pool2dArg&) const = default;
};
// Axes (reduce), a permutation (permute), a shape (reshape/expand: the node's shape is used).
using Axes = std::vector<int>;

using OpArg = std::variant<std::monostate, double, RandArg, Axes, SliceArg, PadArg, Conv2dArg, Pool2dArg>;

// Output size of one conv/pool spatial dim: floor((in + pads - dil*(k-1) - 1) / stride) + 1, or 0
// when the (dilated) window does not fit (C++ division truncates toward zero, so check first).
inline int64_t conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                             int64_t dil) {
  const int64_t span = in + pad_lo + pad_hi - dil * (k - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

}  // namespace aether
