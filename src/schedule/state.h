// schedule/state.h - the scheduler's working state, shared by its passes (internal header).
//
// The passes (pass_*.cpp) run in order over one State: collect indexes the graph, group builds the
// fusion groups, view_only, merge_siblings, merge_epilogues and library_epilogues refine them, emit
// turns them into a Schedule. verify() checks the grouping between passes; dump() prints it when AETHER_DEBUG
// >= 4.
#pragma once

#include <string>
#include <vector>

#include "schedule/schedule.h"

namespace aether::sched {

// Which part of a group a member is on, seen from the group's reduce.
enum class Side : uint8_t {
  Post,    // downstream of the reduce (the epilogue), or any member of an elementwise group
  Reduce,  // the reduce itself
  Pre,     // upstream of the reduce: the elementwise ops that feed it
};

struct SNode {
  NodePtr node;
  std::vector<int> srcs;       // indices into State::nodes (empty for leaves)
  std::vector<int> consumers;  // indices of the nodes reading this one (within the scheduled graph)
  bool leaf = false;           // realized (or assumed realized): a buffer read by kernels
  // Computed wherever it is read, in no group of its own: constants (and views of them), and
  // elementwise/movement nodes that several groups read (recomputed instead of stored, rule 5).
  bool inlined = false;
  bool output = false;      // requested by the caller: its value is stored
  bool dep_reduce = false;  // depends on a reduce through unstored compute nodes
  int topo = -1;            // position in State::topo (-1 for leaves)
  int group = -1;
  Side side = Side::Post;
};

// A Library group's epilogue step (Kernel::epilogue) in node indices: the op and the node it reads.
struct EpilogueStep {
  EpilogueOp::Kind kind = EpilogueOp::Kind::Relu;
  int operand = -1;  // -1 for Relu
};

struct Group {
  KernelKind kind = KernelKind::Elementwise;
  std::vector<int> members;  // node indices
  Shape full;                // iteration shape (Reduce: the reduce input shape)
  int64_t out_numel = 0;     // elements of the group's (epilogue) output shape
  std::vector<int> axes;     // reduce axes
  bool has_reduce = false;
  bool alive = true;                   // false once merged into another group
  std::vector<EpilogueStep> epilogue;  // Library only (pass library_epilogues)
};

struct State {
  std::vector<SNode> nodes;
  std::vector<int> topo;  // non-leaf nodes, sources before consumers
  std::vector<Group> groups;
  LibraryCaps library;  // what the device's library calls absorb (ScheduleOptions::library)
};

// One distinct load of a group: a leaf or stored node seen through a chain of movement ops.
struct Load {
  int base = -1;
  std::string key;              // buffer identity + composed view: equal keys read the same elements
  std::string view;             // the composed view alone
  int64_t elements = 0;         // elements read: the view's, at most the buffer's
  int64_t buffer_elements = 0;  // size of the buffer read (decides whether it is "big")
};

// ---- helpers (state.cpp) ------------------------------------------------------------------------
// Whether a reshape from `src` to `out` merges dims (a boundary of src is not one of out): its
// reader's index into src then needs division and remainder, which kernels do not compute, so a
// computed value read through such a reshape is stored first (e.g. max-pool windows
// (N,OH,KH,OW,KW,C) back to (N,H,W,C)). Splits are plain index arithmetic.
bool reshape_merges_dims(const Shape& src, const Shape& out);
const std::vector<int>& reduce_axes_of(const Node& n);
// Whether a library call reading a view made by `op` needs it copied to a dense buffer first, always:
// a pad (masked) or a flip (negative strides), e.g. the gradient of a max-pool over an odd size,
// padded back to the conv output it came from. Such a view gets a kernel that writes the copy (at
// the copy bandwidth, into the step's memory plan), or computes the value there directly where its
// source is read nowhere else; other views (a reshape, a slice, a permute) are often dense, and are
// passed as views (the library call copies what is not).
bool library_copies_view(Op op);
// The distinct loads of group g (none for ViewOnly groups), seen through views and recomputed
// (inlined) nodes; `inlined`, when given, receives the inlined nodes group g computes or reads.
std::vector<Load> group_loads(const State& s, int g, std::vector<int>* inlined = nullptr);
// The groups reading node i, directly or through inlined nodes; for all nodes at once (one sweep).
std::vector<int> reader_groups(const State& s, int i);
// Whether one of `groups` (indices into s.groups) is a library call.
bool any_library(const State& s, const std::vector<int>& groups);
std::vector<std::vector<int>> all_reader_groups(const State& s);
// Group-level edges: for each alive group, the alive groups reading one of its members.
std::vector<std::vector<int>> group_edges(const State& s);
std::string describe(const State& s, int i);  // "#12 Add (256, 256)"

// ---- passes, in the order schedule() runs them ----------------------------------------------------
void pass_collect(State& s, const std::vector<NodePtr>& outputs, const ScheduleOptions& options);
void pass_group(State& s);
void pass_view_only(State& s);
void pass_merge_siblings(State& s);
void pass_merge_epilogues(State& s);
// A conv absorbs the elementwise chain on its output that the device's library runs with it
// (LibraryCaps), recorded as the group's epilogue.
void pass_library_epilogues(State& s);
Schedule pass_emit(const State& s);

// Throws aether::Error naming the pass after which the grouping is broken.
void verify(const State& s, const char* after);
// Whether group `to` is reachable in the group DAG `edges` from any group in `starts`.
bool reachable(const std::vector<std::vector<int>>& edges, std::vector<int> starts, int to);
// Prints the groups to stderr when AETHER_DEBUG >= 4.
void dump(const State& s, const char* after);

}  // namespace aether::sched
