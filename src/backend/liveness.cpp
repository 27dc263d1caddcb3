// Buffer liveness over a schedule (see backend/liveness.h): the last kernel referring to each node,
// and a kernel order that keeps fewer bytes live.
#include "backend/liveness.h"

#include <algorithm>
#include <numeric>
#include <unordered_map>
#include <unordered_set>

namespace aether {

Liveness liveness(const Schedule& s, const std::vector<NodePtr>& targets) {
  std::unordered_map<const Node*, int> last;  // node -> last kernel referring to it (-1: none)
  std::vector<const Node*> order;             // first reference first: deterministic lists
  auto see = [&](const NodePtr& n, int i) {
    if (!n) return;
    auto [it, fresh] = last.try_emplace(n.get(), i);
    if (fresh)
      order.push_back(n.get());
    else
      it->second = std::max(it->second, i);
  };
  std::unordered_set<const Node*> stored;  // values with a buffer of their own once computed
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    const Kernel& kernel = s.kernels[k];
    const int i = int(k);
    for (const NodePtr& n : kernel.nodes) see(n, i);
    for (const NodePtr& n : kernel.outputs) {
      see(n, i);
      if (kernel.kind != KernelKind::ViewOnly) stored.insert(n.get());
    }
    for (const NodePtr& n : kernel.inlined) see(n, i);
    for (const KernelInput& in : kernel.inputs) {
      see(in.base, i);
      if (in.base && in.base->realized()) stored.insert(in.base.get());
    }
  }
  for (const NodePtr& n : s.inlined) see(n, -1);

  std::unordered_set<const Node*> keep;
  for (const NodePtr& t : targets) keep.insert(t.get());
  Liveness out;
  out.release_after.resize(s.kernels.size());
  out.stored_release_after.resize(s.kernels.size());
  for (const Node* n : order) {
    if (keep.count(n)) continue;
    const int i = last.at(n);
    if (i < 0) {
      out.unused.push_back(n);
      continue;
    }
    out.release_after[size_t(i)].push_back(n);
    if (stored.count(n)) out.stored_release_after[size_t(i)].push_back(n);
  }
  return out;
}

namespace {
// What kernel j needs: the kernels it depends on and the stored values (outputs of kernels that
// are not views) it reads, found by walking the graph from its members and inlined nodes through
// nodes computed in place (inlined) and through views (ViewOnly kernels: their base is read).
struct Deps {
  std::vector<std::vector<size_t>> preds;
  std::vector<std::vector<const Node*>> reads;
  bool ok = true;  // every dependence points to an earlier kernel
};
Deps dependencies(const Schedule& s) {
  const size_t nk = s.kernels.size();
  std::unordered_map<const Node*, size_t> kernel_of;
  for (size_t i = 0; i < nk; ++i)
    for (const NodePtr& n : s.kernels[i].nodes) kernel_of.emplace(n.get(), i);
  Deps d;
  d.preds.resize(nk);
  d.reads.resize(nk);
  std::vector<const Node*> stack;
  std::unordered_set<const Node*> seen;
  for (size_t j = 0; j < nk; ++j) {
    const Kernel& k = s.kernels[j];
    stack.clear();
    seen.clear();
    std::unordered_set<size_t> preds;
    for (const NodePtr& n : k.nodes) stack.push_back(n.get());
    for (const NodePtr& n : k.inlined) stack.push_back(n.get());
    for (const KernelInput& in : k.inputs) {
      if (in.producer >= 0) preds.insert(size_t(in.producer));
      if (in.base) stack.push_back(in.base.get());
    }
    while (!stack.empty()) {
      const Node* n = stack.back();
      stack.pop_back();
      if (!seen.insert(n).second) continue;
      auto it = kernel_of.find(n);
      if (it != kernel_of.end() && it->second != j) {
        preds.insert(it->second);
        if (s.kernels[it->second].kind != KernelKind::ViewOnly) {
          d.reads[j].push_back(n);
          continue;
        }
      } else if (it == kernel_of.end() && n->realized()) {
        continue;  // a value computed before this schedule
      }
      for (const NodePtr& src : n->srcs) stack.push_back(src.get());
    }
    for (size_t p : preds) d.ok = d.ok && p < j;
    d.preds[j].assign(preds.begin(), preds.end());
    std::sort(d.preds[j].begin(), d.preds[j].end());
  }
  return d;
}
int64_t node_bytes(const Node& n) { return numel(n.shape) * int64_t(dtype_size(n.dtype)); }
}  // namespace

std::vector<size_t> memory_order(const Schedule& s, const std::vector<NodePtr>& targets) {
  const size_t nk = s.kernels.size();
  std::vector<size_t> identity(nk);
  std::iota(identity.begin(), identity.end(), size_t(0));
  const Deps d = dependencies(s);
  if (!d.ok) return identity;
  std::unordered_set<const Node*> keep;
  for (const NodePtr& t : targets) keep.insert(t.get());
  std::unordered_map<const Node*, int> readers_left;  // stored value -> kernels still to read it
  for (const auto& reads : d.reads)
    for (const Node* n : reads) ++readers_left[n];
  std::vector<int64_t> stores(nk, 0);  // bytes each kernel stores
  for (size_t j = 0; j < nk; ++j)
    if (s.kernels[j].kind != KernelKind::ViewOnly)
      for (const NodePtr& o : s.kernels[j].outputs) stores[j] += node_bytes(*o);
  std::vector<std::vector<size_t>> succs(nk);
  std::vector<size_t> waiting(nk, 0);
  for (size_t j = 0; j < nk; ++j) {
    waiting[j] = d.preds[j].size();
    for (size_t p : d.preds[j]) succs[p].push_back(j);
  }
  std::vector<size_t> ready, order;
  for (size_t j = 0; j < nk; ++j)
    if (waiting[j] == 0) ready.push_back(j);
  while (!ready.empty()) {
    size_t best = 0;
    int64_t best_score = 0;
    for (size_t r = 0; r < ready.size(); ++r) {
      const size_t j = ready[r];
      int64_t score = -stores[j];
      for (const Node* n : d.reads[j])
        if (readers_left[n] == 1 && !keep.count(n)) score += node_bytes(*n);
      if (r == 0 || score > best_score || (score == best_score && j < ready[best])) {
        best = r;
        best_score = score;
      }
    }
    const size_t j = ready[best];
    ready.erase(ready.begin() + std::ptrdiff_t(best));
    order.push_back(j);
    for (const Node* n : d.reads[j]) --readers_left[n];
    for (size_t c : succs[j])
      if (--waiting[c] == 0) ready.push_back(c);
  }
  return order.size() == nk ? order : identity;
}

void reorder_kernels(Schedule& s, const std::vector<size_t>& order) {
  std::vector<int> new_index(s.kernels.size(), -1);
  for (size_t i = 0; i < order.size(); ++i) new_index[order[i]] = int(i);
  std::vector<Kernel> kernels;
  kernels.reserve(order.size());
  for (size_t old : order) kernels.push_back(std::move(s.kernels[old]));
  for (Kernel& k : kernels)
    for (KernelInput& in : k.inputs)
      if (in.producer >= 0) in.producer = new_index[size_t(in.producer)];
  s.kernels = std::move(kernels);
}

}  // namespace aether
