// `aether train`, `aether evaluate`, `aether summary`: the Model API on real data from the CLI.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "aether/aether.h"
#include "aether/data/dataset.h"
#include "aether/dist/communicator.h"
#include "aether/io/file.h"
#include "aether/model/presets.h"
#include "args.h"
#include "commands.h"

namespace aether::cli {
namespace {
// A text entry of a model's info() ("model", "dataset"), or "" when it has none or another type.
std::string info_text(const nlohmann::json& info, const char* key) {
  const auto it = info.is_object() ? info.find(key) : info.end();
  return it != info.end() && it->is_string() ? it->get<std::string>() : "";
}

// Bounds of the numeric options (README, "The command line").
constexpr int64_t kMaxEpochs = 1'000'000;
constexpr int64_t kMaxBatchSize = 65'536;

// Options not given take the preset's (or the checkpoint's) values; given ones are checked as typed.
struct TrainArgs {
  TextArg dataset;  // default: a --resume checkpoint's, else the --model preset's, else fashion-mnist
  TextArg model, optimizer, epochs, batch_size, lr, seed, max_steps;
  TextArg validation_split, early_stopping, reduce_lr, reduce_lr_factor;
  std::string device = "cpu";
  std::string precision = "float32";
  TextArg save, resume, metrics_json;
  TextArg image_size;  // --dataset image-folder: "HxW" or "N" (N x N) to resize every image to
  std::string data_dir;
  bool quiet = false;
  bool overwrite = false;
  bool sync_batch_norm = false;
  std::string tta;  // "": the preset's (presets.h preset_tta)
};

// The numbers of a TrainArgs, checked.
struct TrainValues {
  std::optional<int64_t> epochs, batch_size, max_steps;
  std::optional<double> lr, validation_split;
  std::optional<int64_t> patience;            // --early-stopping
  std::optional<int64_t> reduce_lr_patience;  // --reduce-lr-on-plateau
  double reduce_lr_factor = 0.1;
  uint64_t seed = 1;
  std::optional<std::pair<int64_t, int64_t>> image_size;  // (height, width)
};

// `restarted`: a worker that `aether launch` started again resumes from its --save checkpoint,
// which its own command line wrote (so the options the checkpoint fixes may be given).
// "sgd", or with parameter groups under other optimizers "sgd+muon" (the config's first).
std::string optimizer_names(const ModelConfig& c) {
  std::string names = c.optimizer;
  std::vector<std::string> seen{c.optimizer};
  for (const ParamGroup& g : c.param_groups)
    if (!g.frozen && !g.optimizer.empty() && std::find(seen.begin(), seen.end(), g.optimizer) == seen.end()) {
      seen.push_back(g.optimizer);
      names += "+" + g.optimizer;
    }
  return names;
}

// --image-size: "HxW" or "N" (N x N), each side 1..65536.
std::pair<int64_t, int64_t> parse_image_size(const std::string& cmd, const std::string& text) {
  const size_t x = text.find('x');
  const std::string h = text.substr(0, x), w = x == std::string::npos ? h : text.substr(x + 1);
  AETHER_CHECK(!h.empty() && !w.empty(), cmd, "--image-size must be HxW or N, got ", shown(text));
  return {parse_int(cmd, "--image-size", h, 1, 65536), parse_int(cmd, "--image-size", w, 1, 65536)};
}

TrainValues check_train_args(const TrainArgs& a, bool restarted) {
  const std::string cmd = "train";
  TrainValues v;
  if (a.image_size.given()) {
    v.image_size = parse_image_size(cmd, a.image_size.text);
    // (With --resume and no --dataset the checkpoint names the data set: checked once it is read.)
    AETHER_CHECK(
        a.dataset.given() ? data::canonical_dataset_name(a.dataset.text) == "image-folder" : a.resume.given(),
        cmd, "--image-size is for --dataset image-folder (the other data sets have one image size)");
  }
  if (a.epochs.given()) v.epochs = parse_int(cmd, "--epochs", a.epochs.text, 1, kMaxEpochs);
  if (a.batch_size.given())
    v.batch_size = parse_int(cmd, "--batch-size", a.batch_size.text, 1, kMaxBatchSize);
  if (a.max_steps.given())
    v.max_steps =
        parse_int(cmd, "--max-steps-per-epoch", a.max_steps.text, 1, std::numeric_limits<int64_t>::max());
  if (a.lr.given()) v.lr = parse_positive_real(cmd, "--lr", a.lr.text);
  if (a.seed.given()) v.seed = parse_uint64(cmd, "--seed", a.seed.text);
  if (a.validation_split.given()) {
    v.validation_split = parse_positive_real(cmd, "--validation-split", a.validation_split.text);
    AETHER_CHECK(*v.validation_split < 1, cmd, "--validation-split must be below 1, got ",
                 a.validation_split.text);
  }
  // Both choose by the validation loss: the test set must not (its score would have selected them).
  if (a.early_stopping.given()) {
    v.patience = parse_int(cmd, "--early-stopping", a.early_stopping.text, 0, kMaxEpochs);
    AETHER_CHECK(a.validation_split.given() || a.resume.given(), cmd,
                 "--early-stopping needs --validation-split: it chooses the epoch by the validation ",
                 "loss, and the test set must not choose it");
  }
  if (a.reduce_lr.given()) {
    v.reduce_lr_patience = parse_int(cmd, "--reduce-lr-on-plateau", a.reduce_lr.text, 0, kMaxEpochs);
    AETHER_CHECK(a.validation_split.given() || a.resume.given(), cmd,
                 "--reduce-lr-on-plateau needs --validation-split: it follows the validation loss, and the ",
                 "test set must not steer training");
  }
  if (a.reduce_lr_factor.given()) {
    AETHER_CHECK(a.reduce_lr.given(), cmd, "--reduce-lr-factor needs --reduce-lr-on-plateau");
    v.reduce_lr_factor = parse_positive_real(cmd, "--reduce-lr-factor", a.reduce_lr_factor.text);
    AETHER_CHECK(v.reduce_lr_factor < 1, cmd, "--reduce-lr-factor must be below 1, got ",
                 a.reduce_lr_factor.text);
  }
  if (a.optimizer.given())
    AETHER_CHECK(a.optimizer.text == "sgd" || a.optimizer.text == "adam" || a.optimizer.text == "adamw", cmd,
                 "--optimizer ", shown(a.optimizer.text), " is not sgd, adam or adamw");
  (void)Device::parse(a.device);  // an unknown device name before any data is read
  if (a.resume.given()) {
    AETHER_CHECK(!a.resume.text.empty(), cmd, "--resume needs a file name");
    // What a resumed run takes from its checkpoint: giving it again is an error, not ignored.
    const std::pair<const TextArg*, const char*> fixed[] = {
        {&a.model, "the model"},       {&a.optimizer, "the optimizer"},
        {&a.lr, "the learning rate"},  {&a.batch_size, "the batch size"},
        {&a.seed, "the random state"}, {&a.validation_split, "the validation split"}};
    for (const auto& [arg, what] : fixed)
      AETHER_CHECK(restarted || !arg->given(), cmd, arg->name(),
                   " cannot be combined with --resume: the checkpoint fixes ", what);
  }
  // Output files: usable before any data is read or any epoch is trained, and never a checkpoint
  // replaced by accident.
  if (a.save.given()) {
    check_writable_file(a.save.text, cmd, "--save");
    const bool resumed_in_place = a.resume.given() && same_file(a.save.text, a.resume.text);
    AETHER_CHECK(a.overwrite || resumed_in_place || !std::filesystem::exists(a.save.text), cmd, "--save ",
                 shown(a.save.text, kPathChars),
                 " already exists; pass --overwrite to replace it (or --resume it to continue its training)");
  }
  if (a.metrics_json.given()) {
    check_writable_file(a.metrics_json.text, cmd, "--metrics-json");
    for (const TextArg* ck : {&a.save, &a.resume})
      AETHER_CHECK(!ck->given() || !same_file(a.metrics_json.text, ck->text), cmd, "--metrics-json ",
                   shown(a.metrics_json.text, kPathChars), " is the ", ck->name(), " checkpoint");
  }
  return v;
}

// A number for a message: "nan", "inf", "0.1234".
std::string num(double x) {
  char b[32];
  std::snprintf(b, sizeof b, "%.4g", x);
  return b;
}

// Images of `d` are what `model` takes: (H, W, C), or as many features for a flat input.
void check_images_fit(const std::string& cmd, const data::Dataset& d, const std::string& what,
                      const Model& model, const std::string& checkpoint) {
  const Shape& want = model.input_shape();
  const Shape got{d.h, d.w, d.c};
  AETHER_CHECK(want.size() == 1 ? want[0] == d.h * d.w * d.c : got == want, cmd, d.name, " ", what,
               " images are ", to_string(got), ", the model in ", checkpoint, " takes ", to_string(want));
}

std::string default_model(const std::string& dataset) {
  return data::canonical_dataset_name(dataset) == "cifar-10" ? "cifarnet" : "lenet";
}

void write_metrics(const std::string& path, const nlohmann::json& j) {
  write_file_atomic(path, j.dump(2) + "\n");
}

int run_train(const TrainArgs& given) {
  TrainArgs a = given;
  // Restarted by `aether launch --max-restarts`: continue from the last checkpoint written.
  const bool restarted = dist::restart_count() > 0 && a.save.given() && !a.resume.given() &&
                         std::filesystem::exists(a.save.text);
  if (restarted) a.resume = a.save;
  const TrainValues v = check_train_args(a, restarted);
  if (!a.tta.empty()) tta_from_name(a.tta);  // checked before any data is read
  // Several ranks (aether launch, torchrun, mpirun, srun): join them before reading any data; rank 0
  // prints and writes the files.
  const dist::Communicator* comm = dist::world();
  const bool root = comm == nullptr || comm->rank() == 0;
  auto print = [root](const char* fmt, auto... args) {
    if (root) std::printf(fmt, args...);
  };
  std::string ds_name = data::canonical_dataset_name(a.dataset.given() ? a.dataset.text
                                                     : a.model.given() ? preset_dataset(a.model.text)
                                                                       : "fashion-mnist");
  Model model;
  TrainOptions opt;
  std::string model_name;
  nlohmann::json info;  // the model's info(): preset and data set names, epochs, loader settings
  // The record `aether train` keeps in a checkpoint's info(), read back for --resume: a value of
  // another type is an error naming the file, not nlohmann's message alone.
  auto damaged_record = [&](const nlohmann::json::exception& e) {
    return Error(
        detail::cat("train: --resume ", a.resume.text,
                    ": its training record (the model's info) is not what aether train writes: ", e.what()),
        ErrorKind::runtime);
  };
  double resumed_split = 0;  // --resume: the validation split the checkpoint was trained with
  if (a.resume.given()) {    // the checkpoint first: a bad one fails before the data is read
    model = Model::load(a.resume.text);
    info = nlohmann::json::parse(model.info());
    // A checkpoint saved through the API (Python's or C++'s Model.save) has no loader settings to
    // continue with (it read "[json.exception.out_of_range.403] key 'loader' not found").
    AETHER_CHECK(info.contains("loader") && info["loader"].is_object(), "train", "--resume ", a.resume.text,
                 " was not written by aether train: it has none of the data loader's settings (batch size, "
                 "seed, augmentation) to continue with; continue it through the API that saved it (Python: "
                 "ae.Model.load(path).train(X, y, epochs=N))");
    try {
      model_name = info.value("model", std::string("?"));
      resumed_split = info["loader"].value("validation_split", 0.0);
      // Without --dataset, the one the checkpoint was trained on.
      if (!a.dataset.given()) ds_name = info.value("dataset", ds_name);
      AETHER_CHECK(info.value("dataset", ds_name) == ds_name, "train", "--resume ", a.resume.text,
                   " was trained on ", info.value("dataset", std::string("?")), ", not ", ds_name);
      opt.epochs = v.epochs ? *v.epochs : info.value("epochs", int64_t(1));
    } catch (const nlohmann::json::exception& e) {
      throw damaged_record(e);
    }
    AETHER_CHECK(opt.epochs > model.epochs_done(), "train", "--resume ", a.resume.text, " has done ",
                 model.epochs_done(), " epochs, ", v.epochs ? "--epochs asks for " : "its run was for ",
                 opt.epochs, ": nothing to train (pass a larger --epochs)");
    info["epochs"] = opt.epochs;  // the run it now belongs to: a later --resume continues up to it
  }
  AETHER_CHECK(!v.image_size || ds_name == "image-folder", "train",
               "--image-size is for --dataset image-folder (the other data sets have one image size)");
  const auto dir = data::resolve_data_dir(ds_name, a.data_dir);
  // An image folder's images are resized to --image-size, or to the size a resumed model takes.
  std::pair<int64_t, int64_t> size{0, 0};
  if (v.image_size) size = *v.image_size;
  if (ds_name == "image-folder" && a.resume.given() && model.input_shape().size() == 3) {
    const std::pair<int64_t, int64_t> takes{model.input_shape()[0], model.input_shape()[1]};
    AETHER_CHECK(!v.image_size || size == takes, "train", "--image-size ", a.image_size.text,
                 " differs from ", takes.first, "x", takes.second, ", the image size --resume ",
                 a.resume.text, " takes");
    size = takes;
  }
  data::Dataset train = data::load_dataset(ds_name, dir, data::Split::train, size.first, size.second);
  const data::Dataset test = data::load_dataset(ds_name, dir, data::Split::test, size.first, size.second);
  // --validation-split: the last part of the training set validates each epoch (a resumed run keeps
  // its checkpoint's split, so that it never trains on its validation images).
  const double split = a.resume.given() ? resumed_split : v.validation_split.value_or(0.0);
  AETHER_CHECK((!v.patience && !v.reduce_lr_patience) || split > 0, "train",
               v.patience ? "--early-stopping" : "--reduce-lr-on-plateau",
               " needs a validation split, and --resume ", a.resume.text,
               " was trained without --validation-split");
  data::Dataset held_out;
  if (split > 0) std::tie(train, held_out) = data::split_validation(train, split);
  AETHER_CHECK(test.h == train.h && test.w == train.w && test.c == train.c, "train", ds_name, " in ",
               dir.string(), ": its test images are ", to_string(Shape{test.h, test.w, test.c}),
               ", its training images ", to_string(Shape{train.h, train.w, train.c}));
  manual_seed(v.seed);
  if (a.resume.given()) {
    check_images_fit("train", train, "training", model, a.resume.text);
    model.to(a.device).set_precision(a.precision);  // the checkpoint loads on the CPU
    try {
      const auto& ls = info.at("loader");
      opt.data.batch_size = ls.at("batch_size");
      opt.data.seed = ls.at("seed");
      opt.data.crop_padding = ls.at("crop_padding");
      opt.data.hflip = ls.at("hflip");
      opt.data.alternate_flips = ls.value("alternate_flips", false);  // files from before it: random flips
      opt.data.crop_reflect = ls.value("crop_reflect", false);        // and zero padding,
      opt.data.drop_last = ls.value("drop_last", false);              // and every batch kept
    } catch (const nlohmann::json::exception& e) {
      throw damaged_record(e);
    }
    opt.data.mean = model.norm_mean();
    opt.data.std = model.norm_std();
    print("resuming %s from %s at epoch %lld/%lld (step %lld)\n", model_name.c_str(), a.resume.text.c_str(),
          static_cast<long long>(model.epochs_done() + 1), static_cast<long long>(opt.epochs),
          static_cast<long long>(model.steps_done()));
  } else {
    model_name = a.model.given() ? a.model.text : default_model(ds_name);
    Preset p = make_preset(model_name, {train.h, train.w, train.c}, train.num_classes);
    if (v.lr) p.config.lr = *v.lr;
    if (a.optimizer.given()) p.config.optimizer = a.optimizer.text;
    // --batch-size is per rank. Without it, several ranks share the preset's batch, so that they
    // follow the one-process recipe (global batch, steps, learning rates).
    if (v.batch_size)
      p.data.batch_size = *v.batch_size;
    else if (comm != nullptr)
      p.data.batch_size = std::max<int64_t>(1, p.data.batch_size / comm->world_size());
    opt.epochs = v.epochs ? *v.epochs : p.epochs;
    opt.data = p.data;
    opt.data.seed = v.seed;
    std::tie(opt.data.mean, opt.data.std) = data::channel_stats(train);
    if (p.init) p.init(*p.network, train, opt.data);  // on the CPU, before the model moves
    for (auto& l : p.network->children()) model.add(l.second);
    model.configure(p.config).to(a.device).set_precision(a.precision).finalize({train.h, train.w, train.c});
    info = {{"model", model_name}, {"dataset", ds_name}, {"epochs", opt.epochs}};
    if (!train.class_names.empty()) info["class_names"] = train.class_names;  // for predict's lines
  }
  info["loader"] = {{"batch_size", opt.data.batch_size},
                    {"seed", opt.data.seed},
                    {"crop_padding", opt.data.crop_padding},
                    {"hflip", opt.data.hflip},
                    {"alternate_flips", opt.data.alternate_flips},
                    {"crop_reflect", opt.data.crop_reflect},
                    {"drop_last", opt.data.drop_last},
                    {"validation_split", split}};
  model.set_info(info.dump());
  opt.validation = split > 0 ? &held_out : &test;
  if (v.patience) opt.early_stopping = EarlyStopping{.monitor = "val_loss", .patience = *v.patience};
  if (v.reduce_lr_patience)
    opt.reduce_lr_on_plateau =
        ReduceLrOnPlateau{.factor = v.reduce_lr_factor, .patience = *v.reduce_lr_patience};
  opt.max_steps_per_epoch = v.max_steps.value_or(0);
  opt.sync_batch_norm = a.sync_batch_norm;
  opt.progress = !a.quiet && root;
  // The checkpoint is written here, after each epoch whose numbers are finite: an epoch that
  // diverged stops the run and leaves the last good checkpoint in place.
  opt.on_epoch = [&](const EpochStats& e) {
    for (const auto& [name, x] : {std::pair<const char*, double>{"train_loss", e.train_loss},
                                  {"val_loss", e.val_loss.value_or(0)},
                                  {"val_accuracy", e.val_accuracy.value_or(0)}})
      AETHER_CHECK(std::isfinite(x), "train", "epoch ", e.epoch + 1, " ended with ", name, " ", num(x),
                   a.save.given() ? "; not saving it over " + a.save.text : std::string(),
                   "; try a lower learning rate");
    if (a.save.given() && root) model.save(a.save.text);
  };
  if (comm != nullptr)
    print("aether train: rank 0 of %d data-parallel ranks (%s), global batch %lld\n", comm->world_size(),
          comm->backend(), static_cast<long long>(opt.data.batch_size * comm->world_size()));
  print(
      "aether train: %s on %s (%lld train%s / %lld test images, %dx%dx%d), %lld epochs, batch %lld, "
      "%s lr %g, %s, %d threads\n",
      model_name.c_str(), ds_name.c_str(), static_cast<long long>(train.n),
      split > 0 ? (" / " + std::to_string(held_out.n) + " validation").c_str() : "",
      static_cast<long long>(test.n), int(train.h), int(train.w), int(train.c),
      static_cast<long long>(opt.epochs), static_cast<long long>(opt.data.batch_size),
      optimizer_names(model.config()).c_str(), model.config().lr, a.device.c_str(), omp_get_max_threads());
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  const History h = model.train(train, opt);
  if (profiling_enabled() && root) std::printf("%s", op_profile_report().c_str());
  if (h.restored_best && a.save.given() && root) model.save(a.save.text);  // on_epoch saved the last
  // Without a validation split the last epoch was already evaluated on the test set
  // (opt.validation): reuse it rather than evaluating the same weights on the same images again.
  EvalResult r;
  if (opt.validation == &test && !h.restored_best && !h.epochs.empty() && h.epochs.back().val_loss &&
      h.epochs.back().val_accuracy) {
    r.loss = *h.epochs.back().val_loss;
    r.accuracy = *h.epochs.back().val_accuracy;
    r.samples = test.n;
  } else {
    r = model.evaluate(test);
  }
  AETHER_CHECK(std::isfinite(r.loss) && std::isfinite(r.accuracy), "train", "the test loss is ", num(r.loss),
               " and the accuracy ", num(r.accuracy), "; try a lower learning rate");
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Training throughput: the epochs' own seconds exclude the validation passes.
  double images = 0, train_secs = 0, comm_wait = 0;
  for (const auto& e : h.epochs) {
    images += e.images_per_second * e.seconds;
    train_secs += e.seconds;
    comm_wait += e.comm_wait_seconds;
  }
  print("test accuracy %.2f%%  test loss %.4f  (%lld images)  time %.1f s\n", 100 * r.accuracy, r.loss,
        static_cast<long long>(r.samples), secs);
  const TTA tta = a.tta.empty() ? preset_tta(model_name) : tta_from_name(a.tta);
  std::optional<EvalResult> with_tta;  // the same weights, test-time augmented (after the timing)
  if (tta != TTA::none) {
    with_tta = model.evaluate(test, 256, tta);
    print("test accuracy with TTA %s %.2f%%  test loss %.4f  (%.1f s)\n", tta_name(tta),
          100 * with_tta->accuracy, with_tta->loss, with_tta->seconds);
  }
  if (comm != nullptr && train_secs > 0)
    print(
        "data-parallel: %.0f images/s over %d ranks; rank 0 waited %.1f s (%.1f%% of training) for "
        "gradient all-reduces\n",
        images / train_secs, comm->world_size(), comm_wait, 100 * comm_wait / train_secs);
  if (a.save.given()) print("saved %s\n", a.save.text.c_str());
  if (a.metrics_json.given() && root) {
    nlohmann::json epochs = nlohmann::json::array();
    for (const auto& e : h.epochs)
      epochs.push_back({{"epoch", e.epoch + 1},
                        {"train_loss", e.train_loss},
                        {"train_accuracy", e.train_accuracy},
                        {"val_loss", e.val_loss.value_or(NAN)},
                        {"val_accuracy", e.val_accuracy.value_or(NAN)},
                        {"lr", e.lr},
                        {"lr_reduced", e.lr_reduced},
                        {"seconds", e.seconds},
                        {"images_per_second", e.images_per_second}});
    nlohmann::json out = {{"dataset", ds_name},
                          {"model", model_name},
                          {"test_accuracy", r.accuracy},
                          {"test_loss", r.loss},
                          {"train_loss", h.epochs.empty() ? NAN : h.epochs.back().train_loss},
                          {"epochs", model.epochs_done()},
                          {"seconds", secs},
                          {"images_per_second", train_secs > 0 ? images / train_secs : 0},
                          {"ranks", comm != nullptr ? comm->world_size() : 1},
                          {"comm_wait_seconds", comm_wait},
                          {"history", epochs},
                          {"validation_split", split}};
    if (opt.early_stopping)
      out["early_stopping"] = {{"patience", opt.early_stopping->patience},
                               {"best_epoch", h.best_epoch + 1},
                               {"stopped_early", h.stopped_early},
                               {"restored_best", h.restored_best}};
    if (with_tta) {
      out["tta"] = tta_name(tta);
      out["test_accuracy_tta"] = with_tta->accuracy;
      out["test_loss_tta"] = with_tta->loss;
    }
    write_metrics(a.metrics_json.text, out);
  }
  return 0;
}

struct EvalArgs {
  std::string checkpoint, dataset, data_dir, device = "cpu", precision, tta = "none";
  TextArg metrics_json;
};
int run_evaluate(const EvalArgs& a) {
  if (a.metrics_json.given()) {
    check_writable_file(a.metrics_json.text, "evaluate", "--metrics-json");
    AETHER_CHECK(!same_file(a.metrics_json.text, a.checkpoint), "evaluate", "--metrics-json ",
                 shown(a.metrics_json.text, kPathChars), " is the --checkpoint");
  }
  const TTA tta = tta_from_name(a.tta);  // before the checkpoint and the data are read
  Model model = Model::load(a.checkpoint);
  model.to(a.device);
  if (!a.precision.empty()) model.set_precision(a.precision);
  const std::string trained_on = info_text(nlohmann::json::parse(model.info()), "dataset");
  AETHER_CHECK(!a.dataset.empty() || !trained_on.empty(), "evaluate", a.checkpoint,
               " does not record the data set it was trained on (a checkpoint written from Python or C++); "
               "pass --dataset fashion-mnist, cifar10 or image-folder");
  const std::string ds_name = data::canonical_dataset_name(a.dataset.empty() ? trained_on : a.dataset);
  // An image folder's images are resized to the size the model takes (images for a flat input keep
  // theirs).
  const Shape& takes = model.input_shape();
  const bool resize = ds_name == "image-folder" && takes.size() == 3;
  const data::Dataset test =
      data::load_dataset(ds_name, data::resolve_data_dir(ds_name, a.data_dir), data::Split::test,
                         resize ? takes[0] : 0, resize ? takes[1] : 0);
  check_images_fit("evaluate", test, "test", model, a.checkpoint);
  const EvalResult r = model.evaluate(test, 256, tta);
  AETHER_CHECK(std::isfinite(r.loss) && std::isfinite(r.accuracy) && std::isfinite(r.top5), "evaluate",
               a.checkpoint, " gives a loss of ", num(r.loss), " and an accuracy of ", num(r.accuracy),
               " on ", ds_name, " test: its outputs are not finite");
  std::printf("%s on %s test%s: accuracy %.2f%%  top-5 %.2f%%  loss %.4f  (%lld images, %.1f s)\n",
              a.checkpoint.c_str(), ds_name.c_str(),
              tta == TTA::none ? "" : (std::string(" with TTA ") + tta_name(tta)).c_str(), 100 * r.accuracy,
              100 * r.top5, r.loss, static_cast<long long>(r.samples), r.seconds);
  // Each class's accuracy, by the data set's class names (the model's outputs past them by number).
  const std::vector<double> per_class = r.class_accuracy();
  const auto k = int64_t(per_class.size());
  std::vector<std::string> names;
  for (int64_t c = 0; c < k; ++c)
    names.push_back(c < int64_t(test.class_names.size()) ? test.class_names[size_t(c)] : std::to_string(c));
  std::string line = "per class:";
  for (int64_t c = 0; c < k; ++c) {
    char pct[32] = "-";  // a class without test samples
    if (!std::isnan(per_class[size_t(c)]))
      std::snprintf(pct, sizeof pct, "%.1f%%", 100 * per_class[size_t(c)]);
    line += detail::cat(c == 0 ? " " : ", ", names[size_t(c)], " ", pct);
  }
  if (k > 0) std::printf("%s\n", line.c_str());
  if (a.metrics_json.given()) {
    nlohmann::json j = {{"test_accuracy", r.accuracy}, {"test_loss", r.loss},  {"top5", r.top5},
                        {"samples", r.samples},        {"seconds", r.seconds}, {"tta", tta_name(tta)}};
    if (k > 0) {
      nlohmann::json confusion = nlohmann::json::array(), accuracy = nlohmann::json::object();
      for (int64_t c = 0; c < k; ++c) {
        confusion.push_back(
            std::vector<int64_t>(r.confusion.begin() + c * k, r.confusion.begin() + (c + 1) * k));
        accuracy[names[size_t(c)]] = per_class[size_t(c)];  // NaN (no samples) is written as null
      }
      j["class_names"] = names;
      j["class_accuracy"] = accuracy;
      j["confusion_matrix"] = confusion;  // [label][predicted]
    }
    write_metrics(a.metrics_json.text, j);
  }
  return 0;
}

struct SummaryArgs {
  std::string model = "cifarnet", dataset, checkpoint;
};
// A checkpoint's network as it was saved, with what it was trained on and for how long.
int summarize_checkpoint(const std::string& path) {
  Model model = Model::load(path);
  const nlohmann::json info = nlohmann::json::parse(model.info());
  std::string trained = detail::cat(model.epochs_done(), " epochs (", model.steps_done(), " steps)");
  if (info.contains("epochs") && info["epochs"].is_number_integer())
    trained = detail::cat(model.epochs_done(), " of ", info["epochs"].get<int64_t>(), " epochs (",
                          model.steps_done(), " steps)");
  std::printf("%s: %s%s, trained %s, precision %s\n%s", path.c_str(),
              info_text(info, "model").empty() ? "a model" : info_text(info, "model").c_str(),
              info_text(info, "dataset").empty() ? "" : (" on " + info_text(info, "dataset")).c_str(),
              trained.c_str(), model.precision().c_str(), model.summary().c_str());
  return 0;
}
int run_summary(const SummaryArgs& a) {
  if (!a.checkpoint.empty()) return summarize_checkpoint(a.checkpoint);
  const std::string ds =
      data::canonical_dataset_name(a.dataset.empty() ? preset_dataset(a.model) : a.dataset);
  AETHER_CHECK(ds != "image-folder", "summary",
               "--dataset image-folder has no fixed image shape; give fashion-mnist or cifar10");
  const Shape s = ds == "cifar-10" ? Shape{32, 32, 3} : Shape{28, 28, 1};
  Preset p = make_preset(a.model, s, 10);
  Model model;
  for (auto& l : p.network->children()) model.add(l.second);
  model.configure(p.config).finalize(s);
  std::printf("%s for %s (input %s)\n%s", a.model.c_str(), ds.c_str(), to_string(s).c_str(),
              model.summary().c_str());
  return 0;
}
}  // namespace

void register_train(CLI::App& app) {
  static TrainArgs t;
  auto* cmd = app.add_subcommand("train", "Train a preset model on a real data set");
  add_text_option(
      *cmd, "--dataset", t.dataset,
      "fashion-mnist, cifar10 or image-folder (one's own images in --data-dir: train/<class>/<image>, "
      "test/<class>/<image>; default: the --resume checkpoint's, else the --model preset's: "
      "cifar10 for cifarnet, resnet20 and airbench*, else fashion-mnist)",
      "NAME");
  add_text_option(*cmd, "--model", t.model, "preset: " + preset_list() + " (default: lenet / cifarnet)",
                  "NAME");
  add_text_option(*cmd, "--epochs", t.epochs, "epochs, 1..1000000 (default: the preset's)", "INT");
  add_text_option(*cmd, "--batch-size", t.batch_size, "batch size, 1..65536 (default: the preset's)", "INT");
  add_text_option(*cmd, "--lr", t.lr, "peak learning rate, > 0 (default: the preset's)", "FLOAT");
  add_text_option(*cmd, "--optimizer", t.optimizer, "sgd, adam or adamw (default: the preset's)", "NAME");
  add_text_option(*cmd, "--seed", t.seed, "random seed (default: 1)", "UINT");
  cmd->add_option("--device", t.device, "cpu, cuda or cuda:N (aether devices lists them)")
      ->capture_default_str();
  cmd->add_option("--precision", t.precision,
                  "float32, or mixed bfloat16 / float16 (bf16, fp16: float32 master weights)")
      ->capture_default_str();
  add_text_option(*cmd, "--save", t.save, "write a checkpoint here after every epoch", "FILE");
  cmd->add_flag("--overwrite", t.overwrite, "let --save replace an existing file");
  add_text_option(*cmd, "--resume", t.resume, "continue training from this checkpoint", "FILE");
  add_text_option(
      *cmd, "--image-size", t.image_size,
      "--dataset image-folder: resize every image to HxW (or NxN) pixels (default: keep their size, "
      "which must be one)",
      "HxW");
  add_text_option(*cmd, "--metrics-json", t.metrics_json, "write final metrics here as JSON", "FILE");
  cmd->add_option("--data-dir", t.data_dir, "where the data set is (else $AETHER_DATA, else defaults)");
  add_text_option(*cmd, "--max-steps-per-epoch", t.max_steps, "cut epochs short, >= 1 (smoke runs)", "INT");
  cmd->add_flag("--quiet", t.quiet, "no progress bar");
  cmd->add_option("--tta", t.tta,
                  "after training, evaluate the test set again with test-time augmentation: none, flip or "
                  "flip_translate (default: the preset's; flip_translate for airbench94/93, else none)");
  add_text_option(*cmd, "--validation-split", t.validation_split,
                  "hold out this fraction of the training set (its end) to validate on after each epoch, "
                  "instead of the test set; 0 < F < 1",
                  "F");
  add_text_option(*cmd, "--early-stopping", t.early_stopping,
                  "stop once the validation loss has not improved for this many epochs in a row and keep "
                  "the best epoch's weights (needs --validation-split)",
                  "PATIENCE");
  add_text_option(*cmd, "--reduce-lr-on-plateau", t.reduce_lr,
                  "multiply the learning rate by --reduce-lr-factor (0.1) once the validation loss has not "
                  "improved for this many epochs in a row (needs --validation-split)",
                  "PATIENCE");
  add_text_option(*cmd, "--reduce-lr-factor", t.reduce_lr_factor,
                  "the factor of --reduce-lr-on-plateau, 0 < F < 1 (default 0.1)", "F");
  cmd->add_flag("--sync-batch-norm", t.sync_batch_norm,
                "on several ranks: batch-norm statistics of the global batch, not of each rank's");
  cmd->callback([] { exit_code() = run_train(t); });

  static EvalArgs e;
  auto* ev = app.add_subcommand("evaluate", "Evaluate a checkpoint on a data set's test split");
  ev->add_option("--checkpoint", e.checkpoint, "a .aether file")->required();
  ev->add_option("--dataset", e.dataset,
                 "fashion-mnist, cifar10 or image-folder (default: the one it was trained on)");
  ev->add_option("--data-dir", e.data_dir, "where the data set is");
  add_text_option(*ev, "--metrics-json", e.metrics_json, "write metrics here as JSON", "FILE");
  ev->add_option("--device", e.device, "cpu, cuda or cuda:N")->capture_default_str();
  ev->add_option("--precision", e.precision, "float32, bfloat16 or float16 (default: the checkpoint's)");
  ev->add_option("--tta", e.tta, "test-time augmentation: none, flip or flip_translate")
      ->capture_default_str();
  ev->callback([] { exit_code() = run_evaluate(e); });

  static SummaryArgs s;
  auto* su = app.add_subcommand("summary",
                                "Print a preset's or a checkpoint's layers, output shapes and parameters");
  auto* preset = su->add_option("--model", s.model, preset_list(" or"))->capture_default_str();
  auto* dataset = su->add_option("--dataset", s.dataset, "fashion-mnist or cifar10 (sets the input shape)");
  su->add_option("--checkpoint", s.checkpoint, "a .aether file: its network, and what it was trained on")
      ->excludes(preset)
      ->excludes(dataset);
  su->callback([] { exit_code() = run_summary(s); });
}

}  // namespace aether::cli
