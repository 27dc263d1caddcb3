// Helpers shared by the scheduler passes: op classes, group loads (buffer + composed view), edges.
#include "state.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace aether::sched {

bool is_movement(Op op) { return op_kind(op) == OpKind::Movement; }
bool is_library(Op op) { return op_kind(op) == OpKind::Library; }
bool is_reduce(Op op) { return op_kind(op) == OpKind::Reduce; }

int64_t node_numel(const State& s, int i) { return numel(s.nodes[size_t(i)].node->shape); }

const std::vector<int>& reduce_axes_of(const Node& n) { return std::get<Axes>(n.arg); }

std::string describe(const State& s, int i) {
  const Node& n = *s.nodes[size_t(i)].node;
  std::ostringstream os;
  os << "#" << n.id << " " << op_name(n.op) << " " << to_string(n.shape);
  return os.str();
}

namespace {
// Applies one movement node to a view; false when the reshape cannot be expressed as a view.
bool apply_movement(const Node& m, View& v) {
  switch (m.op) {
    case Op::Reshape: {
      auto r = v.reshape(m.shape);
      if (!r) return false;
      v = *r;
      return true;
    }
    case Op::Permute: v = v.permute(std::get<Axes>(m.arg)); return true;
    case Op::Expand: v = v.expand(m.shape); return true;
    case Op::Slice: {
      const auto& a = std::get<SliceArg>(m.arg);
      v = v.slice(a.start, a.stop, a.step);
      return true;
    }
    case Op::Pad: {
      const auto& a = std::get<PadArg>(m.arg);
      v = v.pad(a.before, a.after);
      return true;
    }
    case Op::Flip: v = v.flip(std::get<Axes>(m.arg)); return true;
    default: return false;  // not a movement op (callers only pass movement ops)
  }
}

// A node that a group reads through views without it being part of the group.
bool passes_through(const State& s, int g, int i) {
  const SNode& n = s.nodes[size_t(i)];
  if (n.leaf || n.inlined || !is_movement(n.node->op) || n.group < 0) return false;
  if (n.group == g) return true;
  return s.groups[size_t(n.group)].kind == KernelKind::ViewOnly;
}
}  // namespace

std::vector<Load> group_loads(const State& s, int g) {
  const Group& grp = s.groups[size_t(g)];
  std::vector<Load> loads;
  if (grp.kind == KernelKind::ViewOnly) return loads;
  std::map<std::string, size_t> seen;
  for (int m : grp.members) {
    const SNode& mn = s.nodes[size_t(m)];
    // Loads start at compute members and at stored movement members (a copy of a view).
    if (is_movement(mn.node->op)) {
      bool stored = mn.output;
      for (int c : mn.consumers) stored = stored || s.nodes[size_t(c)].group != g;
      if (!stored) continue;
    }
    for (int src : mn.srcs) {
      if (is_movement(mn.node->op) && s.nodes[size_t(src)].group == g) continue;  // traced by a consumer
      std::vector<int> chain;  // movement nodes, consumer first
      int cur = src;
      while (passes_through(s, g, cur)) {
        chain.push_back(cur);
        cur = s.nodes[size_t(cur)].srcs[0];
      }
      const SNode& base = s.nodes[size_t(cur)];
      if (base.inlined) continue;                // a constant: no load
      if (!base.leaf && base.group == g) continue;  // computed inside the kernel
      View v = base.leaf && base.node->realized() ? base.node->view : View::contiguous(base.node->shape);
      std::ostringstream suffix;
      for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
        const Node& mv = *s.nodes[size_t(*it)].node;
        if (!apply_movement(mv, v)) {  // not a view: say which ops, continue from a dense copy
          suffix << " then " << op_name(mv.op) << to_string(mv.shape);
          v = View::contiguous(mv.shape);
        }
      }
      std::ostringstream view;
      view << v << suffix.str();
      std::ostringstream key;
      if (base.node->realized())
        key << "buf@" << static_cast<const void*>(base.node->buffer.get());
      else
        key << "node#" << base.node->id;
      key << " " << view.str();
      if (seen.count(key.str())) continue;
      seen[key.str()] = loads.size();
      const int64_t buf_elems = base.node->realized() ? base.node->buffer->numel() : numel(base.node->shape);
      loads.push_back({cur, key.str(), view.str(), std::min(v.numel(), buf_elems), buf_elems});
    }
  }
  return loads;
}

std::vector<std::vector<int>> group_edges(const State& s) {
  std::vector<std::vector<int>> out(s.groups.size());
  for (int i : s.topo) {
    const SNode& n = s.nodes[size_t(i)];
    if (n.group < 0) continue;
    for (int src : n.srcs) {
      const int gs = s.nodes[size_t(src)].group;
      if (gs < 0 || gs == n.group) continue;
      auto& e = out[size_t(gs)];
      if (std::find(e.begin(), e.end(), n.group) == e.end()) e.push_back(n.group);
    }
  }
  return out;
}

}  // namespace aether::sched
