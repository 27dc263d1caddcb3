// Pass emit: turn the groups into Kernels in a producer-first order, with their stored outputs,
// distinct loads, bytes read and written, and the schedule's totals (kernels, big-buffer passes).
#include <algorithm>

#include "state.h"

namespace aether::sched {

Schedule pass_emit(const State& s) {
  Schedule out;
  // Producer-first order of the alive groups (Kahn, lowest first-member position first).
  const auto edges = group_edges(s);
  std::vector<int> indeg(s.groups.size(), 0), first(s.groups.size(), 0);
  for (const auto& e : edges)
    for (int h : e) ++indeg[size_t(h)];
  for (size_t g = 0; g < s.groups.size(); ++g) {
    int f = int(s.topo.size());
    for (int m : s.groups[g].members) f = std::min(f, s.nodes[size_t(m)].topo);
    first[g] = f;
  }
  std::vector<int> ready, order;
  for (size_t g = 0; g < s.groups.size(); ++g)
    if (s.groups[g].alive && indeg[g] == 0) ready.push_back(int(g));
  while (!ready.empty()) {
    auto it = std::min_element(ready.begin(), ready.end(),
                               [&](int a, int b) { return first[size_t(a)] < first[size_t(b)]; });
    const int g = *it;
    ready.erase(it);
    order.push_back(g);
    for (int h : edges[size_t(g)])
      if (--indeg[size_t(h)] == 0) ready.push_back(h);
  }
  const auto readers = all_reader_groups(s);
  std::vector<int> kernel_of(s.groups.size(), -1);
  for (size_t k = 0; k < order.size(); ++k) kernel_of[size_t(order[k])] = int(k);

  for (int g : order) {
    const Group& grp = s.groups[size_t(g)];
    Kernel k;
    k.kind = grp.kind;
    k.shape = grp.full;
    k.reduce_axes = grp.axes;
    for (const EpilogueStep& e : grp.epilogue)
      k.epilogue.push_back({e.kind, e.operand >= 0 ? s.nodes[size_t(e.operand)].node : nullptr});
    std::vector<int> members = grp.members;
    std::sort(members.begin(), members.end(),
              [&](int a, int b) { return s.nodes[size_t(a)].topo < s.nodes[size_t(b)].topo; });
    for (int m : members) {
      const SNode& n = s.nodes[size_t(m)];
      k.nodes.push_back(n.node);
      bool stored = n.output;
      for (int h : readers[size_t(m)]) stored = stored || h != g;
      if (!stored) continue;
      k.outputs.push_back(n.node);
      if (k.kind != KernelKind::ViewOnly) k.bytes_written += numel(n.node->shape) * dtype_size(n.node->dtype);
    }
    const int64_t iter = numel(grp.full);
    std::vector<int> inlined;
    const std::vector<Load> loads = group_loads(s, g, &inlined);
    std::sort(inlined.begin(), inlined.end(),
              [&](int a, int b) { return s.nodes[size_t(a)].topo < s.nodes[size_t(b)].topo; });
    for (int i : inlined) k.inlined.push_back(s.nodes[size_t(i)].node);
    for (const Load& l : loads) {
      const SNode& b = s.nodes[size_t(l.base)];
      KernelInput in;
      in.base = b.node;
      in.producer = b.leaf ? -1 : kernel_of[size_t(b.group)];
      in.view = l.view;
      in.big = l.buffer_elements >= iter;
      in.bytes = l.elements * dtype_size(b.node->dtype);
      k.bytes_read += in.bytes;
      k.inputs.push_back(std::move(in));
    }
    out.kernel_count += k.generated();
    out.library_calls += k.kind == KernelKind::Library;
    out.bytes_moved += k.bytes_read + k.bytes_written;
    out.kernels.push_back(std::move(k));
  }
  // Big-buffer passes: reads and writes of buffers as large as the largest iteration space.
  int64_t largest = 0;
  for (const Kernel& k : out.kernels)
    if (k.kind != KernelKind::ViewOnly) largest = std::max(largest, numel(k.shape));
  for (const Kernel& k : out.kernels) {
    if (k.kind == KernelKind::ViewOnly) continue;
    for (const KernelInput& in : k.inputs) {
      const int64_t elems = in.base->realized() ? in.base->buffer->numel() : numel(in.base->shape);
      out.big_buffer_passes += elems >= largest;
    }
    for (const NodePtr& o : k.outputs) out.big_buffer_passes += numel(o->shape) >= largest;
  }
  for (int i : s.topo)
    if (s.nodes[size_t(i)].inlined) out.inlined.push_back(s.nodes[size_t(i)].node);
  return out;
}

}  // namespace aether::sched
