// aether/graph/op.h - THE op table: every primitive of the lazy graph and every per-op property, in
// one X-macro row per op.
//
// The rows drive the Op enum, names, kinds (how a backend and the scheduler treat an op), the
// properties below, the reference backend's elementwise implementations (src/backend/cpu/
// reference.cpp) and the renderers' C snippets (src/codegen/snippets.cpp). Switches over Op have
// no `default:` (they name the cases of other groups with AETHER_OP_CASE), and the build uses
// -Werror=switch, so a new row fails to compile until every place that must decide about it
// does: the gradient rules (src/graph/grad.cpp), the scheduler's and executors' op switches.
// Composite ops (relu, softmax, batch norm, cross-entropy...) are NOT here: they are written in
// terms of these primitives in src/ops/, and get gradients, fusion and every backend for free.
//
// X(name, kind, number of sources, properties, reference, float snippet, integer snippet)
//   properties  kFloatOnly | kBoolResult | kExact16 | kNoGrad | kSavesIn0/1/2 | kSavesOut (below)
//   reference   the reference backend's value of an elementwise op, an expression in the source
//               values a, b (in their compute type: float for 16-bit floats; int64-wrapping helpers
//               wrap_add/wrap_sub/wrap_mul, safe_div and nan_max are defined there); `_` elsewhere
//   snippets    the generated kernels' C expression (C++ and CUDA alike) when the op computes in
//               floating point / in integers: $0 $1 $2 are the sources, $T the result's C type,
//               $B the math-builtin prefix (`__builtin_` in C++), $F the float suffix (`f`
//               unless float64) and $E the exp function (the CPU's float one is aether's own
//               ae_expf, which vectorises: within 1 ulp of the reference's std::exp); integer results are
//               computed in int64 and converted. "" where an op has no snippet (a non-elementwise op, or a
//               float-only op's integer form); Cast is rendered by the renderer's conversion rules.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <variant>
#include <vector>

#include "aether/core/dtype.h"

namespace aether {

// Per-op properties (the row's fourth column).
enum : uint32_t {
  kNoProps = 0,
  kFloatOnly = 1u << 0,   // defined for float sources only (the tensor API rejects integers)
  kBoolResult = 1u << 1,  // the result is bool whatever the sources' dtype (comparisons)
  kExact16 = 1u << 2,     // exact in a 16-bit float: the result is stored without rounding again
  kNoGrad = 1u << 3,      // no gradient rule (not differentiable, or a backward op: no double backward)
  kSavesIn0 = 1u << 4,    // the gradient rule reads source 0's value (kept alive for backward)
  kSavesIn1 = 1u << 5,
  kSavesIn2 = 1u << 6,
  kSavesOut = 1u << 7,  // the gradient rule reads the op's own result (flashlight: tanh keeps its output)
};

// The table, in groups of one kind and one implementation family each, so that a switch can name a
// whole group's cases (AETHER_OP_CASE) instead of a `default:`.
// clang-format off
#define AETHER_SOURCE_OPS(X)                                                                    \
  X(Load,   Source, 0, kNoGrad, _, "", "") /* a realized buffer seen through a View */          \
  X(Const,  Source, 0, kNoGrad, _, "", "") /* one scalar, broadcast to the node's shape */      \
  X(Rand,   Source, 0, kNoGrad, _, "", "") /* uniform [0,1): Philox4x32-10(seed, stream, i) */
#define AETHER_CAST_OPS(X) /* convert to the node's dtype (the renderers' conversion rules) */  \
  X(Cast,   Unary,  1, kExact16, _, "", "")
#define AETHER_UNARY_OPS(X)                                                                     \
  X(Copy,   Unary,  1, kExact16, a, "$0", "$0") /* identity into a fresh contiguous buffer */  \
  X(Neg,    Unary,  1, kExact16, wrap_sub(decltype(a)(0), a), "(-$0)", "ae_sub(0, (i64)$0)")   \
  X(Exp,    Unary,  1, kFloatOnly | kSavesOut, decltype(a)(std::exp(a)), "$E($0)", "")        \
  X(Log,    Unary,  1, kFloatOnly | kSavesIn0, decltype(a)(std::log(a)), "$Blog$F($0)", "")   \
  X(Sqrt,   Unary,  1, kFloatOnly | kSavesOut, decltype(a)(std::sqrt(a)), "$Bsqrt$F($0)", "") \
  X(Recip,  Unary,  1, kFloatOnly | kSavesOut, safe_div(decltype(a)(1), a), "(1 / $0)", "")  \
  X(Sin,    Unary,  1, kFloatOnly | kSavesIn0, decltype(a)(std::sin(a)), "$Bsin$F($0)", "")       \
  X(Floor,  Unary,  1, kFloatOnly | kExact16, decltype(a)(std::floor(a)), "$Bfloor$F($0)", "")
/* binary: sources have the node's shape (broadcasting is an Expand) */
#define AETHER_BINARY_OPS(X)                                                                    \
  X(Add,    Binary, 2, kNoProps, wrap_add(a, b), "($0 + $1)", "ae_add((i64)$0, (i64)$1)")     \
  X(Sub,    Binary, 2, kNoProps, wrap_sub(a, b), "($0 - $1)", "ae_sub((i64)$0, (i64)$1)")     \
  X(Mul,    Binary, 2, kSavesIn0 | kSavesIn1, wrap_mul(a, b), "($0 * $1)",                     \
    "ae_mul((i64)$0, (i64)$1)")                                                                 \
  X(Div,    Binary, 2, kSavesIn0 | kSavesIn1, safe_div(a, b), "($0 / $1)",                     \
    "ae_div((i64)$0, (i64)$1)")                                                                 \
  X(Max,    Binary, 2, kSavesIn0 | kSavesIn1, nan_max(a, b), "ae_max($0, $1)",                 \
    "ae_maxi((i64)$0, (i64)$1)")                                                                \
  X(Pow,    Binary, 2, kFloatOnly | kSavesIn0 | kSavesIn1 | kSavesOut,                        \
    decltype(a)(std::pow(a, b)), "$Bpow$F($0, $1)", "") /* C's pow: x < 0 needs an integer b */ \
  X(Fmod,   Binary, 2, kExact16 | kSavesIn0 | kSavesIn1, safe_fmod(a, b), "$Bfmod$F($0, $1)",   \
    "ae_fmod((i64)$0, (i64)$1)") /* C's fmod: a - trunc(a / b) b, exact; integer b = 0 gives 0 */ \
  X(CmpLt,  Binary, 2, kBoolResult | kNoGrad, a < b, "($0 < $1)", "($0 < $1)")                 \
  X(CmpLe,  Binary, 2, kBoolResult | kNoGrad, a <= b, "($0 <= $1)", "($0 <= $1)")              \
  X(CmpEq,  Binary, 2, kBoolResult | kNoGrad, a == b, "($0 == $1)", "($0 == $1)")              \
  X(CmpNe,  Binary, 2, kBoolResult | kNoGrad, a != b, "($0 != $1)", "($0 != $1)")
/* cond ? a : b, as bit operations (no branch: see alu_expr) */
#define AETHER_SELECT_OPS(X)                                                                    \
  X(Where,  Ternary, 3, kExact16 | kSavesIn0, _, "ae_sel($0, $1, $2)", "ae_seli<$T>($0, $1, $2)")
/* reductions over `axes`, keeping them as size-1 dims */
#define AETHER_REDUCE_OPS(X)                                                                    \
  X(ReduceSum, Reduce, 1, kNoProps, _, "", "")                                                  \
  X(ReduceMax, Reduce, 1, kSavesIn0 | kSavesOut, _, "", "")
/* movement: views, never copies */
#define AETHER_MOVEMENT_OPS(X)                                                                  \
  X(Reshape, Movement, 1, kNoProps, _, "", "")                                                  \
  X(Permute, Movement, 1, kNoProps, _, "", "")                                                  \
  X(Expand,  Movement, 1, kNoProps, _, "", "")                                                  \
  X(Slice,   Movement, 1, kNoProps, _, "", "") /* start, stop, step >= 1 per dim */             \
  X(Pad,     Movement, 1, kNoProps, _, "", "") /* zeros before/after per dim */                 \
  X(Flip,    Movement, 1, kNoProps, _, "", "")
/* opaque ops computed by a library (oneDNN, cuDNN) or a naive loop */
#define AETHER_LIBRARY_OPS(X)                                                                   \
  X(Matmul,          Library, 2, kSavesIn0 | kSavesIn1, _, "", "") /* (B,M,K) x (B,K,N) -> (B,M,N) */  \
  X(Conv2d,          Library, 2, kSavesIn0 | kSavesIn1, _, "", "") /* x (N,H,W,C), w (O,KH,KW,C/g) -> (N,OH,OW,O) */ \
  X(Conv2dBwdData,   Library, 2, kNoGrad, _, "", "") /* dy (N,OH,OW,O), w -> dx (N,H,W,C) */     \
  X(Conv2dBwdWeight, Library, 2, kNoGrad, _, "", "") /* x (N,H,W,C), dy (N,OH,OW,O) -> dw (O,KH,KW,C/g) */ \
  X(MaxPool2d,       Library, 1, kSavesIn0, _, "", "") /* x (N,H,W,C) -> (N,OH,OW,C) */         \
  X(MaxPool2dBwd,    Library, 2, kNoGrad, _, "", "") /* x, dy -> dx; argmax recomputed from x */ \
  X(AvgPool2d,       Library, 1, kNoProps, _, "", "")                                           \
  X(AvgPool2dBwd,    Library, 1, kNoGrad, _, "", "") /* dy -> dx (node shape is x's) */  \
  X(AllReduce,       Library, 1, kNoProps, _, "", "") /* x -> the sum of x over a group's ranks (graph/collective.h) */ \
  X(Gather,          Library, 2, kSavesIn1, _, "", "") /* x (B,N,D), idx (B,M) int64 in [0,N) -> (B,M,D): rows idx of x */ \
  X(ScatterAdd,      Library, 2, kSavesIn1, _, "", "") /* v (B,M,D), idx (B,M) int64 -> (B,N,D): v's rows added to rows idx */ \
  X(Cumsum,          Library, 1, kNoProps, _, "", "") /* x (N,L) -> (N,L): running sums along each row */ \
  X(Cumprod,         Library, 1, kSavesIn0, _, "", "") /* x (N,L) -> (N,L): running products along each row */ \
  X(CumprodBwd,      Library, 2, kNoGrad, _, "", "") /* x (N,L), dy (N,L) -> dx (N,L): Cumprod's gradient, exact at zeros */ \
  X(Argsort,         Library, 1, kNoGrad, _, "", "") /* x (N,L) -> (N,K) int64: the first K of each row's stable order (SortArg) */

#define AETHER_ELEMENTWISE_OPS(X) \
  AETHER_CAST_OPS(X) AETHER_UNARY_OPS(X) AETHER_BINARY_OPS(X) AETHER_SELECT_OPS(X)
#define AETHER_OPS(X)                                                                     \
  AETHER_SOURCE_OPS(X) AETHER_ELEMENTWISE_OPS(X) AETHER_REDUCE_OPS(X) AETHER_MOVEMENT_OPS(X) \
  AETHER_LIBRARY_OPS(X)
// The case labels of a group, for a switch that handles them all alike:
//   switch (op) { case Op::Add: ...; AETHER_REDUCE_OPS(AETHER_OP_CASE) return false; }
#define AETHER_OP_CASE(name, ...) case Op::name:
// clang-format on

enum class Op : uint8_t {
#define AETHER_X(name, ...) name,
  AETHER_OPS(AETHER_X)
#undef AETHER_X
};

enum class OpKind : uint8_t { Source, Unary, Binary, Ternary, Reduce, Movement, Library };

constexpr int kNumOps = 0
#define AETHER_X(name, ...) +1
    AETHER_OPS(AETHER_X)
#undef AETHER_X
    ;
static_assert(kNumOps == 47, "op table changed: update the op tests and CONTRIBUTING.md");

const char* op_name(Op op);
OpKind op_kind(Op op);
int op_num_srcs(Op op);
uint32_t op_props(Op op);  // the row's properties (kFloatOnly | ...)
inline bool op_has(Op op, uint32_t prop) { return (op_props(op) & prop) != 0; }
// The row's snippet for a float (fp) or integer computation; "" when it has none.
const char* op_snippet(Op op, bool fp);
const char* op_kind_name(OpKind k);
std::ostream& operator<<(std::ostream& os, Op op);
inline bool is_elementwise(Op op) {
  const OpKind k = op_kind(op);
  return k == OpKind::Unary || k == OpKind::Binary || k == OpKind::Ternary;
}
inline bool is_movement(Op op) { return op_kind(op) == OpKind::Movement; }
inline bool is_library(Op op) { return op_kind(op) == OpKind::Library; }
inline bool is_reduce(Op op) { return op_kind(op) == OpKind::Reduce; }

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
// A collective's group: the id graph/collective.h registered its reduction under.
struct CollectiveArg {
  int64_t group = -1;
  bool operator==(const CollectiveArg&) const = default;
};
// Argsort: the order (descending: largest first) and how many of its first positions are kept (K).
struct SortArg {
  bool descending = false;
  int64_t k = 0;
  bool operator==(const SortArg&) const = default;
};
// Axes (reduce), a permutation (permute), a shape (reshape/expand: the node's shape is used).
using Axes = std::vector<int>;

using OpArg = std::variant<std::monostate, double, RandArg, Axes, SliceArg, PadArg, Conv2dArg, Pool2dArg,
                           CollectiveArg, SortArg>;

// Output size of one conv/pool spatial dim: floor((in + pads - dil*(k-1) - 1) / stride) + 1, or 0
// when the (dilated) window does not fit (C++ division truncates toward zero, so check first).
inline int64_t conv_out_size(int64_t in, int64_t k, int64_t stride, int64_t pad_lo, int64_t pad_hi,
                             int64_t dil) {
  const int64_t span = in + pad_lo + pad_hi - dil * (k - 1) - 1;
  return span < 0 ? 0 : span / stride + 1;
}

}  // namespace aether
