// Internal: what the core (Buffer, Tensor::to, realize) calls in the CUDA backend. No CUDA types,
// so src/core can include it; declared in every build, defined only when AETHER_HAS_CUDA is set
// (callers guard their calls with #if AETHER_HAS_CUDA).
#pragma once

#include <cstddef>
#include <vector>

#include "aether/backend/backend.h"
#include "aether/core/device.h"

namespace aether::cuda {

// Device memory for a Buffer on GPU `device` (zeroed on the device's stream when `zero`).
void* buffer_alloc(int device, size_t bytes, bool zero);
void buffer_free(int device, void* ptr) noexcept;
// Copies `bytes` between two buffers' memory on any devices (waits when the destination is the host).
void copy_bytes(Device dst_device, void* dst, Device src_device, const void* src, size_t bytes);
// Realizes `targets` (and their unrealized ancestors), all on one GPU, with the CUDA executor.
void execute(const std::vector<NodePtr>& targets);
Backend& backend();

}  // namespace aether::cuda
