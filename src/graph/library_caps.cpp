// The registered source of the device runtimes' library capabilities (graph/library_caps.h).
#include "graph/library_caps.h"

#include <atomic>

namespace aether {
namespace {
std::atomic<LibraryCaps (*)(Device)> g_caps_source{nullptr};
}  // namespace

void set_library_caps_source(LibraryCaps (*source)(Device)) { g_caps_source.store(source); }

LibraryCaps library_caps(Device device) {
  auto* source = g_caps_source.load();
  return source ? source(device) : LibraryCaps{};
}

}  // namespace aether
