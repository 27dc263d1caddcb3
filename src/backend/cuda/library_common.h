// Internal to the CUDA library ops (backend/cuda/library_*.cpp): status checks that throw
// aether::Error naming the failing call, the per-device cuDNN / cuBLASLt handles, the device's
// NVRTC architecture, and the NVRTC-compiled helper kernels (pooling, the direct-convolution
// fallback, explicit padding) with their launch. Needs the CUDA, cuDNN and cuBLASLt headers: include
// it only from files built with AETHER_CUDA (the backend and tests/cuda_library_test.cpp).
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <cstdint>
#include <mutex>
#include <string>

#include "aether/core/dtype.h"
#include "aether/core/error.h"

namespace aether::cuda::lib {

// ---- status checks ------------------------------------------------------------------------------
inline bool ok(cudaError_t s) { return s == cudaSuccess; }
inline bool ok(cublasStatus_t s) { return s == CUBLAS_STATUS_SUCCESS; }
inline bool ok(cudnnStatus_t s) { return s == CUDNN_STATUS_SUCCESS; }
// Throw aether::Error("<ctx>: <call> failed: <status name and string>").
[[noreturn]] void fail(cudaError_t s, const char* call, const std::string& ctx);
[[noreturn]] void fail(cublasStatus_t s, const char* call, const std::string& ctx);
[[noreturn]] void fail(cudnnStatus_t s, const char* call, const std::string& ctx);

}  // namespace aether::cuda::lib

// AETHER_LIB_CHECK(call, ctx): runs `call` (returning cudaError_t, cublasStatus_t or cudnnStatus_t)
// and throws aether::Error naming the call, its status string and `ctx` (a std::string expression
// describing the op, shapes and dtype; evaluated only on failure).
#define AETHER_LIB_CHECK(call, ctx)                                \
  do {                                                             \
    const auto aether_lib_status_ = (call);                        \
    if (!::aether::cuda::lib::ok(aether_lib_status_))              \
      ::aether::cuda::lib::fail(aether_lib_status_, #call, (ctx)); \
  } while (0)

namespace aether::cuda::lib {

// The current device (cudaGetDevice), checked.
int current_device();
// "compute_XY" of `device` (its compute capability), for NVRTC.
std::string device_arch(int device);

// Library handles of one device, created on first use with that device current. cuDNN binds a
// stream to its handle (cudnnSetStream), so a cuDNN call holds `cudnn_mu` from setting the stream
// until the call is enqueued; cuBLASLt takes the stream per call and needs no lock.
struct Handles {
  cudnnHandle_t cudnn = nullptr;
  cublasLtHandle_t lt = nullptr;
  std::mutex cudnn_mu;
};
Handles& handles(int device);

// A human-readable dtype list for errors: "float32".
inline std::string dname(DType t) { return dtype_name(t); }

// ---- NVRTC helper kernels (library_kernels.cpp) -------------------------------------------------
// Parameter blocks, passed by value; the same layout as the structs in the kernel source.
struct PoolParams {  // x (N,H,W,C) -> y (N,OH,OW,C)
  int64_t N, H, W, C, OH, OW, KH, KW, SH, SW, PT, PL, PB, PR, include_pad;
};
struct ConvParams {  // x (N,H,W,C), w (O,KH,KW,C/G), y (N,OH,OW,O)
  int64_t N, H, W, C, O, KH, KW, OH, OW, SH, SW, PT, PL, DH, DW, G;
};
struct PadParams {  // x (N,H,W,C) inside xp (N,HP,WP,C) at row PT, column PL; the rest of xp is 0
  int64_t N, H, W, C, HP, WP, PT, PL;
};
struct MatmulParams {  // a (B,M,K), b (B,K,N) -> c (B,M,N), row-major
  int64_t B, M, K, N;
};

enum class Kern {
  maxpool_fwd,      // (const T* x, T* y, PoolParams)
  maxpool_bwd,      // (const T* x, const T* dy, T* dx, PoolParams)
  avgpool_fwd,      // (const T* x, T* y, PoolParams)
  avgpool_bwd,      // (const T* dy, T* dx, PoolParams)
  conv_fwd,         // (const T* x, const T* w, T* y, ConvParams)
  conv_bwd_data,    // (const T* dy, const T* w, T* dx, ConvParams)
  conv_bwd_weight,  // (const T* x, const T* dy, T* dw, ConvParams)
  pad,              // (const T* x, T* xp, PadParams)
  crop,             // (const T* xp, T* x, PadParams)
  matmul,           // (const T* a, const T* b, T* c, MatmulParams): integer matmul (cuBLASLt has none)
};
constexpr int kNumKerns = 10;
const char* kern_name(Kern k);  // the entry point's name in the source: "ae_maxpool_fwd"

// The device-independent kernel text (uses T, A, ld(), cv(), AE_KERNEL, AE_FOR, AE_NEG_INF and the
// parameter structs, all defined by a prelude) and the full source for `dtype` on a GPU.
const char* kernels_body();
std::string kernels_source(DType dtype);

// The kernel `k` for `dtype` on the current device: compiled with NVRTC and loaded once per
// (architecture, dtype), then cached. Throws naming `op` when `dtype` is not a float type (for
// Kern::matmul: bool; it takes int32, int64 and uint8 too, summed modulo 2^64 like the CPU's).
const void* kernel(DType dtype, Kern k, const char* op);
// Launches `fn` with one thread per each of `n` work items (a grid-stride loop caps the grid).
void launch(const void* fn, int64_t n, void** args, cudaStream_t stream, const std::string& ctx);

}  // namespace aether::cuda::lib
