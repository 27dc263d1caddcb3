// The CUDA device runtime: finding GPUs (and saying why there are none), one stream per device,
// properties, copies, CUDA-event timing, and the public device queries of aether/backend/cuda.h.
#if AETHER_HAS_CUDA
#include "backend/cuda/runtime.h"

#include <nvrtc.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <mutex>
#include <vector>

#include "aether/backend/cuda.h"
#include "backend/cuda/lazy_libs.h"

namespace aether {
namespace cuda {

void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line) {
  (void)cudaGetLastError();  // clear a non-sticky error so later calls can succeed
  const char* base = std::strrchr(file, '/');
  throw Error(detail::cat("CUDA: ", call, " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e),
                          ") at ", base ? base + 1 : file, ":", line),
              ErrorKind::runtime);
}

namespace {

constexpr int kMaxDevices = 64;

// Probed once: the GPUs and why there are none.
struct Probe {
  int count = 0;
  std::string reason;
  std::vector<cudaDeviceProp> props;
};
const Probe& probe() {
  static const Probe p = [] {
    Probe r;
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      switch (e) {
        case cudaErrorNoDevice: r.reason = "no CUDA GPU (the driver reports none)"; break;
        case cudaErrorInsufficientDriver:
          r.reason = "no CUDA driver (libcuda not found, or older than this CUDA " +
                     std::to_string(CUDART_VERSION / 1000) + " runtime)";
          break;
        default:
          r.reason =
              detail::cat("no CUDA driver or GPU usable: cudaGetDeviceCount failed: ", cudaGetErrorName(e),
                          " (", cudaGetErrorString(e), ")");
      }
      return r;
    }
    if (n == 0) {
      r.reason = "no CUDA GPU (the driver reports none)";
      return r;
    }
    r.count = std::min(n, kMaxDevices);
    r.props.resize(size_t(r.count));
    for (int i = 0; i < r.count; ++i) {
      const cudaError_t pe = cudaGetDeviceProperties(&r.props[size_t(i)], i);
      if (pe != cudaSuccess) {
        (void)cudaGetLastError();
        r.count = 0;
        r.props.clear();
        r.reason = detail::cat("CUDA GPU ", i, " is not usable: ", cudaGetErrorName(pe), " (",
                               cudaGetErrorString(pe), ")");
        return r;
      }
    }
    return r;
  }();
  return p;
}

void require(int device) {
  const Probe& p = probe();
  if (p.count == 0)
    throw Error(detail::cat("cuda:", device, " is not available: ", p.reason), ErrorKind::runtime);
  if (device < 0 || device >= p.count)
    throw Error(detail::cat("cuda:", device, ": no such GPU: ", p.count, " CUDA device",
                            p.count == 1 ? "" : "s", " present (valid indices 0..", p.count - 1, ")"),
                ErrorKind::runtime);
}

std::mutex g_stream_mu;
std::array<cudaStream_t, kMaxDevices> g_streams{};

}  // namespace

void set_device(int device) {
  require(device);
  AETHER_CUDA_CHECK(cudaSetDevice(device));
}

cudaStream_t stream(int device) {
  std::lock_guard<std::mutex> lock(g_stream_mu);
  cudaStream_t& s = g_streams[size_t(std::clamp(device, 0, kMaxDevices - 1))];
  if (!s) {
    set_device(device);
    AETHER_CUDA_CHECK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  }
  return s;
}

const cudaDeviceProp& properties(int device) {
  require(device);
  return probe().props[size_t(device)];
}

bool capturing(int device) {
  cudaStreamCaptureStatus st = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream(device), &st) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return st != cudaStreamCaptureStatusNone;
}

void copy_h2d(int device, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  set_device(device);
  // From pageable memory the call returns once `src` has been staged, so the caller may free it.
  AETHER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream(device)));
}

void copy_d2h(int device, void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  set_device(device);
  AETHER_CHECK_RUNTIME(!capturing(device), "to(cpu)",
                       "cannot copy to the host while a CUDA graph is being captured");
  AETHER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream(device)));
  AETHER_CUDA_CHECK(cudaStreamSynchronize(stream(device)));
}

void copy_d2d(int dst_device, void* dst, int src_device, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (dst_device == src_device) {
    set_device(dst_device);
    AETHER_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream(dst_device)));
    return;
  }
  // Across GPUs: the source's pending work must finish first; the copy is then ordered on the
  // destination's stream.
  set_device(src_device);
  AETHER_CUDA_CHECK(cudaStreamSynchronize(stream(src_device)));
  set_device(dst_device);
  AETHER_CUDA_CHECK(cudaMemcpyPeerAsync(dst, dst_device, src, src_device, bytes, stream(dst_device)));
}

void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, size_t bytes) {
  const bool dst_gpu = dst_device.type == DeviceType::cuda, src_gpu = src_device.type == DeviceType::cuda;
  if (dst_gpu && src_gpu) return copy_d2d(dst_device.index, dst, src_device.index, src, bytes);
  if (dst_gpu) return copy_h2d(dst_device.index, dst, src, bytes);
  if (src_gpu) return copy_d2h(src_device.index, dst, src, bytes);
  if (bytes > 0) std::memcpy(dst, src, bytes);
}

// ---- timing -----------------------------------------------------------------------------------------
struct Timer::Impl {
  int device = 0;
  cudaEvent_t start = nullptr, stop = nullptr;
  bool started = false, stopped = false;
};
Timer::Timer(int device) : impl_(std::make_unique<Impl>()) {
  impl_->device = device;
  set_device(device);
  AETHER_CUDA_CHECK(cudaEventCreate(&impl_->start));
  AETHER_CUDA_CHECK(cudaEventCreate(&impl_->stop));
}
Timer::~Timer() {
  if (impl_->start) (void)cudaEventDestroy(impl_->start);
  if (impl_->stop) (void)cudaEventDestroy(impl_->stop);
}
void Timer::start() {
  AETHER_CUDA_CHECK(cudaEventRecord(impl_->start, stream(impl_->device)));
  impl_->started = true;
  impl_->stopped = false;
}
void Timer::stop() {
  AETHER_CHECK(impl_->started, "cuda::Timer", "stop() before start()");
  AETHER_CUDA_CHECK(cudaEventRecord(impl_->stop, stream(impl_->device)));
  impl_->stopped = true;
}
double Timer::elapsed_ms() {
  AETHER_CHECK(impl_->stopped, "cuda::Timer", "elapsed_ms() before start() and stop()");
  AETHER_CUDA_CHECK(cudaEventSynchronize(impl_->stop));
  float ms = 0;
  AETHER_CUDA_CHECK(cudaEventElapsedTime(&ms, impl_->start, impl_->stop));
  return double(ms);
}

struct Fence::Impl {
  cudaEvent_t event = nullptr;
};
Fence::Fence(int device) : impl_(std::make_unique<Impl>()) {
  set_device(device);
  AETHER_CUDA_CHECK(cudaEventCreateWithFlags(&impl_->event, cudaEventDisableTiming));
  AETHER_CUDA_CHECK(cudaEventRecord(impl_->event, stream(device)));
}
Fence::~Fence() {
  if (impl_->event) (void)cudaEventDestroy(impl_->event);
}
void Fence::wait() const { AETHER_CUDA_CHECK(cudaEventSynchronize(impl_->event)); }

std::string pick_arch(int device, const cudaDeviceProp& p);  // below
}  // namespace cuda

// ---- public queries -------------------------------------------------------------------------------------
bool cuda_built() { return true; }
int cuda_device_count() { return cuda::probe().count; }
std::string cuda_unavailable_reason() { return cuda::probe().reason; }

std::vector<CudaDeviceInfo> cuda_devices() {
  std::vector<CudaDeviceInfo> out;
  const auto& p = cuda::probe();
  for (int i = 0; i < p.count; ++i) {
    const cudaDeviceProp& d = p.props[size_t(i)];
    out.push_back({i, d.name, int64_t(d.totalGlobalMem), d.major, d.minor, d.multiProcessorCount});
  }
  return out;
}

std::string cuda_arch(int device) {
  const cudaDeviceProp& p = cuda::properties(device);
  static std::mutex mu;
  static std::array<std::string, cuda::kMaxDevices> known;
  std::lock_guard<std::mutex> lock(mu);
  std::string& arch = known[size_t(device)];
  if (arch.empty()) arch = cuda::pick_arch(device, p);
  return arch;
}

namespace cuda {
std::string pick_arch(int device, const cudaDeviceProp& p) {
  const int cc = p.major * 10 + p.minor;
  int n = 0;
  std::vector<int> archs;
  if (AE_LAZY(nvrtcGetNumSupportedArchs)(&n) == NVRTC_SUCCESS && n > 0) {
    archs.resize(size_t(n));
    if (AE_LAZY(nvrtcGetSupportedArchs)(archs.data()) != NVRTC_SUCCESS) archs.clear();
  }
  if (archs.empty()) return detail::cat("compute_", cc);
  std::sort(archs.begin(), archs.end());
  int best = -1;
  for (int a : archs)
    if (a <= cc) best = a;
  AETHER_CHECK_RUNTIME(best > 0, "cuda", "GPU ", device, " (", p.name, ") has compute capability ", p.major,
                       ".", p.minor, ", older than the oldest this NVRTC supports (compute_", archs.front(),
                       ")");
  return detail::cat("compute_", best);
}
}  // namespace cuda

void cuda_synchronize(int device) {
  cuda::set_device(device);
  AETHER_CUDA_CHECK(cudaStreamSynchronize(cuda::stream(device)));
}

}  // namespace aether
#endif  // AETHER_HAS_CUDA
