// aether/graph/autograd.h - reverse-mode differentiation over the primitive ops.
//
// Each differentiable primitive records a GradFn: the op, its argument, the input and output
// values its rule needs (only those; see saves() in grad.cpp) and edges to the input tensors.
// backward() walks the GradFns in reverse topological order, applies one rule per primitive
// (grad.cpp), accumulates into leaves' grad(), and frees the GradFns unless asked to keep them.
// Gradients are lazy tensors too: the backward graph is scheduled like any other.
#pragma once

#include <memory>
#include <vector>

#include "aether/graph/tensor.h"

namespace aether {

struct GradFn {
  Op op;
  OpArg arg;
  std::vector<NodePtr> inputs;  // saved input values (null where the rule does not need them)
  NodePtr output;               // saved output value (null where not needed)
  std::vector<Shape> input_shapes;
  std::vector<DType> input_dtypes;
  Shape output_shape;
  std::vector<std::shared_ptr<TensorImpl>> next;  // input tensors needing a gradient, else null
  bool freed = false;
};

// Which values a rule needs: saves_input(op, i) and saves_output(op).
bool saves_input(Op op, int i);
bool saves_output(Op op);
bool is_differentiable(Op op);

// The gradient rule of one primitive: gradients for each input (undefined where none is needed).
std::vector<Tensor> grad_rule(const GradFn& fn, const Tensor& dy);

// Gradients of `outputs` w.r.t. `inputs` without touching .grad (used by tests and higher-level
// code): returns one tensor per input (zeros where unreachable).
std::vector<Tensor> gradients(const Tensor& output, const std::vector<Tensor>& inputs,
                              const Tensor& dy = Tensor(), bool retain_graph = false);

}  // namespace aether
