// Helpers shared by the scheduler passes: op classes, group loads (buffer + composed view), edges.
#include "state.h"

#include <algorithm>
#include <map>
#include <sstream>

namespace aether::sched {

bool library_copies_view(Op op) { return op == Op::Pad || op == Op::Flip; }

bool reshape_merges_dims(const Shape& src, const Shape& out) {
  std::vector<int64_t> cuts;  // prefix products of out
  int64_t p = 1;
  for (int64_t d : out) cuts.push_back(p *= d);
  p = 1;
  for (int64_t d : src) {
    p *= d;
    if (d != 1 && std::find(cuts.begin(), cuts.end(), p) == cuts.end()) return true;
  }
  return false;
}

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
    case Op::Flip:
      v = v.flip(std::get<Axes>(m.arg));
      return true;
      AETHER_SOURCE_OPS(AETHER_OP_CASE)
      AETHER_ELEMENTWISE_OPS(AETHER_OP_CASE)
      AETHER_REDUCE_OPS(AETHER_OP_CASE)
      AETHER_LIBRARY_OPS(AETHER_OP_CASE)
      return false;  // not a movement op (callers only pass movement ops)
  }
  return false;
}

// A node that a group reads through views without it being part of the group.
bool passes_through(const State& s, int g, int i) {
  const SNode& n = s.nodes[size_t(i)];
  if (n.leaf || n.inlined || !is_movement(n.node->op) || n.group < 0) return false;
  if (n.group == g) return true;
  return s.groups[size_t(n.group)].kind == KernelKind::ViewOnly;
}
}  // namespace

std::vector<Load> group_loads(const State& s, int g, std::vector<int>* inlined) {
  const Group& grp = s.groups[size_t(g)];
  std::vector<Load> loads;
  if (grp.kind == KernelKind::ViewOnly) return loads;
  std::map<std::string, size_t> seen;
  std::vector<char> expanded(s.nodes.size(), 0), listed(s.nodes.size(), 0);
  std::vector<std::pair<int, std::vector<int>>> work;  // (node read, movement chain above it)
  for (int m : grp.members) {
    const SNode& mn = s.nodes[size_t(m)];
    // Loads start at compute members and at stored movement members (a copy of a view).
    if (is_movement(mn.node->op)) {
      bool stored = mn.output;
      for (int h : reader_groups(s, m)) stored = stored || h != g;
      if (!stored) continue;
    }
    for (int src : mn.srcs) {
      if (is_movement(mn.node->op) && s.nodes[size_t(src)].group == g) continue;  // traced by a consumer
      work.push_back({src, {}});
    }
  }
  while (!work.empty()) {
    auto [cur, chain] = std::move(work.back());  // chain: movement nodes, consumer first
    work.pop_back();
    bool done = false;
    while (!done) {
      const SNode& n = s.nodes[size_t(cur)];
      if (n.inlined) {
        if (inlined && !listed[size_t(cur)]) inlined->push_back(cur);
        listed[size_t(cur)] = 1;
        if (n.node->op == Op::Const) {
          done = true;  // a constant: no load
        } else if (is_movement(n.node->op)) {
          chain.push_back(cur);
          cur = n.srcs[0];
        } else {
          // Recomputed here: this kernel reads its sources instead.
          if (!expanded[size_t(cur)])
            for (int src : n.srcs) work.push_back({src, {}});
          expanded[size_t(cur)] = 1;
          done = true;
        }
      } else if (passes_through(s, g, cur)) {
        chain.push_back(cur);
        cur = n.srcs[0];
      } else {
        break;
      }
    }
    if (done) continue;
    const SNode& base = s.nodes[size_t(cur)];
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
  return loads;
}

std::vector<int> reader_groups(const State& s, int i) {
  std::vector<int> out;
  std::vector<char> seen(s.nodes.size(), 0);
  std::vector<int> stack(s.nodes[size_t(i)].consumers);
  while (!stack.empty()) {
    const int c = stack.back();
    stack.pop_back();
    if (seen[size_t(c)]) continue;
    seen[size_t(c)] = 1;
    const SNode& n = s.nodes[size_t(c)];
    if (n.inlined) {
      stack.insert(stack.end(), n.consumers.begin(), n.consumers.end());
    } else if (n.group >= 0 && std::find(out.begin(), out.end(), n.group) == out.end()) {
      out.push_back(n.group);
    }
  }
  return out;
}

bool any_library(const State& s, const std::vector<int>& groups) {
  return std::any_of(groups.begin(), groups.end(),
                     [&](int g) { return s.groups[size_t(g)].kind == KernelKind::Library; });
}

std::vector<std::vector<int>> all_reader_groups(const State& s) {
  std::vector<std::vector<int>> readers(s.nodes.size());
  auto add = [](std::vector<int>& v, int g) {
    if (g >= 0 && std::find(v.begin(), v.end(), g) == v.end()) v.push_back(g);
  };
  for (auto it = s.topo.rbegin(); it != s.topo.rend(); ++it) {  // consumers before sources
    auto& r = readers[size_t(*it)];
    for (int c : s.nodes[size_t(*it)].consumers) {
      if (s.nodes[size_t(c)].inlined) {
        for (int g : readers[size_t(c)]) add(r, g);
      } else {
        add(r, s.nodes[size_t(c)].group);
      }
    }
  }
  return readers;
}

std::vector<std::vector<int>> group_edges(const State& s) {
  std::vector<std::vector<int>> out(s.groups.size());
  const auto readers = all_reader_groups(s);
  for (int i : s.topo) {
    const SNode& n = s.nodes[size_t(i)];
    if (n.group < 0 || n.inlined) continue;
    auto& e = out[size_t(n.group)];
    for (int h : readers[size_t(i)])
      if (h != n.group && std::find(e.begin(), e.end(), h) == e.end()) e.push_back(h);
  }
  return out;
}

bool reachable(const std::vector<std::vector<int>>& edges, std::vector<int> starts, int to) {
  std::vector<char> seen(edges.size(), 0);
  while (!starts.empty()) {
    const int g = starts.back();
    starts.pop_back();
    if (g == to) return true;
    if (seen[size_t(g)]) continue;
    seen[size_t(g)] = 1;
    for (int h : edges[size_t(g)]) starts.push_back(h);
  }
  return false;
}

}  // namespace aether::sched
