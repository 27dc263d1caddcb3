// aether/backend/backend.h - what a backend is: a small table of functions, like ggml's.
//
// realize() hands a backend a list of unrealized nodes in topological order (each node's sources
// are realized or earlier in the list); the backend sets every node's value. The reference CPU
// backend runs one primitive per kernel; faster executors are checked against it.
#pragma once

#include <string>
#include <vector>

#include "aether/graph/node.h"
#include "aether/graph/realize.h"

namespace aether {

class Backend {
 public:
  virtual ~Backend() = default;
  virtual const char* name() const = 0;
  virtual Device device() const = 0;
  // Computes every node of `nodes` (topologically ordered) and sets its value.
  virtual void execute(const std::vector<Node*>& nodes) = 0;
};

// Execution mode: the fused executor (the default: scheduler + generated kernels, see
// src/schedule/ and src/codegen/) or the reference backend, one primitive at a time.
// AETHER_FUSE=0 in the environment selects the reference at start-up; set_fusion() at run time.
void set_fusion(bool enabled);
bool fusion_enabled();

// Which implementation the fused executor's library ops (matmul, conv) use on the CPU: oneDNN
// (default for float32) or the naive loops kept as their test oracle (always used for float64 and
// integer types). The reference backend (fusion off) always runs the naive loops, never oneDNN.
enum class LibraryImpl { onednn, naive };
void set_library_impl(LibraryImpl impl);
LibraryImpl library_impl();

// The CPU's instruction sets in use, under AETHER_CPU_ISA's cap (native, avx2 or avx512): the
// vector extensions generated kernels are compiled for (the compiler's macros, "__AVX2__ __AVX__
// __FMA__"; "" when no compiler works) and the ISA oneDNN dispatches its kernels to ("avx2",
// "avx512_core_bf16", ...).
// sixteen_bit: how conv and matmul run on bfloat16 / float16 operands here (mixed precision):
// natively where oneDNN has 16-bit kernels for this CPU (bfloat16 with avx512_core_bf16 or AMX), else
// in float32 on widened copies of the 16-bit operands, rounded back.
struct CpuIsa {
  std::string cap, kernels, onednn, sixteen_bit;
};
CpuIsa cpu_isa();

// oneDNN convolution weights stay row-major (OHWI) in every Buffer; each primitive reorders them
// into its blocked layout once per weights buffer (cached), and the weight gradient back to OHWI.
// conv_weight_reorders(): weights reordered into a primitive's layout and weight gradients out of
// one, so far (process-wide).
int64_t conv_weight_reorders();

// Per-op time accounting (AETHER_PROFILE=1 or set_profiling(true)): every executed kernel (a
// generated kernel, or a node on the reference backend: library calls, views, fallbacks) adds its wall
// time, output size, the bytes it read and wrote, and its FLOPs (matmul, conv) to its line.
// op_profile_report() prints the table sorted by time: calls, ms, share, GB/s and GFLOP/s, and with
// measured machine limits (copy GB/s, FMA GFLOP/s) the fraction of the limit that bounds each line
// ("small" for a memory-bound line under 64 KiB a call: cache-resident and launch-bound);
// with `runs` > 1 the profile covered that many runs of one workload, and calls and times are per run.
void set_profiling(bool on);
bool profiling_enabled();
void record_op_time(const char* op, double seconds, int64_t elements, double bytes = 0, double flops = 0);
std::string op_profile_report(double copy_gb_per_s = 0, double fma_gflop_per_s = 0, int64_t runs = 1);
void reset_op_profile();

// The CPU fused executor's plan cache: a graph with the structure of one run before (a training
// step, an evaluation batch) reuses that run's schedule, lowered kernels and liveness, re-bound to
// its nodes and parameters (backend/graph_signature.h). AETHER_PLAN_CACHE=0 turns it off.
struct PlanCacheStats {
  int64_t hits = 0, misses = 0, entries = 0;
};
PlanCacheStats plan_cache_stats();
void plan_cache_clear();

// AETHER_DEBUG's level (0 when unset), read once: what the executors print as they run.
int debug_level();

// The unrealized nodes the targets need, sources before their consumers.
std::vector<Node*> unrealized_in_order(const std::vector<NodePtr>& targets);

// realize_nodes(nodes): aether/graph/realize.h (defined with the executor, src/backend/backend.cpp).

}  // namespace aether
