// tests/device_guard.h - the default device pinned for one scope: a test of a CPU path (oneDNN's
// calls, the CPU kernels' exact values) stays on the CPU when the op and layer suite runs with
// AETHER_DEVICE=cuda (scripts/gpu-check.sh), whose tensors would otherwise be created on the GPU.
#pragma once

#include "aether/core/device.h"

namespace aether::test {

class DefaultDevice {
 public:
  explicit DefaultDevice(Device d) : was_(default_device()) { set_default_device(d); }
  ~DefaultDevice() { set_default_device(was_); }
  DefaultDevice(const DefaultDevice&) = delete;
  DefaultDevice& operator=(const DefaultDevice&) = delete;

 private:
  Device was_;
};

}  // namespace aether::test
