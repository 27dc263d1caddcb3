// backend/liveness.h - buffer liveness over a schedule: after which kernel each value is last used.
//
// An executor holds the schedule's nodes (kernel members, stored outputs, inputs, inlined nodes)
// while it runs it. Holding all of them to the end keeps every intermediate value of, say, a whole
// training step alive at once. liveness() says, for each kernel, which of those nodes no later
// kernel refers to, so the executor can drop its references right after that kernel runs; with
// reference counting the value (its buffer) is then freed, and the block is reused by the next
// kernel, as soon as nothing else (a tensor, a pending node's sources, a view aliasing the same
// buffer) holds it. Executors for any device can use it (the CPU fused executor does).
#pragma once

#include <vector>

#include "aether/graph/node.h"
#include "schedule/schedule.h"

namespace aether {

struct Liveness {
  // release_after[i]: the nodes the schedule refers to whose last reference is kernel i (as a
  // member, a stored output, an inlined node or an input's base), except the targets. Each node
  // appears in exactly one list (or in `unused`).
  std::vector<std::vector<const Node*>> release_after;
  // Nodes in Schedule::inlined that no kernel refers to (not targets): droppable before kernel 0.
  std::vector<const Node*> unused;
  // Of release_after[i], the values kernel i or an earlier one stores (a kernel output that is not
  // a view) or that were realized before the schedule ran: the buffers that may be freed after
  // kernel i. A device executor that keeps its own buffer table frees these.
  std::vector<std::vector<const Node*>> stored_release_after;
};

// Kernel indices are those of s.kernels; `targets` are the values the caller keeps (never released).
Liveness liveness(const Schedule& s, const std::vector<NodePtr>& targets);

// A producer-first order of s.kernels that keeps fewer bytes live at once: a greedy list schedule
// that, among the kernels whose inputs are ready, runs the one that frees the most bytes net of what
// it stores (ties: the schedule's order). The scheduler's order runs, for instance, every weight
// gradient of a network after all the data gradients, so every layer's output gradient waits to the
// end; this order runs each weight gradient as soon as it can free them. Returns new -> old
// indices; the identity when the dependencies cannot be established.
std::vector<size_t> memory_order(const Schedule& s, const std::vector<NodePtr>& targets);
// Reorders s.kernels to `order` (new -> old, from memory_order), remapping KernelInput::producer.
void reorder_kernels(Schedule& s, const std::vector<size_t>& order);

}  // namespace aether
