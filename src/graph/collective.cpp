// src/graph/collective.cpp - the registry of collective groups and the AllReduce primitive
// (aether/graph/collective.h).
#include "aether/graph/collective.h"

#include <map>
#include <mutex>

#include "aether/core/error.h"
#include "aether/graph/primitives.h"

namespace aether {
namespace {

struct Registry {
  std::mutex mu;
  std::map<int64_t, std::shared_ptr<const AllReduceFn>> groups;
  int64_t next = 0;
};
Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: a rank may exit while a node runs
  return *r;
}

}  // namespace

int64_t register_collective(AllReduceFn fn) {
  AETHER_CHECK(fn != nullptr, "register_collective", "the reduction is empty");
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  r.groups.emplace(r.next, std::make_shared<const AllReduceFn>(std::move(fn)));
  return r.next++;
}

void unregister_collective(int64_t group) {
  Registry& r = registry();
  std::lock_guard<std::mutex> lk(r.mu);
  r.groups.erase(group);
}

void run_all_reduce(int64_t group, void* data, size_t n, DType dtype) {
  std::shared_ptr<const AllReduceFn> fn;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lk(r.mu);
    const auto it = r.groups.find(group);
    AETHER_CHECK(it != r.groups.end(), "all_reduce", "collective group ", group,
                 " is not registered (its job ended, or it was never created)");
    fn = it->second;
  }
  (*fn)(data, n, dtype);  // outside the lock: a collective waits for the other ranks
}

Tensor all_reduce(const Tensor& x, int64_t group) {
  AETHER_CHECK(x.defined(), "all_reduce", "x is empty");
  AETHER_CHECK_DTYPE(is_float(x.dtype()), "all_reduce", "expected a float tensor, got ", x.str());
  AETHER_CHECK(group >= 0, "all_reduce", "group ", group, " is not a registered group id");
  return prim::apply(Op::AllReduce, {x}, CollectiveArg{group}, x.dtype(), x.shape());
}

}  // namespace aether
