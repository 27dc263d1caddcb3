// Execution mode switches, and realize(): the one executor on the targets' device (backend/runtime.h),
// or the reference backend (AETHER_FUSE=0 on the CPU).
#include "aether/backend/backend.h"

#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <map>
#include <sstream>
#include <string>
#include <unordered_set>

#include "aether/core/error.h"
#include "backend/runtime.h"
#include "core/config.h"

namespace aether {

Backend& reference_backend();  // backend/cpu/reference.cpp: the oracle, never a library

namespace {
// AETHER_NUM_THREADS (core/config.h) sizes the process's one OpenMP pool (kernels, oneDNN, generated
// code) when libaether is loaded; default: OpenMP's (OMP_NUM_THREADS, else the cores). A malformed
// value leaves the pool alone and makes realize() throw (check_config). The bound (1024) is there
// because libgomp starts a team with each thread's start data alloca'd on the calling thread's stack:
// ~100,000 threads overflow an 8 MiB stack and crash inside GOMP_parallel (that was the SIGSEGV of
// AETHER_NUM_THREADS=99999). An OMP_NUM_THREADS above the bound is lowered to it, with a warning, for
// the same reason.
constexpr int kMaxThreads = 1024;
[[maybe_unused]] const bool g_threads_set = [] {
  const int n = config().num_threads;
  if (n > 0) {
    omp_set_num_threads(n);
  } else if (config().errors.find("AETHER_NUM_THREADS=") == std::string::npos &&
             omp_get_max_threads() > kMaxThreads) {
    std::fprintf(stderr,
                 "aether: using %d OpenMP threads, not %d (OMP_NUM_THREADS): more would crash libgomp\n",
                 kMaxThreads, omp_get_max_threads());
    omp_set_num_threads(kMaxThreads);
  }
  return true;
}();

struct OpStat {
  double seconds = 0, bytes = 0, flops = 0;
  int64_t calls = 0, elements = 0;
};
std::map<std::string, OpStat>& op_stats() {
  static std::map<std::string, OpStat> m;
  return m;
}
}  // namespace

void set_profiling(bool on) { config().profile = on; }
bool profiling_enabled() { return config().profile; }
void record_op_time(const char* op, double seconds, int64_t elements, double bytes, double flops) {
  auto& s = op_stats()[op];
  s.seconds += seconds;
  s.calls += 1;
  s.elements += elements;
  s.bytes += bytes;
  s.flops += flops;
}

std::string op_profile_report(double copy_gb_per_s, double fma_gflop_per_s, int64_t runs) {
  runs = std::max<int64_t>(runs, 1);
  std::vector<std::pair<std::string, OpStat>> v(op_stats().begin(), op_stats().end());
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second.seconds > b.second.seconds; });
  double total = 0;
  size_t width = 16;
  for (const auto& [n, s] : v) {
    total += s.seconds;
    width = std::max(width, n.size());
  }
  const bool limits = copy_gb_per_s > 0 && fma_gflop_per_s > 0;
  std::ostringstream os;
  char buf[512];
  std::snprintf(buf, sizeof buf, "%-*s %6s %10s %7s %8s %9s%s\n", int(width), "kernel / op", "calls",
                "time(ms)", "share", "GB/s", "GFLOP/s", limits ? "  of limit" : "");
  os << buf;
  for (const auto& [n, s] : v) {
    const double gbs = s.seconds > 0 ? s.bytes / s.seconds / 1e9 : 0;
    const double gfs = s.seconds > 0 ? s.flops / s.seconds / 1e9 : 0;
    std::string limit;
    // A kernel that moves less than kSmallBytes per call works in cache and is bound by its launch
    // (a few microseconds), not by memory bandwidth: a share of the copy bandwidth says nothing.
    constexpr double kSmallBytes = 64 * 1024;
    if (limits && s.flops == 0 && s.bytes > 0 && s.bytes / double(s.calls) < kSmallBytes)
      limit = "small (< 64 KiB a call)";
    else if (limits && s.flops > 0)
      limit = detail::cat(int(100 * gfs / fma_gflop_per_s + 0.5), "% FMA");
    else if (limits && s.bytes > 0)
      limit = detail::cat(int(100 * gbs / copy_gb_per_s + 0.5), "% copy");
    std::snprintf(buf, sizeof buf, "%-*s %6lld %10.3f %6.1f%% %8.1f %9.1f  %s\n", int(width), n.c_str(),
                  static_cast<long long>(s.calls / runs), 1e3 * s.seconds / double(runs),
                  total > 0 ? 100 * s.seconds / total : 0, gbs, gfs, limit.c_str());
    os << buf;
  }
  return os.str();
}
void reset_op_profile() { op_stats().clear(); }

void set_fusion(bool enabled) { config().fuse = enabled; }
bool fusion_enabled() { return config().fuse; }
void set_library_impl(LibraryImpl impl) { config().onednn = impl == LibraryImpl::onednn; }
LibraryImpl library_impl() { return config().onednn ? LibraryImpl::onednn : LibraryImpl::naive; }

// conv_weight_reorders() and cpu_isa(): the CPU's, in backend/cpu/queries.cpp.

int debug_level() { return config().debug; }

std::vector<Node*> unrealized_in_order(const std::vector<NodePtr>& targets) {
  // Iterative post-order DFS over unrealized nodes: sources before their consumers.
  std::vector<Node*> order;
  std::unordered_set<Node*> seen;
  std::vector<std::pair<Node*, size_t>> stack;
  for (const auto& t : targets) {
    if (!t || t->realized() || seen.count(t.get())) continue;
    seen.insert(t.get());
    stack.push_back({t.get(), 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->srcs.size()) {
        Node* s = n->srcs[i++].get();
        if (!s->realized() && seen.insert(s).second) stack.push_back({s, 0});
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
  }
  return order;
}

void realize_nodes(const std::vector<NodePtr>& targets) {
  check_config("realize");
  const std::vector<Node*> order = unrealized_in_order(targets);
  if (order.empty()) return;
  const Device dev = order.front()->device;
  for (Node* n : order)
    AETHER_CHECK(n->device == dev, "realize", "graph mixes devices: node ", n->id, " (", op_name(n->op),
                 ", shape ", to_string(n->shape), ") is on ", n->device.str(), ", node ", order.front()->id,
                 " (", op_name(order.front()->op), ") on ", dev.str(),
                 "; move tensors with Tensor::to(device) first");
  // AETHER_FUSE=0 on the CPU: the oracle, one primitive per kernel, never a library.
  if (dev.type == DeviceType::cpu && !config().fuse) return reference_backend().execute(order);
  // Keep the targets alive; intermediate nodes die (and free their buffers) as soon as their last
  // consumer has run and dropped them, unless a tensor still holds them.
  std::vector<NodePtr> pending;
  for (const auto& t : targets)
    if (t && !t->realized()) pending.push_back(t);
  execute(runtime_for(dev), pending);
}

}  // namespace aether
