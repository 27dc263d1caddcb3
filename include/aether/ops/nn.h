// aether/ops/nn.h - composite neural-net ops: activations, softmax, linear, batch norm, losses,
// metrics and dropout.
//
// Every function here is a composite: it is written only with Tensor ops (which are made of the
// primitives in aether/graph/op.h), so it is lazy like any other op, differentiable through the
// primitives' gradient rules (no rules of its own) and runs on every backend. Tensors follow
// aether's channels-last convention: the class / feature / channel axis is the LAST one
// (logits (N, K), activations (N, H, W, C)).
//
// Dtypes: float16 and bfloat16 inputs are computed in float32 and the result is cast back, so the
// intermediates of a composite (exp, sums, polynomials) do not overflow or lose precision; int and
// bool inputs to float functions are treated as float32. float64 is computed in float64 (gradient
// checks use it).
//
// Non-finite values: activations propagate NaN (a NaN input gives a NaN output); the helpers keep
// every intermediate finite on finite inputs, so no gradient turns into NaN through a 0 * inf in
// a branch that where() did not select.
//
// Bad calls throw aether::Error naming the function, what it got and what it expected.
#pragma once

#include <cstdint>

#include "aether/graph/tensor.h"

namespace aether {

// ---- activations ------------------------------------------------------------------------------------
// leaky_relu(x) = x < 0 ? slope * x : x. NaN passes through.
Tensor leaky_relu(const Tensor& x, double slope = 0.01);

// elu(x) = x > 0 ? x : alpha * (e^x - 1)   (the negative side uses expm1).
Tensor elu(const Tensor& x, double alpha = 1.0);

// erf(x) = 2/sqrt(pi) * integral_0^x e^(-t^2) dt, as a composite (polynomials of our own Chebyshev
// fits, scripts/fit-erfc.py, evaluated in nn.cpp):
//   |x| < 1:   erf(x) = x * P(2 x^2 - 1)
//   else:      erf(x) = sign(x) (1 - erfc(|x|)),  erfc(a) = t * exp(Q(u) - a^2),  t = 2 / (2 + a)
//              (u linear in t on [-1, 1]; erfc is taken as 0 past 27 in float64, 10 in float32)
// Measured error (tests/nn_activation_test.cpp, against std::erf on [-6, 6]): float64 1.1e-16
// absolute for erf; float32 (and float16/bfloat16, computed in float32) 9.2e-8 absolute. erfc's
// relative error for x > 1 is dominated by the rounding of x^2 in exp(-x^2): about x^2 ulp
// (6e-15 at x = 6 in float64, 3.4e-6 in float32).
Tensor erf(const Tensor& x);
// erfc(x): erfc(|x|) as above for x >= 0, 2 - erfc(|x|) below; one branch for every x, which keeps
// the relative accuracy for large x (erfc(5) = 1.5e-12 is not lost to cancellation).
Tensor erfc(const Tensor& x);

// gelu(x) = x * Phi(x) = 0.5 x (1 + erf(x / sqrt 2))   (computed as 0.5 x erfc(-x / sqrt 2), which
//           keeps relative accuracy on the far negative side)
// with tanh_approx:  0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) = x * sigmoid(2 sqrt(2/pi) (...)).
Tensor gelu(const Tensor& x, bool tanh_approx = false);

// softplus(x) = (1/beta) log(1 + e^(beta x)); reverts to x where beta x > threshold (as PyTorch).
Tensor softplus(const Tensor& x, double beta = 1.0, double threshold = 20.0);

// silu(x) = x * sigmoid(x), with sigmoid computed from e^(-|x|) (finite value and gradient for
// every finite x, unlike 1 / (1 + e^(-x)), whose gradient is 0 * inf = NaN below about -88 in float32).
Tensor silu(const Tensor& x);

// exp2(x) = 2^x = e^(x ln 2);  log2(x) = ln(x) / ln 2;  log10(x) = ln(x) / ln 10.
Tensor exp2(const Tensor& x);
Tensor log2(const Tensor& x);
Tensor log10(const Tensor& x);
// log1p(x) = ln(1 + x), accurate for small |x|: for |x| < 0.5 it uses u = 1 + x and
// ln(u) * x / (u - 1) (Goldberg's correction of the rounding in 1 + x), else ln(1 + x).
Tensor log1p(const Tensor& x);
// expm1(x) = e^x - 1, accurate for small |x|: for |x| < 0.5 it uses u = e^x and
// (u - 1) * x / ln(u) (Kahan's correction), else e^x - 1.
Tensor expm1(const Tensor& x);

// ---- softmax ---------------------------------------------------------------------------------------
// softmax(x)_i = e^(x_i - m) / sum_j e^(x_j - m) along `axis`, m = max_j x_j (detached: the result
// does not depend on it). Finite for any finite logits (1e4 included). A row with a NaN is all NaN.
Tensor softmax(const Tensor& x, int64_t axis = -1);
// log_softmax(x)_i = (x_i - m) - ln sum_j e^(x_j - m).
Tensor log_softmax(const Tensor& x, int64_t axis = -1);

// ---- linear ----------------------------------------------------------------------------------------
// linear(x, w, b) = x w^T + b.   x (..., in), w (out, in), bias (out) or an empty Tensor -> (..., out).
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& bias = Tensor());

// ---- batch normalisation ---------------------------------------------------------------------------
struct BatchNormResult {
  Tensor out;               // x's shape and dtype
  Tensor batch_mean;        // (C), training only (empty in evaluation)
  Tensor batch_var;         // (C), biased (divided by n), training only
  Tensor new_running_mean;  // (C): training: (1 - momentum) running_mean + momentum batch_mean;
                            //      evaluation: running_mean itself. Empty when running_mean is.
  Tensor new_running_var;   // (C): training uses the UNBIASED batch var (divided by n - 1), like PyTorch
};
// Batch norm over channels-last x: (N, C) or (N, H, W, C), any ndim >= 2; statistics are taken over
// every axis but the last (n = numel / C values per channel).
//   training:   out = (x - mean_b) / sqrt(var_b + eps) * weight + bias     (mean_b, var_b of this batch)
//   evaluation: out = (x - running_mean) / sqrt(running_var + eps) * weight + bias
// weight and bias (C) may be empty Tensors (no affine transform). The running statistics are
// returned, not modified (the caller assigns them); they carry no gradient history. Training needs
// n > 1; evaluation needs the running statistics.
// sync_group >= 0 (training only): a synchronized batch norm over the ranks of that collective group
// (aether/graph/collective.h): the statistics are those of every rank's x together (one all-reduce
// of the per-channel sums, sums of squares and counts in the forward pass, one of the statistics'
// gradients in the backward pass), the same on every rank.
BatchNormResult batch_norm(const Tensor& x, const Tensor& weight, const Tensor& bias,
                           const Tensor& running_mean, const Tensor& running_var, bool training,
                           double momentum = 0.1, double eps = 1e-5, int64_t sync_group = -1);

// ---- layer normalisation ---------------------------------------------------------------------------
// Normalises each sample over its last `axes` dims (Ba et al. 2016; PyTorch's layer_norm with
// normalized_shape = x's last `axes` dims): out = (x - mean) / sqrt(var + eps) * weight + bias, the
// mean and the (population) variance taken per sample over those dims. weight and bias have the
// normalised dims' shape, or are empty Tensors. Computed in float32 for 16-bit x (float64 stays),
// returned in x's dtype; its gradient is autograd's through the composite.
Tensor layer_norm(const Tensor& x, const Tensor& weight = Tensor(), const Tensor& bias = Tensor(),
                  int64_t axes = 1, double eps = 1e-5);

// ---- losses ----------------------------------------------------------------------------------------
// one_hot(labels, K)[..., k] = labels[...] == k, as `dtype`: labels (...) int32/int64 -> (..., K).
// The labels are read on the host to check that 0 <= label < K (this realizes them).
Tensor one_hot(const Tensor& labels, int64_t num_classes, DType dtype = DType::float32);

// cross_entropy(logits, labels, s) = mean over rows of  -sum_k target_k * log_softmax(logits)_k
//   logits (..., K) with at least one batch axis (e.g. (N, K));
//   labels: int32/int64 class indices of shape (...) (e.g. (N)), or float probabilities / one-hot
//           rows of logits' shape (..., K);
//   target = (1 - s) * labels_as_probabilities + s / K   (label smoothing as in PyTorch, 0 <= s <= 1).
// Terms with target_k == 0 contribute exactly 0 (so logits of -inf for masked classes are allowed).
// The result is a scalar of logits' dtype.
Tensor cross_entropy(const Tensor& logits, const Tensor& labels, double label_smoothing = 0.0);
// nll_loss(log_probs, labels) = -mean over rows of log_probs[..., label]   (labels int, shape (...)).
Tensor nll_loss(const Tensor& log_probs, const Tensor& labels);
// categorical_cross_entropy(probs, targets) = -mean over rows of sum_k t_k ln(clamp(p_k, eps, 1 - eps))
// on probabilities (Keras' loss, without renormalising probs). targets: int indices (...) or float (..., K).
Tensor categorical_cross_entropy(const Tensor& probs, const Tensor& targets, double eps = 1e-7);
// mse_loss(pred, target) = mean((pred - target)^2); shapes must match exactly.
Tensor mse_loss(const Tensor& pred, const Tensor& target);
// binary_cross_entropy_with_logits(z, t, s) = mean over elements of
//   -[t' ln sigmoid(z) + (1 - t') ln(1 - sigmoid(z))] = softplus(z) - z t'   (one sigmoid per element:
//   binary and multi-label classification; PyTorch's loss of this name, Keras' BinaryCrossentropy with
//   from_logits=True), t' = (1 - s) t + s / 2 (Keras' label smoothing, 0 <= s <= 1).
//   logits and targets: the same shape, float; targets are probabilities in [0, 1] (not checked here:
//   that would realize them; Model checks its data). Finite for any finite logit (softplus is
//   evaluated without overflow). Computed in float32 for 16-bit logits; a scalar of logits' dtype.
//   weights (PyTorch's `weight`): empty, or float and broadcastable to logits' shape: each element's
//   loss times its weight, still averaged over the elements (Keras' class_weight: the mean over the
//   samples, not over the weights).
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& targets,
                                        double label_smoothing = 0.0, const Tensor& weights = Tensor());

// ---- metrics (no gradient; float32 scalars) --------------------------------------------------------
// accuracy = fraction of rows where argmax(logits) == label. logits (..., K); labels int (...) or
// float (..., K) (then argmax(labels) is the label). argmax ties: the first maximum wins.
Tensor accuracy(const Tensor& logits, const Tensor& labels);
// top_k_accuracy = fraction of rows whose label's logit is strictly exceeded by fewer than k logits.
// Ties count in the label's favour: with logits (1, 1, 1) every label is in the top 1. A NaN logit
// for the label counts as a miss; NaN logits of other classes are ignored. Needs k >= 1.
Tensor top_k_accuracy(const Tensor& logits, const Tensor& labels, int64_t k);
// binary_accuracy = fraction of elements where (logit > 0) == (target > 0.5): Keras' binary_accuracy
// (sigmoid(logit) > 0.5 against a 0/1 target). logits and targets: the same shape, float.
Tensor binary_accuracy(const Tensor& logits, const Tensor& targets);

// ---- dropout ---------------------------------------------------------------------------------------
// dropout(x) = training ? (u >= p ? x / (1 - p) : 0) : x, with u ~ U[0, 1) from Tensor::rand
// (float32 Philox, one draw per element), so the mask is fixed by aether::manual_seed. p in [0, 1];
// p = 1 gives zeros. Gradients are 0 at dropped elements, 1 / (1 - p) elsewhere.
Tensor dropout(const Tensor& x, double p, bool training);
// spatial_dropout: x (N, ..., C) channels-last (e.g. (N, H, W, C)), ndim >= 3; one draw per (N, C),
// the same mask for every spatial position (drops whole feature maps).
Tensor spatial_dropout(const Tensor& x, double p, bool training);

}  // namespace aether
