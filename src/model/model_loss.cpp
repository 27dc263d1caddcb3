// Model's losses and metrics, one per ModelConfig::loss: cross_entropy (softmax on the logits),
// categorical_cross_entropy (probabilities), binary_cross_entropy (a sigmoid per logit) and mse;
// training's class-weighted loss (TrainOptions::class_weight), the batch accuracy and predict()'s
// probabilities.
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

// loss() with each sample's terms times its class's weight (binary_cross_entropy's targets: each
// output's, t w1 + (1 - t) w0); the mean stays over the samples.
Tensor Model::Impl::train_loss(const Tensor& out, const Tensor& labels, const Tensor& targets) const {
  if (!class_weight.defined()) return loss(out, labels, targets);
  const double s = config.label_smoothing;
  if (targets.defined()) {  // binary_cross_entropy (train() checks): (B, K) targets in [0, 1]
    const Tensor w0 = class_weight.slice(0, 0, 1), w1 = class_weight.slice(0, 1, 2);  // (1), (1)
    return binary_cross_entropy_with_logits(out, targets, s, targets * (w1 - w0) + w0);
  }
  const int64_t k = out.shape().back();
  const Tensor hot = one_hot(labels, k, DType::float32);  // (B, K)
  const Tensor w = (hot * class_weight).sum({-1}, true);  // (B, 1): each sample's class's weight
  if (config.loss == "cross_entropy") return cross_entropy(out, (hot * (1.0 - s) + s / double(k)) * w);
  if (config.loss == "categorical_cross_entropy") return categorical_cross_entropy(out, hot * w);
  if (config.loss == "binary_cross_entropy") return binary_cross_entropy_with_logits(out, hot, s, w);
  return ((out - hot).square() * w).mean();  // mse on one-hot targets
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
