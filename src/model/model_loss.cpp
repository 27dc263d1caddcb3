// Model's losses and metrics, one per ModelConfig::loss: cross_entropy (softmax on the logits),
// categorical_cross_entropy (probabilities), binary_cross_entropy (a sigmoid per logit) and mse;
// the weighted loss (TrainOptions::class_weight and sample_weight, EvalOptions::sample_weight), the
// sample_weight options' checks and batches, the batch accuracy and predict()'s probabilities.
#include <cmath>

#include "model_impl.h"

namespace aether {

Tensor Model::Impl::loss(const Tensor& out, const Tensor& labels, const Tensor& targets) const {
  if (config.loss == "cross_entropy") return cross_entropy(out, labels, config.label_smoothing);
  const Tensor target = targets.defined() ? targets : one_hot(labels, out.shape().back(), out.dtype());
  if (config.loss == "categorical_cross_entropy") return categorical_cross_entropy(out, target);
  if (config.loss == "binary_cross_entropy")
    return binary_cross_entropy_with_logits(out, target, config.label_smoothing);
  return mse_loss(out, target);
}

// loss() with each sample's terms times its weight: its class's (class_weight; for
// binary_cross_entropy's targets each output's, t w1 + (1 - t) w0) times its own (sample_weight). The
// mean stays over the samples.
Tensor Model::Impl::weighted_loss(const Tensor& out, const Tensor& labels, const Tensor& targets,
                                  const Tensor& class_weight, const Tensor& sample_weight) const {
  if (!class_weight.defined() && !sample_weight.defined()) return loss(out, labels, targets);
  const double s = config.label_smoothing;
  const Tensor own = sample_weight.defined() ? sample_weight.reshape({-1, 1}) : Tensor();  // (B, 1)
  auto times_own = [&](const Tensor& w) { return !own.defined() ? w : w.defined() ? w * own : own; };
  if (targets.defined()) {  // (B, K): binary_cross_entropy's probabilities or mse's regression targets
    Tensor w;               // (B, K) with class_weight (binary_cross_entropy only: train() checks)
    if (class_weight.defined())
      w = targets * (class_weight.slice(0, 1, 2) - class_weight.slice(0, 0, 1)) + class_weight.slice(0, 0, 1);
    w = times_own(w);
    if (config.loss == "binary_cross_entropy") return binary_cross_entropy_with_logits(out, targets, s, w);
    return ((out - targets).square() * w).mean();
  }
  const int64_t k = out.shape().back();
  const Tensor hot = one_hot(labels, k, DType::float32);  // (B, K)
  // (B, 1): each sample's class's weight, times its own
  const Tensor w = times_own(class_weight.defined() ? (hot * class_weight).sum({-1}, true) : Tensor());
  if (config.loss == "cross_entropy") return cross_entropy(out, (hot * (1.0 - s) + s / double(k)) * w);
  if (config.loss == "categorical_cross_entropy") return categorical_cross_entropy(out, hot * w);
  if (config.loss == "binary_cross_entropy") return binary_cross_entropy_with_logits(out, hot, s, w);
  return ((out - hot).square() * w).mean();  // mse on one-hot targets
}

void Model::Impl::check_sample_weight(const std::vector<double>& w, const data::Dataset& d, const char* op,
                                      const char* what) {
  AETHER_CHECK(w.empty() || int64_t(w.size()) == d.n, op, what, " has ", w.size(), " weights, data set '",
               d.name, "' has ", d.n, " samples");
  for (size_t i = 0; i < w.size(); ++i)
    AETHER_CHECK(std::isfinite(w[i]) && w[i] >= 0, op, what, "[", i, "] is ", w[i],
                 "; a weight must be finite and >= 0");
}

Tensor Model::Impl::batch_weights(const std::vector<double>& w, const data::Batch& b) const {
  if (w.empty()) return Tensor();
  std::vector<float> mine;  // (B)
  mine.reserve(b.samples.size());
  for (const int64_t i : b.samples) mine.push_back(float(w[size_t(i)]));
  return Tensor::from_vector<float>(mine, {b.size}).to(device);
}

Tensor Model::Impl::metric(const Tensor& out, const Tensor& labels, const Tensor& targets) const {
  if (!targets.defined()) return accuracy(out, labels);
  if (config.loss == "binary_cross_entropy") return binary_accuracy(out, targets);
  return ((out - targets).abs() < config.regression_precision).cast(DType::float32).mean();
}

Tensor Model::Impl::probabilities(const Tensor& out) const {
  if (config.loss == "cross_entropy") return softmax(out, -1);
  return config.loss == "binary_cross_entropy" ? out.sigmoid() : out;
}

}  // namespace aether
