// src/model/model_impl.h - (internal) Model::Impl and the helpers that model.cpp (building,
// training, evaluation) and model_checkpoint.cpp (save, load) share.
#pragma once

#include <algorithm>
#include <atomic>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aether/io/safetensors.h"
#include "aether/model/model.h"
#include "aether/ops/nn.h"
#include "model/early_stopping.h"
#include "model/lr_plateau.h"

namespace aether {
namespace model_internal {

nlohmann::json config_to_json(const ModelConfig& c);
ModelConfig config_from_json(const nlohmann::json& j);  // throws nlohmann::json exceptions
void check_config(const ModelConfig& c);                // throws aether::Error "configure: ..."
// "NaN", "Inf" or "-Inf": the first value of a float tensor that is not finite; "" when all are.
std::string non_finite(const Tensor& t);
// The first negative value of a float tensor, or 0 when there is none (variances must be >= 0).
double first_negative(const Tensor& t);
// State slots that must hold values >= 0 (a negative variance gives NaN outputs).
bool non_negative_entry(const std::string& name);
// What makes weight or state values unusable, "" when nothing: "NaN", "Inf" or "-Inf" (the first
// value that is not finite), or "the negative value v" + `variance_note` in a variance
// (non_negative_entry(name)). Saving, loading and set_weights all check with it.
std::string invalid_values(const std::string& name, const Tensor& t, const char* variance_note = "");
// Refuses to write what loading would reject (invalid_values): throws aether::Error (runtime, naming
// `op`), "<op>: <what> holds <value><tail>" (tail: "; not writing <path>...").
void check_writable(const char* op, const std::string& what, const std::string& name, const Tensor& t,
                    const std::string& tail);
// The tensors of `stored` named `names`, in that order: `missing(name)` is called for a name it
// lacks, then `extra(name)` for the first of its tensors (in its order) that `names` lacks; both
// must throw.
std::vector<Tensor> take_by_name(const NamedTensors& stored, const std::vector<std::string>& names,
                                 const std::function<void(const std::string&)>& missing,
                                 const std::function<void(const std::string&)>& extra);
// The state slots of a parameter trained by `optimizer` with `momentum` (and the config's lookahead)
// once the optimizer has taken a step.
std::vector<std::string> optimizer_slots(const ModelConfig& c, const std::string& optimizer, double momentum);
// "float32", "bfloat16" or "float16" for a precision name or its short form (fp32, bf16, fp16);
// throws aether::Error naming `op` for anything else.
std::string canonical_precision(const std::string& name, const char* op);
// The dtype activations are computed in under a canonical precision.
DType compute_dtype(const std::string& precision);
// The memory layouts written to the manifest ("layouts"); a file stating other ones is rejected.
nlohmann::json layouts_json();

}  // namespace model_internal

struct Model::Impl {
  std::shared_ptr<nn::Sequential> net = std::make_shared<nn::Sequential>();
  ModelConfig config;
  bool configured = false;
  Device device = Device::cpu();
  std::string precision = "float32";
  Shape input_shape;
  int64_t outputs = 0;  // the model's output width K: (N, K) (finalize)
  bool finalized = false;
  std::unique_ptr<optim::Optimizer> opt;
  // The names of the optimizer's parameters, in its order (finalize): its state's index in checkpoints.
  std::vector<std::string> trained_names;
  // The names of the optimizer's state owners (named_state()'s indices): trained_names, then with
  // lookahead the buffers it averages (finalize); and the slots each has once a step is taken.
  std::vector<std::string> state_names;
  std::vector<std::vector<std::string>> state_slots;
  // Parameters trained for their first epochs only (ParamGroup::train_epochs): frozen from then on.
  std::vector<std::pair<Tensor*, int64_t>> epoch_limited;
  // Trained parameters (the optimizer's index) whose schedule spans their own first epochs
  // (ParamGroup::schedule_over_train_epochs): index, epochs.
  std::vector<std::pair<size_t, int64_t>> own_schedule;
  // The training `c` asks of the built network: each parameter's group (the first that matches),
  // frozen ones left out of the optimizer and of autograd, and a fresh optimizer (finalize, and
  // configure on a finalized model). Everything is checked before anything changes: a throw leaves
  // the model as it was. `op` names the caller in errors.
  void setup_training(const ModelConfig& c, const char* op);
  // The epoch's parameters that train (train() calls it before every epoch).
  void set_trained_for_epoch(int64_t epoch) {
    for (auto& [t, n] : epoch_limited) t->set_requires_grad(epoch < n);
  }
  int64_t epochs_done = 0, steps_done = 0;
  // TrainOptions::reduce_lr_on_plateau's factor so far and its rule's state (checkpointed).
  model_internal::LrPlateauState lr_plateau;
  // TrainOptions::early_stopping's last run (checkpointed): continued when it did not end.
  std::optional<model_internal::EarlyStoppingRun> early_stopping_run;
  // TrainOptions::lr_schedule's last value (checkpointed); none: config.lr.
  std::optional<double> scheduled_lr;
  double base_lr() const { return scheduled_lr.value_or(config.lr); }
  std::vector<float> mean, std;
  nlohmann::json info = nlohmann::json::object();
  nlohmann::json loader_state = nlohmann::json::object();  // the training loader's options (resume checks)
  // Dynamic loss scaling (float16 only): the loss is multiplied by `scale` before backward; a step
  // whose gradients hold Inf/NaN is skipped (weights, optimizer state and step count untouched) and
  // halves the scale; growth_interval clean steps in a row double it (up to LossScale::kMax). Saved in the
  // checkpoint.
  struct LossScale {
    double scale = 65536.0;
    int64_t clean_steps = 0;
    int64_t growth_interval = 2000;
    int64_t skipped = 0;                                            // steps skipped so far (this process)
    static constexpr double kMin = 1.0 / 65536, kMax = 16777216.0;  // 2^-16 .. 2^24
    void overflowed() {                                             // a skipped step
      scale = std::max(scale / 2, kMin);
      clean_steps = 0;
      ++skipped;
    }
    void clean_step() {
      if (++clean_steps < growth_interval) return;
      scale = std::min(scale * 2, kMax);
      clean_steps = 0;
    }
  } loss_scale;
  bool scales_loss() const { return precision == "float16"; }

  // The network on a batch: in mixed precision the input is cast to the 16-bit compute dtype (the
  // layers cast their float32 parameters to it; BatchNorm and Softmax compute in float32), and the
  // outputs return to float32, in which the loss, the metrics and the probabilities are computed.
  Tensor forward(const Tensor& x) const {
    return net->forward(x.cast(model_internal::compute_dtype(precision))).cast(DType::float32);
  }
  Tensor tta_forward(const Tensor& x, TTA tta) const;  // forward's logits averaged over the TTA's views
  void require_finalized(const char* op) const {
    AETHER_CHECK(finalized, op, "call configure() and finalize(input_shape) first");
  }
  bool training = false;  // inside train(), whose callbacks must not change the recipe or train again
  void require_not_training(const char* op) const {
    AETHER_CHECK(!training, op, "the model is training (called from a callback of train()?); do this after ",
                 "train() returns");
  }
  // The losses and metrics of ModelConfig::loss (model_loss.cpp). labels (B) int64 for classes, or
  // targets (B, K) float32 (mse: regression; binary_cross_entropy: probabilities).
  // The unweighted loss; weighted_loss() multiplies each sample's by its class's weight (class_weight:
  // (K) float32, or (2) for binary_cross_entropy's targets: target 0, target 1) and its own
  // (sample_weight: (B) float32), either undefined for none, still averaged over the samples.
  Tensor loss(const Tensor& out, const Tensor& labels, const Tensor& targets) const;
  Tensor weighted_loss(const Tensor& out, const Tensor& labels, const Tensor& targets,
                       const Tensor& class_weight, const Tensor& sample_weight) const;
  // Training's: weighted_loss() with train()'s class_weight (below).
  Tensor train_loss(const Tensor& out, const Tensor& labels, const Tensor& targets,
                    const Tensor& sample_weight) const {
    return weighted_loss(out, labels, targets, class_weight, sample_weight);
  }
  // A sample_weight option (TrainOptions' or EvalOptions'): empty, or one finite weight >= 0 per
  // sample of `d`; `op` and `what` name it in the error.
  static void check_sample_weight(const std::vector<double>& w, const data::Dataset& d, const char* op,
                                  const char* what);
  // The weights (B) float32 on the device of batch `b`'s samples (by their data set indices); undefined
  // for an empty w.
  Tensor batch_weights(const std::vector<double>& w, const data::Batch& b) const;
  // TrainOptions::class_weight on the device while train() runs, else undefined: (K) float32, one
  // weight per class, or (2) for binary_cross_entropy's targets (target 0, target 1).
  Tensor class_weight;
  // The accuracy of a batch: argmax == label; for targets, binary_accuracy (binary_cross_entropy) or
  // the fraction with |out - target| < regression_precision (mse).
  Tensor metric(const Tensor& out, const Tensor& labels, const Tensor& targets) const;
  // predict()'s outputs: softmax (cross_entropy), sigmoids (binary_cross_entropy) or `out` itself.
  Tensor probabilities(const Tensor& out) const;
  // One training step recorded, not computed (Model::record_train_step without the names, which
  // train() does not need): step.tensors are the loss, accuracy, buffers, then record_step's. With
  // loss scaling, backward runs on the scaled loss and the update on the unscaled gradients.
  Step record_step(const Tensor& x, const Tensor& labels, const Tensor& targets,
                   const Tensor& sample_weight = Tensor());
  // train()'s step with loss scaling: forward and backward realized first, with a flag that is NaN
  // when any gradient is not finite; the update is then recorded and realized only for a finite one.
  // Returns false for a skipped step.
  bool run_scaled_step(const Tensor& x, const Tensor& labels, const Tensor& targets,
                       const Tensor& sample_weight, Tensor* loss, Tensor* accuracy);
  // train()'s step on one of several ranks: forward and backward, the gradients averaged over the
  // ranks (data_parallel.h; `weight` = this rank's batch / the global batch), then the update, which
  // float16 skips when a gradient overflowed. *loss and *accuracy are the global batch's. Returns
  // false for a skipped step.
  double comm_wait = 0;  // seconds run_data_parallel_step waited for all-reduces (this process)
  std::atomic<bool> stop_requested{false};  // Model::request_stop(), read after each epoch
  bool run_data_parallel_step(dist::Communicator& comm, const Tensor& x, const Tensor& labels,
                              const Tensor& targets, const Tensor& sample_weight, double weight, double* loss,
                              double* accuracy);
  std::unique_ptr<optim::LRSchedule> schedule(int64_t total_steps) const {
    return make_schedule(config, total_steps);
  }
  // Fixed order, no augmentation, the training normalisation.
  data::LoaderOptions eval_loader(int64_t batch_size) const {
    data::LoaderOptions lo;
    lo.batch_size = batch_size;
    lo.shuffle = false;
    lo.mean = mean;
    lo.std = std;
    return lo;
  }
  // `d` must be consistent (Dataset::check: sizes, labels in range, finite float values) and not
  // empty, one sample must have the model's input shape (H, W, C), or as many values when the
  // model takes flat input, and with `scored` (train, evaluate) its labels must be classes the
  // model gives, or its targets as wide as the model's output.
  void check_data(const data::Dataset& d, const char* op, bool scored = true) const {
    d.check();
    AETHER_CHECK(d.n > 0, op, "data set '", d.name, "' is empty");
    AETHER_CHECK(!d.has_targets() || config.loss == "mse" || config.loss == "binary_cross_entropy", op,
                 "data set '", d.name,
                 "' has float targets, which need the mse or binary_cross_entropy loss ",
                 "(configured: ", config.loss, ")");
    if (scored && d.has_targets() && config.loss == "binary_cross_entropy") {
      for (size_t i = 0; i < d.targets.size(); ++i)
        AETHER_CHECK(d.targets[i] >= 0 && d.targets[i] <= 1, op, "data set '", d.name, "' has target ",
                     d.targets[i], " (sample ", int64_t(i) / d.target_dim, ", output ",
                     int64_t(i) % d.target_dim, "); the binary_cross_entropy loss takes targets in [0, 1]");
    }
    AETHER_CHECK(!scored || !d.has_targets() || d.target_dim == outputs, op, "data set '", d.name, "' has ",
                 d.target_dim, " targets per sample, the model gives ", outputs);
    AETHER_CHECK(!scored || d.has_targets() || d.num_classes <= outputs, op, "data set '", d.name, "' has ",
                 d.num_classes, " classes, the model gives ", outputs);
    // A flat model takes any sample of as many values (Python's (N, features) arrive as (F, 1, 1)).
    const bool flat = input_shape.size() == 1;
    AETHER_CHECK(flat || Shape({d.h, d.w, d.c}) == input_shape, op, "data set '", d.name, "' has images (",
                 d.h, ", ", d.w, ", ", d.c, "), the model expects ", to_string(input_shape));
    AETHER_CHECK(!flat || d.image_bytes() == input_shape[0], op, "data set '", d.name, "' has ",
                 d.image_bytes(), " values per sample",  // Python's (N, features): (F, 1, 1), no image
                 d.w == 1 && d.c == 1 ? "" : detail::cat(" (images (", d.h, ", ", d.w, ", ", d.c, "))"),
                 ", the model expects ", input_shape[0]);
  }
  // The normalisation as saved: one value per channel. Empty lists (never trained) mean mean 0 and
  // std 1; an image model knows its channel count and writes them out.
  std::pair<std::vector<float>, std::vector<float>> saved_normalization() const {
    auto mu = mean, sd = std;
    if (input_shape.size() == 3) {
      if (mu.empty()) mu.assign(size_t(input_shape[2]), 0.0f);
      if (sd.empty()) sd.assign(size_t(input_shape[2]), 1.0f);
    }
    return {mu, sd};
  }
  // Input batches are normalised by the loader; this checks a batch against the model's input.
  void check_input(const Tensor& x, const char* op) const {
    Shape want = input_shape;
    want.insert(want.begin(), x.ndim() > 0 ? x.shape()[0] : 0);
    AETHER_CHECK(x.shape() == want, op, "expected input of shape (N, ", to_string(input_shape).substr(1),
                 ", got ", to_string(x.shape()));
  }
};

}  // namespace aether
