// Model: composition, configuration, the training loop, evaluation, prediction, save and load.
#include "aether/model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

#include "aether/backend/cuda.h"
#include "aether/core/random.h"
#include "aether/io/checkpoint.h"
#include "aether/ops/nn.h"
#include "progress.h"

namespace aether {

// ---- configuration <-> JSON ---------------------------------------------------------------------------
namespace {
nlohmann::json config_to_json(const ModelConfig& c) {
  return {{"loss", c.loss},
          {"label_smoothing", c.label_smoothing},
          {"optimizer", c.optimizer},
          {"lr", c.lr},
          {"momentum", c.momentum},
          {"nesterov", c.nesterov},
          {"weight_decay", c.weight_decay},
          {"beta1", c.beta1},
          {"beta2", c.beta2},
          {"eps", c.eps},
          {"schedule", c.schedule},
          {"warmup_fraction", c.warmup_fraction},
          {"metrics", c.metrics},
          {"clip_grad_norm", c.clip_grad_norm}};
}
ModelConfig config_from_json(const nlohmann::json& j) {
  ModelConfig c;
  c.loss = j.at("loss");
  c.label_smoothing = j.at("label_smoothing");
  c.optimizer = j.at("optimizer");
  c.lr = j.at("lr");
  c.momentum = j.at("momentum");
  c.nesterov = j.at("nesterov");
  c.weight_decay = j.at("weight_decay");
  c.beta1 = j.at("beta1");
  c.beta2 = j.at("beta2");
  c.eps = j.at("eps");
  c.schedule = j.at("schedule");
  c.warmup_fraction = j.at("warmup_fraction");
  c.metrics = j.at("metrics").get<std::vector<std::string>>();
  c.clip_grad_norm = j.at("clip_grad_norm");
  return c;
}
void check_config(const ModelConfig& c) {
  AETHER_CHECK(c.loss == "cross_entropy" || c.loss == "categorical_cross_entropy" || c.loss == "mse", "configure",
               "unknown loss '", c.loss, "' (expected cross_entropy, categorical_cross_entropy or mse)");
  AETHER_CHECK(c.optimizer == "sgd" || c.optimizer == "adam" || c.optimizer == "adamw", "configure",
               "unknown optimizer '", c.optimizer, "' (expected sgd, adam or adamw)");
  AETHER_CHECK(c.schedule == "constant" || c.schedule == "one_cycle" || c.schedule == "warmup_linear" ||
                   c.schedule == "cosine" || c.schedule == "step",
               "configure", "unknown schedule '", c.schedule,
               "' (expected constant, one_cycle, warmup_linear, cosine or step)");
  for (const auto& m : c.metrics)
    AETHER_CHECK(m == "accuracy" || m == "top5", "configure", "unknown metric '", m, "' (expected accuracy or top5)");
  AETHER_CHECK(c.lr > 0 && std::isfinite(c.lr), "configure", "learning rate must be > 0, got ", c.lr);
  AETHER_CHECK(c.label_smoothing >= 0 && c.label_smoothing < 1, "configure", "label_smoothing must be in [0, 1)");
  AETHER_CHECK(c.warmup_fraction > 0 && c.warmup_fraction < 1, "configure", "warmup_fraction must be in (0, 1)");
  AETHER_CHECK(c.momentum >= 0 && std::isfinite(c.momentum), "configure",
               "momentum must be finite and >= 0, got ", c.momentum);
  AETHER_CHECK(c.weight_decay >= 0 && std::isfinite(c.weight_decay), "configure",
               "weight_decay must be finite and >= 0, got ", c.weight_decay);
  AETHER_CHECK(c.beta1 >= 0 && c.beta1 < 1 && c.beta2 >= 0 && c.beta2 < 1, "configure",
               "beta1 and beta2 must be in [0, 1), got ", c.beta1, " and ", c.beta2);
  AETHER_CHECK(c.eps > 0 && std::isfinite(c.eps), "configure", "eps must be finite and > 0, got ", c.eps);
  AETHER_CHECK(c.clip_grad_norm >= 0 && std::isfinite(c.clip_grad_norm), "configure",
               "clip_grad_norm must be finite and >= 0 (0: no clipping), got ", c.clip_grad_norm);
}

// "NaN", "Inf" or "-Inf": the first value of a float tensor that is not finite; "" when all are.
template <typename T>
std::string non_finite_in(const std::vector<T>& values) {
  for (T v : values)
    if (!std::isfinite(v)) return std::isnan(v) ? "NaN" : v > 0 ? "Inf" : "-Inf";
  return "";
}
std::string non_finite(const Tensor& t) {
  if (!is_float(t.dtype()) || t.numel() == 0) return "";
  // float32 (nearly everything) is read as it is, without a copy twice its size.
  return t.dtype() == DType::float32 ? non_finite_in(t.to_vector<float>())
                                     : non_finite_in(t.to_vector<double>());
}
// The first negative value of a float tensor, or 0 when there is none (variances must be >= 0).
double first_negative(const Tensor& t) {
  if (!is_float(t.dtype())) return 0;
  for (double v : t.to_vector<double>())
    if (v < 0) return v;
  return 0;
}
bool ends_with(const std::string& s, const std::string& tail) {
  return s.size() >= tail.size() && s.compare(s.size() - tail.size(), tail.size(), tail) == 0;
}
// State slots that must hold values >= 0 (a negative variance gives NaN outputs).
bool non_negative_entry(const std::string& name) {
  return ends_with(name, ".running_var") || ends_with(name, ".exp_avg_sq");
}

// The optimizer state slots of each parameter once the optimizer has taken a step.
std::vector<std::string> optimizer_slots(const ModelConfig& c) {
  if (c.optimizer == "sgd")
    return c.momentum != 0 ? std::vector<std::string>{"momentum"} : std::vector<std::string>{};
  return {"exp_avg", "exp_avg_sq"};
}

// The memory layouts written to the manifest ("layouts"); a file stating other ones is rejected.
nlohmann::json layouts_json() {
  return {
      {"activations", "NHWC"}, {"conv_weight", "OHWI (O, KH, KW, C/groups)"}, {"linear_weight", "(out, in)"}};
}
}  // namespace

struct Model::Impl {
  std::shared_ptr<nn::Sequential> net = std::make_shared<nn::Sequential>();
  ModelConfig config;
  bool configured = false;
  Device device = Device::cpu();
  std::string precision = "float32";
  Shape input_shape;
  bool finalized = false;
  std::unique_ptr<optim::Optimizer> opt;
  int64_t epochs_done = 0, steps_done = 0;
  std::vector<float> mean, std;
  nlohmann::json info = nlohmann::json::object();
  nlohmann::json loader_state = nlohmann::json::object();  // the training loader's options (resume checks)

  void require_finalized(const char* op) const {
    AETHER_CHECK(finalized, op, "call configure() and finalize(input_shape) first");
  }
  Tensor loss(const Tensor& out, const Tensor& labels) const {
    if (config.loss == "cross_entropy") return cross_entropy(out, labels, config.label_smoothing);
    const Tensor target = one_hot(labels, out.shape().back(), out.dtype());
    if (config.loss == "categorical_cross_entropy") return categorical_cross_entropy(out, target);
    return mse_loss(out, target);
  }
  Tensor probabilities(const Tensor& out) const {
    return config.loss == "cross_entropy" ? softmax(out, -1) : out;
  }
  std::unique_ptr<optim::LRSchedule> schedule(int64_t total_steps) const {
    const auto& c = config;
    const int64_t total = std::max<int64_t>(total_steps, 2);
    if (c.schedule == "one_cycle") return std::make_unique<optim::OneCycleLR>(c.lr, total, c.warmup_fraction);
    if (c.schedule == "warmup_linear")
      return std::make_unique<optim::WarmupLinearLR>(c.lr, int64_t(c.warmup_fraction * double(total)), total, 0.0);
    if (c.schedule == "cosine") return std::make_unique<optim::CosineLR>(c.lr, total);
    if (c.schedule == "step") return std::make_unique<optim::StepLR>(c.lr, std::max<int64_t>(total / 3, 1), 0.1);
    return std::make_unique<optim::ConstantLR>(c.lr);
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
  // One sample of `d` must have the model's input shape (H, W, C), or as many values when the
  // model takes flat input.
  void check_data(const data::Dataset& d, const char* op) const {
    const Shape sample{d.h, d.w, d.c};
    AETHER_CHECK(
        sample == input_shape || (input_shape.size() == 1 && Shape({d.h * d.w * d.c}) == input_shape), op,
        "data set '", d.name, "' has images (", d.h, ", ", d.w, ", ", d.c, "), the model expects ",
        to_string(input_shape));
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
    AETHER_CHECK(x.shape() == want, op, "expected input of shape (N, ", to_string(input_shape).substr(1), ", got ",
                 to_string(x.shape()));
  }
};

Model::Model() : impl_(std::make_unique<Impl>()) {}
Model::Model(Model&&) noexcept = default;
Model& Model::operator=(Model&&) noexcept = default;
Model::~Model() = default;

Model& Model::add(nn::ModulePtr layer) {
  AETHER_CHECK(!impl_->finalized, "Model::add", "the model is finalized; add layers before finalize()");
  impl_->net->add(std::move(layer));
  return *this;
}

Model& Model::configure(const ModelConfig& config) {
  check_config(config);
  impl_->config = config;
  impl_->configured = true;
  return *this;
}

Model& Model::to(Device device) {
  impl_->net->to(device);  // throws a clear error for a device this build lacks
  if (impl_->opt)  // the optimizer's state (momentum, Adam moments) moves with the parameters
    for (auto& [name, t] : impl_->opt->named_state())
      if (t->device() != device) *t = t->to(device);
  impl_->device = device;
  return *this;
}
Model& Model::to(const std::string& device) { return to(Device::parse(device)); }

Model& Model::set_precision(const std::string& precision) {
  AETHER_CHECK(precision == "float32" || precision == "fp32", "set_precision", "precision '", precision,
               "' is not yet supported (mixed float16/bfloat16 training arrives with the mixed-precision issue); "
               "use float32");
  impl_->precision = "float32";
  return *this;
}

Model& Model::finalize(const Shape& input_shape) {
  auto& m = *impl_;
  AETHER_CHECK(m.configured, "finalize", "call configure() before finalize()");
  AETHER_CHECK(m.net->size() > 0, "finalize", "the model has no layers");
  check_shape(input_shape, "finalize");
  {  // Build the forward graph on a lazy batch of 2: shape errors surface here, nothing is computed.
    // Evaluation mode: in training mode batch norm would update its running statistics and dropout
    // would draw from the global generator (changing every later random number).
    NoGradGuard no_grad;
    nn::EvalModeGuard eval_mode(*m.net);
    Shape s = input_shape;
    s.insert(s.begin(), 2);
    const Tensor out = m.net->forward(Tensor::zeros(s, DType::float32, m.device));
    AETHER_CHECK(out.ndim() == 2, "finalize", "the last layer must give (N, classes), got ", to_string(out.shape()));
  }
  m.input_shape = input_shape;
  auto params = m.net->parameters();
  const auto& c = m.config;
  if (c.optimizer == "sgd") {
    m.opt = std::make_unique<optim::SGD>(params, optim::SGDOptions{c.lr, c.momentum, 0, c.nesterov, c.weight_decay});
  } else {
    m.opt = std::make_unique<optim::Adam>(params, optim::AdamOptions{c.lr, c.beta1, c.beta2, c.eps, c.weight_decay},
                                          c.optimizer == "adamw");
  }
  m.finalized = true;
  return *this;
}

History Model::train(const data::Dataset& train_set, const TrainOptions& o) {
  auto& m = *impl_;
  m.require_finalized("train");
  AETHER_CHECK(o.epochs >= 1, "train", "epochs must be >= 1, got ", o.epochs);
  m.check_data(train_set, "train");
  if (o.validation) m.check_data(*o.validation, "train (validation)");
  data::DataLoader loader(train_set, o.data);  // checks the options (normalisation sizes, ...)
  // The normalisation used, one value per channel (the loader's default for empty lists: 0 and 1).
  m.mean = o.data.mean.empty() ? std::vector<float>(size_t(train_set.c), 0.0f) : o.data.mean;
  m.std = o.data.std.empty() ? std::vector<float>(size_t(train_set.c), 1.0f) : o.data.std;
  m.loader_state = {{"seed", o.data.seed}, {"batch_size", o.data.batch_size}, {"crop_padding", o.data.crop_padding},
                    {"hflip", o.data.hflip}, {"shuffle", o.data.shuffle}, {"drop_last", o.data.drop_last}};
  int64_t per_epoch = loader.num_batches();
  if (o.max_steps_per_epoch > 0) per_epoch = std::min(per_epoch, o.max_steps_per_epoch);
  const auto schedule = m.schedule(o.epochs * per_epoch);
  History history;
  // AETHER_CUDA_GRAPHS=1 on a GPU: each step's kernels (the one realize of opt->step) are captured
  // into a CUDA graph and replayed (see cuda::GraphStep); the graph building before it, which may
  // read values on the host (label checks), stays outside the capture.
  std::unique_ptr<cuda::GraphStep> graph_step;
  if (m.device.type == DeviceType::cuda && cuda::graphs_requested())
    graph_step = std::make_unique<cuda::GraphStep>(m.device.index);
  for (int64_t epoch = m.epochs_done; epoch < o.epochs; ++epoch) {
    m.net->train();
    loader.begin_epoch(epoch);
    ProgressBar bar(epoch, o.epochs, per_epoch, o.progress);
    double loss_sum = 0, correct_sum = 0;
    int64_t seen = 0, batches = 0;
    while (batches < per_epoch) {
      auto b = loader.next();
      if (!b) break;
      const double lr = schedule->lr(m.steps_done);
      m.opt->set_lr(lr);
      Tensor x = b->images.to(m.device);  // batches come from the loader in host memory
      const Tensor labels = b->labels.to(m.device);
      if (m.input_shape.size() == 1) x = x.flatten(1);
      const Tensor out = m.net->forward(x);
      const Tensor loss = m.loss(out, labels);
      loss.backward();
      if (m.config.clip_grad_norm > 0) optim::clip_grad_norm(m.opt->params(), m.config.clip_grad_norm);
      const Tensor acc = accuracy(out.detach(), labels);
      std::vector<Tensor> extra{loss, acc};
      for (auto& [name, t] : m.net->named_buffers()) extra.push_back(*t);
      // Parameters, optimizer state, buffers, loss and accuracy: one realize.
      if (graph_step) graph_step->run([&] { m.opt->step(extra); });
      else m.opt->step(extra);
      m.opt->zero_grad();
      ++m.steps_done;
      ++batches;
      seen += b->size;
      loss_sum += loss.item<double>() * double(b->size);
      correct_sum += acc.item<double>() * double(b->size);
      AETHER_CHECK(std::isfinite(loss_sum), "train", "the loss became ", loss.item<double>(), " at step ",
                   m.steps_done, " (epoch ", epoch + 1, "); try a lower learning rate");
      bar.update(batches, seen, loss_sum / double(seen), correct_sum / double(seen));
    }
    m.epochs_done = epoch + 1;
    EpochStats st;
    st.epoch = epoch;
    st.train_loss = seen ? loss_sum / double(seen) : 0;
    st.train_accuracy = seen ? correct_sum / double(seen) : 0;
    st.lr = m.opt->lr();
    st.seconds = bar.seconds();
    st.images_per_second = st.seconds > 0 ? double(seen) / st.seconds : 0;
    std::string tail;
    // Nothing non-finite reaches the checkpoint: a failing validation (NaN/Inf outputs, loss or
    // accuracy) or weights that save() refuses stop training; the last good checkpoint stays.
    std::error_code ec;
    const std::string kept =
        o.checkpoint_path.empty()
            ? std::string()
            : "; not writing " + o.checkpoint_path +
                  (std::filesystem::exists(o.checkpoint_path, ec) ? ", the previous checkpoint is kept" : "");
    if (o.validation) {
      EvalResult r;
      try {
        r = evaluate(*o.validation, std::max<int64_t>(o.data.batch_size, 256));
      } catch (const Error& e) {
        throw Error(detail::cat("train: epoch ", epoch + 1, ": validation on '", o.validation->name,
                                "' failed: ", e.what(), kept));
      }
      st.val_loss = r.loss;
      st.val_accuracy = r.accuracy;
      char buf[96];
      std::snprintf(buf, sizeof buf, "val_loss %.4f  val_acc %.2f%%", r.loss, 100 * r.accuracy);
      tail = buf;
    }
    bar.finish(tail);
    history.epochs.push_back(st);
    if (!o.checkpoint_path.empty()) {
      try {
        save(o.checkpoint_path);
      } catch (const Error& e) {
        throw Error(detail::cat("train: epoch ", epoch + 1, ": ", e.what()));
      }
    }
    if (o.on_epoch) o.on_epoch(st);
  }
  if (graph_step && !graph_step->fallback_reason().empty())
    std::fprintf(stderr, "aether: CUDA graphs were not used: %s\n", graph_step->fallback_reason().c_str());
  return history;
}

EvalResult Model::evaluate(const data::Dataset& d, int64_t batch_size) {
  auto& m = *impl_;
  m.require_finalized("evaluate");
  m.check_data(d, "evaluate");
  const auto t0 = std::chrono::steady_clock::now();
  data::DataLoader loader(d, m.eval_loader(batch_size));
  loader.begin_epoch(0);
  nn::EvalModeGuard eval_mode(*m.net);  // restores the previous mode, also on errors
  NoGradGuard no_grad;
  EvalResult r;
  double loss_sum = 0, correct = 0, top5 = 0;
  while (auto b = loader.next()) {
    Tensor x = b->images.to(m.device);  // batches come from the loader in host memory
    const Tensor labels = b->labels.to(m.device);
    if (m.input_shape.size() == 1) x = x.flatten(1);
    const Tensor out = m.net->forward(x);
    const Tensor loss = m.loss(out, labels), acc = accuracy(out, labels);
    const bool k5 = out.shape().back() >= 5;
    const Tensor t5 = k5 ? top_k_accuracy(out, labels, 5) : acc;
    realize({out, loss, acc, t5});
    const std::string bad = non_finite(out);
    AETHER_CHECK(bad.empty(), "evaluate", "the model's outputs are not finite (", bad,
                 "); the weights are corrupt or diverged");
    loss_sum += loss.item<double>() * double(b->size);
    correct += acc.item<double>() * double(b->size);
    top5 += t5.item<double>() * double(b->size);
    r.samples += b->size;
  }
  if (r.samples > 0) {
    r.loss = loss_sum / double(r.samples);
    r.accuracy = correct / double(r.samples);
    r.top5 = top5 / double(r.samples);
  }
  AETHER_CHECK(std::isfinite(r.loss) && std::isfinite(r.accuracy) && std::isfinite(r.top5), "evaluate",
               "the loss or accuracy on data set '", d.name, "' is not finite (loss ", r.loss, ", accuracy ",
               r.accuracy, "); the weights are corrupt or diverged");
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
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
  Tensor p = m.probabilities(m.net->forward(x)).realize();
  const std::string bad = non_finite(p);
  AETHER_CHECK(bad.empty(), "predict", "the model's outputs are not finite (", bad,
               "); the weights are corrupt or diverged");
  return p;
}

Tensor Model::predict(const data::Dataset& d, int64_t batch_size) {
  auto& m = *impl_;
  m.require_finalized("predict");
  m.check_data(d, "predict");
  data::DataLoader loader(d, m.eval_loader(batch_size));
  loader.begin_epoch(0);
  std::vector<Tensor> parts;
  while (auto b = loader.next()) parts.push_back(predict(b->images));
  AETHER_CHECK(!parts.empty(), "predict", "the data set is empty");
  return cat(parts, 0).realize();
}

// ---- save / load ---------------------------------------------------------------------------------------------
void Model::save(const std::string& path) {
  auto& m = *impl_;
  m.require_finalized("save");
  Checkpoint ck;
  const auto rng = generator_state();
  const auto [mean, std] = m.saved_normalization();
  ck.manifest_extra = {{"architecture", m.net->config()},
                       {"input_shape", m.input_shape},
                       {"config", config_to_json(m.config)},
                       {"precision", m.precision},
                       {"normalization", {{"mean", mean}, {"std", std}}},
                       {"training_state",
                        {{"epoch", m.epochs_done},
                         {"step", m.steps_done},
                         {"rng", {{"seed", rng.seed}, {"next_stream", rng.next_stream}}},
                         {"schedule_position", m.steps_done},
                         {"optimizer_steps", m.opt->steps()},
                         {"lr", m.opt->lr()},
                         {"loader", m.loader_state}}},
                       {"optimizer", m.opt->config()},
                       {"info", m.info},
                       {"layouts", layouts_json()}};
  std::vector<std::string> names;
  for (auto& [name, t] : m.net->named_parameters()) {
    ck.model.emplace_back(name, t->detach());
    names.push_back(name);
  }
  for (auto& [name, t] : m.net->named_buffers()) ck.model.emplace_back(name, t->detach());
  for (auto& [name, t] : m.opt->named_state()) {
    const size_t dot = name.find('.');
    const size_t idx = std::stoul(name.substr(0, dot));
    ck.optimizer.emplace_back(names.at(idx) + "." + name.substr(dot + 1), t->detach());
  }
  // No checkpoint is written from a state holding NaN/Inf (or a negative variance), which load()
  // would reject: checked before the file is touched, so the previous file stays as it was.
  std::error_code ec;
  const std::string kept = std::filesystem::exists(path, ec) ? ", the previous file is kept" : "";
  auto check = [&](const std::string& what, const std::string& name, const Tensor& t) {
    const std::string bad = non_finite(t);
    AETHER_CHECK(bad.empty(), "save", what, name, " holds ", bad, "; not writing ", path, kept);
    const double negative = non_negative_entry(name) ? first_negative(t) : 0;
    AETHER_CHECK(negative == 0, "save", what, name, " holds the negative value ", negative, "; not writing ",
                 path, kept);
  };
  for (const auto& [name, t] : ck.model) check("", name, t);
  for (const auto& [name, t] : ck.optimizer) check("optimizer state ", name, t);
  save_checkpoint(path, ck);
}

namespace {
using json = nlohmann::json;

// At most 80 characters of a JSON value, for error messages.
std::string brief(const json& j) {
  std::string s = j.dump();
  return s.size() <= 80 ? s : s.substr(0, 77) + "...";
}

// Checked reads of manifest values: every error names the file and the entry
// ("load: run.aether: training_state.lr is -1, expected a finite number >= 0").
class ManifestReader {
 public:
  explicit ManifestReader(std::string path) : path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& entry, const std::string& what) const {
    throw Error(detail::cat("load: ", path_, ": ", entry, " ", what));
  }
  // obj[key]; `entry` names obj ("" for the manifest itself).
  const json& member(const json& obj, const std::string& entry, const std::string& key) const {
    if (!obj.is_object())
      fail(entry.empty() ? "manifest.json" : entry, "is " + brief(obj) + ", expected an object");
    const auto it = obj.find(key);
    if (it == obj.end()) {
      if (entry.empty()) fail("manifest.json", "has no \"" + key + "\" (not a model checkpoint?)");
      fail(entry + "." + key, "is missing");
    }
    return *it;
  }
  int64_t count(const json& j, const std::string& entry, int64_t min = 0) const {
    const bool ok =
        j.is_number_integer() &&
        (j.is_number_unsigned() ? j.get<uint64_t>() <= uint64_t(INT64_MAX) : j.get<int64_t>() >= min);
    if (!ok || j.get<int64_t>() < min)
      fail(entry, detail::cat("is ", brief(j), ", expected an integer >= ", min));
    return j.get<int64_t>();
  }
  uint64_t u64(const json& j, const std::string& entry) const {
    if (!j.is_number_unsigned()) fail(entry, "is " + brief(j) + ", expected an integer >= 0");
    return j.get<uint64_t>();
  }
  double number(const json& j, const std::string& entry, double min) const {
    if (!j.is_number() || !std::isfinite(j.get<double>()) || j.get<double>() < min)
      fail(entry, detail::cat("is ", brief(j), ", expected a finite number >= ", min));
    return j.get<double>();
  }
  bool boolean(const json& j, const std::string& entry) const {
    if (!j.is_boolean()) fail(entry, "is " + brief(j) + ", expected true or false");
    return j.get<bool>();
  }
  std::vector<float> floats(const json& j, const std::string& entry) const {
    if (!j.is_array()) fail(entry, "is " + brief(j) + ", expected a list of numbers");
    std::vector<float> out;
    for (size_t i = 0; i < j.size(); ++i) {
      const json& v = j[i];
      // (Checked as a double first: converting one beyond float's range is undefined.)
      if (!v.is_number() || !(std::abs(v.get<double>()) <= double(std::numeric_limits<float>::max())))
        fail(detail::cat(entry, "[", i, "]"), "is " + brief(v) + ", expected a finite float32 number");
      out.push_back(v.get<float>());
    }
    return out;
  }

 private:
  std::string path_;
};

// A hostile architecture must not make aether allocate without bound: the weights the layers would
// create (`total`, summed in order) must stay near what the file stores, `stored` values (checked
// before any layer is built; the exact shapes are checked after). The slack keeps this a guard
// against absurd sizes only: a mismatch of a few tensors gets the precise message later.
void check_layer_sizes(const json& c, double stored, double& total, const ManifestReader& r,
                       const std::string& entry) {
  if (!c.is_object()) return;  // module_from_config reports it
  auto num = [&](const char* key) {
    const auto it = c.find(key);
    return it != c.end() && it->is_number() ? std::abs(it->get<double>()) : 0.0;
  };
  auto area = [&](const char* key) {
    const auto it = c.find(key);
    if (it == c.end()) return 0.0;
    if (it->is_number()) return it->get<double>() * it->get<double>();
    if (it->is_array() && it->size() == 2 && (*it)[0].is_number() && (*it)[1].is_number())
      return std::abs((*it)[0].get<double>() * (*it)[1].get<double>());
    return 0.0;
  };
  const auto type_it = c.find("type");
  const std::string type = type_it != c.end() && type_it->is_string() ? type_it->get<std::string>() : "";
  double n = 0;
  if (type == "Linear") n = num("in") * num("out");
  if (type == "Conv2d") n = num("in") / std::max(num("groups"), 1.0) * num("out") * area("kernel");
  if (type == "BatchNorm1d" || type == "BatchNorm2d") n = num("channels");
  total += n;
  if (total > 2 * stored + double(1 << 20))
    r.fail(entry, detail::cat("declares a ", type, " layer of ", n, " weights; the layers up to it need ",
                              total, ", far more than the file holds (", stored, " values)"));
  if (const auto it = c.find("layers"); it != c.end() && it->is_array())
    for (size_t i = 0; i < it->size(); ++i)
      check_layer_sizes((*it)[i], stored, total, r, detail::cat(entry, ".layers[", i, "]"));
  for (const char* key : {"body", "shortcut"})
    if (const auto it = c.find(key); it != c.end())
      check_layer_sizes(*it, stored, total, r, entry + "." + key);
}
}  // namespace

Model Model::load(const std::string& path) {
  // Building the layers draws initial weights from the global generator: a failed load puts its
  // state back (a successful one sets the checkpoint's).
  const GeneratorState rng_before = generator_state();
  auto load_model = [&]() -> Model {
    Checkpoint ck = load_checkpoint(path);
    const json& j = ck.manifest_extra;
    const ManifestReader r(path);
    Model model;
    auto& m = *model.impl_;

    // The architecture, the configuration and the input shape rebuild the model.
    double stored = 0;
    for (const auto& [name, t] : ck.model) stored += double(t.numel());
    const json& arch = r.member(j, "", "architecture");
    double declared = 0;
    check_layer_sizes(arch, stored, declared, r, "architecture");
    std::shared_ptr<nn::Sequential> seq;
    try {
      seq = std::dynamic_pointer_cast<nn::Sequential>(nn::module_from_config(arch));
    } catch (const Error& e) {
      r.fail("architecture", detail::cat("is invalid: ", e.what()));
    }
    if (!seq) r.fail("architecture", "is not a Sequential model");
    m.net = seq;
    ModelConfig config;
    try {
      config = config_from_json(r.member(j, "", "config"));
      check_config(config);
    } catch (const json::exception& e) {
      r.fail("config", detail::cat("is invalid: ", e.what()));
    } catch (const Error& e) {
      r.fail("config", detail::cat("is invalid: ", e.what()));
    }
    model.configure(config);
    const json& shape_json = r.member(j, "", "input_shape");
    if (!shape_json.is_array() || (shape_json.size() != 1 && shape_json.size() != 3))
      r.fail("input_shape", "is " + brief(shape_json) + ", expected [H, W, C] or [features]");
    Shape input;
    double input_numel = 1;
    for (size_t i = 0; i < shape_json.size(); ++i) {
      input.push_back(r.count(shape_json[i], detail::cat("input_shape[", i, "]"), 1));
      input_numel *= double(input.back());
    }
    if (input_numel > double(int64_t(1) << 31))
      r.fail("input_shape", detail::cat("is ", brief(shape_json), ": more than 2^31 values per sample"));
    try {
      model.finalize(input);
    } catch (const Error& e) {
      r.fail("architecture", detail::cat("does not fit input_shape ", to_string(input), ": ", e.what()));
    }
    const json& precision = r.member(j, "", "precision");
    if (precision != "float32")
      r.fail("precision", "is " + brief(precision) + "; this build of aether supports only \"float32\"");
    m.precision = "float32";

    // Normalisation: one finite mean and one std > 0 per input channel (a model with flat input
    // that was never trained has none: mean 0, std 1).
    const json& norm = r.member(j, "", "normalization");
    m.mean = r.floats(r.member(norm, "normalization", "mean"), "normalization.mean");
    m.std = r.floats(r.member(norm, "normalization", "std"), "normalization.std");
    if (input.size() == 3) {
      for (const auto* v : {&m.mean, &m.std})
        if (int64_t(v->size()) != input[2])
          r.fail(v == &m.mean ? "normalization.mean" : "normalization.std",
                 detail::cat("has ", v->size(), " values, expected one per input channel (", input[2], ")"));
    } else {
      if (m.mean.size() != m.std.size())
        r.fail("normalization", detail::cat("has ", m.mean.size(), " means but ", m.std.size(), " stds"));
      if (!m.mean.empty() && input[0] % int64_t(m.mean.size()) != 0)
        r.fail("normalization.mean", detail::cat("has ", m.mean.size(), " values, which do not divide the ",
                                                 input[0], " inputs into channels"));
    }
    for (size_t i = 0; i < m.std.size(); ++i)
      if (!(m.std[i] > 0))
        r.fail(detail::cat("normalization.std[", i, "]"), detail::cat("is ", m.std[i], ", expected > 0"));

    // Training state.
    const json& ts = r.member(j, "", "training_state");
    m.epochs_done = r.count(r.member(ts, "training_state", "epoch"), "training_state.epoch");
    m.steps_done = r.count(r.member(ts, "training_state", "step"), "training_state.step");
    const int64_t position =
        r.count(r.member(ts, "training_state", "schedule_position"), "training_state.schedule_position");
    if (position != m.steps_done)
      r.fail("training_state.schedule_position",
             detail::cat("is ", position, " but training_state.step is ", m.steps_done, "; they must agree"));
    const int64_t optimizer_steps =
        r.count(r.member(ts, "training_state", "optimizer_steps"), "training_state.optimizer_steps");
    const double lr = r.number(r.member(ts, "training_state", "lr"), "training_state.lr", 0);
    const json& rng = r.member(ts, "training_state", "rng");
    const GeneratorState rng_state{
        r.u64(r.member(rng, "training_state.rng", "seed"), "training_state.rng.seed"),
        r.u64(r.member(rng, "training_state.rng", "next_stream"), "training_state.rng.next_stream")};
    const json& loader = r.member(ts, "training_state", "loader");
    if (!loader.is_object()) r.fail("training_state.loader", "is " + brief(loader) + ", expected an object");
    if (loader.contains("seed")) r.u64(loader["seed"], "training_state.loader.seed");
    if (loader.contains("batch_size")) r.count(loader["batch_size"], "training_state.loader.batch_size", 1);
    if (loader.contains("crop_padding"))
      r.count(loader["crop_padding"], "training_state.loader.crop_padding");
    for (const char* key : {"hflip", "shuffle", "drop_last"})
      if (loader.contains(key)) r.boolean(loader[key], detail::cat("training_state.loader.", key));
    m.opt->set_steps(optimizer_steps);
    m.opt->set_lr(lr);
    m.loader_state = loader;
    // The optimizer's description must be the one the configuration and the state give.
    const json& opt_json = r.member(j, "", "optimizer");
    if (opt_json != m.opt->config())
      r.fail("optimizer", "is " + brief(opt_json) +
                              ", which disagrees with config and training_state.lr (expected " +
                              m.opt->config().dump() + ")");
    if (j.contains("info")) {
      if (!j["info"].is_object()) r.fail("info", "is " + brief(j["info"]) + ", expected an object");
      m.info = j["info"];
    }
    const json& layouts = r.member(j, "", "layouts");
    if (layouts != layouts_json())
      r.fail("layouts",
             "is " + brief(layouts) + "; this build of aether reads only " + layouts_json().dump());

    // Weights and buffers, by name: each one present once, with its shape and dtype, finite
    // (variances >= 0); nothing else.
    auto check_values = [&](const std::string& entry, const std::string& name, const Tensor& t) {
      const std::string bad = non_finite(t);
      if (!bad.empty()) r.fail(entry, "holds " + bad);
      const double negative = non_negative_entry(name) ? first_negative(t) : 0;
      if (negative != 0) r.fail(entry, detail::cat("holds the negative value ", negative, " (a variance)"));
    };
    std::unordered_map<std::string, Tensor> tensors;
    for (auto& [name, t] : ck.model) tensors.emplace(name, t);
    std::vector<std::pair<Tensor*, Tensor>> assign;
    auto take = [&](const std::string& name, Tensor* t) {
      const std::string entry = "tensor '" + name + "'";
      const auto it = tensors.find(name);
      if (it == tensors.end()) r.fail(entry, "is missing");
      if (it->second.shape() != t->shape() || it->second.dtype() != t->dtype())
        r.fail(entry, detail::cat("has shape ", to_string(it->second.shape()), " ",
                                  dtype_name(it->second.dtype()), ", the architecture expects ",
                                  to_string(t->shape()), " ", dtype_name(t->dtype())));
      check_values(entry, name, it->second);
      assign.emplace_back(t, it->second);
      tensors.erase(it);
    };
    std::vector<std::string> names;
    std::vector<Tensor*> params;
    for (auto& [name, t] : m.net->named_parameters()) {
      take(name, t);
      names.push_back(name);
      params.push_back(t);
    }
    for (auto& [name, t] : m.net->named_buffers()) take(name, t);
    if (!tensors.empty())
      r.fail("tensor '" + tensors.begin()->first + "'", "is not part of the architecture");

    // Optimizer state: "<parameter>.<slot>", exactly the optimizer's slots for every parameter once
    // it has taken a step, none before.
    const std::vector<std::string> slots = optimizer_slots(config);
    std::string slot_list;
    for (const auto& s : slots) slot_list += (slot_list.empty() ? "" : ", ") + s;
    std::set<std::string> present;
    std::vector<std::tuple<size_t, std::string, Tensor>> state;  // parameter index, slot, value
    for (auto& [name, t] : ck.optimizer) {
      const std::string entry = "optimizer state '" + name + "'";
      size_t idx = names.size();
      for (size_t i = 0; i < names.size(); ++i)
        if (name.size() > names[i].size() + 1 && name.compare(0, names[i].size() + 1, names[i] + ".") == 0 &&
            name.find('.', names[i].size() + 1) == std::string::npos)
          idx = i;
      if (idx == names.size()) r.fail(entry, "names no parameter of the model");
      const std::string slot = name.substr(names[idx].size() + 1);
      if (std::find(slots.begin(), slots.end(), slot) == slots.end())
        r.fail(entry, detail::cat("is not a state of ", m.opt->type_name(),
                                  " (its slots: ", slots.empty() ? "none" : slot_list, ")"));
      if (optimizer_steps == 0) r.fail(entry, "is present but training_state.optimizer_steps is 0");
      const Tensor& p = *params[idx];
      if (t.shape() != p.shape() || t.dtype() != p.dtype())
        r.fail(entry, detail::cat("has shape ", to_string(t.shape()), " ", dtype_name(t.dtype()),
                                  ", its parameter has ", to_string(p.shape()), " ", dtype_name(p.dtype())));
      check_values(entry, name, t);
      present.insert(name);
      state.emplace_back(idx, slot, t);
    }
    if (optimizer_steps > 0)
      for (const auto& n : names)
        for (const auto& s : slots)
          if (!present.count(n + "." + s))
            r.fail("optimizer state '" + n + "." + s + "'",
                   detail::cat("is missing (the optimizer has taken ", optimizer_steps, " steps)"));

    // Everything checked: restore.
    for (auto& [t, value] : assign) t->assign(value);
    for (auto& [i, slot, t] : state) m.opt->set_state(i, slot, t);
    set_generator_state(rng_state);
    return model;
  };
  try {
    return load_model();
  } catch (const nlohmann::json::exception& e) {
    set_generator_state(rng_before);
    throw Error(detail::cat("load: ", path, ": bad manifest: ", e.what()));
  } catch (...) {
    set_generator_state(rng_before);
    throw;
  }
}

// ---- accessors ---------------------------------------------------------------------------------------------------
std::string Model::summary() {
  impl_->require_finalized("summary");
  return nn::summary(*impl_->net, [&] {
    Shape s = impl_->input_shape;
    s.insert(s.begin(), 1);
    return s;
  }());
}
nn::Sequential& Model::network() { return *impl_->net; }
optim::Optimizer* Model::optimizer() { return impl_->opt.get(); }
const ModelConfig& Model::config() const { return impl_->config; }
int64_t Model::epochs_done() const { return impl_->epochs_done; }
int64_t Model::steps_done() const { return impl_->steps_done; }
const Shape& Model::input_shape() const { return impl_->input_shape; }
const std::vector<float>& Model::norm_mean() const { return impl_->mean; }
const std::vector<float>& Model::norm_std() const { return impl_->std; }
nlohmann::json& Model::info() { return impl_->info; }

}  // namespace aether
