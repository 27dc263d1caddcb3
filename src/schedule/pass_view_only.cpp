// Pass view_only: a group of movement ops only (e.g. a requested reshape of a value another group
// stores) computes nothing: it becomes a view, not a kernel (unless it views an inlined constant).
#include "state.h"

namespace aether::sched {

void pass_view_only(State& s) {
  for (size_t gi = 0; gi < s.groups.size(); ++gi) {
    Group& g = s.groups[gi];
    if (!g.alive || g.kind != KernelKind::Elementwise) continue;
    bool views_only = true;
    for (int m : g.members) {
      const SNode& n = s.nodes[size_t(m)];
      if (!is_movement(n.node->op)) {
        views_only = false;
        break;
      }
      const SNode& src = s.nodes[size_t(n.srcs[0])];
      views_only = views_only && !src.inlined;  // a view of a constant needs a fill kernel
    }
    if (views_only) g.kind = KernelKind::ViewOnly;
  }
}

}  // namespace aether::sched
