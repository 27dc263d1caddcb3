// schedule_bytes_min(): the least bytes any schedule of a graph must move (leaf buffers read once,
// requested outputs written once), the yardstick for Schedule::bytes_moved.
#include <algorithm>
#include <unordered_map>
#include <unordered_set>

#include "aether/core/error.h"
#include "schedule/schedule.h"

namespace aether {

int64_t schedule_bytes_min(const std::vector<NodePtr>& outputs, const ScheduleOptions& options) {
  std::unordered_set<const Node*> assumed;
  for (const auto& n : options.assume_realized)
    if (n) assumed.insert(n.get());
  auto is_leaf = [&](const Node& n) { return n.realized() || assumed.count(&n) > 0; };

  // An output's base: the value it is a view of (through movement ops), or itself.
  auto base_of = [&](const Node* n) {
    while (!is_leaf(*n) && op_kind(n->op) == OpKind::Movement) n = n->srcs[0].get();
    return n;
  };

  // Reads: each distinct buffer (a realized node's buffer, or an assumed-realized node) once, at the
  // largest number of its elements one leaf node exposes. Outputs that are views of a leaf read
  // nothing (they are views, not kernels).
  std::unordered_map<const void*, int64_t> reads;
  std::unordered_set<const Node*> seen;
  std::vector<const Node*> stack;
  for (const auto& o : outputs) {
    AETHER_CHECK(o != nullptr, "schedule", "got an empty output node");
    if (!is_leaf(*base_of(o.get()))) stack.push_back(o.get());
  }
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (!is_leaf(*n)) {
      for (const auto& src : n->srcs) stack.push_back(src.get());
      continue;
    }
    const int64_t elems = n->realized() ? std::min(numel(n->shape), n->buffer->numel()) : numel(n->shape);
    const void* key = n->realized() ? static_cast<const void*>(n->buffer.get()) : n;
    int64_t& r = reads[key];
    r = std::max(r, elems * dtype_size(n->dtype));
  }

  // Writes: each output is stored, or is a view of a stored value it shares with other outputs over
  // the same value; a view of a leaf needs no write.
  std::unordered_map<const Node*, int64_t> writes;
  for (const auto& o : outputs) {
    const Node* base = base_of(o.get());
    if (is_leaf(*base)) continue;
    int64_t& w = writes[base];
    w = std::max(w, std::min(numel(o->shape), numel(base->shape)) * dtype_size(o->dtype));
  }

  int64_t total = 0;
  for (const auto& [key, bytes] : reads) total += bytes;
  for (const auto& [node, bytes] : writes) total += bytes;
  return total;
}

}  // namespace aether
