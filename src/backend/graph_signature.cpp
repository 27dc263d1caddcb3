// graph_signature(): the canonical walk and the words it writes (see graph_signature.h).
#include "backend/graph_signature.h"

#include <bit>
#include <map>
#include <type_traits>
#include <utility>

#include "aether/core/buffer.h"
#include "core/config.h"

namespace aether {
namespace {

class Writer {
 public:
  explicit Writer(GraphSignature& g) : g_(g) {}

  void walk(const std::vector<NodePtr>& targets) {
    std::vector<std::pair<NodePtr, size_t>> stack;  // node, next source to visit
    for (const NodePtr& t : targets) {
      if (!g_.pos.count(t.get())) stack.push_back({t, 0});
      while (!stack.empty()) {
        auto& [n, next] = stack.back();
        if (!n->realized() && next < n->srcs.size()) {
          NodePtr s = n->srcs[next++];
          if (!g_.pos.count(s.get())) stack.push_back({std::move(s), 0});
          continue;
        }
        NodePtr done = std::move(n);
        stack.pop_back();
        if (!g_.pos.count(done.get())) node(done);
      }
      put(uint64_t(g_.pos.at(t.get())));  // the targets, in order
    }
  }

 private:
  void put(uint64_t w) { g_.words.push_back(w); }
  void put_i(int64_t v) { put(uint64_t(v)); }
  void put_d(double v) { put(std::bit_cast<uint64_t>(v)); }
  void put_shape(const Shape& s) {
    put(s.size());
    for (int64_t d : s) put_i(d);
  }
  void put_ints(const std::vector<int64_t>& v) { put_shape(v); }

  void node(const NodePtr& np) {
    Node& n = *np;
    const int p = int(g_.order.size());
    g_.order.push_back(np);
    g_.pos.emplace(&n, p);
    put(0xA0000000u + uint64_t(n.op));
    put(uint64_t(n.dtype));
    put(uint64_t(n.device.type) << 32 | uint64_t(uint32_t(n.device.index)));
    put_shape(n.shape);
    if (n.realized()) {
      const View& v = n.view;
      put(1);
      put_shape(v.shape);
      put_shape(v.strides);
      put_i(v.offset);
      put(v.mask ? v.mask->size() + 1 : 0);
      if (v.mask)
        for (const auto& [lo, hi] : *v.mask) put_i(lo), put_i(hi);
      put_i(n.buffer->numel());
      put(uint64_t(n.buffer->dtype()));
      auto [it, fresh] = buffers_.try_emplace(n.buffer.get(), p);
      put(uint64_t(fresh ? p : it->second));  // aliasing: the first position holding this buffer
      return;
    }
    put(0);
    put(n.srcs.size());
    for (const NodePtr& s : n.srcs) put(uint64_t(g_.pos.at(s.get())));
    arg(n, p);
  }

  void arg(const Node& n, int p) {
    put(n.arg.index());
    std::visit(
        [&](const auto& a) {
          using A = std::decay_t<decltype(a)>;
          if constexpr (std::is_same_v<A, std::monostate>) {
          } else if constexpr (std::is_same_v<A, double>) {
            // A float constant other than 0, 1 and NaN is a kernel parameter: its value is free,
            // only which constants are equal matters. Anything else is written into the source.
            const bool param = n.op == Op::Const && is_float(n.dtype) && a == a && a != 0 && a != 1;
            if (param) {
              put(2);
              put(uint64_t(consts_.try_emplace(a, p).first->second));
            } else {
              put(1);
              put_d(a);
            }
          } else if constexpr (std::is_same_v<A, RandArg>) {
            put(uint64_t(rands_.try_emplace({a.seed, a.stream}, p).first->second));
          } else if constexpr (std::is_same_v<A, Axes>) {
            put(a.size());
            for (int x : a) put_i(x);
          } else if constexpr (std::is_same_v<A, SliceArg>) {
            put_ints(a.start), put_ints(a.stop), put_ints(a.step);
          } else if constexpr (std::is_same_v<A, PadArg>) {
            put_ints(a.before), put_ints(a.after);
          } else if constexpr (std::is_same_v<A, Conv2dArg>) {
            for (int64_t x : {a.stride_h, a.stride_w, a.pad_top, a.pad_left, a.pad_bottom, a.pad_right,
                              a.dil_h, a.dil_w, a.groups})
              put_i(x);
          } else if constexpr (std::is_same_v<A, Pool2dArg>) {
            for (int64_t x : {a.kernel_h, a.kernel_w, a.stride_h, a.stride_w, a.pad_top, a.pad_left,
                              a.pad_bottom, a.pad_right, int64_t(a.count_include_pad)})
              put_i(x);
          } else if constexpr (std::is_same_v<A, CollectiveArg>) {
            put_i(a.group);
          } else if constexpr (std::is_same_v<A, SortArg>) {
            put(uint64_t(a.descending));
            put_i(a.k);
          } else {
            static_assert(sizeof(A) == 0, "graph_signature: an OpArg alternative is not written");
          }
        },
        n.arg);
  }

  GraphSignature& g_;
  std::unordered_map<const Buffer*, int> buffers_;
  std::map<double, int> consts_;
  std::map<std::pair<uint64_t, uint64_t>, int> rands_;
};

}  // namespace

GraphSignature graph_signature(const std::vector<NodePtr>& targets) {
  GraphSignature g;
  g.words.push_back(plan_settings());  // the settings a schedule depends on (AETHER_POSTOPS, ...)
  Writer(g).walk(targets);
  uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
  for (uint64_t w : g.words) h = (h ^ w) * 1099511628211ull;
  g.hash = h;
  return g;
}

}  // namespace aether
