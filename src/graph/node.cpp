// Node construction.
#include "aether/graph/node.h"

#include "aether/core/error.h"

namespace aether {
namespace {
std::atomic<uint64_t> g_next_id{1};
}

void Node::set_value(BufferPtr buf, View v) {
  buffer = std::move(buf);
  view = std::move(v);
  srcs.clear();
  srcs.shrink_to_fit();
}

NodePtr make_node(Op op, DType dtype, Shape shape, Device device, std::vector<NodePtr> srcs, OpArg arg) {
  auto n = std::make_shared<Node>();
  n->op = op;
  n->dtype = dtype;
  n->shape = std::move(shape);
  n->device = device;
  n->srcs = std::move(srcs);
  n->arg = std::move(arg);
  n->id = g_next_id.fetch_add(1);
  return n;
}

NodePtr make_load(BufferPtr buffer, View view) {
  auto n = make_node(Op::Load, buffer->dtype(), view.shape, buffer->device(), {});
  n->buffer = std::move(buffer);
  n->view = std::move(view);
  return n;
}

}  // namespace aether
