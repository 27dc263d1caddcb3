// Tests of 2-D convolution: the naive kernels (forward, backward data, backward weight) against a
// direct NCHW computation in double written here, oneDNN against the naive loops, 16-bit dtypes,
// finite-difference gradients of the functional conv2d, "same" padding, and error messages.
#include "aether/ops/conv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/graph/primitives.h"
#include "backend/cpu/kernels.h"
#include "device_guard.h"
#include "graph/library_caps.h"
#include "graph_util.h"
#include "oracle_util.h"

using namespace aether;

namespace {

// Selects the CPU library implementation for one scope.
class ImplGuard {
 public:
  explicit ImplGuard(LibraryImpl impl) : prev_(library_impl()) { set_library_impl(impl); }
  ~ImplGuard() { set_library_impl(prev_); }

 private:
  LibraryImpl prev_;
};

std::vector<double> random_vec(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  std::vector<double> v(n);
  for (auto& e : v) e = u(gen);
  return v;
}

// A convolution problem, described independently of the library's ConvGeom.
struct Case {
  const char* name;
  int64_t N, H, W, C, O, KH, KW;
  Conv2dArg a;
};
void PrintTo(const Case& c, std::ostream* os) { *os << c.name; }

// Number of windows of extent `ext` placed every `stride` in `padded` pixels (counted, not a formula).
int64_t count_windows(int64_t padded, int64_t ext, int64_t stride) {
  int64_t n = 0;
  for (int64_t start = 0; start + ext <= padded; start += stride) ++n;
  return n;
}
int64_t out_h(const Case& c) {
  return count_windows(c.H + c.a.pad_top + c.a.pad_bottom, c.a.dil_h * (c.KH - 1) + 1, c.a.stride_h);
}
int64_t out_w(const Case& c) {
  return count_windows(c.W + c.a.pad_left + c.a.pad_right, c.a.dil_w * (c.KW - 1) + 1, c.a.stride_w);
}

// Layout conversions: (A,B,C,D) <-> (A,C,D,B), i.e. NCHW <-> NHWC and OIHW <-> OHWI.
std::vector<double> to_channels_last(const std::vector<double>& v, int64_t A, int64_t B, int64_t C,
                                     int64_t D) {
  std::vector<double> out(v.size());
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t d = 0; d < D; ++d)
          out[size_t(((a * C + c) * D + d) * B + b)] = v[size_t(((a * B + b) * C + c) * D + d)];
  return out;
}
std::vector<double> to_channels_first(const std::vector<double>& v, int64_t A, int64_t C, int64_t D,
                                      int64_t B) {
  std::vector<double> out(v.size());
  for (int64_t a = 0; a < A; ++a)
    for (int64_t b = 0; b < B; ++b)
      for (int64_t c = 0; c < C; ++c)
        for (int64_t d = 0; d < D; ++d)
          out[size_t(((a * B + b) * C + c) * D + d)] = v[size_t(((a * C + c) * D + d) * B + b)];
  return out;
}

// ---- the reference: x (N,C,H,W) zero-padded explicitly, w (O,Cg,KH,KW), y (N,O,OH,OW) ----------
struct Ref {
  const Case& c;
  int64_t Hp, Wp, OH, OW, Cg, Og;
  explicit Ref(const Case& cs)
      : c(cs),
        Hp(cs.H + cs.a.pad_top + cs.a.pad_bottom),
        Wp(cs.W + cs.a.pad_left + cs.a.pad_right),
        OH(out_h(cs)),
        OW(out_w(cs)),
        Cg(cs.C / cs.a.groups),
        Og(cs.O / cs.a.groups) {}

  std::vector<double> pad(const std::vector<double>& x) const {  // (N,C,H,W) -> (N,C,Hp,Wp)
    std::vector<double> p(size_t(c.N * c.C * Hp * Wp), 0.0);
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t ch = 0; ch < c.C; ++ch)
        for (int64_t h = 0; h < c.H; ++h)
          for (int64_t w = 0; w < c.W; ++w)
            p[size_t(((n * c.C + ch) * Hp + h + c.a.pad_top) * Wp + w + c.a.pad_left)] =
                x[size_t(((n * c.C + ch) * c.H + h) * c.W + w)];
    return p;
  }
  // Flat index of padded input (n, channel, row, col) and of the tap it meets.
  size_t xp_at(int64_t n, int64_t ch, int64_t oh, int64_t ow, int64_t kh, int64_t kw) const {
    const int64_t r = oh * c.a.stride_h + kh * c.a.dil_h, q = ow * c.a.stride_w + kw * c.a.dil_w;
    return size_t(((n * c.C + ch) * Hp + r) * Wp + q);
  }

  std::vector<double> fwd(const std::vector<double>& x, const std::vector<double>& w) const {
    const auto xp = pad(x);
    std::vector<double> y(size_t(c.N * c.O * OH * OW), 0.0);
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t o = 0; o < c.O; ++o)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow) {
            double s = 0;
            for (int64_t ci = 0; ci < Cg; ++ci)
              for (int64_t kh = 0; kh < c.KH; ++kh)
                for (int64_t kw = 0; kw < c.KW; ++kw)
                  s += xp[xp_at(n, (o / Og) * Cg + ci, oh, ow, kh, kw)] *
                       w[size_t(((o * Cg + ci) * c.KH + kh) * c.KW + kw)];
            y[size_t(((n * c.O + o) * OH + oh) * OW + ow)] = s;
          }
    return y;
  }
  // Scatter each dy element through the taps into a padded dx, then crop.
  std::vector<double> bwd_data(const std::vector<double>& dy, const std::vector<double>& w) const {
    std::vector<double> dxp(size_t(c.N * c.C * Hp * Wp), 0.0);
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t o = 0; o < c.O; ++o)
        for (int64_t oh = 0; oh < OH; ++oh)
          for (int64_t ow = 0; ow < OW; ++ow)
            for (int64_t ci = 0; ci < Cg; ++ci)
              for (int64_t kh = 0; kh < c.KH; ++kh)
                for (int64_t kw = 0; kw < c.KW; ++kw)
                  dxp[xp_at(n, (o / Og) * Cg + ci, oh, ow, kh, kw)] +=
                      dy[size_t(((n * c.O + o) * OH + oh) * OW + ow)] *
                      w[size_t(((o * Cg + ci) * c.KH + kh) * c.KW + kw)];
    std::vector<double> dx(size_t(c.N * c.C * c.H * c.W));
    for (int64_t n = 0; n < c.N; ++n)
      for (int64_t ch = 0; ch < c.C; ++ch)
        for (int64_t h = 0; h < c.H; ++h)
          for (int64_t q = 0; q < c.W; ++q)
            dx[size_t(((n * c.C + ch) * c.H + h) * c.W + q)] =
                dxp[size_t(((n * c.C + ch) * Hp + h + c.a.pad_top) * Wp + q + c.a.pad_left)];
    return dx;
  }
  std::vector<double> bwd_weight(const std::vector<double>& x, const std::vector<double>& dy) const {
    const auto xp = pad(x);
    std::vector<double> dw(size_t(c.O * Cg * c.KH * c.KW), 0.0);
    for (int64_t o = 0; o < c.O; ++o)
      for (int64_t ci = 0; ci < Cg; ++ci)
        for (int64_t kh = 0; kh < c.KH; ++kh)
          for (int64_t kw = 0; kw < c.KW; ++kw) {
            double s = 0;
            for (int64_t n = 0; n < c.N; ++n)
              for (int64_t oh = 0; oh < OH; ++oh)
                for (int64_t ow = 0; ow < OW; ++ow)
                  s += dy[size_t(((n * c.O + o) * OH + oh) * OW + ow)] *
                       xp[xp_at(n, (o / Og) * Cg + ci, oh, ow, kh, kw)];
            dw[size_t(((o * Cg + ci) * c.KH + kh) * c.KW + kw)] = s;
          }
    return dw;
  }
};

Conv2dArg arg(int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t pb, int64_t pr, int64_t dh, int64_t dw,
              int64_t groups) {
  Conv2dArg a;
  a.stride_h = sh;
  a.stride_w = sw;
  a.pad_top = pt;
  a.pad_left = pl;
  a.pad_bottom = pb;
  a.pad_right = pr;
  a.dil_h = dh;
  a.dil_w = dw;
  a.groups = groups;
  return a;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> cs = {
      {"plain", 2, 5, 6, 3, 4, 3, 3, arg(1, 1, 0, 0, 0, 0, 1, 1, 1)},
      {"stride2_sym_pad", 1, 7, 6, 2, 3, 3, 3, arg(2, 2, 1, 1, 1, 1, 1, 1, 1)},
      {"stride2_asym_pad", 2, 7, 6, 2, 3, 3, 2, arg(2, 2, 1, 0, 2, 1, 1, 1, 1)},
      {"stride_uneven", 1, 8, 7, 3, 2, 2, 3, arg(3, 2, 0, 2, 1, 0, 1, 1, 1)},
      {"dilation2", 1, 7, 7, 3, 2, 3, 3, arg(1, 1, 2, 2, 2, 2, 2, 2, 1)},
      {"dilation_mixed_asym", 2, 8, 6, 2, 3, 3, 2, arg(1, 2, 1, 0, 0, 2, 2, 3, 1)},
      {"groups2", 1, 6, 5, 4, 6, 3, 3, arg(2, 1, 1, 1, 1, 1, 1, 1, 2)},
      {"depthwise", 2, 5, 5, 4, 4, 3, 3, arg(1, 1, 1, 1, 1, 1, 1, 1, 4)},
      {"depthwise_mult2", 1, 6, 6, 3, 6, 3, 3, arg(2, 2, 1, 1, 0, 0, 1, 1, 3)},
      {"groups2_stride2_dil2_asym", 2, 9, 8, 4, 4, 3, 2, arg(2, 2, 2, 1, 1, 0, 2, 2, 2)},
      {"one_by_one_stride2", 1, 5, 5, 3, 2, 1, 1, arg(2, 2, 0, 0, 0, 0, 1, 1, 1)},
  };
  return cs;
}

// The tensors of one case in float64, generated in NCHW / OIHW and handed over as NHWC / OHWI.
struct Data {
  std::vector<double> x_nchw, w_oihw, dy_nchw;  // reference layouts
  Tensor x, w, dy;                              // library layouts, float64
  Shape x_shape, w_shape;
};
Data make_data(const Case& c, uint64_t seed) {
  const Ref r(c);
  Data d;
  d.x_nchw = random_vec(size_t(c.N * c.C * c.H * c.W), seed);
  d.w_oihw = random_vec(size_t(c.O * r.Cg * c.KH * c.KW), seed + 1);
  d.dy_nchw = random_vec(size_t(c.N * c.O * r.OH * r.OW), seed + 2);
  d.x_shape = {c.N, c.H, c.W, c.C};
  d.w_shape = {c.O, c.KH, c.KW, r.Cg};
  d.x = Tensor::from_vector(to_channels_last(d.x_nchw, c.N, c.C, c.H, c.W), d.x_shape);
  d.w = Tensor::from_vector(to_channels_last(d.w_oihw, c.O, r.Cg, c.KH, c.KW), d.w_shape);
  d.dy = Tensor::from_vector(to_channels_last(d.dy_nchw, c.N, c.O, r.OH, r.OW), {c.N, r.OH, r.OW, c.O});
  return d;
}

// |got - want| <= rel * |want| + abs for every element.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double rel, double abs,
                  const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    if (!(std::abs(got[i] - want[i]) <= rel * std::abs(want[i]) + abs) && bad++ < 5)
      ADD_FAILURE() << what << ": element " << i << " got " << got[i] << " want " << want[i];
  }
}

}  // namespace

// ---- naive kernels vs the reference, float64 --------------------------------------------------------
class ConvCase : public ::testing::TestWithParam<Case> {};

TEST_P(ConvCase, NaiveMatchesReferenceF64) {
  const Case& c = GetParam();
  ImplGuard impl(LibraryImpl::naive);
  const Ref r(c);
  const Data d = make_data(c, 11);
  const Tensor y = prim::conv2d(d.x, d.w, c.a);
  ASSERT_EQ(y.shape(), (Shape{c.N, r.OH, r.OW, c.O}));
  expect_close(to_channels_first(y.to_vector<double>(), c.N, r.OH, r.OW, c.O), r.fwd(d.x_nchw, d.w_oihw),
               1e-12, 1e-12, "fwd");
  const Tensor dx = prim::conv2d_bwd_data(d.dy, d.w, d.x_shape, c.a);
  expect_close(to_channels_first(dx.to_vector<double>(), c.N, c.H, c.W, c.C), r.bwd_data(d.dy_nchw, d.w_oihw),
               1e-12, 1e-12, "bwd_data");
  const Tensor dw = prim::conv2d_bwd_weight(d.x, d.dy, d.w_shape, c.a);
  expect_close(to_channels_first(dw.to_vector<double>(), c.O, c.KH, c.KW, r.Cg),
               r.bwd_weight(d.x_nchw, d.dy_nchw), 1e-12, 1e-12, "bwd_weight");
}

// ---- oneDNN vs naive, float32 -------------------------------------------------------------------------
// Direct kernel calls: oneDNN must accept float32 for every geometry (else the comparison below
// would silently compare the naive loop with itself).
TEST_P(ConvCase, OnednnSupportsF32AndMatchesNaive) {
  const Case& c = GetParam();
  const Ref r(c);
  const ConvGeom g{c.N, c.H, c.W, c.C, c.O, c.KH, c.KW, r.OH, r.OW, c.a};
  auto to_f = [](const std::vector<double>& v) { return std::vector<float>(v.begin(), v.end()); };
  const auto x = to_f(random_vec(size_t(c.N * c.H * c.W * c.C), 21));
  const auto w = to_f(random_vec(size_t(c.O * c.KH * c.KW * r.Cg), 22));
  const auto dy = to_f(random_vec(size_t(c.N * r.OH * r.OW * c.O), 23));
  auto compare = [&](const std::vector<float>& got, const std::vector<float>& want, const char* what) {
    expect_close(std::vector<double>(got.begin(), got.end()), std::vector<double>(want.begin(), want.end()),
                 1e-4, 1e-5, what);
  };
  std::vector<float> y1(dy.size()), y2(dy.size()), dx1(x.size()), dx2(x.size()), dw1(w.size()), dw2(w.size());
  cpu::conv2d_fwd_naive(DType::float32, x.data(), w.data(), y1.data(), g);
  ASSERT_TRUE(cpu::conv2d_fwd_onednn(DType::float32, x.data(), w.data(), y2.data(), g));
  compare(y2, y1, "fwd");
  cpu::conv2d_bwd_data_naive(DType::float32, dy.data(), w.data(), dx1.data(), g);
  ASSERT_TRUE(cpu::conv2d_bwd_data_onednn(DType::float32, dy.data(), w.data(), dx2.data(), g));
  compare(dx2, dx1, "bwd_data");
  cpu::conv2d_bwd_weight_naive(DType::float32, x.data(), dy.data(), dw1.data(), g);
  ASSERT_TRUE(cpu::conv2d_bwd_weight_onednn(DType::float32, x.data(), dy.data(), dw2.data(), g));
  compare(dw2, dw1, "bwd_weight");
  // A second call reuses the cached primitive and gives the same values.
  std::vector<float> y3(dy.size());
  ASSERT_TRUE(cpu::conv2d_fwd_onednn(DType::float32, x.data(), w.data(), y3.data(), g));
  EXPECT_EQ(y3, y2);
}

// Through the tensor API: set_library_impl picks the implementation; both agree with the reference.
TEST_P(ConvCase, LibraryImplSwitchF32) {
  const Case& c = GetParam();
  const Ref r(c);
  const Data d = make_data(c, 31);
  const Tensor x = d.x.cast(DType::float32), w = d.w.cast(DType::float32), dy = d.dy.cast(DType::float32);
  const auto want_y = r.fwd(d.x_nchw, d.w_oihw);
  const auto want_dx = r.bwd_data(d.dy_nchw, d.w_oihw);
  const auto want_dw = r.bwd_weight(d.x_nchw, d.dy_nchw);
  for (LibraryImpl impl : {LibraryImpl::naive, LibraryImpl::onednn}) {
    ImplGuard guard(impl);
    const std::string tag = impl == LibraryImpl::naive ? "naive " : "onednn ";
    expect_close(to_channels_first(prim::conv2d(x, w, c.a).to_vector<double>(), c.N, r.OH, r.OW, c.O), want_y,
                 1e-4, 1e-5, tag + "fwd");
    expect_close(to_channels_first(prim::conv2d_bwd_data(dy, w, d.x_shape, c.a).to_vector<double>(), c.N, c.H,
                                   c.W, c.C),
                 want_dx, 1e-4, 1e-5, tag + "bwd_data");
    expect_close(to_channels_first(prim::conv2d_bwd_weight(x, dy, d.w_shape, c.a).to_vector<double>(), c.O,
                                   c.KH, c.KW, r.Cg),
                 want_dw, 1e-4, 1e-5, tag + "bwd_weight");
  }
}

// ---- 16-bit dtypes: naive loops compute in float, round once -------------------------------------------
TEST_P(ConvCase, NaiveHalfAndBfloat16) {
  const Case& c = GetParam();
  ImplGuard impl(LibraryImpl::naive);
  const Ref r(c);
  const Data d = make_data(c, 41);
  for (DType t : {DType::float16, DType::bfloat16}) {
    const Tensor x = d.x.cast(t), w = d.w.cast(t), dy = d.dy.cast(t);
    // The reference sees the same rounded inputs.
    const auto xr = to_channels_first(x.to_vector<double>(), c.N, c.H, c.W, c.C);
    const auto wr = to_channels_first(w.to_vector<double>(), c.O, c.KH, c.KW, r.Cg);
    const auto dyr = to_channels_first(dy.to_vector<double>(), c.N, r.OH, r.OW, c.O);
    // One rounding of the result (2^-11 or 2^-8 relative) plus float accumulation.
    const double rel = t == DType::float16 ? 1e-3 : 8e-3, abs = t == DType::float16 ? 1e-3 : 1e-2;
    const std::string tag = dtype_name(t);
    const Tensor y = prim::conv2d(x, w, c.a);
    EXPECT_EQ(y.dtype(), t);
    expect_close(to_channels_first(y.to_vector<double>(), c.N, r.OH, r.OW, c.O), r.fwd(xr, wr), rel, abs,
                 tag + " fwd");
    expect_close(to_channels_first(prim::conv2d_bwd_data(dy, w, d.x_shape, c.a).to_vector<double>(), c.N, c.H,
                                   c.W, c.C),
                 r.bwd_data(dyr, wr), rel, abs, tag + " bwd_data");
    expect_close(to_channels_first(prim::conv2d_bwd_weight(x, dy, d.w_shape, c.a).to_vector<double>(), c.O,
                                   c.KH, c.KW, r.Cg),
                 r.bwd_weight(xr, dyr), rel, abs, tag + " bwd_weight");
  }
}

// oneDNN bfloat16 where this CPU supports it: against the naive bfloat16 loops on the same inputs.
TEST_P(ConvCase, OnednnBfloat16MatchesNaive) {
  const Case& c = GetParam();
  const Ref r(c);
  const ConvGeom g{c.N, c.H, c.W, c.C, c.O, c.KH, c.KW, r.OH, r.OW, c.a};
  auto to_bf = [](const std::vector<double>& v) {
    std::vector<bfloat16> o;
    for (double e : v) o.emplace_back(float(e));
    return o;
  };
  auto to_d = [](const std::vector<bfloat16>& v) {
    std::vector<double> o;
    for (auto e : v) o.push_back(double(float(e)));
    return o;
  };
  const auto x = to_bf(random_vec(size_t(c.N * c.H * c.W * c.C), 51));
  const auto w = to_bf(random_vec(size_t(c.O * c.KH * c.KW * r.Cg), 52));
  const auto dy = to_bf(random_vec(size_t(c.N * r.OH * r.OW * c.O), 53));
  std::vector<bfloat16> y1(dy.size()), y2(dy.size()), dx1(x.size()), dx2(x.size()), dw1(w.size()),
      dw2(w.size());
  if (!cpu::conv2d_fwd_onednn(DType::bfloat16, x.data(), w.data(), y2.data(), g))
    GTEST_SKIP() << "oneDNN has no bfloat16 convolution on this CPU";
  cpu::conv2d_fwd_naive(DType::bfloat16, x.data(), w.data(), y1.data(), g);
  // Both accumulate in float and round once: at most one bfloat16 ulp (2^-7 relative) apart.
  expect_close(to_d(y2), to_d(y1), 8e-3, 1e-4, "bf16 fwd");
  cpu::conv2d_bwd_data_naive(DType::bfloat16, dy.data(), w.data(), dx1.data(), g);
  if (cpu::conv2d_bwd_data_onednn(DType::bfloat16, dy.data(), w.data(), dx2.data(), g))
    expect_close(to_d(dx2), to_d(dx1), 8e-3, 1e-4, "bf16 bwd_data");
  cpu::conv2d_bwd_weight_naive(DType::bfloat16, x.data(), dy.data(), dw1.data(), g);
  if (cpu::conv2d_bwd_weight_onednn(DType::bfloat16, x.data(), dy.data(), dw2.data(), g))
    expect_close(to_d(dw2), to_d(dw1), 8e-3, 1e-4, "bf16 bwd_weight");
}

INSTANTIATE_TEST_SUITE_P(Geometries, ConvCase, ::testing::ValuesIn(cases()),
                         [](const ::testing::TestParamInfo<Case>& i) { return std::string(i.param.name); });

// ---- unsupported dtypes ----------------------------------------------------------------------------------
TEST(ConvKernels, OnednnDeclinesFloat64) {
  const ConvGeom g{1, 3, 3, 1, 1, 1, 1, 3, 3, Conv2dArg{}};
  std::vector<double> x(9, 1.0), w(1, 1.0), y(9);
  EXPECT_FALSE(cpu::conv2d_fwd_onednn(DType::float64, x.data(), w.data(), y.data(), g));
  EXPECT_FALSE(cpu::conv2d_bwd_data_onednn(DType::float64, x.data(), w.data(), y.data(), g));
  EXPECT_FALSE(cpu::conv2d_bwd_weight_onednn(DType::float64, x.data(), x.data(), w.data(), g));
}

// float16 has no oneDNN convolution here (nor bfloat16 without avx512_core_bf16 / AMX): all three
// passes run in float32 on widened copies and round once, like the naive loops (which accumulate
// in float32 too): at most one ulp apart, here compared in float16 on a strided, padded geometry.
TEST(ConvKernels, SixteenBitWithoutNativeKernelsRunsWidenedAndMatchesNaive) {
  Conv2dArg a;
  a.stride_h = a.stride_w = 2;
  a.pad_top = a.pad_left = 1;
  a.pad_bottom = a.pad_right = 0;
  const ConvGeom g{2, 7, 6, 5, 4, 3, 3, 3, 3, a};
  auto halves = [](size_t n, uint64_t seed) {
    std::vector<half> v;
    for (double e : random_vec(n, seed)) v.emplace_back(float(e));
    return v;
  };
  auto close = [](const std::vector<half>& got, const std::vector<half>& want, const char* what) {
    ASSERT_EQ(got.size(), want.size());
    for (size_t i = 0; i < got.size(); ++i)
      EXPECT_NEAR(float(got[i]), float(want[i]), 2e-3 * std::max(1.0f, std::fabs(float(want[i]))))
          << what << i;
  };
  const auto x = halves(size_t(2 * 7 * 6 * 5), 61), w = halves(size_t(4 * 3 * 3 * 5), 62),
             dy = halves(size_t(2 * 3 * 3 * 4), 63);
  std::vector<half> y1(dy.size()), y2(dy.size()), dx1(x.size()), dx2(x.size()), dw1(w.size()), dw2(w.size());
  const int64_t before = cpu::conv_widened_calls();
  ASSERT_TRUE(cpu::conv2d_fwd_onednn(DType::float16, x.data(), w.data(), y2.data(), g));
  ASSERT_TRUE(cpu::conv2d_bwd_data_onednn(DType::float16, dy.data(), w.data(), dx2.data(), g));
  ASSERT_TRUE(cpu::conv2d_bwd_weight_onednn(DType::float16, x.data(), dy.data(), dw2.data(), g));
  EXPECT_EQ(cpu::conv_widened_calls(), before + 3);
  cpu::conv2d_fwd_naive(DType::float16, x.data(), w.data(), y1.data(), g);
  cpu::conv2d_bwd_data_naive(DType::float16, dy.data(), w.data(), dx1.data(), g);
  cpu::conv2d_bwd_weight_naive(DType::float16, x.data(), dy.data(), dw1.data(), g);
  close(y2, y1, "fwd ");
  close(dx2, dx1, "bwd_data ");
  close(dw2, dw1, "bwd_weight ");
}

TEST(ConvKernels, NaiveRejectsIntegers) {
  const ConvGeom g{1, 1, 1, 1, 1, 1, 1, 1, 1, Conv2dArg{}};
  int32_t x = 1, w = 1, y = 0;
  EXPECT_THROW(cpu::conv2d_fwd_naive(DType::int32, &x, &w, &y, g), Error);
}

// ---- functional conv2d: hand-computed values, bias, promotion
// ------------------------------------------------
TEST(Conv2d, HandComputedWithBias) {
  // x (1,3,3,1) = 1..9, w (1,2,2,1) = [[1,0],[0,-1]], bias 10: y = x[i][j] - x[i+1][j+1] + 10 = 6.
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9}, {1, 3, 3, 1});
  const Tensor w = Tensor::from_vector<float>({1, 0, 0, -1}, {1, 2, 2, 1});
  const Tensor b = Tensor::from_vector<float>({10}, {1});
  const Tensor y = conv2d(x, w, b);
  EXPECT_EQ(y.shape(), (Shape{1, 2, 2, 1}));
  EXPECT_EQ(y.to_vector<float>(), (std::vector<float>{6, 6, 6, 6}));
  // Two output channels: identity and sum over the 2x2 window, bias (1, -1); padding 1 on the
  // bottom/right only, stride 2: windows start at (0,0), (0,2), (2,0), (2,2).
  const Tensor w2 = Tensor::from_vector<float>({1, 0, 0, 0, 1, 1, 1, 1}, {2, 2, 2, 1});
  const Tensor b2 = Tensor::from_vector<float>({1, -1}, {2});
  const Tensor y2 = conv2d(x, w2, b2, {.stride = 2, .padding = {0, 1, 0, 1}});
  EXPECT_EQ(y2.shape(), (Shape{1, 2, 2, 2}));
  EXPECT_EQ(y2.to_vector<float>(), (std::vector<float>{2, 11, 4, 8, 8, 14, 10, 8}));
}

TEST(Conv2d, PromotesDtypes) {
  const Tensor x = Tensor::from_vector<int32_t>({1, 2, 3, 4}, {1, 2, 2, 1});
  const Tensor w = Tensor::from_vector<double>({1, 1, 1, 1}, {1, 2, 2, 1});
  const Tensor y = conv2d(x, w, Tensor::from_vector<float>({0.5}, {1}));
  EXPECT_EQ(y.dtype(), DType::float64);
  EXPECT_DOUBLE_EQ(y.item<double>(), 10.5);
  const Tensor h = conv2d(x.cast(DType::float16), w.cast(DType::float32));
  EXPECT_EQ(h.dtype(), DType::float32);
  EXPECT_EQ(h.item<float>(), 10.0f);
}

TEST(Conv2d, SamePaddingLikeTensorFlow) {
  struct S {
    int64_t in, k, stride, dil, top, bottom;
  };
  // total = max((ceil(in/s) - 1) * s + dil*(k-1) + 1 - in, 0), top = total / 2.
  const std::vector<S> ss = {
      {7, 3, 2, 1, 1, 1},  // out 4: total 2
      {6, 3, 2, 1, 0, 1},  // out 3: total 1, odd pixel at the bottom
      {5, 4, 1, 1, 1, 2},  // total 3
      {5, 3, 1, 2, 2, 2},  // dilated extent 5: total 4
      {8, 1, 2, 1, 0, 0},  // (4-1)*2 + 1 - 8 < 0: no padding
      {5, 5, 3, 1, 1, 2},  // out 2: 3 + 5 - 5 = 3
  };
  for (const S& s : ss) {
    const Conv2dArg a = conv2d_arg({1, s.in, s.in + 1, 2}, {3, s.k, 1, 2},
                                   {.stride = {s.stride, 1}, .padding = "same", .dilation = {s.dil, 1}});
    EXPECT_EQ(a.pad_top, s.top) << "in " << s.in << " k " << s.k << " stride " << s.stride;
    EXPECT_EQ(a.pad_bottom, s.bottom) << "in " << s.in << " k " << s.k << " stride " << s.stride;
    EXPECT_EQ(a.pad_left, 0);
    EXPECT_EQ(a.pad_right, 0);
    const Tensor y = conv2d(Tensor::zeros({1, s.in, s.in + 1, 2}), Tensor::zeros({3, s.k, 1, 2}), Tensor(),
                            {.stride = {s.stride, 1}, .padding = "same", .dilation = {s.dil, 1}});
    EXPECT_EQ(y.shape(), (Shape{1, (s.in + s.stride - 1) / s.stride, s.in + 1, 3}));
  }
  // Both dims at once, stride 2 everywhere: ceil(in / 2).
  const Tensor y = conv2d(Tensor::ones({2, 9, 6, 4}), Tensor::ones({8, 3, 3, 2}), Tensor(),
                          {.stride = 2, .padding = "same", .groups = 2});
  EXPECT_EQ(y.shape(), (Shape{2, 5, 3, 8}));
  // "valid" means no padding.
  EXPECT_EQ(
      conv2d(Tensor::ones({1, 5, 5, 1}), Tensor::ones({1, 3, 3, 1}), Tensor(), {.padding = "valid"}).shape(),
      (Shape{1, 3, 3, 1}));
}

// ---- finite-difference gradients (float64)
// ---------------------------------------------------------------------
namespace {
// d f / d v[i] by central differences (eps 1e-6) for every element of v, which f() reads.
std::vector<double> central_differences(std::vector<double>& v, const std::function<double()>& f) {
  constexpr double kEps = 1e-6;
  std::vector<double> out(v.size());
  NoGradGuard no_grad;
  for (size_t i = 0; i < v.size(); ++i) {
    const double keep = v[i];
    v[i] = keep + kEps;
    const double fp = f();
    v[i] = keep - kEps;
    const double fm = f();
    v[i] = keep;
    out[i] = (fp - fm) / (2 * kEps);
  }
  return out;
}

// loss = sum(crop(conv2d(x, w, b)) * r), crop dropping the output's last `crop_h` rows and `crop_w`
// columns; checks d loss / d {x, w, b} by central differences.
void check_conv_grads(const Shape& xs, const Shape& ws, const Conv2dOptions& opt, uint64_t seed,
                      int64_t crop_h = 0, int64_t crop_w = 0) {
  ImplGuard impl(LibraryImpl::naive);
  std::vector<double> xv = random_vec(size_t(numel(xs)), seed), wv = random_vec(size_t(numel(ws)), seed + 1),
                      bv = random_vec(size_t(ws[0]), seed + 2);
  auto crop = [&](const Tensor& y) {
    return y.slice(1, 0, y.shape()[1] - crop_h).slice(2, 0, y.shape()[2] - crop_w);
  };
  const Shape ys =
      crop(conv2d(Tensor::zeros(xs, DType::float64), Tensor::zeros(ws, DType::float64), Tensor(), opt))
          .shape();
  const Tensor r = Tensor::from_vector(random_vec(size_t(numel(ys)), seed + 3), ys);
  auto loss = [&](const Tensor& x, const Tensor& w, const Tensor& b) {
    return (crop(conv2d(x, w, b, opt)) * r).sum();
  };

  Tensor x = Tensor::from_vector(xv, xs).set_requires_grad();
  Tensor w = Tensor::from_vector(wv, ws).set_requires_grad();
  Tensor b = Tensor::from_vector(bv, {ws[0]}).set_requires_grad();
  const auto g = gradients(loss(x, w, b), {x, w, b});
  ASSERT_EQ(g.size(), 3u);
  EXPECT_EQ(g[0].shape(), xs);
  EXPECT_EQ(g[1].shape(), ws);
  EXPECT_EQ(g[2].shape(), (Shape{ws[0]}));

  auto fd = [&](std::vector<double>& v) {
    return central_differences(v, [&] {
      return loss(Tensor::from_vector(xv, xs), Tensor::from_vector(wv, ws), Tensor::from_vector(bv, {ws[0]}))
          .item<double>();
    });
  };
  expect_close(g[0].to_vector<double>(), fd(xv), 1e-6, 1e-6, "d/dx");
  expect_close(g[1].to_vector<double>(), fd(wv), 1e-6, 1e-6, "d/dw");
  expect_close(g[2].to_vector<double>(), fd(bv), 1e-6, 1e-6, "d/db");
}
}  // namespace

TEST(Conv2dGrad, FiniteDifferencesPlain) {
  check_conv_grads({2, 4, 5, 3}, {2, 3, 2, 3}, {.padding = 1}, 100);
}

TEST(Conv2dGrad, FiniteDifferencesStrideDilationGroupsAsymmetric) {
  check_conv_grads({1, 7, 6, 4}, {4, 3, 2, 2},
                   {.stride = {2, 1}, .padding = {1, 0, 2, 1}, .dilation = {2, 1}, .groups = 2}, 200);
}

TEST(Conv2dGrad, FiniteDifferencesSameDepthwise) {
  check_conv_grads({1, 5, 6, 3}, {3, 3, 3, 1}, {.stride = 2, .padding = "same", .groups = 3}, 300);
}

// A crop of a conv's output (a max-pool over an odd size drops the last row and column) has a zero
// pad as its gradient. The backward calls run over the gradient before the pad instead, with the
// padding after reduced by the rows and columns dropped (times the stride): no Pad in the backward
// graph, conv2d_bwd_data and conv2d_bwd_weight over the kept outputs (N, OH - crop_h, OW - crop_w, O),
// and the same gradients (by finite differences). A crop bigger than the padding after keeps the pad.
namespace {
// The backward calls of loss = sum(crop(conv2d(x, w)) * r) (float64): their dy and padding.
void expect_backward_calls(const Shape& xs, const Shape& ws, const Conv2dOptions& opt, int64_t crop_h,
                           int64_t crop_w, const Shape& dy_shape, int64_t pad_bottom, int64_t pad_right,
                           size_t pads) {
  Tensor x = Tensor::from_vector(random_vec(size_t(numel(xs)), 7), xs).set_requires_grad();
  Tensor w = Tensor::from_vector(random_vec(size_t(numel(ws)), 8), ws).set_requires_grad();
  const Tensor y = conv2d(x, w, Tensor(), opt);
  const Tensor c = y.slice(1, 0, y.shape()[1] - crop_h).slice(2, 0, y.shape()[2] - crop_w);
  const auto g = gradients((c * c).sum(), {x, w});
  for (const Tensor& gi : g) {
    EXPECT_EQ(testing_graph::nodes_of(gi, Op::Pad).size(), pads);
    for (Op op : {Op::Conv2dBwdData, Op::Conv2dBwdWeight}) {
      const std::vector<NodePtr> calls = testing_graph::nodes_of(gi, op);
      for (const NodePtr& n : calls) {
        const auto& a = std::get<Conv2dArg>(n->arg);
        EXPECT_EQ(a.pad_bottom, pad_bottom) << op_name(op);
        EXPECT_EQ(a.pad_right, pad_right) << op_name(op);
        EXPECT_EQ(n->srcs[op == Op::Conv2dBwdData ? 0 : 1]->shape, dy_shape) << op_name(op);
      }
    }
  }
  EXPECT_EQ(testing_graph::nodes_of(g[0], Op::Conv2dBwdData).size(), 1u);
  EXPECT_EQ(testing_graph::nodes_of(g[1], Op::Conv2dBwdWeight).size(), 1u);
}
}  // namespace

TEST(Conv2dGrad, ACropsZeroPadGradientRunsTheBackwardOverTheKeptOutputs) {
  // airbench's case: 3x3, padding 1, the last row and column dropped -> padding after 0.
  expect_backward_calls({2, 7, 7, 3}, {4, 3, 3, 3}, {.padding = 1}, 1, 1, {2, 6, 6, 4}, 0, 0, 0);
  check_conv_grads({2, 7, 7, 3}, {4, 3, 3, 3}, {.padding = 1}, 400, 1, 1);
  // Stride 2 over rows (a dropped output row is 2 rows of padding), dilation, groups, uneven padding
  // {top 1, bottom 3, left 0, right 1}: OH = (9 + 4 - 5) / 2 + 1 = 5, OW = 6 + 1 - 2 + 1 = 6.
  const Conv2dOptions opt{.stride = {2, 1}, .padding = {1, 3, 0, 1}, .dilation = {2, 1}, .groups = 2};
  expect_backward_calls({1, 9, 6, 4}, {4, 3, 2, 2}, opt, 1, 1, {1, 4, 5, 4}, 1, 0, 0);
  check_conv_grads({1, 9, 6, 4}, {4, 3, 2, 2}, opt, 500, 1, 1);
  // Two columns dropped where the padding after is 1: the pad stays, and the gradients are right.
  expect_backward_calls({2, 7, 7, 3}, {4, 3, 3, 3}, {.padding = 1}, 0, 2, {2, 7, 7, 4}, 1, 1, 1);
  check_conv_grads({2, 7, 7, 3}, {4, 3, 3, 3}, {.padding = 1}, 600, 0, 2);
}

// A max-pool whose windows leave the conv's last rows and columns out (airbench's pools over 31x31,
// 15x15 and 7x7) reads a conv that computes only the kept outputs: its padding after reduced by the
// dropped rows and columns times the stride (graph/conv_crop.h), one conv in the graph, no slice. The
// pooled values are those of the whole conv's output, realized and then pooled; the gradients match
// finite differences. A crop bigger than the padding after slices the whole conv's output instead.
namespace {
void expect_pooled_conv(const Shape& xs, const Shape& ws, const Conv2dOptions& opt, int64_t pool,
                        const Shape& conv_shape, int64_t pad_bottom, int64_t pad_right, size_t slices,
                        uint64_t seed) {
  SCOPED_TRACE(::testing::Message() << "x " << to_string(xs) << " pool " << pool);
  ImplGuard impl(LibraryImpl::naive);
  std::vector<double> xv = random_vec(size_t(numel(xs)), seed), wv = random_vec(size_t(numel(ws)), seed + 1);
  auto head = [&](const Tensor& x, const Tensor& w) { return max_pool2d(conv2d(x, w, Tensor(), opt), pool); };
  {
    NoGradGuard no_grad;
    const Tensor y = head(Tensor::from_vector(xv, xs), Tensor::from_vector(wv, ws));
    const std::vector<NodePtr> convs = testing_graph::nodes_of(y, Op::Conv2d);
    ASSERT_EQ(convs.size(), 1u);
    EXPECT_EQ(convs[0]->shape, conv_shape);
    const auto& a = std::get<Conv2dArg>(convs[0]->arg);
    EXPECT_EQ(a.pad_bottom, pad_bottom);
    EXPECT_EQ(a.pad_right, pad_right);
    EXPECT_EQ(testing_graph::nodes_of(y, Op::Slice).size(), slices);
    const Tensor whole =
        conv2d(Tensor::from_vector(xv, xs), Tensor::from_vector(wv, ws), Tensor(), opt).realize();
    EXPECT_EQ(y.to_vector<double>(), max_pool2d(whole, pool).to_vector<double>());
  }
  const Shape ys = head(Tensor::zeros(xs, DType::float64), Tensor::zeros(ws, DType::float64)).shape();
  const Tensor r = Tensor::from_vector(random_vec(size_t(numel(ys)), seed + 2), ys);
  auto loss = [&](const Tensor& x, const Tensor& w) { return (head(x, w) * r).sum(); };
  Tensor x = Tensor::from_vector(xv, xs).set_requires_grad(),
         w = Tensor::from_vector(wv, ws).set_requires_grad();
  const auto g = gradients(loss(x, w), {x, w});
  EXPECT_EQ(testing_graph::nodes_of(g[1], Op::Conv2d).size(), 1u) << "the backward recomputes the conv";
  auto fd = [&](std::vector<double>& v) {
    return central_differences(
        v, [&] { return loss(Tensor::from_vector(xv, xs), Tensor::from_vector(wv, ws)).item<double>(); });
  };
  expect_close(g[0].to_vector<double>(), fd(xv), 1e-6, 1e-6, "d/dx");
  expect_close(g[1].to_vector<double>(), fd(wv), 1e-6, 1e-6, "d/dw");
}
}  // namespace

TEST(Conv2d, APooledConvComputesOnlyTheKeptOutputs) {
  // airbench's case: 3x3, padding 1, a 7x7 output pooled by 2 -> the conv computes 6x6, padding after 0.
  expect_pooled_conv({2, 7, 7, 3}, {4, 3, 3, 3}, {.padding = 1}, 2, {2, 6, 6, 4}, 0, 0, 0, 700);
  // Stride 2 over rows, dilation, groups, uneven padding {top 1, bottom 3, left 0, right 1}: the output
  // (5, 6) pooled by 2 keeps (4, 6): one row dropped is 2 rows of padding after, the columns all kept.
  expect_pooled_conv({1, 9, 6, 4}, {4, 3, 2, 2},
                     {.stride = {2, 1}, .padding = {1, 3, 0, 1}, .dilation = {2, 1}, .groups = 2}, 2,
                     {1, 4, 6, 4}, 1, 1, 0, 800);
  // No padding to take from: the 6x6 output pooled by 4 drops 2 rows and columns -> a slice.
  expect_pooled_conv({1, 8, 8, 2}, {3, 3, 3, 2}, {}, 4, {1, 6, 6, 3}, 0, 0, 2, 900);
}

// Where the device's library pads symmetrically (cuDNN: LibraryCaps::conv_pads_each_side false), a
// conv with less padding after would cost a padded copy of its input: the pool reads a slice of the
// whole conv's output, and the backward calls run over the padded gradient.
TEST(Conv2d, WhereTheLibraryPadsSymmetricallyThePoolSlicesTheWholeConv) {
  struct SymmetricPads {
    LibraryCapsSource prev = set_library_caps_source([](Device) { return LibraryCaps{}; });
    ~SymmetricPads() { set_library_caps_source(prev); }
  } guard;
  EXPECT_FALSE(library_caps(Device::cpu()).conv_pads_each_side);
  expect_pooled_conv({2, 7, 7, 3}, {4, 3, 3, 3}, {.padding = 1}, 2, {2, 7, 7, 4}, 1, 1, 2, 1000);
  // the crop of rows and the crop of columns: a pad each
  expect_backward_calls({2, 7, 7, 3}, {4, 3, 3, 3}, {.padding = 1}, 1, 1, {2, 7, 7, 4}, 1, 1, 2);
}

// The gradient through backward() and .grad() agrees with gradients() and reaches the bias as a sum.
TEST(Conv2dGrad, BackwardFillsGrad) {
  Tensor x = Tensor::ones({2, 3, 3, 1}, DType::float64).set_requires_grad();
  Tensor w = Tensor::ones({2, 2, 2, 1}, DType::float64).set_requires_grad();
  Tensor b = Tensor::zeros({2}, DType::float64).set_requires_grad();
  conv2d(x, w, b).sum().backward();
  // 2 images x 2x2 outputs: db = 8 per channel; each w tap sees 8 ones; x corners are in 1 window
  // per output channel, edges 2, the centre 4 (times 2 output channels).
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{8, 8}));
  EXPECT_EQ(w.grad().to_vector<double>(), std::vector<double>(8, 8.0));
  const std::vector<double> img = {2, 4, 2, 4, 8, 4, 2, 4, 2};
  std::vector<double> both(img);
  both.insert(both.end(), img.begin(), img.end());
  EXPECT_EQ(x.grad().to_vector<double>(), both);
}

// ---- errors
// ------------------------------------------------------------------------------------------------------
namespace {
void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected aether::Error containing \"" << part << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "message: " << e.what();
  }
}
}  // namespace

TEST(Conv2dErrors, Messages) {
  const Tensor x = Tensor::ones({1, 5, 5, 4});
  expect_error([&] { conv2d(x, Tensor::ones({2, 3, 3, 3})); }, "channel mismatch");
  expect_error([&] { conv2d(x, Tensor::ones({2, 3, 3, 3})); }, "(1, 5, 5, 4)");
  EXPECT_THROW(conv2d(x, Tensor::ones({2, 3, 3, 3})), Error);
  expect_error(
      [&] {
        conv2d(x, Tensor::ones({2, 3, 3, 1}), Tensor(), {.groups = 3});
      },
      "divisible by groups");
  expect_error(
      [&] {
        conv2d(x, Tensor::ones({3, 3, 3, 2}), Tensor(), {.groups = 2});
      },
      "output channels (3) must be divisible by groups (2)");
  expect_error(
      [&] {
        conv2d(x, Tensor::ones({2, 3, 3, 4}), Tensor(), {.groups = 0});
      },
      "groups must be >= 1");
  expect_error([&] { conv2d(x, Tensor::ones({2, 6, 3, 4})); }, "input too small");
  expect_error([&] { conv2d(x, Tensor::ones({2, 3, 3, 4}), Tensor(), {.dilation = 3}); }, "input too small");
  EXPECT_NO_THROW(conv2d(x, Tensor::ones({2, 6, 3, 4}), Tensor(), {.padding = {1, 0}}));
  expect_error([&] { conv2d(Tensor::ones({5, 5, 4}), Tensor::ones({2, 3, 3, 4})); }, "expected x of shape");
  expect_error(
      [&] {
        conv2d(x, Tensor::ones({2, 3, 3, 4}), Tensor::ones({3}));
      },
      "expected bias of shape (2)");
  expect_error(
      [&] {
        conv2d(x.cast(DType::int32), Tensor::ones({2, 3, 3, 4}, DType::int64));
      },
      "expected float tensors");
  expect_error(
      [&] {
        conv2d(x, Tensor::ones({2, 3, 3, 4}), Tensor(), {.stride = 0});
      },
      "stride must be >= 1");
  expect_error(
      [&] {
        conv2d(x, Tensor::ones({2, 3, 3, 4}), Tensor(), {.padding = {-1, 0}});
      },
      "padding must be >= 0");
  expect_error(
      [] {
        Conv2dOptions o{.padding = "full"};
        (void)o;
      },
      "\"same\" or \"valid\"");
}

// ---- the fast path (fused executor: oneDNN) against the oracle (reference backend) -----------------------
namespace {
// Random geometries: odd sizes, strides 1-3, asymmetric padding, dilation and groups (depthwise when
// a group has one channel). Geometries without an output are drawn again.
std::vector<Case> random_cases(size_t count, uint64_t seed) {
  std::mt19937_64 gen(seed);
  auto r = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); };
  std::vector<Case> cs;
  while (cs.size() < count) {
    Case c{};
    c.name = "random";
    c.N = r(1, 3);
    c.H = r(1, 12);
    c.W = r(1, 12);
    c.KH = r(1, 4);
    c.KW = r(1, 4);
    c.a.stride_h = r(1, 3);
    c.a.stride_w = r(1, 3);
    c.a.pad_top = r(0, 2);
    c.a.pad_bottom = r(0, 2);
    c.a.pad_left = r(0, 2);
    c.a.pad_right = r(0, 2);
    c.a.dil_h = r(1, 2);
    c.a.dil_w = r(1, 2);
    c.a.groups = r(1, 3);
    c.C = c.a.groups * r(1, 6);
    c.O = c.a.groups * r(1, 6);
    if (out_h(c) >= 1 && out_w(c) >= 1) cs.push_back(c);
  }
  return cs;
}
std::string describe(const Case& c) {
  return detail::cat(c.name, " x (", c.N, ",", c.H, ",", c.W, ",", c.C, ") w (", c.O, ",", c.KH, ",", c.KW,
                     ",", c.C / c.a.groups, ") stride ", c.a.stride_h, "x", c.a.stride_w, " pad ",
                     c.a.pad_top, ",", c.a.pad_bottom, ",", c.a.pad_left, ",", c.a.pad_right, " dil ",
                     c.a.dil_h, "x", c.a.dil_w, " groups ", c.a.groups);
}
}  // namespace

// Forward, backward-data and backward-weights in float32: the fused executor's oneDNN calls against the
// reference backend's naive loops. Tolerance: the float32 summation bound of oracle_util.h, with K the
// number of products per output element (fwd KH*KW*Cg, bwd_data at most KH*KW*Og, bwd_weight at most
// N*OH*OW) and S computed by the oracle from the inputs' absolute values.
TEST(ConvOracle, FusedOnednnMatchesReferenceF32) {
  const test::DefaultDevice on_cpu(Device::cpu());  // oneDNN's path (the suite may run on a GPU)
  using namespace oracle_test;
  std::vector<Case> all = cases();
  const auto rnd = random_cases(20, 2024);
  all.insert(all.end(), rnd.begin(), rnd.end());
  uint64_t seed = 600;
  for (const Case& c : all) {
    const Ref r(c);
    const std::string what = describe(c);
    const Shape xs{c.N, c.H, c.W, c.C}, ws{c.O, c.KH, c.KW, r.Cg}, ys{c.N, r.OH, r.OW, c.O};
    const auto xv = uniform(size_t(numel(xs)), seed++), wv = uniform(size_t(numel(ws)), seed++),
               dyv = uniform(size_t(numel(ys)), seed++);
    auto run = [&](const std::vector<double>& xd, const std::vector<double>& wd,
                   const std::vector<double>& dyd) {
      const Tensor x = f32_tensor(xd, xs), w = f32_tensor(wd, ws), dy = f32_tensor(dyd, ys);
      return std::vector<std::vector<double>>{f32_values(prim::conv2d(x, w, c.a)),
                                              f32_values(prim::conv2d_bwd_data(dy, w, xs, c.a)),
                                              f32_values(prim::conv2d_bwd_weight(x, dy, ws, c.a))};
    };
    const int64_t calls = cpu::onednn_calls();
    const auto fast = with_fusion(true, [&] {
      ImplGuard impl(LibraryImpl::onednn);
      return run(xv, wv, dyv);
    });
    ASSERT_GE(cpu::onednn_calls() - calls, 3) << what << ": the fused executor did not call oneDNN";
    const auto want = with_fusion(false, [&] { return run(xv, wv, dyv); });
    const auto scale = with_fusion(false, [&] { return run(abs_of(xv), abs_of(wv), abs_of(dyv)); });
    expect_within_sum_bound(fast[0], want[0], scale[0], c.KH * c.KW * r.Cg, what + " fwd");
    expect_within_sum_bound(fast[1], want[1], scale[1], c.KH * c.KW * r.Og, what + " bwd_data");
    expect_within_sum_bound(fast[2], want[2], scale[2], c.N * r.OH * r.OW, what + " bwd_weight");
    // The oracle itself against the direct NCHW computation of this file (double, then one rounding).
    auto f32 = [](std::vector<double> v) {
      for (double& e : v) e = double(float(e));
      return v;
    };
    expect_close(to_channels_first(want[0], c.N, r.OH, r.OW, c.O),
                 f32(r.fwd(to_channels_first(f32(xv), c.N, c.H, c.W, c.C),
                           to_channels_first(f32(wv), c.O, c.KH, c.KW, r.Cg))),
                 1e-6, 1e-7, what + " oracle fwd");
  }
}

// The reference backend never calls oneDNN: not for conv (forward, both gradients, through autograd),
// matmul or pooling. The counter is checked to move on the fused path, so this test can fail.
TEST(ConvOracle, ReferenceBackendNeverCallsOnednn) {
  const test::DefaultDevice on_cpu(Device::cpu());  // oneDNN's path (the suite may run on a GPU)
  using namespace oracle_test;
  const Tensor x = Tensor::from_vector(uniform(2 * 7 * 6 * 4, 1), {2, 7, 6, 4}).cast(DType::float32);
  const Tensor w = Tensor::from_vector(uniform(8 * 3 * 3 * 2, 2), {8, 3, 3, 2}).cast(DType::float32);
  const Tensor b = Tensor::from_vector(uniform(8, 3), {8}).cast(DType::float32);
  const Conv2dOptions opt{.stride = {2, 1}, .padding = 1, .groups = 2};
  auto step = [&] {
    Tensor xr = x.detach().set_requires_grad(), wr = w.detach().set_requires_grad();
    const Tensor y = conv2d(xr, wr, b, opt).relu();
    const Tensor p = max_pool2d(y, 3, 2, 1) + avg_pool2d(y, 2).sum();  // (2,2,3,8)
    const Tensor m = matmul(p.reshape({2, 48}), Tensor::ones({48, 3}));
    const auto g = gradients(m.sum(), {xr, wr});
    return std::vector<std::vector<double>>{m.to_vector<double>(), g[0].to_vector<double>(),
                                            g[1].to_vector<double>()};
  };
  ImplGuard impl(LibraryImpl::onednn);
  int64_t calls = cpu::onednn_calls();
  const auto fast = with_fusion(true, step);
  EXPECT_GT(cpu::onednn_calls(), calls) << "the fused executor made no oneDNN call: the counter is dead";
  calls = cpu::onednn_calls();
  const auto ref = with_fusion(false, step);
  EXPECT_EQ(cpu::onednn_calls(), calls) << "the reference backend called oneDNN";
  for (size_t i = 0; i < fast.size(); ++i) expect_close(fast[i], ref[i], 1e-4, 1e-4, "fused vs reference");
}
