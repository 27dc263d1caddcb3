// Text and Graphviz renderings of the lazy graph.
#include "aether/graph/print.h"

#include <ostream>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace aether {
namespace {
std::string arg_str(const Node& n) {
  std::ostringstream os;
  std::visit(
      [&](const auto& a) {
        using A = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<A, double>) {
          os << "value=" << a;
        } else if constexpr (std::is_same_v<A, RandArg>) {
          os << "seed=" << a.seed << " stream=" << a.stream;
        } else if constexpr (std::is_same_v<A, Axes>) {
          os << "axes=[";
          for (size_t i = 0; i < a.size(); ++i) os << (i ? "," : "") << a[i];
          os << ']';
        } else if constexpr (std::is_same_v<A, SliceArg>) {
          os << "start=" << to_string(a.start) << " stop=" << to_string(a.stop)
             << " step=" << to_string(a.step);
        } else if constexpr (std::is_same_v<A, PadArg>) {
          os << "before=" << to_string(a.before) << " after=" << to_string(a.after);
        } else if constexpr (std::is_same_v<A, Conv2dArg>) {
          os << "stride=" << a.stride_h << 'x' << a.stride_w << " pad=" << a.pad_top << ',' << a.pad_left
             << ',' << a.pad_bottom << ',' << a.pad_right << " dil=" << a.dil_h << 'x' << a.dil_w
             << " groups=" << a.groups;
        } else if constexpr (std::is_same_v<A, Pool2dArg>) {
          os << "kernel=" << a.kernel_h << 'x' << a.kernel_w << " stride=" << a.stride_h << 'x' << a.stride_w
             << " pad=" << a.pad_top << ',' << a.pad_left << ',' << a.pad_bottom << ',' << a.pad_right;
        } else if constexpr (std::is_same_v<A, CollectiveArg>) {
          os << "group=" << a.group;
        } else if constexpr (std::is_same_v<A, SortArg>) {
          os << (a.descending ? "descending" : "ascending") << " k=" << a.k;
        }
      },
      n.arg);
  return os.str();
}
}  // namespace

std::vector<const Node*> graph_nodes(const std::vector<Tensor>& outputs) {
  std::vector<const Node*> order;
  std::unordered_set<const Node*> seen;
  std::vector<std::pair<const Node*, size_t>> stack;
  for (const auto& t : outputs) {
    const Node* root = t.node().get();
    if (!seen.insert(root).second) continue;
    stack.push_back({root, 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->srcs.size()) {
        const Node* s = n->srcs[i++].get();
        if (seen.insert(s).second) stack.push_back({s, 0});
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
  }
  return order;
}

void print_graph(std::ostream& os, const std::vector<Tensor>& outputs) {
  for (const Node* n : graph_nodes(outputs)) {
    os << '%' << n->id << " = ";
    if (n->realized()) {
      os << "Buffer";
    } else {
      os << op_name(n->op) << '(';
      for (size_t i = 0; i < n->srcs.size(); ++i) os << (i ? ", " : "") << '%' << n->srcs[i]->id;
      os << ')';
    }
    os << "  " << to_string(n->shape) << ' ' << dtype_name(n->dtype);
    if (!n->realized()) {
      const std::string a = arg_str(*n);
      if (!a.empty()) os << "  " << a;
    } else {
      os << "  " << n->view;
    }
    os << '\n';
  }
}

std::string graph_to_text(const std::vector<Tensor>& outputs) {
  std::ostringstream os;
  print_graph(os, outputs);
  return os.str();
}

std::string graph_to_dot(const std::vector<Tensor>& outputs) {
  std::ostringstream os;
  os << "digraph aether {\n  rankdir=TB;\n  node [shape=box, fontname=\"monospace\", fontsize=10];\n";
  std::unordered_set<const Node*> outs;
  for (const auto& t : outputs) outs.insert(t.node().get());
  for (const Node* n : graph_nodes(outputs)) {
    const char* color = n->realized()                        ? "lightgrey"
                        : op_kind(n->op) == OpKind::Library  ? "lightsalmon"
                        : op_kind(n->op) == OpKind::Reduce   ? "lightblue"
                        : op_kind(n->op) == OpKind::Movement ? "khaki"
                                                             : "white";
    os << "  n" << n->id << " [label=\"%" << n->id << ' ' << (n->realized() ? "Buffer" : op_name(n->op))
       << "\\n"
       << to_string(n->shape) << ' ' << dtype_name(n->dtype);
    const std::string a = n->realized() ? std::string() : arg_str(*n);
    if (!a.empty()) os << "\\n" << a;
    os << "\", style=filled, fillcolor=" << color << (outs.count(n) ? ", penwidth=3" : "") << "];\n";
    for (const auto& s : n->srcs) os << "  n" << s->id << " -> n" << n->id << ";\n";
  }
  os << "}\n";
  return os.str();
}

}  // namespace aether
