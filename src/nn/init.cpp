// Patch whitening and dirac filters (aether/nn/init.h). The covariance is accumulated on the host in
// double; LAPACKE_dsyevd decomposes it.
#include "aether/nn/init.h"

#include <lapacke.h>

#include <cmath>
#include <vector>

#include "aether/core/error.h"

namespace aether::nn::init {
namespace {

void check_plain(const Conv2d& conv, const char* op) {
  const Conv2dOptions& o = conv.options();
  AETHER_CHECK(o.groups == 1 && o.dilation.h == 1 && o.dilation.w == 1, op,
               "needs a conv with groups 1 and dilation 1, got ", conv.describe());
}

// values (shape of t) -> t's device and dtype, assigned to t.
void assign_values(Tensor& t, const std::vector<float>& values) {
  t.assign(Tensor::from_vector<float>(values, t.shape()).to(t.device()).cast(t.dtype()));
}

}  // namespace

void patch_whitening(Conv2d& conv, const Tensor& images, double eps) {
  const char* op = "patch_whitening";
  check_plain(conv, op);
  const Shape& ws = conv.weight.shape();  // (O, KH, KW, C)
  const int64_t o = ws[0], kh = ws[1], kw = ws[2], c = ws[3], d = kh * kw * c;
  AETHER_CHECK(images.defined() && images.ndim() == 4 && images.shape()[3] == c && is_float(images.dtype()),
               op, "expected float images (N, H, W, ", c, ") for ", conv.describe(), ", got ",
               images.defined() ? images.str() : "an empty tensor");
  const int64_t n = images.shape()[0], h = images.shape()[1], w = images.shape()[2];
  AETHER_CHECK(n > 0 && h >= kh && w >= kw, op, "the images ", to_string(images.shape()), " hold no ", kh,
               "x", kw, " patch");
  AETHER_CHECK(o % 2 == 0 && o / 2 <= d, op, conv.describe(), " has ", o,
               " filters: whitening needs an even number, ", "at most twice the patch size ", d,
               " (KH x KW x C)");
  AETHER_CHECK(eps >= 0 && std::isfinite(eps), op, "eps must be finite and >= 0, got ", eps);

  // The uncentered covariance (d, d) of the patches, a patch as a vector in the weight's (KH, KW, C)
  // order, over every position (stride 1) of every image. Upper triangle only (dsyevd's 'U').
  const std::vector<double> x = images.to_vector<double>();  // (N, H, W, C)
  std::vector<double> cov(static_cast<size_t>(d * d), 0.0), p(static_cast<size_t>(d));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t y = 0; y + kh <= h; ++y)
      for (int64_t xx = 0; xx + kw <= w; ++xx) {
        size_t k = 0;
        for (int64_t a = 0; a < kh; ++a)
          for (int64_t b = 0; b < kw; ++b)
            for (int64_t ch = 0; ch < c; ++ch) p[k++] = x[size_t(((i * h + y + a) * w + xx + b) * c + ch)];
        for (int64_t r = 0; r < d; ++r)
          for (int64_t s = r; s < d; ++s) cov[size_t(r * d + s)] += p[size_t(r)] * p[size_t(s)];
      }
  const double count = double(n * (h - kh + 1) * (w - kw + 1));
  for (double& v : cov) v /= count;

  // Eigenvalues ascending; eigenvector j in column j of the row-major matrix.
  std::vector<double> lambda(static_cast<size_t>(d));
  const lapack_int info =
      LAPACKE_dsyevd(LAPACK_ROW_MAJOR, 'V', 'U', lapack_int(d), cov.data(), lapack_int(d), lambda.data());
  AETHER_CHECK(info == 0, op, "LAPACK's dsyevd failed on the ", d, "x", d, " patch covariance (info ", info,
               ")");

  std::vector<float> filters(static_cast<size_t>(o * d));  // (O, KH, KW, C)
  for (int64_t k = 0; k < o / 2; ++k) {
    const int64_t e = d - 1 - k;  // the k-th largest
    const double scale_sq = lambda[size_t(e)] + eps;
    AETHER_CHECK(scale_sq > 0, op, "eigenvalue ", k, " of the patch covariance is ", lambda[size_t(e)],
                 ": the images leave too few directions for ", o / 2, " filters (raise eps)");
    const double scale = 1.0 / std::sqrt(scale_sq);
    for (int64_t r = 0; r < d; ++r) {
      const float v = float(cov[size_t(r * d + e)] * scale);
      filters[size_t(k * d + r)] = v;
      filters[size_t((o / 2 + k) * d + r)] = -v;
    }
  }
  NoGradGuard no_grad;
  assign_values(conv.weight, filters);
  if (conv.bias.defined()) assign_values(conv.bias, std::vector<float>(size_t(o), 0.0f));
}

void dirac(Conv2d& conv) {
  check_plain(conv, "dirac");
  const Shape& ws = conv.weight.shape();  // (O, KH, KW, C)
  const int64_t o = ws[0], kh = ws[1], kw = ws[2], c = ws[3], per = kh * kw * c;
  std::vector<float> w = conv.weight.to_vector<float>();
  for (int64_t f = 0; f < std::min(o, c); ++f) {
    std::fill(w.begin() + f * per, w.begin() + (f + 1) * per, 0.0f);
    w[size_t(f * per + ((kh / 2) * kw + kw / 2) * c + f)] = 1.0f;
  }
  NoGradGuard no_grad;
  assign_values(conv.weight, w);
}

void unit_std(Tensor& weight) {
  AETHER_CHECK(weight.dtype() == DType::float32 && weight.numel() >= 2, "unit_std",
               "needs a float32 tensor of 2 or more values, got ", to_string(weight.shape()), " ",
               dtype_name(weight.dtype()));
  std::vector<float> w = weight.to_vector<float>();
  double mean = 0, ss = 0;
  for (float v : w) mean += v;
  mean /= double(w.size());
  for (float v : w) ss += (v - mean) * (v - mean);
  const double sd = std::sqrt(ss / double(w.size() - 1));  // unbiased, as torch.std
  AETHER_CHECK(sd > 0 && std::isfinite(sd), "unit_std", "the values' standard deviation is ", sd);
  for (float& v : w) v = float(v / sd);
  NoGradGuard no_grad;
  assign_values(weight, w);
}

}  // namespace aether::nn::init
