// aether/data/fetch.h - download CIFAR-10 (libcurl), check it (MD5), unpack it; verify data sets.
//
//   auto r = aether::data::fetch_cifar10(aether::data::default_download_dir("cifar-10"));
//   auto v = aether::data::verify_cifar10(r.dir);   // v.ok, v.summary()
//
// Downloads go to a temporary file in the destination directory; the archive's MD5 is checked
// before anything is unpacked; the batch files are unpacked to temporary names and renamed into
// place only when the whole archive was read without error. On any failure nothing is left behind
// but files that were there before.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

namespace aether::data {

inline constexpr const char* kCifar10Url = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";
inline constexpr const char* kCifar10TarMd5 = "c32a1d4ab5d03f1284b67883e8d87530";
inline constexpr uint64_t kCifar10BatchBytes = 30730000;  // 10,000 records of 3,073 bytes

// Called as data arrives: bytes so far and the total (0 when the server does not say).
using ProgressFn = std::function<void(uint64_t done, uint64_t total)>;

// Downloads `url` (http, https, file, ...) to `dest` (via a temporary file in the same directory,
// renamed at the end). Returns the MD5 of the bytes; throws aether::Error on a transfer failure or
// an HTTP status >= 400, removing the partial download.
std::string download_file(const std::string& url, const std::filesystem::path& dest,
                          const ProgressFn& progress = {});

// Unpacks data_batch_1..5.bin and test_batch.bin (required) and batches.meta.txt (when present)
// from a CIFAR-10 .tar.gz (any directory inside the archive) into dest_dir, atomically as above.
// Each batch must be a positive whole number of 3,073-byte records. Returns the written files.
std::vector<std::filesystem::path> extract_cifar10_archive(const std::filesystem::path& archive,
                                                           const std::filesystem::path& dest_dir);

struct FetchResult {
  std::filesystem::path dir;                 // where the files are
  std::vector<std::filesystem::path> files;  // written files
  uint64_t archive_bytes = 0;
  std::string archive_md5;
};
// Downloads the archive, checks its MD5 (empty md5: not checked), unpacks it into dest_dir
// (created when missing) and removes the archive.
FetchResult fetch_cifar10(const std::filesystem::path& dest_dir, const std::string& url = kCifar10Url,
                          const std::string& md5 = kCifar10TarMd5, const ProgressFn& progress = {});

// ---- verification ----------------------------------------------------------------------------------
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
