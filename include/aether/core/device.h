// aether/core/device.h - where a buffer lives and which backend's kernels run on it.
#pragma once

#include <iosfwd>
#include <string>

namespace aether {

enum class DeviceType { cpu, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int index = 0;

  static Device cpu() { return {DeviceType::cpu, 0}; }
  // Throws aether::Error when CUDA was not built in or no such GPU is present.
  static Device cuda(int index = 0);
  // "cpu", "cuda", "cuda:1"; throws aether::Error naming the string otherwise.
  static Device parse(const std::string& s);

  std::string str() const;
  bool operator==(const Device&) const = default;
};

std::ostream& operator<<(std::ostream& os, const Device& d);

// The device tensors are created on when no device is given (factories, from_vector, constants,
// random draws): Device::cpu(), unless the environment variable AETHER_DEVICE ("cpu", "cuda",
// "cuda:N") names another (read on first use; a device that is not there throws aether::Error then)
// or set_default_device() changed it. AETHER_DEVICE=cuda runs a program, or the op and layer tests,
// on the GPU without changing their code.
Device default_device();
void set_default_device(Device device);

}  // namespace aether
