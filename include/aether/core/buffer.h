// aether/core/buffer.h - Buffer: one allocation of `numel` elements of one dtype on one device.
//
// Buffers are reference counted (std::shared_ptr). A realized graph node holds its buffer; when no
// tensor and no pending node refers to the node any more, the buffer is freed.
#pragma once

#include <cstdint>
#include <memory>

#include "aether/core/device.h"
#include "aether/core/dtype.h"

namespace aether {

class Buffer {
 public:
  // Host memory on the CPU, zero-initialised unless `zero_fill` is false (for a kernel that writes
  // every element).
  Buffer(Device device, DType dtype, int64_t numel, bool zero_fill = true);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;

  Device device() const { return device_; }
  DType dtype() const { return dtype_; }
  int64_t numel() const { return numel_; }
  int64_t nbytes() const { return numel_ * dtype_size(dtype_); }
  void* data() { return data_; }
  const void* data() const { return data_; }
  template <typename T>
  T* as() { return static_cast<T*>(data_); }
  template <typename T>
  const T* as() const { return static_cast<const T*>(data_); }

  // Bytes currently held by all live buffers, and the high-water mark (process-wide).
  static int64_t live_bytes();
  static int64_t peak_bytes();

 private:
  Device device_;
  DType dtype_;
  int64_t numel_;
  void* data_ = nullptr;
};

using BufferPtr = std::shared_ptr<Buffer>;

}  // namespace aether
