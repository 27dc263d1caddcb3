// Device names and availability.
#include "aether/core/device.h"

#include <cstdlib>
#include <mutex>
#include <optional>
#include <ostream>

#include "aether/core/error.h"
#include "core/config.h"
#include "core/device_memory.h"

namespace aether {

Device Device::cuda(int index) {
  // The reason comes from the CUDA backend's memory (core/device_memory.h): built without CUDA, no
  // driver, no GPU, or the index out of range (with the count).
  DeviceMemory* m = device_memory(DeviceType::cuda);
  const int count = m ? m->count() : 0;
  if (count == 0)
    throw Error(detail::cat("Device::cuda(", index, "): ", device_unavailable(DeviceType::cuda),
                            "; available devices: cpu"),
                ErrorKind::runtime);
  if (index < 0 || index >= count)
    throw Error(detail::cat("Device::cuda(", index, "): no such GPU: ", count, " CUDA device",
                            count == 1 ? "" : "s", " present (valid indices 0..", count - 1, ")"),
                ErrorKind::runtime);
  return {DeviceType::cuda, index};
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string idx = s.substr(5);
    // At most 9 digits: std::stoi of a longer index could overflow (std::out_of_range).
    AETHER_CHECK(is_whole_number(idx), "Device::parse", "bad device index in '", s, "' (expected cuda:N)");
    return cuda(std::stoi(idx));
  }
  throw Error("Device::parse: unknown device '" + s + "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const {
  return type == DeviceType::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

namespace {
struct DefaultDevice {
  std::mutex mu;
  std::optional<Device> device;
};
DefaultDevice& default_device_state() {
  static DefaultDevice d;
  return d;
}
}  // namespace

Device default_device() {
  DefaultDevice& d = default_device_state();
  std::lock_guard<std::mutex> lock(d.mu);
  if (!d.device) {
    const std::string e = config().device.get();
    if (!e.empty()) {
      try {
        d.device = Device::parse(e);
      } catch (const Error& err) {
        throw Error(detail::cat("AETHER_DEVICE=", e, ": ", err.what()), err.kind());
      }
    } else {
      d.device = Device::cpu();
    }
  }
  return *d.device;
}

void set_default_device(Device device) {
  DefaultDevice& d = default_device_state();
  std::lock_guard<std::mutex> lock(d.mu);
  d.device = device;
}

}  // namespace aether
