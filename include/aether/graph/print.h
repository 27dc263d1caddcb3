// aether/graph/print.h - the lazy graph as text and as Graphviz dot.
//
// Text: one line per node in topological order:
//   %12 = Add(%10, %11)  (256, 256) float32
// Realized nodes print as `Buffer` leaves with their view. Dot: `dot -Tsvg g.dot -o g.svg`.
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "aether/graph/tensor.h"

namespace aether {

void print_graph(std::ostream& os, const std::vector<Tensor>& outputs);
std::string graph_to_text(const std::vector<Tensor>& outputs);
std::string graph_to_dot(const std::vector<Tensor>& outputs);
// Nodes reachable from `outputs` (unrealized ones and the realized leaves they read), sources first.
std::vector<const Node*> graph_nodes(const std::vector<Tensor>& outputs);

}  // namespace aether
