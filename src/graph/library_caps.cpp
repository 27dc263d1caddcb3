// The registered source of the device runtimes' library capabilities (graph/library_caps.h).
#include "graph/library_caps.h"

#include <atomic>

namespace aether {
namespace {
std::atomic<LibraryCapsSource> g_caps_source{nullptr};
}  // namespace

LibraryCapsSource set_library_caps_source(LibraryCapsSource source) { return g_caps_source.exchange(source); }

LibraryCaps library_caps(Device device) {
  auto* source = g_caps_source.load();
  return source ? source(device) : LibraryCaps{};
}

}  // namespace aether
