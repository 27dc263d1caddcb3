// Packed conv weights (aether issue 5): a weight gradient stays in the layout oneDNN's
// backward-weights primitive computes it in (a Buffer with a Layout, aether/core/layout.h), the
// optimizer's elementwise kernels keep that layout, the forward reads it as it is and only the
// backward-data primitive reorders it. Checked here: the Layout's offsets against oneDNN's own
// order and the reference loops, every reader (elementwise, reductions, views, the reference
// backend, to_vector, safetensors) against row-major values, and training steps with packed
// weights against the same steps with row-major weights, with the reorders each step makes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/core/layout.h"
#include "aether/io/safetensors.h"
#include "aether/ops/conv.h"
#include "aether/optim/optimizer.h"
#include "backend/cpu/kernels.h"
#include "test_values.h"

using namespace aether;

namespace {

std::vector<float> values(int64_t n, uint32_t seed) { return testing_values::values(n, seed, -1, 1); }
Tensor make(const Shape& s, uint32_t seed) { return testing_values::input(s, seed, -1, 1).realize(); }

void expect_close(const std::vector<double>& got, const std::vector<double>& want, const char* what,
                  double rel = 1e-4) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double scale = 1;
  for (double v : want) scale = std::max(scale, std::abs(v));
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], rel * scale) << what << " at " << i;
}

// Restores the process-wide switches a test changes.
struct Restore {
  bool packed = packed_conv_weights(), fused = fusion_enabled();
  LibraryImpl impl = library_impl();
  ~Restore() {
    set_packed_conv_weights(packed);
    set_fusion(fused);
    set_library_impl(impl);
  }
};

bool onednn_fused() { return fusion_enabled() && library_impl() == LibraryImpl::onednn; }

// The weight gradient of loss = sum(conv(x, w) * m), computed with the current switches.
Tensor weight_grad(const Tensor& x, const Tensor& w0, const Tensor& m, const Conv2dOptions& opt) {
  Tensor w = w0.detach();
  w.set_requires_grad();
  (conv2d(x, w, Tensor(), opt) * m).sum().backward();
  return w.grad().realize();
}

}  // namespace

TEST(Layout, OffsetsOfABlockedOrder) {
  // w (O,KH,KW,C) = (2,1,2,4) with C in blocks of 2 outermost: offset = (c/2)*8 + o*4 + kw*2 + c%2.
  const auto l = permutation_layout(Layout{{2, 1, 2, 4}, {4, 0, 2, 8}, {{3, 2}}, "aBcd2b", nullptr});
  ASSERT_NE(l, nullptr);
  for (int64_t o = 0; o < 2; ++o)
    for (int64_t kw = 0; kw < 2; ++kw)
      for (int64_t c = 0; c < 4; ++c) {
        const int64_t idx[4] = {o, 0, kw, c};
        EXPECT_EQ(l->offset(idx), (c / 2) * 8 + o * 4 + kw * 2 + c % 2);
      }
  // Two blocks of one dim (4 = 2 x 2, the inner one innermost), like oneDNN's "4i16o4i".
  const auto two = permutation_layout(Layout{{4}, {4}, {{0, 2}, {0, 2}}, "", nullptr});
  ASSERT_NE(two, nullptr);
  for (int64_t i = 0; i < 4; ++i) EXPECT_EQ(two->offset(&i), i);  // (i/2)*2 + i%2: the identity
  std::vector<float> rm(16), packed(16), back(16);
  std::iota(rm.begin(), rm.end(), 0.f);
  pack(*l, rm.data(), packed.data(), sizeof(float));
  EXPECT_EQ(packed[8], 2.f) << "c = 2 of (o 0, kw 0) starts the second block";
  unpack(*l, packed.data(), back.data(), sizeof(float));
  EXPECT_EQ(back, rm);
}

TEST(Layout, OnlyPermutationsAreAccepted) {
  EXPECT_EQ(permutation_layout(Layout{{2, 3}, {3, 2}, {}, "", nullptr}), nullptr) << "overlapping";
  EXPECT_EQ(permutation_layout(Layout{{2, 3}, {4, 1}, {}, "", nullptr}), nullptr) << "a gap (padding)";
  EXPECT_EQ(permutation_layout(Layout{{3}, {1}, {{0, 2}}, "", nullptr}), nullptr) << "a padded block";
  EXPECT_EQ(permutation_layout(Layout{{2, 3}, {3}, {}, "", nullptr}), nullptr) << "strides for 1 of 2 dims";
  EXPECT_NE(permutation_layout(Layout{{2, 3}, {1, 2}, {}, "", nullptr}), nullptr) << "column-major";
}

TEST(ConvPacked, OneDnnOrderMatchesTheLayout) {
  // The backward-weights primitive writes dw in its own order; unpacked by the reference loop it
  // must equal the naive gradient, and fwd / bwd_data must read it back correctly.
  const cpu::ConvGeom g{2, 6, 6, 32, 48, 3, 3, 6, 6, Conv2dArg{1, 1, 1, 1, 1, 1, 1, 1, 1}};
  const int64_t xn = 2 * 6 * 6 * 32, yn = 2 * 6 * 6 * 48, wn = 48 * 3 * 3 * 32;
  const auto x = values(xn, 1), dy = values(yn, 2);
  std::vector<float> want(static_cast<size_t>(wn));
  cpu::conv2d_bwd_weight_naive(DType::float32, x.data(), dy.data(), want.data(), g);
  auto dw = std::make_shared<Buffer>(Device::cpu(), DType::float32, wn, /*zero_fill=*/false);
  std::shared_ptr<const Layout> l;
  Restore restore;
  set_packed_conv_weights(true);
  if (!cpu::conv2d_bwd_weight_onednn(DType::float32, x.data(), dy.data(), dw->data(), g, &l))
    GTEST_SKIP() << "oneDNN declines float32 convs here";
  if (!l) GTEST_SKIP() << "oneDNN computes these weights row-major here: nothing is packed";
  EXPECT_EQ(l->shape, (Shape{48, 3, 3, 32}));
  std::vector<float> got(static_cast<size_t>(wn));
  unpack(*l, dw->data(), got.data(), sizeof(float));
  expect_close({got.begin(), got.end()}, {want.begin(), want.end()}, ("dw in " + l->name).c_str());
  // Read back by the forward and backward-data primitives, as packed weights.
  dw->set_layout(l);
  std::vector<float> y(static_cast<size_t>(yn)), y_want(static_cast<size_t>(yn)), dx(static_cast<size_t>(xn)),
      dx_want(static_cast<size_t>(xn));
  ASSERT_TRUE(cpu::conv2d_fwd_onednn(DType::float32, x.data(), dw->data(), y.data(), g, dw));
  cpu::conv2d_fwd_naive(DType::float32, x.data(), got.data(), y_want.data(), g);
  expect_close({y.begin(), y.end()}, {y_want.begin(), y_want.end()}, "y from packed w");
  ASSERT_TRUE(cpu::conv2d_bwd_data_onednn(DType::float32, dy.data(), dw->data(), dx.data(), g, dw));
  cpu::conv2d_bwd_data_naive(DType::float32, dy.data(), got.data(), dx_want.data(), g);
  expect_close({dx.begin(), dx.end()}, {dx_want.begin(), dx_want.end()}, "dx from packed w");
  // Turned off, the gradient comes back row-major.
  set_packed_conv_weights(false);
  std::vector<float> plain(static_cast<size_t>(wn));
  ASSERT_TRUE(cpu::conv2d_bwd_weight_onednn(DType::float32, x.data(), dy.data(), plain.data(), g, &l));
  EXPECT_EQ(l, nullptr);
  expect_close({plain.begin(), plain.end()}, {want.begin(), want.end()}, "row-major dw");
}

TEST(ConvPacked, EveryReaderSeesRowMajorValues) {
  Restore restore;
  const Tensor x = make({2, 5, 5, 16}, 3), w = make({32, 3, 3, 16}, 4), m = make({2, 5, 5, 32}, 5);
  const Conv2dOptions opt{.padding = 1};
  set_packed_conv_weights(false);
  const Tensor plain = weight_grad(x, w, m, opt);
  ASSERT_EQ(plain.node()->buffer->layout(), nullptr);
  const auto want = plain.to_vector<double>();
  set_packed_conv_weights(true);
  const Tensor g = weight_grad(x, w, m, opt);
  if (onednn_fused()) {
    EXPECT_NE(g.node()->buffer->layout(), nullptr) << "the gradient was not left packed";
  }
  expect_close(g.to_vector<double>(), want, "to_vector");
  // Elementwise with itself and with row-major operands; the result keeps the layout when fused.
  const Tensor r = make({32, 3, 3, 16}, 6);
  const auto rv = r.to_vector<double>();
  const Tensor e = (g * 2.0 + r - g).realize();
  if (onednn_fused()) {
    EXPECT_NE(e.node()->buffer->layout(), nullptr) << "an elementwise kernel dropped the layout";
  }
  std::vector<double> ew(want.size());
  for (size_t i = 0; i < ew.size(); ++i) ew[i] = want[i] * 2 + rv[i] - want[i];
  expect_close(e.to_vector<double>(), ew, "g * 2 + r - g");
  // A reduction, a broadcast, views and a library op read it row-major.
  EXPECT_NEAR(g.sum().item<double>(), std::accumulate(want.begin(), want.end(), 0.0), 1e-3);
  const auto ch = e.sum({0, 1, 2}).to_vector<double>();  // per input channel (16)
  for (int64_t c = 0; c < 16; ++c) {
    double s = 0;
    for (size_t i = size_t(c); i < ew.size(); i += 16) s += ew[i];
    EXPECT_NEAR(ch[size_t(c)], s, 1e-3) << "channel " << c;
  }
  const auto bias = (e + Tensor::from_vector<float>(values(16, 7), {16})).to_vector<double>();
  const auto b16 = values(16, 7);
  for (size_t i = 0; i < bias.size(); ++i) ASSERT_NEAR(bias[i], ew[i] + b16[i % 16], 1e-4) << i;
  const auto perm = e.permute({3, 0, 1, 2}).to_vector<double>();  // (C,O,KH,KW)
  for (int64_t c = 0; c < 16; ++c)
    for (int64_t k = 0; k < 32 * 9; ++k)
      ASSERT_NEAR(perm[size_t(c * 288 + k)], ew[size_t(k * 16 + c)], 1e-5) << c << "," << k;
  const auto sl = e.slice(0, 1, 2).to_vector<double>();  // output channel 1
  for (size_t i = 0; i < sl.size(); ++i) ASSERT_NEAR(sl[i], ew[144 + i], 1e-5) << i;
  const auto flat = e.reshape({32, 144}).matmul(Tensor::ones({144, 1})).to_vector<double>();
  for (int64_t o = 0; o < 32; ++o)
    EXPECT_NEAR(flat[size_t(o)], std::accumulate(ew.begin() + o * 144, ew.begin() + (o + 1) * 144, 0.0),
                1e-3);
  // The reference backend, and a conv reading the packed tensor as its weights.
  set_fusion(false);
  expect_close((g * 3.0).to_vector<double>(),
               [&] {
                 auto v = want;
                 for (double& d : v) d *= 3;
                 return v;
               }(),
               "reference backend");
  set_fusion(restore.fused);
  const Tensor y = conv2d(x, e, Tensor(), opt);
  const Tensor y_want =
      conv2d(x, Tensor::from_vector<double>(ew, {32, 3, 3, 16}).cast(DType::float32), Tensor(), opt);
  expect_close(y.to_vector<double>(), y_want.to_vector<double>(), "conv with packed weights");
  // Saved row-major.
  const auto file = read_safetensors(write_safetensors({{"e", e}}));
  expect_close(file.tensors.at(0).second.to_vector<double>(), ew, "safetensors");
}

// Two convs (3 -> 32 -> 32 channels), 4 steps of SGD (Nesterov momentum; also with gradient
// clipping) or AdamW, with a weight decay large enough (0.1) that applying it wrongly would show
// beyond the tolerance.
class ConvPackedTraining : public ::testing::TestWithParam<const char*> {};

TEST_P(ConvPackedTraining, StepsMatchRowMajorWeightsWithFewerReorders) {
  Restore restore;
  const Tensor x = make({4, 8, 8, 3}, 10), m = make({4, 8, 8, 32}, 11);
  const Tensor w1_0 = make({32, 3, 3, 3}, 12), w2_0 = make({32, 3, 3, 32}, 13);
  const Conv2dOptions opt{.padding = 1};
  struct Run {
    std::vector<std::vector<double>> values;  // the weights, then the optimizer state
    int64_t reorders = 0;                     // in the last step
    LayoutCopies copies;                      // in the last step
    bool w2_packed = false;                   // after the steps
  };
  auto train = [&](bool packed) {
    set_packed_conv_weights(packed);
    Tensor w1 = w1_0.detach(), w2 = w2_0.detach();
    w1.set_requires_grad();
    w2.set_requires_grad();
    std::unique_ptr<optim::Optimizer> o;
    const std::string kind = GetParam();
    if (kind != "adamw")
      o = std::make_unique<optim::SGD>(
          std::vector<Tensor>{w1, w2},
          optim::SGDOptions{.lr = 0.01, .momentum = 0.9, .nesterov = true, .weight_decay = 0.1});
    else
      o = std::make_unique<optim::AdamW>(std::vector<Tensor>{w1, w2},
                                         optim::AdamOptions{.lr = 0.01, .weight_decay = 0.1});
    Run r;
    for (int step = 0; step < 4; ++step) {
      const int64_t r0 = conv_weight_reorders();
      const LayoutCopies c0 = layout_copies();
      Tensor y = conv2d(conv2d(x, w1, Tensor(), opt).relu(), w2, Tensor(), opt);
      (y * m).mean().backward();
      if (kind == "sgd-clip") optim::clip_grad_norm({w1, w2}, 0.05);  // a full reduction, then g * scale
      o->step();
      o->zero_grad();
      r.reorders = conv_weight_reorders() - r0;
      r.copies = {layout_copies().packs - c0.packs, layout_copies().unpacks - c0.unpacks};
    }
    r.w2_packed = w2.node()->buffer->layout() != nullptr;
    r.values = {w1.to_vector<double>(), w2.to_vector<double>()};
    for (auto& [name, t] : o->named_state()) r.values.push_back(t->to_vector<double>());
    return r;
  };
  const Run plain = train(false), packed = train(true);
  ASSERT_EQ(packed.values.size(), plain.values.size());
  EXPECT_GE(plain.values.size(), 4u) << "weights and at least one state tensor each";
  for (size_t i = 0; i < plain.values.size(); ++i)
    expect_close(packed.values[i], plain.values[i], i < 2 ? "weights after 4 steps" : "optimizer state");
  EXPECT_FALSE(plain.w2_packed);
  if (!onednn_fused()) return;  // the reference backend computes optimizer updates row-major
  EXPECT_TRUE(packed.w2_packed) << "w2 is not kept in oneDNN's layout between steps";
  // Row-major: each conv's weights into the forward's layout, w2's into the backward-data's, each
  // gradient back to OHWI (up to 5). Packed: w2's into the backward-data's layout only, when
  // oneDNN picks another layout for it than for the backward-weights.
  EXPECT_LE(packed.reorders, 1);
  EXPECT_GE(plain.reorders, 3);
  EXPECT_EQ(packed.copies.packs, 0) << "a steady-state step packed a row-major operand";
  EXPECT_EQ(packed.copies.unpacks, 0) << "a steady-state step read packed weights row-major";
}

INSTANTIATE_TEST_SUITE_P(Optimizers, ConvPackedTraining, ::testing::Values("sgd", "adamw", "sgd-clip"));
