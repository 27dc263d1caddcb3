// aether/graph/node.h - one node of the lazy graph.
//
// A node is immutable once made: op, arg, dtype, shape, device and sources. When it is realized,
// `buffer` and `view` are set (its value is buffer seen through view) and its sources are dropped,
// so everything upstream that no tensor still holds is freed.
#pragma once

#include <atomic>
#include <memory>
#include <vector>

#include "aether/core/buffer.h"
#include "aether/core/shape.h"
#include "aether/graph/op.h"

namespace aether {

struct Node;
using NodePtr = std::shared_ptr<Node>;

struct Node {
  Op op = Op::Load;
  DType dtype = DType::float32;
  Shape shape;
  Device device;
  OpArg arg;
  std::vector<NodePtr> srcs;
  uint64_t id = 0;  // creation order; unique per process

  // Set when realized: the value is `buffer` read through `view` (view.shape == shape).
  BufferPtr buffer;
  View view;

  bool realized() const { return buffer != nullptr; }
  // Realized: the address of the view's first element in `buffer` (host or device memory).
  char* first_element() const {
    return static_cast<char*>(buffer->data()) + view.offset * int64_t(dtype_size(dtype));
  }
  // After execution: record the value and drop the sources.
  void set_value(BufferPtr buf, View v);
};

// Makes a node with a fresh id. No validation: the tensor ops check their arguments first.
NodePtr make_node(Op op, DType dtype, Shape shape, Device device, std::vector<NodePtr> srcs, OpArg arg = {});
// A realized leaf over an existing buffer.
NodePtr make_load(BufferPtr buffer, View view);

}  // namespace aether
