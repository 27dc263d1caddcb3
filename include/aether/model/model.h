// aether/model/model.h - Model: the Keras-like way to build, train, evaluate, save and load.
//
// A complete example (Fashion-MNIST, from the files of Debian's dataset-fashion-mnist):
//
//   #include "aether/aether.h"
//   #include "aether/model/model.h"
//   using namespace aether;
//
//   data::Dataset train = data::load_fashion_mnist("/usr/share/datasets/fashion-mnist", data::Split::train);
//   data::Dataset test = data::load_fashion_mnist("/usr/share/datasets/fashion-mnist", data::Split::test);
//
//   Model model;
//   model.add(std::make_shared<nn::Conv2d>(1, 32, 3, Conv2dOptions{.padding = "same"}))
//        .add(std::make_shared<nn::ReLU>())
//        .add(std::make_shared<nn::MaxPool2d>(2))
//        .add(std::make_shared<nn::Flatten>())
//        .add(std::make_shared<nn::Linear>(14 * 14 * 32, 10));
//   model.configure({.loss = "cross_entropy", .optimizer = "adam", .lr = 1e-3, .metrics = {"accuracy"}});
//   model.to("cpu");                    // binds the device's kernels (CUDA: a later issue)
//   model.finalize({28, 28, 1});        // input shape of one sample (H, W, C); checks the layers
//   std::cout << model.summary();       // layer, output shape, parameters
//
//   TrainOptions opt;
//   opt.epochs = 3;
//   opt.data.batch_size = 128;
//   opt.data.mean = {0.286f}; opt.data.std = {0.353f};   // per-channel normalisation
//   opt.validation = &test;
//   History h = model.train(train, opt);                  // progress bar per epoch
//   EvalResult r = model.evaluate(test);                  // loss, accuracy
//   model.save("fmnist.aether");                          // zip: manifest + safetensors
//   Model again = Model::load("fmnist.aether");           // same architecture, weights, state
//   Tensor probs = again.predict(images);                 // images (N,28,28,1) float32, normalised
//
// Resuming: Model::load restores the optimizer state, the epoch/step counters, the RNG state and
// the schedule position; train() on the same data then continues with epoch `epochs_done()` and
// gives bit-identical results to a run that was never interrupted (same seed, same threads).
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aether/data/dataset.h"
#include "aether/data/loader.h"
#include "aether/nn/layers.h"
#include "aether/optim/optimizer.h"
#include "aether/optim/schedule.h"

namespace aether {
namespace dist {
class Communicator;  // aether/dist/communicator.h
}

// A parameter group (torch's param_groups): hyperparameters for the parameters it matches, or
// frozen ones. A parameter belongs to the first group of ModelConfig::param_groups that matches it;
// the others take the config's defaults.
struct ParamGroup {
  // A glob (* ? [...], fnmatch) over the parameter's name, as Module::named_parameters gives it:
  // "0.weight", "3.bias", "*.bias", "1.*".
  std::string match = "*";
  // "": any layer; else the type of the layer that owns the parameter ("BatchNorm2d", "Conv2d",
  // "Linear", ...: Module::type_name).
  std::string layer = "";
  double lr_scale = 1;       // the group's learning rate: the schedule's x lr_scale
  double weight_decay = -1;  // < 0: ModelConfig::weight_decay
  // Not trained: no gradient is computed for it, the optimizer does not hold it, it keeps its value
  // (set it before training, e.g. a fixed whitening filter).
  bool frozen = false;
  // > 0: trained in the first train_epochs epochs only, then frozen (airbench's whitening bias, 3);
  // the optimizer holds it and keeps its state. 0: every epoch.
  int64_t train_epochs = 0;
  // With train_epochs > 0: the group's learning rate follows the config's schedule run over its own
  // train_epochs instead of the whole training (airbench94_muon's whitening bias: lr (1 - step / 75)
  // over its 3 epochs of 25 steps, where the others' is (1 - step / 200) over 8 epochs).
  bool schedule_over_train_epochs = false;
  // The optimizer that trains the group: "" (ModelConfig::optimizer) | sgd | adam | adamw | muon,
  // with the config's hyperparameters except the group's own (learning rate scale, weight decay,
  // momentum). Parameters under different optimizers or momenta are trained by an
  // optim::Composite of one optimizer each (airbench94_muon: the conv filters by Muon, the rest by
  // Nesterov SGD). Muon takes parameters of 2 or more dims only.
  std::string optimizer = "";
  double momentum = -1;  // sgd and muon: < 0: ModelConfig::momentum
};

struct ModelConfig {
  // cross_entropy (softmax on the logits) | categorical_cross_entropy (probabilities) | mse |
  // binary_cross_entropy (a sigmoid on each logit: binary and multi-label classification). Data for
  // binary_cross_entropy: targets (N, K) in [0, 1] (the accuracy is ops' binary_accuracy: logit > 0
  // against target > 0.5) or class labels (one-hot targets; the accuracy is argmax's); predict()
  // gives sigmoid probabilities.
  std::string loss = "cross_entropy";
  double label_smoothing = 0;  // cross_entropy and binary_cross_entropy
  // sgd | adam | adamw | muon (optim/muon.h; every trained parameter must then have 2 or more dims:
  // give the others to another optimizer with a ParamGroup)
  std::string optimizer = "sgd";
  double lr = 0.01;       // the peak learning rate of the schedule
  double momentum = 0.9;  // sgd, muon
  bool nesterov = false;  // sgd, muon
  double weight_decay = 0;
  double beta1 = 0.9, beta2 = 0.999, eps = 1e-8;  // adam, adamw
  // muon: Newton-Schulz iterations, and the weight normalised to Frobenius norm sqrt(rows) before
  // each step (optim::MuonOptions; airbench94_muon: 3, true)
  int64_t muon_ns_steps = 5;
  bool muon_normalize_weights = false;
  // constant | one_cycle | warmup_linear | cosine | step | triangle (optim/schedule.h)
  std::string schedule = "constant";
  // one_cycle's and triangle's rising part / warmup_linear's warm-up; triangle also takes 0 (then
  // the rate only falls, lr (1 - step / steps) to lr_end_factor 0: airbench94_muon's)
  double warmup_fraction = 0.2;
  // triangle: the learning rate rises linearly from lr x lr_start_factor to lr (at warmup_fraction of
  // the steps), then falls linearly to lr x lr_end_factor at the last step (airbench: 0.2, 0.07).
  double lr_start_factor = 0, lr_end_factor = 0;
  std::vector<std::string> metrics = {"accuracy"};  // accuracy | top5
  double clip_grad_norm = 0;                        // 0: no clipping
  // Data sets with targets and the mse loss (regression): the accuracy is the fraction of outputs
  // within this distance of their targets; 0: std(training targets) / 250, set by the first train().
  double regression_precision = 0;
  // Per-parameter learning rates, weight decays and frozen parameters (finalize() applies them and
  // throws for a group that matches no parameter).
  std::vector<ParamGroup> param_groups = {};
  // Lookahead (optim::Optimizer::set_lookahead), on when lookahead_every > 0: every that many steps
  // the slow weights move toward the parameters by alpha = 1 - decay (t / T)^power (t: the step,
  // T: the training's steps) and the parameters take their value; after the last epoch the
  // parameters are the slow weights. Constant alpha: power 0 (alpha = 1 - decay). The slow weights
  // start (as the parameters) at the first multiple of lookahead_every in epoch
  // lookahead_start_epoch (0-based) or later; from then on, every epoch ends with the parameters set
  // to the slow weights. The floating-point buffers (BatchNorm's running statistics) are averaged
  // the same way (optim::Optimizer::set_lookahead_buffers), as airbench's lookahead averages the
  // whole state dict. airbench94: every 5, decay 0.95^5, power 3, start epoch 3.
  int64_t lookahead_every = 0;
  double lookahead_decay = 0.5;
  double lookahead_power = 0;
  int64_t lookahead_start_epoch = 0;
};

struct EpochStats {
  int64_t epoch = 0;  // 0-based
  double train_loss = 0, train_accuracy = 0;
  std::optional<double> val_loss, val_accuracy;
  double lr = 0;            // at the end of the epoch
  bool lr_reduced = false;  // reduce_lr_on_plateau reduced the learning rate after this epoch
  double seconds = 0, images_per_second = 0;  // data-parallel: images of every rank
  // Data-parallel: the seconds this rank's steps waited for the gradients' all-reduce once their
  // own backward was done (communication that did not overlap computation).
  double comm_wait_seconds = 0;
};
struct History {
  std::vector<EpochStats> epochs;
  // With TrainOptions::early_stopping: the epoch (0-based, from the start of training) whose
  // monitored number was the best and that number, whether the patience ran out before
  // TrainOptions::epochs, and whether train() gave the parameters and buffers the best epoch's
  // values (restore_best_weights and a later epoch ran).
  int64_t best_epoch = -1;
  double best = 0;
  bool stopped_early = false;
  bool restored_best = false;
  // Whether train() stopped before TrainOptions::epochs because Model::request_stop() asked it to.
  bool stopped_on_request = false;
};
// Test-time augmentation for Model::evaluate, as airbench's tta_level 0, 1, 2: the logits of each
// image are averaged over views of it:
//   none            the image
//   flip            1/2 (the image + its mirror image, W reversed)
//   flip_translate  1/2 flip's + 1/4 flip's of the image shifted by one pixel down-right + 1/4 of it
//                   shifted up-left (the image reflect-padded by 1, then cropped at (0,0) and (2,2))
enum class TTA { none, flip, flip_translate };
const char* tta_name(TTA t);            // "none", "flip", "flip_translate"
TTA tta_from_name(const std::string&);  // throws aether::Error naming an unknown one

// The optimizer a config names (c.optimizer: sgd, adam, adamw or muon, with c's lr, momentum,
// nesterov, weight_decay, betas, eps, muon_*) over `params`, for a training loop of one's own:
// backward(), then step(), then zero_grad(). A schedule other than constant spans `total_steps`
// steps (required then): the optimizer applies it at each step (Optimizer::set_schedule), as
// Model::train would over that many steps. What only Model::train applies is refused rather than
// ignored: clip_grad_norm (call optim::clip_grad_norm(params, max_norm) before step()), lookahead
// and param_groups. Throws aether::Error naming a bad setting.
std::unique_ptr<optim::Optimizer> build_optimizer(const ModelConfig& c, std::vector<Tensor> params,
                                                  int64_t total_steps = 0);
// The learning-rate schedule c.schedule names (c.lr, warmup_fraction, lr_start/end_factor) over
// `total_steps` steps (at least 2), as Model::train uses it.
std::unique_ptr<optim::LRSchedule> make_schedule(const ModelConfig& c, int64_t total_steps);

struct EvalResult {
  double loss = 0, accuracy = 0, top5 = 0;
  int64_t samples = 0;
  double seconds = 0;
  // With class labels: the confusion matrix (K, K) row-major, confusion[label * K + predicted] the
  // samples of class `label` whose largest output is `predicted` (the first maximum); K = the model's
  // outputs. Its diagonal over `samples` is the accuracy; a row's diagonal over the row's sum, that
  // class's accuracy (recall). Empty for targets.
  std::vector<int64_t> confusion;
  // Each class's accuracy from `confusion` (K); NaN for a class without samples. Empty for targets.
  std::vector<double> class_accuracy() const;
};

// Where evaluate() or predict() stands after a batch (EvalOptions::on_batch).
struct EvalProgress {
  int64_t batch = 0, batches = 0;  // batches done, and in all
  int64_t seen = 0;                // samples done
  double loss = 0, accuracy = 0;   // evaluate: running means over the samples done (predict: 0)
  Tensor outputs;                  // predict: this batch's rows of its result (B, K); evaluate: none
};

// How evaluate() and predict() go over a data set.
struct EvalOptions {
  int64_t batch_size = 256;
  TTA tta = TTA::none;  // evaluate only (predict refuses another)
  // Called before each batch (0-based) and after it (Keras' on_test_batch_begin / _end and
  // on_predict_batch_begin / _end). An exception thrown by either ends the call and propagates.
  std::function<void(int64_t batch)> on_batch_begin;
  std::function<void(const EvalProgress&)> on_batch;
  // Keras' evaluate(sample_weight=): one weight per sample (the data set's order), multiplying its
  // loss, the mean still over the samples (as TrainOptions::sample_weight); the accuracy stays
  // unweighted. Each finite and >= 0. Empty: none. evaluate only.
  std::vector<double> sample_weight;
};

// Where training stands after a step (TrainOptions::on_batch).
struct BatchProgress {
  int64_t epoch = 0, epochs = 0;   // epoch is 0-based
  int64_t batch = 0, batches = 0;  // batches done in this epoch, and per epoch
  int64_t seen = 0;                // samples done in this epoch
  double loss = 0, accuracy = 0;   // running means over the epoch
};

// Stops training once a number measured after each epoch has stopped improving (Keras'
// EarlyStopping). An epoch improves when its value is below the best so far by more than min_delta
// (losses) or above it by more than min_delta (accuracies); after `patience` epochs in a row
// without improvement (0 acts as 1, as in Keras) train() returns. With restore_best_weights, the
// parameters and buffers (BatchNorm statistics) then take the best epoch's values: also when the
// last epoch ran without the patience running out (Keras restores only on a stop), and the
// checkpoint_path file is saved again to hold them. The optimizer's state, epochs_done() and
// steps_done() stay the last epoch's. Each train() call starts a run of its own, counted from its
// first epoch, unless the model's last run did not end (train() left it by an exception: an error,
// Ctrl-C, a failed rank) and has the same options: then it continues that run (its best epoch, the
// epochs waited, the best weights), also from the checkpoint it wrote, so that a job resumed after
// a failure stops and restores as the uninterrupted one would.
struct EarlyStopping {
  std::string monitor = "val_loss";  // val_loss, val_accuracy (need a validation set), loss, accuracy
  int64_t patience = 0;              // >= 0
  double min_delta = 0;              // >= 0
  bool restore_best_weights = true;
  bool operator==(const EarlyStopping&) const = default;
};

// Multiplies the learning rate by `factor` once a number measured after each epoch has stopped
// improving (Keras' ReduceLROnPlateau): after `patience` epochs in a row without an improvement
// (EarlyStopping's rule; 0 acts as 1), then not again for `cooldown` epochs (in which no epoch
// counts as one without improvement). Every step's learning rate is the schedule's (or a
// ParamGroup's own schedule's) times the factor so far, which never takes ModelConfig::lr below
// min_lr. The factor and the rule's state are training state: saved in the checkpoint, so a resumed
// run continues as an uninterrupted one, and kept by a later train() call (even one without this)
// until configure() sets a new recipe.
struct ReduceLrOnPlateau {
  std::string monitor = "val_loss";  // val_loss, val_accuracy (need a validation set), loss, accuracy
  double factor = 0.1;               // 0 < factor < 1
  int64_t patience = 10;             // >= 0
  double min_delta = 1e-4;           // >= 0
  int64_t cooldown = 0;              // >= 0
  double min_lr = 0;                 // >= 0
};

struct TrainOptions {
  int64_t epochs = 1;        // total epochs, > epochs_done() (a resumed model continues up to this)
  data::LoaderOptions data;  // batch size, seed, augmentation, normalisation
  const data::Dataset* validation = nullptr;  // evaluated after each epoch when set
  bool progress = true;                       // progress bar (plain lines when not a terminal)
  std::string checkpoint_path;                // saved after every epoch when set
  int64_t max_steps_per_epoch = 0;            // > 0: cut epochs short (tests, smoke runs)
  // Called after each epoch's validation and checkpoint, and before its first step (epoch 0-based).
  std::function<void(const EpochStats&)> on_epoch;
  std::function<void(int64_t epoch)> on_epoch_begin;
  // Called after every step (Python's progress display and Ctrl-C check). An exception it throws
  // stops training at once and propagates; the checkpoint file keeps the last finished epoch.
  std::function<void(const BatchProgress&)> on_batch;
  // Called before every step, with the epoch (0-based) and the step's batch in it (0-based).
  std::function<void(int64_t epoch, int64_t batch)> on_batch_begin;
  // The validation's EvalOptions hooks: before and after each of its batches, every epoch.
  std::function<void(int64_t batch)> on_validation_batch_begin;
  std::function<void(const EvalProgress&)> on_validation_batch;
  // Keras' class_weight: each training sample's loss times the weight of its class. With class labels,
  // one weight per class (as many as the model's outputs); with binary_cross_entropy's targets, two,
  // for target 0 and target 1, each output's loss weighted t w1 + (1 - t) w0. The mean stays over the
  // samples, not over the weights (as Keras); the accuracy, validation and evaluate() are unweighted.
  // Each weight finite and >= 0. Empty: none.
  std::vector<double> class_weight;
  // Keras' sample_weight: one weight per training sample (the data set's order; shuffling keeps each
  // with its sample), multiplying that sample's loss, times its class's weight with class_weight.
  // Unweighted as class_weight. Each finite and >= 0. Empty: none.
  std::vector<double> sample_weight;
  // Keras' validation_data=(x, y, sample_weight): the validation's EvalOptions::sample_weight, one per
  // sample of `validation` (its val_loss, and what early stopping and ReduceLROnPlateau watch).
  std::vector<double> validation_sample_weight;
  // Data-parallel training (docs/distributed.md): the ranks' communicator; nullptr: dist::world(),
  // which the launcher's environment sets up (aether launch, torchrun, mpirun, srun) and which is
  // nullptr in a world of one. With several ranks: parameters and buffers start as rank 0's; each
  // rank reads its part of every global batch (data.batch_size samples per rank); gradients are
  // averaged over the global batch; the loss and accuracy are the global batch's; buffers (batch-norm
  // statistics, computed per rank) are rank 0's after each epoch; only rank 0 shows progress and
  // writes checkpoint_path. Every rank must call train() with the same options. A communicator on
  // device memory (dist::create_nccl) needs the model on that GPU: each gradient bucket is packed,
  // all-reduced and unpacked there. One given here is used even in a world of one.
  dist::Communicator* communicator = nullptr;
  // Data-parallel: every BatchNorm layer normalises with the statistics of the global batch (every
  // rank's samples), all-reduced inside the forward and backward passes (PyTorch's SyncBatchNorm),
  // instead of its own rank's. No effect on one rank.
  bool sync_batch_norm = false;
  std::optional<EarlyStopping> early_stopping;  // none: every epoch up to `epochs` runs
  std::optional<ReduceLrOnPlateau> reduce_lr_on_plateau;
  // Keras' LearningRateScheduler: called before each epoch's first step (after on_epoch_begin) with
  // the epoch (0-based, from the start of training) and the base learning rate in force
  // (Model::learning_rate(): what it last returned, in this train() or an earlier one or the loaded
  // checkpoint's run; ModelConfig::lr before that). It returns the epoch's base learning rate
  // (finite, > 0; otherwise train() throws before the epoch's first step), which takes
  // ModelConfig::lr's place: every step's learning rate is the schedule's at that step times
  // returned / ModelConfig::lr (with the "constant" schedule: the value returned; param groups keep
  // their lr_scale), times reduce_lr_on_plateau's factor. On several ranks, rank 0's value is used.
  std::function<double(int64_t epoch, double lr)> lr_schedule;
};

class Model {
 public:
  Model();
  Model(Model&&) noexcept;
  Model& operator=(Model&&) noexcept;
  ~Model();

  Model& add(nn::ModulePtr layer);
  // The loss, optimizer and recipe. On a finalized model (a loaded one too) it applies the whole new
  // recipe, as Keras' compile does: param groups, frozen set and a fresh optimizer (its momentum or
  // moments start again, and ReduceLrOnPlateau's factor is 1 again); the weights, epochs and steps
  // done stay. A recipe that does not fit the
  // network throws and changes nothing.
  Model& configure(const ModelConfig& config);
  Model& to(Device device);
  Model& to(const std::string& device);  // "cpu", "cuda", "cuda:1"
  // "float32" (the default), or mixed precision "bfloat16" / "float16" (also "fp32", "bf16",
  // "fp16"): activations and the inputs of conv and matmul in the 16-bit type; parameters, their
  // gradients and the optimizer state in float32 (each parameter cast to 16 bits once per step);
  // BatchNorm, Softmax, the loss and the metrics in float32. float16 trains with dynamic loss
  // scaling (train() skips a step whose gradients overflow and halves the scale). Any time: a
  // loaded model keeps its checkpoint's precision until set. docs/mixed-precision.md.
  std::string precision() const;
  // float16's dynamic loss scale (initially 65536): the factor the loss is multiplied by before
  // backward, and the clean steps in a row after which it doubles (2000); a step whose gradients
  // overflow is skipped and halves it. Both are saved in the checkpoint. skipped_steps(): steps
  // train() skipped so far in this process.
  double loss_scale() const;
  Model& set_loss_scale(double scale, int64_t growth_interval = 2000);
  int64_t skipped_steps() const;
  Model& set_precision(const std::string& precision);
  // Checks the layers against one sample's shape (H, W, C) or (features) and builds the optimizer.
  Model& finalize(const Shape& input_shape);

  // Stops with aether::Error when the training loss, the validation loss or accuracy (evaluate's
  // errors) or the weights to be checkpointed (save's errors) become NaN/Inf; the checkpoint at
  // options.checkpoint_path then still holds the last good epoch.
  History train(const data::Dataset& train, const TrainOptions& options);
  // Keras' `model.stop_training = True`: asks train() to stop after the epoch it is in, whose
  // validation, checkpoint and on_epoch still run (from on_epoch, on_batch or another thread).
  // train() clears the request when it starts. On several ranks, rank 0's request stops every rank
  // after the same epoch (the others' are ignored).
  void request_stop(bool stop = true);
  bool stop_requested() const;
  // Inside train() (while its callbacks run). Then train(), configure(), to() and set_precision()
  // are errors; evaluate(), predict() and save() are not.
  bool is_training() const;
  // The training step train() runs on one batch, recorded and not computed: forward (training mode),
  // loss, backward, gradient clipping, the accuracy and the optimizer's update (which assigns the
  // parameters, state and batch-norm buffers their new lazy values). `tensors` are everything the
  // step realizes at once, each named in `names`: "loss", "accuracy", the buffers, the parameters
  // (named_parameters() names) and the optimizer state ("<parameter>.<slot>"). x is a normalised
  // batch (B, H, W, C) (or (B, features)); labels (B) int64, or targets (B, K) float32 for mse.
  struct Step {
    Tensor loss, accuracy;
    std::vector<Tensor> tensors;
    std::vector<std::string> names;
  };
  Step record_train_step(const Tensor& x, const Tensor& labels, const Tensor& targets = Tensor());
  // One data-parallel step as train() runs it with a communicator (docs/distributed.md), computed:
  // forward, loss, backward, the gradients summed over `comm`'s ranks with this rank's share
  // `weight` of the global batch (1 / world size for equal batches), clipping and the update at the
  // optimizer's current learning rate. Returns the global batch's {loss, accuracy}. Collective:
  // every rank calls it alike. x and labels as for record_train_step, on the model's device.
  std::pair<double, double> train_step(dist::Communicator& comm, const Tensor& x, const Tensor& labels,
                                       double weight);
  // Loss and metrics over a whole data set, in evaluation mode, with the training normalisation.
  // Throws when the data set's images are not the model's input shape (H, W, C) (for a model with
  // flat input: not as many values) or when the outputs, loss or accuracy are not finite.
  // `tta`: test-time augmentation (image input only): the loss and metrics of averaged logits.
  EvalResult evaluate(const data::Dataset& data, int64_t batch_size = 256, TTA tta = TTA::none);
  EvalResult evaluate(const data::Dataset& data, const EvalOptions& options);  // with hooks
  // Class probabilities (N, K) for images (N, ...) already normalised like the training data.
  // Throws for images of another shape, holding NaN/Inf, or outputs that are not finite.
  Tensor predict(const Tensor& images);
  // Probabilities for a data set (normalised with the model's own statistics); checked as above.
  Tensor predict(const data::Dataset& data, int64_t batch_size = 256);
  Tensor predict(const data::Dataset& data, const EvalOptions& options);  // with hooks (tta none)

  // Writes the checkpoint atomically (docs/checkpoint-format.md). Refuses, before touching the file,
  // a parameter, buffer or optimizer slot holding NaN/Inf or a negative variance: the previous file
  // stays as it was.
  void save(const std::string& path);
  // Reads a checkpoint and checks every value it uses: the architecture, configuration, input shape,
  // normalisation (one finite mean and std > 0 per input channel), training state, the optimizer's
  // description, every weight, buffer and optimizer slot (present once, right shape and dtype,
  // finite; nothing unknown). Throws aether::Error "load: <path>: <entry> <what was wrong>"; a
  // failed load leaves the global random generator as it was.
  static Model load(const std::string& path);

  // Keras' get_weights / set_weights: the parameters, then the buffers (BatchNorm's running
  // statistics), in network().named_parameters() then named_buffers() order; get_weights() gives
  // realized copies. set_weights() checks every value before it changes anything: as many as
  // get_weights() gives, each of its weight's shape, floating-point (cast to the weight's dtype),
  // finite, variances >= 0; otherwise it throws aether::Error naming the value and its weight. The
  // optimizer's state stays as it is (Keras too). Frozen parameters take their values as well.
  std::vector<Tensor> get_weights();
  void set_weights(const std::vector<Tensor>& values);
  // Keras' save_weights / load_weights, as a safetensors file (docs/checkpoint-format.md; readable
  // by the safetensors package, PyTorch, ...) of the weights by name: the parameters, then the
  // buffers. save_weights refuses non-finite weights before writing (atomically); load_weights
  // needs every weight once, by name, and nothing else, each checked as set_weights checks it, and
  // changes nothing when one is wrong. Training state stays (a checkpoint is Model::save).
  void save_weights(const std::string& path);
  void load_weights(const std::string& path);
  std::string summary();
  nn::Sequential& network();
  optim::Optimizer* optimizer();
  const ModelConfig& config() const;
  // The base learning rate (the schedule's peak): ModelConfig::lr, or what TrainOptions::lr_schedule
  // last returned. Training state: saved in the checkpoint; configure() sets ModelConfig::lr's again.
  double learning_rate() const;
  int64_t epochs_done() const;
  int64_t steps_done() const;
  const Shape& input_shape() const;
  // Normalisation the model was trained with (saved with it).
  const std::vector<float>& norm_mean() const;
  const std::vector<float>& norm_std() const;
  // Extra metadata saved in the manifest, as the text of a JSON object (the CLI keeps the preset
  // and data set names, epochs and loader settings there); "{}" by default. set_info throws
  // aether::Error, and keeps the old value, unless `json_object` is a JSON object.
  std::string info() const;
  void set_info(const std::string& json_object);

 private:
  struct Impl;
  class TrainLoop;  // train()'s epoch loop (src/model/model_train.cpp)
  std::unique_ptr<Impl> impl_;
};

}  // namespace aether
