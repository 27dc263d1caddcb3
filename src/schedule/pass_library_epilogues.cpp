// Pass library_epilogues: a Conv2d library call absorbs the elementwise chain on its output that the
// device's library runs with the convolution (LibraryCaps::conv_epilogue: on the CPU, float32, as
// oneDNN 2.6's post-ops), so the conv output is never stored:
//   y + b, y - b, y * s  with b, s per-output-channel (O) vectors broadcast over (N,OH,OW): conv bias,
//                        eval-mode batch norm's shift and scale (binary post-ops, or the bias argument);
//   y + r                with r a dense tensor of y's shape: a residual (sum post-op);
//   where(y <= 0, 0, y)  or max(y, 0): ReLU (eltwise post-op).
// The chain starts at the conv output, which must have no other reader and not be a requested
// output (the movement nodes viewing an operand join the kernel with it); every value inside the
// chain but its last must be read only by the next step. The members of the elementwise group that
// are not on the chain (e.g. the (C) batch-norm scale) stay a group of their own, stored. The chain
// is recorded as the kernel's epilogue (Kernel::epilogue: each step's op and the value it reads),
// and the executor hands exactly that record to the device (DeviceRuntime::run_epilogue), which
// runs it as one library call or says no (then node by node). Environment: AETHER_POSTOPS=0 disables this
// pass (to measure the merge or debug it; config().postops at run time, core/config.h).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "core/config.h"
#include "state.h"

namespace aether::sched {
namespace {

// AETHER_POSTOPS (core/config.h): part of the plan cache's key (plan_settings).
bool postops_enabled() { return config().postops; }

// Applies a Reshape / Expand / Permute node to a view; false for other ops or a non-view reshape.
bool apply_view(const Node& m, View& v) {
  switch (m.op) {
    case Op::Reshape: {
      auto r = v.reshape(m.shape);
      if (!r) return false;
      v = *r;
      return true;
    }
    case Op::Expand: v = v.expand(m.shape); return true;
    case Op::Permute: v = v.permute(std::get<Axes>(m.arg)); return true;
    case Op::Slice:  // not plain views of the whole value
    case Op::Pad:
    case Op::Flip:
      AETHER_SOURCE_OPS(AETHER_OP_CASE)
      AETHER_ELEMENTWISE_OPS(AETHER_OP_CASE)
      AETHER_REDUCE_OPS(AETHER_OP_CASE)
      AETHER_LIBRARY_OPS(AETHER_OP_CASE)
      return false;
  }
  return false;
}

// The value node i shows through unstored movement nodes (their composed view in `v`); -1 when
// the chain holds a movement op that is not a plain view, or a stored movement node. Movement nodes
// that are members of group e (not recomputed where read) are added to `members`.
int view_base(const State& s, int i, View& v, int e = -1, std::vector<int>* members = nullptr) {
  std::vector<int> chain;  // movement nodes, consumer first
  int cur = i;
  while (!s.nodes[size_t(cur)].leaf && is_movement(s.nodes[size_t(cur)].node->op)) {
    const SNode& m = s.nodes[size_t(cur)];
    if (!m.inlined && (m.group != e || e < 0 || m.output || !members)) return -1;
    if (!m.inlined) members->push_back(cur);
    chain.push_back(cur);
    cur = m.srcs[0];
  }
  const SNode& b = s.nodes[size_t(cur)];
  v = b.leaf && b.node->realized() ? b.node->view : View::contiguous(b.node->shape);
  for (auto it = chain.rbegin(); it != chain.rend(); ++it)
    if (!apply_view(*s.nodes[size_t(*it)].node, v)) return -1;
  return cur;
}

// Whether node i is the constant 0 (seen through movement nodes).
bool is_zero(const State& s, int i) {
  View v;
  const int b = view_base(s, i, v);
  if (b < 0) return false;
  const Node& n = *s.nodes[size_t(b)].node;
  const double* d = std::get_if<double>(&n.arg);
  return n.op == Op::Const && d != nullptr && *d == 0.0;
}

struct Step {
  std::vector<int> nodes;  // the step's members; the last is its result
  int operand = -1;        // the stored value a binary step reads (-1: none)
  std::vector<int> views;  // movement members of the elementwise group between operand and step
  EpilogueStep record;     // the op and the node it reads directly (a view of the operand)
};

// Whether `op` of the conv output y (N,OH,OW,O) reading node `src` (as its other operand) is a
// post-op: a per-channel (O) vector, or (Add only) a dense tensor of y's shape. Sets the base read.
bool operand_ok(const State& s, Op op, const Shape& y, DType dtype, int src, int e, int l,
                const std::vector<char>& on_chain, Step& st) {
  View v;
  const int base = view_base(s, src, v, e, &st.views);
  st.operand = base;
  if (base < 0 || v.shape != y || y.size() != 4) return false;
  const SNode& b = s.nodes[size_t(base)];
  if (b.node->dtype != dtype || on_chain[size_t(base)]) return false;
  if (!b.leaf && (b.inlined || b.group < 0 || b.group == l)) return false;  // oneDNN reads a buffer
  const bool per_channel = v.strides[0] == 0 && v.strides[1] == 0 && v.strides[2] == 0 &&
                           (v.strides[3] == 1 || y[3] == 1) && !v.mask;
  if (per_channel) return true;
  return op == Op::Add && v.is_contiguous();
}

// The post-op step that reads node `cur` (and only it reads cur), all its members in group e.
Step match_step(const State& s, int cur, int e, int l, const std::vector<char>& on_chain) {
  const SNode& c = s.nodes[size_t(cur)];
  const Shape& y = c.node->shape;
  auto in_e = [&](int i) {
    const SNode& n = s.nodes[size_t(i)];
    const DType want = n.node->op == Op::CmpLe ? DType::boolean : c.node->dtype;
    return !n.inlined && !n.leaf && n.group == e && n.node->dtype == want && n.node->shape == y;
  };
  for (int k : c.consumers)
    if (!in_e(k)) return {};
  if (c.consumers.size() == 1) {
    const int k = c.consumers[0];
    const Node& n = *s.nodes[size_t(k)].node;
    const auto& srcs = s.nodes[size_t(k)].srcs;
    if (srcs.size() != 2 || srcs[0] == srcs[1]) return {};
    const int other = srcs[0] == cur ? srcs[1] : srcs[0];
    Step st{{k}, -1, {}, {}};
    using K = EpilogueOp::Kind;
    // The library epilogues (EpilogueOp::Kind) are a short list: other ops are simply not absorbed.
    if (n.op == Op::Max) return is_zero(s, other) ? st : Step{};  // ReLU as max(y, 0)
    if (n.op == Op::Sub && srcs[0] != cur) return {};
    if (n.op != Op::Add && n.op != Op::Sub && n.op != Op::Mul) return {};
    st.record = {n.op == Op::Add ? K::Add : n.op == Op::Sub ? K::Sub : K::Mul, other};
    return operand_ok(s, n.op, y, c.node->dtype, other, e, l, on_chain, st) ? st : Step{};
  }
  if (c.consumers.size() == 2) {  // ReLU: where(y <= 0, 0, y)
    int p = c.consumers[0], w = c.consumers[1];
    if (s.nodes[size_t(p)].node->op != Op::CmpLe) std::swap(p, w);
    const SNode &pn = s.nodes[size_t(p)], &wn = s.nodes[size_t(w)];
    if (pn.node->op != Op::CmpLe || wn.node->op != Op::Where || pn.output) return {};
    if (pn.srcs[0] != cur || !is_zero(s, pn.srcs[1]) || pn.consumers != std::vector<int>{w}) return {};
    if (wn.srcs[0] != p || !is_zero(s, wn.srcs[1]) || wn.srcs[2] != cur) return {};
    return {{p, w}, -1, {}, {}};
  }
  return {};
}

// Whether any member of `rest` is downstream of a chain node.
bool rest_reads_chain(const State& s, const std::vector<int>& chain, const std::vector<int>& rest) {
  std::vector<char> down(s.nodes.size(), 0);
  std::vector<int> stack(chain);
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    for (int c : s.nodes[size_t(i)].consumers)
      if (!down[size_t(c)]) {
        down[size_t(c)] = 1;
        stack.push_back(c);
      }
  }
  for (int r : rest)
    if (down[size_t(r)]) return true;
  return false;
}

}  // namespace

void pass_library_epilogues(State& s) {
  if (!postops_enabled()) return;
  for (size_t l = 0; l < s.groups.size(); ++l) {
    if (!s.groups[l].alive || s.groups[l].kind != KernelKind::Library || s.groups[l].members.size() != 1)
      continue;
    const int ci = s.groups[l].members[0];
    const SNode& cn = s.nodes[size_t(ci)];
    if (cn.node->op != Op::Conv2d || !s.library.conv_epilogue_in(cn.node->dtype) || cn.output ||
        cn.consumers.empty())
      continue;
    const int e = s.nodes[size_t(cn.consumers[0])].group;
    if (e < 0 || s.groups[size_t(e)].kind != KernelKind::Elementwise) continue;
    // Walk the chain from the conv output.
    std::vector<char> on_chain(s.nodes.size(), 0);
    on_chain[size_t(ci)] = 1;
    std::vector<int> chain, operands;
    std::vector<EpilogueStep> record;
    int cur = ci;
    while (cur == ci || !s.nodes[size_t(cur)].output) {
      const Step st = match_step(s, cur, e, int(l), on_chain);
      if (st.nodes.empty()) break;
      for (int m : st.nodes) on_chain[size_t(m)] = 1;
      for (int m : st.views) on_chain[size_t(m)] = 1;
      chain.insert(chain.end(), st.views.begin(), st.views.end());
      chain.insert(chain.end(), st.nodes.begin(), st.nodes.end());
      if (st.operand >= 0) operands.push_back(st.operand);
      record.push_back(st.record);
      cur = st.nodes.back();
    }
    if (chain.empty()) continue;
    Group& ge = s.groups[size_t(e)];
    std::vector<int> rest;
    for (int m : ge.members)
      if (!on_chain[size_t(m)]) rest.push_back(m);
    if (rest_reads_chain(s, chain, rest)) continue;
    // The rest stays one elementwise group; every value it stores must have one shape (its
    // iteration shape), and nothing in it may be larger.
    Shape full;
    bool ok = true, have = false;
    const auto readers = all_reader_groups(s);
    for (int r : rest) {
      const SNode& rn = s.nodes[size_t(r)];
      bool stored = rn.output || std::find(operands.begin(), operands.end(), r) != operands.end();
      for (int h : readers[size_t(r)]) stored = stored || h != e;
      if (!stored) continue;
      if (have && rn.node->shape != full) ok = false;
      full = rn.node->shape;
      have = true;
    }
    for (int r : rest) ok = ok && have && numel(s.nodes[size_t(r)].node->shape) <= numel(full);
    if (!ok) continue;
    for (int m : chain) {
      s.nodes[size_t(m)].group = int(l);
      s.nodes[size_t(m)].side = Side::Post;
    }
    Group& gl = s.groups[l];
    gl.members.insert(gl.members.end(), chain.begin(), chain.end());
    gl.epilogue = std::move(record);
    ge.members = rest;
    if (rest.empty()) {
      ge.alive = false;
    } else {
      ge.full = full;
      ge.out_numel = numel(full);
    }
  }
}

}  // namespace aether::sched
