// Lazy graph tests: nothing computes before realize, realized buffers are freed as soon as no
// tensor needs them, intermediates of a chain are freed during its realize (bounded peak memory),
// several outputs realize in one schedule, and autograd releases what it saved.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "aether/aether.h"
#include "aether/backend/backend.h"

using namespace aether;

namespace {
std::vector<float> ramp(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i % 97) / 97.0f;
  return v;
}
}  // namespace

TEST(Graph, NothingComputesBeforeRealize) {
  const Tensor a = Tensor::from_vector<float>(ramp(1000)), b = Tensor::from_vector<float>(ramp(1000));
  const int64_t before = Buffer::live_bytes();
  const Tensor c = (a + b).exp() * 2.0;
  const Tensor s = c.sum();
  EXPECT_FALSE(c.is_realized());
  EXPECT_FALSE(s.is_realized());
  EXPECT_EQ(Buffer::live_bytes(), before);  // no buffer exists yet
  EXPECT_EQ(c.shape(), (Shape{1000}));      // shape and dtype are known without computing
  EXPECT_EQ(c.dtype(), DType::float32);
  s.realize();
  EXPECT_TRUE(s.is_realized());
  // Reference: c's node was computed on the way to s (c shares it). Fused: one kernel computes the
  // sum of (a + b).exp() * 2 without storing c.
  EXPECT_EQ(c.is_realized(), !fusion_enabled());
}

TEST(Graph, RealizeMarksNodesAndDropsSources) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3});
  const Tensor b = a.exp();
  const Tensor c = b + 1.0;
  EXPECT_FALSE(b.is_realized());
  EXPECT_FALSE(c.node()->srcs.empty());
  c.realize();
  EXPECT_TRUE(c.is_realized());
  // The reference backend computes b on the way (one primitive at a time); the fused executor
  // computes exp(a) + 1 in one kernel and stores only c. Either way b's value is right when asked.
  EXPECT_EQ(b.is_realized(), !fusion_enabled());
  EXPECT_FLOAT_EQ(b.to_vector<float>()[2], std::exp(3.0f));
  EXPECT_TRUE(c.node()->srcs.empty());  // sources dropped once realized
  EXPECT_TRUE(c.node()->buffer != nullptr);
  const auto v = c.to_vector<float>();
  EXPECT_FLOAT_EQ(v[1], std::exp(2.0f) + 1.0f);
  c.realize();  // realizing again is a no-op
  EXPECT_EQ(c.to_vector<float>(), v);
}

TEST(Graph, BuffersFreedWhenUnused) {
  const int64_t before = Buffer::live_bytes();
  {
    const Tensor a = Tensor::from_vector<float>(ramp(4096));  // 16 KiB
    EXPECT_EQ(Buffer::live_bytes(), before + 4096 * 4);
    const Tensor b = (a * 3.0 + 1.0).realize();
    EXPECT_GE(Buffer::live_bytes(), before + 2 * 4096 * 4);
    const Tensor v = b.reshape({64, 64}).t().slice(0, 0, 64, 2);  // a view: no new buffer
    v.realize();
    EXPECT_EQ(v.node()->buffer.get(), b.node()->buffer.get());
  }
  EXPECT_EQ(Buffer::live_bytes(), before);  // everything freed with the last handle
  {
    Tensor x = Tensor::from_vector<float>(ramp(4096));
    const int64_t with_x = Buffer::live_bytes();
    Tensor y = (x + 1.0).realize();
    x = Tensor();  // y no longer needs x (its sources were dropped): x's buffer goes now
    EXPECT_EQ(Buffer::live_bytes(), with_x);
    y = Tensor();
    EXPECT_EQ(Buffer::live_bytes(), before);
  }
  {
    // An unrealized graph holds no buffers of its own; dropping it frees nothing but its inputs.
    Tensor x = Tensor::from_vector<float>(ramp(1024));
    Tensor y = x.exp().log().sqrt();
    x = Tensor();
    EXPECT_EQ(Buffer::live_bytes(), before + 1024 * 4);  // y keeps x's buffer alive through its sources
    y = Tensor();
    EXPECT_EQ(Buffer::live_bytes(), before);
  }
}

TEST(Graph, IntermediatesFreedDuringRealize) {
  const int64_t n = 1 << 18;  // 1 MiB of float32
  const int64_t bytes = n * 4;
  Tensor x = Tensor::from_vector<float>(ramp(n));
  const int64_t before = Buffer::live_bytes();
  // Precondition for measuring: the process-wide peak so far is below what a leaky chain would reach.
  ASSERT_LT(Buffer::peak_bytes(), before + 4 * bytes) << "peak already high; run this test alone";
  Tensor y = x;
  for (int i = 0; i < 12; ++i) y = (i % 2 ? y * 1.5 : y + 0.25);  // 12 elementwise steps, 12 MiB if kept
  y.realize();
  // Only the input, one source and one output (plus tiny constants) are ever alive together.
  EXPECT_LE(Buffer::peak_bytes(), before + 3 * bytes);
  EXPECT_LE(Buffer::live_bytes(), before + bytes + 4096);  // only y's buffer remains
  const auto v = y.to_vector<float>();
  float want = ramp(n)[5];
  for (int i = 0; i < 12; ++i) want = (i % 2 ? want * 1.5f : want + 0.25f);
  EXPECT_FLOAT_EQ(v[5], want);
}

TEST(Graph, RealizeSeveralOutputsAtOnce) {
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4});
  const Tensor shared = x.exp();
  const Tensor a = shared + 1.0, b = shared * 2.0, c = x.sum();
  realize({a, b, c});
  EXPECT_TRUE(a.is_realized());
  EXPECT_TRUE(b.is_realized());
  EXPECT_TRUE(c.is_realized());
  // Reference: shared is computed once, for both. Fused: a and b are one kernel computing exp once
  // per element; shared itself is not stored.
  EXPECT_EQ(shared.is_realized(), !fusion_enabled());
  EXPECT_FLOAT_EQ(a.to_vector<float>()[2], std::exp(3.0f) + 1.0f);
  EXPECT_FLOAT_EQ(b.to_vector<float>()[3], std::exp(4.0f) * 2.0f);
  EXPECT_EQ(c.item<float>(), 10.0f);
  // Already-realized and repeated tensors are fine.
  const Tensor d = a - b;
  realize({d, a, d});
  EXPECT_TRUE(d.is_realized());
  realize({});
}

TEST(Graph, BackwardReleasesSavedValues) {
  const int64_t before = Buffer::live_bytes();
  {
    const Tensor w = Tensor::from_vector<float>(ramp(4096)).set_requires_grad();
    {
      const Tensor loss = (w.exp() * w).sum();
      loss.backward();
      w.grad().realize();
    }
    // Only w and its gradient remain.
    EXPECT_LE(Buffer::live_bytes(), before + 2 * 4096 * 4 + 4096);
  }
  EXPECT_EQ(Buffer::live_bytes(), before);
}
