// Backend registry, execution mode switches, and realize(): topological order -> backend.
#include "aether/backend/backend.h"

#include <cstdlib>
#include <cstring>
#include <unordered_set>

#include "aether/core/error.h"

namespace aether {

Backend& reference_backend();  // backend/cpu/reference.cpp

namespace {
bool env_flag(const char* name, bool dflt) {
  const char* v = std::getenv(name);
  if (!v || !*v) return dflt;
  return !(std::strcmp(v, "0") == 0 || std::strcmp(v, "false") == 0 || std::strcmp(v, "off") == 0);
}
bool g_fusion = env_flag("AETHER_FUSE", true);
LibraryImpl g_library = env_flag("AETHER_ONEDNN", true) ? LibraryImpl::onednn : LibraryImpl::naive;
}  // namespace

void set_fusion(bool enabled) { g_fusion = enabled; }
bool fusion_enabled() { return g_fusion; }
void set_library_impl(LibraryImpl impl) { g_library = impl; }
LibraryImpl library_impl() { return g_library; }

Backend& backend_for(Device device) {
  AETHER_CHECK(device.type == DeviceType::cpu, "backend", "no backend for device ", device.str(),
               " in this build");
  return reference_backend();
}

void realize_nodes(const std::vector<NodePtr>& targets) {
  // Iterative post-order DFS over unrealized nodes: sources before their consumers.
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<Node*, size_t>> stack;
  for (const auto& t : targets) {
    if (!t || t->realized() || seen.count(t.get())) continue;
    seen.insert(t.get());
    stack.push_back({t.get(), 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->srcs.size()) {
        Node* s = n->srcs[i++].get();
        if (!s->realized() && seen.insert(s).second) stack.push_back({s, 0});
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
  }
  if (order.empty()) return;
  const Device dev = order.front()->device;
  for (Node* n : order)
    AETHER_CHECK(n->device == dev, "realize", "graph mixes devices ", dev.str(), " and ", n->device.str());
  // Keep the targets alive; intermediate nodes die (and free their buffers) as soon as their last
  // consumer has run and dropped them, unless a tensor still holds them.
  backend_for(dev).execute(order);
}

}  // namespace aether
