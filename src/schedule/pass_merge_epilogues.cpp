// Pass merge_epilogues: an elementwise group over a reduce group's small output shape that reads
// no big buffer (e.g. a gradient's final scaling of a sum) joins that reduce kernel as its epilogue.
#include <algorithm>

#include "state.h"

namespace aether::sched {
namespace {
// Whether `to` is reachable from `from` through at least one group other than the two.
bool reaches_indirectly(const std::vector<std::vector<int>>& edges, int from, int to) {
  std::vector<int> starts;
  for (int h : edges[size_t(from)])
    if (h != to) starts.push_back(h);
  return reachable(edges, std::move(starts), to);
}
}  // namespace

void pass_merge_epilogues(State& s) {
  auto edges = group_edges(s);  // recomputed only after a merge changes them
  for (size_t e = 0; e < s.groups.size(); ++e) {
    Group& ge = s.groups[e];
    if (!ge.alive || ge.kind != KernelKind::Elementwise) continue;
    for (size_t r = 0; r < s.groups.size(); ++r) {
      Group& gr = s.groups[r];
      if (!gr.alive || gr.kind != KernelKind::Reduce || numel(ge.full) != gr.out_numel) continue;
      const auto& succ = edges[r];
      if (std::find(succ.begin(), succ.end(), int(e)) == succ.end()) continue;  // e must read r
      bool small = true;
      for (const Load& l : group_loads(s, int(e)))
        small = small && (l.buffer_elements < numel(gr.full) || s.nodes[size_t(l.base)].group == int(r));
      if (!small || reaches_indirectly(edges, int(r), int(e))) continue;
      for (int m : ge.members) {
        s.nodes[size_t(m)].group = int(r);
        s.nodes[size_t(m)].side = Side::Post;
      }
      gr.members.insert(gr.members.end(), ge.members.begin(), ge.members.end());
      ge.members.clear();
      ge.alive = false;
      edges = group_edges(s);
      break;
    }
  }
}

}  // namespace aether::sched
