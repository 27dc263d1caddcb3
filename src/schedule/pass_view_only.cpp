// Pass view_only: a group of movement ops only (e.g. a requested reshape of a value another group
// stores) computes nothing: it becomes a view, not a kernel (unless it views an inlined value, or is
// a view a library call reads that is never dense: then the kernel writes its dense copy).
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
      int base = n.srcs[0];  // through recomputed views to what they view
      while (s.nodes[size_t(base)].inlined && is_movement(s.nodes[size_t(base)].node->op))
        base = s.nodes[size_t(base)].srcs[0];
      // A view of a constant or of a recomputed value needs a kernel computing it, and so does one
      // a library call would copy anyway (pass_group stores such views for that reader).
      views_only = views_only && !s.nodes[size_t(base)].inlined;
      if (views_only && library_copies_view(n.node->op)) views_only = !any_library(s, reader_groups(s, m));
    }
    if (views_only) g.kind = KernelKind::ViewOnly;
  }
}

}  // namespace aether::sched
