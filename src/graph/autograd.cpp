// The backward engine: reverse topological walk over GradFns, accumulation, graph freeing.
#include "aether/graph/autograd.h"

#include <unordered_map>
#include <unordered_set>

namespace aether {
namespace {
thread_local bool g_grad_enabled = true;

// Tensors reachable from `root` through grad_fn edges, each after all tensors it feeds
// (reverse topological order: root first).
std::vector<TensorImpl*> reverse_topo(TensorImpl* root) {
  std::vector<TensorImpl*> post;
  std::unordered_set<TensorImpl*> seen{root};
  std::vector<std::pair<TensorImpl*, size_t>> stack{{root, 0}};
  while (!stack.empty()) {
    auto& [t, i] = stack.back();
    const auto& fn = t->grad_fn;
    if (fn && i < fn->next.size()) {
      TensorImpl* n = fn->next[i++].get();
      if (n && seen.insert(n).second) stack.push_back({n, 0});
    } else {
      post.push_back(t);
      stack.pop_back();
    }
  }
  return {post.rbegin(), post.rend()};
}

// Runs backward from `root`. Each tensor's complete gradient goes to `sink(tensor, grad)` (leaves
// and intermediates alike; the sink decides what to keep), before its rule runs.
template <typename Sink>
void run_backward(const Tensor& root, const Tensor& dy_in, bool retain_graph, Sink&& sink) {
  AETHER_CHECK(root.requires_grad(), "backward",
               "the tensor does not require grad (no input has "
               "requires_grad set, or it was computed with gradients off: NoGradGuard, no_grad())");
  Tensor dy = dy_in;
  if (!dy.defined()) {
    AETHER_CHECK(root.numel() == 1, "backward",
                 "an implicit upstream gradient needs a one-element output, got ", to_string(root.shape()),
                 "; pass dy");
    dy = Tensor::ones(root.shape(), is_float(root.dtype()) ? root.dtype() : DType::float32);
  }
  AETHER_CHECK(dy.shape() == root.shape(), "backward", "dy has shape ", to_string(dy.shape()),
               ", expected the output's ", to_string(root.shape()));
  NoGradGuard no_grad;
  const auto order = reverse_topo(root.impl().get());
  for (TensorImpl* t : order)
    if (t->grad_fn)
      AETHER_CHECK(!t->grad_fn->freed, "backward",
                   "the backward graph was already freed by an earlier "
                   "backward(); pass retain_graph = true to the first backward to run it again");
  std::unordered_map<TensorImpl*, Tensor> grads;
  grads[root.impl().get()] = dy;
  for (TensorImpl* t : order) {
    auto it = grads.find(t);
    if (it == grads.end()) continue;
    Tensor g = std::move(it->second);
    grads.erase(it);
    sink(t, g);  // complete: every consumer of t comes earlier in `order`
    if (!t->grad_fn) continue;
    const GradFn& fn = *t->grad_fn;
    auto gs = grad_rule(fn, g);
    for (size_t i = 0; i < fn.next.size(); ++i) {
      if (!fn.next[i] || i >= gs.size() || !gs[i].defined()) continue;
      auto [slot, inserted] = grads.try_emplace(fn.next[i].get(), gs[i]);
      if (!inserted) slot->second = slot->second + gs[i];
    }
  }
  if (!retain_graph) {
    // The edges go too: they hold the intermediate tensors (and so their values) as long as the
    // output lives; the pending gradient graph keeps only what its rules read. (Moved out first:
    // `order` points at the tensors they hold.)
    std::vector<std::shared_ptr<TensorImpl>> edges;
    for (TensorImpl* t : order)
      if (t->grad_fn) {
        t->grad_fn->freed = true;
        t->grad_fn->inputs.clear();
        t->grad_fn->output.reset();
        for (auto& e : t->grad_fn->next) edges.push_back(std::move(e));
        t->grad_fn->next.clear();
      }
  }
}
}  // namespace

bool grad_enabled() { return g_grad_enabled; }
NoGradGuard::NoGradGuard() : prev_(g_grad_enabled) { g_grad_enabled = false; }
NoGradGuard::~NoGradGuard() { g_grad_enabled = prev_; }

void Tensor::backward(const Tensor& dy, bool retain_graph) const {
  checked();
  run_backward(*this, dy, retain_graph, [](TensorImpl* t, const Tensor& g) {
    if (t->grad_fn || !t->requires_grad) return;  // only leaves accumulate
    // A fresh handle: g may be the caller's dy (or shared by two leaves), which must not alias .grad.
    t->grad = t->grad ? (Tensor(t->grad->node) + g).impl() : g.detach().impl();
  });
}

std::vector<Tensor> gradients(const Tensor& output, const std::vector<Tensor>& inputs, const Tensor& dy,
                              bool retain_graph) {
  std::unordered_map<TensorImpl*, Tensor> found;
  std::unordered_set<TensorImpl*> wanted;
  for (const auto& t : inputs) wanted.insert(t.impl().get());
  // The sink sees every tensor's complete gradient, so inputs that are not leaves work too.
  run_backward(output, dy, retain_graph, [&](TensorImpl* t, const Tensor& g) {
    if (wanted.count(t)) found.emplace(t, g);
  });
  std::vector<Tensor> out;
  for (const auto& t : inputs) {
    auto it = found.find(t.impl().get());
    out.push_back(it != found.end() ? it->second : Tensor::zeros(t.shape(), t.dtype()));
  }
  return out;
}

}  // namespace aether
