// Fusing scheduler analysis (issue "Fusion"): kernel counts for the issue's spec graphs, like
// tinygrad's check_schedule, plus big-buffer passes, bytes, views, library calls, and the verifier.
// x, y, z are (256, 256) realized buffers; a, b are (1, 256) realized rows broadcast over them.
// Scheduling only analyses the graph: nothing here computes the scheduled values.
#include "schedule/schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <map>
#include <set>
#include <string>

#include "aether/aether.h"
#include "aether/graph/autograd.h"
#include "aether/ops/nn.h"
#include "core/config.h"
#include "schedule/state.h"

using namespace aether;

namespace {
struct Inputs {
  Tensor x = Tensor::rand({256, 256}).realize();
  Tensor y = Tensor::rand({256, 256}).realize();
  Tensor z = Tensor::rand({256, 256}).realize();
  Tensor a = Tensor::rand({1, 256}).realize();
  Tensor b = Tensor::rand({1, 256}).realize();
};
const Inputs& in() {
  static const Inputs v;
  return v;
}
// Kernel count of one schedule of `outs`; also checks that scheduling computed nothing.
int kernels(const std::vector<Tensor>& outs) {
  const Schedule s = schedule(outs);
  for (const Tensor& t : outs) EXPECT_FALSE(t.is_realized());
  return s.kernel_count;
}
}  // namespace

// ---- one kernel ----------------------------------------------------------------------------------
TEST(Schedule, SiblingReducesOverOneBufferMerge) {
  const auto& [x, y, z, a, b] = in();
  // Both read x through the same view; a and b are small: one multi-output reduce kernel.
  EXPECT_EQ(kernels({(x + a).sum(), (x + b).sum()}), 1);
}

TEST(Schedule, SiblingLoadingASubsetMerges) {
  const auto& [x, y, z, a, b] = in();
  // The second reads only x, which the first loads anyway: merging adds no big load.
  EXPECT_EQ(kernels({(x + y + a).sum(), (x + b).sum()}), 1);
  // Same big buffers {x, y} in both.
  EXPECT_EQ(kernels({(x + y + a).sum(), (x + y + b).sum()}), 1);
  // {x} and {y} are both subsets of the first's {x, y}.
  EXPECT_EQ(kernels({(x + y + a).sum(), (x + b).sum(), (y + b).sum()}), 1);
}

TEST(Schedule, EpilogueOnSmallOutputsStaysInTheReduceKernel) {
  const auto& [x, y, z, a, b] = in();
  // *2 and *3 act on the scalar results: epilogues of the same (merged) kernel.
  EXPECT_EQ(kernels({(x + y + a).sum() * 2.0, (x + b).sum() * 3.0}), 1);
  // The same through a transposed view of x, read the same way by both.
  EXPECT_EQ(kernels({(x.t() + y + a).sum() * 2.0, (x.t() + b).sum() * 3.0}), 1);
}

TEST(Schedule, EpilogueOutputReadingAReduceOutputJoinsIt) {
  const auto& [x, y, z, a, b] = in();
  // s and s * 2 are both requested: s * 2 reads only the scalar s, so it is s's kernel's epilogue.
  const Tensor s = (x + a).sum();
  EXPECT_EQ(kernels({s, s * 2.0}), 1);
  // Not when the elementwise output is big: x * s reads x and has another shape than s (rule 6).
  EXPECT_EQ(kernels({s, x * s}), 2);
}

// ---- two kernels ---------------------------------------------------------------------------------
TEST(Schedule, SiblingsNeedingAnotherBigLoadStaySeparate) {
  const auto& [x, y, z, a, b] = in();
  // Merging would load {x, y, z}: more than either kernel loads alone.
  EXPECT_EQ(kernels({(x + y).sum(), (x + z).sum()}), 2);
  // Ambiguous: (x+a) may join either; the other stays alone. 2 kernels either way.
  EXPECT_EQ(kernels({(x + y).sum(), (x + z).sum(), (x + a).sum()}), 2);
}

TEST(Schedule, DifferentViewsOrAxesDoNotMerge) {
  const auto& [x, y, z, a, b] = in();
  // x and x.T are the same buffer through different views.
  EXPECT_EQ(kernels({(x + a).sum(), (x.t() + b).sum()}), 2);
  // Different reduce axes.
  EXPECT_EQ(kernels({(x + a).sum({0}), (x + b).sum({1})}), 2);
  EXPECT_EQ(kernels({(x + a).sum({0}), (x + b).sum()}), 2);
  // Different input shapes: (256, 256) vs (1, 256).
  EXPECT_EQ(kernels({x.sum({0}, true) + a, (a + b).sum()}), 2);
}

TEST(Schedule, ReduceDoesNotFuseWithAnOutputOfAnotherShape) {
  const auto& [x, y, z, a, b] = in();
  // Rule 6: the scalar reduce and the (256, 256) elementwise output are two kernels.
  EXPECT_EQ(kernels({x.sum(), x + y}), 2);
}

TEST(Schedule, DependentReducesDoNotMerge) {
  const auto& [x, y, z, a, b] = in();
  // The diamond: the second reduce needs the first's result.
  const Tensor s = (x + a).sum();
  EXPECT_EQ(kernels({s, (x + s).sum()}), 2);
}

// ---- three kernels -------------------------------------------------------------------------------
TEST(Schedule, CrossDependentSiblingsMergeOnlyOnce) {
  const auto& [x, y, z, a, b] = in();
  // s1 reads x, s2 reads y; (y+s1).sum() reads y and needs s1, (x+s2).sum() reads x and needs s2.
  // Merging s1 with (x+s2).sum() is fine; then s2 with (y+s1).sum() would form a cycle: 3 kernels.
  const Tensor s1 = (x + a).sum(), s2 = (y + b).sum();
  EXPECT_EQ(kernels({(y + s1).sum(), (x + s2).sum()}), 3);
}

// ---- other rules -----------------------------------------------------------------------------------
TEST(Schedule, ElementwiseChainIsOneKernelWithInlinedConstants) {
  const auto& [x, y, z, a, b] = in();
  const Tensor out = ((x + a) * 2.0 + y).exp() - 1.0;
  const Schedule s = schedule({out});
  EXPECT_EQ(s.kernel_count, 1);
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].kind, KernelKind::Elementwise);
  EXPECT_EQ(s.kernels[0].shape, (Shape{256, 256}));
  EXPECT_EQ(s.kernels[0].inputs.size(), 3u);  // x, y, a (broadcast): the constants are inlined
  EXPECT_FALSE(s.inlined.empty());
  // Reads x and y (256*256 floats each) and a (256 floats), writes out (256*256 floats).
  EXPECT_EQ(s.bytes_moved, 3 * 65536 * 4 + 256 * 4);
  EXPECT_EQ(s.big_buffer_passes, 3);
}

TEST(Schedule, BroadcastReduceResultFusesIntoItsConsumer) {
  const auto& [x, y, z, a, b] = in();
  // Rule 5: x - mean is not materialised; the variance kernel reads x and the small mean.
  const Tensor d = x - x.mean({0}, true);
  const Schedule s = schedule({(d * d).sum({0})});
  EXPECT_EQ(s.kernel_count, 2);
  EXPECT_EQ(s.big_buffer_passes, 2);  // x read once by each reduce, nothing big written
  // Adding x - mean itself as an output adds one elementwise kernel and one big write.
  const Schedule s2 = schedule({(d * d).sum({0}), d});
  EXPECT_EQ(s2.kernel_count, 3);
  EXPECT_EQ(s2.big_buffer_passes, 4);
}

TEST(Schedule, SharedElementwiseIsRecomputedNotStored) {
  const auto& [x, y, z, a, b] = in();
  // e is read by two reduce kernels with different axes: each recomputes it from x (one big read
  // each) instead of a third kernel writing e and both reading it back.
  const Tensor e = (x + a).exp();
  const Schedule s = schedule({e.sum({0}), e.sum({1})});
  EXPECT_EQ(s.kernel_count, 2);
  EXPECT_EQ(s.big_buffer_passes, 2);
  for (const Kernel& k : s.kernels) {
    EXPECT_TRUE(
        std::any_of(k.inlined.begin(), k.inlined.end(), [&](const NodePtr& n) { return n == e.node(); }));
  }
  // Same axes: e.sum() loads {x}, (e * y).sum() loads {x, y}: one kernel.
  EXPECT_EQ(kernels({e.sum(), (e * y).sum()}), 1);
  // A requested e (256, 256) and e.sum() () differ in shape (rule 6): two kernels.
  EXPECT_EQ(kernels({e, e.sum()}), 2);
}

TEST(Schedule, RandomSourcesFuse) {
  const auto& [x, y, z, a, b] = in();
  // A dropout-like mask is computed inside the reduce kernel: nothing random is stored.
  const Tensor mask = (Tensor::rand({256, 256}) < 0.5).cast(DType::float32);
  const Schedule s = schedule({(x * mask).sum()});
  EXPECT_EQ(s.kernel_count, 1);
  EXPECT_EQ(s.big_buffer_passes, 1);
}

TEST(Schedule, LibraryInputsAreStored) {
  const auto& [x, y, z, a, b] = in();
  // x + a feeds a matmul (must be a buffer) and a reduce: stored once by one kernel, which the
  // matmul and the reduce kernel read; the reduce is not merged into the producer (another shape).
  const Tensor e = x + a;
  const Schedule s = schedule({e.matmul(y), e.sum()});
  EXPECT_EQ(s.library_calls, 1);
  EXPECT_EQ(s.kernel_count, 2);
  int stored_e = 0;
  for (const Kernel& k : s.kernels)
    for (const NodePtr& o : k.outputs) stored_e += o == e.node();
  EXPECT_EQ(stored_e, 1);
}

// A library call reads a dense buffer. A pad (masked) or flip (negative strides) of a value is never
// one, so it is written by a kernel: by the kernel computing that value where nothing else reads it
// (one kernel, the value itself never stored unpadded), else by a copy kernel; not by a copy inside
// the library call. A requested pad alone stays a view.
TEST(Schedule, MaskedViewsALibraryReadsAreWrittenByAKernel) {
  const auto& [x, y, z, a, b] = in();
  auto library_input_kinds = [](const Schedule& s) {
    std::vector<KernelKind> kinds;  // the kind of the kernel producing each library call's inputs
    for (const Kernel& k : s.kernels)
      if (k.kind == KernelKind::Library)
        for (const KernelInput& i : k.inputs)
          if (i.producer >= 0) kinds.push_back(s.kernels[size_t(i.producer)].kind);
    return kinds;
  };
  // (x + a) padded by a row, read by a matmul: one kernel writes the padded sum.
  const Tensor e = x + a;
  const Tensor pe = e.pad({{0, 1}, {0, 0}});
  const Schedule s1 = schedule({pe.matmul(z.pad({{0, 0}, {0, 1}}))});
  EXPECT_EQ(s1.library_calls, 1);
  EXPECT_EQ(s1.kernel_count, 2);  // the padded sum, and z's padded copy
  for (const Kernel& k : s1.kernels)
    for (const NodePtr& o : k.outputs) EXPECT_NE(o.get(), e.node().get()) << "x + a stored before its pad";
  EXPECT_EQ(library_input_kinds(s1),
            (std::vector<KernelKind>{KernelKind::Elementwise, KernelKind::Elementwise}));
  // A flip of a realized buffer read by a matmul: a copy kernel.
  const Schedule s2 = schedule({x.flip({0}).matmul(y)});
  EXPECT_EQ(s2.kernel_count, 1);
  EXPECT_EQ(library_input_kinds(s2), (std::vector<KernelKind>{KernelKind::Elementwise}));
  // Views a library call reads that may be dense stay views; so does a requested pad.
  EXPECT_EQ(schedule({x.t().matmul(y)}).kernel_count, 0);
  EXPECT_EQ(schedule({x.pad({{1, 1}, {0, 0}})}).kernel_count, 0);
}

TEST(Schedule, DebugDumpAfterEachPass) {
  const auto& [x, y, z, a, b] = in();
  const int saved = aether::config().debug;
  aether::config().debug = 4;  // as AETHER_DEBUG=4 (the environment is read once, at start-up)
  testing::internal::CaptureStderr();
  schedule({(x + a).sum(), (x + b).sum()});
  const std::string err = testing::internal::GetCapturedStderr();
  aether::config().debug = saved;
  for (const char* pass : {"after group", "after view_only", "after merge_siblings", "after merge_epilogues"})
    EXPECT_NE(err.find(pass), std::string::npos) << pass << " missing from:\n" << err;
}

TEST(Schedule, ReduceBytesAndPasses) {
  const auto& [x, y, z, a, b] = in();
  const Schedule s = schedule({(x + a).sum(), (x + b).sum()});
  ASSERT_EQ(s.kernels.size(), 1u);
  EXPECT_EQ(s.kernels[0].kind, KernelKind::Reduce);
  EXPECT_EQ(s.kernels[0].shape, (Shape{256, 256}));
  EXPECT_EQ(s.kernels[0].outputs.size(), 2u);
  // x once (shared view), a and b once each; two float scalars written.
  EXPECT_EQ(s.kernels[0].bytes_read, 65536 * 4 + 2 * 256 * 4);
  EXPECT_EQ(s.kernels[0].bytes_written, 2 * 4);
  EXPECT_EQ(s.big_buffer_passes, 1);
  // [x.sum(), x + y]: x read twice, y once, x + y written once.
  EXPECT_EQ(schedule({x.sum(), x + y}).big_buffer_passes, 4);
}

TEST(Schedule, ViewsAreNotKernels) {
  const auto& [x, y, z, a, b] = in();
  const Schedule s = schedule({x.t(), a.expand({256, 256}).reshape({65536})});
  EXPECT_EQ(s.kernel_count, 0);
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].kind, KernelKind::ViewOnly);
  EXPECT_EQ(s.kernels[1].kind, KernelKind::ViewOnly);
  // A requested constant needs a fill kernel.
  EXPECT_EQ(schedule({Tensor::full({4, 4}, 3.0)}).kernel_count, 1);
  // Already realized outputs need nothing.
  EXPECT_TRUE(schedule({x}).kernels.empty());
}

TEST(Schedule, LibraryOpsSplitFusion) {
  const auto& [x, y, z, a, b] = in();
  // (x + a) is stored for the matmul; the matmul is a library call; the reduce reads its output.
  const Schedule s = schedule({((x + a).matmul(y) * 2.0).sum()});
  EXPECT_EQ(s.kernel_count, 2);
  EXPECT_EQ(s.library_calls, 1);
  // Producers first; the reshapes to and from the matmul's (B, M, K) shapes are views, not kernels.
  std::vector<const Kernel*> ks;
  for (const Kernel& k : s.kernels)
    if (k.kind != KernelKind::ViewOnly) ks.push_back(&k);
  ASSERT_EQ(ks.size(), 3u);
  EXPECT_EQ(ks[0]->kind, KernelKind::Elementwise);
  EXPECT_EQ(ks[1]->kind, KernelKind::Library);
  EXPECT_EQ(ks[2]->kind, KernelKind::Reduce);
  ASSERT_EQ(ks[2]->inputs.size(), 1u);  // the matmul's output, through a reshape
  EXPECT_EQ(&s.kernels[size_t(ks[2]->inputs[0].producer)], ks[1]);
  EXPECT_TRUE(ks[2]->inputs[0].big);
}

TEST(Schedule, JsonDump) {
  const auto& [x, y, z, a, b] = in();
  const auto j = schedule({(x + a).sum() * 2.0, x + y}).to_json();
  EXPECT_EQ(j.at("kernel_count"), 2);
  EXPECT_EQ(j.at("library_calls"), 0);
  EXPECT_EQ(j.at("kernels").size(), 2u);
  EXPECT_EQ(j.at("kernels")[0].at("kind"), "reduce");
  EXPECT_TRUE(j.at("kernels")[0].contains("bytes_read"));
}

TEST(Schedule, VerifierRejectsBrokenGroupings) {
  const auto& [x, y, z, a, b] = in();
  const Tensor e1 = x + a, e2 = e1.exp(), e3 = e2 + e1;
  sched::State s;
  sched::pass_collect(s, {e3.node()}, {});
  sched::pass_group(s);
  EXPECT_NO_THROW(sched::verify(s, "group"));
  // Move exp into a group of its own: e1 -> exp -> e3 leaves e1's group and comes back (a cycle).
  sched::State bad = s;
  int exp_index = -1;
  for (size_t i = 0; i < bad.nodes.size(); ++i)
    if (bad.nodes[i].node == e2.node()) exp_index = int(i);
  ASSERT_GE(exp_index, 0);
  auto& members = bad.groups[size_t(bad.nodes[size_t(exp_index)].group)].members;
  members.erase(std::find(members.begin(), members.end(), exp_index));
  bad.nodes[size_t(exp_index)].group = int(bad.groups.size());
  bad.groups.push_back({KernelKind::Elementwise, {exp_index}, {256, 256}, 65536, {}, false, true, {}});
  EXPECT_THROW(sched::verify(bad, "test"), Error);
  // A node in no group.
  sched::State lost = s;
  lost.groups[size_t(lost.nodes[size_t(exp_index)].group)].members.clear();
  lost.groups[size_t(lost.nodes[size_t(exp_index)].group)].alive = false;
  EXPECT_THROW(sched::verify(lost, "test"), Error);
}

TEST(Schedule, EdgeCases) {
  const auto& [x, y, z, a, b] = in();
  EXPECT_TRUE(schedule(std::vector<Tensor>{}).kernels.empty());
  // A node read twice by one op, and an output requested twice: still one kernel.
  const Tensor e = x + a;
  const Tensor s = (e * e).sum();
  EXPECT_EQ(kernels({s, s}), 1);
  EXPECT_THROW(schedule(std::vector<NodePtr>{nullptr}), Error);
}

TEST(Schedule, VerifierRejectsDependentReducesInOneGroup) {
  const auto& [x, y, z, a, b] = in();
  // The diamond: two reduce groups, the second reading the first. Force them into one group.
  const Tensor s1 = (x + a).sum();
  const Tensor s2 = (x + s1).sum();
  sched::State s;
  sched::pass_collect(s, {s1.node(), s2.node()}, {});
  sched::pass_group(s);
  ASSERT_NO_THROW(sched::verify(s, "group"));
  const int g1 = s.nodes[0].group;  // s1 is the first output
  for (size_t g = 0; g < s.groups.size(); ++g) {
    if (int(g) == g1 || !s.groups[g].alive || s.groups[g].kind != KernelKind::Reduce) continue;
    for (int m : s.groups[g].members) s.nodes[size_t(m)].group = g1;
    auto& into = s.groups[size_t(g1)].members;
    into.insert(into.end(), s.groups[g].members.begin(), s.groups[g].members.end());
    s.groups[g].members.clear();
    s.groups[g].alive = false;
  }
  EXPECT_THROW(sched::verify(s, "test"), Error);
}

// ---- batch norm training step ------------------------------------------------------------------
namespace {
// Big-buffer loads of kernel k, as the bases they read.
std::set<const Node*> big_bases(const Kernel& k) {
  std::set<const Node*> out;
  for (const KernelInput& in : k.inputs)
    if (in.big) out.insert(in.base.get());
  return out;
}
bool stores(const Kernel& k, const Tensor& t) {
  return std::find(k.outputs.begin(), k.outputs.end(), t.node()) != k.outputs.end();
}
// The generated (Elementwise or Reduce) kernels of s, in order.
std::vector<const Kernel*> generated(const Schedule& s) {
  std::vector<const Kernel*> out;
  for (const Kernel& k : s.kernels)
    if (k.generated()) out.push_back(&k);
  return out;
}
}  // namespace

TEST(Schedule, BatchNormTrainingForwardAndBackward) {
  // Shapes only: x (256, 32, 32, 32) NHWC, weight/bias/running stats (32), upstream gradient dy of
  // x's shape. Outputs: relu(bn(x)), the new running mean and var, x.grad, weight.grad, bias.grad.
  Tensor x = Tensor::rand({256, 32, 32, 32});
  Tensor w = Tensor::rand({32}), bias = Tensor::rand({32});
  const Tensor rm = Tensor::rand({32}), rv = Tensor::rand({32});
  const Tensor dy = Tensor::rand({256, 32, 32, 32});
  x.set_requires_grad();
  w.set_requires_grad();
  bias.set_requires_grad();
  const BatchNormResult bn = batch_norm(x, w, bias, rm, rv, true);
  const Tensor out = bn.out.relu();
  const auto grads = gradients(out, {x, w, bias}, dy);
  ScheduleOptions opt;
  opt.assume_realized = {x.node(), w.node(), bias.node(), rm.node(), rv.node(), dy.node()};
  const Schedule s =
      schedule({out, bn.new_running_mean, bn.new_running_var, grads[0], grads[1], grads[2]}, opt);
  std::cout << "batch norm training (forward + relu + dx, dw, db, running stats): " << s.kernel_count
            << " kernels, " << s.big_buffer_passes << " big-buffer passes, " << s.bytes_moved
            << " bytes moved\n";
  if (aether::config().debug >= 4) std::cout << s.to_json().dump(1) << "\n";
  // The issue's bounds: at most 4 generated kernels and 8 passes over x-sized buffers.
  EXPECT_LE(s.kernel_count, 4);
  EXPECT_LE(s.big_buffer_passes, 8);
  // What this scheduler achieves, kernel by kernel (x: 1 read; y: 2; backward sums: 2; dx: 3 = 8):
  //  1. Reduce: the statistics, one pass over x: sum(x), sum(x^2) in float64 (cast fused) and the
  //     float32 sums that carry their gradient; epilogue: the running-statistics update.
  //  2. Elementwise: y = relu((x - mean) * scale + bias), reading x and the per-channel factors.
  //  3. Reduce: the backward sums in one pass over x and dy, with relu's select (x_hat recomputed from
  //     x) in front: sum(g (x - mean)) (weight.grad, d var), sum(-g scale) (d mean), sum(g)
  //     (bias.grad); epilogue: weight.grad.
  //  4. Elementwise: dx from x, dy and the per-channel sums.
  EXPECT_EQ(s.kernel_count, 4);
  EXPECT_EQ(s.big_buffer_passes, 8);
  EXPECT_EQ(s.library_calls, 0);
  const auto ks = generated(s);
  ASSERT_EQ(ks.size(), 4u);
  const std::set<const Node*> just_x{x.node().get()}, x_dy{x.node().get(), dy.node().get()};
  EXPECT_EQ(ks[0]->kind, KernelKind::Reduce);
  EXPECT_EQ(big_bases(*ks[0]), just_x);
  EXPECT_TRUE(ks[0]->outputs.size() >= 2 && stores(*ks[0], bn.new_running_mean) &&
              stores(*ks[0], bn.new_running_var));
  EXPECT_EQ(ks[1]->kind, KernelKind::Elementwise);
  EXPECT_EQ(big_bases(*ks[1]), just_x);
  EXPECT_TRUE(stores(*ks[1], out));
  EXPECT_EQ(ks[2]->kind, KernelKind::Reduce);
  EXPECT_EQ(big_bases(*ks[2]), x_dy);  // not y: relu's select is recomputed from x
  EXPECT_TRUE(stores(*ks[2], grads[1]) && stores(*ks[2], grads[2]));
  EXPECT_EQ(ks[3]->kind, KernelKind::Elementwise);
  EXPECT_EQ(big_bases(*ks[3]), x_dy);
  EXPECT_TRUE(stores(*ks[3], grads[0]));
  EXPECT_FALSE(out.is_realized());
}

TEST(Schedule, ConvBatchNormReluTrainingStep) {
  // conv3x3 (16 -> 32 channels, same padding) -> batch norm (training) -> relu, forward and
  // backward with an upstream gradient dy: shapes only. x (64, 32, 32, 16) NHWC, w (32, 3, 3, 16).
  Tensor x = Tensor::rand({64, 32, 32, 16});
  Tensor w = Tensor::rand({32, 3, 3, 16}), g = Tensor::rand({32}), beta = Tensor::rand({32});
  const Tensor rm = Tensor::rand({32}), rv = Tensor::rand({32});
  const Tensor dy = Tensor::rand({64, 32, 32, 32});
  for (Tensor* t : {&x, &w, &g, &beta}) t->set_requires_grad();
  Conv2dOptions same;
  same.padding = 1;
  const Tensor h = conv2d(x, w, Tensor(), same);  // (64, 32, 32, 32)
  const BatchNormResult bn = batch_norm(h, g, beta, rm, rv, true);
  const Tensor out = bn.out.relu();
  const auto grads = gradients(out, {x, w, g, beta}, dy);
  ScheduleOptions opt;
  opt.assume_realized = {x.node(), w.node(), g.node(), beta.node(), rm.node(), rv.node(), dy.node()};
  const Schedule s =
      schedule({out, bn.new_running_mean, bn.new_running_var, grads[0], grads[1], grads[2], grads[3]}, opt);
  std::cout << "conv -> batch norm -> relu training: " << s.kernel_count << " kernels, " << s.library_calls
            << " library calls, " << s.big_buffer_passes << " big-buffer passes\n";
  // The convolutions stay library calls: forward, backward-data (x.grad), backward-weight (w.grad).
  EXPECT_EQ(s.library_calls, 3);
  std::multiset<Op> libs;
  for (const Kernel& k : s.kernels)
    if (k.kind == KernelKind::Library) libs.insert(k.nodes.at(0)->op);
  EXPECT_EQ(libs, (std::multiset<Op>{Op::Conv2d, Op::Conv2dBwdData, Op::Conv2dBwdWeight}));
  // Everything else: the issue's bound is 4 generated kernels; they are the batch-norm kernels of
  // the test above, with the conv output h in place of x: statistics (+ running stats), y, the
  // backward sums (h, dy), and dh, which is stored for the two backward convolutions.
  EXPECT_LE(s.kernel_count, 4);
  EXPECT_EQ(s.kernel_count, 4);
  const auto ks = generated(s);
  ASSERT_EQ(ks.size(), 4u);
  const std::set<const Node*> just_h{h.node().get()}, h_dy{h.node().get(), dy.node().get()};
  EXPECT_EQ(ks[0]->kind, KernelKind::Reduce);
  EXPECT_EQ(big_bases(*ks[0]), just_h);
  EXPECT_EQ(ks[1]->kind, KernelKind::Elementwise);
  EXPECT_EQ(big_bases(*ks[1]), just_h);
  EXPECT_EQ(ks[2]->kind, KernelKind::Reduce);
  EXPECT_EQ(big_bases(*ks[2]), h_dy);
  EXPECT_EQ(ks[3]->kind, KernelKind::Elementwise);
  EXPECT_EQ(big_bases(*ks[3]), h_dy);
}

// ---- a whole training step: every node placed once, producers first ------------------------------
TEST(Schedule, SmallConvNetTrainingStepIsConsistent) {
  // x (4, 8, 8, 3) NHWC; conv 3x3 -> 8 channels, batch norm, relu, max pool, linear -> 10 classes.
  const Tensor x = Tensor::rand({4, 8, 8, 3}).realize();
  const Tensor labels = Tensor::from_vector<int64_t>({1, 7, 3, 0}, {4});
  Tensor w1 = Tensor::rand({8, 3, 3, 3}).realize(), g = Tensor::rand({8}).realize(),
         beta = Tensor::rand({8}).realize();
  Tensor w2 = Tensor::rand({10, 128}).realize(), b2 = Tensor::rand({10}).realize();
  for (Tensor* t : {&w1, &g, &beta, &w2, &b2}) t->set_requires_grad();
  // A padded-then-sliced view of x (the same values) exercises Pad and Slice views.
  const Tensor xv = x.pad({{0, 0}, {1, 1}, {1, 1}, {0, 0}}).slice(1, 1, 9).slice(2, 1, 9);
  Conv2dOptions same;
  same.padding = 1;
  const Tensor h = batch_norm(conv2d(xv, w1, Tensor(), same), g, beta, Tensor(), Tensor(), true).out.relu();
  const Tensor logits = linear(max_pool2d(h, 2).reshape({4, 128}), w2, b2);
  const Tensor loss = cross_entropy(logits, labels);
  std::vector<Tensor> outs = gradients(loss, {w1, g, beta, w2, b2}, Tensor(), true);
  outs.push_back(loss);
  const Schedule s = schedule(outs);

  // Independently: the unrealized nodes reachable from the outputs, and the library ops among them.
  std::set<const Node*> graph;
  std::vector<const Node*> stack;
  for (const Tensor& t : outs) stack.push_back(t.node().get());
  int library_ops = 0;
  while (!stack.empty()) {
    const Node* n = stack.back();
    stack.pop_back();
    if (n->realized() || !graph.insert(n).second) continue;
    library_ops += op_kind(n->op) == OpKind::Library;
    for (const auto& src : n->srcs) stack.push_back(src.get());
  }
  EXPECT_EQ(s.library_calls, library_ops);
  EXPECT_GE(library_ops, 5);  // conv, conv weight grad, pool, pool grad, matmuls
  // Each node is in exactly one kernel or inlined.
  std::map<const Node*, int> placed;
  for (const Kernel& k : s.kernels)
    for (const auto& n : k.nodes) ++placed[n.get()];
  for (const auto& n : s.inlined) ++placed[n.get()];
  EXPECT_EQ(placed.size(), graph.size());
  for (const auto& [n, count] : placed) {
    EXPECT_EQ(count, 1) << op_name(n->op) << " #" << n->id;
    EXPECT_TRUE(graph.count(n)) << op_name(n->op) << " #" << n->id;
  }
  // Producers come first and store what their consumers load; the outputs are stored.
  for (size_t k = 0; k < s.kernels.size(); ++k) {
    for (const KernelInput& in : s.kernels[k].inputs) {
      if (in.producer < 0) {
        EXPECT_TRUE(in.base->realized());
        continue;
      }
      ASSERT_LT(size_t(in.producer), k);
      const auto& outputs = s.kernels[size_t(in.producer)].outputs;
      EXPECT_NE(std::find(outputs.begin(), outputs.end(), in.base), outputs.end());
    }
  }
  for (const Tensor& t : outs) {
    bool stored = false;
    for (const Kernel& k : s.kernels)
      stored = stored || std::find(k.outputs.begin(), k.outputs.end(), t.node()) != k.outputs.end();
    EXPECT_TRUE(stored) << op_name(t.node()->op) << " #" << t.node()->id;
  }
  std::cout << "conv net training step: " << s.kernel_count << " kernels, " << s.library_calls
            << " library calls, " << s.big_buffer_passes << " big-buffer passes\n";
}
