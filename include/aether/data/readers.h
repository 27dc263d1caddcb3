// aether/data/readers.h - file format readers: IDX (MNIST, Fashion-MNIST) and CIFAR-10 batches.
//
// Files may be plain, gzip or xz (see byte_reader.h). A truncated or malformed file throws
// aether::Error naming the file, the byte offset and what was expected; nothing is read short.
// A file holds at most kMaxDataFileBytes (1 GiB, aether/io/limits.h) of data after decompression:
// an IDX header claiming more, or more than its gzip file can hold, is refused before reading.
//
// IDX (http://yann.lecun.com/exdb/mnist/): big-endian; magic 0x00000803 (uint8, 3 dims) then
// N, rows, cols and N*rows*cols pixels for images; magic 0x00000801 then N and N label bytes.
// CIFAR-10 binary: records of 3,073 bytes: the label (0-9), then the 32x32 image as 1,024 red,
// 1,024 green and 1,024 blue bytes, each plane row by row. Converted to NHWC here.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace aether::data {

constexpr uint32_t kIdxImagesMagic = 0x00000803;
constexpr uint32_t kIdxLabelsMagic = 0x00000801;

struct IdxImages {
  int64_t n = 0, rows = 0, cols = 0;
  std::vector<uint8_t> pixels;  // (N, rows, cols) uint8
};

// Reads an IDX image file (magic 0x803). The whole file must be exactly header + pixels.
IdxImages read_idx_images(const std::string& path);
// Reads an IDX label file (magic 0x801); every label must be < num_classes (checked when > 0).
std::vector<uint8_t> read_idx_labels(const std::string& path, int num_classes = 0);

constexpr int64_t kCifarSide = 32;
constexpr int64_t kCifarChannels = 3;
constexpr int64_t kCifarRecordBytes = 1 + kCifarSide * kCifarSide * kCifarChannels;  // 3,073
constexpr int64_t kCifarRecordsPerBatch = 10000;
constexpr int kCifarClasses = 10;

// Reads one CIFAR-10 batch file and appends its images, converted to NHWC, to `images`
// ((N,32,32,3) uint8) and its labels to `labels` (N). With expected_records > 0 the file must
// hold exactly that many records; with 0, any positive whole number. Returns the record count.
int64_t read_cifar10_batch(const std::string& path, std::vector<uint8_t>& images,
                           std::vector<int64_t>& labels, int64_t expected_records = kCifarRecordsPerBatch);

}  // namespace aether::data
