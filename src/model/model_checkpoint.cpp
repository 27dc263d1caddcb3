// Model::save and Model::load: the .aether checkpoint of a model (docs/checkpoint-format.md), never
// written from a non-finite state, every value checked on loading.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <limits>
#include <set>
#include <tuple>
#include <unordered_map>

#include "aether/core/random.h"
#include "data_parallel.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "model_impl.h"
#include "nn/config_json.h"

namespace aether {
using namespace model_internal;

namespace {
// The checkpoint's tensors of early stopping's best epoch: "early_stopping." + a parameter's or
// buffer's name.
const std::string kBestPrefix = "early_stopping.";

// TrainOptions::early_stopping's run (training_state.early_stopping; null: none).
nlohmann::json early_stopping_json(const std::optional<EarlyStoppingRun>& run) {
  if (!run) return nullptr;
  return {{"monitor", run->options.monitor},     {"patience", run->options.patience},
          {"min_delta", run->options.min_delta}, {"restore_best_weights", run->options.restore_best_weights},
          {"best", run->plateau.best},           {"best_epoch", run->plateau.best_epoch},
          {"wait", run->plateau.wait},           {"ended", run->ended}};
}
}  // namespace

// ---- save / load
// ---------------------------------------------------------------------------------------------
void Model::save(const std::string& path) {
  auto& m = *impl_;
  m.require_finalized("save");
  Checkpoint ck;
  const auto rng = generator_state();
  const auto [mean, std] = m.saved_normalization();
  ck.manifest_extra = {
      {"architecture", nn::child_config(*m.net)},
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
        {"scheduled_lr", m.scheduled_lr ? nlohmann::json(*m.scheduled_lr) : nlohmann::json(nullptr)},
        {"loader", m.loader_state},
        {"loss_scale",
         {{"scale", m.loss_scale.scale},
          {"clean_steps", m.loss_scale.clean_steps},
          {"growth_interval", m.loss_scale.growth_interval}}},
        {"lr_plateau",
         {{"factor", m.lr_plateau.factor},
          {"cooldown", m.lr_plateau.cooldown},
          {"best", m.lr_plateau.plateau.best},
          {"best_epoch", m.lr_plateau.plateau.best_epoch},
          {"wait", m.lr_plateau.plateau.wait}}},
        {"early_stopping", early_stopping_json(m.early_stopping_run)}}},
      {"optimizer", nlohmann::json::parse(m.opt->config())},
      {"info", m.info},
      {"layouts", layouts_json()}};
  const std::vector<std::string>& names = m.state_names;  // the optimizer state's owners, by index
  for (auto& [name, t] : m.net->named_parameters()) ck.model.emplace_back(name, t->detach());
  for (auto& [name, t] : m.net->named_buffers()) ck.model.emplace_back(name, t->detach());
  // An early-stopping run that may be continued keeps its best epoch's weights and buffers.
  if (const auto& run = m.early_stopping_run; run && !run->ended && !run->best.empty()) {
    const nn::NamedTensors state = parameters_and_buffers(*m.net);
    for (size_t i = 0; i < state.size(); ++i)
      ck.training.emplace_back(kBestPrefix + state[i].first, run->best[i]);
  }
  for (auto& [name, t] : m.opt->named_state()) {
    const size_t dot = name.find('.');
    const size_t idx = std::stoul(name.substr(0, dot));
    ck.optimizer.emplace_back(names.at(idx) + "." + name.substr(dot + 1), t->detach());
  }
  // No checkpoint is written from a state holding NaN/Inf (or a negative variance), which load()
  // would reject: checked before the file is touched, so the previous file stays as it was.
  std::error_code ec;
  const std::string tail =
      "; not writing " + path + (std::filesystem::exists(path, ec) ? ", the previous file is kept" : "");
  auto check = [&](const std::string& what, const std::string& name, const Tensor& t) {
    check_writable("save", what + name, name, t, tail);
  };
  for (const auto& [name, t] : ck.model) check("", name, t);
  for (const auto& [name, t] : ck.optimizer) check("optimizer state ", name, t);
  for (const auto& [name, t] : ck.training) check("early stopping's best epoch: ", name, t);
  save_checkpoint(path, ck);
}

namespace {
using json = nlohmann::json;

// At most 80 characters of a JSON value, for error messages (without dumping the whole value).
std::string brief(const json& j) { return json_excerpt(j); }

// Checked reads of manifest values: every error names the file and the entry
// ("load: run.aether: training_state.lr is -1, expected a finite number >= 0").
class ManifestReader {
 public:
  explicit ManifestReader(std::string path) : path_(std::move(path)) {}
  [[noreturn]] void fail(const std::string& entry, const std::string& what) const {
    throw Error(detail::cat("load: ", path_, ": ", entry, " ", what), ErrorKind::runtime);
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

// A tensor's values: finite, and >= 0 for a variance.
void check_tensor_values(const ManifestReader& r, const std::string& entry, const std::string& name,
                         const Tensor& t) {
  const std::string bad = invalid_values(name, t, " (a variance)");
  if (!bad.empty()) r.fail(entry, "holds " + bad);
}

// training_state.lr_plateau: reduce_lr_on_plateau's state (files from before it have none: factor
// 1, no best yet).
LrPlateauState read_lr_plateau(const ManifestReader& r, const json& ts) {
  LrPlateauState s;
  if (!ts.contains("lr_plateau")) return s;
  const json& lp = ts["lr_plateau"];
  const std::string e = "training_state.lr_plateau";
  s.factor = r.number(r.member(lp, e, "factor"), e + ".factor", 0);
  if (!(s.factor > 0 && s.factor <= 1))
    r.fail(e + ".factor", detail::cat("is ", s.factor, ", expected a number in (0, 1]"));
  s.cooldown = r.count(r.member(lp, e, "cooldown"), e + ".cooldown");
  s.plateau.best = r.number(r.member(lp, e, "best"), e + ".best", -std::numeric_limits<double>::max());
  s.plateau.best_epoch = r.count(r.member(lp, e, "best_epoch"), e + ".best_epoch", -1);
  s.plateau.wait = r.count(r.member(lp, e, "wait"), e + ".wait");
  return s;
}

// training_state.early_stopping: early stopping's last run, without its best weights (null, and
// files from before it: none).
std::optional<EarlyStoppingRun> read_early_stopping(const ManifestReader& r, const json& ts) {
  if (!ts.contains("early_stopping") || ts["early_stopping"].is_null()) return std::nullopt;
  const json& es = ts["early_stopping"];
  const std::string e = "training_state.early_stopping";
  EarlyStoppingRun run;
  const json& monitor = r.member(es, e, "monitor");
  if (!monitor.is_string() || !known_monitor(monitor.get<std::string>()))
    r.fail(e + ".monitor", "is " + brief(monitor) + ", expected val_loss, val_accuracy, loss or accuracy");
  run.options.monitor = monitor.get<std::string>();
  run.options.patience = r.count(r.member(es, e, "patience"), e + ".patience");
  run.options.min_delta = r.number(r.member(es, e, "min_delta"), e + ".min_delta", 0);
  run.options.restore_best_weights =
      r.boolean(r.member(es, e, "restore_best_weights"), e + ".restore_best_weights");
  run.plateau.best = r.number(r.member(es, e, "best"), e + ".best", -std::numeric_limits<double>::max());
  run.plateau.best_epoch = r.count(r.member(es, e, "best_epoch"), e + ".best_epoch", -1);
  run.plateau.wait = r.count(r.member(es, e, "wait"), e + ".wait");
  run.ended = r.boolean(r.member(es, e, "ended"), e + ".ended");
  return run;
}

// training_state.scheduled_lr: TrainOptions::lr_schedule's learning rate (null, and files from
// before it: none, config.lr).
std::optional<double> read_scheduled_lr(const ManifestReader& r, const json& ts) {
  if (!ts.contains("scheduled_lr") || ts["scheduled_lr"].is_null()) return std::nullopt;
  const json& v = ts["scheduled_lr"];
  if (!v.is_number() || !std::isfinite(v.get<double>()) || !(v.get<double>() > 0))
    r.fail("training_state.scheduled_lr", "is " + brief(v) + ", expected null or a finite number > 0");
  return v.get<double>();
}

// Early stopping's best epoch (the checkpoint's "training" tensors): each parameter and buffer of
// `net` once, in parameters_and_buffers() order, for a run to continue that restores them and has
// a best epoch; otherwise none.
std::vector<Tensor> read_best_weights(const ManifestReader& r, const NamedTensors& training,
                                      const std::optional<EarlyStoppingRun>& run, nn::Module& net) {
  const bool keeps_best =
      run && !run->ended && run->options.restore_best_weights && run->plateau.best_epoch >= 0;
  const nn::NamedTensors state = keeps_best ? parameters_and_buffers(net) : nn::NamedTensors();
  std::vector<std::string> names;
  for (const auto& [name, t] : state) names.push_back(kBestPrefix + name);
  const std::vector<Tensor> best = take_by_name(
      training, names,
      [&](const std::string& name) {
        r.fail("tensor '" + name + "'",
               "is missing (training_state.early_stopping has a best epoch to restore)");
      },
      [&](const std::string& name) {
        r.fail("tensor '" + name + "'", keeps_best
                                            ? "is no parameter or buffer of the model"
                                            : "is not expected: training_state.early_stopping keeps no "
                                              "best epoch to restore");
      });
  for (size_t i = 0; i < best.size(); ++i) {
    const auto& [name, t] = state[i];
    const std::string entry = "tensor '" + names[i] + "'";
    if (best[i].shape() != t->shape() || best[i].dtype() != t->dtype())
      r.fail(entry, detail::cat("has shape ", to_string(best[i].shape()), " ", dtype_name(best[i].dtype()),
                                ", '", name, "' has ", to_string(t->shape()), " ", dtype_name(t->dtype())));
    check_tensor_values(r, entry, name, best[i]);
  }
  return best;
}

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
  if (type == "LayerNorm") n = 2 * num("features");
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
      seq = std::dynamic_pointer_cast<nn::Sequential>(nn::module_from_json(arch));
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
    // The precision it trained in (the weights are float32 masters whatever it is); set_precision
    // after load() trains or evaluates in another.
    const json& precision = r.member(j, "", "precision");
    if (precision != "float32" && precision != "bfloat16" && precision != "float16")
      r.fail("precision", "is " + brief(precision) + "; expected \"float32\", \"bfloat16\" or \"float16\"");
    m.precision = precision.get<std::string>();

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
    for (const char* key : {"hflip", "shuffle", "drop_last", "alternate_flips", "crop_reflect"})
      if (loader.contains(key)) r.boolean(loader[key], detail::cat("training_state.loader.", key));
    // Dynamic loss scaling's state (float16; files from before it have none: the initial scale).
    Model::Impl::LossScale loss_scale;
    if (ts.contains("loss_scale")) {
      const json& ls = ts["loss_scale"];
      if (!ls.is_object()) r.fail("training_state.loss_scale", "is " + brief(ls) + ", expected an object");
      loss_scale.scale =
          r.number(r.member(ls, "training_state.loss_scale", "scale"), "training_state.loss_scale.scale", 0);
      if (!(loss_scale.scale > 0))
        r.fail("training_state.loss_scale.scale", detail::cat("is ", loss_scale.scale, ", expected > 0"));
      loss_scale.clean_steps = r.count(r.member(ls, "training_state.loss_scale", "clean_steps"),
                                       "training_state.loss_scale.clean_steps");
      loss_scale.growth_interval = r.count(r.member(ls, "training_state.loss_scale", "growth_interval"),
                                           "training_state.loss_scale.growth_interval", 1);
    }
    m.loss_scale = loss_scale;
    m.lr_plateau = read_lr_plateau(r, ts);
    m.early_stopping_run = read_early_stopping(r, ts);  // its tensors come with the weights below
    m.scheduled_lr = read_scheduled_lr(r, ts);
    m.opt->set_steps(optimizer_steps);
    m.opt->set_lr(lr);
    m.loader_state = loader;
    // The optimizer's description must be the one the configuration and the state give.
    const json& opt_json = r.member(j, "", "optimizer");
    if (opt_json != json::parse(m.opt->config()))
      r.fail("optimizer", "is " + brief(opt_json) +
                              ", which disagrees with config and training_state.lr (expected " +
                              m.opt->config() + ")");
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
      check_tensor_values(r, entry, name, it->second);
      assign.emplace_back(t, it->second);
      tensors.erase(it);
    };
    // The optimizer's state owners, in its order: its parameters, then lookahead's buffers.
    const std::vector<std::string>& names = m.state_names;
    std::vector<Tensor*> params;
    for (auto& [name, t] : m.net->named_parameters()) {
      take(name, t);
      if (std::find(m.trained_names.begin(), m.trained_names.end(), name) != m.trained_names.end())
        params.push_back(t);
    }
    for (auto& [name, t] : m.net->named_buffers()) {
      take(name, t);
      if (std::find(names.begin() + std::ptrdiff_t(params.size()), names.end(), name) != names.end())
        params.push_back(t);
    }
    if (!tensors.empty())
      r.fail("tensor '" + tensors.begin()->first + "'", "is not part of the architecture");

    std::vector<Tensor> best = read_best_weights(r, ck.training, m.early_stopping_run, *m.net);
    if (m.early_stopping_run) m.early_stopping_run->best = std::move(best);

    // Optimizer state: "<parameter>.<slot>", exactly the optimizer's slots for every parameter once
    // it has taken a step, none before.
    auto list = [](const std::vector<std::string>& slots) {
      std::string l;
      for (const auto& s : slots) l += (l.empty() ? "" : ", ") + s;
      return l.empty() ? std::string("none") : l;
    };
    std::set<std::string> present;
    std::vector<std::tuple<size_t, std::string, Tensor>> state;  // parameter index, slot, value
    for (auto& [name, t] : ck.optimizer) {
      const std::string entry = "optimizer state '" + name + "'";
      size_t idx = names.size();
      for (size_t i = 0; i < names.size(); ++i)
        if (name.size() > names[i].size() + 1 && name.compare(0, names[i].size() + 1, names[i] + ".") == 0 &&
            name.find('.', names[i].size() + 1) == std::string::npos)
          idx = i;
      if (idx == names.size()) r.fail(entry, "names no trained parameter of the model");
      const std::string slot = name.substr(names[idx].size() + 1);
      if (idx >= m.trained_names.size() && slot != "lookahead")
        r.fail(entry, "is not a state of a buffer (lookahead's \"lookahead\" is its only one)");
      const std::vector<std::string>& slots = m.state_slots[idx];
      if (std::find(slots.begin(), slots.end(), slot) == slots.end())
        r.fail(entry, detail::cat("is not a state of ", m.opt->type_name(), " for '", names[idx],
                                  "' (its slots: ", list(slots), ")"));
      if (optimizer_steps == 0) r.fail(entry, "is present but training_state.optimizer_steps is 0");
      const Tensor& p = *params[idx];
      if (t.shape() != p.shape() || t.dtype() != p.dtype())
        r.fail(entry, detail::cat("has shape ", to_string(t.shape()), " ", dtype_name(t.dtype()),
                                  ", its parameter has ", to_string(p.shape()), " ", dtype_name(p.dtype())));
      check_tensor_values(r, entry, name, t);
      present.insert(name);
      state.emplace_back(idx, slot, t);
    }
    // Lookahead's slow weights begin at its first step (ModelConfig::lookahead_start_epoch, a
    // multiple of lookahead_every), and a parameter frozen by then (ParamGroup::train_epochs) has
    // none: that slot may be missing.
    if (optimizer_steps > 0)
      for (size_t i = 0; i < m.trained_names.size(); ++i)
        for (const auto& s : m.state_slots[i])
          if (const std::string& n = m.trained_names[i]; s != "lookahead" && !present.count(n + "." + s))
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
    throw Error(detail::cat("load: ", path, ": bad manifest: ", e.what()), ErrorKind::runtime);
  } catch (...) {
    set_generator_state(rng_before);
    throw;
  }
}

}  // namespace aether
