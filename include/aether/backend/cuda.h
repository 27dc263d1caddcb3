// aether/backend/cuda.h - the CUDA backend's public face: which GPUs there are, device memory
// statistics, timing with CUDA events, and capturing a training step in a CUDA graph.
//
// Every function here exists in every build. In a build without CUDA (-DAETHER_CUDA=OFF), or on a
// machine without a driver or GPU, cuda_device_count() is 0 and cuda_unavailable_reason() says why
// ("built without CUDA", "no CUDA driver ...", "no CUDA GPU ..."); Device::cuda(i) then throws
// aether::Error with that reason. Tensors move between devices with Tensor::to(Device).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace aether {

struct CudaDeviceInfo {
  int index = 0;
  std::string name;          // "NVIDIA H200"
  int64_t total_bytes = 0;   // global memory
  int major = 0, minor = 0;  // compute capability
  int multiprocessors = 0;
};

bool cuda_built();  // whether this build has the CUDA backend
// GPUs usable now (0 without a build, driver or GPU; the first call initialises the runtime).
int cuda_device_count();
// Why no GPU is usable ("" when at least one is).
std::string cuda_unavailable_reason();
std::vector<CudaDeviceInfo> cuda_devices();
// The NVRTC target used for `device`'s generated kernels ("compute_90"), capped at what NVRTC supports.
std::string cuda_arch(int device);

// ---- device memory (caching allocator) -------------------------------------------------------------
struct CudaMemoryStats {
  int64_t live_bytes = 0;      // held by live buffers (rounded to the allocator's size classes)
  int64_t peak_bytes = 0;      // high-water mark of live_bytes since start or cuda_reset_peak_memory()
  int64_t cached_bytes = 0;    // freed blocks kept for reuse
  int64_t reserved_bytes = 0;  // obtained from cudaMalloc and not yet returned (live + cached)
  int64_t allocations = 0;     // requests served
  int64_t cache_hits = 0;      // requests served from the free lists
  int64_t device_mallocs = 0;  // cudaMalloc calls
};
CudaMemoryStats cuda_memory_stats(int device = 0);
void cuda_reset_peak_memory(int device = 0);
// Returns cached blocks to the driver (after synchronising the device).
void cuda_empty_cache(int device = 0);
// One line per device that has allocated: live, peak, cached, reserved, hit rate.
std::string cuda_memory_report();

// Waits until all work queued on `device`'s stream has finished.
void cuda_synchronize(int device = 0);

// Kernels of a CUDA graph that ran on the host through the reference backend (lowering cannot
// express them yet, e.g. 16-bit floats): their inputs went D2H and their results H2D. Printed per
// kernel at AETHER_DEBUG >= 1. The float32 training path does not need it.
int64_t cuda_host_fallbacks();
// Generated kernels compiled with NVRTC, loaded from the disk cache, and found in memory.
struct CudaCodegenStats {
  int64_t compiled = 0, disk_hits = 0, memory_hits = 0, launches = 0, library_calls = 0;
};
CudaCodegenStats cuda_codegen_stats();

namespace cuda {

// Elapsed GPU time between start() and stop() on a device's stream, measured with CUDA events.
class Timer {
 public:
  explicit Timer(int device = 0);
  ~Timer();
  Timer(const Timer&) = delete;
  Timer& operator=(const Timer&) = delete;
  void start();
  void stop();
  double elapsed_ms();  // waits for stop's event

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// A point in a device's stream: the constructor records an event after the work queued so far;
// wait() blocks the calling thread (any thread) until that work has finished, not the work queued
// after it. The data-parallel step hands a gradient bucket to the communication thread this way, so
// the main thread goes on queueing the next bucket's kernels while the reduce waits for this one's.
class Fence {
 public:
  explicit Fence(int device = 0);
  ~Fence();
  Fence(const Fence&) = delete;
  Fence& operator=(const Fence&) = delete;
  void wait() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Captures the GPU work of `step` (kernel launches, library calls, device copies on the device's
// stream) into a CUDA graph and replays it. The first run() records a graph and instantiates it;
// later runs record again and update the instantiated graph in place (cudaGraphExecUpdate: buffer
// pointers may differ from step to step as long as the launches are the same), re-instantiating
// only when the update is refused (different kernels or shapes), then launch it.
//
// What it saves: the GPU-side gaps between launches (the driver submits the whole step at once, so
// the GPU never idles waiting for the host's next launch). What it does not save: the host-side work
// of building the lazy graph, scheduling and recording the launches, which still happens every step.
// `step` must not read values on the host (no item(), to_vector()) or synchronise while capturing;
// work that cannot be captured (host fallbacks, synchronising copies) makes run() fall back to
// running `step` uncaptured, permanently for this object (reason in fallback_reason()).
class GraphStep {
 public:
  explicit GraphStep(int device = 0);
  ~GraphStep();
  GraphStep(const GraphStep&) = delete;
  GraphStep& operator=(const GraphStep&) = delete;
  void run(const std::function<void()>& step);
  int64_t replays() const;  // launches of an instantiated graph
  int64_t instantiations() const;
  const std::string& fallback_reason() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Whether AETHER_CUDA_GRAPHS=1 asks Model::train to capture its steps.
bool graphs_requested();

}  // namespace cuda
}  // namespace aether
