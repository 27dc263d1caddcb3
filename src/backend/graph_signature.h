// backend/graph_signature.h - the structure of a lazy graph, as a key for reusing an execution plan.
//
// A training step builds a new graph every step, but its structure (ops, shapes, dtypes, views of
// the realized inputs) is the same each time; only the values differ: new buffers, a new learning
// rate, new dropout seeds. graph_signature() walks the unrealized ancestors of the targets in a
// canonical order (post-order, sources in order) and writes every fact a schedule, its lowering and
// its generated source depend on: per node its op, dtype, device, shape, argument and sources'
// positions; for a realized node its view, buffer size and which earlier node shares its buffer.
// Values that become run-time kernel parameters are written as patterns, not values: a float
// constant other than 0, 1 and NaN as "the same value as constant #k" (kernels share one parameter
// for equal values), a random draw's (seed, stream) likewise. Two graphs with equal signatures get
// the same schedule and the same kernels; position p of one corresponds to position p of the other.
// The first word is plan_settings() (core/config.h): the run-time settings a schedule depends on
// (AETHER_POSTOPS, AETHER_POOL_LIBRARY, ...), so that changing one gives a new plan, not a stale one.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "aether/graph/node.h"

namespace aether {

struct GraphSignature {
  std::vector<uint64_t> words;               // the structure, compared exactly
  uint64_t hash = 0;                         // of `words`
  std::vector<NodePtr> order;                // position -> node (leaves included)
  std::unordered_map<const Node*, int> pos;  // node -> position
};

GraphSignature graph_signature(const std::vector<NodePtr>& targets);

}  // namespace aether
