// aether/data/checksum.h - digests (OpenSSL EVP) of buffers, streams and data files: MD5 and SHA-256.
//
// MD5 only identifies published data files (their checksums are given as MD5); it is not used for
// anything that needs a secure hash. SHA-256 is (the kernel caches vouch for their objects with it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace aether::data {

class Md5 {
 public:
  Md5();
  ~Md5();
  Md5(const Md5&) = delete;
  Md5& operator=(const Md5&) = delete;
  void update(const void* data, size_t n);
  std::string hex_digest();  // 32 lowercase hex digits; ends the digest (no more updates)

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string md5_hex(const void* data, size_t n);
std::string sha256_hex(const void* data, size_t n);  // 64 lowercase hex digits

struct FileDigest {
  std::string md5;     // of the bytes read
  uint64_t bytes = 0;  // how many
};
// MD5 and size of a file's bytes as stored on disk (decompress = false), or of its decompressed
// content (decompress = true: gzip / xz detected by magic bytes, see byte_reader.h).
FileDigest digest_file(const std::string& path, bool decompress);

}  // namespace aether::data
