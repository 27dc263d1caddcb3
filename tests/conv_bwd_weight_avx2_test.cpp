// Tests of the AVX2 backward-weights convolution (src/backend/cpu/conv_bwd_weight_avx2.cpp): against
// the naive loop in float64 on the geometries it takes (ragged channel tiles, half channel blocks,
// chunks of rows and of whole images, padding wider than the kernel), across thread counts, the
// geometries it declines, and which kernel the fused executor picks at each ISA level.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/graph/primitives.h"
#include "backend/cpu/kernels.h"
#include "core/config.h"
#include "device_guard.h"
#include "oracle_util.h"

using namespace aether;

namespace {

bool cpu_has_avx2() { return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"); }

struct Geo {
  const char* name;
  int64_t N, H, W, C, O, KH, KW, pt, pb, pl, pr;
};

ConvGeom geom(const Geo& c) {
  Conv2dArg a;
  a.pad_top = c.pt, a.pad_bottom = c.pb, a.pad_left = c.pl, a.pad_right = c.pr;
  const int64_t OH = c.H + c.pt + c.pb - c.KH + 1, OW = c.W + c.pl + c.pr - c.KW + 1;
  return {c.N, c.H, c.W, c.C, c.O, c.KH, c.KW, OH, OW, a};
}

std::string describe(const Geo& c) {
  return std::string(c.name) + " N" + std::to_string(c.N) + " " + std::to_string(c.H) + "x" +
         std::to_string(c.W) + " C" + std::to_string(c.C) + " O" + std::to_string(c.O) + " k" +
         std::to_string(c.KH) + "x" + std::to_string(c.KW);
}

// Geometries the kernel takes (stride 1, dilation 1, one group, C % 8 == 0).
const std::vector<Geo>& taken() {
  static const std::vector<Geo> gs = {
      // 32x32: chunks of 8 output rows; O = 13: two full 6-wide tiles and a 1-wide one
      {"rows_ragged_o", 3, 32, 32, 16, 13, 3, 3, 1, 1, 1, 1},
      // 4x4 images: 16 whole images a chunk, the last chunk 1 image; C = 24: a 16 and an 8 block
      {"images_half_block", 17, 4, 4, 24, 7, 3, 3, 1, 1, 1, 1},
      {"rect_5x5_pad2", 2, 9, 7, 8, 6, 5, 5, 2, 2, 2, 2},
      {"one_by_one", 2, 6, 6, 32, 64, 1, 1, 0, 0, 0, 0},
      {"valid_no_pad", 2, 10, 12, 16, 5, 3, 3, 0, 0, 0, 0},
      {"asymmetric_pad", 3, 8, 11, 40, 9, 3, 2, 0, 2, 2, 0},
      // padding wider than the kernel: whole output rows and columns read only padding
      {"pad_beyond_kernel", 2, 5, 5, 8, 4, 3, 3, 3, 3, 3, 3},
      {"single_column", 4, 20, 1, 16, 3, 3, 1, 1, 1, 0, 0},
      {"rows_of_one_image", 1, 40, 9, 8, 11, 3, 3, 1, 1, 1, 1},
      // a max-pool's crop taken into the conv's backward (graph/grad.cpp): airbench's 15x15 -> 14x14
      {"crop_pad_after_0", 4, 15, 15, 64, 24, 3, 3, 1, 0, 1, 0},
      // big enough for the threads (>= 2^22 multiply-adds)
      {"cifarnet_like", 8, 16, 16, 32, 64, 3, 3, 1, 1, 1, 1},
  };
  return gs;
}

struct Operands {
  std::vector<double> x, dy;
};
Operands operands(const ConvGeom& g, uint64_t seed) {
  return {oracle_test::uniform(size_t(g.N * g.H * g.W * g.C), seed),
          oracle_test::uniform(size_t(g.N * g.OH * g.OW * g.O), seed + 1)};
}
std::vector<float> f32(const std::vector<double>& v) { return {v.begin(), v.end()}; }

// The naive loop in float64 on float32-rounded operands: the oracle (abs: the scale S of the bound).
std::vector<double> oracle(const ConvGeom& g, const Operands& op, bool abs) {
  std::vector<double> x(op.x.size()), dy(op.dy.size()), dw(size_t(g.O * g.KH * g.KW * g.C));
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = abs ? std::abs(double(float(op.x[i]))) : double(float(op.x[i]));
  for (size_t i = 0; i < dy.size(); ++i)
    dy[i] = abs ? std::abs(double(float(op.dy[i]))) : double(float(op.dy[i]));
  cpu::conv2d_bwd_weight_naive(DType::float64, x.data(), dy.data(), dw.data(), g);
  return dw;
}

std::vector<double> run_avx2(const ConvGeom& g, const Operands& op) {
  const auto x = f32(op.x), dy = f32(op.dy);
  std::vector<float> dw(size_t(g.O * g.KH * g.KW * g.C), 12345.f);  // overwritten, not added to
  EXPECT_TRUE(cpu::conv2d_bwd_weight_avx2(DType::float32, x.data(), dy.data(), dw.data(), g));
  return {dw.begin(), dw.end()};
}

// Sets OpenMP's thread count for one scope.
class Threads {
 public:
  explicit Threads(int n) : prev_(omp_get_max_threads()) { omp_set_num_threads(n); }
  ~Threads() { omp_set_num_threads(prev_); }

 private:
  int prev_;
};

}  // namespace

TEST(ConvBwdWeightAvx2, MatchesNaiveOnEveryGeometryItTakes) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  uint64_t seed = 100;
  for (const Geo& c : taken()) {
    const ConvGeom g = geom(c);
    const Operands op = operands(g, seed += 2);
    const int64_t calls = cpu::conv_bwd_weight_avx2_calls();
    const auto got = run_avx2(g, op);
    EXPECT_EQ(cpu::conv_bwd_weight_avx2_calls() - calls, 1) << describe(c);
    oracle_test::expect_within_sum_bound(got, oracle(g, op, false), oracle(g, op, true), g.N * g.OH * g.OW,
                                         describe(c));
  }
}

// One to four threads on geometries that split them differently: over chunks of positions (one copy
// of dw per group, added at the end), over blocks of output channels, and both (four threads on
// 2048 positions: two copies, each written by two threads). Each within the bound, and a repeated
// call with the same thread count gives the same bits.
TEST(ConvBwdWeightAvx2, ThreadCountsAgreeAndRepeatBitwise) {
  if (!cpu_has_avx2()) GTEST_SKIP() << "this CPU has no AVX2 and FMA";
  const std::vector<Geo> geos = {
      taken().back(),                                             // 2048 positions: 2 copies at most
      {"few_positions", 4, 8, 8, 64, 200, 3, 3, 1, 1, 1, 1},      // 256 positions: one copy, channels split
      {"many_positions", 16, 16, 16, 16, 20, 3, 3, 1, 1, 1, 1}};  // 4096: a copy per thread
  uint64_t seed = 7;
  for (const Geo& c : geos) {
    const ConvGeom g = geom(c);
    const Operands op = operands(g, seed += 2);
    const auto want = oracle(g, op, false), scale = oracle(g, op, true);
    for (int threads : {1, 2, 3, 4}) {
      const Threads t(threads);
      const auto a = run_avx2(g, op), b = run_avx2(g, op);
      oracle_test::expect_within_sum_bound(a, want, scale, g.N * g.OH * g.OW,
                                           describe(c) + " threads " + std::to_string(threads));
      EXPECT_EQ(a, b) << describe(c) << ", " << threads << " threads: two calls differ";
    }
  }
}

TEST(ConvBwdWeightAvx2, DeclinesWhatItDoesNotDoAndWritesNothing) {
  const ConvGeom base = geom({"base", 2, 6, 6, 16, 8, 3, 3, 1, 1, 1, 1});
  std::vector<float> x(size_t(base.N * base.H * base.W * base.C), 1.f),
      dy(size_t(base.N * 6 * 6 * base.O), 1.f);
  auto declines = [&](ConvGeom g, DType dt, const char* what) {
    std::vector<float> dw(size_t(g.O * g.KH * g.KW * g.C), 7.f);
    EXPECT_FALSE(cpu::conv2d_bwd_weight_avx2(dt, x.data(), dy.data(), dw.data(), g)) << what;
    EXPECT_EQ(dw, std::vector<float>(dw.size(), 7.f)) << what << ": wrote into dw";
  };
  ConvGeom g = base;
  g.arg.stride_h = 2, g.OH = 3;
  declines(g, DType::float32, "stride 2");
  g = base;
  g.arg.dil_w = 2, g.arg.pad_left = g.arg.pad_right = 2;
  declines(g, DType::float32, "dilation 2");
  g = base;
  g.arg.groups = 2;
  declines(g, DType::float32, "2 groups");
  g = base;
  g.C = 12;
  declines(g, DType::float32, "12 channels (not a multiple of 8)");
  declines(base, DType::bfloat16, "bfloat16");
  declines(base, DType::float64, "float64");
}

// The fused executor's backward-weights: the AVX2 kernel exactly where oneDNN runs AVX2 kernels (an
// AVX2 CPU, or AETHER_CPU_ISA=avx2, which the suite's AVX2 pass sets) and the switch is on, oneDNN
// otherwise; either way within the bound of the reference backend's result.
TEST(ConvBwdWeightAvx2, FusedExecutorUsesItAtTheAvx2LevelOnly) {
  const test::DefaultDevice on_cpu(Device::cpu());
  const std::string isa = cpu::onednn_isa();
  const bool avx2_level = isa.rfind("avx2", 0) == 0;
  const Geo c{"fused", 2, 12, 12, 16, 10, 3, 3, 1, 1, 1, 1};
  const ConvGeom g = geom(c);
  const Operands op = operands(g, 31);
  const Shape xs{g.N, g.H, g.W, g.C}, ys{g.N, g.OH, g.OW, g.O}, ws{g.O, g.KH, g.KW, g.C};
  auto run = [&] {
    return oracle_test::with_fusion(true, [&] {
      return oracle_test::f32_values(prim::conv2d_bwd_weight(oracle_test::f32_tensor(op.x, xs),
                                                             oracle_test::f32_tensor(op.dy, ys), ws, g.arg));
    });
  };
  const auto want = oracle(g, op, false), scale = oracle(g, op, true);
  for (bool on : {true, false}) {
    const bool prev = config().conv_bwd_weight_avx2.exchange(on);
    const int64_t calls = cpu::conv_bwd_weight_avx2_calls();
    const auto got = run();
    config().conv_bwd_weight_avx2 = prev;
    const bool expected = on && avx2_level && cpu_has_avx2();
    EXPECT_EQ(cpu::conv_bwd_weight_avx2_calls() - calls, expected ? 1 : 0)
        << "oneDNN ISA " << isa << ", AETHER_CONV_BWD_WEIGHT_AVX2 " << on;
    oracle_test::expect_within_sum_bound(got, want, scale, g.N * g.OH * g.OW,
                                         describe(c) + (on ? " switch on" : " switch off"));
  }
}
