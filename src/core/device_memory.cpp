// The registry of device memories (core/device_memory.h).
#include "core/device_memory.h"

#include <array>
#include <atomic>

namespace aether {
namespace {
// DeviceType -> memory; written once per type at start-up, read everywhere after.
std::array<std::atomic<DeviceMemory*>, 2>& table() {
  static std::array<std::atomic<DeviceMemory*>, 2> t{};
  return t;
}
}  // namespace

void register_device_memory(DeviceType type, DeviceMemory* memory) { table()[size_t(type)].store(memory); }

DeviceMemory* device_memory(DeviceType type) { return table()[size_t(type)].load(); }

std::string device_unavailable(DeviceType type) {
  if (DeviceMemory* m = device_memory(type)) return m->unavailable();
  return type == DeviceType::cuda
             ? "built without CUDA (configure with -DAETHER_CUDA=ON and the CUDA toolkit)"
             : "no backend for this device in this build";
}

}  // namespace aether
