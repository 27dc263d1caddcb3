// fuzz/idx_fuzz.cpp - libFuzzer target: the IDX readers (MNIST / Fashion-MNIST) on the input.
//
// The readers take a path (ByteReader streams and decompresses the file), so the input goes to a
// per-process scratch file; plain, gzip and xz inputs are all read (detected from the bytes).
// Both readers see every input: each checks its own magic.
#include <cstdint>

#include "aether/data/readers.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = aether::fuzz::write_scratch(data, size);
  aether::fuzz::expect_ok_or_error([&] { aether::data::read_idx_images(path); });
  aether::fuzz::expect_ok_or_error([&] { aether::data::read_idx_labels(path, 10); });
  return 0;
}
