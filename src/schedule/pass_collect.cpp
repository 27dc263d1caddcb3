// Pass collect: index the unrealized graph reachable from the outputs (topological order,
// consumers, leaves, inlined constants, requested outputs, dependence on a reduce).
#include <unordered_map>
#include <unordered_set>

#include "aether/core/error.h"
#include "state.h"

namespace aether::sched {

void pass_collect(State& s, const std::vector<NodePtr>& outputs, const ScheduleOptions& options) {
  std::unordered_set<const Node*> assumed;
  for (const auto& n : options.assume_realized)
    if (n) assumed.insert(n.get());
  std::unordered_map<const Node*, int> index;
  auto add = [&](const NodePtr& n) {
    auto [it, fresh] = index.emplace(n.get(), int(s.nodes.size()));
    if (fresh) {
      SNode sn;
      sn.node = n;
      sn.leaf = n->realized() || assumed.count(n.get()) > 0;
      s.nodes.push_back(std::move(sn));
    }
    return std::pair<int, bool>{it->second, fresh};
  };
  // Iterative post-order DFS (like realize_nodes): sources before consumers.
  std::vector<std::pair<int, size_t>> stack;
  for (const auto& out : outputs) {
    AETHER_CHECK(out != nullptr, "schedule", "got an empty output node");
    auto [root, fresh] = add(out);
    if (!s.nodes[size_t(root)].leaf) s.nodes[size_t(root)].output = true;
    if (!fresh || s.nodes[size_t(root)].leaf) continue;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [i, k] = stack.back();
      const NodePtr node = s.nodes[size_t(i)].node;
      if (k < node->srcs.size()) {
        const NodePtr src = node->srcs[k++];
        const int self = i;  // `add` may reallocate s.nodes, not the stack
        auto [j, new_src] = add(src);
        s.nodes[size_t(self)].srcs.push_back(j);
        s.nodes[size_t(j)].consumers.push_back(self);
        if (new_src && !s.nodes[size_t(j)].leaf) stack.push_back({j, 0});
      } else {
        s.nodes[size_t(i)].topo = int(s.topo.size());
        s.topo.push_back(i);
        stack.pop_back();
      }
    }
  }
  for (int i : s.topo) {
    SNode& n = s.nodes[size_t(i)];
    const Op op = n.node->op;
    bool const_view = op == Op::Const;
    if (is_movement(op)) const_view = s.nodes[size_t(n.srcs[0])].inlined;
    n.inlined = const_view && !n.output;
    if (is_reduce(op)) {
      n.dep_reduce = true;
    } else if (!is_library(op)) {
      for (int j : n.srcs) n.dep_reduce = n.dep_reduce || s.nodes[size_t(j)].dep_reduce;
    }
  }
}

}  // namespace aether::sched
