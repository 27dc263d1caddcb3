// IDX readers (MNIST / Fashion-MNIST images and labels): header checks, exact-size reads.
#include <algorithm>
#include <array>
#include <cstdio>

#include "aether/core/error.h"
#include "aether/data/byte_reader.h"
#include "aether/data/readers.h"
#include "aether/io/limits.h"

namespace aether::data {
namespace {

constexpr int64_t kMaxSide = 1 << 16;  // rows, cols

std::string hex32(uint32_t v) {
  char buf[16];
  std::snprintf(buf, sizeof buf, "0x%08x", v);
  return buf;
}

uint32_t read_be32(ByteReader& r, const std::string& what) {
  std::array<uint8_t, 4> b{};
  r.read_exact(b.data(), b.size(), what);
  return (uint32_t(b[0]) << 24) | (uint32_t(b[1]) << 16) | (uint32_t(b[2]) << 8) | uint32_t(b[3]);
}

void read_magic(ByteReader& r, uint32_t expected, const char* kind) {
  const uint32_t magic = read_be32(r, "a 4-byte IDX magic number");
  if (magic != expected) {
    throw Error(detail::cat(r.path(), ": offset 0: bad magic number ", hex32(magic), ", expected ",
                            hex32(expected), " (IDX ", kind, ")"),
                ErrorKind::runtime);
  }
}

// Reads one big-endian dimension and checks 1 <= d <= limit.
int64_t read_dim(ByteReader& r, const char* name, int64_t limit) {
  const uint64_t at = r.offset();
  const uint32_t d = read_be32(r, detail::cat("a 4-byte ", name));
  if (d == 0 || int64_t(d) > limit) {
    throw Error(detail::cat(r.path(), ": offset ", at, ": ", name, " is ", d, ", expected 1..", limit),
                ErrorKind::runtime);
  }
  return int64_t(d);
}

// Checks a header's claim of `bytes` bytes of data after the header (`what` says what they are)
// against kMaxDataFileBytes and against what the file can hold, before any of it is read.
void check_claim(const ByteReader& r, uint64_t bytes, const std::string& what) {
  if (bytes > kMaxDataFileBytes) {
    r.fail(detail::cat("the header claims ", what, ", more than the limit of ", kMaxDataFileBytes,
                       " bytes of data in one file"));
  }
  // A plain file's shortfall is reported as truncation once its data runs out; a compressed one
  // would be decompressed first, so a claim it cannot possibly hold is refused now.
  const uint64_t max = r.max_size();
  if (r.compression() != Compression::none && max != UINT64_MAX && bytes > max - std::min(max, r.offset())) {
    r.fail(detail::cat("the header claims ", what, ", but the ", compression_name(r.compression()),
                       " file cannot hold more than ", max, " bytes (truncated or corrupt)"));
  }
}

}  // namespace

IdxImages read_idx_images(const std::string& path) {
  ByteReader r(path);
  read_magic(r, kIdxImagesMagic, "uint8 images, 3 dims");
  IdxImages out;
  out.n = read_dim(r, "image count", INT32_MAX);
  out.rows = read_dim(r, "row count", kMaxSide);
  out.cols = read_dim(r, "column count", kMaxSide);
  const int64_t bytes = out.n * out.rows * out.cols;  // < 2^31 * 2^32: no overflow
  const std::string what =
      detail::cat(bytes, " bytes of image data (", out.n, " images of ", out.rows, "x", out.cols, ")");
  check_claim(r, uint64_t(bytes), what);
  r.read_exact_append(out.pixels, uint64_t(bytes), what);
  r.expect_end(what);
  return out;
}

std::vector<uint8_t> read_idx_labels(const std::string& path, int num_classes) {
  ByteReader r(path);
  read_magic(r, kIdxLabelsMagic, "uint8 labels, 1 dim");
  const int64_t n = read_dim(r, "label count", INT32_MAX);
  const uint64_t start = r.offset();
  const std::string what = detail::cat(n, " bytes of label data");
  check_claim(r, uint64_t(n), what);
  std::vector<uint8_t> labels;
  r.read_exact_append(labels, uint64_t(n), what);
  r.expect_end(what);
  if (num_classes > 0) {
    for (size_t i = 0; i < labels.size(); ++i) {
      if (labels[i] >= num_classes) {
        throw Error(detail::cat(path, ": offset ", start + i, ": label ", int(labels[i]), " of item ", i,
                                " is out of range, expected 0..", num_classes - 1),
                    ErrorKind::runtime);
      }
    }
  }
  return labels;
}

}  // namespace aether::data
