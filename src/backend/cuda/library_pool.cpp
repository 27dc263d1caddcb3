// 2-D max and average pooling on the GPU, forward and backward, with the CPU's semantics
// (backend/cpu/pool.cpp): asymmetric padding, -inf padding for max, count_include_pad for average,
// the max gradient routed to each window's FIRST maximum recomputed from x. cuDNN's pooling has
// only symmetric padding and its max backward needs y, so these are the NVRTC kernels of
// library_kernels.cpp (one thread per output element; the backward passes gather per input element,
// deterministic and without atomics).
#include <array>
#include <initializer_list>

#include "backend/cuda/library.h"
#include "library_common.h"

namespace aether::cuda {
namespace {

std::string describe(const char* op, DType dtype, const PoolGeom& g) {
  const Pool2dArg& a = g.arg;
  return detail::cat(op, " (cuda): x (", g.N, ",", g.H, ",", g.W, ",", g.C, ") -> y (", g.N, ",", g.OH, ",",
                     g.OW, ",", g.C, ") ", lib::dname(dtype), ", kernel ", a.kernel_h, "x", a.kernel_w,
                     ", stride ", a.stride_h, "x", a.stride_w, ", pad (t", a.pad_top, ",l", a.pad_left, ",b",
                     a.pad_bottom, ",r", a.pad_right, ")", a.count_include_pad ? ", count_include_pad" : "");
}

lib::PoolParams params(const char* op, DType dtype, const PoolGeom& g) {
  const Pool2dArg& a = g.arg;
  AETHER_CHECK(a.kernel_h >= 1 && a.kernel_w >= 1 && a.stride_h >= 1 && a.stride_w >= 1 && a.pad_top >= 0 &&
                   a.pad_left >= 0 && a.pad_bottom >= 0 && a.pad_right >= 0 && g.N >= 0 && g.H >= 0 &&
                   g.W >= 0 && g.C >= 0 &&
                   g.OH == conv_out_size(g.H, a.kernel_h, a.stride_h, a.pad_top, a.pad_bottom, 1) &&
                   g.OW == conv_out_size(g.W, a.kernel_w, a.stride_w, a.pad_left, a.pad_right, 1),
               describe(op, dtype, g), "inconsistent geometry");
  return {g.N,       g.H,        g.W,          g.C,         g.OH,
          g.OW,      a.kernel_h, a.kernel_w,   a.stride_h,  a.stride_w,
          a.pad_top, a.pad_left, a.pad_bottom, a.pad_right, a.count_include_pad ? 1 : 0};
}

// Launches kernel `k` over `n` elements with the given buffer arguments and the parameter block.
void run(const char* op, lib::Kern k, cudaStream_t stream, DType dtype, const PoolGeom& g, int64_t n,
         std::initializer_list<const void*> bufs) {
  lib::PoolParams p = params(op, dtype, g);
  if (n <= 0) return;
  const void* fn = lib::kernel(dtype, k, op);
  void* args[4] = {};
  size_t i = 0;
  std::array<void*, 3> ptrs{};
  for (const void* b : bufs) ptrs[i++] = const_cast<void*>(b);
  for (size_t j = 0; j < i; ++j) args[j] = &ptrs[j];
  args[i] = &p;
  lib::launch(fn, n, args, stream, describe(op, dtype, g));
}

}  // namespace

void maxpool2d_fwd(cudaStream_t stream, DType dtype, const void* x, void* y, const PoolGeom& g) {
  run("max_pool2d", lib::Kern::maxpool_fwd, stream, dtype, g, g.N * g.OH * g.OW * g.C, {x, y});
}
void maxpool2d_bwd(cudaStream_t stream, DType dtype, const void* x, const void* dy, void* dx,
                   const PoolGeom& g) {
  run("max_pool2d_bwd", lib::Kern::maxpool_bwd, stream, dtype, g, g.N * g.H * g.W * g.C, {x, dy, dx});
}
void avgpool2d_fwd(cudaStream_t stream, DType dtype, const void* x, void* y, const PoolGeom& g) {
  run("avg_pool2d", lib::Kern::avgpool_fwd, stream, dtype, g, g.N * g.OH * g.OW * g.C, {x, y});
}
void avgpool2d_bwd(cudaStream_t stream, DType dtype, const void* dy, void* dx, const PoolGeom& g) {
  run("avg_pool2d_bwd", lib::Kern::avgpool_bwd, stream, dtype, g, g.N * g.H * g.W * g.C, {dy, dx});
}

}  // namespace aether::cuda
