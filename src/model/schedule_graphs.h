// src/model/schedule_graphs.h - (internal) built-in training graphs to inspect with the scheduler (`aether
// schedule`).
//
// Each graph is a lazy training computation (forward, backward and, for cifarnet-step, the optimizer
// update) over leaf tensors that are never computed: lazy Tensor::rand leaves listed in `leaves`,
// which options() passes as ScheduleOptions::assume_realized, so building and scheduling a graph
// costs shapes only, even at batch 256 (cifarnet-step's realized buffers: the preset's parameters and
// batch-norm buffers, and the (B) int64 labels).
//
//   bn-relu-train       x (B,32,32,32): BatchNorm2d training (weight, bias, running statistics) + ReLU;
//                       outputs out, new running mean/var, dx, dweight, dbias (upstream gradient dy)
//   conv-bn-relu-train  conv3x3 32->32 'same' without bias -> BatchNorm2d training -> ReLU on
//                       (B,32,32,32); outputs out, new running stats, dx, dconv_w, dweight, dbias
//   resnet-block-train  x (B,32,32,64): relu(bn(conv(relu(bn(conv(x))))) + x); out, running stats,
//                       dx and every parameter gradient
//   cifarnet-step       the cifarnet preset's training step as Model::train runs it
//                       (Model::record_train_step, make_preset's network and recipe) on (B,32,32,3):
//                       forward, cross-entropy with label smoothing 0.2, backward, accuracy, and SGD
//                       (Nesterov momentum 0.9, weight decay 5e-4) with existing momentum buffers (lazy
//                       leaves): loss, accuracy, new running statistics, parameters and momentum buffers
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "aether/graph/tensor.h"
#include "schedule/schedule.h"

namespace aether {

struct ScheduleGraph {
  std::string name;
  std::string description;                // one line
  std::vector<Tensor> outputs;            // the values a training step needs (all unrealized)
  std::vector<std::string> output_names;  // one per output, e.g. "out", "grad x", "bn.running_mean"
  std::vector<Tensor> leaves;             // lazy inputs treated as realized buffers
  std::vector<std::string> leaf_names;    // one per leaf, e.g. "x", "dy", "bn.weight"
  ScheduleOptions options() const;        // assume_realized = leaves
};

// The built-in graphs' names, in the order of the header comment.
std::vector<std::string> schedule_graph_names();

// Builds graph `name` for batch size `batch` (>= 1). Throws aether::Error listing the valid names
// for an unknown name.
ScheduleGraph build_schedule_graph(const std::string& name, int64_t batch = 256);

}  // namespace aether
