// src/schedule/schedule.h - (internal) the fusing scheduler's analysis: which unrealized nodes form which
// kernel.
//
// schedule(outputs) groups every unrealized node reachable from `outputs` into kernels, like
// tinygrad's scheduler. It only analyses the lazy graph: nothing is computed, generated or changed.
// It runs a list of small passes (src/schedule/pass_*.cpp), checks the final grouping (every node in
// exactly one group, groups form a DAG, each group is a contiguous sub-DAG; after every pass when
// AETHER_DEBUG >= 1) and, when AETHER_DEBUG >= 4, prints the groups after each pass to stderr.
//
// Fusion rules (issue "Fusion"):
//  1. elementwise chains fuse; movement ops and broadcasts are index arithmetic inside a kernel
//     (never kernels of their own); constants are inlined;
//  2. a reduce fuses with the elementwise ops that feed it and with the elementwise ops on its small
//     result (the epilogue), and writes its small output once;
//  3. sibling reduces (same input shape and axes) merge into one multi-output kernel when one member
//     already loads every big buffer (buffer + view) the others load;
//  4. groups are built during a reverse topological walk, so they are contiguous sub-DAGs;
//  5. elementwise ops reading a reduce result broadcast back over the big shape (x - mean) fuse into
//     their consumer; the reduce result is a small input of that kernel. More generally, an
//     elementwise or movement node read by several kernels is recomputed by each (inlined), not
//     stored, unless it is a requested output or a library op's input;
//  6. a reduce does not fuse with an elementwise output of another shape, nor with a reduce whose
//     result it depends on.
//  7. an elementwise kernel over a reduce kernel's small output that loads no big buffer (e.g.
//     the final scaling of a gradient's sum) becomes that reduce kernel's epilogue.
// Library ops (matmul, conv, pools) are library calls of their own and split fusion.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "aether/graph/node.h"
#include "aether/graph/tensor.h"
#include "graph/library_caps.h"

namespace aether {

enum class KernelKind : uint8_t {
  Elementwise,  // a generated kernel over its output shape
  Reduce,       // a generated kernel with one or more reduces over `shape` (multi-output when merged)
  Library,      // one library call (matmul, conv, pool)
  ViewOnly,     // movement ops over a stored value: no kernel, just a view
};
const char* kernel_kind_name(KernelKind k);

// One step of a library call's epilogue, applied to the call's result y in order.
struct EpilogueOp {
  enum class Kind : uint8_t {
    Add,   // y + operand
    Sub,   // y - operand
    Mul,   // y * operand
    Relu,  // max(y, 0) (also where(y <= 0, 0, y))
  };
  Kind kind = Kind::Relu;
  // The value the step reads, as the elementwise op reads it (a view of y's shape): a per-channel
  // vector broadcast over the other dims, or (Add only) a dense value of y's shape, a residual.
  NodePtr operand;  // null for Relu
};

// One distinct load of a kernel: a buffer seen through one view.
struct KernelInput {
  NodePtr base;       // the realized node or the stored output of another kernel
  int producer = -1;  // index of the kernel that stores `base` in Schedule::kernels; -1: realized
  std::string view;   // the view the kernel reads `base` through (after the movement ops)
  bool big = false;   // base is as large as the kernel's iteration space
  int64_t bytes = 0;  // bytes read (the view's elements, at most the buffer's)
};

struct Kernel {
  KernelKind kind = KernelKind::Elementwise;
  std::vector<NodePtr> nodes;    // members, in topological order
  std::vector<NodePtr> outputs;  // values stored (ViewOnly: the views it provides, nothing stored)
  std::vector<NodePtr> inlined;  // constants and recomputed nodes it computes in place (topological)
  std::vector<KernelInput> inputs;
  Shape shape;                   // iteration shape (Reduce: the reduce input shape)
  std::vector<int> reduce_axes;  // Reduce only
  int64_t bytes_read = 0, bytes_written = 0;
  // Library only: the elementwise chain on the call's result that the library call absorbs
  // (schedule pass library_epilogues), in order; the last step's node is outputs[0].
  std::vector<EpilogueOp> epilogue;
  bool generated() const { return kind == KernelKind::Elementwise || kind == KernelKind::Reduce; }
};

struct Schedule {
  std::vector<Kernel> kernels;  // in an order that runs producers first
  // Nodes in no kernel of their own, computed wherever read: constants (and views of them), and
  // elementwise/movement nodes read by several kernels (recomputed rather than stored).
  std::vector<NodePtr> inlined;
  int kernel_count = 0;  // generated kernels (Elementwise + Reduce)
  int library_calls = 0;
  // Reads and writes of buffers as large as the largest iteration space in the schedule.
  int big_buffer_passes = 0;
  int64_t bytes_moved = 0;  // all kernels' bytes read + written
  // The least bytes any schedule of these outputs must move: schedule_bytes_min() (stats.cpp).
  int64_t bytes_min = 0;
  nlohmann::json to_json() const;
};

struct ScheduleOptions {
  // Nodes treated as realized buffers even if they are not (to schedule a graph's shape only).
  std::vector<NodePtr> assume_realized;
  // What the device's library calls absorb; unset: library_caps() of the outputs' device.
  std::optional<LibraryCaps> library;
};

Schedule schedule(const std::vector<NodePtr>& outputs, const ScheduleOptions& options = {});
Schedule schedule(const std::vector<Tensor>& outputs, const ScheduleOptions& options = {});

// The least bytes any schedule of `outputs` must move, whatever its fusion: every distinct leaf
// buffer (realized, or in options.assume_realized) reachable from the outputs read once (the leaf's
// elements, at most its buffer's; views of one buffer count once, at the largest), plus every
// requested output written once. An output that is a chain of movement ops over a value v needs
// only v stored (the output is then a view of it): it counts min(its elements, v's), v's writes
// shared by all outputs over v, and nothing when v is a leaf. Reads of only part of a leaf (a
// slice) are not credited, so a graph that slices a leaf may schedule below this figure.
int64_t schedule_bytes_min(const std::vector<NodePtr>& outputs, const ScheduleOptions& options = {});

}  // namespace aether
