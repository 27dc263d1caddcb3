// Tests of aether::matmul: hand-computed values and a naive double loop written here for every
// supported dtype, batched and broadcast batch dims, 1-D operands, strided operands, oneDNN
// against the naive loop, finite-difference gradients in float64, and error messages.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "backend/cpu/kernels.h"
#include "device_guard.h"
#include "oracle_util.h"

using namespace aether;

namespace {

class ImplGuard {
 public:
  explicit ImplGuard(LibraryImpl impl) : prev_(library_impl()) { set_library_impl(impl); }
  ~ImplGuard() { set_library_impl(prev_); }

 private:
  LibraryImpl prev_;
};

const std::vector<DType> kDtypes = {DType::float32, DType::float64,  DType::int32,
                                    DType::int64,   DType::bfloat16, DType::float16};

// Small integers in [-3, 3]: every product and sum below is exact in every dtype.
std::vector<double> small_ints(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_int_distribution<int> u(-3, 3);
  std::vector<double> v(n);
  for (auto& e : v) e = u(gen);
  return v;
}
std::vector<double> uniform(size_t n, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  std::vector<double> v(n);
  for (auto& e : v) e = u(gen);
  return v;
}

// c[b] = a[b] (M,K) x b[b] (K,N) for B stacked matrices, in double.
std::vector<double> naive_bmm(const std::vector<double>& a, const std::vector<double>& b, int64_t B,
                              int64_t M, int64_t K, int64_t N) {
  std::vector<double> c(size_t(B * M * N), 0.0);
  for (int64_t i = 0; i < B; ++i)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t n = 0; n < N; ++n)
        for (int64_t k = 0; k < K; ++k)
          c[size_t((i * M + m) * N + n)] += a[size_t((i * M + m) * K + k)] * b[size_t((i * K + k) * N + n)];
  return c;
}

void expect_error(const std::function<void()>& f, const std::string& part) {
  try {
    f();
    ADD_FAILURE() << "expected aether::Error containing \"" << part << "\"";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << "message: " << e.what();
  }
}

}  // namespace

// ---- forward ---------------------------------------------------------------------------------------------
TEST(Matmul, HandComputedEveryDtype) {
  // [[1,2,3],[4,5,6]] x [[7,8],[9,10],[11,12]] = [[58,64],[139,154]] (exact even in bfloat16).
  for (LibraryImpl impl : {LibraryImpl::onednn, LibraryImpl::naive}) {
    ImplGuard guard(impl);
    for (DType t : kDtypes) {
      const Tensor a = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).cast(t);
      const Tensor b = Tensor::from_vector<double>({7, 8, 9, 10, 11, 12}, {3, 2}).cast(t);
      const Tensor c = matmul(a, b);
      EXPECT_EQ(c.dtype(), t);
      EXPECT_EQ(c.shape(), (Shape{2, 2}));
      EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{58, 64, 139, 154})) << dtype_name(t);
    }
  }
  // Native integer storage, no casts.
  const Tensor ai = Tensor::from_vector<int32_t>({1, -2, 3, 4}, {2, 2});
  EXPECT_EQ(matmul(ai, ai).to_vector<int32_t>(), (std::vector<int32_t>{-5, -10, 15, 10}));
  const Tensor al = Tensor::from_vector<int64_t>({3000000000LL, 1, 0, 2}, {2, 2});
  EXPECT_EQ(matmul(al, al).to_vector<int64_t>(),
            (std::vector<int64_t>{9000000000000000000LL, 3000000002LL, 0, 4}));
}

TEST(Matmul, PromotesMixedDtypes) {
  const Tensor a = Tensor::from_vector<int32_t>({1, 2}, {1, 2});
  const Tensor b = Tensor::from_vector<float>({0.5f, 0.25f}, {2, 1});
  const Tensor c = matmul(a, b);
  EXPECT_EQ(c.dtype(), DType::float32);
  EXPECT_EQ(c.item<float>(), 1.0f);
  EXPECT_EQ(matmul(a.cast(DType::float16), b.cast(DType::bfloat16)).dtype(), DType::float32);
  EXPECT_EQ(matmul(a, a.t().cast(DType::int64)).dtype(), DType::int64);
}

TEST(Matmul, BatchedAndBroadcastBatchDimsEveryDtype) {
  // a (2,1,3,4) x b (3,4,5) -> (2,3,3,5): out[i][j] = a[i][0] x b[j].
  const auto av = small_ints(2 * 3 * 4, 1), bv = small_ints(3 * 4 * 5, 2);
  std::vector<double> want;
  for (int64_t i = 0; i < 2; ++i)
    for (int64_t j = 0; j < 3; ++j) {
      const std::vector<double> ai(av.begin() + i * 12, av.begin() + (i + 1) * 12);
      const std::vector<double> bj(bv.begin() + j * 20, bv.begin() + (j + 1) * 20);
      const auto c = naive_bmm(ai, bj, 1, 3, 4, 5);
      want.insert(want.end(), c.begin(), c.end());
    }
  for (LibraryImpl impl : {LibraryImpl::onednn, LibraryImpl::naive}) {
    ImplGuard guard(impl);
    for (DType t : kDtypes) {
      const Tensor a = Tensor::from_vector(av, {2, 1, 3, 4}).cast(t);
      const Tensor b = Tensor::from_vector(bv, {3, 4, 5}).cast(t);
      const Tensor c = matmul(a, b);
      EXPECT_EQ(c.shape(), (Shape{2, 3, 3, 5}));
      EXPECT_EQ(c.to_vector<double>(), want) << dtype_name(t);
      // Plain batch (no broadcasting): (3,4,5)^T-ish stack against itself.
      const Tensor d = matmul(b.transpose(1, 2), b);  // (3,5,5), a strided left operand
      EXPECT_EQ(d.to_vector<double>(),
                naive_bmm(Tensor::from_vector(bv, {3, 4, 5}).transpose(1, 2).contiguous().to_vector<double>(),
                          bv, 3, 5, 4, 5))
          << dtype_name(t);
    }
  }
}

TEST(Matmul, OneDimensionalOperands) {
  const Tensor v = Tensor::from_vector<double>({1, 2, 3}, {3});
  const Tensor m = Tensor::from_vector<double>({1, 0, 2, 1, 0, 3, 4, 1, 1, 0, 2, 5}, {3, 4});
  // (K) x (K,N) -> (N)
  Tensor r = matmul(v, m);
  EXPECT_EQ(r.shape(), (Shape{4}));
  EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{4, 6, 16, 18}));
  // (M,K) x (K) -> (M)
  const Tensor w = Tensor::from_vector<double>({2, -1, 1, 3}, {4});
  r = matmul(m, w);
  EXPECT_EQ(r.shape(), (Shape{3}));
  EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{7, 4, 19}));
  // (K) x (K) -> () : the dot product
  r = matmul(v, v);
  EXPECT_EQ(r.shape(), Shape{});
  EXPECT_EQ(r.item<double>(), 14);
  // (K) x (B,K,N) -> (B,N) and (B,M,K) x (K) -> (B,M)
  const Tensor bm = Tensor::from_vector<double>(
      {1, 0, 2, 1, 0, 3, 4, 1, 1, 0, 2, 5, 1, 0, 2, 1, 0, 3, 4, 1, 1, 0, 2, 5}, {2, 3, 4});
  r = matmul(v, bm);
  EXPECT_EQ(r.shape(), (Shape{2, 4}));
  EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{4, 6, 16, 18, 4, 6, 16, 18}));
  r = matmul(bm, w);
  EXPECT_EQ(r.shape(), (Shape{2, 3}));
  EXPECT_EQ(r.to_vector<double>(), (std::vector<double>{7, 4, 19, 7, 4, 19}));
  // The Tensor method is the same op.
  EXPECT_EQ(v.matmul(m).to_vector<double>(), (std::vector<double>{4, 6, 16, 18}));
}

// ---- oneDNN vs naive (float32, non-integer data) ---------------------------------------------------------
TEST(Matmul, OnednnMatchesNaiveFloat32) {
  const test::DefaultDevice on_cpu(Device::cpu());  // oneDNN's path (the suite may run on a GPU)
  const int64_t B = 3, M = 17, K = 33, N = 9;
  const auto av = uniform(size_t(B * M * K), 3), bv = uniform(size_t(B * K * N), 4);
  // The kernels directly: oneDNN must accept float32 (else the comparison would be vacuous).
  const std::vector<float> af(av.begin(), av.end()), bf(bv.begin(), bv.end());
  std::vector<float> c1(size_t(B * M * N)), c2(c1.size());
  cpu::matmul_naive(DType::float32, af.data(), bf.data(), c1.data(), B, M, K, N);
  ASSERT_TRUE(cpu::matmul_onednn(DType::float32, af.data(), bf.data(), c2.data(), B, M, K, N));
  const auto want = naive_bmm(std::vector<double>(af.begin(), af.end()),
                              std::vector<double>(bf.begin(), bf.end()), B, M, K, N);
  for (size_t i = 0; i < c1.size(); ++i) {
    EXPECT_NEAR(c2[i], c1[i], 1e-4 * std::max(1.0, std::abs(double(c1[i])))) << i;
    EXPECT_NEAR(c1[i], want[i], 1e-4 * std::max(1.0, std::abs(want[i]))) << i;
  }
  // Through the tensor API with set_library_impl.
  const Tensor a = Tensor::from_vector(af, {B, M, K}), b = Tensor::from_vector(bf, {B, K, N});
  std::vector<float> by_impl[2];
  for (int i = 0; i < 2; ++i) {
    ImplGuard guard(i == 0 ? LibraryImpl::onednn : LibraryImpl::naive);
    by_impl[i] = matmul(a, b).to_vector<float>();
  }
  // The reference backend (AETHER_FUSE=0) runs the naive loop whatever the setting.
  EXPECT_EQ(by_impl[0], fusion_enabled() ? c2 : c1);
  EXPECT_EQ(by_impl[1], c1);
}

// Transposed operands (x @ w^T in a linear layer, x^T @ dy in its backward) are read in place by
// oneDNN: the same values as copies would give, and no copy is made (one buffer: the result). Also
// 16-bit ones, batched ones, and views that are not transposed matrices (sliced, padded), copied.
TEST(Matmul, TransposedOperandsAreReadInPlace) {
  const test::DefaultDevice on_cpu(Device::cpu());
  const int64_t B = 3, M = 17, K = 33, N = 9;
  const auto av = uniform(size_t(B * M * K), 7), bv = uniform(size_t(B * K * N), 8);
  const std::vector<float> af(av.begin(), av.end()), bf(bv.begin(), bv.end());
  const Tensor a = Tensor::from_vector(af, {B, M, K}), b = Tensor::from_vector(bf, {B, K, N});
  // The same matrices stored transposed: at = (B,K,M) row-major, bt = (B,N,K).
  const Tensor at = a.transpose(1, 2).contiguous().realize(), bt = b.transpose(1, 2).contiguous().realize();
  const std::vector<double> want = naive_bmm(av, bv, B, M, K, N);
  for (DType t : {DType::float32, DType::bfloat16}) {
    const Tensor a_t = at.cast(t).realize(), b_t = bt.cast(t).realize();
    for (int c = 0; c < 4; ++c) {  // which operands are transposed views
      const Tensor x = c & 1 ? a_t.transpose(1, 2) : a.cast(t), y = c & 2 ? b_t.transpose(1, 2) : b.cast(t);
      realize({x, y});
      const int64_t before = Buffer::alloc_stats().buffers;
      const Tensor r = matmul(x, y).realize();
      const int64_t buffers = Buffer::alloc_stats().buffers - before;
      const std::string what = detail::cat(dtype_name(t), " transposed ", c);
      if (fusion_enabled() && library_impl() == LibraryImpl::onednn && t == DType::float32) {
        EXPECT_EQ(buffers, 1) << what << ": a copy of an operand was made";
      }
      const auto got = r.to_vector<double>();
      const double tol = t == DType::float32 ? 1e-4 : 4e-2;
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " " << i;
    }
  }
  // A 2-D weight's transpose, as Dense's forward; a sliced and a padded view, which are not.
  const Tensor w = Tensor::from_vector(bf, {N * B, K}).realize();  // (27, 33)
  const Tensor x = a.reshape({B * M, K});
  const Tensor y = matmul(x, w.t());
  const auto xs = x.to_vector<double>(), ws = w.to_vector<double>();
  const auto got = y.to_vector<double>();
  for (int64_t i = 0; i < B * M; i += 7)
    for (int64_t j = 0; j < N * B; j += 5) {
      double s = 0;
      for (int64_t k = 0; k < K; ++k) s += xs[size_t(i * K + k)] * ws[size_t(j * K + k)];
      EXPECT_NEAR(got[size_t(i * N * B + j)], s, 1e-4 * std::max(1.0, std::abs(s)));
    }
  const Tensor sliced = matmul(x, w.t().slice(1, 0, N * B, 2)),
               padded = matmul(x, w.t().pad({{0, 0}, {0, 1}}));
  EXPECT_EQ(sliced.shape(), (Shape{B * M, (N * B + 1) / 2}));
  const auto sv = sliced.to_vector<double>(), pv = padded.to_vector<double>();
  for (int64_t i = 0; i < B * M; ++i) {
    EXPECT_NEAR(sv[size_t(i * sliced.shape()[1] + 1)], got[size_t(i * N * B + 2)], 1e-5);  // column 2
    EXPECT_NEAR(pv[size_t(i * (N * B + 1) + 3)], got[size_t(i * N * B + 3)], 1e-5);
    EXPECT_EQ(pv[size_t(i * (N * B + 1) + N * B)], 0.0);  // the padded column
  }
}

// 16-bit operands: natively where the CPU has the instructions, else float32 on widened copies
// (backend/cpu/widen.h); either way one rounding of a float32 sum, like the naive loop.
TEST(Matmul, OnednnSixteenBitMatchesNaive) {
  const int64_t B = 2, M = 9, K = 40, N = 7;
  const auto av = uniform(size_t(B * M * K), 5), bv = uniform(size_t(B * K * N), 6);
  for (DType t : {DType::bfloat16, DType::float16}) {
    SCOPED_TRACE(dtype_name(t));
    const Tensor a =
        Tensor::from_vector(std::vector<float>(av.begin(), av.end()), {B, M, K}).cast(t).realize();
    const Tensor b =
        Tensor::from_vector(std::vector<float>(bv.begin(), bv.end()), {B, K, N}).cast(t).realize();
    std::vector<uint16_t> ah(size_t(B * M * K)), bh(size_t(B * K * N)), c1(size_t(B * M * N)), c2(c1.size());
    a.copy_to(ah.data(), t);
    b.copy_to(bh.data(), t);
    const int64_t widened = cpu::matmul_widened_calls();
    ASSERT_TRUE(cpu::matmul_onednn(t, ah.data(), bh.data(), c2.data(), B, M, K, N));
    if (t == DType::float16) {  // oneDNN has no float16 matmul here
      EXPECT_EQ(cpu::matmul_widened_calls(), widened + 1);
    }
    cpu::matmul_naive(t, ah.data(), bh.data(), c1.data(), B, M, K, N);
    const auto to_f = [t](uint16_t h) { return t == DType::float16 ? half_to_float(h) : bf16_to_float(h); };
    const double ulp = t == DType::float16 ? 1.0 / 1024 : 1.0 / 128;
    for (size_t i = 0; i < c1.size(); ++i)
      EXPECT_NEAR(to_f(c2[i]), to_f(c1[i]), ulp * std::max(1.0f, std::fabs(to_f(c1[i])))) << i;
  }
}

TEST(Matmul, OnednnDeclinesUnsupportedDtypes) {
  double a = 1, b = 2, c = 0;
  EXPECT_FALSE(cpu::matmul_onednn(DType::float64, &a, &b, &c, 1, 1, 1, 1));
  int64_t ai = 1, bi = 2, ci = 0;
  EXPECT_FALSE(cpu::matmul_onednn(DType::int64, &ai, &bi, &ci, 1, 1, 1, 1));
}

// ---- gradients (float64, central differences)
// --------------------------------------------------------------
namespace {
void check_matmul_grads(const Shape& as, const Shape& bs, uint64_t seed) {
  auto av = uniform(size_t(numel(as)), seed), bv = uniform(size_t(numel(bs)), seed + 1);
  const Shape cs = matmul(Tensor::zeros(as, DType::float64), Tensor::zeros(bs, DType::float64)).shape();
  const Tensor r = Tensor::from_vector(uniform(size_t(numel(cs)), seed + 2), cs);
  auto loss = [&](const Tensor& a, const Tensor& b) { return (matmul(a, b) * r).sum(); };
  Tensor a = Tensor::from_vector(av, as).set_requires_grad();
  Tensor b = Tensor::from_vector(bv, bs).set_requires_grad();
  const auto g = gradients(loss(a, b), {a, b});
  ASSERT_EQ(g[0].shape(), as);
  ASSERT_EQ(g[1].shape(), bs);
  NoGradGuard no_grad;
  constexpr double kEps = 1e-6;
  auto fd = [&](std::vector<double>& v) {
    std::vector<double> out(v.size());
    for (size_t i = 0; i < v.size(); ++i) {
      const double keep = v[i];
      v[i] = keep + kEps;
      const double fp = loss(Tensor::from_vector(av, as), Tensor::from_vector(bv, bs)).item<double>();
      v[i] = keep - kEps;
      const double fm = loss(Tensor::from_vector(av, as), Tensor::from_vector(bv, bs)).item<double>();
      v[i] = keep;
      out[i] = (fp - fm) / (2 * kEps);
    }
    return out;
  };
  const auto ga = g[0].to_vector<double>(), gb = g[1].to_vector<double>();
  const auto fa = fd(av), fb = fd(bv);
  for (size_t i = 0; i < ga.size(); ++i) EXPECT_NEAR(ga[i], fa[i], 1e-6) << "d/da " << i;
  for (size_t i = 0; i < gb.size(); ++i) EXPECT_NEAR(gb[i], fb[i], 1e-6) << "d/db " << i;
}
}  // namespace

TEST(MatmulGrad, FiniteDifferencesPlain) { check_matmul_grads({3, 4}, {4, 2}, 10); }
TEST(MatmulGrad, FiniteDifferencesBatchBroadcast) {
  check_matmul_grads({2, 1, 3, 4}, {3, 4, 2}, 20);  // both operands broadcast along a batch dim
  check_matmul_grads({4, 3}, {2, 3, 2}, 30);        // a 2-D left operand shared by the batch
}
TEST(MatmulGrad, FiniteDifferencesOneDimensional) {
  check_matmul_grads({4}, {4, 3}, 40);
  check_matmul_grads({2, 3, 4}, {4}, 50);
  check_matmul_grads({5}, {5}, 60);
}

// ---- errors
// ----------------------------------------------------------------------------------------------------
TEST(MatmulErrors, Messages) {
  expect_error([] { matmul(Tensor::ones({2, 3}), Tensor::ones({4, 2})); }, "inner dims differ");
  expect_error([] { matmul(Tensor::ones({2, 3}), Tensor::ones({4, 2})); }, "(2, 3) x (4, 2)");
  expect_error([] { matmul(Tensor::ones({3}), Tensor::ones({4})); }, "inner dims differ");
  expect_error([] { matmul(Tensor::ones({2, 2, 3}), Tensor::ones({3, 3, 4})); }, "matmul");
  expect_error([] { matmul(Tensor::scalar(2), Tensor::ones({2})); }, "scalars");
  expect_error(
      [] {
        matmul(Tensor::ones({2, 2}, DType::boolean), Tensor::ones({2, 2}, DType::boolean));
      },
      "bool");
}

// ---- the fast path (fused executor: oneDNN) against the oracle (reference backend) -----------------------
// Random shapes with odd sizes, batched, plus a broadcast batch dim and a transposed (strided)
// operand, in float32. Tolerance: the float32 summation bound of oracle_util.h with K products per
// element and S computed by the oracle from |a| and |b|.
TEST(MatmulOracle, FusedOnednnMatchesReferenceF32) {
  const test::DefaultDevice on_cpu(Device::cpu());  // oneDNN's path (the suite may run on a GPU)
  using oracle_test::abs_of, oracle_test::expect_within_sum_bound, oracle_test::f32_tensor,
      oracle_test::f32_values, oracle_test::with_fusion;
  struct S {
    int64_t B, M, K, N;
  };
  std::vector<S> shapes = {{1, 1, 1, 1}, {1, 1, 300, 1}, {2, 7, 129, 5}, {3, 33, 17, 65}, {1, 64, 256, 48}};
  std::mt19937_64 gen(99);
  auto r = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(gen); };
  for (int i = 0; i < 16; ++i) shapes.push_back({r(1, 4), r(1, 40), r(1, 200), r(1, 40)});
  uint64_t seed = 700;
  for (const S& s : shapes) {
    const std::string what = detail::cat("(", s.B, ",", s.M, ",", s.K, ") x (", s.B, ",", s.K, ",", s.N, ")");
    const auto av = uniform(size_t(s.B * s.M * s.K), seed++), bv = uniform(size_t(s.B * s.K * s.N), seed++);
    // c = a b, c2 = a[0] b with a's batch dim broadcast, c3 = a bt^T with bt (B,N,K) transposed.
    auto run = [&](const std::vector<double>& ad, const std::vector<double>& bd) {
      const Tensor a = f32_tensor(ad, {s.B, s.M, s.K}), b = f32_tensor(bd, {s.B, s.K, s.N}),
                   bt = f32_tensor(bd, {s.B, s.N, s.K});
      return std::vector<std::vector<double>>{f32_values(matmul(a, b)),
                                              f32_values(matmul(a.slice(0, 0, 1).reshape({s.M, s.K}), b)),
                                              f32_values(matmul(a, bt.permute({0, 2, 1})))};
    };
    const int64_t calls = cpu::onednn_calls();
    const auto fast = with_fusion(true, [&] {
      ImplGuard impl(LibraryImpl::onednn);
      return run(av, bv);
    });
    ASSERT_GE(cpu::onednn_calls() - calls, 3) << what << ": the fused executor did not call oneDNN";
    const auto want = with_fusion(false, [&] { return run(av, bv); });
    const auto scale = with_fusion(false, [&] { return run(abs_of(av), abs_of(bv)); });
    for (size_t k = 0; k < fast.size(); ++k)
      expect_within_sum_bound(fast[k], want[k], scale[k], s.K, what + " case " + std::to_string(k));
    // The oracle itself against the double loop of this file, on the same float32 inputs.
    std::vector<double> af(av), bf(bv);
    for (double& e : af) e = double(float(e));
    for (double& e : bf) e = double(float(e));
    const auto exact = naive_bmm(af, bf, s.B, s.M, s.K, s.N);
    // (Both sum in double; the oracle rounds once to float32: half an ulp, 2^-24 relative.)
    for (size_t i = 0; i < exact.size(); ++i)
      ASSERT_NEAR(want[0][i], exact[i], std::ldexp(std::abs(exact[i]), -23) + 1e-12)
          << what << " oracle element " << i;
  }
}
