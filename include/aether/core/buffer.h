// aether/core/buffer.h - Buffer: one allocation of `numel` elements of one dtype on one device.
//
// Buffers are reference counted (std::shared_ptr). A realized graph node holds its buffer; when no
// tensor and no pending node refers to the node any more, the buffer is freed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "aether/core/device.h"
#include "aether/core/dtype.h"

namespace aether {

class Buffer {
 public:
  // Host memory on the CPU, device memory on a GPU (CUDA caching allocator; zeroed on the device's
  // stream), zero-initialised unless `zero_fill` is false (for a kernel that writes every element).
  // On a GPU data() is a device pointer: host code must never dereference it (Tensor::to copies).
  Buffer(Device device, DType dtype, int64_t numel, bool zero_fill = true);
  // Host memory that someone else owns (a NumPy array handed over without a copy): aether reads it
  // and never frees, reuses or writes it (no kernel writes into a realized buffer); `owner` is
  // released when the buffer dies. `data` must hold numel elements of `dtype`, suitably aligned.
  Buffer(DType dtype, int64_t numel, void* data, std::shared_ptr<const void> owner);
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
  T* as() {
    return static_cast<T*>(data_);
  }
  template <typename T>
  const T* as() const {
    return static_cast<const T*>(data_);
  }

  bool on_host() const { return device_.type == DeviceType::cpu; }
  // True for memory handed over from outside (the second constructor).
  bool external() const { return owner_ != nullptr; }

  // Bytes currently held by all live host buffers, and the high-water mark (process-wide); device
  // memory is counted by its backend's allocator (for CUDA: cuda_memory_stats).
  static int64_t live_bytes();
  static int64_t peak_bytes();
  // Sets the high-water mark to the bytes live now (to measure the peak of one step).
  static void reset_peak_bytes();

  // The host allocator's counters (process-wide, since start-up). Host blocks are cached by size
  // class (size_class()) for reuse, so a steady-state training step makes no system allocations.
  struct AllocStats {
    int64_t system_allocs = 0;               // blocks obtained from the system allocator (aligned_alloc)
    int64_t system_frees = 0;                // blocks returned to it (over the cache limit, or empty_cache())
    int64_t buffers = 0;                     // host Buffer allocations served (from the cache or the system)
    int64_t cached_bytes = 0;                // bytes in freed blocks kept for reuse
    int64_t reserved_bytes = 0;              // bytes held from the system: in live buffers (rounded) + cached
    int64_t live_bytes = 0, peak_bytes = 0;  // as live_bytes(), peak_bytes()
  };
  static AllocStats alloc_stats();
  // Returns every cached host block to the system.
  static void empty_cache();
  // The bytes a host block of `bytes` occupies (its size class): up to 4 KiB the next power of two
  // (at least 64), above that the next multiple of 4 KiB; 0 for 0.
  static size_t size_class(size_t bytes);

 private:
  Device device_;
  DType dtype_;
  int64_t numel_;
  void* data_ = nullptr;
  std::shared_ptr<const void> owner_;  // external memory's owner; null for aether's own blocks
};

using BufferPtr = std::shared_ptr<Buffer>;

}  // namespace aether
