// aether._aether.Model: the C++ Model (building, training, evaluation, checkpoints) driven from
// Python on data sets made from NumPy arrays (bind_data.cpp). The GIL is released while the
// engine runs; a step callback takes it back to check for Ctrl-C (KeyboardInterrupt) and to feed
// Python's progress display.
#include <nanobind/stl/function.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/unique_ptr.h>
#include <nanobind/stl/vector.h>

#include <nlohmann/json.hpp>

#include "aether/dist/communicator.h"
#include "bind.h"

namespace aether::py {
namespace {

nb::dict epoch_dict(const EpochStats& e) {
  nb::dict d;
  d["epoch"] = e.epoch;
  d["loss"] = e.train_loss;
  d["accuracy"] = e.train_accuracy;
  if (e.val_loss) d["val_loss"] = *e.val_loss;
  if (e.val_accuracy) d["val_accuracy"] = *e.val_accuracy;
  d["lr"] = e.lr;
  d["lr_reduced"] = e.lr_reduced;
  d["seconds"] = e.seconds;
  d["images_per_second"] = e.images_per_second;
  return d;
}

ModelConfig config_from(const nb::dict& d) {
  ModelConfig c;
  for (auto [k, v] : d) {
    const std::string key = nb::cast<std::string>(k);
    if (key == "loss")
      c.loss = nb::cast<std::string>(v);
    else if (key == "label_smoothing")
      c.label_smoothing = nb::cast<double>(v);
    else if (key == "optimizer")
      c.optimizer = nb::cast<std::string>(v);
    else if (key == "lr")
      c.lr = nb::cast<double>(v);
    else if (key == "momentum")
      c.momentum = nb::cast<double>(v);
    else if (key == "nesterov")
      c.nesterov = nb::cast<bool>(v);
    else if (key == "weight_decay")
      c.weight_decay = nb::cast<double>(v);
    else if (key == "beta1")
      c.beta1 = nb::cast<double>(v);
    else if (key == "beta2")
      c.beta2 = nb::cast<double>(v);
    else if (key == "eps")
      c.eps = nb::cast<double>(v);
    else if (key == "schedule")
      c.schedule = nb::cast<std::string>(v);
    else if (key == "warmup_fraction")
      c.warmup_fraction = nb::cast<double>(v);
    else if (key == "metrics")
      c.metrics = nb::cast<std::vector<std::string>>(v);
    else if (key == "clip_grad_norm")
      c.clip_grad_norm = nb::cast<double>(v);
    else if (key == "regression_precision")
      c.regression_precision = nb::cast<double>(v);
    else if (key == "lookahead_every")
      c.lookahead_every = nb::cast<int64_t>(v);
    else if (key == "lookahead_decay")
      c.lookahead_decay = nb::cast<double>(v);
    else if (key == "lookahead_power")
      c.lookahead_power = nb::cast<double>(v);
    else if (key == "lookahead_start_epoch")
      c.lookahead_start_epoch = nb::cast<int64_t>(v);
    else if (key == "lr_start_factor")
      c.lr_start_factor = nb::cast<double>(v);
    else if (key == "lr_end_factor")
      c.lr_end_factor = nb::cast<double>(v);
    else if (key == "muon_ns_steps")
      c.muon_ns_steps = nb::cast<int64_t>(v);
    else if (key == "muon_normalize_weights")
      c.muon_normalize_weights = nb::cast<bool>(v);
    else if (key == "param_groups")
      for (nb::handle item : nb::cast<nb::list>(v)) {
        ParamGroup g;
        for (auto [gk, gv] : nb::cast<nb::dict>(item)) {
          const std::string name = nb::cast<std::string>(gk);
          if (name == "match")
            g.match = nb::cast<std::string>(gv);
          else if (name == "layer")
            g.layer = nb::cast<std::string>(gv);
          else if (name == "lr_scale")
            g.lr_scale = nb::cast<double>(gv);
          else if (name == "weight_decay")
            g.weight_decay = nb::cast<double>(gv);
          else if (name == "frozen")
            g.frozen = nb::cast<bool>(gv);
          else if (name == "train_epochs")
            g.train_epochs = nb::cast<int64_t>(gv);
          else if (name == "schedule_over_train_epochs")
            g.schedule_over_train_epochs = nb::cast<bool>(gv);
          else if (name == "optimizer")
            g.optimizer = nb::cast<std::string>(gv);
          else if (name == "momentum")
            g.momentum = nb::cast<double>(gv);
          else
            throw nb::value_error(("configure: unknown param_groups key '" + name +
                                   "' (match, layer, lr_scale, weight_decay, frozen, train_epochs, "
                                   "schedule_over_train_epochs, optimizer, momentum)")
                                      .c_str());
        }
        c.param_groups.push_back(g);
      }
    else
      throw nb::value_error(("configure: unknown setting '" + key + "'").c_str());
  }
  return c;
}

nb::dict config_dict(const ModelConfig& c) {
  nb::dict d;
  d["loss"] = c.loss;
  d["label_smoothing"] = c.label_smoothing;
  d["optimizer"] = c.optimizer;
  d["lr"] = c.lr;
  d["momentum"] = c.momentum;
  d["nesterov"] = c.nesterov;
  d["weight_decay"] = c.weight_decay;
  d["beta1"] = c.beta1;
  d["beta2"] = c.beta2;
  d["eps"] = c.eps;
  d["schedule"] = c.schedule;
  d["warmup_fraction"] = c.warmup_fraction;
  d["metrics"] = c.metrics;
  d["clip_grad_norm"] = c.clip_grad_norm;
  d["regression_precision"] = c.regression_precision;
  d["lookahead_every"] = c.lookahead_every;
  d["lookahead_decay"] = c.lookahead_decay;
  d["lookahead_power"] = c.lookahead_power;
  d["lookahead_start_epoch"] = c.lookahead_start_epoch;
  d["lr_start_factor"] = c.lr_start_factor;
  d["lr_end_factor"] = c.lr_end_factor;
  d["muon_ns_steps"] = c.muon_ns_steps;
  d["muon_normalize_weights"] = c.muon_normalize_weights;
  nb::list groups;
  for (const ParamGroup& g : c.param_groups) {
    nb::dict gd;
    gd["match"] = g.match;
    gd["layer"] = g.layer;
    gd["lr_scale"] = g.lr_scale;
    gd["weight_decay"] = g.weight_decay;
    gd["frozen"] = g.frozen;
    gd["train_epochs"] = g.train_epochs;
    gd["schedule_over_train_epochs"] = g.schedule_over_train_epochs;
    gd["optimizer"] = g.optimizer;
    gd["momentum"] = g.momentum;
    groups.append(gd);
  }
  d["param_groups"] = groups;
  return d;
}

// TrainOptions from train()'s settings {"epochs", "batch_size", "shuffle", "seed", "crop_padding",
// "hflip", "alternate_flips", "crop_reflect", "drop_last", "mean", "std", "progress", "checkpoint",
// "max_steps", "sync_batch_norm", "class_weight": [float], "sample_weight": [float],
// "validation_sample_weight": [float], "early_stopping":
// {"monitor", "patience", "min_delta", "restore_best_weights"} or None, "reduce_lr": {"monitor", "factor",
// "patience", "min_delta", "cooldown", "min_lr"} or None}; a key left out keeps TrainOptions' default, an
// unknown one is an error.
TrainOptions train_options_from(const nb::dict& d) {
  TrainOptions o;
  for (auto [k, v] : d) {
    const std::string key = nb::cast<std::string>(k);
    if (key == "epochs")
      o.epochs = nb::cast<int64_t>(v);
    else if (key == "batch_size")
      o.data.batch_size = nb::cast<int64_t>(v);
    else if (key == "shuffle")
      o.data.shuffle = nb::cast<bool>(v);
    else if (key == "seed")
      o.data.seed = nb::cast<uint64_t>(v);
    else if (key == "crop_padding")
      o.data.crop_padding = nb::cast<int64_t>(v);
    else if (key == "hflip")
      o.data.hflip = nb::cast<bool>(v);
    else if (key == "alternate_flips")
      o.data.alternate_flips = nb::cast<bool>(v);
    else if (key == "crop_reflect")
      o.data.crop_reflect = nb::cast<bool>(v);
    else if (key == "drop_last")
      o.data.drop_last = nb::cast<bool>(v);
    else if (key == "mean")
      o.data.mean = nb::cast<std::vector<float>>(v);
    else if (key == "std")
      o.data.std = nb::cast<std::vector<float>>(v);
    else if (key == "progress")
      o.progress = nb::cast<bool>(v);
    else if (key == "checkpoint")
      o.checkpoint_path = nb::cast<std::string>(v);
    else if (key == "max_steps")
      o.max_steps_per_epoch = nb::cast<int64_t>(v);
    else if (key == "sync_batch_norm")
      o.sync_batch_norm = nb::cast<bool>(v);
    else if (key == "class_weight")
      o.class_weight = nb::cast<std::vector<double>>(v);
    else if (key == "sample_weight")
      o.sample_weight = nb::cast<std::vector<double>>(v);
    else if (key == "validation_sample_weight")
      o.validation_sample_weight = nb::cast<std::vector<double>>(v);
    else if (key == "early_stopping" && !v.is_none())
      o.early_stopping =
          EarlyStopping{nb::cast<std::string>(v["monitor"]), nb::cast<int64_t>(v["patience"]),
                        nb::cast<double>(v["min_delta"]), nb::cast<bool>(v["restore_best_weights"])};
    else if (key == "reduce_lr" && !v.is_none())
      o.reduce_lr_on_plateau =
          ReduceLrOnPlateau{nb::cast<std::string>(v["monitor"]), nb::cast<double>(v["factor"]),
                            nb::cast<int64_t>(v["patience"]),    nb::cast<double>(v["min_delta"]),
                            nb::cast<int64_t>(v["cooldown"]),    nb::cast<double>(v["min_lr"])};
    else if (key != "early_stopping" && key != "reduce_lr")
      throw nb::value_error(("aether: train: unknown option '" + key + "'").c_str());
  }
  return o;
}

// train()'s Python callables, each None when not given, called with the GIL:
//   on_batch(epoch, epochs, batch, batches, seen, loss, accuracy) after each step,
//   on_batch_begin(epoch, batch), on_epoch_begin(epoch), on_epoch(epoch_dict),
//   lr_schedule(epoch, lr) -> lr (TrainOptions::lr_schedule), and the validation's
//   on_validation_batch_begin(batch), on_validation_batch(batch, batches, seen, loss, accuracy).
struct Hooks {
  nb::object on_batch, on_batch_begin, on_epoch_begin, on_epoch, lr_schedule, on_validation_batch_begin,
      on_validation_batch;
  explicit Hooks(const nb::dict& d) {
    const std::pair<const char*, nb::object*> named[] = {
        {"on_batch", &on_batch},
        {"on_batch_begin", &on_batch_begin},
        {"on_epoch_begin", &on_epoch_begin},
        {"on_epoch", &on_epoch},
        {"lr_schedule", &lr_schedule},
        {"on_validation_batch_begin", &on_validation_batch_begin},
        {"on_validation_batch", &on_validation_batch}};
    for (auto& [name, f] : named) *f = d.contains(name) ? nb::borrow<nb::object>(d[name]) : nb::none();
    for (auto [k, v] : d) {
      const std::string key = nb::cast<std::string>(k);
      bool known = false;
      for (auto& [name, f] : named) known = known || key == name;
      if (!known) throw nb::value_error(("aether: train: unknown hook '" + key + "'").c_str());
    }
  }
  // Sets o's functions. They refer to this object's callables (copying a Python object needs the
  // GIL, which train() does not hold), so it must outlive o's use.
  void set(TrainOptions& o) const {
    // After every step, always: Ctrl-C (SIGINT sets a flag that only the main thread's Python sees).
    // Raising here unwinds train(); the checkpoint keeps the last epoch.
    o.on_batch = [this](const BatchProgress& p) {
      nb::gil_scoped_acquire gil;
      if (PyErr_CheckSignals() != 0) throw nb::python_error();
      if (!on_batch.is_none()) on_batch(p.epoch, p.epochs, p.batch, p.batches, p.seen, p.loss, p.accuracy);
    };
    if (!on_batch_begin.is_none())
      o.on_batch_begin = [this](int64_t epoch, int64_t batch) {
        nb::gil_scoped_acquire gil;
        on_batch_begin(epoch, batch);
      };
    if (!on_epoch_begin.is_none())
      o.on_epoch_begin = [this](int64_t epoch) {
        nb::gil_scoped_acquire gil;
        on_epoch_begin(epoch);
      };
    if (!on_epoch.is_none())
      o.on_epoch = [this](const EpochStats& e) {
        nb::gil_scoped_acquire gil;
        on_epoch(epoch_dict(e));
      };
    if (!lr_schedule.is_none())
      o.lr_schedule = [this](int64_t epoch, double lr) {
        nb::gil_scoped_acquire gil;
        return nb::cast<double>(lr_schedule(epoch, lr));
      };
    if (!on_validation_batch_begin.is_none())
      o.on_validation_batch_begin = [this](int64_t batch) {
        nb::gil_scoped_acquire gil;
        on_validation_batch_begin(batch);
      };
    if (!on_validation_batch.is_none())
      o.on_validation_batch = [this](const EvalProgress& p) {
        nb::gil_scoped_acquire gil;
        on_validation_batch(p.batch, p.batches, p.seen, p.loss, p.accuracy);
      };
  }
};

// EvalOptions whose hooks call Python's on_batch_begin(batch) and on_batch(batch, batches, seen, loss,
// accuracy, outputs) (outputs: predict's batch (B, K) as a Tensor, evaluate's None; None: no hook) with the
// GIL, and check for Ctrl-C after each batch. They refer to the callables, which must outlive the options.
EvalOptions eval_options(int64_t batch_size, TTA tta, const nb::object& on_batch_begin,
                         const nb::object& on_batch) {
  EvalOptions o;
  o.batch_size = batch_size;
  o.tta = tta;
  if (!on_batch_begin.is_none())
    o.on_batch_begin = [&on_batch_begin](int64_t batch) {
      nb::gil_scoped_acquire gil;
      on_batch_begin(batch);
    };
  // After every batch, always: Ctrl-C (as in train()) stops a long evaluation.
  o.on_batch = [&on_batch](const EvalProgress& p) {
    nb::gil_scoped_acquire gil;
    if (PyErr_CheckSignals() != 0) throw nb::python_error();
    if (on_batch.is_none()) return;
    if (p.outputs.defined())
      on_batch(p.batch, p.batches, p.seen, p.loss, p.accuracy, p.outputs);
    else
      on_batch(p.batch, p.batches, p.seen, p.loss, p.accuracy, nb::none());
  };
  return o;
}

// {"epochs": [epoch_dict...], "best_epoch": int (-1 without early stopping), "best": float (its
//  monitored number), "stopped_early": bool, "restored_best": bool}
nb::dict train(Model& model, const data::Dataset& train_set, std::shared_ptr<data::Dataset> validation,
               const nb::dict& options, const nb::dict& hooks) {
  TrainOptions o = train_options_from(options);
  o.validation = validation.get();
  const Hooks py_hooks(hooks);
  py_hooks.set(o);
  History h;
  {
    nb::gil_scoped_release release;
    h = model.train(train_set, o);
  }
  nb::list epochs;
  for (const auto& e : h.epochs) epochs.append(epoch_dict(e));
  nb::dict out;
  out["epochs"] = epochs;
  out["best_epoch"] = h.best_epoch;
  out["best"] = h.best;
  out["stopped_early"] = h.stopped_early;
  out["restored_best"] = h.restored_best;
  return out;
}

}  // namespace

void bind_model(nb::module_& m) {
  using nb::arg;
  // An optimizer over tensors for a training loop of one's own: aether.SGD(...).build(parameters).
  nb::class_<optim::Optimizer>(m, "Optimizer")
      .def(
          "step",
          [](optim::Optimizer& o) {
            nb::gil_scoped_release release;
            o.step();
          },
          "one update from the parameters' gradients (those without one are skipped), computed now")
      .def("zero_grad", &optim::Optimizer::zero_grad, "clears the parameters' gradients")
      .def_prop_rw("lr", &optim::Optimizer::lr, &optim::Optimizer::set_lr)
      .def_prop_ro("steps", &optim::Optimizer::steps)
      .def_prop_ro(
          "schedule",
          [](const optim::Optimizer& o) -> nb::object {
            return o.schedule() ? nb::cast(o.schedule()->config()) : nb::none();
          },
          "the schedule each step applies (its JSON), or None (build(total_steps=) attaches one)")
      .def("parameters", &optim::Optimizer::params)
      .def("__repr__", [](const optim::Optimizer& o) {
        return "Optimizer(" + o.type_name() + ", lr=" + std::to_string(o.lr()) + ", " +
               std::to_string(o.params().size()) + " parameters, " + std::to_string(o.steps()) + " steps)";
      });
  m.def("clip_grad_norm", &optim::clip_grad_norm, arg("parameters"), arg("max_norm"),
        "scales the parameters' gradients by min(1, max_norm / (norm + 1e-6)), norm the 2-norm of them all "
        "together (torch.nn.utils.clip_grad_norm_); returns norm");
  m.def(
      "_build_optimizer",
      [](const nb::dict& config, std::vector<Tensor> params, int64_t total_steps) {
        return build_optimizer(config_from(config), params, total_steps);
      },
      arg("config"), arg("parameters"), arg("total_steps"));
  nb::class_<Model>(m, "_Model")
      .def(nb::init<>())
      .def(
          "add", [](Model& mod, nn::ModulePtr l) { mod.add(std::move(l)); }, arg("layer"))
      .def(
          "configure", [](Model& mod, const nb::dict& d) { mod.configure(config_from(d)); }, arg("config"))
      .def_prop_ro("config", [](const Model& mod) { return config_dict(mod.config()); })
      .def(
          "to", [](Model& mod, const std::string& d) { mod.to(d); }, arg("device"))
      .def(
          "set_precision", [](Model& mod, const std::string& p) { mod.set_precision(p); }, arg("precision"))
      .def(
          "finalize", [](Model& mod, const Shape& s) { mod.finalize(s); }, arg("input_shape"))
      .def("train", &train, arg("dataset"), arg("validation").none(), arg("options"), arg("hooks"),
           "trains with the options and hooks described at train_options_from and Hooks")
      .def_prop_rw(
          "stop_training", [](const Model& mod) { return mod.stop_requested(); },
          [](Model& mod, bool stop) { mod.request_stop(stop); },
          "Keras' model.stop_training: set it (from a callback) to stop train() after the epoch it is in")
      .def_prop_ro("is_training", &Model::is_training, "inside train(), while its callbacks run")
      .def_prop_ro("learning_rate", &Model::learning_rate,
                   "the base learning rate: the optimizer's lr, or what a LearningRateScheduler last set")
      .def(
          "evaluate",
          [](Model& mod, const data::Dataset& ds, int64_t batch_size, const std::string& tta,
             nb::object on_batch_begin, nb::object on_batch, std::vector<double> sample_weight) {
            EvalOptions o = eval_options(batch_size, tta_from_name(tta), on_batch_begin, on_batch);
            o.sample_weight = std::move(sample_weight);
            EvalResult r;
            {
              nb::gil_scoped_release release;
              r = mod.evaluate(ds, o);
            }
            nb::dict d;
            d["loss"] = r.loss;
            d["accuracy"] = r.accuracy;
            d["top5"] = r.top5;
            d["samples"] = r.samples;
            d["seconds"] = r.seconds;
            d["confusion"] = r.confusion;  // (K*K) [label * K + predicted]; empty for targets
            d["class_accuracy"] = r.class_accuracy();
            return d;
          },
          arg("dataset"), arg("batch_size") = 256, arg("tta") = "none",
          arg("on_batch_begin").none() = nb::none(), arg("on_batch").none() = nb::none(),
          arg("sample_weight") = std::vector<double>{},
          "on_batch_begin(batch) before each batch, on_batch(batch, batches, seen, loss, accuracy, None) "
          "after it; sample_weight: one per sample (EvalOptions::sample_weight), or empty")
      .def(
          "predict",
          [](Model& mod, const data::Dataset& ds, int64_t batch_size, nb::object on_batch_begin,
             nb::object on_batch) {
            const EvalOptions o = eval_options(batch_size, TTA::none, on_batch_begin, on_batch);
            nb::gil_scoped_release release;
            return mod.predict(ds, o);
          },
          arg("dataset"), arg("batch_size") = 256, arg("on_batch_begin").none() = nb::none(),
          arg("on_batch").none() = nb::none(),
          "on_batch_begin(batch) before each batch, on_batch(batch, batches, seen, 0, 0, outputs) after it, "
          "outputs the batch's rows of the result (B, K)")
      .def(
          "predict_tensor",
          [](Model& mod, const Tensor& x) {
            nb::gil_scoped_release release;
            return mod.predict(x);
          },
          arg("images"))
      .def(
          "save",
          [](Model& mod, const std::string& path) {
            nb::gil_scoped_release release;
            try {
              mod.save(path);
            } catch (const Error& e) {  // a file that cannot be written: RuntimeError
              throw std::runtime_error(e.what());
            }
          },
          arg("path"))
      .def_static(
          "load",
          [](const std::string& path) {
            // Loading a Python layer calls back into Python (its from_config): keep the GIL.
            // A missing file: NotFoundError; a damaged or invalid one: RuntimeError, whatever its kind.
            try {
              return Model::load(path);
            } catch (const Error& e) {
              throw Error(e.what(),
                          e.kind() == ErrorKind::not_found ? ErrorKind::not_found : ErrorKind::runtime);
            }
          },
          arg("path"))
      .def("summary", &Model::summary)
      .def("get_weights", &Model::get_weights)
      .def("set_weights", &Model::set_weights, arg("values"))
      .def("save_weights", &Model::save_weights, arg("path"))
      .def("load_weights", &Model::load_weights, arg("path"))
      .def(
          "network", [](Model& mod) -> nn::Sequential& { return mod.network(); },
          nb::rv_policy::reference_internal)
      .def_prop_ro("epochs_done", &Model::epochs_done)
      .def_prop_ro("steps_done", &Model::steps_done)
      .def_prop_ro("input_shape", [](const Model& mod) { return mod.input_shape(); })
      .def_prop_ro("norm_mean", [](const Model& mod) { return mod.norm_mean(); })
      .def_prop_ro("norm_std", [](const Model& mod) { return mod.norm_std(); })
      .def_prop_rw(
          "info", [](Model& mod) { return mod.info(); },
          [](Model& mod, const std::string& j) { mod.set_info(j); },
          "extra JSON saved with the model (the text of a JSON object)");

  m.def(
      "_preset",
      [](const std::string& name, const Shape& image_shape, int64_t classes) {
        // The preset's network and recipe, as `aether train` builds them.
        Preset p = make_preset(name, image_shape, classes);
        std::vector<nn::ModulePtr> layers;
        for (auto& l : p.network->children()) layers.push_back(l.second);
        nb::dict data;
        data["batch_size"] = p.data.batch_size;
        data["crop_padding"] = p.data.crop_padding;
        data["hflip"] = p.data.hflip;
        data["alternate_flips"] = p.data.alternate_flips;
        data["crop_reflect"] = p.data.crop_reflect;
        data["drop_last"] = p.data.drop_last;
        data["epochs"] = p.epochs;
        data["tta"] = tta_name(p.tta);
        data["data_init"] = bool(p.init);
        return nb::make_tuple(layers, config_dict(p.config), data);
      },
      arg("name"), arg("image_shape"), arg("classes"));
  m.def(
      "_preset_init",
      [](const std::string& name, Model& mod, const data::Dataset& train_set, std::vector<float> mean,
         std::vector<float> std) {
        // The preset's data-dependent initialisation (airbench's whitening filters) of the model's network.
        const Preset p = make_preset(name, {train_set.h, train_set.w, train_set.c}, train_set.num_classes);
        if (!p.init) return;
        data::LoaderOptions lo;
        lo.mean = std::move(mean);
        lo.std = std::move(std);
        nb::gil_scoped_release release;
        p.init(mod.network(), train_set, lo);
      },
      arg("name"), arg("model"), arg("dataset"), arg("mean"), arg("std"));
  m.def("_preset_names", &preset_names);
  // Data-parallel jobs (docs/distributed.md): the first call joins the job the launcher's
  // environment describes (aether launch, torchrun, mpirun, srun); a world of one without it.
  m.def(
      "rank",
      [] {
        const dist::Communicator* c = dist::world();
        return c != nullptr ? c->rank() : 0;
      },
      "this process's rank in its data-parallel job (0 without a launcher)");
  m.def(
      "world_size",
      [] {
        const dist::Communicator* c = dist::world();
        return c != nullptr ? c->world_size() : 1;
      },
      "the number of ranks of this process's data-parallel job (1 without a launcher)");
}

}  // namespace aether::py
