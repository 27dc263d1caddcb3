// Tests of the Muon optimizer and its Newton-Schulz orthogonalisation (aether/optim/muon.h) against
// the formulas of muon.h evaluated here with plain doubles: wide and tall matrices, conv filters
// (4-D, trained as (Co, Ci kh kw)), momentum with and without Nesterov, weight decay, airbench's
// weight normalisation, per-parameter learning rates; that the iteration orthogonalises (singular
// values of the result near 1); errors.
#include "aether/optim/muon.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "nn_test_util.h"

using namespace aether;
using nn_test::expect_error;

namespace {

using Mat = std::vector<double>;  // row-major

// (m, k) x (k, n)
Mat mm(const Mat& a, const Mat& b, int64_t m, int64_t k, int64_t n) {
  Mat c(size_t(m * n), 0);
  for (int64_t i = 0; i < m; ++i)
    for (int64_t l = 0; l < k; ++l)
      for (int64_t j = 0; j < n; ++j) c[size_t(i * n + j)] += a[size_t(i * k + l)] * b[size_t(l * n + j)];
  return c;
}
Mat tr(const Mat& a, int64_t m, int64_t n) {  // (m, n) -> (n, m)
  Mat t(a.size());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) t[size_t(j * m + i)] = a[size_t(i * n + j)];
  return t;
}
double fro(const Mat& a) {
  double s = 0;
  for (double v : a) s += v * v;
  return std::sqrt(s);
}

// muon.h's newton_schulz5, on doubles.
Mat ref_ns5(Mat x, int64_t m, int64_t n, int steps, double eps = 1e-7) {
  const double a = 3.4445, b = -4.7750, c = 2.0315;
  const double nrm = fro(x) + eps;
  for (double& v : x) v /= nrm;
  const bool tall = m > n;
  if (tall) x = tr(x, m, n), std::swap(m, n);
  for (int s = 0; s < steps; ++s) {
    const Mat A = mm(x, tr(x, m, n), m, n, m);
    const Mat AA = mm(A, A, m, m, m);
    Mat B(A.size());
    for (size_t j = 0; j < B.size(); ++j) B[j] = b * A[j] + c * AA[j];
    const Mat Bx = mm(B, x, m, m, n);
    for (size_t j = 0; j < x.size(); ++j) x[j] = a * x[j] + Bx[j];
  }
  return tall ? tr(x, m, n) : x;
}

Mat values(int64_t n, double phase) {
  Mat v(static_cast<size_t>(n));
  for (int64_t j = 0; j < n; ++j)
    v[size_t(j)] = std::sin(double(j) * 0.7 + phase) + 0.3 * std::cos(double(j) * 1.9);
  return v;
}

void expect_near_rel(const Mat& got, const Mat& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i]))) << what << " [" << i << "]";
}

}  // namespace

TEST(NewtonSchulz5, MatchesTheFormulaForWideAndTallMatrices) {
  for (auto [m, n] : {std::pair<int64_t, int64_t>{3, 7}, {7, 3}, {4, 4}, {1, 5}}) {
    const Mat g = values(m * n, double(m));
    for (int steps : {0, 1, 3, 5}) {
      const Tensor x = optim::newton_schulz5(Tensor::from_vector<double>(g, {m, n}), steps);
      EXPECT_EQ(x.shape(), (Shape{m, n}));
      expect_near_rel(x.to_vector<double>(), ref_ns5(g, m, n, steps), 1e-12,
                      std::to_string(m) + "x" + std::to_string(n) + " steps " + std::to_string(steps));
    }
  }
}

TEST(NewtonSchulz5, OrthogonalisesInFloat32) {
  // A random-looking (8, 24) matrix with a wide spread of singular values: after 5 steps every
  // singular value of X (the square roots of X X^T's eigenvalues) is within the quintic's band
  // (about 0.7 to 1.2), where g's ranged over more than a factor of 10.
  const int64_t m = 8, n = 24;
  Mat g(size_t(m * n));
  uint64_t state = 12345;  // an LCG: full rank, unlike values() (a sum of sinusoids, rank <= 4)
  for (double& v : g) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = double(state >> 11) / double(1ull << 53) - 0.5;
  }
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) g[size_t(i * n + j)] *= 1.0 + 3.0 * double(i);  // rows of different scale
  const Tensor x = optim::newton_schulz5(Tensor::from_vector<double>(g, {m, n}).cast(DType::float32), 5);
  EXPECT_EQ(x.dtype(), DType::float32);
  const Mat xv = x.cast(DType::float64).to_vector<double>();
  const Mat xxt = mm(xv, tr(xv, m, n), m, n, m);  // (8, 8), symmetric
  // Its eigenvalues by Jacobi rotations (small and symmetric: a few sweeps suffice).
  Mat s = xxt;
  for (int sweep = 0; sweep < 50; ++sweep)
    for (int64_t p = 0; p < m; ++p)
      for (int64_t q = p + 1; q < m; ++q) {
        const double apq = s[size_t(p * m + q)];
        if (std::abs(apq) < 1e-15) continue;
        const double theta = 0.5 * std::atan2(2 * apq, s[size_t(q * m + q)] - s[size_t(p * m + p)]);
        const double cs = std::cos(theta), sn = std::sin(theta);
        for (int64_t k = 0; k < m; ++k) {  // columns p, q
          const double kp = s[size_t(k * m + p)], kq = s[size_t(k * m + q)];
          s[size_t(k * m + p)] = cs * kp - sn * kq;
          s[size_t(k * m + q)] = sn * kp + cs * kq;
        }
        for (int64_t k = 0; k < m; ++k) {  // rows p, q
          const double pk = s[size_t(p * m + k)], qk = s[size_t(q * m + k)];
          s[size_t(p * m + k)] = cs * pk - sn * qk;
          s[size_t(q * m + k)] = sn * pk + cs * qk;
        }
      }
  for (int64_t i = 0; i < m; ++i) {
    const double sv = std::sqrt(std::max(0.0, s[size_t(i * m + i)]));
    EXPECT_GT(sv, 0.6) << i;
    EXPECT_LT(sv, 1.3) << i;
  }
}

// Three steps of Muon on a conv filter (4, 2, 3, 3) and a tall matrix (6, 2), each against muon.h's
// formulas on doubles.
struct MuonCase {
  optim::MuonOptions o;
  std::vector<double> lr_scales = {1, 1};
};

void run_muon(const MuonCase& mc) {
  const std::vector<Shape> shapes = {{4, 2, 3, 3}, {6, 2}};
  std::vector<Tensor> ps;
  std::vector<Mat> want, buf;
  for (size_t k = 0; k < shapes.size(); ++k) {
    const Mat v = values(numel(shapes[k]), 0.5 + double(k));
    ps.push_back(Tensor::from_vector<double>(v, shapes[k]).realize().detach());
    ps.back().set_requires_grad();
    want.push_back(v);
    buf.push_back(Mat(v.size(), 0));
  }
  optim::Muon opt(ps, mc.o);
  for (size_t k = 0; k < ps.size(); ++k) opt.set_param_options(k, {.lr_scale = mc.lr_scales[k]});
  for (int t = 1; t <= 3; ++t) {
    for (size_t k = 0; k < ps.size(); ++k) {
      const Mat g = values(numel(shapes[k]), 2.0 * t + double(k));
      ps[k].set_grad(Tensor::from_vector<double>(g, shapes[k]));
      // The reference step.
      const double lr = mc.o.lr * mc.lr_scales[k];
      Mat u = g;
      for (size_t j = 0; j < g.size(); ++j) {
        buf[k][j] = mc.o.momentum * buf[k][j] + g[j];
        u[j] = mc.o.nesterov ? g[j] + mc.o.momentum * buf[k][j] : buf[k][j];
      }
      Mat& p = want[k];
      for (double& v : p) v *= 1 - lr * mc.o.weight_decay;
      const int64_t rows = shapes[k][0], cols = int64_t(p.size()) / rows;
      if (mc.o.normalize_weights) {
        const double s = std::sqrt(double(rows)) / fro(p);
        for (double& v : p) v *= s;
      }
      const Mat o = ref_ns5(u, rows, cols, mc.o.ns_steps);
      for (size_t j = 0; j < p.size(); ++j) p[j] -= lr * o[j];
    }
    opt.step();
    opt.zero_grad();
    for (size_t k = 0; k < ps.size(); ++k) {
      EXPECT_EQ(ps[k].shape(), shapes[k]);
      expect_near_rel(ps[k].to_vector<double>(), want[k], 1e-11,
                      "param " + std::to_string(k) + " step " + std::to_string(t));
    }
  }
  EXPECT_EQ(opt.named_state().size(), mc.o.momentum != 0 ? 2u : 0u);
}

TEST(Muon, NesterovAsAirbench94Muon) {
  run_muon({.o = {.lr = 0.24, .momentum = 0.6, .nesterov = true, .ns_steps = 3, .normalize_weights = true}});
}

TEST(Muon, PlainMomentumWeightDecayAndLrScales) {
  run_muon({.o = {.lr = 0.05, .momentum = 0.9, .nesterov = false, .ns_steps = 5, .weight_decay = 0.1},
            .lr_scales = {1, 0.25}});
}

TEST(Muon, NoMomentum) { run_muon({.o = {.lr = 0.1, .momentum = 0, .nesterov = false, .ns_steps = 2}}); }

TEST(Muon, ConfigAndErrors) {
  Tensor w = Tensor::zeros({3, 4}, DType::float32);
  w.set_requires_grad();
  optim::Muon opt({w}, {.lr = 0.24, .momentum = 0.6, .ns_steps = 3, .normalize_weights = true});
  EXPECT_EQ(opt.type_name(), "Muon");
  const std::string c = opt.config();
  for (const char* part :
       {"\"type\":\"Muon\"", "\"ns_steps\":3", "\"normalize_weights\":true", "\"momentum\":0.6"})
    EXPECT_NE(c.find(part), std::string::npos) << c;
  Tensor bias = Tensor::zeros({4}, DType::float32);
  bias.set_requires_grad();
  expect_error([&] { optim::Muon({w, bias}, {}); }, {"parameter 1 has shape (4,)"});
  expect_error([&] { optim::Muon({w}, {.momentum = 0, .nesterov = true}); }, {"Nesterov"});
  expect_error([&] { optim::Muon({w}, {.ns_steps = 0}); }, {"ns_steps"});
  expect_error(
      [] {
        optim::newton_schulz5(Tensor::zeros({2, 2, 2}, DType::float32), 3);
      },
      {"needs a matrix"});
}
