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

NodePtr make_node(Op op, DType dtype, Shape shape, Device device, std::vector<NodePtr> srcs,
                  OpArg arg) {
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

void to_row_major(Node& n) {
  if (!n.buffer || !n.buffer->layout()) return;
  const Layout& l = *n.buffer->layout();
  AETHER_CHECK(l.shape == n.shape && n.view.is_contiguous() && n.view.offset == 0, "to_row_major", "node ", n.id,
               " of shape ", to_string(n.shape), " reads a ", l.name, " buffer of shape ", to_string(l.shape),
               " through a view");
  auto rm = std::make_shared<Buffer>(n.device, n.dtype, numel(n.shape), /*zero_fill=*/false);
  unpack(l, n.buffer->data(), rm->data(), dtype_size(n.dtype));
  n.buffer = std::move(rm);
}

}  // namespace aether
