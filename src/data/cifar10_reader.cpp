// CIFAR-10 binary batch reader: 3,073-byte records (label, R plane, G plane, B plane) to NHWC.
#include <array>

#include "aether/core/error.h"
#include "aether/data/byte_reader.h"
#include "aether/data/readers.h"
#include "aether/io/limits.h"

namespace aether::data {

int64_t read_cifar10_batch(const std::string& path, std::vector<uint8_t>& images,
                           std::vector<int64_t>& labels, int64_t expected_records) {
  AETHER_CHECK_RUNTIME(expected_records >= 0, "read_cifar10_batch", "expected_records is ", expected_records,
                       ", expected >= 0");
  constexpr int64_t kPlane = kCifarSide * kCifarSide;  // 1,024 bytes per colour plane
  // At most kMaxDataFileBytes of records per file, checked before reading and as records arrive
  // (an xz file's size says nothing about how much it holds).
  constexpr int64_t kMaxRecords = int64_t(kMaxDataFileBytes) / kCifarRecordBytes;
  ByteReader r(path);
  if (r.compression() == Compression::none && r.max_size() != UINT64_MAX &&
      r.max_size() > kMaxDataFileBytes) {
    r.fail(detail::cat("the file holds ", r.max_size(), " bytes, more than the limit of ", kMaxDataFileBytes,
                       " bytes of data in one file"));
  }
  if (expected_records > kMaxRecords) {
    r.fail(detail::cat("expected ", expected_records, " records of ", kCifarRecordBytes,
                       " bytes, more than the limit of ", kMaxDataFileBytes, " bytes of data in one file"));
  }
  std::array<uint8_t, kCifarRecordBytes> rec{};  // label, then planes R, G, B, each (32,32)
  const size_t images_before = images.size(), labels_before = labels.size();
  if (expected_records > 0) {
    images.reserve(images_before + size_t(expected_records * kPlane * kCifarChannels));
    labels.reserve(labels_before + size_t(expected_records));
  }
  int64_t count = 0;
  try {
    for (;;) {
      if (expected_records > 0 && count == expected_records) {
        r.expect_end(detail::cat(expected_records, " records of ", kCifarRecordBytes, " bytes"));
        break;
      }
      const uint64_t at = r.offset();
      const size_t got = r.read(rec.data(), rec.size());
      if (got == 0 && expected_records == 0 && count > 0) break;  // clean end at a record boundary
      if (count == kMaxRecords) {
        throw Error(detail::cat(path, ": offset ", at, ": the file holds more than ", kMaxRecords,
                                " records of ", kCifarRecordBytes, " bytes, more than the limit of ",
                                kMaxDataFileBytes, " bytes of data in one file"),
                    ErrorKind::runtime);
      }
      if (got < rec.size()) {
        if (expected_records > 0) {
          throw Error(detail::cat(path, ": offset ", at, ": expected ", expected_records * kCifarRecordBytes,
                                  " bytes (", expected_records, " records of ", kCifarRecordBytes,
                                  " bytes), file ends after ", at + got),
                      ErrorKind::runtime);
        }
        throw Error(detail::cat(path, ": offset ", at, ": expected a ", kCifarRecordBytes,
                                "-byte record (number ", count, "), file ends after ", got, " bytes of it"),
                    ErrorKind::runtime);
      }
      if (rec[0] >= kCifarClasses) {
        throw Error(detail::cat(path, ": offset ", at, ": label ", int(rec[0]), " of record ", count,
                                " is out of range, expected 0..", kCifarClasses - 1),
                    ErrorKind::runtime);
      }
      labels.push_back(rec[0]);
      const size_t base = images.size();
      images.resize(base + size_t(kPlane * kCifarChannels));
      uint8_t* dst = images.data() + base;  // (32,32,3)
      for (int64_t p = 0; p < kPlane; ++p) {
        for (int64_t c = 0; c < kCifarChannels; ++c)
          dst[p * kCifarChannels + c] = rec[size_t(1 + c * kPlane + p)];
      }
      ++count;
    }
  } catch (...) {
    images.resize(images_before);
    labels.resize(labels_before);
    throw;
  }
  return count;
}

}  // namespace aether::data
