// `aether data fetch|verify` and `aether predict`.
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/data/dataset.h"
#include "aether/data/image_folder.h"
#include "aether/data/readers.h"
#include "aether/model/model.h"
#include "args.h"
#include "commands.h"
#include "fetch/fetch.h"

namespace aether::cli {
namespace {
struct DataArgs {
  std::string dataset = "cifar10", dest, url = data::kCifar10Url, md5 = data::kCifar10TarMd5, data_dir;
};

int run_fetch(const DataArgs& a) {
  const std::string name = data::canonical_dataset_name(a.dataset);
  AETHER_CHECK(name == "cifar-10", "data fetch",
               "only cifar10 can be fetched; Fashion-MNIST comes from Debian's "
               "dataset-fashion-mnist package (apt-get install dataset-fashion-mnist)");
  const auto dest = a.dest.empty() ? data::default_download_dir(name) : std::filesystem::path(a.dest);
  std::printf("downloading %s to %s\n", a.url.c_str(), dest.c_str());
  int last = -1;
  const auto r = data::fetch_cifar10(dest, a.url, a.md5, [&](uint64_t done, uint64_t total) {
    const int pct = total ? int(100 * done / total) : -1;
    if (pct != last && pct % 10 == 0) {
      std::printf("  %3d%% (%llu bytes)\n", pct, static_cast<unsigned long long>(done));
      std::fflush(stdout);
      last = pct;
    }
  });
  std::printf("md5 %s ok; %zu files in %s\n", r.archive_md5.c_str(), r.files.size(), r.dir.c_str());
  return 0;
}

int run_verify(const DataArgs& a) {
  const std::string name = data::canonical_dataset_name(a.dataset);
  const auto dir = data::resolve_data_dir(name, a.data_dir);
  if (name == "image-folder") {  // no reference checksums: read every image of both splits
    for (const data::Split split : {data::Split::train, data::Split::test}) {
      const data::Dataset d = data::load_image_folder(dir, split);
      std::vector<int64_t> per_class(size_t(d.num_classes), 0);
      for (const int64_t l : d.labels) ++per_class[size_t(l)];
      std::string counts;
      for (int c = 0; c < d.num_classes; ++c)
        counts += detail::cat(c == 0 ? "" : ", ", d.class_names[size_t(c)], " ", per_class[size_t(c)]);
      std::printf("%s: %lld images (%lld, %lld, %lld), %d classes: %s\n", data::split_name(split),
                  static_cast<long long>(d.n), static_cast<long long>(d.h), static_cast<long long>(d.w),
                  static_cast<long long>(d.c), d.num_classes, counts.c_str());
    }
    return 0;
  }
  const auto rep = name == "cifar-10" ? data::verify_cifar10(dir) : data::verify_fashion_mnist(dir);
  std::printf("%s", rep.summary().c_str());
  return rep.ok ? 0 : 1;
}

struct PredictArgs {
  std::string checkpoint, input, device = "cpu", precision;  // precision: "" keeps the checkpoint's
  TextArg limit;                                             // default 10; 0: all
};
// Reads images from an IDX image file, a CIFAR-10 batch, an image file or a folder of them (each
// converted to the model's channels and resized to its size): (N,H,W,C) uint8. `files`: the image
// files read, in order (empty for IDX and CIFAR-10).
data::Dataset read_images(const std::string& path, const Shape& want,
                          std::vector<std::filesystem::path>& files) {
  data::Dataset d;
  d.name = path;
  const std::string f = std::filesystem::path(path).filename().string();
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec) || data::is_image_file_name(path)) {
    AETHER_CHECK(want.size() == 3, "predict", "the model takes flat input ", to_string(want),
                 ", not images (H, W, C)");
    files = std::filesystem::is_directory(path, ec) ? data::image_files(path)
                                                    : std::vector<std::filesystem::path>{path};
    AETHER_CHECK(!files.empty(), "predict", path, " holds no image (", data::kImageExtensions, ")");
    d = data::load_images(files, want[0], want[1], want[2]);
  } else if (f.find("idx3") != std::string::npos) {
    const auto img = data::read_idx_images(path);
    d.n = img.n, d.h = img.rows, d.w = img.cols, d.c = 1;
    d.images = img.pixels;
  } else {
    // Anything else is read as a CIFAR-10 batch: a file that is not one is named as what it is not.
    try {
      d.n = data::read_cifar10_batch(path, d.images, d.labels, 0);
    } catch (const Error& e) {
      if (!std::filesystem::is_regular_file(path, ec)) throw;  // "cannot open": nothing to add
      throw Error(detail::cat("predict: ", path, " is not an image file (", data::kImageExtensions,
                              "), an IDX image file (a name with idx3) or a CIFAR-10 batch: ", e.what()),
                  e.kind());
    }
    d.h = d.w = data::kCifarSide;
    d.c = data::kCifarChannels;
  }
  AETHER_CHECK(Shape({d.h, d.w, d.c}) == want, "predict", path, " holds images of shape (", d.h, ", ", d.w,
               ", ", d.c, "), the model expects ", to_string(want));
  d.labels.assign(size_t(d.n), 0);
  d.num_classes = 1;
  return d;
}

int run_predict(const PredictArgs& a) {
  const int64_t limit =
      a.limit.given() ? parse_int("predict", "--limit", a.limit.text, 0, std::numeric_limits<int64_t>::max())
                      : 10;
  Model model = Model::load(a.checkpoint);
  model.to(a.device);
  if (!a.precision.empty()) model.set_precision(a.precision);
  std::vector<std::filesystem::path> files;  // image files: their names end each line
  data::Dataset d = read_images(a.input, model.input_shape(), files);
  if (limit > 0 && d.n > limit) {
    d.n = limit;
    d.images.resize(size_t(d.n * d.image_bytes()));
    d.labels.resize(size_t(d.n));
  }
  const Tensor probs = model.predict(d);  // (n, k): probabilities, or mse's values
  const auto p = probs.to_vector<float>();
  const int64_t k = probs.shape()[1];
  const bool regression = model.config().loss == "mse";
  // Every output is checked before any line is printed.
  for (size_t i = 0; i < p.size(); ++i)
    AETHER_CHECK(std::isfinite(p[i]), "predict", a.checkpoint, " gives ",
                 regression ? "an output" : "a probability", " of ", p[i], " for image ", int64_t(i) / k,
                 " of ", a.input, ": its outputs are not finite");
  if (regression) {  // mse: the k values themselves; an argmax of them would mean nothing
    for (int64_t i = 0; i < d.n; ++i) {
      std::printf("%lld\tvalues", static_cast<long long>(i));
      for (int64_t j = 0; j < k; ++j) std::printf(" %.6g", double(p[size_t(i * k + j)]));
      std::printf("\n");
    }
    return 0;
  }
  const auto classes = probs.argmax(1).to_vector<int64_t>();
  // One sigmoid output (binary_cross_entropy): class 1 when its probability is over 0.5.
  const bool binary = k == 1 && model.config().loss == "binary_cross_entropy";
  // The class names `aether train` saved with the model (info "class_names"), when it did.
  const nlohmann::json info = nlohmann::json::parse(model.info(), nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> names;
  if (info.is_object() && info.contains("class_names") && info["class_names"].is_array())
    for (const auto& n : info["class_names"]) names.push_back(n.is_string() ? n.get<std::string>() : "?");
  for (int64_t i = 0; i < d.n; ++i) {
    const int64_t c = binary ? int64_t(p[size_t(i)] > 0.5f) : classes[size_t(i)];
    const float pc = binary ? (c == 1 ? p[size_t(i)] : 1 - p[size_t(i)]) : p[size_t(i * k + c)];
    std::string line = detail::cat(i, "\tclass ", c);
    char prob[32];
    std::snprintf(prob, sizeof prob, "\tp=%.3f", double(pc));
    line += prob;
    if (c < int64_t(names.size())) line += "\t" + names[size_t(c)];
    if (i < int64_t(files.size())) line += "\t" + files[size_t(i)].string();
    std::printf("%s\n", line.c_str());
  }
  return 0;
}
}  // namespace

void register_data(CLI::App& app) {
  static DataArgs d;
  auto* cmd = app.add_subcommand("data", "Fetch or verify data sets");
  cmd->require_subcommand(1);
  auto* fetch = cmd->add_subcommand("fetch", "Download CIFAR-10 and check its md5");
  fetch->add_option("dataset", d.dataset, "cifar10")->capture_default_str();
  fetch->add_option("--dest", d.dest, "destination (default: ~/.local/share/aether/cifar-10)");
  fetch->add_option("--url", d.url, "archive URL")->capture_default_str();
  fetch->add_option("--md5", d.md5, "expected md5 of the archive")->capture_default_str();
  fetch->callback([] { exit_code() = run_fetch(d); });
  auto* verify = cmd->add_subcommand("verify", "Check a data set's files (sizes, structure, md5)");
  verify->add_option("dataset", d.dataset, "cifar10, fashion-mnist or image-folder (reads every image)")
      ->capture_default_str();
  verify->add_option("--data-dir", d.data_dir, "where the data set is");
  verify->callback([] { exit_code() = run_verify(d); });

  static PredictArgs p;
  auto* pr =
      app.add_subcommand("predict", "Classify images with a checkpoint (an mse model: print its outputs)");
  pr->add_option("--checkpoint", p.checkpoint, "a .aether file")->required();
  pr->add_option(
        "input", p.input,
        "an IDX image file (Fashion-MNIST), a CIFAR-10 batch file, an image file (.png, .jpg, ...) or a "
        "folder of them (resized to the model's input)")
      ->required();
  add_text_option(*pr, "--limit", p.limit, "at most this many images (default 10; 0: all)", "INT");
  pr->add_option("--device", p.device, "cpu, cuda or cuda:N")->capture_default_str();
  pr->add_option("--precision", p.precision, "float32, bfloat16 or float16 (default: the checkpoint's)");
  pr->callback([] { exit_code() = run_predict(p); });
}

}  // namespace aether::cli
