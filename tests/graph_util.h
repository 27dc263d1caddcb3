// tests/graph_util.h - looking into a lazy graph from tests.
#pragma once

#include <unordered_set>
#include <vector>

#include "aether/graph/tensor.h"

namespace aether::testing_graph {

// The nodes of op `op` in t's graph (t's node and everything upstream of it, each node once).
inline std::vector<NodePtr> nodes_of(const Tensor& t, Op op) {
  std::vector<NodePtr> found, stack{t.node()};
  std::unordered_set<const Node*> seen;
  while (!stack.empty()) {
    const NodePtr n = stack.back();
    stack.pop_back();
    if (!n || !seen.insert(n.get()).second) continue;
    if (n->op == op) found.push_back(n);
    for (const NodePtr& s : n->srcs) stack.push_back(s);
  }
  return found;
}

}  // namespace aether::testing_graph
