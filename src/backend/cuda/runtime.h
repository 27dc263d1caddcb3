// Internal: the CUDA runtime layer of the CUDA backend (built only with AETHER_CUDA): error checks,
// the one stream per device, device properties, the caching allocator and host <-> device copies.
// Everything here uses the CUDA runtime API only (cudart_static), so nothing links against libcuda;
// the runtime finds the driver when first used.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "aether/core/device.h"
#include "aether/core/error.h"

namespace aether::cuda {

// Throws aether::Error naming the failed call, the CUDA error's name and description.
[[noreturn]] void throw_cuda_error(cudaError_t e, const char* call, const char* file, int line);
inline void check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) throw_cuda_error(e, call, file, line);
}
#define AETHER_CUDA_CHECK(call) ::aether::cuda::check((call), #call, __FILE__, __LINE__)

// Checks that `device` names a usable GPU (else throws the reason) and makes it current.
void set_device(int device);
// The device's stream (created on first use, non-blocking): every kernel, library call, copy and
// memset of the backend is queued on it, so a freed block is safe to reuse by the next request.
cudaStream_t stream(int device);
const cudaDeviceProp& properties(int device);

// Caching allocator (allocator.cpp). Sizes are rounded to size classes; a freed block goes to its
// device's free list and is handed out again without synchronising (stream-ordered on stream()).
void* device_alloc(int device, size_t bytes);
void device_free(int device, void* ptr) noexcept;

// Copies between host and device memory (or device and device), ordered on the device's stream;
// a copy to the host waits for it.
void copy_h2d(int device, void* dst, const void* src, size_t bytes);
void copy_d2h(int device, void* dst, const void* src, size_t bytes);
void copy_d2d(int dst_device, void* dst, int src_device, const void* src, size_t bytes);

// A Buffer's memory (device_runtime.cpp's DeviceMemory): zeroed on the device's stream when `zero`.
void* buffer_alloc(int device, size_t bytes, bool zero);
void buffer_free(int device, void* ptr) noexcept;
// Copies `bytes` between two buffers' memory on any devices (waits when the destination is the host).
void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, size_t bytes);

// Whether `device`'s stream is capturing a CUDA graph now (then nothing may synchronise).
bool capturing(int device);

}  // namespace aether::cuda
