// fuzz/cifar_fuzz.cpp - libFuzzer target: read_cifar10_batch on the input (any record count).
//
// The reader takes a path (ByteReader streams and decompresses the file), so the input goes to a
// per-process scratch file; plain, gzip and xz inputs are all read (detected from the bytes).
#include <cstdint>
#include <vector>

#include "aether/data/readers.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = aether::fuzz::write_scratch(data, size);
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  aether::fuzz::expect_ok_or_error([&] {
    const int64_t n = aether::data::read_cifar10_batch(path, images, labels, /*expected_records=*/0);
    if (n < 0 || labels.size() != size_t(n) ||
        images.size() != size_t(n) * size_t(aether::data::kCifarRecordBytes - 1))
      aether::fuzz::finding("read_cifar10_batch returned sizes that disagree with its record count");
  });
  return 0;
}
