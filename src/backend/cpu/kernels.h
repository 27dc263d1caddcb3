// Internal: the CPU library kernels (matmul, conv, pooling).
// Every pointer is a dense row-major buffer of `dtype`; shapes are given in each comment.
// Each op has a naive loop version, `*_naive` (reference_conv.cpp, reference_matmul.cpp,
// reference_pool.cpp): the oracle, the only version the reference backend (AETHER_FUSE=0) runs.
// The fused executor's library kernels run the fast versions: oneDNN for matmul and conv where it
// supports the dtype (library_impl() picks it; else the naive loop), conv_bwd_weight_avx2.cpp for
// float32 conv backward-weights where oneDNN's kernels are AVX2 ones, and pool.cpp's loops.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "aether/backend/backend.h"
#include "aether/core/buffer.h"
#include "aether/core/error.h"
#include "aether/graph/op.h"
#include "backend/geometry.h"  // ConvGeom, PoolGeom

namespace aether::cpu {

// The float storage types (float, double, half, bfloat16), for kernels templated on the storage type.
template <typename T>
constexpr bool kIsFloatStorage =
    std::is_floating_point_v<T> || std::is_same_v<T, half> || std::is_same_v<T, bfloat16>;

// Calls f(T{}) for the float storage types; throws naming `op` for the others.
template <typename F>
void dispatch_float(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    case DType::float16: return f(half{});
    case DType::bfloat16: return f(bfloat16{});
    case DType::int32:
    case DType::int64:
    case DType::uint8:
    case DType::boolean: break;
  }
  throw Error(detail::cat(op, ": expected a float dtype, got ", dtype_name(dtype)), ErrorKind::type);
}

// Calls into oneDNN so far (process-wide): every matmul_onednn and conv2d_*_onednn call counts,
// even one that declines. The reference backend makes none (tests check it).
int64_t onednn_calls();
void note_onednn_call();
// The ISA oneDNN dispatches its kernels to here, under AETHER_CPU_ISA's cap ("avx2", ...).
std::string onednn_isa();

// a (B,M,K), b (B,K,N) -> c (B,M,N)
void matmul_naive(DType dtype, const void* a, const void* b, void* c, int64_t B, int64_t M, int64_t K,
                  int64_t N);
// Returns false (and does nothing) when oneDNN does not support `dtype`. float16 / bfloat16 run
// natively where the CPU can, else in float32 on widened copies (widen.h). `ta` / `tb`: a or b is
// stored transposed in each batch ((B,K,M) or (B,N,K) row-major: a transposed view read in place).
bool matmul_onednn(DType dtype, const void* a, const void* b, void* c, int64_t B, int64_t M, int64_t K,
                   int64_t N, bool ta = false, bool tb = false);

void conv2d_fwd_naive(DType dtype, const void* x, const void* w, void* y, const ConvGeom& g);
void conv2d_bwd_data_naive(DType dtype, const void* dy, const void* w, void* dx, const ConvGeom& g);
void conv2d_bwd_weight_naive(DType dtype, const void* x, const void* dy, void* dw, const ConvGeom& g);
// oneDNN versions: false (doing nothing) when oneDNN cannot run this dtype / shape here. The weights
// are reordered to oneDNN's blocked layout once per weights buffer: pass the Buffer holding `w` as
// `w_owner` (null: reordered on every call). The Buffer's contents must not change while it lives.
bool conv2d_fwd_onednn(DType dtype, const void* x, const void* w, void* y, const ConvGeom& g,
                       const std::shared_ptr<const Buffer>& w_owner = nullptr);
bool conv2d_bwd_data_onednn(DType dtype, const void* dy, const void* w, void* dx, const ConvGeom& g,
                            const std::shared_ptr<const Buffer>& w_owner = nullptr);
// dw is computed in the primitive's layout and reordered to OHWI.
bool conv2d_bwd_weight_onednn(DType dtype, const void* x, const void* dy, void* dw, const ConvGeom& g);
// Backward-weights in AVX2 + FMA (conv_bwd_weight_avx2.cpp): float32, stride 1, dilation 1, one group,
// C % 8 == 0. False (and nothing done) when the CPU lacks AVX2 or FMA, or for anything else.
bool conv2d_bwd_weight_avx2(DType dtype, const void* x, const void* dy, void* dw, const ConvGeom& g);
int64_t conv_bwd_weight_avx2_calls();  // calls conv2d_bwd_weight_avx2 took (process-wide)
// The fused executor's backward-weights: conv2d_bwd_weight_avx2 where oneDNN's kernels are AVX2 ones
// (onednn_isa() avx2*: no AVX-512, or AETHER_CPU_ISA=avx2) and AETHER_CONV_BWD_WEIGHT_AVX2 is on (the
// default), else oneDNN's; false when neither takes it.
bool conv2d_bwd_weight_library(DType dtype, const void* x, const void* dy, void* dw, const ConvGeom& g);

// One post-op of a fused forward convolution, applied to y (N,OH,OW,O) in order.
struct ConvPostOp {
  enum class Kind : uint8_t {
    Bias,  // y += b[o], b (O) at `data`; only as the first post-op
    Add,   // y += b[o], b (O) at `data`
    Sub,   // y -= b[o]
    Mul,   // y *= s[o]
    Sum,   // y += r, r (N,OH,OW,O): the caller stores r into y before the call
    Relu,  // y = max(y, 0)
  };
  Kind kind;
  const void* data = nullptr;
};
// y = ops(conv(x, w)): one oneDNN convolution with post-ops; false when oneDNN refuses them.
bool conv2d_fwd_postops_onednn(DType dtype, const void* x, const void* w, void* y, const ConvGeom& g,
                               const std::vector<ConvPostOp>& ops,
                               const std::shared_ptr<const Buffer>& w_owner = nullptr);
// Conv weights reordered between layouts so far (process-wide): user weights into a primitive's
// layout (cache misses) and weight gradients out of it, for tests and measurements.
int64_t conv_weight_reorders();
// Successful conv2d_fwd_postops_onednn calls so far (process-wide).
int64_t conv_postop_calls();
// oneDNN convolutions (and matmuls) run in float32 on widened copies of 16-bit operands so far,
// because this CPU has no native 16-bit kernel for them (widen.h; process-wide).
int64_t conv_widened_calls();
int64_t matmul_widened_calls();

// The oracle (reference_pool.cpp): same contracts as the library loops below.
void maxpool2d_fwd_naive(DType dtype, const void* x, void* y, const PoolGeom& g);
void maxpool2d_bwd_naive(DType dtype, const void* x, const void* dy, void* dx, const PoolGeom& g);
void avgpool2d_fwd_naive(DType dtype, const void* x, void* y, const PoolGeom& g);
void avgpool2d_bwd_naive(DType dtype, const void* dy, void* dx, const PoolGeom& g);
// The library loops (pool.cpp, vectorised over channels) the fused executor runs.
void maxpool2d_fwd(DType dtype, const void* x, void* y, const PoolGeom& g);
// dx (N,H,W,C) = scatter of dy (N,OH,OW,C) to each window's first maximum, recomputed from x.
void maxpool2d_bwd(DType dtype, const void* x, const void* dy, void* dx, const PoolGeom& g);
void avgpool2d_fwd(DType dtype, const void* x, void* y, const PoolGeom& g);
void avgpool2d_bwd(DType dtype, const void* dy, void* dx, const PoolGeom& g);

// Rows by index (gather.cpp; one version, which the reference backend runs too). Indices outside
// [0, N) throw (ErrorKind::index) before anything is written.
struct RowsGeom {
  int64_t b = 1, n = 0, m = 0, d = 0;  // batches, rows indexed into, indices per batch, row length
};
// y (B,M,D) = x (B,N,D)[b, idx (B,M)], any dtype.
void gather_rows(DType dtype, const void* x, const int64_t* idx, void* y, const RowsGeom& g);
// dx (B,N,D) = zeros, then dx[b, idx[b,m]] += dy (B,M,D)[b,m] in m order (float dtypes).
void scatter_add_rows(DType dtype, const void* dy, const int64_t* idx, void* dx, const RowsGeom& g);

// Along the rows of x (N,L) (scan_sort.cpp; one version, which the reference backend runs too):
// y (N,L) = inclusive prefix sums of each row: floats summed in double (float32 and 16-bit floats
// rounded once per element), int64 wrapping.
void cumsum_rows(DType dtype, const void* x, void* y, int64_t n, int64_t l);
// y (N,L) = inclusive prefix products of each row of x (N,L), as cumsum_rows (double, int64 wrapping).
void cumprod_rows(DType dtype, const void* x, void* y, int64_t n, int64_t l);
// dx (N,L) = cumprod's gradient for x (N,L) and dy (N,L), floats, without dividing by x.
void cumprod_bwd_rows(DType dtype, const void* x, const void* dy, void* dx, int64_t n, int64_t l);
// idx (N,K) int64 = the first k positions of the order that sorts each row of x (N,L), stably (equal
// values keep their order); NaN is the largest value (last ascending, first descending). Any dtype.
void argsort_rows(DType dtype, const void* x, int64_t* idx, int64_t n, int64_t l, int64_t k, bool descending);

}  // namespace aether::cpu
