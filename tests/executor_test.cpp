// The one executor (backend/executor.cpp) over a device runtime (backend/runtime.h): it is device
// generic, so a runtime that wraps the CPU's and counts what the executor asks of it shows exactly
// which calls a device gets: one compile per graph structure (the plan cache), one launch per
// generated kernel, library calls and views through run_nodes, a conv's epilogue as the scheduler
// recorded it (and only where the runtime's capabilities allow one), and everything through
// run_nodes when the device cannot compile. Values are checked against the reference backend.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/graph/autograd.h"
#include "aether/ops/conv.h"
#include "backend/runtime.h"
#include "schedule/schedule.h"

using namespace aether;

namespace {

// The CPU runtime, counted; its capabilities and whether it compiles can be changed.
class CountingRuntime final : public DeviceRuntime {
 public:
  DeviceRuntime& cpu = cpu_runtime();
  int compiles = 0, compiled_kernels = 0, launches = 0, node_runs = 0, epilogue_calls = 0;
  std::vector<std::vector<EpilogueOp::Kind>> epilogues;  // what each run_epilogue call received
  bool compiles_code = true;
  LibraryCaps caps = cpu_runtime().capabilities();

  DeviceType type() const override { return DeviceType::cpu; }
  DeviceMemory* memory() override { return nullptr; }
  void synchronize(int index) override { cpu.synchronize(index); }
  codegen::Target target() const override { return cpu.target(); }
  bool can_compile() override { return compiles_code && cpu.can_compile(); }
  std::vector<ProgramPtr> compile(int index, const std::vector<codegen::Rendered>& kernels) override {
    ++compiles;
    compiled_kernels += int(kernels.size());
    return cpu.compile(index, kernels);
  }
  void launch(int index, const Program& p, const std::vector<void*>& bufs, void* scratch,
              const std::vector<double>& fp, const std::vector<uint64_t>& ip) override {
    ++launches;
    cpu.launch(index, p, bufs, scratch, fp, ip);
  }
  void run_nodes(const std::vector<Node*>& order) override {
    node_runs += int(order.size());
    cpu.run_nodes(order);
  }
  bool run_epilogue(const Kernel& k) override {
    ++epilogue_calls;
    std::vector<EpilogueOp::Kind> kinds;
    for (const EpilogueOp& e : k.epilogue) kinds.push_back(e.kind);
    epilogues.push_back(kinds);
    return cpu.run_epilogue(k);
  }
  LibraryCaps capabilities() const override { return caps; }
};

Tensor input(const Shape& s, double scale) {
  std::vector<float> v(size_t(numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(scale * double((i * 37) % 23) / 23.0 - 0.5);
  return Tensor::from_vector<float>(v, s).realize();
}

// The reference backend's values of `f()` (AETHER_FUSE=0's path).
std::vector<double> reference(const std::function<Tensor()>& f) {
  const bool was = fusion_enabled();
  set_fusion(false);
  const auto v = f().to_vector<double>();
  set_fusion(was);
  return v;
}

// Realizes f() with the executor on `rt`, returning its values.
std::vector<double> on(CountingRuntime& rt, const std::function<Tensor()>& f) {
  const Tensor t = f();
  execute(rt, {t.node()});
  EXPECT_TRUE(t.is_realized());
  return t.to_vector<double>();
}

void expect_near(const std::vector<double>& a, const std::vector<double>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 1e-4) << "at " << i;
}

}  // namespace

TEST(Executor, RunsGeneratedKernelsThroughTheRuntime) {
  if (!cpu_runtime().can_compile()) GTEST_SKIP() << "no working C++ compiler for generated kernels";
  plan_cache_clear();
  CountingRuntime rt;
  const Tensor x = input({64, 33}, 1.0);
  auto f = [&] { return (x * 2.0 + 1.0).relu().sum({1}); };  // one reduce kernel with its elementwise inputs
  const auto got = on(rt, f);
  expect_near(got, reference(f));
  EXPECT_EQ(rt.compiles, 1);
  EXPECT_EQ(rt.compiled_kernels, 1);
  EXPECT_EQ(rt.launches, 1);
  EXPECT_EQ(rt.node_runs, 0) << "a fusible graph ran nodes one at a time";
  // The same structure again: the plan cache binds the new nodes to the compiled program.
  const auto again = on(rt, f);
  expect_near(again, got);
  EXPECT_EQ(rt.compiles, 1) << "the plan cache did not serve the second graph";
  EXPECT_EQ(rt.launches, 2);
}

TEST(Executor, WithoutACompilerEveryNodeRunsThroughRunNodes) {
  plan_cache_clear();
  CountingRuntime rt;
  rt.compiles_code = false;
  const Tensor x = input({8, 5}, 2.0);
  auto f = [&] { return (x * x - 0.25).exp().sum({0}); };
  expect_near(on(rt, f), reference(f));
  EXPECT_EQ(rt.compiles, 0);
  EXPECT_EQ(rt.launches, 0);
  EXPECT_GE(rt.node_runs, 4);  // mul, sub, exp, sum (and the constant's nodes)
}

// A float32 conv + bias + ReLU: the scheduler records the epilogue [Add, Relu] in the library kernel
// when the runtime's capabilities take float32 conv epilogues, and the runtime receives that record;
// with no capabilities the conv is a library call of its own and no epilogue reaches the runtime.
TEST(Executor, ConvEpilogueIsTheSchedulersRecord) {
  if (!cpu_runtime().can_compile()) GTEST_SKIP() << "no working C++ compiler for generated kernels";
  if (library_impl() != LibraryImpl::onednn) GTEST_SKIP() << "oneDNN is off (AETHER_ONEDNN=0)";
  const Tensor x = input({2, 6, 6, 3}, 1.0), w = input({4, 3, 3, 3}, 0.5), b = input({4}, 1.0);
  auto f = [&] { return conv2d(x, w, b, {.padding = 1}).relu(); };
  const auto want = reference(f);

  plan_cache_clear();
  CountingRuntime with;
  with.caps = LibraryCaps{{DType::float32}};
  const Tensor y = f();
  const Schedule s = schedule({y.node()}, {.assume_realized = {}, .library = with.caps});
  size_t epilogue_kernels = 0;
  for (const Kernel& k : s.kernels)
    if (!k.epilogue.empty()) {
      ++epilogue_kernels;
      EXPECT_EQ(k.kind, KernelKind::Library);
      ASSERT_EQ(k.epilogue.size(), 2u);
      EXPECT_EQ(k.epilogue[0].kind, EpilogueOp::Kind::Add);
      EXPECT_NE(k.epilogue[0].operand, nullptr);
      EXPECT_EQ(k.epilogue[1].kind, EpilogueOp::Kind::Relu);
      EXPECT_EQ(k.epilogue[1].operand, nullptr);
    }
  EXPECT_EQ(epilogue_kernels, 1u);
  expect_near(on(with, f), want);
  ASSERT_EQ(with.epilogue_calls, 1);
  EXPECT_EQ(with.epilogues[0],
            (std::vector<EpilogueOp::Kind>{EpilogueOp::Kind::Add, EpilogueOp::Kind::Relu}));
  EXPECT_EQ(with.launches, 0) << "bias and ReLU ran as a generated kernel, not in the conv";

  plan_cache_clear();
  CountingRuntime without;
  without.caps = {};
  for (const Kernel& k : schedule({f().node()}, {.assume_realized = {}, .library = without.caps}).kernels)
    EXPECT_TRUE(k.epilogue.empty());
  expect_near(on(without, f), want);
  EXPECT_EQ(without.epilogue_calls, 0);
  EXPECT_EQ(without.launches, 1) << "bias and ReLU should be one generated kernel after the conv";
}

// A max-pool over an odd size drops the last row and column. The conv computes only the kept outputs
// (graph/conv_crop.h: one forward call, its padding after 0), and the pool's gradient, padded back
// to the conv's output, is taken unpadded into the conv's backward calls (unpad_conv_grad): no
// library call reads a pad, no kernel writes one, and the values are the reference backend's.
TEST(Executor, ACroppedConvsBackwardReadsNoPad) {
  if (!cpu_runtime().can_compile()) GTEST_SKIP() << "no working C++ compiler for generated kernels";
  const Tensor x = input({2, 7, 7, 3}, 1.0), w = input({4, 3, 3, 3}, 0.5);
  auto f = [&] {  // (2,7,7,3) -conv-> (2,7,7,4) -pool 2-> (2,3,3,4); dw (4,3,3,3) and dx, flattened
    Tensor wv = w.detach().set_requires_grad(), xv = x.detach().set_requires_grad();
    const Tensor y = max_pool2d(conv2d(xv, wv, Tensor(), {.padding = 1}), 2);
    const auto g = gradients((y * y).sum(), {wv, xv});
    return cat({g[0].reshape({-1}), g[1].reshape({-1})}, 0);
  };
  const auto want = reference(f);
  plan_cache_clear();
  CountingRuntime rt;
  expect_near(on(rt, f), want);
  const Tensor t = f();
  const Schedule s = schedule({t.node()});
  int unpadded_calls = 0, pads_read = 0, convs = 0;
  for (const Kernel& k : s.kernels) {
    if (k.kind != KernelKind::Library) continue;
    for (const KernelInput& i : k.inputs) pads_read += i.base->op == Op::Pad;
    for (const NodePtr& n : k.nodes)
      if (n->op == Op::Conv2d || n->op == Op::Conv2dBwdData || n->op == Op::Conv2dBwdWeight) {
        const auto& a = std::get<Conv2dArg>(n->arg);
        unpadded_calls += a.pad_bottom == 0 && a.pad_right == 0 && a.pad_top == 1 && a.pad_left == 1;
        convs += n->op == Op::Conv2d;
      }
  }
  EXPECT_EQ(pads_read, 0) << "a library call reads a pad";
  EXPECT_EQ(convs, 1) << "the conv the pool's backward reads ran more than once";
  EXPECT_EQ(unpadded_calls, 3) << "the conv and its backward calls should run over the kept outputs";
}

// The registered runtimes: the CPU's always; another device's only when this build has it, and
// asking for a missing one names why.
TEST(Executor, RuntimeForNamesAMissingDevice) {
  EXPECT_EQ(runtime_for(Device::cpu()).type(), DeviceType::cpu);
  EXPECT_EQ(runtime_for(Device::cpu()).memory(), nullptr);  // host memory is the core's own
  if (cuda_runtime() == nullptr) {
    try {
      runtime_for(Device{DeviceType::cuda, 0});
      ADD_FAILURE() << "runtime_for(cuda) did not throw in a build without CUDA";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("built without CUDA"), std::string::npos) << e.what();
    }
  } else {
    EXPECT_EQ(cuda_runtime()->type(), DeviceType::cuda);
    EXPECT_NE(cuda_runtime()->memory(), nullptr);
    EXPECT_EQ(device_memory(DeviceType::cuda), cuda_runtime()->memory()) << "CUDA memory not registered";
  }
}
