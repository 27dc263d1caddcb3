// The caching device allocator: cudaMalloc is slow and synchronises the device, so freed blocks are
// kept in per-device free lists and handed out again.
//
// Size classes: requests under 1 MiB round up to a multiple of 512 bytes, larger ones to a multiple
// of 2 MiB. A request takes the smallest free block of at least its class and less than twice it
// (so a small request never pins a huge block). Reuse is stream-ordered: every kernel, library call,
// copy and memset of a device runs on its one stream (runtime.h), so work queued after a block was
// freed runs after all work that used it, and handing the block out again needs no synchronisation.
// When cudaMalloc fails, the device's cache is returned to the driver and the request retried once.
// Blocks are never returned at exit (buffers may outlive static destruction; the driver reclaims them).
#if AETHER_HAS_CUDA
#include <algorithm>
#include <array>
#include <cstdio>
#include <map>
#include <mutex>
#include <sstream>
#include <unordered_map>

#include "aether/backend/cuda.h"
#include "backend/cuda/library.h"
#include "backend/cuda/runtime.h"

namespace aether {
namespace cuda {
namespace {

constexpr size_t kSmall = size_t(1) << 20, kSmallRound = 512, kLargeRound = size_t(2) << 20;
constexpr int kMaxDevices = 64;

size_t size_class(size_t bytes) {
  if (bytes == 0) bytes = 1;
  const size_t r = bytes < kSmall ? kSmallRound : kLargeRound;
  return (bytes + r - 1) / r * r;
}

struct DeviceHeap {
  std::mutex mu;
  std::multimap<size_t, void*> free;       // cached blocks by size
  std::unordered_map<void*, size_t> live;  // block -> size of blocks in use
  CudaMemoryStats stats;
  bool used = false;

  void release_cache(int device) {  // mu held
    if (free.empty()) return;
    (void)cudaSetDevice(device);
    (void)cudaDeviceSynchronize();
    for (auto& [size, p] : free) {
      (void)cudaFree(p);
      stats.reserved_bytes -= int64_t(size);
    }
    (void)cudaGetLastError();
    free.clear();
    stats.cached_bytes = 0;
  }
};

DeviceHeap& heap(int device) {
  static std::array<DeviceHeap, kMaxDevices>* heaps =
      new std::array<DeviceHeap, kMaxDevices>;  // never destroyed
  AETHER_CHECK(device >= 0 && device < kMaxDevices, "cuda allocator", "device index ", device,
               " out of range");
  return (*heaps)[size_t(device)];
}

}  // namespace

void* device_alloc(int device, size_t bytes) {
  set_device(device);
  const size_t size = size_class(bytes);
  DeviceHeap& h = heap(device);
  std::lock_guard<std::mutex> lock(h.mu);
  h.used = true;
  ++h.stats.allocations;
  void* p = nullptr;
  auto it = h.free.lower_bound(size);
  if (it != h.free.end() && it->first < 2 * size) {
    p = it->second;
    const size_t got = it->first;
    h.free.erase(it);
    h.stats.cached_bytes -= int64_t(got);
    ++h.stats.cache_hits;
    h.live.emplace(p, got);
    h.stats.live_bytes += int64_t(got);
  } else {
    cudaError_t e = cudaMalloc(&p, size);
    if (e == cudaErrorMemoryAllocation && !capturing(device)) {  // give the cache back and retry once
      (void)cudaGetLastError();
      h.release_cache(device);
      e = cudaMalloc(&p, size);
    }
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      throw Error(detail::cat("cuda allocator: cudaMalloc of ", size, " bytes on cuda:", device,
                              " failed: ", cudaGetErrorName(e), " (", cudaGetErrorString(e), "); live ",
                              h.stats.live_bytes, " bytes, cached ", h.stats.cached_bytes, " bytes"),
                  ErrorKind::runtime);
    }
    ++h.stats.device_mallocs;
    h.stats.reserved_bytes += int64_t(size);
    h.live.emplace(p, size);
    h.stats.live_bytes += int64_t(size);
  }
  h.stats.peak_bytes = std::max(h.stats.peak_bytes, h.stats.live_bytes);
  return p;
}

void device_free(int device, void* ptr) noexcept {
  if (!ptr || device < 0 || device >= kMaxDevices) return;
  DeviceHeap& h = heap(device);
  std::lock_guard<std::mutex> lock(h.mu);
  auto it = h.live.find(ptr);
  if (it == h.live.end()) return;  // not ours (a bug); never hand it out again
  const size_t size = it->second;
  h.live.erase(it);
  h.stats.live_bytes -= int64_t(size);
  h.free.emplace(size, ptr);
  h.stats.cached_bytes += int64_t(size);
}

void* buffer_alloc(int device, size_t bytes, bool zero) {
  void* p = device_alloc(device, bytes);
  if (zero && bytes > 0) AETHER_CUDA_CHECK(cudaMemsetAsync(p, 0, bytes, stream(device)));
  return p;
}
void buffer_free(int device, void* ptr) noexcept { device_free(device, ptr); }

// Scratch for library calls: one block per stream, grown when a call needs more; the old block goes
// back to the free list (stream-ordered, so calls already queued that use it are unaffected).
void* workspace(cudaStream_t s, size_t bytes) {
  struct Ws {
    int device = 0;
    void* ptr = nullptr;
    size_t size = 0;
  };
  static std::mutex mu;
  static auto* spaces = new std::unordered_map<cudaStream_t, Ws>;
  if (bytes == 0) return nullptr;
  std::lock_guard<std::mutex> lock(mu);
  Ws& w = (*spaces)[s];
  if (w.size >= bytes) return w.ptr;
  int device = 0;
  AETHER_CUDA_CHECK(cudaStreamGetDevice(s, &device));
  if (w.ptr) device_free(w.device, w.ptr);
  w.device = device;
  w.size = size_class(std::max(bytes, w.size * 2));
  w.ptr = device_alloc(device, w.size);
  return w.ptr;
}

}  // namespace cuda

CudaMemoryStats cuda_memory_stats(int device) {
  cuda::DeviceHeap& h = cuda::heap(device);
  std::lock_guard<std::mutex> lock(h.mu);
  return h.stats;
}

void cuda_reset_peak_memory(int device) {
  cuda::DeviceHeap& h = cuda::heap(device);
  std::lock_guard<std::mutex> lock(h.mu);
  h.stats.peak_bytes = h.stats.live_bytes;
}

void cuda_empty_cache(int device) {
  cuda::set_device(device);
  cuda::DeviceHeap& h = cuda::heap(device);
  std::lock_guard<std::mutex> lock(h.mu);
  h.release_cache(device);
}

std::string cuda_memory_report() {
  std::ostringstream os;
  auto mib = [](int64_t b) { return double(b) / double(1 << 20); };
  for (int d = 0; d < cuda::kMaxDevices; ++d) {
    cuda::DeviceHeap& h = cuda::heap(d);
    std::lock_guard<std::mutex> lock(h.mu);
    if (!h.used) continue;
    const auto& s = h.stats;
    char buf[320];
    std::snprintf(buf, sizeof buf,
                  "cuda:%d  live %.1f MiB  peak %.1f MiB  cached %.1f MiB  reserved %.1f MiB  "
                  "requests %lld (%.1f%% from cache, %lld cudaMalloc)\n",
                  d, mib(s.live_bytes), mib(s.peak_bytes), mib(s.cached_bytes), mib(s.reserved_bytes),
                  static_cast<long long>(s.allocations),
                  s.allocations ? 100.0 * double(s.cache_hits) / double(s.allocations) : 0.0,
                  static_cast<long long>(s.device_mallocs));
    os << buf;
  }
  const std::string r = os.str();
  return r.empty() ? "cuda: no device memory allocated\n" : r;
}

}  // namespace aether
#endif  // AETHER_HAS_CUDA
