// The built-in graphs of `aether schedule` (model/schedule_graphs.h) and schedule_bytes_min():
// every graph builds and schedules at batch 2 without computing anything, each requested output
// is provided by a kernel, the library calls match the conv/matmul/pool nodes counted here by a
// walk of the graph (and by hand), and bytes_min matches sizes worked out by hand.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "aether/aether.h"
#include "model/schedule_graphs.h"
#include "schedule/schedule.h"

using namespace aether;

namespace {
// Library-op nodes among the unrealized nodes reachable from the graph's outputs (leaves stop the walk).
int count_library_nodes(const ScheduleGraph& g) {
  std::set<const Node*> leaves, seen;
  for (const Tensor& t : g.leaves) leaves.insert(t.node().get());
  std::vector<const Node*> stack;
  for (const Tensor& t : g.outputs) stack.push_back(t.node().get());
  int n = 0;
  while (!stack.empty()) {
    const Node* node = stack.back();
    stack.pop_back();
    if (node->realized() || leaves.count(node) || !seen.insert(node).second) continue;
    n += op_kind(node->op) == OpKind::Library;
    for (const auto& s : node->srcs) stack.push_back(s.get());
  }
  return n;
}

constexpr int64_t kF32 = 4;
}  // namespace

TEST(ScheduleGraphs, EveryGraphBuildsAndSchedules) {
  // Library calls by hand: conv-bn-relu: conv, its data and weight gradients; resnet block: twice
  // that; cifarnet: 7 convs + 7 weight grads + 6 data grads (not for the input), the linear layer's
  // matmul and its 2 gradient matmuls. Its 2x2 max pools are generated kernels (graph/pool_windows.cpp).
  const std::map<std::string, int> expected_library = {
      {"bn-relu-train", 0}, {"conv-bn-relu-train", 3}, {"resnet-block-train", 6}, {"cifarnet-step", 23}};
  ASSERT_EQ(schedule_graph_names().size(), expected_library.size());
  for (const std::string& name : schedule_graph_names()) {
    SCOPED_TRACE(name);
    const ScheduleGraph g = build_schedule_graph(name, 2);
    EXPECT_EQ(g.name, name);
    EXPECT_FALSE(g.description.empty());
    EXPECT_EQ(g.description.find('\n'), std::string::npos);
    ASSERT_EQ(g.outputs.size(), g.output_names.size());
    ASSERT_EQ(g.leaves.size(), g.leaf_names.size());
    const Schedule s = schedule(g.outputs, g.options());
    EXPECT_GT(s.kernel_count, 0);
    // Each requested output is one kernel's output; scheduling computed nothing.
    for (size_t i = 0; i < g.outputs.size(); ++i) {
      int providers = 0;
      for (const Kernel& k : s.kernels)
        for (const auto& o : k.outputs) providers += o == g.outputs[i].node();
      EXPECT_EQ(providers, 1) << g.output_names[i];
      EXPECT_FALSE(g.outputs[i].is_realized()) << g.output_names[i];
    }
    for (const Tensor& t : g.leaves) EXPECT_FALSE(t.is_realized());
    const int library = count_library_nodes(g);
    EXPECT_EQ(s.library_calls, library);
    EXPECT_EQ(library, expected_library.at(name));
    EXPECT_GT(s.bytes_min, 0);
    EXPECT_LE(s.bytes_min, s.bytes_moved);
    EXPECT_EQ(s.bytes_min, schedule_bytes_min(
                               [&] {
                                 std::vector<NodePtr> v;
                                 for (const Tensor& t : g.outputs) v.push_back(t.node());
                                 return v;
                               }(),
                               g.options()));
  }
}

TEST(ScheduleGraphs, BnReluTrainOutputsAndBytesMin) {
  const ScheduleGraph g = build_schedule_graph("bn-relu-train", 2);
  const std::vector<std::string> names = {"bn.running_mean", "bn.running_var", "out",
                                          "grad x",          "grad bn.weight", "grad bn.bias"};
  EXPECT_EQ(g.output_names, names);
  const Shape big{2, 32, 32, 32};
  EXPECT_EQ(g.outputs[2].shape(), big);
  EXPECT_EQ(g.outputs[3].shape(), big);
  for (int i : {0, 1, 4, 5}) EXPECT_EQ(g.outputs[size_t(i)].shape(), (Shape{32}));
  // Reads: x and dy (2*32*32*32 floats each), weight, bias, running mean and var (32 floats each);
  // writes: out and dx (big), 2 running statistics and 2 parameter gradients (32 floats each).
  const int64_t big_bytes = 2 * 32 * 32 * 32 * kF32, small_bytes = 32 * kF32;
  const Schedule s = schedule(g.outputs, g.options());
  EXPECT_EQ(s.bytes_min, (2 * big_bytes + 4 * small_bytes) + (2 * big_bytes + 4 * small_bytes));
  // At least one more pass than the minimum: the batch statistics must be known before normalising.
  EXPECT_GT(s.bytes_moved, s.bytes_min);
}

TEST(ScheduleGraphs, CifarnetStepIsThePresetsTrainingStep) {
  const ScheduleGraph g = build_schedule_graph("cifarnet-step", 2);
  // Leaves: the batch and one momentum buffer per parameter, as many values as the preset's 1166506
  // parameters (`aether summary --model cifarnet`).
  const size_t params = 7 + 7 * 2 + 2;  // 7 convs, 7 batch norms (weight, bias), linear weight and bias
  ASSERT_EQ(g.leaves.size(), 1 + params);
  int64_t momentum = 0, batches = 0;
  for (size_t i = 0; i < g.leaves.size(); ++i) {
    if (g.leaf_names[i] == "x") {
      ++batches;
      EXPECT_EQ(g.leaves[i].shape(), (Shape{2, 32, 32, 3}));
      continue;
    }
    EXPECT_NE(g.leaf_names[i].find(".momentum"), std::string::npos) << g.leaf_names[i];
    momentum += g.leaves[i].numel();
  }
  EXPECT_EQ(batches, 1);
  EXPECT_EQ(momentum, 1166506);
  // Outputs, as Model::record_train_step names them: the loss, the accuracy, 7 x 2 running
  // statistics, each parameter and its momentum buffer.
  ASSERT_EQ(g.outputs.size(), 2 + 14 + 2 * params);
  EXPECT_EQ(g.output_names[0], "loss");
  EXPECT_EQ(g.output_names[1], "accuracy");
  EXPECT_EQ(g.outputs[0].shape(), Shape{});
  int64_t updated = 0, buffers = 0;
  for (size_t i = 2; i < g.outputs.size(); ++i) {
    const std::string& n = g.output_names[i];
    if (n.find("running_") != std::string::npos)
      ++buffers;
    else if (n.find(".momentum") == std::string::npos)
      updated += g.outputs[i].numel();
  }
  EXPECT_EQ(buffers, 14);
  EXPECT_EQ(updated, 1166506);
  for (const Tensor& t : g.outputs) EXPECT_FALSE(t.requires_grad());
}

TEST(ScheduleGraphs, JsonHasTheTotals) {
  const ScheduleGraph g = build_schedule_graph("conv-bn-relu-train", 2);
  const Schedule s = schedule(g.outputs, g.options());
  const nlohmann::json j = s.to_json();
  for (const char* key :
       {"kernel_count", "library_calls", "big_buffer_passes", "bytes_moved", "bytes_min", "kernels"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j.at("bytes_min").get<int64_t>(), s.bytes_min);
  EXPECT_EQ(j.at("kernels").size(), s.kernels.size());
}

TEST(ScheduleGraphs, UnknownNameOrBadBatchThrows) {
  try {
    build_schedule_graph("resnet-50");
    FAIL() << "expected aether::Error";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("resnet-50"), std::string::npos) << m;
    for (const auto& n : schedule_graph_names()) EXPECT_NE(m.find(n), std::string::npos) << m;
  }
  EXPECT_THROW(build_schedule_graph("bn-relu-train", 0), Error);
}

// ---- schedule_bytes_min on small graphs, worked out by hand ----------------------------------------
TEST(ScheduleBytesMin, LeavesReadOnceOutputsWrittenOnce) {
  const Tensor x = Tensor::rand({8, 4}).realize(), y = Tensor::rand({8, 4}).realize();
  const Tensor a = Tensor::rand({1, 4}).realize();
  // x, y (32 floats) and a (4) read once however often they are used; two (8,4) outputs written.
  const Tensor e = (x + a) * y;
  EXPECT_EQ(schedule_bytes_min({e.node(), (e + x + a).node()}), (32 + 32 + 4 + 32 + 32) * kF32);
  // A scalar output writes 4 bytes.
  EXPECT_EQ(schedule_bytes_min({(x * y).sum().node()}), (32 + 32 + 1) * kF32);
  // The same output twice is written once.
  EXPECT_EQ(schedule_bytes_min({e.node(), e.node()}), (32 + 32 + 4 + 32) * kF32);
}

TEST(ScheduleBytesMin, ViewsAndRealizedOutputs) {
  const Tensor x = Tensor::rand({8, 4}).realize();
  // Two views of one buffer are read once; a requested leaf or view of a leaf costs nothing.
  EXPECT_EQ(schedule_bytes_min({(x + x.flip({0})).node()}), (32 + 32) * kF32);
  EXPECT_EQ(schedule_bytes_min({x.node()}), 0);
  EXPECT_EQ(schedule_bytes_min({x.t().node()}), 0);
  // s and a reshape of it: s stored once, the reshape is a view of it.
  const Tensor s = (x * 2.0).sum({0});  // (4)
  EXPECT_EQ(schedule_bytes_min({s.node(), s.reshape({2, 2}).node()}), (32 + 4) * kF32);
  // A broadcast of s needs only s stored; a slice of a computed value needs only the slice.
  EXPECT_EQ(schedule_bytes_min({s.reshape({1, 4}).expand({8, 4}).node()}), (32 + 4) * kF32);
  EXPECT_EQ(schedule_bytes_min({(x * 2.0).slice(0, 0, 2).node()}), (32 + 8) * kF32);
}

TEST(ScheduleBytesMin, AssumedRealizedLeavesAreNotWalkedThrough) {
  const Tensor x = Tensor::rand({16, 4});  // lazy
  const Tensor h = x.exp();
  ScheduleOptions opt;
  opt.assume_realized = {h.node()};
  // h is a (16,4) buffer: x behind it is never read.
  EXPECT_EQ(schedule_bytes_min({(h * 3.0).node()}, opt), (64 + 64) * kF32);
  // Without the assumption, x is computed in place (a Rand source), nothing is read.
  EXPECT_EQ(schedule_bytes_min({(h * 3.0).node()}), 64 * kF32);
}
