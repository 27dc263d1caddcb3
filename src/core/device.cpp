// Device names and availability.
#include "aether/core/device.h"

#include <ostream>

#include "aether/core/error.h"

namespace aether {

Device Device::cuda(int index) {
  // The CUDA backend is not part of this build yet (see the CUDA issue); say so clearly.
  throw Error(detail::cat("Device::cuda(", index,
                          "): this build of aether has no CUDA backend (built CPU-only); "
                          "available devices: cpu"));
}

Device Device::parse(const std::string& s) {
  if (s == "cpu") return cpu();
  if (s == "cuda") return cuda(0);
  if (s.rfind("cuda:", 0) == 0) {
    const std::string idx = s.substr(5);
    AETHER_CHECK(!idx.empty() && idx.find_first_not_of("0123456789") == std::string::npos,
                 "Device::parse", "bad device index in '", s, "' (expected cuda:N)");
    return cuda(std::stoi(idx));
  }
  throw Error("Device::parse: unknown device '" + s + "' (expected cpu, cuda or cuda:N)");
}

std::string Device::str() const {
  return type == DeviceType::cpu ? std::string("cpu") : "cuda:" + std::to_string(index);
}

std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

}  // namespace aether
