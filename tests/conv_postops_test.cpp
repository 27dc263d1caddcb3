// Conv post-ops (aether issue 5): the scheduler merges the elementwise chain on a float32 conv's
// output that oneDNN runs as post-ops (bias, per-channel add/sub/mul as in eval batch norm, a
// residual add, ReLU) into the conv's library kernel; the CPU executor runs it as one oneDNN call.
// Values are checked against the naive float64 conv with the ops applied by hand; gradients
// against the reference backend. Also: blocked conv weights are reordered once per weights buffer
// and a freed buffer's stale blocked copy is never used.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <random>
#include <vector>

#include "aether/aether.h"
#include "aether/ops/conv.h"
#include "aether/ops/nn.h"
#include "backend/cpu/kernels.h"
#include "core/config.h"
#include "schedule/schedule.h"

using namespace aether;

namespace {

std::vector<float> values(int64_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(size_t(n), 0.f);
  for (float& x : v) x = u(rng);
  return v;
}
Tensor make(const Shape& s, unsigned seed) {
  return Tensor::from_vector<float>(values(numel(s), seed), s).realize();
}

// The naive conv in float64: x (N,H,W,C), w (O,KH,KW,C) -> (N,OH,OW,O).
std::vector<double> conv_ref(const Tensor& x, const Tensor& w, const Conv2dArg& a) {
  const Shape &xs = x.shape(), &ws = w.shape();
  const int64_t OH = (xs[1] + a.pad_top + a.pad_bottom - ws[1]) / a.stride_h + 1;
  const int64_t OW = (xs[2] + a.pad_left + a.pad_right - ws[2]) / a.stride_w + 1;
  const ConvGeom g{xs[0], xs[1], xs[2], xs[3], ws[0], ws[1], ws[2], OH, OW, a};
  const auto xv = x.to_vector<double>(), wv = w.to_vector<double>();
  std::vector<double> y(size_t(xs[0] * OH * OW * ws[0]));
  cpu::conv2d_fwd_naive(DType::float64, xv.data(), wv.data(), y.data(), g);
  return y;
}

Conv2dArg arg_of(int64_t stride, int64_t pad) {
  Conv2dArg a;
  a.stride_h = a.stride_w = stride;
  a.pad_top = a.pad_bottom = a.pad_left = a.pad_right = pad;
  return a;
}

void expect_close(const std::vector<double>& got, const std::vector<double>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], 1e-4 * scale) << what << " at flat index " << i;
}

// The library kernels of a schedule: how many compute nodes each holds (views of operands aside).
std::vector<size_t> library_sizes(const Schedule& s) {
  std::vector<size_t> out;
  for (const Kernel& k : s.kernels)
    if (k.kind == KernelKind::Library)
      out.push_back(size_t(std::count_if(k.nodes.begin(), k.nodes.end(), [](const NodePtr& n) {
        return op_kind(n->op) != OpKind::Movement;
      })));
  return out;
}

struct Case {
  int64_t C, O, stride, pad;
};
const Case kCases[] = {{3, 8, 1, 1}, {5, 13, 2, 1}, {3, 13, 2, 0}};

// Realizes `out`; on the fused executor (not under AETHER_FUSE=0), checks the merged conv ran as
// one oneDNN call.
std::vector<double> realize_fused(const Tensor& out) {
  const int64_t before = cpu::conv_postop_calls();
  Tensor t = out;
  t.realize();
  if (fusion_enabled() && library_impl() == LibraryImpl::onednn) {
    EXPECT_EQ(cpu::conv_postop_calls(), before + 1) << "the merged conv did not run with oneDNN post-ops";
  }
  return t.to_vector<double>();
}

}  // namespace

TEST(ConvPostOps, BiasMergesAndMatches) {
  for (const Case& c : kCases) {
    const Tensor x = make({2, 7, 7, c.C}, 1), w = make({c.O, 3, 3, c.C}, 2), b = make({c.O}, 3);
    const Tensor y = conv2d(x, w, b, Conv2dOptions{.stride = c.stride, .padding = c.pad});
    const Schedule s = schedule({y});
    EXPECT_EQ(s.library_calls, 1);
    EXPECT_EQ(s.kernel_count, 0);
    EXPECT_EQ(library_sizes(s), std::vector<size_t>{2});  // conv, + b
    auto want = conv_ref(x, w, arg_of(c.stride, c.pad));
    const auto bv = b.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) want[i] += bv[i % size_t(c.O)];
    expect_close(realize_fused(y), want, "conv + bias");
  }
}

TEST(ConvPostOps, BiasReluMergesAndMatches) {
  for (const Case& c : kCases) {
    const Tensor x = make({2, 7, 7, c.C}, 4), w = make({c.O, 3, 3, c.C}, 5), b = make({c.O}, 6);
    const Tensor y = conv2d(x, w, b, Conv2dOptions{.stride = c.stride, .padding = c.pad}).relu();
    const Schedule s = schedule({y});
    EXPECT_EQ(s.kernel_count, 0);
    EXPECT_EQ(library_sizes(s), std::vector<size_t>{4});  // conv, + b, <= 0, where
    auto want = conv_ref(x, w, arg_of(c.stride, c.pad));
    const auto bv = b.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) want[i] = std::max(0.0, want[i] + bv[i % size_t(c.O)]);
    expect_close(realize_fused(y), want, "conv + bias + relu");
  }
}

TEST(ConvPostOps, EvalBatchNormReluMergesAndMatches) {
  for (const Case& c : kCases) {
    const Tensor x = make({2, 7, 7, c.C}, 7), w = make({c.O, 3, 3, c.C}, 8);
    const Tensor gamma = make({c.O}, 9), beta = make({c.O}, 10), mean = make({c.O}, 11);
    const Tensor var = (make({c.O}, 12) + 1.5).realize();  // in [0.5, 2.5)
    const Tensor h = conv2d(x, w, Tensor(), Conv2dOptions{.stride = c.stride, .padding = c.pad});
    const Tensor y = batch_norm(h, gamma, beta, mean, var, /*training=*/false, 0.1, 1e-5).out.relu();
    const Schedule s = schedule({y});
    EXPECT_EQ(s.library_calls, 1);
    EXPECT_EQ(s.kernel_count, 1);  // the (O) scale rsqrt(var + eps) * gamma, stored for the conv
    EXPECT_EQ(library_sizes(s), std::vector<size_t>{6});  // conv, - mean, * scale, + beta, <= 0, where
    auto want = conv_ref(x, w, arg_of(c.stride, c.pad));
    const auto g = gamma.to_vector<double>(), be = beta.to_vector<double>(), m = mean.to_vector<double>(),
               v = var.to_vector<double>();
    for (size_t i = 0; i < want.size(); ++i) {
      const size_t o = i % size_t(c.O);
      want[i] = std::max(0.0, (want[i] - m[o]) / std::sqrt(v[o] + 1e-5) * g[o] + be[o]);
    }
    expect_close(realize_fused(y), want, "conv + eval batch norm + relu");
  }
}

TEST(ConvPostOps, ResidualAddMergesAndMatches) {
  for (const Case& c : kCases) {
    const Tensor x = make({2, 7, 7, c.C}, 13), w = make({c.O, 3, 3, c.C}, 14), b = make({c.O}, 15);
    const Conv2dOptions opt{.stride = c.stride, .padding = c.pad};
    const int64_t OH = (7 + 2 * c.pad - 3) / c.stride + 1;
    const Tensor r = make({2, OH, OH, c.O}, 16);
    for (bool relu : {false, true}) {
      Tensor y = conv2d(x, w, b, opt) + r;
      if (relu) y = y.relu();
      const Schedule s = schedule({y});
      EXPECT_EQ(s.kernel_count, 0);
      EXPECT_EQ(library_sizes(s), std::vector<size_t>{relu ? 5u : 3u});
      auto want = conv_ref(x, w, arg_of(c.stride, c.pad));
      const auto bv = b.to_vector<double>(), rv = r.to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i) {
        want[i] += bv[i % size_t(c.O)] + rv[i];
        if (relu) want[i] = std::max(0.0, want[i]);
      }
      expect_close(realize_fused(y), want, relu ? "conv + bias + residual + relu" : "conv + bias + residual");
    }
  }
}

TEST(ConvPostOps, DoesNotMergeWhatItMustNot) {
  const Tensor x = make({2, 7, 7, 3}, 17), w = make({8, 3, 3, 3}, 18), b = make({8}, 19);
  const Tensor h = conv2d(x, w, Tensor(), Conv2dOptions{.padding = 1});  // (2, 7, 7, 8)
  // The conv output is also requested, or also read by another kernel.
  EXPECT_EQ(library_sizes(schedule({(h + b).relu(), h})), std::vector<size_t>{1});
  EXPECT_EQ(library_sizes(schedule({(h + b).relu(), h.sum()})), std::vector<size_t>{1});
  // Batch norm in training mode: its statistics read the conv output.
  const Tensor bn = batch_norm(h, b, b, Tensor(), Tensor(), /*training=*/true).out.relu();
  EXPECT_EQ(library_sizes(schedule({bn})), std::vector<size_t>{1});
  // Operands that are neither per channel nor a dense tensor of the output's shape.
  EXPECT_EQ(library_sizes(schedule({h + make({7, 1}, 20)})), std::vector<size_t>{1});        // per column
  EXPECT_EQ(library_sizes(schedule({h * 2.0})), std::vector<size_t>{1});                     // a scalar
  EXPECT_EQ(library_sizes(schedule({h * make({2, 7, 7, 8}, 21)})), std::vector<size_t>{1});  // dense mul
  EXPECT_EQ(library_sizes(schedule({make({8}, 22) - h})), std::vector<size_t>{1});           // b - y
  // An intermediate value of the chain also requested: the ReLU reads it in the same elementwise
  // kernel, which then would read the conv kernel's output: nothing merges.
  const Tensor hb = h + b;
  EXPECT_EQ(library_sizes(schedule({hb.relu(), hb})), std::vector<size_t>{1});
  // float64 convs run the naive loops: nothing to fuse into.
  const Tensor h64 = conv2d(x.cast(DType::float64), w.cast(DType::float64));
  EXPECT_EQ(library_sizes(schedule({h64.relu()})), std::vector<size_t>{1});
  // AETHER_POSTOPS=0 (config().postops) turns the pass off.
  config().postops = false;
  const auto off = library_sizes(schedule({(h + b).relu()}));
  config().postops = true;
  EXPECT_EQ(off, std::vector<size_t>{1});
  EXPECT_EQ(library_sizes(schedule({(h + b).relu()})), std::vector<size_t>{4});
}

TEST(ConvPostOps, GradientsThroughMergedConvBiasRelu) {
  // Forward realized alone (merged, one oneDNN call), then the backward; and a joint step. Both
  // compared with the reference backend (one primitive at a time, no scheduler).
  const Tensor x0 = make({2, 7, 7, 5}, 23), w0 = make({13, 3, 3, 5}, 24), b0 = make({13}, 25);
  const Tensor m = make({2, 4, 4, 13}, 26);
  const Conv2dOptions opt{.stride = 2, .padding = 1};
  const bool fusion_was = fusion_enabled();
  auto grads = [&](bool fused, bool forward_first) {
    set_fusion(fused);
    Tensor x = x0.detach(), w = w0.detach(), b = b0.detach();
    x.set_requires_grad();
    w.set_requires_grad();
    b.set_requires_grad();
    Tensor y = conv2d(x, w, b, opt).relu();
    if (fused && forward_first) {
      EXPECT_EQ(library_sizes(schedule({y})), std::vector<size_t>{4});
      y.realize();
    }
    Tensor loss = (y * m).sum();
    loss.backward();
    std::vector<std::vector<double>> out{y.to_vector<double>(), x.grad().to_vector<double>(),
                                         w.grad().to_vector<double>(), b.grad().to_vector<double>()};
    set_fusion(fusion_was);
    return out;
  };
  const auto want = grads(false, false);
  for (bool forward_first : {true, false}) {
    const auto got = grads(true, forward_first);
    const char* names[] = {"y", "dx", "dw", "db"};
    for (size_t i = 0; i < want.size(); ++i) expect_close(got[i], want[i], names[i]);
  }
}

TEST(ConvWeights, ReorderedOncePerWeightsBuffer) {
  const Tensor x = make({2, 7, 7, 16}, 27), w = make({32, 3, 3, 16}, 28);
  const Conv2dOptions opt{.padding = 1};
  const auto want = conv_ref(x, w, arg_of(1, 1));
  const int64_t r0 = cpu::conv_weight_reorders();
  expect_close(conv2d(x, w, Tensor(), opt).realize().to_vector<double>(), want, "first call");
  const int64_t r1 = cpu::conv_weight_reorders();
  for (int i = 0; i < 3; ++i)
    expect_close(conv2d(x, w, Tensor(), opt).realize().to_vector<double>(), want, "again");
  EXPECT_LE(r1 - r0, 1);  // 0 when oneDNN reads OHWI directly
  EXPECT_EQ(cpu::conv_weight_reorders(), r1) << "the same weights buffer was reordered again";
}

TEST(ConvWeights, FreedWeightsBufferIsNeverReusedStale) {
  // Weights in a Buffer that is freed, then new values in a new Buffer of the same size (the host
  // block cache hands back the same block): the conv must see the new values.
  const ConvGeom g{2, 7, 7, 16, 32, 3, 3, 7, 7, arg_of(1, 1)};
  const int64_t wn = 32 * 3 * 3 * 16;
  const auto xv = values(2 * 7 * 7 * 16, 29);
  std::vector<float> y(2 * 7 * 7 * 32), want(y.size());
  int same_block = 0;
  const void* last = nullptr;
  for (unsigned round = 0; round < 4; ++round) {
    auto wb = std::make_shared<Buffer>(Device::cpu(), DType::float32, wn, /*zero_fill=*/false);
    same_block += wb->data() == last;
    last = wb->data();
    const auto wv = values(wn, 30 + round);
    std::copy(wv.begin(), wv.end(), wb->as<float>());
    if (!cpu::conv2d_fwd_onednn(DType::float32, xv.data(), wb->data(), y.data(), g, wb))
      GTEST_SKIP() << "oneDNN declines float32 convs here";
    cpu::conv2d_fwd_naive(DType::float32, xv.data(), wb->data(), want.data(), g);
    for (size_t i = 0; i < y.size(); ++i)
      ASSERT_NEAR(y[i], want[i], 1e-4) << "round " << round << " at " << i;
  }
  EXPECT_GT(same_block, 0) << "the test meant to reuse a freed block: the host block cache changed?";
}
