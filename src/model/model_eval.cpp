// Model::evaluate and Model::predict: batches in evaluation mode without gradients, the outputs
// checked finite, and evaluate's test-time augmentation (TTA).
#include <chrono>
#include <cmath>
#include <limits>

#include "aether/model/model.h"
#include "model_impl.h"

namespace aether {

using model_internal::non_finite;

const char* tta_name(TTA t) {
  switch (t) {
    case TTA::none: return "none";
    case TTA::flip: return "flip";
    case TTA::flip_translate: return "flip_translate";
  }
  return "?";
}
TTA tta_from_name(const std::string& s) {
  for (TTA t : {TTA::none, TTA::flip, TTA::flip_translate})
    if (s == tta_name(t)) return t;
  throw Error(
      detail::cat("tta: unknown test-time augmentation '", s, "' (expected none, flip or flip_translate)"));
}

namespace {
// x (N, H, W, C) -> the same, reflect-padded by one pixel on each side of H and W: (N, H+2, W+2, C).
Tensor reflect_pad1(const Tensor& x) {
  const int64_t h = x.shape()[1], w = x.shape()[2];
  const Tensor rows = cat({x.slice(1, 1, 2), x, x.slice(1, h - 2, h - 1)}, 1);  // (N, H+2, W, C)
  return cat({rows.slice(2, 1, 2), rows, rows.slice(2, w - 2, w - 1)}, 2);
}
}  // namespace

// The logits of x (N, H, W, C), averaged over the views of `tta` (see TTA).
Tensor Model::Impl::tta_forward(const Tensor& x, TTA tta) const {
  if (tta == TTA::none) return forward(x);
  auto mirror = [&](const Tensor& v) { return (forward(v) + forward(v.flip({2}))) * 0.5; };
  const Tensor logits = mirror(x);
  if (tta == TTA::flip) return logits;
  const int64_t h = x.shape()[1], w = x.shape()[2];
  const Tensor p = reflect_pad1(x);  // (N, H+2, W+2, C)
  const Tensor down_right = p.slice(1, 0, h).slice(2, 0, w),
               up_left = p.slice(1, 2, h + 2).slice(2, 2, w + 2);
  return logits * 0.5 + (mirror(down_right) + mirror(up_left)) * 0.25;
}

EvalResult Model::evaluate(const data::Dataset& d, int64_t batch_size, TTA tta) {
  EvalOptions o;
  o.batch_size = batch_size;
  o.tta = tta;
  return evaluate(d, o);
}

EvalResult Model::evaluate(const data::Dataset& d, const EvalOptions& o) {
  auto& m = *impl_;
  const TTA tta = o.tta;
  m.require_finalized("evaluate");
  m.check_data(d, "evaluate");
  Impl::check_sample_weight(o.sample_weight, d, "evaluate", "sample_weight");
  AETHER_CHECK(
      tta == TTA::none || (m.input_shape.size() == 3 && m.input_shape[0] >= 2 && m.input_shape[1] >= 2),
      "evaluate", "test-time augmentation '", tta_name(tta), "' needs image input (H, W, C) of at least ",
      "2x2, the model takes ", to_string(m.input_shape));
  const auto t0 = std::chrono::steady_clock::now();
  data::DataLoader loader(d, m.eval_loader(o.batch_size));
  loader.begin_epoch(0);
  nn::EvalModeGuard eval_mode(*m.net);  // restores the previous mode, also on errors
  NoGradGuard no_grad;
  EvalResult r;
  double loss_sum = 0, correct = 0, top5 = 0;
  const int64_t k = m.outputs;
  if (!d.has_targets()) r.confusion.assign(size_t(k * k), 0);
  for (int64_t batch = 0; auto b = loader.next(); ++batch) {
    if (o.on_batch_begin) o.on_batch_begin(batch);
    Tensor x = b->images.to(m.device);  // batches come from the loader in host memory
    const Tensor labels = b->labels.defined() ? b->labels.to(m.device) : Tensor();
    const Tensor targets = b->targets.defined() ? b->targets.to(m.device) : Tensor();
    if (m.input_shape.size() == 1) x = x.flatten(1);
    const Tensor out = m.tta_forward(x, tta);
    const Tensor weights = m.batch_weights(o.sample_weight, *b);  // (B) or undefined
    const Tensor loss = m.weighted_loss(out, labels, targets, Tensor(), weights);
    // Class labels: the accuracy is counted from each sample's first maximum (the accuracy metric's
    // argmax, and the confusion's), exactly; a float32 mean times the batch was off in the 8th digit
    // (2970 of 10000 gave 0.29699999690). Targets: the metric's mean.
    const Tensor predicted = labels.defined() ? out.argmax(1) : Tensor();  // (B) int64
    const Tensor acc = labels.defined() ? Tensor() : m.metric(out, labels, targets);
    const bool k5 = labels.defined() && out.shape().back() >= 5;
    const Tensor t5 = k5 ? top_k_accuracy(out, labels, 5) : Tensor();  // the mean of B hits
    std::vector<Tensor> results{out, loss};
    for (const Tensor& t : {predicted, acc, t5})
      if (t.defined()) results.push_back(t);
    realize(results);
    const std::string bad = non_finite(out);
    AETHER_CHECK_RUNTIME(bad.empty(), "evaluate", "the model's outputs are not finite (", bad,
                         "); the weights are corrupt or diverged");
    loss_sum += loss.item<double>() * double(b->size);
    double batch_correct = 0;
    if (predicted.defined()) {
      const std::vector<int64_t> p = predicted.to_vector<int64_t>(), l = b->labels.to_vector<int64_t>();
      for (size_t i = 0; i < p.size(); ++i) {
        ++r.confusion[size_t(l[i] * k + p[i])];
        batch_correct += double(p[i] == l[i]);
      }
    } else {
      batch_correct = acc.item<double>() * double(b->size);
    }
    correct += batch_correct;
    // Fewer than 5 classes: every label is in the top 5. t5 counts B samples: its count is an integer.
    top5 += k5 ? std::round(t5.item<double>() * double(b->size)) : batch_correct;
    r.samples += b->size;
    if (o.on_batch)
      o.on_batch({batch + 1, loader.num_batches(), r.samples, loss_sum / double(r.samples),
                  correct / double(r.samples), Tensor()});
  }
  if (r.samples > 0) {
    r.loss = loss_sum / double(r.samples);
    r.accuracy = correct / double(r.samples);
    r.top5 = top5 / double(r.samples);
  }
  AETHER_CHECK_RUNTIME(std::isfinite(r.loss) && std::isfinite(r.accuracy) && std::isfinite(r.top5),
                       "evaluate", "the loss or accuracy on data set '", d.name, "' is not finite (loss ",
                       r.loss, ", accuracy ", r.accuracy, "); the weights are corrupt or diverged");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

std::vector<double> EvalResult::class_accuracy() const {
  const auto k = int64_t(std::llround(std::sqrt(double(confusion.size()))));
  std::vector<double> acc(size_t(k), std::numeric_limits<double>::quiet_NaN());
  for (int64_t c = 0; c < k; ++c) {
    int64_t row = 0;
    for (int64_t j = 0; j < k; ++j) row += confusion[size_t(c * k + j)];
    if (row > 0) acc[size_t(c)] = double(confusion[size_t(c * k + c)]) / double(row);
  }
  return acc;
}

Tensor Model::predict(const Tensor& images) {
  auto& m = *impl_;
  m.require_finalized("predict");
  Tensor x = images.to(m.device).cast(DType::float32);
  if (m.input_shape.size() == 1 && x.ndim() > 2) x = x.flatten(1);
  m.check_input(x, "predict");
  const std::string bad_input = non_finite(x);
  AETHER_CHECK(bad_input.empty(), "predict", "the images hold ", bad_input);
  nn::EvalModeGuard eval_mode(*m.net);  // restores the previous mode, also on errors
  NoGradGuard no_grad;
  Tensor p = m.probabilities(m.forward(x)).realize();
  const std::string bad = non_finite(p);
  AETHER_CHECK_RUNTIME(bad.empty(), "predict", "the model's outputs are not finite (", bad,
                       "); the weights are corrupt or diverged");
  return p;
}

Tensor Model::predict(const data::Dataset& d, int64_t batch_size) {
  EvalOptions o;
  o.batch_size = batch_size;
  return predict(d, o);
}

Tensor Model::predict(const data::Dataset& d, const EvalOptions& o) {
  auto& m = *impl_;
  m.require_finalized("predict");
  AETHER_CHECK(o.tta == TTA::none, "predict",
               "test-time augmentation is evaluate's; predict takes tta none, got ", tta_name(o.tta));
  AETHER_CHECK(o.sample_weight.empty(), "predict", "sample_weight is evaluate's; predict scores nothing");
  m.check_data(d, "predict", /*scored=*/false);
  data::DataLoader loader(d, m.eval_loader(o.batch_size));
  loader.begin_epoch(0);
  std::vector<Tensor> parts;
  int64_t seen = 0;
  for (int64_t batch = 0; auto b = loader.next(); ++batch) {
    if (o.on_batch_begin) o.on_batch_begin(batch);
    parts.push_back(predict(b->images));  // (B, K)
    seen += b->size;
    if (o.on_batch) o.on_batch({batch + 1, loader.num_batches(), seen, 0, 0, parts.back()});
  }
  return cat(parts, 0).realize();
}

}  // namespace aether
