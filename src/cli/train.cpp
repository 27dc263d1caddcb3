// `aether train`, `aether evaluate`, `aether summary`: the Model API on real data from the CLI.
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "aether/aether.h"
#include "aether/data/dataset.h"
#include "aether/io/file.h"
#include "aether/model/presets.h"
#include "commands.h"

namespace aether::cli {
namespace {
struct TrainArgs {
  std::string dataset = "fashion-mnist";
  std::string model;  // default: per data set
  int64_t epochs = 0;  // 0: the preset's
  int64_t batch_size = 0;
  double lr = 0;
  std::string optimizer;
  uint64_t seed = 1;
  std::string device = "cpu";
  std::string precision = "float32";
  std::string save, resume, metrics_json, data_dir;
  int64_t max_steps = 0;
  bool quiet = false;
};

// Per-channel mean and std of a data set's training images (on the [0,1] scale).
std::pair<std::vector<float>, std::vector<float>> channel_stats(const data::Dataset& d) {
  std::vector<double> s(size_t(d.c), 0), s2(size_t(d.c), 0);
  const int64_t pixels = d.n * d.h * d.w;
  for (int64_t i = 0; i < pixels; ++i)
    for (int64_t c = 0; c < d.c; ++c) {
      const double v = d.images[size_t(i * d.c + c)] / 255.0;
      s[size_t(c)] += v;
      s2[size_t(c)] += v * v;
    }
  std::vector<float> mean, std;
  for (int64_t c = 0; c < d.c; ++c) {
    const double m = s[size_t(c)] / double(pixels);
    mean.push_back(float(m));
    std.push_back(float(std::sqrt(std::max(s2[size_t(c)] / double(pixels) - m * m, 1e-12))));
  }
  return {mean, std};
}

std::string default_model(const std::string& dataset) {
  return data::canonical_dataset_name(dataset) == "cifar-10" ? "cifarnet" : "lenet";
}

void write_metrics(const std::string& path, const nlohmann::json& j) {
  write_file_atomic(path, j.dump(2) + "\n");
}

int run_train(const TrainArgs& a) {
  const std::string ds_name = data::canonical_dataset_name(a.dataset);
  const auto dir = data::resolve_data_dir(ds_name, a.data_dir);
  const data::Dataset train = data::load_dataset(ds_name, dir, data::Split::train);
  const data::Dataset test = data::load_dataset(ds_name, dir, data::Split::test);
  manual_seed(a.seed);
  Model model;
  TrainOptions opt;
  std::string model_name;
  if (!a.resume.empty()) {
    model = Model::load(a.resume);
    model.to(a.device).set_precision(a.precision);  // the checkpoint loads on the CPU
    model_name = model.info().value("model", std::string("?"));
    AETHER_CHECK(model.info().value("dataset", ds_name) == ds_name, "train", "--resume ", a.resume,
                 " was trained on ", model.info().value("dataset", std::string("?")), ", not ", ds_name);
    opt.epochs = a.epochs > 0 ? a.epochs : model.info().value("epochs", int64_t(1));
    const auto& ls = model.info().at("loader");
    opt.data.batch_size = ls.at("batch_size");
    opt.data.seed = ls.at("seed");
    opt.data.crop_padding = ls.at("crop_padding");
    opt.data.hflip = ls.at("hflip");
    opt.data.mean = model.norm_mean();
    opt.data.std = model.norm_std();
    std::printf("resuming %s from %s at epoch %lld/%lld (step %lld)\n", model_name.c_str(), a.resume.c_str(),
                static_cast<long long>(model.epochs_done() + 1), static_cast<long long>(opt.epochs),
                static_cast<long long>(model.steps_done()));
  } else {
    model_name = a.model.empty() ? default_model(ds_name) : a.model;
    Preset p = make_preset(model_name, {train.h, train.w, train.c}, train.num_classes);
    if (a.lr > 0) p.config.lr = a.lr;
    if (!a.optimizer.empty()) p.config.optimizer = a.optimizer;
    if (a.batch_size > 0) p.data.batch_size = a.batch_size;
    for (auto& l : p.network->children()) model.add(l.second);
    model.configure(p.config).to(a.device).set_precision(a.precision).finalize({train.h, train.w, train.c});
    opt.epochs = a.epochs > 0 ? a.epochs : p.epochs;
    opt.data = p.data;
    opt.data.seed = a.seed;
    std::tie(opt.data.mean, opt.data.std) = channel_stats(train);
    model.info() = {{"model", model_name}, {"dataset", ds_name}, {"epochs", opt.epochs}};
  }
  model.info()["loader"] = {{"batch_size", opt.data.batch_size}, {"seed", opt.data.seed},
                            {"crop_padding", opt.data.crop_padding}, {"hflip", opt.data.hflip}};
  opt.validation = &test;
  opt.max_steps_per_epoch = a.max_steps;
  opt.progress = !a.quiet;
  opt.checkpoint_path = a.save;
  std::printf("aether train: %s on %s (%lld train / %lld test images, %dx%dx%d), %lld epochs, batch %lld, "
              "%s lr %g, %s, %d threads\n",
              model_name.c_str(), ds_name.c_str(), static_cast<long long>(train.n), static_cast<long long>(test.n),
              int(train.h), int(train.w), int(train.c), static_cast<long long>(opt.epochs),
              static_cast<long long>(opt.data.batch_size), model.config().optimizer.c_str(), model.config().lr,
              a.device.c_str(), omp_get_max_threads());
  std::fflush(stdout);
  const auto t0 = std::chrono::steady_clock::now();
  const History h = model.train(train, opt);
  if (profiling_enabled()) std::printf("%s", op_profile_report().c_str());
  // The last epoch was already evaluated on the test set (opt.validation): reuse it rather than
  // evaluating the same weights on the same images again.
  EvalResult r;
  if (!h.epochs.empty() && h.epochs.back().val_loss && h.epochs.back().val_accuracy) {
    r.loss = *h.epochs.back().val_loss;
    r.accuracy = *h.epochs.back().val_accuracy;
    r.samples = test.n;
  } else {
    r = model.evaluate(test);
  }
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Training throughput: the epochs' own seconds exclude the validation passes.
  double images = 0, train_secs = 0;
  for (const auto& e : h.epochs) {
    images += e.images_per_second * e.seconds;
    train_secs += e.seconds;
  }
  std::printf("test accuracy %.2f%%  test loss %.4f  (%lld images)  time %.1f s\n", 100 * r.accuracy, r.loss,
              static_cast<long long>(r.samples), secs);
  if (!a.save.empty()) std::printf("saved %s\n", a.save.c_str());
  if (!a.metrics_json.empty()) {
    nlohmann::json epochs = nlohmann::json::array();
    for (const auto& e : h.epochs)
      epochs.push_back({{"epoch", e.epoch + 1}, {"train_loss", e.train_loss}, {"train_accuracy", e.train_accuracy},
                        {"val_loss", e.val_loss.value_or(NAN)}, {"val_accuracy", e.val_accuracy.value_or(NAN)},
                        {"seconds", e.seconds}, {"images_per_second", e.images_per_second}});
    write_metrics(a.metrics_json,
                  {{"dataset", ds_name}, {"model", model_name}, {"test_accuracy", r.accuracy}, {"test_loss", r.loss},
                   {"train_loss", h.epochs.empty() ? NAN : h.epochs.back().train_loss},
                   {"epochs", model.epochs_done()}, {"seconds", secs},
                   {"images_per_second", train_secs > 0 ? images / train_secs : 0}, {"history", epochs}});
  }
  return 0;
}

struct EvalArgs {
  std::string checkpoint, dataset, data_dir, metrics_json, device = "cpu";
};
int run_evaluate(const EvalArgs& a) {
  Model model = Model::load(a.checkpoint);
  model.to(a.device);
  const std::string ds_name =
      data::canonical_dataset_name(a.dataset.empty() ? model.info().value("dataset", std::string()) : a.dataset);
  const data::Dataset test =
      data::load_dataset(ds_name, data::resolve_data_dir(ds_name, a.data_dir), data::Split::test);
  const EvalResult r = model.evaluate(test);
  std::printf("%s on %s test: accuracy %.2f%%  top-5 %.2f%%  loss %.4f  (%lld images, %.1f s)\n",
              a.checkpoint.c_str(), ds_name.c_str(), 100 * r.accuracy, 100 * r.top5, r.loss,
              static_cast<long long>(r.samples), r.seconds);
  if (!a.metrics_json.empty())
    write_metrics(a.metrics_json, {{"test_accuracy", r.accuracy}, {"test_loss", r.loss}, {"top5", r.top5},
                                   {"samples", r.samples}, {"seconds", r.seconds}});
  return 0;
}

struct SummaryArgs {
  std::string model = "cifarnet", dataset;
};
int run_summary(const SummaryArgs& a) {
  const std::string ds = a.dataset.empty() ? (a.model == "cifarnet" ? "cifar-10" : "fashion-mnist")
                                           : data::canonical_dataset_name(a.dataset);
  const Shape s = ds == "cifar-10" ? Shape{32, 32, 3} : Shape{28, 28, 1};
  Preset p = make_preset(a.model, s, 10);
  Model model;
  for (auto& l : p.network->children()) model.add(l.second);
  model.configure(p.config).finalize(s);
  std::printf("%s for %s (input %s)\n%s", a.model.c_str(), ds.c_str(), to_string(s).c_str(), model.summary().c_str());
  return 0;
}
}  // namespace

void register_train(CLI::App& app) {
  static TrainArgs t;
  auto* cmd = app.add_subcommand("train", "Train a preset model on a real data set");
  cmd->add_option("--dataset", t.dataset, "fashion-mnist or cifar10")->capture_default_str();
  cmd->add_option("--model", t.model, "preset: mlp, lenet, cifarnet (default: lenet / cifarnet)");
  cmd->add_option("--epochs", t.epochs, "epochs (default: the preset's)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch-size", t.batch_size, "batch size (default: the preset's)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--lr", t.lr, "peak learning rate (default: the preset's)")->check(CLI::NonNegativeNumber);
  cmd->add_option("--optimizer", t.optimizer, "sgd, adam or adamw (default: the preset's)");
  cmd->add_option("--seed", t.seed, "random seed")->capture_default_str();
  cmd->add_option("--device", t.device, "cpu, cuda or cuda:N (aether devices lists them)")->capture_default_str();
  cmd->add_option("--precision", t.precision, "float32")->capture_default_str();
  cmd->add_option("--save", t.save, "write a checkpoint here after every epoch");
  cmd->add_option("--resume", t.resume, "continue training from this checkpoint");
  cmd->add_option("--metrics-json", t.metrics_json, "write final metrics here as JSON");
  cmd->add_option("--data-dir", t.data_dir, "where the data set is (else $AETHER_DATA, else defaults)");
  cmd->add_option("--max-steps-per-epoch", t.max_steps, "cut epochs short (smoke runs)");
  cmd->add_flag("--quiet", t.quiet, "no progress bar");
  cmd->callback([] { exit_code() = run_train(t); });

  static EvalArgs e;
  auto* ev = app.add_subcommand("evaluate", "Evaluate a checkpoint on a data set's test split");
  ev->add_option("--checkpoint", e.checkpoint, "a .aether file")->required();
  ev->add_option("--dataset", e.dataset, "fashion-mnist or cifar10 (default: the one it was trained on)");
  ev->add_option("--data-dir", e.data_dir, "where the data set is");
  ev->add_option("--metrics-json", e.metrics_json, "write metrics here as JSON");
  ev->add_option("--device", e.device, "cpu, cuda or cuda:N")->capture_default_str();
  ev->callback([] { exit_code() = run_evaluate(e); });

  static SummaryArgs s;
  auto* su = app.add_subcommand("summary", "Print a preset's layers, output shapes and parameters");
  su->add_option("--model", s.model, "mlp, lenet or cifarnet")->capture_default_str();
  su->add_option("--dataset", s.dataset, "fashion-mnist or cifar10 (sets the input shape)");
  su->callback([] { exit_code() = run_summary(s); });
}

}  // namespace aether::cli
