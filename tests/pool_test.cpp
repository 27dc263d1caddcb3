// Tests of 2-D max / average pooling and the global pools: forward against hand-computed values
// (padding, stride != kernel, count_include_pad, several dtypes, NHWC indexing), the first-maximum
// and NaN rules of max pooling, finite-difference gradients in float64, and error messages; and
// max pooling over tiling windows (generated kernels, graph/pool_windows.cpp) bit for bit against
// the library op, with the schedule it gets.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/graph/primitives.h"
#include "aether/ops/conv.h"
#include "codegen/compiler.h"
#include "oracle_util.h"
#include "schedule/schedule.h"

using namespace aether;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();

Tensor img(const std::vector<double>& v, const Shape& s, DType t = DType::float64) {
  return Tensor::from_vector(v, s).cast(t);
}

void expect_vec_near(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what = "") {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected aether::Error containing \"" << part << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "message: " << e.what();
  }
}

// x (1,4,4,1)
const std::vector<double> kX4 = {1, 5, 2, 0,  //
                                 3, 4, 8, 1,  //
                                 0, 2, 7, 6,  //
                                 9, 1, 3, 4};

}  // namespace

// ---- max pooling forward ---------------------------------------------------------------------------------
TEST(MaxPool, HandComputedAllFloatDtypes) {
  for (DType t : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
    const Tensor y = max_pool2d(img(kX4, {1, 4, 4, 1}, t), 2);
    EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 1}));
    EXPECT_EQ(y.dtype(), t);
    EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{5, 8, 9, 7})) << dtype_name(t);
  }
}

TEST(MaxPool, StrideDiffersFromKernel) {
  // Overlapping 3x3 windows, stride 1.
  EXPECT_EQ(max_pool2d(img(kX4, {1, 4, 4, 1}), 3, 1).to_vector<double>(), (std::vector<double>{8, 8, 9, 8}));
  // 2x2 windows every 3 pixels of a 5x5 ramp (gaps between windows): starts at 0 and 3.
  std::vector<double> ramp(25);
  std::iota(ramp.begin(), ramp.end(), 0.0);
  const Tensor y = max_pool2d(img(ramp, {1, 5, 5, 1}), 2, 3);
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 1}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{6, 9, 21, 24}));
  // Non-square: kernel 1x3, stride 2x1 on the 4x4 image: rows 0 and 2, windows over columns 0-2, 1-3.
  EXPECT_EQ(max_pool2d(img(kX4, {1, 4, 4, 1}), {1, 3}, {2, 1}).to_vector<double>(),
            (std::vector<double>{5, 5, 7, 7}));
}

TEST(MaxPool, PaddingReadsAsMinusInfinity) {
  // All negative: were padding read as 0, every output would be 0.
  const Tensor x = img({-1, -2, -3, -4, -5, -6, -7, -8, -9}, {1, 3, 3, 1});
  const Tensor y = max_pool2d(x, 3, 2, 1);  // windows rows/cols [-1, 2) and [1, 4)
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 1}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{-1, -2, -4, -5}));
  // Kernel 2, stride 2, padding 1: windows [-1, 1) and [1, 3), the first holding one real pixel.
  EXPECT_EQ(max_pool2d(x, 2, 2, 1).to_vector<double>(), (std::vector<double>{-1, -2, -4, -5}));
}

TEST(MaxPool, BatchAndChannelsNHWC) {
  // x (2,2,2,3): x[n,h,w,c] = n*100 + c*10 + (h*2+w) for even c, its negative for odd c.
  std::vector<double> v;
  for (int n = 0; n < 2; ++n)
    for (int p = 0; p < 4; ++p)
      for (int c = 0; c < 3; ++c) v.push_back((c % 2 ? -1 : 1) * (n * 100 + c * 10 + p));
  const Tensor y = max_pool2d(img(v, {2, 2, 2, 3}, DType::float32), 2);
  EXPECT_EQ(y.shape(), (Shape{2, 1, 1, 3}));
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{3, -10, 23, 103, -110, 123}));
}

TEST(MaxPool, NonContiguousInput) {
  // The same image given as NCHW and permuted to NHWC (a strided view).
  std::vector<double> nchw = {1, 2, 3, 4, /* c1 */ 8, 7, 6, 5};
  const Tensor x = img(nchw, {1, 2, 2, 2}).permute({0, 2, 3, 1});
  EXPECT_EQ(max_pool2d(x, 2).to_vector<double>(), (std::vector<double>{4, 8}));
  EXPECT_EQ(avg_pool2d(x, 2).to_vector<double>(), (std::vector<double>{2.5, 6.5}));
}

// ---- max pooling: ties, NaN -----------------------------------------------------------------------------
TEST(MaxPool, GradientGoesToFirstMaximum) {
  // Ties everywhere: each window sends dy to its first (row-major) element.
  Tensor x = Tensor::ones({1, 2, 3, 1}, DType::float64).set_requires_grad();
  auto g = gradients(max_pool2d(x, 2, 1), {x}, Tensor::from_vector<double>({1, 10}, {1, 1, 2, 1}));
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{1, 10, 0, 0, 0, 0}));
  // With padding, the first REAL element of each window gets it (never the padding).
  Tensor z = Tensor::zeros({1, 2, 2, 1}, DType::float64).set_requires_grad();
  const Tensor y = max_pool2d(z, 2, 1, 1);  // (1,3,3,1)
  EXPECT_EQ(y.to_vector<double>(), std::vector<double>(9, 0.0));
  g = gradients(y, {z}, Tensor::ones({1, 3, 3, 1}, DType::float64));
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{4, 2, 2, 1}));
}

TEST(MaxPool, NaNPropagatesAndTakesTheGradient) {
  // Window 0 = {9, 1, NaN, 2}: NaN wins although 9 comes first. Window 1 = {5, 6, 7, 8}.
  const std::vector<double> v = {9, 1, 5, 6, kNaN, 2, 7, 8};
  for (DType t : {DType::float64, DType::float32, DType::bfloat16}) {
    Tensor x = img(v, {1, 2, 4, 1}, t).detach().set_requires_grad();
    const Tensor y = max_pool2d(x, 2);
    const auto yv = y.to_vector<double>();
    ASSERT_EQ(yv.size(), 2u);
    EXPECT_TRUE(std::isnan(yv[0])) << dtype_name(t);
    EXPECT_EQ(yv[1], 8) << dtype_name(t);
    const auto g = gradients(y, {x}, Tensor::ones({1, 1, 2, 1}, t));
    EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{0, 0, 0, 0, 1, 0, 0, 1})) << dtype_name(t);
  }
  // Two NaNs: the first one takes the gradient.
  Tensor x = img({1, kNaN, kNaN, 2}, {1, 2, 2, 1}).set_requires_grad();
  EXPECT_EQ(
      gradients(max_pool2d(x, 2), {x}, Tensor::ones({1, 1, 1, 1}, DType::float64))[0].to_vector<double>(),
      (std::vector<double>{0, 1, 0, 0}));
}

TEST(MaxPool, GradientAccumulatesOverOverlappingWindows) {
  // 3x3 windows, stride 1 on the 4x4 image: maxima 8 (at (1,2), three windows) and 9 (at (3,0)).
  Tensor x = img(kX4, {1, 4, 4, 1}).set_requires_grad();
  const auto g = gradients(max_pool2d(x, 3, 1), {x}, Tensor::from_vector<double>({1, 2, 3, 4}, {1, 2, 2, 1}));
  std::vector<double> want(16, 0.0);
  want[1 * 4 + 2] = 1 + 2 + 4;
  want[3 * 4 + 0] = 3;
  EXPECT_EQ(g[0].to_vector<double>(), want);
}

// ---- average pooling --------------------------------------------------------------------------------------
TEST(AvgPool, HandComputed) {
  const std::vector<double> v = {1, 2, 3, 4, 5, 6, 7, 8, 9};  // (1,3,3,1)
  for (DType t : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
    const Tensor y = avg_pool2d(img(v, {1, 3, 3, 1}, t), 2, 1);
    EXPECT_EQ(y.dtype(), t);
    EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{3, 4, 6, 7})) << dtype_name(t);
  }
}

TEST(AvgPool, CountIncludePadBothWays) {
  const Tensor x = img({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1});
  // kernel 3, stride 2, padding 1: every window holds a 2x2 block of real pixels.
  expect_vec_near(avg_pool2d(x, 3, 2, 1, false).to_vector<double>(), {12 / 4., 16 / 4., 24 / 4., 28 / 4.},
                  1e-15);
  expect_vec_near(avg_pool2d(x, 3, 2, 1, true).to_vector<double>(), {12 / 9., 16 / 9., 24 / 9., 28 / 9.},
                  1e-15);
  // kernel 2, stride 2, padding 1: windows of 1, 2, 2 and 4 real pixels.
  expect_vec_near(avg_pool2d(x, 2, 2, 1, false).to_vector<double>(), {1, 2.5, 5.5, 7}, 1e-15);
  expect_vec_near(avg_pool2d(x, 2, 2, 1, true).to_vector<double>(), {0.25, 1.25, 2.75, 7}, 1e-15);
  // Padding on one axis only: kernel (1, 2), stride (1, 2), padding (0, 1) on a 1x3 row.
  const Tensor r = img({2, 4, 8}, {1, 1, 3, 1});
  expect_vec_near(avg_pool2d(r, {1, 2}, {1, 2}, {0, 1}, false).to_vector<double>(), {2, 6}, 1e-15);
  expect_vec_near(avg_pool2d(r, {1, 2}, {1, 2}, {0, 1}, true).to_vector<double>(), {1, 6}, 1e-15);
}

TEST(AvgPool, GradientHandComputed) {
  // d/dx of sum(avg_pool2d(x, 2, 2, 1, cip)) on 3x3: each pixel gets 1/divisor of its one window.
  for (bool cip : {false, true}) {
    Tensor x = Tensor::ones({1, 3, 3, 1}, DType::float64).set_requires_grad();
    avg_pool2d(x, 2, 2, 1, cip).sum().backward();
    const std::vector<double> want = cip ? std::vector<double>(9, 0.25)
                                         : std::vector<double>{1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.5, 0.25, 0.25};
    EXPECT_EQ(x.grad().to_vector<double>(), want) << "count_include_pad " << cip;
  }
}

// ---- finite-difference gradients (float64)
// ------------------------------------------------------------------
namespace {
// loss = sum(pool(x) * r): compares gradients() with central differences (eps 1e-6).
void check_pool_grad(const Shape& xs, const std::function<Tensor(const Tensor&)>& pool, uint64_t seed) {
  // Distinct values at least 0.1 apart (no ties: the max is differentiable there).
  std::vector<double> xv(size_t(numel(xs)));
  std::iota(xv.begin(), xv.end(), 0.0);
  std::mt19937_64 gen(seed);
  std::shuffle(xv.begin(), xv.end(), gen);
  std::uniform_real_distribution<double> u(-0.04, 0.04);
  for (auto& e : xv) e = e * 0.1 - 1.0 + u(gen);
  const Shape ys = pool(Tensor::zeros(xs, DType::float64)).shape();
  std::vector<double> rv(size_t(numel(ys)));
  for (auto& e : rv) e = u(gen) * 25;
  const Tensor r = Tensor::from_vector(rv, ys);

  Tensor x = Tensor::from_vector(xv, xs).set_requires_grad();
  const auto g = gradients((pool(x) * r).sum(), {x});
  ASSERT_EQ(g[0].shape(), xs);
  const auto gv = g[0].to_vector<double>();
  NoGradGuard no_grad;
  constexpr double kEps = 1e-6;
  for (size_t i = 0; i < xv.size(); ++i) {
    const double keep = xv[i];
    xv[i] = keep + kEps;
    const double fp = (pool(Tensor::from_vector(xv, xs)) * r).sum().item<double>();
    xv[i] = keep - kEps;
    const double fm = (pool(Tensor::from_vector(xv, xs)) * r).sum().item<double>();
    xv[i] = keep;
    EXPECT_NEAR(gv[i], (fp - fm) / (2 * kEps), 1e-6) << "element " << i;
  }
}
}  // namespace

TEST(PoolGrad, MaxFiniteDifferences) {
  check_pool_grad(
      {2, 5, 6, 3}, [](const Tensor& x) { return max_pool2d(x, 3, 2, 1); }, 1);
  check_pool_grad(
      {1, 5, 5, 2}, [](const Tensor& x) { return max_pool2d(x, 2, 1); }, 2);
  check_pool_grad(
      {1, 6, 5, 2},
      [](const Tensor& x) {
        return max_pool2d(x, {3, 2}, {2, 3}, {1, 0});
      },
      3);
}

TEST(PoolGrad, MaxTilingWindowsFiniteDifferences) {  // the generated path (stride = kernel, no padding)
  check_pool_grad(
      {2, 5, 7, 3}, [](const Tensor& x) { return max_pool2d(x, 2); }, 4);  // rows/cols left over
  check_pool_grad(
      {1, 6, 6, 2},
      [](const Tensor& x) {
        return max_pool2d(x, {3, 2});
      },
      5);
}

TEST(PoolGrad, AvgFiniteDifferences) {
  for (bool cip : {false, true}) {
    check_pool_grad(
        {2, 5, 6, 3}, [cip](const Tensor& x) { return avg_pool2d(x, 3, 2, 1, cip); }, 4);
    check_pool_grad(
        {1, 6, 5, 2},
        [cip](const Tensor& x) {
          return avg_pool2d(x, {2, 3}, {1, 2}, {1, 1}, cip);
        },
        5);
  }
}

TEST(PoolGrad, GlobalFiniteDifferences) {
  check_pool_grad(
      {2, 3, 4, 3}, [](const Tensor& x) { return global_avg_pool2d(x); }, 6);
  check_pool_grad(
      {2, 3, 4, 3}, [](const Tensor& x) { return global_max_pool2d(x); }, 7);
}

// ---- global pools
// ------------------------------------------------------------------------------------------
TEST(GlobalPool, ForwardAndGradient) {
  // x (2,2,2,2), NHWC: image 0 channel 0 = {1,4,3,2}, channel 1 = {8,-2,5,0}; image 1 = {-1,-5,-2,-7},
  // {-3,-4,-6,-8}.
  const std::vector<double> v = {1, 8, 4, -2, 3, 5, 2, 0, -1, -3, -5, -4, -2, -6, -7, -8};
  Tensor x = Tensor::from_vector(v, {2, 2, 2, 2}).set_requires_grad();
  const Tensor avg = global_avg_pool2d(x), mx = global_max_pool2d(x);
  EXPECT_EQ(avg.shape(), (Shape{2, 2}));
  EXPECT_EQ(mx.shape(), (Shape{2, 2}));
  EXPECT_EQ(avg.to_vector<double>(), (std::vector<double>{2.5, 2.75, -3.75, -5.25}));
  EXPECT_EQ(mx.to_vector<double>(), (std::vector<double>{4, 8, -1, -3}));
  const Tensor dy = Tensor::from_vector<double>({1, 2, 3, 4}, {2, 2});
  const auto ga = gradients(avg, {x}, dy)[0].to_vector<double>();
  EXPECT_EQ(ga, (std::vector<double>{0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.25, 0.5, 0.75, 1, 0.75, 1, 0.75, 1,
                                     0.75, 1}));
  const auto gm = gradients(mx, {x}, dy)[0].to_vector<double>();
  EXPECT_EQ(gm, (std::vector<double>{0, 2, 1, 0, 0, 0, 0, 0, 3, 4, 0, 0, 0, 0, 0, 0}));
  // float32 and float16 give the same values.
  for (DType t : {DType::float32, DType::float16}) {
    EXPECT_EQ(global_avg_pool2d(x.detach().cast(t)).to_vector<double>(), avg.to_vector<double>());
    EXPECT_EQ(global_max_pool2d(x.detach().cast(t)).to_vector<double>(), mx.to_vector<double>());
  }
}

TEST(GlobalPool, NaNPropagatesInMax) {
  const Tensor x = img({1, kNaN, 3, 4}, {1, 2, 2, 1});
  EXPECT_TRUE(std::isnan(global_max_pool2d(x).item<double>()));
}

// ---- errors
// ----------------------------------------------------------------------------------------------------
TEST(PoolErrors, Messages) {
  const Tensor x = Tensor::ones({1, 4, 4, 2});
  expect_error([&] { max_pool2d(Tensor::ones({4, 4, 2}), 2); }, "4-D NHWC");
  expect_error([&] { avg_pool2d(Tensor::ones({4, 4, 2}), 2); }, "avg_pool2d");
  expect_error([&] { max_pool2d(x.cast(DType::int32), 2); }, "expected a float tensor");
  expect_error([&] { max_pool2d(x, 2, 2, 2); }, "padding must be smaller than the kernel");
  expect_error([&] { avg_pool2d(x, 5); }, "smaller than the 5x5 window");
  expect_error([&] { max_pool2d(x, {2, 5}); }, "smaller than the 2x5 window");
  expect_error([&] { max_pool2d(x, 2, -1); }, "kernel and stride must be positive");
  expect_error([&] { avg_pool2d(x, 0); }, "kernel and stride must be positive");
  expect_error([&] { max_pool2d(x, 2, 1, -1); }, "padding must be >= 0");
  expect_error([&] { global_avg_pool2d(Tensor::ones({4, 2})); }, "global_avg_pool2d");
  expect_error([&] { global_max_pool2d(x.cast(DType::int64)); }, "global_max_pool2d");
  EXPECT_THROW(max_pool2d(x, 3, 1, 3), Error);
}

// ---- max pooling over tiling windows: generated kernels against the library op ------------------------
namespace {

// Values with many ties (small integers), and some NaN and -inf: the first-maximum and NaN rules
// decide most windows. x (N,H,W,C).
Tensor tie_heavy(const Shape& s, DType t, uint32_t seed, bool specials) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> u(-3, 3), pick(0, 40);
  std::vector<double> v(size_t(numel(s)));
  for (auto& e : v) {
    e = u(gen);
    const int p = pick(gen);
    if (specials && p == 0) e = kNaN;
    if (specials && p == 1) e = -std::numeric_limits<double>::infinity();
  }
  return Tensor::from_vector(v, s).cast(t);
}

// Bitwise equality of two float vectors, NaN equal to NaN.
void expect_same(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size() && bad < 5; ++i)
    if (!(got[i] == want[i] || (std::isnan(got[i]) && std::isnan(want[i])))) {
      ADD_FAILURE() << what << " element " << i << ": " << got[i] << " vs " << want[i];
      ++bad;
    }
}

Pool2dArg tile_arg(int64_t kh, int64_t kw) {
  Pool2dArg a;
  a.kernel_h = a.stride_h = kh;
  a.kernel_w = a.stride_w = kw;
  return a;
}

}  // namespace

TEST(MaxPoolWindows, MatchesTheLibraryOpBitForBit) {
  struct Case {
    Shape x;
    int64_t kh, kw;
  };
  const Case cases[] = {{{2, 6, 8, 5}, 2, 2},
                        {{3, 7, 9, 4}, 3, 2},
                        {{1, 4, 4, 17}, 4, 4},
                        {{2, 5, 5, 3}, 1, 1},
                        {{1, 9, 4, 2}, 2, 4}};
  uint32_t seed = 1;
  for (DType t : {DType::float64, DType::float32, DType::float16, DType::bfloat16})
    for (const Case& c : cases)
      for (bool specials : {false, true}) {
        const std::string what = detail::cat(dtype_name(t), " x ", to_string(c.x), " window ", c.kh, "x",
                                             c.kw, specials ? " with NaN/-inf" : "");
        const Pool2dArg arg = tile_arg(c.kh, c.kw);
        ASSERT_TRUE(prim::pool_windows_tile(arg));
        Tensor x = tie_heavy(c.x, t, seed++, specials);
        x.realize();
        const Tensor y = max_pool2d(x, {c.kh, c.kw});
        expect_same(y.to_vector<double>(), prim::maxpool2d(x, arg).to_vector<double>(), "forward " + what);
        Tensor dy = tie_heavy(y.shape(), t, seed++, false);
        dy.realize();
        Tensor xg = x.detach();
        xg.set_requires_grad();
        const Tensor dx = gradients(max_pool2d(xg, {c.kh, c.kw}), {xg}, dy)[0];
        expect_same(dx.to_vector<double>(), prim::maxpool2d_bwd(x, dy, arg).to_vector<double>(),
                    "backward " + what);
      }
}

TEST(MaxPoolWindows, GeneratedAndFusedWithNeighbours) {
  // y = maxpool(relu(x * a + b)): one generated reduce kernel, no library call; its backward with
  // an elementwise dy (dy0 * s) is one generated elementwise kernel.
  const Tensor x = Tensor::randn({4, 8, 8, 16}).realize(), a = Tensor::randn({16}).realize(),
               b = Tensor::randn({16}).realize();
  const Tensor h = (x * a + b).relu();  // (4,8,8,16)
  const Tensor y = max_pool2d(h, 2);    // (4,4,4,16)
  const Schedule fwd = schedule({y});
  EXPECT_EQ(fwd.library_calls, 0);
  EXPECT_EQ(fwd.kernel_count, 1);
  const Tensor dy0 = Tensor::randn(y.shape()).realize();
  Tensor hg = h.detach();
  hg.realize();
  hg.set_requires_grad();
  const Tensor dx = gradients(max_pool2d(hg, 2), {hg}, dy0 * 3.0)[0];
  const Schedule bwd = schedule({dx});
  EXPECT_EQ(bwd.library_calls, 0);
  EXPECT_EQ(bwd.kernel_count, 1);
  // Nothing falls back to the reference backend, and the values are the library op's.
  const auto before = codegen::codegen_stats();
  const auto got = dx.to_vector<double>();
  const auto yv = y.to_vector<double>();
  EXPECT_EQ(codegen::codegen_stats().fallbacks, before.fallbacks);
  const Pool2dArg arg = tile_arg(2, 2);
  expect_same(yv, prim::maxpool2d(h.realize(), arg).to_vector<double>(), "fused forward");
  expect_same(got, prim::maxpool2d_bwd(hg, (dy0 * 3.0).realize(), arg).to_vector<double>(), "fused backward");
}

// ---- the fast paths against the oracle (reference backend) ----------------------------------------------
// The fused executor runs max pooling over tiling windows as generated kernels and every other
// pooling on the library loops (pool.cpp); the reference backend runs the oracle loops
// (reference_pool.cpp). Random geometries (odd sizes, strides, padding, both count_include_pad
// settings; tiling windows included), float32 and float64, forward and backward.
// Tolerance: max forward picks an element, so it must be equal. Every other value is a sum of at
// most K = KH*KW terms of magnitude <= 1 (x, dy in [-1, 1); a divisor >= 1), rounded to the dtype:
// any summation order is within (K-1) u K of the exact sum (Higham, eq. 4.4) and the oracle within
// u |result|, so |fast - oracle| <= (K + 1) K u; we allow twice that (u = 2^-24 or 2^-53).
TEST(PoolOracle, FastPathsMatchReference) {
  using namespace oracle_test;
  std::mt19937_64 gen(4242);
  auto r = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); };
  uint64_t seed = 800;
  for (int i = 0; i < 24; ++i) {
    const int64_t kh = r(1, 4), kw = r(1, 4);
    const bool tile = i % 3 == 0;  // stride = kernel, no padding: the generated path for max
    const int64_t sh = tile ? kh : r(1, 3), sw = tile ? kw : r(1, 3);
    const int64_t ph = tile ? 0 : r(0, kh - 1), pw = tile ? 0 : r(0, kw - 1);
    const Shape xs{r(1, 3), r(std::max<int64_t>(kh - 2 * ph, 1), 13),
                   r(std::max<int64_t>(kw - 2 * pw, 1), 13), r(1, 7)};
    Pool2dArg arg;
    arg.kernel_h = kh;
    arg.kernel_w = kw;
    arg.stride_h = sh;
    arg.stride_w = sw;
    arg.pad_top = arg.pad_bottom = ph;
    arg.pad_left = arg.pad_right = pw;
    const auto xv = uniform(size_t(numel(xs)), seed++);
    for (DType t : {DType::float32, DType::float64})
      for (int kind = 0; kind < 3; ++kind) {  // max, avg, avg with count_include_pad
        arg.count_include_pad = kind == 2;
        const std::string what = detail::cat(
            kind == 0 ? "max" : "avg", kind == 2 ? " (count_include_pad)" : "", " ", dtype_name(t), " x ",
            to_string(xs), " kernel ", kh, "x", kw, " stride ", sh, "x", sw, " pad ", ph, "x", pw);
        // Inputs and results cross to the host in their own dtype: a Cast would be one more
        // generated kernel to compile for every shape.
        auto make = [&](const std::vector<double>& v, const Shape& s) {
          return t == DType::float32 ? f32_tensor(v, s) : Tensor::from_vector(v, s);
        };
        auto values = [&](const Tensor& v) {
          return t == DType::float32 ? f32_values(v) : v.to_vector<double>();
        };
        const Tensor x = make(xv, xs);
        const Shape ys = prim::pool2d_shape("pool", x, arg);
        const Tensor dy = make(uniform(size_t(numel(ys)), seed++), ys);
        const auto fast = with_fusion(true, [&] {
          Tensor xg = x.detach().set_requires_grad();
          const Tensor y = kind == 0 ? max_pool2d(xg, {kh, kw}, {sh, sw}, {ph, pw})
                                     : avg_pool2d(xg, {kh, kw}, {sh, sw}, {ph, pw}, kind == 2);
          return std::vector<std::vector<double>>{values(y), values(gradients(y, {xg}, dy)[0])};
        });
        const auto want = with_fusion(false, [&] {
          return kind == 0 ? std::vector<std::vector<double>>{values(prim::maxpool2d(x, arg)),
                                                              values(prim::maxpool2d_bwd(x, dy, arg))}
                           : std::vector<std::vector<double>>{values(prim::avgpool2d(x, arg)),
                                                              values(prim::avgpool2d_bwd(dy, xs, arg))};
        });
        const double u = std::ldexp(1.0, t == DType::float32 ? -24 : -53);
        const double tol = 2.0 * double(kh * kw + 1) * double(kh * kw) * u;
        if (kind == 0) {
          EXPECT_EQ(fast[0], want[0]) << "forward " << what;
        } else {
          expect_vec_near(fast[0], want[0], tol, "forward " + what);
        }
        expect_vec_near(fast[1], want[1], tol, "backward " + what);
      }
  }
}
