// Internal: the CUDA library kernels (cuBLAS matmul, cuDNN convolution, pooling) that the CUDA
// runtime (backend/cuda/device_runtime.cpp) calls for the graph's library ops. Built only with
// AETHER_CUDA. Every pointer is device memory holding a dense row-major buffer of `dtype`; shapes are
// given in each comment and in the geometry structs every device shares (backend/geometry.h).
// Every call is enqueued on `stream` and returns without synchronising; errors throw aether::Error
// naming the op, the shapes and the CUDA/cuBLAS/cuDNN status string.
//
// Handles (cublasHandle_t, cudnnHandle_t) are created once per device and bound to the stream per
// call; cuDNN algorithms and cuBLASLt plans are chosen once per (shape, dtype) and cached.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

#include "aether/core/dtype.h"
#include "backend/geometry.h"  // ConvGeom, PoolGeom

namespace aether::cuda {

// Device scratch of at least `bytes`, valid until the next call on the same stream (stream-ordered).
// Implemented by the caching allocator (backend/cuda/allocator.cpp).
void* workspace(cudaStream_t stream, size_t bytes);

// a (B,M,K), b (B,K,N) -> c (B,M,N), row-major. float32 (TF32 off: full float32 products),
// float64, float16 and bfloat16 (float32 accumulation, tensor cores) through cuBLASLt; int32,
// int64 and uint8 through an NVRTC kernel (sums modulo 2^64, as the CPU's reference).
void matmul(cudaStream_t stream, DType dtype, const void* a, const void* b, void* c, int64_t B, int64_t M,
            int64_t K, int64_t N);

// x (N,H,W,C), w (O,KH,KW,C/groups), y (N,OH,OW,O): NHWC activations, OHWI weights (cuDNN's NHWC
// filter format), cross-correlation like the CPU. float32 / float64 / float16 / bfloat16.
void conv2d_fwd(cudaStream_t stream, DType dtype, const void* x, const void* w, void* y, const ConvGeom& g);
// dy (N,OH,OW,O), w (O,KH,KW,C/groups) -> dx (N,H,W,C)
void conv2d_bwd_data(cudaStream_t stream, DType dtype, const void* dy, const void* w, void* dx,
                     const ConvGeom& g);
// x (N,H,W,C), dy (N,OH,OW,O) -> dw (O,KH,KW,C/groups)
void conv2d_bwd_weight(cudaStream_t stream, DType dtype, const void* x, const void* dy, void* dw,
                       const ConvGeom& g);

// x (N,H,W,C) -> y (N,OH,OW,C); padding is -inf for max, excluded or counted per Pool2dArg like the CPU.
void maxpool2d_fwd(cudaStream_t stream, DType dtype, const void* x, void* y, const PoolGeom& g);
// dx (N,H,W,C) = dy (N,OH,OW,C) routed to each window's first maximum, recomputed from x.
void maxpool2d_bwd(cudaStream_t stream, DType dtype, const void* x, const void* dy, void* dx,
                   const PoolGeom& g);
void avgpool2d_fwd(cudaStream_t stream, DType dtype, const void* x, void* y, const PoolGeom& g);
void avgpool2d_bwd(cudaStream_t stream, DType dtype, const void* dy, void* dx, const PoolGeom& g);

}  // namespace aether::cuda
