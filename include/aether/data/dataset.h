// aether/data/dataset.h - host-side data sets (Fashion-MNIST, CIFAR-10) and where they live.
//
//   auto dir = aether::data::resolve_data_dir("cifar-10", cli_data_dir);  // --data-dir, or defaults
//   aether::data::Dataset train = aether::data::load_cifar10(dir, aether::data::Split::train);
//   // train.images (N,32,32,3) uint8, train.labels (N) int64
//
// Images stay uint8 on the host; the DataLoader (loader.h) turns batches into float32 tensors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "aether/data/readers.h"

namespace aether::data {

enum class Split { train, test };
const char* split_name(Split s);  // "train", "test"

struct Dataset {
  std::string name;  // "fashion-mnist", "cifar-10"
  Split split = Split::train;
  int64_t n = 0, h = 0, w = 0, c = 0;  // images (N,H,W,C)
  int num_classes = 0;
  std::vector<std::string> class_names;  // num_classes names, in label order
  std::vector<uint8_t> images;           // (N,H,W,C) uint8
  std::vector<int64_t> labels;           // (N) int64, each in [0, num_classes)
  // Arrays handed over from Python, without a copy: float32 images (N,H,W,C) used instead of
  // `images` when set (taken as they are: no /255, mean/std still apply), kept alive by
  // `keep_alive`; and regression targets (N, target_dim) float32, used instead of labels when
  // target_dim > 0 (then num_classes is 0 and labels is empty).
  const float* float_images = nullptr;
  std::shared_ptr<const void> keep_alive;
  int64_t target_dim = 0;
  std::vector<float> targets;

  int64_t image_bytes() const { return h * w * c; }  // values of one image (bytes for uint8)
  const uint8_t* image(int64_t i) const { return images.data() + i * image_bytes(); }     // (H,W,C)
  const float* float_image(int64_t i) const { return float_images + i * image_bytes(); }  // (H,W,C)
  bool has_targets() const { return target_dim > 0; }
  // Throws aether::Error when the sizes of images/labels/targets disagree with n, h, w, c or a label
  // is out of range.
  void check() const;
};

// Per-channel mean and std of a data set's uint8 images on the [0,1] scale (the normalisation
// `aether train` uses); one value per channel.
std::pair<std::vector<float>, std::vector<float>> channel_stats(const Dataset& d);

// The data set's items split in two, in order, as Keras' validation_split does: the first ones
// for training and the last round(n * fraction) for validation (named "<name> (validation)").
// Throws aether::Error unless 0 < fraction < 1 and both parts get at least one item. Copies the
// uint8 images, labels and targets; float32 images are shared (offset into the same array).
std::pair<Dataset, Dataset> split_validation(const Dataset& d, double fraction);

// Fashion-MNIST from `dir`: train-images-idx3-ubyte[.gz], train-labels-idx1-ubyte[.gz] (test:
// t10k-...). Images (N,28,28,1); 10 classes. A ".gz" file is preferred when both exist.
Dataset load_fashion_mnist(const std::filesystem::path& dir, Split split);

// CIFAR-10 from `dir`: data_batch_1..5 (train) or test_batch, each ".bin" or ".bin.xz" (or
// ".bin.gz"); images (N,32,32,3). Each file must hold `records_per_batch` records (0: any whole
// number). Class names come from batches.meta.txt when the directory has one.
Dataset load_cifar10(const std::filesystem::path& dir, Split split,
                     int64_t records_per_batch = kCifarRecordsPerBatch);

// Loads "fashion-mnist", "cifar-10" or "image-folder" (aether/data/image_folder.h) by name. An
// image folder's images are resized to (height, width) unless both are 0; the fixed-size sets
// refuse a size (aether::Error).
Dataset load_dataset(const std::string& dataset_name, const std::filesystem::path& dir, Split split,
                     int64_t height = 0, int64_t width = 0);

// ---- where data lives ------------------------------------------------------------------------------
// Canonical data set name for "fashion-mnist" / "fashion_mnist" / "fashionmnist", "cifar-10" /
// "cifar10" and "image-folder" / "image_folder" / "folder"; throws aether::Error for an unknown name.
// An image folder has no default directory: --data-dir or AETHER_DATA names it.
std::string canonical_dataset_name(const std::string& dataset_name);

// True when `dir` holds at least one split of the data set (by file names, not contents).
bool has_dataset_files(const std::string& dataset_name, const std::filesystem::path& dir);

// The directories resolve_data_dir tries, in order (duplicates removed):
//   1. cli_dir, then cli_dir/<name>, when cli_dir is not empty (and nothing else);
//   2. else $AETHER_DATA and $AETHER_DATA/<name>, when AETHER_DATA is set (and nothing else);
//   3. else the defaults:
//      fashion-mnist: /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist),
//      cifar-10: shared/data/cifar-10 and ../shared/data/cifar-10 relative to the current
//      directory and to the executable's directory, and each of their parents;
//      then default_download_dir(name).
std::vector<std::filesystem::path> data_dir_candidates(const std::string& dataset_name,
                                                       const std::string& cli_dir = "");
// The first candidate that has_dataset_files; else throws aether::Error listing every candidate.
// `dir_option` is how the caller's user gives cli_dir, for the error: a flag ("--data-dir", then
// "pass --data-dir DIR") or a keyword argument ("data_dir", then "pass data_dir=DIR").
std::filesystem::path resolve_data_dir(const std::string& dataset_name, const std::string& cli_dir = "",
                                       const std::string& dir_option = "--data-dir");
// Where `aether data fetch` puts a data set: $XDG_DATA_HOME/aether/<name>, else
// $HOME/.local/share/aether/<name>.
std::filesystem::path default_download_dir(const std::string& dataset_name);

}  // namespace aether::data
