// Data set loaders: Fashion-MNIST (IDX files) and CIFAR-10 (binary batches) into a host Dataset.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <type_traits>

#include "aether/core/error.h"
#include "aether/data/dataset.h"
#include "aether/data/image_folder.h"

namespace aether::data {
namespace fs = std::filesystem;
namespace {

const std::vector<std::string> kFashionClassNames = {
    "T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag", "Ankle boot"};
const std::vector<std::string> kCifarClassNames = {"airplane", "automobile", "bird",  "cat",  "deer",
                                                   "dog",      "frog",       "horse", "ship", "truck"};

// The first of dir/<stem><suffix> that exists, else throws naming what was looked for.
fs::path find_file(const fs::path& dir, const std::string& stem, const std::vector<std::string>& suffixes,
                   const char* op) {
  std::string tried;
  for (const auto& s : suffixes) {
    const fs::path p = dir / (stem + s);
    std::error_code ec;
    if (fs::is_regular_file(p, ec)) return p;
    tried += (tried.empty() ? "" : ", ") + p.string();
  }
  throw Error(detail::cat(op, ": missing file: tried ", tried), ErrorKind::not_found);
}

std::string trim(const std::string& s) {
  const auto b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(" \t\r\n") - b + 1);
}

std::vector<std::string> cifar_class_names(const fs::path& dir) {
  const fs::path meta = dir / "batches.meta.txt";
  std::ifstream in(meta);
  if (!in) return kCifarClassNames;
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    line = trim(line);
    if (!line.empty()) names.push_back(line);
  }
  if (names.size() != kCifarClassNames.size()) {
    throw Error(detail::cat(meta.string(), ": expected ", kCifarClassNames.size(),
                            " class names (one a line), got ", names.size()),
                ErrorKind::runtime);
  }
  return names;
}

// The first item of `n` rows of `row` float values (n * row) that holds a value that is not finite,
// with that value ("NaN", "Inf" or "-Inf"); {-1, ""} when every value is finite. A row is first
// tested as a whole (v - v is 0 for finite v, NaN otherwise), a loop the compiler vectorizes.
std::pair<int64_t, const char*> first_non_finite(const float* values, int64_t n, int64_t row) {
  for (int64_t i = 0; i < n; ++i) {
    const float* r = values + i * row;
    int bad = 0;
    for (int64_t j = 0; j < row; ++j) bad |= int(!(r[j] - r[j] == 0.0f));
    if (!bad) continue;
    for (int64_t j = 0; j < row; ++j)
      if (!std::isfinite(r[j])) return {i, std::isnan(r[j]) ? "NaN" : r[j] > 0 ? "Inf" : "-Inf"};
  }
  return {-1, ""};
}

}  // namespace

const char* split_name(Split s) {
  switch (s) {
    case Split::train: return "train";
    case Split::test: return "test";
  }
  return "?";
}

void Dataset::check() const {
  AETHER_CHECK(n >= 0 && h > 0 && w > 0 && c > 0, "Dataset", name, ": bad image shape (", n, ",", h, ",", w,
               ",", c, ")");
  if (float_images) {
    AETHER_CHECK(images.empty(), "Dataset", name, ": has both uint8 and float32 images");
    const auto [item, what] = first_non_finite(float_images, n, image_bytes());
    AETHER_CHECK(item < 0, "Dataset", name, ": the image of item ", item, " holds ", what,
                 "; images must be finite");
  } else {
    AETHER_CHECK(int64_t(images.size()) == n * h * w * c, "Dataset", name, ": ", images.size(),
                 " image bytes for shape (", n, ",", h, ",", w, ",", c, "), expected ", n * h * w * c);
  }
  if (has_targets()) {
    AETHER_CHECK(labels.empty() && num_classes == 0, "Dataset", name, ": has both labels and targets");
    AETHER_CHECK(int64_t(targets.size()) == n * target_dim, "Dataset", name, ": ", targets.size(),
                 " target values for ", n, " items of ", target_dim);
    const auto [item, what] = first_non_finite(targets.data(), n, target_dim);
    AETHER_CHECK(item < 0, "Dataset", name, ": the target of item ", item, " holds ", what,
                 "; targets must be finite");
    return;
  }
  AETHER_CHECK(int64_t(labels.size()) == n, "Dataset", name, ": ", labels.size(), " labels for ", n,
               " images");
  AETHER_CHECK(class_names.empty() || int(class_names.size()) == num_classes, "Dataset", name, ": ",
               class_names.size(), " class names for ", num_classes, " classes");
  for (size_t i = 0; i < labels.size(); ++i) {
    AETHER_CHECK(labels[i] >= 0 && labels[i] < num_classes, "Dataset", name, ": label ", labels[i],
                 " of item ", i, " is out of range, expected 0..", num_classes - 1);
  }
}

std::pair<std::vector<float>, std::vector<float>> channel_stats(const Dataset& d) {
  AETHER_CHECK(d.n > 0, "channel_stats", "data set '", d.name, "' is empty");
  AETHER_CHECK(!d.float_images, "channel_stats", "data set '", d.name, "' has no uint8 images");
  std::vector<double> s(size_t(d.c), 0), s2(size_t(d.c), 0);  // per channel: sum, sum of squares
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

std::pair<Dataset, Dataset> split_validation(const Dataset& d, double fraction) {
  AETHER_CHECK(fraction > 0 && fraction < 1, "validation_split", "must be in (0, 1), got ", fraction);
  const int64_t held = std::llround(double(d.n) * fraction), kept = d.n - held;
  AETHER_CHECK(held >= 1 && kept >= 1, "validation_split", fraction, " of the ", d.n, " items of '", d.name,
               "' leaves ", kept, " to train on and ", held, " to validate on; each needs at least one");
  // Items [from, from + count) of d: images (count,H,W,C), labels (count), targets (count, target_dim).
  auto part = [&](int64_t from, int64_t count) {
    Dataset p = d;
    p.n = count;
    const auto range = [&](const auto& v, int64_t per) {
      using V = std::decay_t<decltype(v)>;
      return v.empty() ? V() : V(v.begin() + from * per, v.begin() + (from + count) * per);
    };
    p.images = range(d.images, d.image_bytes());
    p.labels = range(d.labels, 1);
    p.targets = range(d.targets, d.target_dim);
    if (d.float_images) p.float_images = d.float_images + from * d.image_bytes();
    return p;
  };
  std::pair<Dataset, Dataset> out{part(0, kept), part(kept, held)};
  out.second.name += " (validation)";
  return out;
}

Dataset load_fashion_mnist(const fs::path& dir, Split split) {
  const std::string prefix = split == Split::train ? "train" : "t10k";
  const std::vector<std::string> suffixes = {".gz", ""};
  const fs::path images_path = find_file(dir, prefix + "-images-idx3-ubyte", suffixes, "load_fashion_mnist");
  const fs::path labels_path = find_file(dir, prefix + "-labels-idx1-ubyte", suffixes, "load_fashion_mnist");
  IdxImages images = read_idx_images(images_path.string());
  const std::vector<uint8_t> labels = read_idx_labels(labels_path.string(), int(kFashionClassNames.size()));
  if (int64_t(labels.size()) != images.n) {
    throw Error(detail::cat(images_path.string(), ": offset 4: image count ", images.n,
                            " does not match the ", labels.size(), " labels in ", labels_path.string()),
                ErrorKind::runtime);
  }
  Dataset ds;
  ds.name = "fashion-mnist";
  ds.split = split;
  ds.n = images.n;
  ds.h = images.rows;
  ds.w = images.cols;
  ds.c = 1;
  ds.num_classes = int(kFashionClassNames.size());
  ds.class_names = kFashionClassNames;
  ds.images = std::move(images.pixels);
  ds.labels.assign(labels.begin(), labels.end());
  return ds;
}

Dataset load_cifar10(const fs::path& dir, Split split, int64_t records_per_batch) {
  std::vector<std::string> stems;
  if (split == Split::train) {
    for (int i = 1; i <= 5; ++i) stems.push_back("data_batch_" + std::to_string(i));
  } else {
    stems.push_back("test_batch");
  }
  Dataset ds;
  ds.name = "cifar-10";
  ds.split = split;
  ds.h = ds.w = kCifarSide;
  ds.c = kCifarChannels;
  ds.num_classes = kCifarClasses;
  ds.class_names = cifar_class_names(dir);
  for (const auto& stem : stems) {
    const fs::path p = find_file(dir, stem, {".bin", ".bin.xz", ".bin.gz"}, "load_cifar10");
    ds.n += read_cifar10_batch(p.string(), ds.images, ds.labels, records_per_batch);
  }
  return ds;
}

Dataset load_dataset(const std::string& dataset_name, const fs::path& dir, Split split, int64_t height,
                     int64_t width) {
  const std::string name = canonical_dataset_name(dataset_name);
  if (name == "image-folder") return load_image_folder(dir, split, height, width);
  AETHER_CHECK(height == 0 && width == 0, "load_dataset", "a size to resize to (", height, "x", width,
               ") is for image folders; ", name, " has one image size");
  if (name == "fashion-mnist") return load_fashion_mnist(dir, split);
  return load_cifar10(dir, split);
}

}  // namespace aether::data
