// aether/graph/collective.h - collectives inside the lazy graph: the AllReduce primitive sums a
// tensor over the ranks of a group, as one opaque node that the scheduler runs in graph order and
// autograd differentiates (its gradient is the all-reduce of the incoming gradient). A group is a
// host-memory reduction registered here (the data-parallel job's communicator, by Model::train for
// a synchronized BatchNorm: docs/distributed.md); the graph and the backends do not depend on
// aether::dist.
//
// Every rank must realize the same AllReduce nodes in the same order (the same model and step), as
// with any collective. The backends hand the reduction a contiguous host copy of the node's input
// (a device value is copied to the host and back).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>

#include "aether/graph/tensor.h"

namespace aether {

// data (n elements of dtype, contiguous host memory): replaced in place by their sum over the ranks.
using AllReduceFn = std::function<void(void* data, size_t n, DType dtype)>;

// Registers `fn` and returns its group id (>= 0, never reused). unregister_collective removes it; a
// node of a removed group throws when it runs. Thread-safe.
int64_t register_collective(AllReduceFn fn);
void unregister_collective(int64_t group);
// Runs group `group`'s reduction on data (n) of dtype; throws aether::Error naming an unknown group.
void run_all_reduce(int64_t group, void* data, size_t n, DType dtype);

// x (any shape, a float dtype) -> the sum of x over the group's ranks: same shape, dtype and device.
// Gradient: the all-reduce (sum over the ranks) of the incoming gradient.
Tensor all_reduce(const Tensor& x, int64_t group);

}  // namespace aether
