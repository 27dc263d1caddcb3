// core/device_memory.h - the memory of a device other than the host, as the core sees it: a table a
// device backend registers (src/backend/<device>/, through its DeviceRuntime), so that Buffer,
// Tensor::to and Device::cuda need no backend header. The host's memory is the core's own
// (buffer.cpp's block cache).
#pragma once

#include <cstddef>
#include <string>

#include "aether/core/device.h"

namespace aether {

class DeviceMemory {
 public:
  virtual ~DeviceMemory() = default;
  // Devices of this type present; 0 when none can be used, and then unavailable() says why.
  virtual int count() = 0;
  virtual std::string unavailable() = 0;
  // `bytes` of memory on device `index`, zeroed when `zero`; throws aether::Error.
  virtual void* alloc(int index, size_t bytes, bool zero) = 0;
  virtual void free(int index, void* ptr) noexcept = 0;
  // Copies `bytes` between memory of this device type and the host or another device of this type
  // (ordered after the work queued so far; waits when the destination is the host).
  virtual void copy(Device dst_device, void* dst, Device src_device, const void* src, size_t bytes) = 0;
};

// Called once per device type by its backend, at start-up (backend/registry.cpp).
void register_device_memory(DeviceType type, DeviceMemory* memory);
// The registered memory of `type`; null when this build has no backend for it.
DeviceMemory* device_memory(DeviceType type);
// Why devices of `type` cannot be used: the backend's reason, or that this build has no backend.
std::string device_unavailable(DeviceType type);

}  // namespace aether
