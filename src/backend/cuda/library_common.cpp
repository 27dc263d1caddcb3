// Shared parts of the CUDA library ops (see library_common.h): status errors, per-device cuDNN and
// cuBLASLt handles, the device's NVRTC architecture, and the NVRTC-compiled helper kernels, loaded
// once per (architecture, dtype) with cudaLibraryLoadData (context-independent loading: the CUDA
// 12+ runtime, no libcuda link) and launched with cudaLaunchKernel.
#include "library_common.h"

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <utility>

#include "backend/cuda/lazy_libs.h"
#include "backend/cuda/nvrtc_compile.h"

namespace aether::cuda::lib {

// ---- status errors ------------------------------------------------------------------------------
namespace {
// The call as written, without the lazy-loading wrapper: "AE_LAZY(cudnnCreate)(&h)" -> "cudnnCreate(&h)".
std::string plain(const char* call) {
  std::string s = call;
  for (size_t at; (at = s.find("AE_LAZY(")) != std::string::npos;) {
    const size_t close = s.find(')', at);
    if (close == std::string::npos) break;
    s = s.substr(0, at) + s.substr(at + 8, close - at - 8) + s.substr(close + 1);
  }
  return s;
}
}  // namespace

void fail(cudaError_t s, const char* call, const std::string& ctx) {
  cudaGetLastError();  // clear a non-sticky error so that the next call does not report it again
  throw Error(
      detail::cat(ctx, ": ", call, " failed: ", cudaGetErrorName(s), " (", cudaGetErrorString(s), ")"),
      ErrorKind::runtime);
}
void fail(cublasStatus_t s, const char* call, const std::string& ctx) {
  throw Error(detail::cat(ctx, ": ", plain(call), " failed: ", AE_LAZY(cublasLtGetStatusName)(s), " (",
                          AE_LAZY(cublasLtGetStatusString)(s), ")"),
              ErrorKind::runtime);
}
void fail(cudnnStatus_t s, const char* call, const std::string& ctx) {
  char last[512] = {0};
  AE_LAZY(cudnnGetLastErrorString)(last, sizeof last);
  throw Error(detail::cat(ctx, ": ", plain(call), " failed: ", AE_LAZY(cudnnGetErrorString)(s),
                          last[0] != '\0' ? std::string(" (") + last + ")" : std::string()),
              ErrorKind::runtime);
}

// ---- devices and handles ------------------------------------------------------------------------
int current_device() {
  int dev = 0;
  AETHER_LIB_CHECK(cudaGetDevice(&dev), std::string("cuda library"));
  return dev;
}

std::string device_arch(int device) {
  static std::mutex mu;
  static std::map<int, std::string> arch;
  std::lock_guard<std::mutex> lock(mu);
  auto it = arch.find(device);
  if (it != arch.end()) return it->second;
  int major = 0, minor = 0;
  const std::string ctx = detail::cat("cuda library: device ", device);
  AETHER_LIB_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), ctx);
  AETHER_LIB_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), ctx);
  return arch[device] = detail::cat("compute_", major * 10 + minor);
}

Handles& handles(int device) {
  static std::mutex mu;
  // Never destroyed: work may still be queued on the handles during static teardown.
  static auto* all = new std::map<int, std::unique_ptr<Handles>>();
  std::lock_guard<std::mutex> lock(mu);
  std::unique_ptr<Handles>& h = (*all)[device];
  if (!h) {
    auto fresh = std::make_unique<Handles>();
    const std::string ctx = detail::cat("cuda library: handles of device ", device);
    int prev = 0;
    AETHER_LIB_CHECK(cudaGetDevice(&prev), ctx);
    AETHER_LIB_CHECK(cudaSetDevice(device), ctx);
    try {
      AETHER_LIB_CHECK(AE_LAZY(cudnnCreate)(&fresh->cudnn), ctx);
      AETHER_LIB_CHECK(AE_LAZY(cublasLtCreate)(&fresh->lt), ctx);
    } catch (...) {
      cudaSetDevice(prev);
      throw;
    }
    AETHER_LIB_CHECK(cudaSetDevice(prev), ctx);
    h = std::move(fresh);
  }
  return *h;
}

// ---- NVRTC helper kernels -----------------------------------------------------------------------
namespace {

struct Module {
  cudaLibrary_t lib = nullptr;
  std::array<const void*, kNumKerns> fn{};
};

// Compiles kernels_source(dtype) for the current device's architecture and loads it.
Module load_module(DType dtype, const std::string& arch) {
  const std::string ctx = detail::cat("cuda library kernels (", dname(dtype), ", ", arch, ")");
  std::string ptx;
  if (!codegen::nvrtc_compile(kernels_source(dtype), arch, &ptx))
    throw Error(detail::cat(ctx, ": NVRTC failed:\n", ptx), ErrorKind::runtime);
  Module m;
  AETHER_LIB_CHECK(cudaLibraryLoadData(&m.lib, ptx.c_str(), nullptr, nullptr, 0, nullptr, nullptr, 0), ctx);
  for (int k = 0; k < kNumKerns; ++k) {
    cudaKernel_t kern = nullptr;
    AETHER_LIB_CHECK(cudaLibraryGetKernel(&kern, m.lib, kern_name(Kern(k))), ctx + " " + kern_name(Kern(k)));
    m.fn[size_t(k)] = reinterpret_cast<const void*>(kern);
  }
  return m;
}

}  // namespace

const void* kernel(DType dtype, Kern k, const char* op) {
  AETHER_CHECK_DTYPE(is_float(dtype) || (is_int(dtype) && k == Kern::matmul), op,
                     "expected a float dtype (float32, float64, float16, bfloat16)",
                     k == Kern::matmul ? ", int32, int64 or uint8" : "", ", got ", dname(dtype));
  const std::string arch = device_arch(current_device());
  static std::mutex mu;
  static auto* modules = new std::map<std::pair<std::string, int>, Module>();  // never unloaded
  std::lock_guard<std::mutex> lock(mu);
  const auto key = std::make_pair(arch, int(dtype));
  auto it = modules->find(key);
  if (it == modules->end()) it = modules->emplace(key, load_module(dtype, arch)).first;
  return it->second.fn[size_t(k)];
}

void launch(const void* fn, int64_t n, void** args, cudaStream_t stream, const std::string& ctx) {
  if (n <= 0) return;
  constexpr int64_t kThreads = 256, kMaxBlocks = 8192;  // the grid-stride loop covers the rest
  const int64_t blocks = std::min((n + kThreads - 1) / kThreads, kMaxBlocks);
  AETHER_LIB_CHECK(cudaLaunchKernel(fn, dim3(unsigned(blocks)), dim3(unsigned(kThreads)), args, 0, stream),
                   ctx);
}

}  // namespace aether::cuda::lib
