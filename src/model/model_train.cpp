// src/model/model_train.cpp - Model::train: the epoch loop (model.cpp builds and configures the
// model and records a step; model_eval.cpp evaluates; model_checkpoint.cpp saves and loads).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "aether/backend/cuda.h"
#include "aether/dist/communicator.h"
#include "aether/io/file.h"
#include "aether/model/model.h"
#include "data_parallel.h"
#include "early_stopping.h"
#include "lr_plateau.h"
#include "model_impl.h"
#include "progress.h"

namespace aether {
using namespace model_internal;

namespace {

// The loader's options: each rank reads its part of every global batch.
data::LoaderOptions rank_loader_options(const TrainOptions& o, const dist::Communicator* comm) {
  data::LoaderOptions lo = o.data;
  if (comm != nullptr) {
    lo.rank = comm->rank();
    lo.world_size = comm->world_size();
  }
  return lo;
}

}  // namespace

// One call of Model::train: what it sets up before the first epoch (the constructor), then each
// epoch's beginning, steps and end. `comm`: the ranks' communicator, nullptr for one process.
class Model::TrainLoop {
 public:
  // What train() checks of its arguments before anything changes.
  static void check(const Impl& m, const data::Dataset& train_set, const TrainOptions& o);
  // ... of them, class_weight and sample_weight: their counts, each finite and >= 0.
  static void check_loss_weights(const Impl& m, const data::Dataset& train_set, const TrainOptions& o);
  TrainLoop(Model& model, Impl& m, const data::Dataset& train_set, const TrainOptions& o,
            dist::Communicator* comm);
  History run();

 private:
  // The epoch's trained parameters, lookahead, data order, on_epoch_begin and lr_schedule. Returns
  // what the schedule's learning rate is multiplied by in the epoch's steps.
  double begin_epoch(int64_t epoch);
  // One step on batch `b`; returns its (global batch's) loss and accuracy.
  std::pair<double, double> step(const data::Batch& b, double lr_scale);
  // The epoch's steps (per_epoch_ at most), then (several ranks) rank 0's buffers on every rank
  // and a check that the ranks agree; the epoch's mean loss and accuracy.
  EpochStats run_steps(int64_t epoch, double lr_scale, ProgressBar& bar);
  // After the steps: validation, the learning-rate reduction, the checkpoint, on_epoch, early
  // stopping and a stop request. True when training stops after this epoch.
  bool end_epoch(EpochStats& st, ProgressBar& bar);
  // Early stopping's run ends: the best epoch's weights restored (and saved), and a checkpoint
  // that does not say the run ended yet (a stop request) saved again.
  void end_early_stopping();

  Model& model_;
  Impl& m_;
  const TrainOptions& o_;
  dist::Communicator* comm_;
  const bool root_;          // rank 0 (or one process): shows progress and saves
  data::DataLoader loader_;  // checks the options
  int64_t per_epoch_ = 0;    // steps per epoch
  std::unique_ptr<optim::LRSchedule> schedule_;
  // ParamGroup::schedule_over_train_epochs: the same schedule over the group's own epochs.
  std::vector<std::pair<size_t, std::unique_ptr<optim::LRSchedule>>> own_schedules_;
  std::unique_ptr<cuda::GraphStep> graph_step_;
  std::optional<EarlyStopper> stopper_;
  std::optional<LrReducer> reducer_;
  std::optional<SyncBatchNorm> sync_bn_;  // its layers synchronized until train() returns or throws
  History history_;
};

void Model::TrainLoop::check(const Impl& m, const data::Dataset& train_set, const TrainOptions& o) {
  m.require_finalized("train");
  m.require_not_training("train");
  AETHER_CHECK(o.epochs >= 1, "train", "epochs must be >= 1, got ", o.epochs);
  // epochs counts from the start of training (a loaded model continues with its next epoch): asking
  // for no more than are done would return without a step.
  AETHER_CHECK(o.epochs > m.epochs_done, "train", "epochs is ", o.epochs, " and the model has trained ",
               m.epochs_done,
               " already: epochs counts from the start of training, so this would train nothing ",
               "(pass more than ", m.epochs_done, ")");
  AETHER_CHECK(o.max_steps_per_epoch >= 0, "train",
               "max_steps_per_epoch must be >= 0 (0: whole epochs), got ", o.max_steps_per_epoch);
  m.check_data(train_set, "train");
  // Crops and flips move pixels within an image: flat samples (a model taking (features,)) have none.
  AETHER_CHECK(m.input_shape.size() == 3 || (o.data.crop_padding == 0 && !o.data.hflip), "train",
               "crop_padding and hflip need image input (H, W, C), the model takes ",
               to_string(m.input_shape), " (got crop_padding ", o.data.crop_padding, ", hflip ",
               o.data.hflip ? "on" : "off", ")");
  if (o.validation) m.check_data(*o.validation, "train (validation)");
  check_loss_weights(m, train_set, o);
}

void Model::TrainLoop::check_loss_weights(const Impl& m, const data::Dataset& train_set,
                                          const TrainOptions& o) {
  if (!o.class_weight.empty()) {
    const bool binary_targets = train_set.has_targets() && m.config.loss == "binary_cross_entropy";
    AETHER_CHECK(!train_set.has_targets() || binary_targets, "train", "class_weight needs class labels or ",
                 "the binary_cross_entropy loss's targets; data set '", train_set.name,
                 "' has regression targets (loss ", m.config.loss, ")");
    const size_t want = binary_targets ? 2 : size_t(m.outputs);
    AETHER_CHECK(o.class_weight.size() == want, "train", "class_weight has ", o.class_weight.size(),
                 " weights, expected ", want,
                 binary_targets ? " (for target 0 and target 1)" : " (one per class: the model's outputs)");
    for (size_t i = 0; i < o.class_weight.size(); ++i)
      AETHER_CHECK(std::isfinite(o.class_weight[i]) && o.class_weight[i] >= 0, "train", "class_weight[", i,
                   "] is ", o.class_weight[i], "; a weight must be finite and >= 0");
  }
  Impl::check_sample_weight(o.sample_weight, train_set, "train", "sample_weight");
  AETHER_CHECK(o.validation_sample_weight.empty() || o.validation, "train",
               "validation_sample_weight is given without a validation data set");
  if (o.validation)
    Impl::check_sample_weight(o.validation_sample_weight, *o.validation, "train", "validation_sample_weight");
}

Model::TrainLoop::TrainLoop(Model& model, Impl& m, const data::Dataset& train_set, const TrainOptions& o,
                            dist::Communicator* comm)
    : model_(model),
      m_(m),
      o_(o),
      comm_(comm),
      root_(comm == nullptr || comm->rank() == 0),
      loader_(train_set, rank_loader_options(o, comm)) {
  if (train_set.has_targets() && m.config.loss == "mse" && m.config.regression_precision == 0) {
    double sum = 0, sq = 0;  // std of every target value, in double
    for (float t : train_set.targets) sum += t;
    const double n = double(std::max<size_t>(train_set.targets.size(), 1)), mean = sum / n;
    for (float t : train_set.targets) sq += (t - mean) * (t - mean);
    const double sd = std::sqrt(sq / n);
    m.config.regression_precision = sd > 0 ? sd / 250 : 1e-6;
  }
  // The normalisation used, one value per channel (the loader's default for empty lists: 0 and 1).
  m.mean = o.data.mean.empty() ? std::vector<float>(size_t(train_set.c), 0.0f) : o.data.mean;
  m.std = o.data.std.empty() ? std::vector<float>(size_t(train_set.c), 1.0f) : o.data.std;
  m.loader_state = {{"seed", o.data.seed},
                    {"batch_size", o.data.batch_size},
                    {"crop_padding", o.data.crop_padding},
                    {"hflip", o.data.hflip},
                    {"shuffle", o.data.shuffle},
                    {"drop_last", o.data.drop_last},
                    {"alternate_flips", o.data.alternate_flips},
                    {"crop_reflect", o.data.crop_reflect}};
  per_epoch_ = loader_.num_batches();
  if (o.max_steps_per_epoch > 0) per_epoch_ = std::min(per_epoch_, o.max_steps_per_epoch);
  schedule_ = m.schedule(o.epochs * per_epoch_);
  for (const auto& [i, epochs] : m.own_schedule)
    own_schedules_.emplace_back(i, m.schedule(epochs * per_epoch_));
  // AETHER_CUDA_GRAPHS=1 on a GPU: each step's kernels (the one realize of opt->step) are captured
  // into a CUDA graph and replayed (see cuda::GraphStep); the graph building before it, which may
  // read values on the host (label checks), stays outside the capture.
  if (m.device.type == DeviceType::cuda && cuda::graphs_requested() && comm == nullptr)
    graph_step_ = std::make_unique<cuda::GraphStep>(m.device.index);
  // Early stopping continues the model's run when it did not end and has the same options.
  const auto& run = m.early_stopping_run;
  const bool continues = o.early_stopping && run && !run->ended && run->options == *o.early_stopping;
  if (comm != nullptr) {  // the same job on every rank, from rank 0's parameters and buffers
    const int64_t stopping = o.early_stopping ? o.early_stopping->patience + 1 : 0;  // 0: none
    const int64_t reducing = o.reduce_lr_on_plateau ? o.reduce_lr_on_plateau->patience + 1 : 0;
    check_same_values(*comm, m.device,
                      {{"a training set of size", train_set.n},
                       {"batch size", o.data.batch_size},
                       {"epochs", o.epochs},
                       {"steps per epoch", per_epoch_},
                       {"seed", int64_t(o.data.seed)},
                       {"epochs done", m.epochs_done},
                       {"steps done", m.steps_done},
                       {"parameters", int64_t(m.opt->params().size())},
                       {"sync_batch_norm", int64_t(o.sync_batch_norm)},
                       {"early_stopping patience + 1", stopping},
                       {"early_stopping continues a run", int64_t(continues)},
                       {"reduce_lr_on_plateau patience + 1", reducing},
                       {"lr_schedule", int64_t(bool(o.lr_schedule))}});
    broadcast_from_rank0(*comm, parameters_and_buffers(*m.net));
  }
  // Each checks its options before an epoch is spent.
  if (o.early_stopping)
    stopper_.emplace(*o.early_stopping, o.validation != nullptr, continues ? &*run : nullptr);
  if (o.reduce_lr_on_plateau)
    reducer_.emplace(*o.reduce_lr_on_plateau, o.validation != nullptr, m.config.lr, m.lr_plateau);
  if (comm != nullptr && o.sync_batch_norm) sync_bn_.emplace(*comm, m.device, *m.net);
}

History Model::TrainLoop::run() {
  m_.stop_requested = false;  // as Keras' fit() clears model.stop_training
  m_.training = true;         // until train() returns or throws
  struct TrainingFlag {
    Impl& m;
    ~TrainingFlag() {
      m.training = false;
      m.class_weight = Tensor();  // train()'s alone
    }
  } training_flag{m_};
  if (!o_.class_weight.empty()) {
    const std::vector<float> w(o_.class_weight.begin(), o_.class_weight.end());
    m_.class_weight = Tensor::from_vector<float>(w, {int64_t(w.size())}).to(m_.device).realize();
  }
  m_.early_stopping_run.reset();  // this run's, from here on
  if (stopper_) m_.early_stopping_run = stopper_->run(false);
  for (int64_t epoch = m_.epochs_done; epoch < o_.epochs; ++epoch) {
    const double lr_scale = begin_epoch(epoch);
    ProgressBar bar(epoch, o_.epochs, per_epoch_, o_.progress && root_);
    EpochStats st = run_steps(epoch, lr_scale, bar);
    if (end_epoch(st, bar)) break;
  }
  if (stopper_) end_early_stopping();
  if (graph_step_ && !graph_step_->fallback_reason().empty())
    std::fprintf(stderr, "aether: CUDA graphs were not used: %s\n", graph_step_->fallback_reason().c_str());
  return history_;
}

double Model::TrainLoop::begin_epoch(int64_t epoch) {
  m_.net->train();
  m_.set_trained_for_epoch(epoch);
  const auto& ps = m_.opt->params();
  AETHER_CHECK(std::any_of(ps.begin(), ps.end(), [](const Tensor& p) { return p.requires_grad(); }), "train",
               "epoch ", epoch + 1,
               " would train no parameter: every one is frozen (ParamGroup::frozen) or past ",
               "its ParamGroup::train_epochs; train fewer epochs or leave a parameter to train");
  // Lookahead from its start epoch (the slow weights begin at its first multiple of every).
  m_.opt->pause_lookahead(epoch < m_.config.lookahead_start_epoch);
  loader_.begin_epoch(epoch);
  if (o_.on_epoch_begin) o_.on_epoch_begin(epoch);
  if (o_.lr_schedule) {  // rank 0's value, checked alike on every rank
    double lr = o_.lr_schedule(epoch, m_.base_lr());
    if (comm_ != nullptr) lr = broadcast_number(*comm_, m_.device, lr);
    AETHER_CHECK(std::isfinite(lr) && lr > 0, "train", "lr_schedule returned ", lr, " for epoch ", epoch + 1,
                 "; a learning rate must be finite and > 0");
    m_.scheduled_lr = lr;
  }
  // Each step: the schedule's learning rate x (the base learning rate / ModelConfig::lr) x
  // reduce_lr_on_plateau's factor (all 1 unless those are used).
  return m_.base_lr() / m_.config.lr * m_.lr_plateau.factor;
}

std::pair<double, double> Model::TrainLoop::step(const data::Batch& b, double lr_scale) {
  m_.opt->set_lr(schedule_->lr(m_.steps_done) * lr_scale);
  for (const auto& [i, own] : own_schedules_) m_.opt->set_param_lr(i, own->lr(m_.steps_done) * lr_scale);
  if (m_.config.lookahead_every > 0) {  // alpha = 1 - decay (t / T)^power, t counting this step
    const double t = double(m_.steps_done + 1) / double(std::max<int64_t>(o_.epochs * per_epoch_, 1));
    m_.opt->set_lookahead_alpha(std::clamp(
        1.0 - m_.config.lookahead_decay * std::pow(std::min(t, 1.0), m_.config.lookahead_power), 0.0, 1.0));
  }
  Tensor x = b.images.to(m_.device);  // (B, H, W, C): batches come from the loader in host memory
  const Tensor labels = b.labels.defined() ? b.labels.to(m_.device) : Tensor();     // (B) int64
  const Tensor targets = b.targets.defined() ? b.targets.to(m_.device) : Tensor();  // (B, K)
  const Tensor weights = m_.batch_weights(o_.sample_weight, b);                     // (B) or undefined
  if (m_.input_shape.size() == 1) x = x.flatten(1);
  double loss = 0, accuracy = 0;
  if (comm_ != nullptr) {  // averaged over the ranks; the loss and accuracy are the global batch's
    dist::fault_point(comm_->rank(), m_.steps_done);
    m_.run_data_parallel_step(*comm_, x, labels, targets, weights, double(b.size) / double(b.global_size),
                              &loss, &accuracy);
  } else {
    Tensor l, a;
    if (m_.scales_loss()) {  // float16: forward and backward, then the update unless it overflowed
      m_.run_scaled_step(x, labels, targets, weights, &l, &a);
    } else {  // parameters, optimizer state, buffers, loss and accuracy: one realize
      const Model::Step s = m_.record_step(x, labels, targets, weights);
      if (graph_step_)
        graph_step_->run([&] { realize(s.tensors); });
      else
        realize(s.tensors);
      l = s.loss;
      a = s.accuracy;
    }
    loss = l.item<double>();
    accuracy = a.item<double>();
  }
  m_.opt->zero_grad();
  ++m_.steps_done;
  return {loss, accuracy};
}

EpochStats Model::TrainLoop::run_steps(int64_t epoch, double lr_scale, ProgressBar& bar) {
  const double comm_wait_before = m_.comm_wait;
  double loss_sum = 0, correct_sum = 0;
  int64_t seen = 0, batches = 0;
  while (batches < per_epoch_) {
    auto b = loader_.next();
    if (!b) break;
    if (o_.on_batch_begin) o_.on_batch_begin(epoch, batches);
    const auto [loss, accuracy] = step(*b, lr_scale);
    ++batches;
    const int64_t n = comm_ != nullptr ? b->global_size : b->size;  // images of the step, every rank's
    seen += n;
    loss_sum += loss * double(n);
    // Class labels: the accuracy is a float32 mean of n hits, so its count is the nearest integer
    // (history's accuracy 0.3 instead of 0.30000001192). Targets: a mean over n * outputs values.
    correct_sum += b->labels.defined() ? std::round(accuracy * double(n)) : accuracy * double(n);
    AETHER_CHECK_RUNTIME(std::isfinite(loss_sum), "train", "the loss became ", loss, " at step ",
                         m_.steps_done, " (epoch ", epoch + 1, "); try a lower learning rate");
    bar.update(batches, seen, loss_sum / double(seen), correct_sum / double(seen));
    if (o_.on_batch)
      o_.on_batch(
          {epoch, o_.epochs, batches, per_epoch_, seen, loss_sum / double(seen), correct_sum / double(seen)});
  }
  m_.opt->lookahead_finish();  // every epoch ends on the slow weights (once they exist)
  if (comm_ != nullptr) {      // buffers (per-rank batch-norm statistics) become rank 0's; ranks agree
    // So do lookahead's slow values of them (state past the trained parameters' indices).
    nn::NamedTensors shared = m_.net->named_buffers();
    for (auto& [name, t] : m_.opt->named_state())
      if (std::stoul(name.substr(0, name.find('.'))) >= m_.opt->params().size()) shared.emplace_back(name, t);
    broadcast_from_rank0(*comm_, shared);
    check_ranks_agree(*comm_, m_.device, parameters_and_buffers(*m_.net),
                      detail::cat("after epoch ", epoch + 1));
  }
  EpochStats st;
  st.epoch = epoch;
  st.train_loss = seen ? loss_sum / double(seen) : 0;
  st.train_accuracy = seen ? correct_sum / double(seen) : 0;
  st.lr = m_.opt->lr();
  bar.stop();  // the epoch's time and rate: its training, not the validation after it
  st.seconds = bar.seconds();
  st.images_per_second = st.seconds > 0 ? double(seen) / st.seconds : 0;
  st.comm_wait_seconds = m_.comm_wait - comm_wait_before;
  return st;
}

bool Model::TrainLoop::end_epoch(EpochStats& st, ProgressBar& bar) {
  const int64_t epoch = st.epoch;
  m_.epochs_done = epoch + 1;
  std::string tail;
  // Nothing non-finite reaches the checkpoint: a failing validation (NaN/Inf outputs, loss or
  // accuracy) or weights that save() refuses stop training; the last good checkpoint stays.
  const std::string& path = o_.checkpoint_path;
  if (o_.validation) {
    EvalResult r;
    try {
      EvalOptions eo;
      eo.batch_size = std::max<int64_t>(o_.data.batch_size, 256);
      eo.on_batch_begin = o_.on_validation_batch_begin;
      eo.on_batch = o_.on_validation_batch;
      eo.sample_weight = o_.validation_sample_weight;
      r = model_.evaluate(*o_.validation, eo);
    } catch (const Error& e) {
      std::error_code ec;
      const std::string kept =
          path.empty() ? std::string()
                       : "; not writing " + path +
                             (std::filesystem::exists(path, ec) ? ", the previous checkpoint is kept" : "");
      throw Error(detail::cat("train: epoch ", epoch + 1, ": validation on '", o_.validation->name,
                              "' failed: ", e.what(), kept),
                  e.kind());
    }
    st.val_loss = r.loss;
    st.val_accuracy = r.accuracy;
    char buf[96];
    std::snprintf(buf, sizeof buf, "val_loss %.4f  val_acc %.2f%%", r.loss, 100 * r.accuracy);
    tail = buf;
  }
  bar.finish(tail);
  // Early stopping and the learning-rate reduction decide on rank 0's numbers (data_parallel.h).
  if ((stopper_ || reducer_) && comm_ != nullptr) broadcast_epoch_numbers(*comm_, m_.device, st);
  st.lr_reduced = reducer_ && reducer_->update(st);
  if (reducer_) m_.lr_plateau = reducer_->state();  // before the checkpoint, which holds it
  if (st.lr_reduced && o_.progress && root_)
    std::printf("reduce_lr_on_plateau after epoch %lld: %s\n", static_cast<long long>(epoch + 1),
                reducer_->reduced_text().c_str());
  // Early stopping decides before the checkpoint, which holds its run (resumed after a failure).
  const bool patience_out = stopper_ && stopper_->update(st, parameters_and_buffers(*m_.net));
  if (stopper_) m_.early_stopping_run = stopper_->run(patience_out || epoch + 1 == o_.epochs);
  history_.epochs.push_back(st);
  if (!path.empty() && root_) {
    try {
      model_.save(path);
    } catch (const Error& e) {
      throw Error(detail::cat("train: epoch ", epoch + 1, ": ", e.what()), e.kind());
    }
  }
  if (o_.on_epoch) o_.on_epoch(st);
  if (patience_out) {
    history_.stopped_early = true;
    if (o_.progress && root_)
      std::printf("early stopping after epoch %lld of %lld: %s\n", static_cast<long long>(epoch + 1),
                  static_cast<long long>(o_.epochs), stopper_->stop_reason().c_str());
    return true;
  }
  // request_stop(): rank 0's request decides for every rank (one collective, every epoch).
  const bool stop = comm_ != nullptr ? broadcast_number(*comm_, m_.device, m_.stop_requested ? 1 : 0) != 0
                                     : bool(m_.stop_requested);
  if (stop && epoch + 1 < o_.epochs) {
    history_.stopped_on_request = true;
    if (o_.progress && root_)
      std::printf("training stopped on request after epoch %lld of %lld\n", static_cast<long long>(epoch + 1),
                  static_cast<long long>(o_.epochs));
    return true;
  }
  return false;
}

void Model::TrainLoop::end_early_stopping() {
  const bool recorded = m_.early_stopping_run->ended;  // in the last checkpoint
  m_.early_stopping_run->ended = true;
  m_.early_stopping_run->best.clear();  // (a run that ended is not continued)
  history_.best_epoch = stopper_->best_epoch();
  history_.best = stopper_->best();
  history_.restored_best = stopper_->restore(parameters_and_buffers(*m_.net));
  if (history_.restored_best && comm_ != nullptr)
    check_ranks_agree(*comm_, m_.device, parameters_and_buffers(*m_.net), "after restoring the best epoch");
  if (history_.restored_best && o_.progress && root_)
    std::printf("restored the weights of the best epoch: %s\n", stopper_->best_text().c_str());
  if ((history_.restored_best || !recorded) && !o_.checkpoint_path.empty() && root_)
    model_.save(o_.checkpoint_path);
}

History Model::train(const data::Dataset& train_set, const TrainOptions& o) {
  auto& m = *impl_;
  TrainLoop::check(m, train_set, o);
  // Several ranks: each reads its part of every global batch; rank 0 shows progress and saves.
  // (A communicator given is used even in a world of one: e.g. NCCL's path checked on one GPU.)
  dist::Communicator* comm = o.communicator != nullptr ? o.communicator : dist::world();
  check_communicator_device(comm, m.device, "train");
  // The checkpoint's file must be writable before an epoch is spent (it is saved after each).
  if (!o.checkpoint_path.empty() && (comm == nullptr || comm->rank() == 0))
    check_writable_file(o.checkpoint_path, "train", "checkpoint");
  return TrainLoop(*this, m, train_set, o, comm).run();
}

}  // namespace aether
