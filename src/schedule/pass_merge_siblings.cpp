// Pass merge_siblings: merge independent reduce groups with the same input shape and axes into one
// multi-output kernel when one of them already loads every big buffer+view the others load (rule 3).
#include <algorithm>
#include <set>

#include "state.h"

namespace aether::sched {
namespace {

std::set<std::string> big_loads(const State& s, int g) {
  std::set<std::string> out;
  const int64_t full = numel(s.groups[size_t(g)].full);
  for (const Load& l : group_loads(s, g))
    if (l.buffer_elements >= full) out.insert(l.key);
  return out;
}
}  // namespace

void pass_merge_siblings(State& s) {
  std::vector<int> cands;
  std::vector<std::set<std::string>> big(s.groups.size());
  for (size_t g = 0; g < s.groups.size(); ++g) {
    if (!s.groups[g].alive || s.groups[g].kind != KernelKind::Reduce) continue;
    cands.push_back(int(g));
    big[g] = big_loads(s, int(g));
  }
  // Anchors first: the groups loading the most big buffers; ties keep group order.
  std::stable_sort(cands.begin(), cands.end(),
                   [&](int a, int b) { return big[size_t(a)].size() > big[size_t(b)].size(); });
  for (size_t ai = 0; ai < cands.size(); ++ai) {
    const int a = cands[ai];
    if (!s.groups[size_t(a)].alive) continue;
    for (size_t bi = ai + 1; bi < cands.size(); ++bi) {
      const int b = cands[bi];
      Group &ga = s.groups[size_t(a)], &gb = s.groups[size_t(b)];
      if (!gb.alive || ga.full != gb.full || ga.axes != gb.axes) continue;
      const auto& sa = big[size_t(a)];
      const auto& sb = big[size_t(b)];
      // Same big buffer through the same view, and no new big load for the anchor.
      if (sb.empty() || !std::includes(sa.begin(), sa.end(), sb.begin(), sb.end())) continue;
      const auto edges = group_edges(s);
      if (reachable(edges, {a}, b) || reachable(edges, {b}, a)) continue;  // rule 6 / would break the DAG
      for (int m : gb.members) s.nodes[size_t(m)].group = a;
      ga.members.insert(ga.members.end(), gb.members.begin(), gb.members.end());
      ga.out_numel = std::max(ga.out_numel, gb.out_numel);
      gb.members.clear();
      gb.alive = false;
    }
  }
}

}  // namespace aether::sched
