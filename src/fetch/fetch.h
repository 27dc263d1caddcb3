// fetch/fetch.h - download CIFAR-10 (libcurl), check it (MD5), unpack it: `aether data fetch`.
// Not part of libaether (whose users need no libcurl): the aether_fetch library, linked by the CLI
// and its tests. Verification (aether/data/verify.h) is in libaether.
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

#include "aether/data/verify.h"

namespace aether::data {

inline constexpr const char* kCifar10Url = "https://www.cs.toronto.edu/~kriz/cifar-10-binary.tar.gz";
inline constexpr const char* kCifar10TarMd5 = "c32a1d4ab5d03f1284b67883e8d87530";

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

}  // namespace aether::data
