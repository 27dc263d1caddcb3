// Model: composition, configuration, the training loop, evaluation, prediction, save and load.
#include "aether/model/model.h"

#include <chrono>
#include <cmath>
#include <cstdio>

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
  AETHER_CHECK(Shape({train_set.h, train_set.w, train_set.c}) == m.input_shape ||
                   Shape({train_set.h * train_set.w * train_set.c}) == m.input_shape,
               "train", "data set '", train_set.name, "' has images (", train_set.h, ", ", train_set.w, ", ",
               train_set.c, "), the model expects ", to_string(m.input_shape));
  m.mean = o.data.mean;
  m.std = o.data.std;
  m.loader_state = {{"seed", o.data.seed}, {"batch_size", o.data.batch_size}, {"crop_padding", o.data.crop_padding},
                    {"hflip", o.data.hflip}, {"shuffle", o.data.shuffle}, {"drop_last", o.data.drop_last}};
  data::DataLoader loader(train_set, o.data);
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
    if (o.validation) {
      const EvalResult r = evaluate(*o.validation, std::max<int64_t>(o.data.batch_size, 256));
      st.val_loss = r.loss;
      st.val_accuracy = r.accuracy;
      char buf[96];
      std::snprintf(buf, sizeof buf, "val_loss %.4f  val_acc %.2f%%", r.loss, 100 * r.accuracy);
      tail = buf;
    }
    bar.finish(tail);
    history.epochs.push_back(st);
    if (!o.checkpoint_path.empty()) save(o.checkpoint_path);
    if (o.on_epoch) o.on_epoch(st);
  }
  if (graph_step && !graph_step->fallback_reason().empty())
    std::fprintf(stderr, "aether: CUDA graphs were not used: %s\n", graph_step->fallback_reason().c_str());
  return history;
}

EvalResult Model::evaluate(const data::Dataset& d, int64_t batch_size) {
  auto& m = *impl_;
  m.require_finalized("evaluate");
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
    realize({loss, acc, t5});
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
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

Tensor Model::predict(const Tensor& images) {
  auto& m = *impl_;
  m.require_finalized("predict");
  Tensor x = images.to(m.device).cast(DType::float32);
  if (m.input_shape.size() == 1 && x.ndim() > 2) x = x.flatten(1);
  m.check_input(x, "predict");
  nn::EvalModeGuard eval_mode(*m.net);  // restores the previous mode, also on errors
  NoGradGuard no_grad;
  return m.probabilities(m.net->forward(x)).realize();
}

Tensor Model::predict(const data::Dataset& d, int64_t batch_size) {
  auto& m = *impl_;
  m.require_finalized("predict");
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
  ck.manifest_extra = {
      {"architecture", m.net->config()},
      {"input_shape", m.input_shape},
      {"config", config_to_json(m.config)},
      {"precision", m.precision},
      {"normalization", {{"mean", m.mean}, {"std", m.std}}},
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
      {"layouts",
       {{"activations", "NHWC"}, {"conv_weight", "OHWI (O, KH, KW, C/groups)"}, {"linear_weight", "(out, in)"}}}};
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
  save_checkpoint(path, ck);
}

Model Model::load(const std::string& path) {
  Checkpoint ck = load_checkpoint(path);
  const auto& j = ck.manifest_extra;
  Model model;
  auto& m = *model.impl_;
  try {
    auto net = nn::module_from_config(j.at("architecture"));
    auto seq = std::dynamic_pointer_cast<nn::Sequential>(net);
    AETHER_CHECK(seq != nullptr, "load", path, ": the architecture is not a Sequential model");
    m.net = seq;
    model.configure(config_from_json(j.at("config")));
    model.finalize(j.at("input_shape").get<Shape>());
    m.precision = j.at("precision");
    m.mean = j.at("normalization").at("mean").get<std::vector<float>>();
    m.std = j.at("normalization").at("std").get<std::vector<float>>();
    const auto& ts = j.at("training_state");
    m.epochs_done = ts.at("epoch");
    m.steps_done = ts.at("step");
    m.opt->set_steps(ts.at("optimizer_steps"));
    m.opt->set_lr(ts.at("lr"));
    m.loader_state = ts.at("loader");
    set_generator_state({ts.at("rng").at("seed"), ts.at("rng").at("next_stream")});
    m.info = j.value("info", nlohmann::json::object());
  } catch (const nlohmann::json::exception& e) {
    throw Error(detail::cat("load: ", path, ": bad manifest: ", e.what()));
  }
  // Weights and buffers, by name, with shapes and dtypes checked.
  std::unordered_map<std::string, Tensor> stored;
  for (auto& [name, t] : ck.model) stored.emplace(name, t);
  auto restore = [&](const std::string& name, Tensor* t) {
    auto it = stored.find(name);
    AETHER_CHECK(it != stored.end(), "load", path, ": tensor '", name, "' is missing");
    AETHER_CHECK(it->second.shape() == t->shape() && it->second.dtype() == t->dtype(), "load", path, ": tensor '",
                 name, "' has shape ", to_string(it->second.shape()), " ", dtype_name(it->second.dtype()),
                 ", the architecture expects ", to_string(t->shape()), " ", dtype_name(t->dtype()));
    t->assign(it->second);
    stored.erase(it);
  };
  std::vector<std::string> names;
  for (auto& [name, t] : m.net->named_parameters()) {
    restore(name, t);
    names.push_back(name);
  }
  for (auto& [name, t] : m.net->named_buffers()) restore(name, t);
  AETHER_CHECK(stored.empty(), "load", path, ": unexpected tensor '", stored.begin()->first, "'");
  for (auto& [name, t] : ck.optimizer) {
    size_t idx = names.size();
    for (size_t i = 0; i < names.size(); ++i)
      if (name.size() > names[i].size() + 1 && name.compare(0, names[i].size() + 1, names[i] + ".") == 0 &&
          name.find('.', names[i].size() + 1) == std::string::npos)
        idx = i;
    AETHER_CHECK(idx < names.size(), "load", path, ": optimizer state '", name, "' names no parameter");
    m.opt->set_state(idx, name.substr(names[idx].size() + 1), t);
  }
  return model;
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
