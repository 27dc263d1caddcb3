// aether/graph/realize.h - computing graph nodes: the one call the graph makes into execution.
//
// Declared at the graph stage and defined by the executor stage (src/backend/backend.cpp, in the
// same libaether), so that Tensor::realize() needs no header of a later pipeline stage: the graph
// knows that nodes get computed, not how (schedule, codegen and the device runtimes stay below it).
#pragma once

#include <vector>

#include "aether/graph/node.h"

namespace aether {

// Computes the given nodes (and every unrealized node they need) now, on their device; nodes
// already realized are left as they are. Throws aether::Error when the nodes mix devices.
void realize_nodes(const std::vector<NodePtr>& nodes);

}  // namespace aether
