// codegen/lower.h - lowering one scheduled kernel (a fusion group of graph nodes) to the kernel IR.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "codegen/ir.h"
#include "schedule/schedule.h"

namespace aether::codegen {

struct Lowered {
  ir::Kernel kernel;
  std::vector<NodePtr> inputs;   // the leaf read by kernel.bufs[i], for i < inputs.size()
  std::vector<View> views;       // the view of each input assumed when lowering
  std::vector<NodePtr> outputs;  // the node stored by kernel.bufs[inputs.size() + j]
};

// The value of a node the kernel reads as a buffer (a leaf): its view, or nullopt when the node is
// computed (a member of the kernel, or recomputed in it).
using LeafView = std::function<std::optional<View>(const Node&)>;

// Lowers a generated (elementwise or reduce) kernel. Returns nullopt, with the reason in *why, when
// the IR cannot express it yet (e.g. 16-bit random numbers); the caller then runs the
// kernel's nodes on the reference backend.
std::optional<Lowered> lower(const Kernel& k, const LeafView& leaf, std::string* why);

}  // namespace aether::codegen
