// Memory planning: the host allocator's size classes reuse freed blocks; a steady-state training
// step makes no system allocations for tensor storage; the executor frees each intermediate value
// after its last reader (liveness) and orders kernels to free values early, so a step's peak is far
// below the sum of its intermediates.
//
// What is counted is tensor storage (Buffer blocks). Graph nodes themselves are still heap objects:
// a lazy graph is rebuilt every step, so the step does call operator new for its nodes and
// small vectors; those are not what these tests count.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <iostream>
#include <memory>
#include <vector>

#include "aether/aether.h"
#include "aether/nn/layers.h"
#include "aether/nn/module.h"
#include "aether/ops/nn.h"
#include "aether/optim/optimizer.h"
#include "backend/liveness.h"
#include "schedule/schedule.h"

using namespace aether;

namespace {
struct FusionOn {
  bool was = fusion_enabled();
  FusionOn() { set_fusion(true); }
  ~FusionOn() { set_fusion(was); }
};
}  // namespace

// ---- (c) the allocator ---------------------------------------------------------------------------
TEST(Allocator, SizeClasses) {
  // Up to 4 KiB: the next power of two, at least 64 bytes; above: the next multiple of 4 KiB.
  EXPECT_EQ(Buffer::size_class(0), 0u);
  EXPECT_EQ(Buffer::size_class(1), 64u);
  EXPECT_EQ(Buffer::size_class(64), 64u);
  EXPECT_EQ(Buffer::size_class(65), 128u);
  EXPECT_EQ(Buffer::size_class(100), 128u);
  EXPECT_EQ(Buffer::size_class(3000), 4096u);
  EXPECT_EQ(Buffer::size_class(4096), 4096u);
  EXPECT_EQ(Buffer::size_class(4097), 8192u);
  EXPECT_EQ(Buffer::size_class(12289), 16384u);
  EXPECT_EQ(Buffer::size_class((size_t(1) << 20) + 1), (size_t(1) << 20) + 4096);
}

TEST(Allocator, FreedBlocksAreReusedWithoutSystemAllocations) {
  // Sizes in every regime: one cache line, a small power-of-two class, page multiples, 3 MiB.
  for (const int64_t n : {int64_t(3), int64_t(25), int64_t(1000), int64_t(5000), int64_t(3 << 18)}) {
    SCOPED_TRACE(n);
    void* first = nullptr;
    {
      Buffer a(Device::cpu(), DType::float32, n, /*zero_fill=*/false);
      first = a.data();
      std::memset(a.data(), 0xAB, size_t(a.nbytes()));  // dirty it: the next zero-filled user must not see it
    }
    const auto before = Buffer::alloc_stats();
    {
      Buffer b(Device::cpu(), DType::float32, n);  // same size: the block just freed, zero-filled
      EXPECT_EQ(b.data(), first) << "the most recently freed block of the class is reused";
      const float* f = b.as<float>();
      EXPECT_TRUE(std::all_of(f, f + n, [](float v) { return v == 0.0f; })) << "zero-filled when asked";
    }
    // A different size in the same class also reuses it (bytes rounded up to the class).
    const int64_t m = std::max<int64_t>(1, n - 1);
    ASSERT_EQ(Buffer::size_class(size_t(m) * 4), Buffer::size_class(size_t(n) * 4));
    {
      Buffer c(Device::cpu(), DType::float32, m, /*zero_fill=*/false);
      EXPECT_EQ(c.data(), first);
    }
    const auto after = Buffer::alloc_stats();
    EXPECT_EQ(after.system_allocs, before.system_allocs);
    EXPECT_EQ(after.buffers, before.buffers + 2);
    EXPECT_GE(after.cached_bytes, int64_t(Buffer::size_class(size_t(n) * 4)));
  }
}

TEST(Allocator, EmptyCacheReturnsBlocksAndPeakResets) {
  { Buffer a(Device::cpu(), DType::uint8, 2 << 20); }  // (2 MiB) now cached
  EXPECT_GE(Buffer::alloc_stats().cached_bytes, int64_t(2) << 20);
  Buffer::empty_cache();
  auto s = Buffer::alloc_stats();
  EXPECT_EQ(s.cached_bytes, 0);
  const int64_t sys = s.system_allocs;
  Buffer::reset_peak_bytes();
  EXPECT_EQ(Buffer::peak_bytes(), Buffer::live_bytes());
  const int64_t base = Buffer::live_bytes();
  { Buffer b(Device::cpu(), DType::uint8, 3 << 20, /*zero_fill=*/false); }  // (3 MiB): nothing cached fits
  s = Buffer::alloc_stats();
  EXPECT_EQ(s.system_allocs, sys + 1);
  EXPECT_EQ(Buffer::peak_bytes() - base, int64_t(3) << 20);
  EXPECT_EQ(Buffer::live_bytes(), base);
}

// ---- (a) no system allocation in a steady-state training step --------------------------------------
TEST(Memory, SteadyStateTrainingStepMakesNoSystemAllocations) {
  manual_seed(5);
  // conv 3x3 3->8 'same' -> batch norm -> relu -> max pool 2 -> flatten -> linear 128->10, SGD Nesterov.
  // x (16, 8, 8, 3) NHWC, labels (16)
  nn::Sequential net;
  net.add(std::make_shared<nn::Conv2d>(3, 8, 3, Conv2dOptions{.padding = 1}));
  net.add(std::make_shared<nn::BatchNorm2d>(8));
  net.add(std::make_shared<nn::ReLU>());
  net.add(std::make_shared<nn::MaxPool2d>(2));
  net.add(std::make_shared<nn::Flatten>());
  net.add(std::make_shared<nn::Linear>(4 * 4 * 8, 10));
  optim::SGD opt(net.parameters(), {.lr = 0.05, .momentum = 0.9, .nesterov = true, .weight_decay = 5e-4});
  const Tensor x = Tensor::randn({16, 8, 8, 3}).realize();
  const Tensor labels = Tensor::randint(0, 10, {16}, DType::int64).realize();
  double first_loss = 0, loss_value = 0;
  auto step = [&] {
    net.train();
    const Tensor out = net.forward(x);
    const Tensor loss = cross_entropy(out, labels);
    loss.backward();
    std::vector<Tensor> extra{loss};
    for (auto& [name, t] : net.named_buffers()) extra.push_back(*t);
    opt.step(extra);  // parameters, momentum, running statistics and the loss: one realize
    opt.zero_grad();
    loss_value = loss.item<double>();
  };
  for (int i = 0; i < 3; ++i) {  // warm-up: the block cache fills (and, fused, the kernels compile)
    step();
    if (i == 0) first_loss = loss_value;
  }
  for (int i = 4; i <= 8; ++i) {
    const auto before = Buffer::alloc_stats();
    step();
    const auto after = Buffer::alloc_stats();
    EXPECT_EQ(after.system_allocs - before.system_allocs, 0) << "step " << i << " allocated from the system";
    // The step did allocate tensors: all of them came from the cache.
    EXPECT_GT(after.buffers - before.buffers, 10) << "step " << i;
    EXPECT_EQ(after.live_bytes, before.live_bytes) << "step " << i << " leaked or kept tensors";
  }
  EXPECT_LT(loss_value, first_loss) << "the model trains";
}

// ---- (b) liveness: intermediates are freed after their last reader ----------------------------------
// A chain of N layers y <- relu(y @ w * 0.5 + b) on (64, 64) float32 values (16 KiB each): each layer
// stores two intermediates (the matmul's result and the fused elementwise result), 2N in all.
TEST(Memory, StepPeakIsFarBelowTheSumOfIntermediates) {
  constexpr int kLayers = 12;
  constexpr int64_t kChunk = 64 * 64 * 4;  // bytes of one (64, 64) float32 value
  const Tensor x = Tensor::randn({64, 64}).realize();
  const Tensor w = (Tensor::randn({64, 64}) * 0.125).realize();
  const Tensor b = Tensor::randn({64}).realize();
  Tensor y = x;
  for (int i = 0; i < kLayers; ++i) y = (y.matmul(w) * 0.5 + b).relu();
  // The expected result from the same layers run one at a time (each realized and released).
  std::vector<float> expect;
  {
    Tensor e = x;
    for (int i = 0; i < kLayers; ++i) e = (e.matmul(w) * 0.5 + b).relu().realize();
    expect = e.to_vector<float>();
  }
  Buffer::reset_peak_bytes();
  const int64_t base = Buffer::live_bytes();
  y.realize();  // one schedule: 2N stored intermediates
  const int64_t peak = Buffer::peak_bytes() - base;
  const int64_t sum = 2 * kLayers * kChunk;
  std::cout << "chain of " << kLayers << " layers: peak " << peak
            << " bytes over the inputs; sum of intermediates " << sum << "\n";
  // At any time: the value being read, the one being written (the result, kept), and small constants.
  EXPECT_LE(peak, 3 * kChunk) << "sum of all intermediates: " << sum;
  EXPECT_EQ(Buffer::live_bytes() - base, kChunk) << "only the result is left";
  const std::vector<float> got = y.to_vector<float>();
  ASSERT_EQ(got.size(), expect.size());
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], expect[i], 1e-4 * (1 + std::abs(expect[i]))) << i;
}

TEST(Liveness, EachStoredValueIsReleasedAfterItsLastReader) {
  // x (32, 32) -> m1 = x @ w -> e1 = relu(m1 + 1) -> m2 = e1 @ w -> out = m2 * e1 (e1 read twice).
  const Tensor x = Tensor::randn({32, 32}).realize();
  const Tensor w = Tensor::randn({32, 32}).realize();
  const Tensor m1 = x.matmul(w);
  const Tensor e1 = (m1 + 1).relu();
  const Tensor m2 = e1.matmul(w);
  const Tensor out = m2 * e1;
  const Schedule s = schedule({out});
  const Liveness live = liveness(s, {out.node()});
  // The kernels, found independently of liveness(): the two matmuls are the two library calls (in
  // order; their stored results may be seen through reshapes), e1 and out are stored by the others.
  std::vector<int> library;
  for (size_t i = 0; i < s.kernels.size(); ++i)
    if (s.kernels[i].kind == KernelKind::Library) library.push_back(int(i));
  ASSERT_EQ(library.size(), 2u);
  auto producer = [&](const Node* n) {
    for (size_t i = 0; i < s.kernels.size(); ++i)
      for (const auto& o : s.kernels[i].outputs)
        if (o.get() == n) return int(i);
    return -1;
  };
  auto released_after = [&](const Node* n) {
    int at = -1, times = 0;
    for (size_t i = 0; i < live.stored_release_after.size(); ++i)
      for (const Node* r : live.stored_release_after[i])
        if (r == n) at = int(i), ++times;
    EXPECT_LE(times, 1);
    return at;
  };
  ASSERT_EQ(s.kernels[size_t(library[0])].outputs.size(), 1u);
  ASSERT_EQ(s.kernels[size_t(library[1])].outputs.size(), 1u);
  const Node* m1_stored = s.kernels[size_t(library[0])].outputs[0].get();
  const Node* m2_stored = s.kernels[size_t(library[1])].outputs[0].get();
  const int k_e1 = producer(e1.node().get()), k_out = producer(out.node().get());
  ASSERT_GT(k_e1, library[0]);
  ASSERT_GT(library[1], k_e1);
  ASSERT_GT(k_out, library[1]);
  EXPECT_EQ(released_after(m1_stored), k_e1) << "m1 is read only by e1's kernel";
  EXPECT_EQ(released_after(e1.node().get()), k_out)
      << "e1 is read by the second matmul and, last, by out's kernel";
  EXPECT_EQ(released_after(m2_stored), k_out);
  EXPECT_EQ(released_after(out.node().get()), -1) << "a target is never released";
  // The realized inputs are released after their last reader too (the tensors still hold them).
  EXPECT_EQ(released_after(x.node().get()), library[0]);
  EXPECT_EQ(released_after(w.node().get()), library[1]);
  // Every node the schedule refers to is released exactly once (or kept as a target).
  size_t listed = live.unused.size();
  for (const auto& r : live.release_after) listed += r.size();
  std::vector<const Node*> all;
  for (const Kernel& k : s.kernels) {
    for (const auto& n : k.nodes) all.push_back(n.get());
    for (const auto& n : k.outputs) all.push_back(n.get());
    for (const auto& n : k.inlined) all.push_back(n.get());
    for (const auto& in : k.inputs) all.push_back(in.base.get());
  }
  for (const auto& n : s.inlined) all.push_back(n.get());
  std::sort(all.begin(), all.end());
  const size_t distinct = size_t(std::unique(all.begin(), all.end()) - all.begin());
  EXPECT_EQ(listed + 1, distinct) << "all but the target";
}

TEST(Liveness, KernelOrderRunsEachLastReaderEarly) {
  // The fused executor's kernel order (memory_order); the reference backend runs nodes in the
  // graph's depth-first order, which keeps every h below alive to the end.
  FusionOn on;
  // h_i = relu(h_{i-1} @ w) on (64, 64) float32 (16 KiB per value), and a small side result
  // s_i = h_i @ v (64, 1) of each, like a weight gradient. The scheduler's order computes the whole
  // chain first (the target h_N is found first) and the side results last, so every h_i would wait
  // for its side result to the end: N + 1 values live.
  constexpr int kLayers = 10;
  constexpr int64_t kChunk = 64 * 64 * 4;
  const Tensor x = Tensor::randn({64, 64}).realize();
  const Tensor w = (Tensor::randn({64, 64}) * 0.125).realize();
  const Tensor v = Tensor::randn({64, 1}).realize();
  std::vector<std::vector<float>> expect;
  {
    Tensor e = x;
    for (int i = 0; i < kLayers; ++i) {
      e = e.matmul(w).relu().realize();
      expect.push_back(e.matmul(v).to_vector<float>());
    }
  }
  Tensor h = x;
  std::vector<Tensor> side;
  for (int i = 0; i < kLayers; ++i) {
    h = h.matmul(w).relu();
    side.push_back(h.matmul(v));
  }
  std::vector<Tensor> targets{h};  // h first: the scheduler's order follows the targets' order
  targets.insert(targets.end(), side.begin(), side.end());
  Buffer::reset_peak_bytes();
  const int64_t base = Buffer::live_bytes();
  realize(targets);
  const int64_t peak = Buffer::peak_bytes() - base;
  std::cout << "chain of " << kLayers << " layers with a side result each: peak " << peak
            << " bytes; sum of intermediates " << 2 * kLayers * kChunk << "\n";
  // Each side result runs as soon as its h is ready, and the next matmul then frees h: at most the
  // matmul result, h and the next matmul result at a time, plus the small side results.
  EXPECT_LE(peak, 3 * kChunk + kLayers * 64 * 4);
  for (int i = 0; i < kLayers; ++i) {
    const auto got = side[size_t(i)].to_vector<float>();
    for (size_t j = 0; j < got.size(); ++j)
      ASSERT_NEAR(got[j], expect[size_t(i)][j], 1e-4 * (1 + std::abs(expect[size_t(i)][j]))) << i << " " << j;
  }
}

// Memory handed over from outside (NumPy arrays from Python): used in place, never freed or cached
// by aether, its owner released when the last tensor reading it dies.
TEST(Allocator, ExternalMemoryIsUsedInPlaceAndItsOwnerReleased) {
  std::vector<float> host = {1, 2, 3, 4, 5, 6};
  auto released = std::make_shared<int>(0);
  {
    std::shared_ptr<const void> owner(new int(0), [released](const void* p) {
      ++*released;
      delete static_cast<const int*>(p);
    });
    const auto before = Buffer::alloc_stats();
    Tensor t = Tensor::from_external(host.data(), {2, 3}, DType::float32, std::move(owner));
    EXPECT_TRUE(t.node()->buffer->external());
    EXPECT_EQ(t.node()->buffer->data(), host.data());  // no copy
    EXPECT_EQ(Buffer::alloc_stats().buffers, before.buffers);
    host[5] = 60;  // the caller's writes show in values computed afterwards
    Tensor y = (t * 2).sum().realize();
    EXPECT_EQ(y.item<float>(), 2 * (1 + 2 + 3 + 4 + 5 + 60));
    EXPECT_EQ(*released, 0);
    Tensor view = t.slice(1, 1, 3);  // a view keeps the memory alive
    t = Tensor();
    EXPECT_EQ(*released, 0);
    EXPECT_EQ(view.to_vector<float>(), (std::vector<float>{2, 3, 5, 60}));
  }
  EXPECT_EQ(*released, 1);
  EXPECT_EQ(host[0], 1);  // never written
}
