// Composite neural-net ops (aether/ops/nn.h): made only of Tensor ops, so they need no gradient rules.
#include "aether/ops/nn.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numbers>
#include <span>
#include <vector>

#include "aether/core/random.h"
#include "aether/graph/collective.h"
#include "aether/graph/primitives.h"
#include "ops/compute.h"

namespace aether {
namespace {

using ops_detail::compute_dtype;
using ops_detail::in_compute;

// |x| as one select (NaN stays NaN; d|x|/dx = 1 at 0).
Tensor abs_of(const Tensor& x) { return where(x < 0.0, -x, x); }

// c[0] + c[1] u + ... + c[n-1] u^(n-1) (n >= 2) by Estrin's scheme: pairs c[2i] + c[2i+1] u, then
// pairs of those joined with u^2, then with u^4, ... A chain of about 2 log2(n) dependent operations
// instead of Horner's 2 n, so a vector unit works on several of its steps at once (gelu's forward is
// latency-bound with Horner) for log2(n) more multiplications (the powers of u). For |u| <= 1 and
// coefficients that fall with the degree (our fits) about as accurate (float32 erf: 1.5 ulp, not 1.1).
Tensor polynomial(const Tensor& u, std::span<const double> c) {
  std::vector<Tensor> terms;  // terms[i]: coefficients [2^(level+1) i, ...) as a polynomial in u
  for (size_t i = 0; i + 1 < c.size(); i += 2) terms.push_back(u * c[i + 1] + c[i]);
  bool has_last = c.size() % 2 == 1;  // an odd n: c.back() is a constant term after `terms`
  const double last = has_last ? c.back() : 0.0;
  const auto count = [&] { return terms.size() + (has_last ? 1 : 0); };
  Tensor power = count() > 1 ? u * u : u;  // u^(2^(level+1))
  while (count() > 1) {
    std::vector<Tensor> next;
    size_t i = 0;
    for (; i + 1 < terms.size(); i += 2) next.push_back(terms[i] + terms[i + 1] * power);
    if (i < terms.size()) {  // one left over: it takes the constant, or passes on as it is
      next.push_back(has_last ? terms[i] + power * last : terms[i]);
      has_last = false;
    }
    terms = std::move(next);
    if (count() > 1) power = power * power;
  }
  return terms[0];
}

// sigmoid(x) from e = e^(-|x|) <= 1: x >= 0 ? 1 / (1 + e) : e / (1 + e). Finite value and gradient
// for every finite x.
Tensor stable_sigmoid(const Tensor& x) {
  const Tensor e = (-abs_of(x)).exp();
  const Tensor r = (1.0 + e).reciprocal();
  return where(x >= 0.0, r, e * r);
}

// ---- erf / erfc ------------------------------------------------------------------------------------
// Our own fits (scripts/fit-erfc.py): interpolation at the n Chebyshev nodes (first kind) of the
// interval, computed with mpmath at 50 digits, converted from the Chebyshev basis to monomials in u
// on [-1, 1] (the monomial coefficients stay small, so evaluating them in u is stable):
//   |x| < 1:          erf(x) / x               = P(u),  u = 2 x^2 - 1
//   0 <= a <= cap:    ln(erfc(a) e^(a^2) / t)  = Q(u),  t = 2 / (2 + a),  u = (2 t - 1 - tcap) / (1 - tcap)
// float64: P 12 terms, Q 26 terms (6e-17 absolute with the coefficients rounded to double), cap 27.
// float32: P 7 terms (1.3e-9), Q 12 terms (2.7e-9), cap 10. Both tables are exact enough that the
// rounding of the evaluation itself (a few ulp) dominates. Q covers all of [0, cap], so erfc (and
// gelu, which needs only erfc) is one branch: a division, a polynomial and an exp per element.
struct ErfTable {
  double cap;                    // erfc(x) is taken as 0 for |x| > cap (it underflows there)
  std::span<const double> p, q;  // monomial coefficients, lowest degree first
};
constexpr double kErfSplit = 1.0;  // erf uses P below it (relative accuracy near 0), 1 - erfc above

constexpr std::array<double, 12> kErfP64 = {
    0.9654687386698673,     -0.1405360890227171,    0.019852496688984218,   -0.0022854855611440855,
    0.00021751715603563488, -1.75371694412802e-05,  1.2233827638093572e-06, -7.51156925108609e-08,
    4.115751500265885e-09,  -2.035231956483527e-10, 9.21125018742823e-12,   -3.80659122412214e-13};
constexpr std::array<double, 26> kErfcQ64 = {
    -0.625195311888113,      0.631699684589737,       0.032409287681125366,   -0.03969826023071336,
    -0.005057692508171907,   0.006518319888087174,    0.00040707167075892963, -0.0014044549493216554,
    0.00013733781501740227,  0.0002990967404586564,   -9.848997527643425e-05, -4.874481025702123e-05,
    3.696625021997361e-05,   1.6051414269200752e-06,  -9.518494714633033e-06, 2.552205683983489e-06,
    1.4532401481321865e-06,  -1.0764638251203817e-06, 3.2907001247694055e-08, 2.2725815926617947e-07,
    -8.574503849945431e-08,  -1.758027222726927e-08,  2.2042194402082773e-08, -3.2970698215084516e-09,
    -2.2305921413217236e-09, 7.433472873673129e-10};
constexpr std::array<double, 7> kErfP32 = {
    0.9654687386698673,     -0.14053609727754268,    0.019852497140907616,  -0.0022854195448728494,
    0.00021751354165582579, -1.7669068026125697e-05, 1.2306054785446075e-06};
constexpr std::array<double, 12> kErfcQ32 = {
    -0.5585953538290563,    0.570307152431131,     0.015745079095756093,    -0.02947132709314119,
    -0.001045591842272853,  0.003713026486709018,  -0.00027584950916913095, -0.0005470131720092379,
    0.00012974093790604874, 6.755849375676225e-05, -2.280496015665509e-05,  -4.619178592358127e-06};

const ErfTable& erf_table(DType t) {
  static const ErfTable k64{27.0, kErfP64, kErfcQ64};
  static const ErfTable k32{10.0, kErfP32, kErfcQ32};
  return t == DType::float64 ? k64 : k32;
}

// erf(x) for |x| < 1 (x of a compute dtype; other inputs are replaced by 0 inside, so it stays
// finite everywhere).
Tensor erf_small(const Tensor& x, const Tensor& small, const ErfTable& k) {
  const Tensor xs = where(small, x, 0.0);
  return xs * polynomial(xs * xs * 2.0 - 1.0, k.p);
}
// erfc(a) for a = |x| >= 0: t exp(Q(u) - a^2) up to the cap, 0 past it; NaN where a is NaN.
Tensor erfc_of_abs(const Tensor& ax, const ErfTable& k) {
  const Tensor beyond = ax > k.cap;
  const Tensor a = where(beyond, k.cap, ax);
  const double tcap = 2.0 / (2.0 + k.cap);
  const Tensor t = 2.0 / (a + 2.0);
  const Tensor u = t * (2.0 / (1.0 - tcap)) - (1.0 + tcap) / (1.0 - tcap);  // t in [tcap, 1] -> u in [-1, 1]
  return where(beyond, 0.0, t * (polynomial(u, k.q) - a * a).exp());
}

// `value`, a function of x computed without history (from x.detach()), with the gradient
// dy * slope, `slope` its derivative, also without history: the Mul rule's gradient for its first
// source (dy * the second) is exactly that, and the second, having no history, gets none. For
// composites whose derivative has a closed form far cheaper than the chain rule through their pieces
// (erf, erfc, gelu: a rational approximation, an exp and selects, each saved for backward).
Tensor with_derivative(const Tensor& x, const Tensor& value, const Tensor& slope) {
  return prim::record_grad(value, Op::Mul, {x, slope}, {x.node(), slope.node()}, {});
}
// 2 / sqrt(pi) exp(-x^2): the derivative of erf (0 at +-inf, not inf * 0).
Tensor erf_slope(const Tensor& x) { return (-(x * x)).exp() * (2.0 / std::sqrt(std::numbers::pi)); }

// ---- checks ----------------------------------------------------------------------------------------
void check_float(const Tensor& x, const char* op) {
  AETHER_CHECK_DTYPE(is_float(x.dtype()), op, "expected a float tensor, got ", x.str());
}
// Rows of (..., K) scores: at least a batch axis and a class axis.
void check_scores(const Tensor& x, const char* op, const char* what) {
  AETHER_CHECK(x.ndim() >= 2, op, "expected ", what, " of shape (N, K) (or (..., K)), got shape ",
               to_string(x.shape()));
  check_float(x, op);
  AETHER_CHECK(x.shape().back() > 0, op, "expected at least one class, got ", what, " of shape ",
               to_string(x.shape()));
}
Shape batch_shape(const Tensor& x) { return Shape(x.shape().begin(), x.shape().end() - 1); }

// Labels for (..., K) scores as a target distribution (..., K) of dtype t: int indices (...) become
// one-hot rows, float rows (..., K) are taken as they are.
Tensor label_targets(const Tensor& scores, const Tensor& labels, DType t, const char* op) {
  const int64_t k = scores.shape().back();
  if (is_int(labels.dtype())) {
    AETHER_CHECK(labels.shape() == batch_shape(scores), op, "class-index labels must have shape ",
                 to_string(batch_shape(scores)), " for scores of shape ", to_string(scores.shape()), ", got ",
                 labels.str());
    return one_hot(labels, k, t);
  }
  AETHER_CHECK_DTYPE(is_float(labels.dtype()), op,
                     "labels must be int class indices or float probabilities, got ", labels.str());
  AETHER_CHECK(labels.shape() == scores.shape(), op, "probability labels must have the scores' shape ",
               to_string(scores.shape()), ", got ", labels.str());
  return labels.cast(t);
}

// Class indices (...) for (..., K) scores from int labels (...) or float rows (..., K) (their argmax).
Tensor label_indices(const Tensor& scores, const Tensor& labels, const char* op) {
  if (is_int(labels.dtype())) {
    AETHER_CHECK(labels.shape() == batch_shape(scores), op, "class-index labels must have shape ",
                 to_string(batch_shape(scores)), " for scores of shape ", to_string(scores.shape()), ", got ",
                 labels.str());
    return labels.cast(DType::int64);
  }
  AETHER_CHECK(is_float(labels.dtype()) && labels.shape() == scores.shape(), op,
               "labels must be int class indices of shape ", to_string(batch_shape(scores)),
               " or float rows of shape ", to_string(scores.shape()), ", got ", labels.str());
  return labels.argmax(-1);
}

// -mean over rows of sum_k target_k * logp_k, where terms with target_k == 0 are exactly 0.
Tensor expected_neg_log(const Tensor& target, const Tensor& logp) {
  const Tensor terms = where(target.ne(Tensor::zeros({}, target.dtype())), target * logp, 0.0);
  return -terms.sum({-1}).mean();
}

void check_p(double p, const char* op) {
  AETHER_CHECK(p >= 0.0 && p <= 1.0, op, "dropout probability must be in [0, 1], got ", p);
}
// x where keep, 0 elsewhere, scaled by 1 / (1 - p); keep (bool) broadcasts against x.
Tensor apply_mask(const Tensor& x, const Tensor& keep, double p) {
  // p = 1 keeps nothing (u >= 1 never holds): exact zeros with a zero gradient, and no 1/0 scale.
  return where(keep, p >= 1.0 ? x : x * (1.0 / (1.0 - p)), 0.0);
}

}  // namespace

// ---- activations ------------------------------------------------------------------------------------
Tensor leaky_relu(const Tensor& x, double slope) {
  check_float(x, "leaky_relu");
  AETHER_CHECK(std::isfinite(slope), "leaky_relu", "slope must be finite, got ", slope);
  return where(x < 0.0, x * slope, x);
}

Tensor elu(const Tensor& x, double alpha) {
  check_float(x, "elu");
  return in_compute(x, [&](const Tensor& v) {
    const Tensor neg = where(v > 0.0, 0.0, v);  // keeps e^x finite in the unselected branch
    return where(v > 0.0, v, expm1(neg) * alpha);
  });
}

namespace {
// erf and erfc of x (compute dtype, no history).
Tensor erf_value(const Tensor& x) {
  const ErfTable& k = erf_table(x.dtype());
  const Tensor ax = abs_of(x);
  const Tensor small = ax < kErfSplit;
  const Tensor sign = where(x < 0.0, -1.0, Tensor::ones({}, x.dtype()));
  return where(small, erf_small(x, small, k), sign * (1.0 - erfc_of_abs(ax, k)));
}
Tensor erfc_value(const Tensor& x) {
  const Tensor c = erfc_of_abs(abs_of(x), erf_table(x.dtype()));
  return where(x < 0.0, 2.0 - c, c);
}
}  // namespace

// d erf(x) / dx = 2 / sqrt(pi) exp(-x^2) = -d erfc(x) / dx.
Tensor erf(const Tensor& x) {
  return in_compute(x, [](const Tensor& v) {
    const Tensor d = v.detach();
    return with_derivative(v, erf_value(d), erf_slope(d));
  });
}

Tensor erfc(const Tensor& x) {
  return in_compute(x, [](const Tensor& v) {
    const Tensor d = v.detach();
    return with_derivative(v, erfc_value(d), -erf_slope(d));
  });
}

// gelu(x) = x Phi(x), Phi(x) = erfc(-x / sqrt 2) / 2; gelu'(x) = Phi(x) + x phi(x), phi(x) =
// exp(-x^2 / 2) / sqrt(2 pi) (x phi(x) is 0 at +-inf, not inf * 0). The backward takes Phi(x) back
// from the output, y / x (1/2 near 0, where y / x would be 0 / 0), so it evaluates neither erfc's
// approximation nor the chain rule through it: a division and an exp on x and y, which the next
// layer keeps anyway (a conv saves its input for its weight gradient).
Tensor gelu(const Tensor& x, bool tanh_approx) {
  check_float(x, "gelu");
  return in_compute(x, [&](const Tensor& v) {
    if (tanh_approx) {
      // 0.5 (1 + tanh(y)) = sigmoid(2 y)
      const double c = 2.0 * std::sqrt(2.0 / std::numbers::pi);
      return v * stable_sigmoid((v + v * v * v * 0.044715) * c);
    }
    const Tensor d = v.detach();
    const Tensor y = d * (erfc_value(d * (-1.0 / std::numbers::sqrt2)) * 0.5);
    const Tensor near0 = abs_of(d) < 1e-30;
    const Tensor phi_cdf = where(near0, 0.5, y / where(near0, 1.0, d));
    const Tensor x_pdf =
        where(abs_of(d) < 1e4, d, 0.0) * (d * d * -0.5).exp() * (1.0 / std::sqrt(2.0 * std::numbers::pi));
    return with_derivative(v, y, phi_cdf + x_pdf);
  });
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  check_float(x, "softplus");
  AETHER_CHECK(beta > 0, "softplus", "beta must be > 0, got ", beta);
  return in_compute(x, [&](const Tensor& v) {
    const Tensor bx = v * beta;
    const Tensor linear_part = bx > threshold;
    const Tensor bxc = where(linear_part, 0.0, bx);  // e^(beta x) stays finite in the unselected branch
    return where(linear_part, v, log1p(bxc.exp()) * (1.0 / beta));
  });
}

Tensor silu(const Tensor& x) {
  check_float(x, "silu");
  return in_compute(x, [](const Tensor& v) { return v * stable_sigmoid(v); });
}

Tensor exp2(const Tensor& x) {
  return in_compute(x, [](const Tensor& v) { return (v * std::numbers::ln2).exp(); });
}

Tensor log2(const Tensor& x) {
  return in_compute(x, [](const Tensor& v) { return v.log() * (1.0 / std::numbers::ln2); });
}

Tensor log10(const Tensor& x) {
  return in_compute(x, [](const Tensor& v) { return v.log() * (1.0 / std::numbers::ln10); });
}

Tensor log1p(const Tensor& x) {
  return in_compute(x, [](const Tensor& v) {
    const Tensor small = abs_of(v) < 0.5;
    const Tensor xs = where(small, v, 0.0);
    const Tensor u = 1.0 + xs;
    const Tensor d = u - 1.0;  // the x that 1 + x really added
    const Tensor exact = d.eq(Tensor::zeros({}, d.dtype()));
    const Tensor corrected = where(exact, xs, u.log() * (xs / where(exact, 1.0, d)));
    return where(small, corrected, (1.0 + v).log());
  });
}

Tensor expm1(const Tensor& x) {
  return in_compute(x, [](const Tensor& v) {
    const Tensor small = abs_of(v) < 0.5;
    const Tensor xs = where(small, v, 0.0);
    const Tensor u = xs.exp();
    const Tensor l = u.log();  // the x that e^x really used
    const Tensor exact = l.eq(Tensor::zeros({}, l.dtype()));
    const Tensor corrected = where(exact, xs, (u - 1.0) * (xs / where(exact, 1.0, l)));
    return where(small, corrected, v.exp() - 1.0);
  });
}

// ---- softmax ---------------------------------------------------------------------------------------
Tensor softmax(const Tensor& x, int64_t axis) {
  check_float(x, "softmax");
  const int d = normalize_axis(axis, x.ndim(), "softmax");
  return in_compute(x, [&](const Tensor& v) {
    const Tensor e = (v - v.max({d}, true).detach()).exp();
    return e / e.sum({d}, true);
  });
}

Tensor log_softmax(const Tensor& x, int64_t axis) {
  check_float(x, "log_softmax");
  const int d = normalize_axis(axis, x.ndim(), "log_softmax");
  return in_compute(x, [&](const Tensor& v) {
    const Tensor s = v - v.max({d}, true).detach();
    return s - s.exp().sum({d}, true).log();
  });
}

// ---- linear ----------------------------------------------------------------------------------------
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias) {
  AETHER_CHECK(w.ndim() == 2, "linear", "expected w of shape (out, in), got ", w.str());
  AETHER_CHECK(x.ndim() >= 1 && x.shape().back() == w.shape()[1], "linear", "x ", x.str(),
               " does not end in w's input size ", w.shape()[1], " (w ", to_string(w.shape()), ")");
  const Tensor y = matmul(x, w.t());  // (..., out)
  if (!bias.defined()) return y;
  AETHER_CHECK(bias.ndim() == 1 && bias.shape()[0] == w.shape()[0], "linear", "expected bias of shape ",
               to_string(Shape{w.shape()[0]}), ", got ", bias.str());
  return y + bias;
}

// ---- layer normalisation ---------------------------------------------------------------------------
Tensor layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, int64_t axes, double eps) {
  const char* op = "layer_norm";
  check_float(x, op);
  AETHER_CHECK(axes >= 1 && axes <= x.ndim(), op, "normalises 1 to ", x.ndim(), " trailing dims of x ",
               x.str(), ", got ", axes);
  AETHER_CHECK(eps >= 0, op, "eps must be >= 0, got ", eps);
  const Shape norm(x.shape().end() - axes, x.shape().end());  // the normalised dims
  auto check_param = [&](const Tensor& p, const char* what) {
    if (!p.defined()) return;
    AETHER_CHECK(p.shape() == norm, op, "expected ", what, " of shape ", to_string(norm), " for x ", x.str(),
                 ", got ", p.str());
    check_float(p, op);
  };
  check_param(weight, "weight");
  check_param(bias, "bias");
  std::vector<int64_t> dims;
  for (int64_t d = x.ndim() - axes; d < x.ndim(); ++d) dims.push_back(d);
  const DType t = compute_dtype(x.dtype());
  const Tensor xc = x.cast(t);                                        // x (..., norm)
  const Tensor centered = xc - xc.mean(dims, /*keepdim=*/true);       // (..., norm)
  const Tensor var = centered.square().mean(dims, /*keepdim=*/true);  // (..., 1...)
  Tensor y = centered * (var + eps).rsqrt();
  if (weight.defined()) y = y * weight.cast(t);
  if (bias.defined()) y = y + bias.cast(t);
  return y.cast(x.dtype());
}

// ---- batch normalisation ---------------------------------------------------------------------------
BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, bool training,
                           double momentum, double eps, int64_t sync_group) {
  const char* op = "batch_norm";
  AETHER_CHECK(x.ndim() >= 2, op, "expected channels-last x of shape (N, C) or (N, H, W, C), got ", x.str());
  check_float(x, op);
  const int64_t c = x.shape().back();
  const Shape cs{c};
  auto check_channel = [&](const Tensor& t, const char* what, bool required) {
    if (!t.defined()) {
      AETHER_CHECK(!required, op, what, " is required here (evaluation mode uses the running statistics)");
      return;
    }
    AETHER_CHECK(t.shape() == cs, op, "expected ", what, " of shape ", to_string(cs), " for x ", x.str(),
                 ", got ", t.str());
    check_float(t, op);
  };
  check_channel(weight, "weight", false);
  check_channel(bias, "bias", false);
  check_channel(running_mean, "running_mean", !training);
  check_channel(running_var, "running_var", !training);
  AETHER_CHECK(running_mean.defined() == running_var.defined(), op,
               "running_mean and running_var must both be given or both be empty");
  AETHER_CHECK(momentum >= 0 && momentum <= 1, op, "momentum must be in [0, 1], got ", momentum);
  AETHER_CHECK(eps >= 0, op, "eps must be >= 0, got ", eps);

  const DType t = compute_dtype(x.dtype());
  const Tensor xc = x.cast(t);  // x (..., C)
  std::vector<int64_t> axes;
  for (int d = 0; d + 1 < x.ndim(); ++d) axes.push_back(d);
  const int64_t n = x.numel() / std::max<int64_t>(c, 1);

  BatchNormResult r;
  Tensor mean, var;  // (C)
  Tensor centered;   // (..., C): x - mean
  const bool sync = training && sync_group >= 0;
  if (training) {
    AETHER_CHECK(n > 1 || (sync && n > 0), op, "training needs more than one value per channel, got x ",
                 x.str());
    // The statistics take ONE pass over x (sum and sum of squares, not Welford/Chan: a Welford
    // update is sequential and Chan's merge needs a second reduce level), accumulated in float64:
    // x is cast to float64 inside the reduces, so the cast costs no pass of its own. Then
    // var = E[x^2] - E[x]^2 in float64, clamped at 0; its relative error is about 1e-16 (mean/std)^2,
    // below float32 rounding up to mean/std ~ 1e4.
    // Synchronized: the sums of every rank, and their count, in one all-reduce.
    const Tensor x64 = x.detach().cast(DType::float64);  // x (..., C)
    Tensor m64, e64, count;                              // (C), (C), (1) when synchronized
    if (sync) {
      const Tensor all = all_reduce(
          cat({x64.sum(axes), (x64 * x64).sum(axes), Tensor::full({1}, double(n), DType::float64)}),
          sync_group);  // (2C + 1): every rank's sums, sums of squares, and count
      count = all.slice(0, 2 * c, 2 * c + 1);
      m64 = all.slice(0, 0, c) / count, e64 = all.slice(0, c, 2 * c) / count;
    } else {
      m64 = x64.mean(axes), e64 = (x64 * x64).mean(axes);
    }
    const Tensor v64 = (e64 - m64 * m64).maximum(Tensor::zeros({}, DType::float64));
    const Tensor mean_d = m64.cast(t), var_d = v64.cast(t);  // (C), no gradient history
    mean = mean_d;
    var = var_d;
    if (grad_enabled() && x.requires_grad()) {
      // The float64 statistics are detached: a float64 path would make x's gradient (and every
      // gradient before it, e.g. a conv's) float64. Their gradients are those of compute-dtype
      // expressions with the same derivatives, recorded as the gradient of an identity (Copy) from
      // the statistic to the expression, whose value is never computed (the forward pass reads x
      // once, for the two float64 sums):
      //   mean ~ s1 = E[x]                  d/dx_i = 1/n
      //   var  ~ q  = E[x^2] - 2 mean E[x]  d/dx_i = 2 (x_i - mean)/n, mean detached
      // The backward has no reduce depending on another: sum(dy), sum(dy (x - mean)), sum(dy scale)
      // in one pass, dx in one more; d var/d mean (zero) is never formed. Limit: dx's var term is
      // 2 x a - 2 mean a (a = d var / n) in float32, about eps |mean|/std absolute error (2e-6 at
      // mean/std = 1000).
      Tensor s1 = xc.mean(axes), e2 = (xc * xc).mean(axes);  // (C)
      if (sync) {
        // Synchronized: every rank's x counts, so the statistics' gradients are summed over the
        // ranks: the backward of this all-reduce (whose own value is never computed).
        const Tensor inv = (1.0 / count).cast(t);                                                   // (1)
        const Tensor all = all_reduce(cat({xc.sum(axes), (xc * xc).sum(axes)}), sync_group) * inv;  // (2C)
        s1 = all.slice(0, 0, c), e2 = all.slice(0, c, 2 * c);
      }
      const Tensor q = e2 - s1 * (mean_d * 2.0);  // (C)
      mean = prim::record_grad(mean_d, Op::Copy, {s1}, {s1.node()}, {});
      var = prim::record_grad(var_d, Op::Copy, {q}, {q.node()}, {});
    }
    centered = xc - mean;
    r.batch_mean = mean;
    r.batch_var = var;
    if (running_mean.defined()) {
      NoGradGuard no_grad;
      // Unbiased over the statistics' count (every rank's, when synchronized).
      const Tensor bm = mean_d;
      const Tensor bv = sync ? var_d * (count / (count - 1.0)).cast(t) : var_d * (double(n) / double(n - 1));
      r.new_running_mean =
          (running_mean.cast(t) * (1.0 - momentum) + bm * momentum).cast(running_mean.dtype());
      r.new_running_var = (running_var.cast(t) * (1.0 - momentum) + bv * momentum).cast(running_var.dtype());
    }
  } else {
    mean = running_mean.cast(t);
    var = running_var.cast(t);
    centered = xc - mean;
    r.new_running_mean = running_mean;
    r.new_running_var = running_var;
  }
  // y = (x - mean) * scale + bias with scale = weight / sqrt(var + eps): the per-channel factors are
  // combined first (C elements), so the big tensor sees one subtract, one multiply and one add.
  Tensor scale = (var + eps).rsqrt();  // (C)
  if (weight.defined()) scale = scale * weight.cast(t);
  Tensor y = centered * scale;  // (..., C)
  if (bias.defined()) y = y + bias.cast(t);
  r.out = y.cast(x.dtype());
  return r;
}

// ---- losses ----------------------------------------------------------------------------------------
Tensor one_hot(const Tensor& labels, int64_t num_classes, DType dtype) {
  AETHER_CHECK_DTYPE(is_int(labels.dtype()), "one_hot", "expected int class indices, got ", labels.str());
  AETHER_CHECK(num_classes > 0, "one_hot", "num_classes must be > 0, got ", num_classes);
  const auto v = labels.to_vector<int64_t>();
  for (size_t i = 0; i < v.size(); ++i)
    AETHER_CHECK(v[i] >= 0 && v[i] < num_classes, "one_hot", "label ", v[i], " at flat index ", i,
                 " is out of range [0, ", num_classes, ") (labels ", labels.str(), ")");
  return labels.cast(DType::int64)
      .unsqueeze(-1)
      .eq(Tensor::arange(num_classes).to(labels.device()))
      .cast(dtype);
}

Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing) {
  const char* op = "cross_entropy";
  check_scores(logits, op, "logits");
  AETHER_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op, "label_smoothing must be in [0, 1], got ",
               label_smoothing);
  const DType t = compute_dtype(logits.dtype());
  Tensor target = label_targets(logits, labels, t, op);  // (..., K)
  if (label_smoothing > 0) {
    const double k = double(logits.shape().back());
    target = target * (1.0 - label_smoothing) + label_smoothing / k;
  }
  return expected_neg_log(target, log_softmax(logits.cast(t), -1)).cast(logits.dtype());
}

Tensor nll_loss(const Tensor& log_probs, const Tensor& labels) {
  const char* op = "nll_loss";
  check_scores(log_probs, op, "log_probs");
  AETHER_CHECK_DTYPE(is_int(labels.dtype()), op, "expected int class-index labels, got ", labels.str());
  const Tensor hit = label_targets(log_probs, labels, DType::boolean, op);  // (..., K)
  return -where(hit, log_probs, 0.0).sum({-1}).mean();
}

Tensor categorical_cross_entropy(const Tensor& probs, const Tensor& targets, double eps) {
  const char* op = "categorical_cross_entropy";
  check_scores(probs, op, "probs");
  AETHER_CHECK(eps >= 0 && eps < 0.5, op, "eps must be in [0, 0.5), got ", eps);
  const DType t = compute_dtype(probs.dtype());
  const Tensor target = label_targets(probs, targets, t, op);
  return expected_neg_log(target, probs.cast(t).clamp(eps, 1.0 - eps).log()).cast(probs.dtype());
}

Tensor mse_loss(const Tensor& pred, const Tensor& target) {
  AETHER_CHECK(pred.shape() == target.shape(), "mse_loss", "pred ", pred.str(), " and target ", target.str(),
               " must have the same shape");
  const Tensor d = pred - target;
  return (d * d).mean();
}

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets, double label_smoothing,
                                        const Tensor& weights) {
  const char* op = "binary_cross_entropy_with_logits";
  check_float(logits, op);
  AETHER_CHECK_DTYPE(is_float(targets.dtype()), op, "expected float targets (probabilities in [0, 1]), got ",
                     targets.str());
  AETHER_CHECK(logits.shape() == targets.shape(), op, "logits ", logits.str(), " and targets ", targets.str(),
               " must have the same shape");
  AETHER_CHECK(label_smoothing >= 0 && label_smoothing <= 1, op, "label_smoothing must be in [0, 1], got ",
               label_smoothing);
  if (weights.defined()) {
    AETHER_CHECK_DTYPE(is_float(weights.dtype()), op, "expected float weights, got ", weights.str());
    const Shape &ws = weights.shape(), &zs = logits.shape();
    bool fits = ws.size() <= zs.size();
    for (size_t d = 1; fits && d <= ws.size(); ++d)
      fits = ws[ws.size() - d] == 1 || ws[ws.size() - d] == zs[zs.size() - d];
    AETHER_CHECK(fits, op, "weights ", weights.str(), " must broadcast to the logits' shape ", to_string(zs));
  }
  const DType t = compute_dtype(logits.dtype());
  const Tensor z = logits.cast(t);  // (...)
  Tensor target = targets.cast(t);  // (...)
  if (label_smoothing > 0) target = target * (1.0 - label_smoothing) + label_smoothing / 2;
  // -[t ln s(z) + (1 - t) ln(1 - s(z))] = ln(1 + e^z) - t z, since ln s(z) = z - ln(1 + e^z) and
  // ln(1 - s(z)) = -ln(1 + e^z). softplus(z) is z itself past z = 20 and never overflows; its
  // gradient is sigmoid(z), so the loss's is sigmoid(z) - t.
  const Tensor loss = softplus(z) - z * target;  // (...)
  return (weights.defined() ? loss * weights.cast(t) : loss).mean().cast(logits.dtype());
}

// ---- metrics ---------------------------------------------------------------------------------------
Tensor accuracy(const Tensor& logits, const Tensor& labels) {
  check_scores(logits, "accuracy", "logits");
  NoGradGuard no_grad;
  const Tensor want = label_indices(logits, labels, "accuracy");  // (...)
  return logits.argmax(-1).eq(want).cast(DType::float32).mean();
}

Tensor binary_accuracy(const Tensor& logits, const Tensor& targets) {
  const char* op = "binary_accuracy";
  check_float(logits, op);
  AETHER_CHECK_DTYPE(is_float(targets.dtype()), op, "expected float targets, got ", targets.str());
  AETHER_CHECK(logits.shape() == targets.shape(), op, "logits ", logits.str(), " and targets ", targets.str(),
               " must have the same shape");
  NoGradGuard no_grad;
  return (logits > 0.0).eq(targets > 0.5).cast(DType::float32).mean();
}

Tensor top_k_accuracy(const Tensor& logits, const Tensor& labels, int64_t k) {
  const char* op = "top_k_accuracy";
  check_scores(logits, op, "logits");
  AETHER_CHECK(k >= 1, op, "k must be >= 1, got ", k);
  NoGradGuard no_grad;
  const Tensor want = label_indices(logits, labels, op);                    // (...)
  const Tensor l = logits.cast(compute_dtype(logits.dtype()));              // (..., K)
  const Tensor hit = one_hot(want, logits.shape().back(), DType::boolean);  // (..., K)
  const Tensor mine = where(hit, l, 0.0).sum({-1}, true);                   // (..., 1): the label's logit
  const Tensor above = (l > mine).cast(DType::int64).sum({-1});             // (...): strictly larger logits
  const Tensor ok = where(mine.squeeze(-1).ne(mine.squeeze(-1)), Tensor::zeros({}, DType::boolean),
                          above < Tensor::full({}, double(k), DType::int64));
  return ok.cast(DType::float32).mean();
}

// ---- dropout ---------------------------------------------------------------------------------------
Tensor dropout(const Tensor& x, double p, bool training) {
  check_p(p, "dropout");
  check_float(x, "dropout");
  if (!training || p == 0.0) return x;
  return apply_mask(x, Tensor::rand(x.shape(), DType::float32) >= p, p);
}

Tensor spatial_dropout(const Tensor& x, double p, bool training) {
  check_p(p, "spatial_dropout");
  check_float(x, "spatial_dropout");
  AETHER_CHECK(x.ndim() >= 3, "spatial_dropout", "expected channels-last x (N, H, W, C) (ndim >= 3), got ",
               x.str());
  if (!training || p == 0.0) return x;
  Shape ms(size_t(x.ndim()), 1);  // (N, 1, ..., 1, C)
  ms.front() = x.shape().front();
  ms.back() = x.shape().back();
  return apply_mask(x, Tensor::rand(ms, DType::float32) >= p, p);
}

}  // namespace aether
