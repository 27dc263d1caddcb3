// Pass group: build fusion groups in one reverse topological walk (rules 1, 2, 4, 5, 6): a node
// joins the group of its readers when they all sit in one group and the fusion rules allow it;
// else an elementwise or movement node is recomputed by each reader (inlined, rule 5), and any
// other node (a reduce, a library op, an output, a library op's input) starts a group of its own.
#include <algorithm>

#include "state.h"

namespace aether::sched {
namespace {

// Whether a reduce member of g is reachable from node i through members of g (or inlined nodes).
bool reaches_reduce_in_group(const State& s, int g, int i) {
  std::vector<int> stack(s.nodes[size_t(i)].consumers);
  std::vector<char> seen(s.nodes.size(), 0);
  while (!stack.empty()) {
    const int c = stack.back();
    stack.pop_back();
    if (seen[size_t(c)] || (s.nodes[size_t(c)].group != g && !s.nodes[size_t(c)].inlined)) continue;
    seen[size_t(c)] = 1;
    if (is_reduce(s.nodes[size_t(c)].node->op)) return true;
    for (int d : s.nodes[size_t(c)].consumers) stack.push_back(d);
  }
  return false;
}

void found(State& s, int i) {
  SNode& n = s.nodes[size_t(i)];
  const Node& node = *n.node;
  Group g;
  g.members = {i};
  g.full = node.shape;
  g.out_numel = numel(node.shape);
  n.side = Side::Post;
  if (is_library(node.op)) {
    g.kind = KernelKind::Library;
  } else if (is_reduce(node.op)) {
    g.kind = KernelKind::Reduce;
    g.full = node.srcs[0]->shape;
    g.axes = reduce_axes_of(node);
    g.has_reduce = true;
    n.side = Side::Reduce;
  }  // a movement node here is a view a library call reads (recomputable()): its copy kernel
  n.group = int(s.groups.size());
  s.groups.push_back(std::move(g));
}

// Tries to add node i (read only by group gi, directly or through inlined nodes) to gi; sets its side.
bool absorb(State& s, int gi, int i) {
  Group& g = s.groups[size_t(gi)];
  SNode& n = s.nodes[size_t(i)];
  const Node& node = *n.node;
  if (g.kind == KernelKind::Library || is_library(node.op)) return false;
  if (g.kind == KernelKind::ViewOnly) {
    if (!is_movement(node.op)) return false;
    n.group = gi;
    g.members.push_back(i);
    return true;
  }
  // Post: every consumer is downstream of the group's reduce (or the group has none yet).
  bool post = true;
  for (int c : n.consumers) post = post && s.nodes[size_t(c)].side == Side::Post;
  const int64_t ne = numel(node.shape), full = numel(g.full);
  bool ok = false;
  Side side = post ? Side::Post : Side::Pre;
  if (is_reduce(node.op)) {
    // Rule 6: a reduce never feeds another reduce of the same kernel.
    if (!post) return false;
    if (!g.has_reduce) {
      ok = ne == full;  // the group is elementwise over this reduce's output: its epilogue
      if (ok) {
        g.kind = KernelKind::Reduce;
        g.full = node.srcs[0]->shape;
        g.axes = reduce_axes_of(node);
        g.has_reduce = true;
      }
    } else {
      // A sibling reduce inside one expression: same input shape and axes, independent.
      ok = node.srcs[0]->shape == g.full && reduce_axes_of(node) == g.axes && ne == g.out_numel &&
           !reaches_reduce_in_group(s, gi, i);
    }
    side = Side::Reduce;
  } else if (post) {
    // Epilogue side: ops on the small output, or small inputs that need no reduce.
    ok = ne == g.out_numel || (ne < g.out_numel && !n.dep_reduce) || (ne > g.out_numel && !g.has_reduce);
  } else {
    // Prologue side (rules 1, 2, 5): the reduce's full shape, or a small input that needs no reduce
    // (a reduce result broadcast back over the full shape is a small input of this kernel instead).
    ok = ne == full || !n.dep_reduce;
  }
  if (!ok) return false;
  n.side = side;
  n.group = gi;
  g.members.push_back(i);
  return true;
}

// Whether requested output i may join the one group reading it, as a second stored output of that
// kernel (an optimizer's new momentum and new weight: one kernel, not two): only where that kernel
// writes values of i's shape anyway (an elementwise kernel over i's shape, or a reduce kernel's
// epilogue over its output size), never inside a reduce's prologue.
bool output_joins(const State& s, int g, int i) {
  const Group& grp = s.groups[size_t(g)];
  const SNode& n = s.nodes[size_t(i)];
  if (is_movement(n.node->op) || is_reduce(n.node->op)) return false;
  for (int c : n.consumers)
    if (s.nodes[size_t(c)].side != Side::Post) return false;
  if (grp.kind == KernelKind::Elementwise) return n.node->shape == grp.full;
  if (grp.kind == KernelKind::Reduce) return numel(n.node->shape) == grp.out_numel;
  return false;
}

// Whether node i may be recomputed by each group reading it instead of being stored.
bool recomputable(const State& s, int i, const std::vector<int>& readers) {
  const SNode& n = s.nodes[size_t(i)];
  const Op op = n.node->op;
  if (n.output || is_reduce(op) || is_library(op) || op == Op::Copy) return false;  // Copy: asked to store
  const bool library_reads = any_library(s, readers);
  // A view is index arithmetic wherever it is read, except a view that is never dense read by a
  // library call (library_copies_view): that is stored by a kernel of its own (pass view_only).
  if (is_movement(op)) return !(library_reads && library_copies_view(op));
  return !library_reads;  // a library reads a buffer
}
}  // namespace

void pass_group(State& s) {
  // Groups reading each inlined node (fixed once it is inlined: its readers were placed before it).
  std::vector<std::vector<int>> inlined_readers(s.nodes.size());
  for (auto it = s.topo.rbegin(); it != s.topo.rend(); ++it) {
    const int i = *it;
    SNode& n = s.nodes[size_t(i)];
    if (n.inlined) continue;
    std::vector<int> readers;
    for (int c : n.consumers) {
      const SNode& cn = s.nodes[size_t(c)];
      for (int g : cn.inlined ? inlined_readers[size_t(c)] : std::vector<int>{cn.group})
        if (g >= 0 && std::find(readers.begin(), readers.end(), g) == readers.end()) readers.push_back(g);
    }
    // A computed value read through a reshape that merges its dims is stored, and read as a view.
    bool through_merge = false;
    if (!is_movement(n.node->op))
      for (int c : n.consumers) {
        const Node& cn = *s.nodes[size_t(c)].node;
        through_merge =
            through_merge || (cn.op == Op::Reshape && reshape_merges_dims(n.node->shape, cn.shape));
      }
    const bool one_group = readers.size() == 1 && !is_library(n.node->op) && !through_merge &&
                           (!n.output || output_joins(s, readers[0], i));
    if (one_group && absorb(s, readers[0], i)) continue;
    if (!through_merge && recomputable(s, i, readers)) {
      n.inlined = true;
      inlined_readers[size_t(i)] = readers;
      n.side = Side::Post;
      for (int c : n.consumers)
        if (s.nodes[size_t(c)].side != Side::Post) n.side = Side::Pre;
      continue;
    }
    found(s, i);
  }
}

}  // namespace aether::sched
