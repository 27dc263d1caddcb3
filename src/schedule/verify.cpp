// The grouping invariants checked between passes (every node in exactly one group, groups form a
// DAG, each group is a contiguous sub-DAG, kinds hold what they say), and the AETHER_DEBUG dump.
#include <cstdlib>
#include <iostream>

#include "aether/core/error.h"
#include "core/config.h"
#include "state.h"

namespace aether::sched {

void verify(const State& s, const char* after) {
  const char* op = "schedule";
  // Every non-inlined node in exactly one alive group, listed once there; inlined nodes in none.
  std::vector<int> listed(s.nodes.size(), 0);
  for (size_t g = 0; g < s.groups.size(); ++g) {
    if (!s.groups[g].alive) {
      AETHER_CHECK(s.groups[g].members.empty(), op, "after ", after, ": merged group ", g,
                   " still has members");
      continue;
    }
    AETHER_CHECK(!s.groups[g].members.empty(), op, "after ", after, ": group ", g, " is empty");
    for (int m : s.groups[g].members) {
      ++listed[size_t(m)];
      AETHER_CHECK(s.nodes[size_t(m)].group == int(g), op, "after ", after, ": ", describe(s, m),
                   " is listed in group ", g, " but records group ", s.nodes[size_t(m)].group);
    }
  }
  for (int i : s.topo) {
    const SNode& n = s.nodes[size_t(i)];
    if (n.inlined) {
      AETHER_CHECK(listed[size_t(i)] == 0 && n.group < 0, op, "after ", after, ": inlined ", describe(s, i),
                   " is in a group");
    } else {
      AETHER_CHECK(listed[size_t(i)] == 1, op, "after ", after, ": ", describe(s, i), " is in ",
                   listed[size_t(i)], " groups, expected exactly 1");
    }
  }
  // Groups form a DAG (Kahn's algorithm over the group edges).
  const auto edges = group_edges(s);
  std::vector<int> indeg(s.groups.size(), 0);
  for (const auto& e : edges)
    for (int h : e) ++indeg[size_t(h)];
  std::vector<int> ready;
  int alive = 0, done = 0;
  for (size_t g = 0; g < s.groups.size(); ++g) {
    if (!s.groups[g].alive) continue;
    ++alive;
    if (indeg[g] == 0) ready.push_back(int(g));
  }
  while (!ready.empty()) {
    const int g = ready.back();
    ready.pop_back();
    ++done;
    for (int h : edges[size_t(g)])
      if (--indeg[size_t(h)] == 0) ready.push_back(h);
  }
  AETHER_CHECK(done == alive, op, "after ", after, ": the groups form a cycle (", alive - done,
               " groups on it)");
  // Contiguity: no path leaves a group and comes back into it. Inlined nodes are computed by the
  // groups reading them, so a path only leaves a group at a node of another group.
  for (size_t g = 0; g < s.groups.size(); ++g) {
    if (!s.groups[g].alive) continue;
    std::vector<char> seen(s.nodes.size() * 2, 0);  // (node, has left the group)
    std::vector<std::pair<int, bool>> stack;
    for (int m : s.groups[g].members)
      for (int c : s.nodes[size_t(m)].consumers)
        if (s.nodes[size_t(c)].group != int(g)) stack.push_back({c, false});
    while (!stack.empty()) {
      auto [c, left] = stack.back();
      stack.pop_back();
      const SNode& n = s.nodes[size_t(c)];
      if (n.group == int(g)) {
        AETHER_CHECK(!left, op, "after ", after, ": group ", g,
                     " is not contiguous: a path leaves it and comes back at ", describe(s, c));
        continue;
      }
      left = left || !n.inlined;
      if (seen[size_t(c) * 2 + left]) continue;
      seen[size_t(c) * 2 + left] = 1;
      for (int d : n.consumers) stack.push_back({d, left});
    }
  }
  // Kinds: a library call alone (or a conv and its post-ops), views only in view groups, compatible
  // and independent reduces.
  for (size_t g = 0; g < s.groups.size(); ++g) {
    const Group& grp = s.groups[g];
    if (!grp.alive) continue;
    int libs = 0, reduces = 0;
    for (int m : grp.members) {
      const Node& n = *s.nodes[size_t(m)].node;
      libs += is_library(n.op);
      if (grp.kind == KernelKind::ViewOnly)
        AETHER_CHECK(is_movement(n.op), op, "after ", after, ": view group ", g, " holds ", describe(s, m));
      if (is_reduce(n.op)) {
        ++reduces;
        AETHER_CHECK(n.srcs[0]->shape == grp.full && reduce_axes_of(n) == grp.axes, op, "after ", after,
                     ": group ", g, " iterates over ", to_string(grp.full), " but holds reduce ",
                     describe(s, m));
        // A reduce never depends on another reduce of its own group (rule 6).
        std::vector<int> stack(s.nodes[size_t(m)].consumers);
        std::vector<char> seen(s.nodes.size(), 0);
        while (!stack.empty()) {
          const int c = stack.back();
          stack.pop_back();
          if (seen[size_t(c)] || (s.nodes[size_t(c)].group != int(g) && !s.nodes[size_t(c)].inlined))
            continue;
          seen[size_t(c)] = 1;
          AETHER_CHECK(!is_reduce(s.nodes[size_t(c)].node->op), op, "after ", after, ": group ", g, " holds ",
                       describe(s, c), " which depends on its reduce ", describe(s, m));
          for (int d : s.nodes[size_t(c)].consumers) stack.push_back(d);
        }
      }
    }
    // A library group: one library call, plus (a conv only) its post-op chain of elementwise nodes.
    int elementwise = 0;
    bool conv = false;
    for (int m : grp.members) {
      const Node& n = *s.nodes[size_t(m)].node;
      conv = conv || n.op == Op::Conv2d;
      elementwise += !is_library(n.op) && !is_reduce(n.op);  // or a view of a post-op's operand
    }
    if (grp.kind == KernelKind::Library)
      AETHER_CHECK(
          libs == 1 && (grp.members.size() == 1 || (conv && size_t(elementwise) + 1 == grp.members.size())),
          op, "after ", after, ": library group ", g, " holds ", grp.members.size(), " nodes (", libs,
          " library calls, ", elementwise, " elementwise)");
    else
      AETHER_CHECK(libs == 0, op, "after ", after, ": generated group ", g, " holds a library op");
    AETHER_CHECK((reduces > 0) == (grp.kind == KernelKind::Reduce), op, "after ", after, ": group ", g,
                 " of kind ", kernel_kind_name(grp.kind), " holds ", reduces, " reduces");
  }
}

void dump(const State& s, const char* after) {
  if (config().debug < 4) return;
  std::cerr << "schedule: after " << after << "\n";
  for (size_t g = 0; g < s.groups.size(); ++g) {
    const Group& grp = s.groups[g];
    if (!grp.alive) continue;
    std::cerr << "  group " << g << " " << kernel_kind_name(grp.kind) << " over " << to_string(grp.full)
              << ":";
    for (int m : grp.members) std::cerr << " [" << describe(s, m) << "]";
    std::cerr << "\n";
  }
  std::cerr << "  recomputed where read:";
  for (int i : s.topo)
    if (s.nodes[size_t(i)].inlined && s.nodes[size_t(i)].node->op != Op::Const)
      std::cerr << " [" << describe(s, i) << "]";
  std::cerr << "\n";
}

}  // namespace aether::sched
