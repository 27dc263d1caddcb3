// aether/data/byte_reader.h - ByteReader: reads a data file as bytes, decompressing it on the fly.
//
// The compression is detected from the first bytes of the file, never from its name:
// gzip (1f 8b, read with zlib), xz (fd 37 7a 58 5a 00, read with liblzma), else plain bytes.
// Every failure throws aether::Error naming the file and the (decompressed) byte offset:
//   "train-images-idx3-ubyte.gz: offset 16: expected 47040000 bytes of image data, file ends
//    after 1234 (at offset 1250)"
// Decompression errors (corrupt data, a cut-off stream, a bad CRC) are errors too, never a silent
// short read; a CRC is only checked once the stream's end is read, so readers call expect_end().
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "aether/io/limits.h"

namespace aether::data {

enum class Compression { none, gzip, xz };
const char* compression_name(Compression c);  // "plain", "gzip", "xz"

class ByteReader {
 public:
  explicit ByteReader(const std::string& path);  // throws aether::Error when it cannot be opened
  ~ByteReader();
  ByteReader(const ByteReader&) = delete;
  ByteReader& operator=(const ByteReader&) = delete;

  // Reads up to n bytes into dst; returns fewer only when the data ends. Throws on I/O errors and
  // on corrupt or truncated compressed data.
  size_t read(void* dst, size_t n);
  // Reads exactly n bytes, else throws "<path>: offset <o>: expected <what>, file ends after <k>".
  void read_exact(void* dst, size_t n, const std::string& what);
  // Appends exactly n bytes to `out`, growing it as data arrives (so a bogus size in a header
  // cannot allocate more than the file holds); throws like read_exact.
  void read_exact_append(std::vector<uint8_t>& out, uint64_t n, const std::string& what);
  // Throws "<path>: offset <o>: expected the end of the file after <what>, found more data" when
  // bytes remain; also makes the decompressor check the stream's CRC.
  void expect_end(const std::string& what);
  // Throws aether::Error("<path>: offset <offset()>: <message>").
  [[noreturn]] void fail(const std::string& message) const;

  uint64_t offset() const { return offset_; }  // decompressed bytes delivered so far
  // The most (decompressed) bytes the file can hold: its size for a plain file, 1,100 times its
  // size for gzip (deflate expands at most ~1,032 times); UINT64_MAX for xz or a non-regular file.
  // Lets a reader reject a header's claim that the file cannot hold before reading it.
  uint64_t max_size() const;
  const std::string& path() const { return path_; }
  Compression compression() const;

 private:
  struct Impl;
  std::string path_;
  uint64_t offset_ = 0;
  uint64_t file_size_ = UINT64_MAX;  // on disk; UINT64_MAX when unknown
  std::unique_ptr<Impl> impl_;
};

// The whole (decompressed) content of a file; throws aether::Error when it holds more than
// max_bytes (default: kMaxDataFileBytes, aether/io/limits.h).
std::vector<uint8_t> read_file_bytes(const std::string& path, uint64_t max_bytes = kMaxDataFileBytes);

}  // namespace aether::data
