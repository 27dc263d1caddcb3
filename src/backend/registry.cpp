// The device runtimes of this build (backend/runtime.h), and their memories registered with the core
// (core/device_memory.h) at start-up, before any Buffer of theirs can be made.
#include "aether/core/error.h"
#include "backend/runtime.h"

namespace aether {
namespace {
// The runtime of `type` in this build; null when there is none.
DeviceRuntime* find_runtime(DeviceType type) {
  switch (type) {
    case DeviceType::cpu: return &cpu_runtime();
    case DeviceType::cuda: return cuda_runtime();
  }
  return nullptr;
}
LibraryCaps caps_of(Device device) {
  DeviceRuntime* r = find_runtime(device.type);
  return r ? r->capabilities() : LibraryCaps{};
}
[[maybe_unused]] const bool g_registered = [] {
  if (DeviceRuntime* r = cuda_runtime()) register_device_memory(DeviceType::cuda, r->memory());
  set_library_caps_source(caps_of);
  return true;
}();
}  // namespace

DeviceRuntime& runtime_for(Device device) {
  DeviceRuntime* r = find_runtime(device.type);
  AETHER_CHECK_RUNTIME(r, "backend", "no backend for device ", device.str(), ": ",
                       device_unavailable(device.type));
  return *r;
}

}  // namespace aether
