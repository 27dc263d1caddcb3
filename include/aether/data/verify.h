// aether/data/verify.h - check data sets on disk: CIFAR-10's batch files against their published MD5s,
// Fashion-MNIST's IDX files for their structure (`aether data verify`).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace aether::data {

inline constexpr uint64_t kCifar10BatchBytes = 30730000;  // 10,000 records of 3,073 bytes

struct FileCheck {
  std::string name;            // "data_batch_1.bin"
  std::filesystem::path path;  // the file found (maybe ".xz"); empty when missing
  bool ok = false;
  uint64_t bytes = 0;  // decompressed size
  std::string md5;     // of the decompressed content (CIFAR-10)
  std::string expected_md5;
  std::string note;  // what matched, or what is wrong
};

struct VerifyReport {
  std::string dataset;
  std::filesystem::path dir;
  bool ok = false;  // every file ok
  std::vector<FileCheck> files;
  std::string summary() const;  // one line a file, then "OK" or "FAILED"
};

// The published MD5s of the decompressed CIFAR-10 batch files.
struct Cifar10Md5 {
  const char* name;
  const char* md5;
};
inline constexpr Cifar10Md5 kCifar10BatchMd5[] = {
    {"data_batch_1.bin", "5dd7e06a14cb22eb9f671a540d1b7c25"},
    {"data_batch_2.bin", "5ea93a67294ea407fff1d09f752e9692"},
    {"data_batch_3.bin", "942cd6a4bcdd0dd3c604fbe906cb4421"},
    {"data_batch_4.bin", "ae636b3ba5c66a11e91e8cb52e771fcb"},
    {"data_batch_5.bin", "53f37980c15c3d472c316c40844f3f0d"},
    {"test_batch.bin", "803d5f7f4d78ea53de84dbe85f74fb6d"},  // official order
};
// test_batch.bin of the shared copy (shared/data/cifar-10/README.md): the same 10,000 official
// test images and labels, ordered round-robin over the classes.
inline constexpr const char* kCifar10ReorderedTestMd5 = "a9ffd06ad4ad964e2565576b79102bdb";

// Checks each batch (".bin", ".bin.xz" or ".bin.gz", decompressed on the fly): 30,730,000 bytes
// and the published MD5; test_batch may instead match the reordered copy (the note says which).
VerifyReport verify_cifar10(const std::filesystem::path& dir);
// Checks the structure of the four IDX files: magic numbers, 60,000 / 10,000 images of 28x28 with
// as many labels, all labels 0..9, no missing or extra bytes.
VerifyReport verify_fashion_mnist(const std::filesystem::path& dir);

}  // namespace aether::data
