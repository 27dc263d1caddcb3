// MD5 through OpenSSL's EVP interface, for buffers and (optionally decompressed) files.
#include "aether/data/checksum.h"

#include <openssl/evp.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "aether/core/error.h"
#include "aether/data/byte_reader.h"
#include "core/digest.h"

namespace aether::data {

struct Md5::Impl {
  EVP_MD_CTX* ctx = nullptr;
  bool finished = false;
  ~Impl() { EVP_MD_CTX_free(ctx); }
};

Md5::Md5() : impl_(std::make_unique<Impl>()) {
  impl_->ctx = EVP_MD_CTX_new();
  AETHER_CHECK_RUNTIME(impl_->ctx != nullptr && EVP_DigestInit_ex(impl_->ctx, EVP_md5(), nullptr) == 1, "md5",
                       "OpenSSL could not start an MD5 digest");
}

Md5::~Md5() = default;

void Md5::update(const void* data, size_t n) {
  AETHER_CHECK_RUNTIME(!impl_->finished, "md5", "update after hex_digest()");
  AETHER_CHECK_RUNTIME(EVP_DigestUpdate(impl_->ctx, data, n) == 1, "md5", "OpenSSL digest update failed");
}

std::string Md5::hex_digest() {
  AETHER_CHECK_RUNTIME(!impl_->finished, "md5", "hex_digest() called twice");
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  AETHER_CHECK_RUNTIME(EVP_DigestFinal_ex(impl_->ctx, md, &len) == 1, "md5", "OpenSSL digest final failed");
  impl_->finished = true;
  return hex_lower(md, len);
}

std::string md5_hex(const void* data, size_t n) {
  Md5 m;
  m.update(data, n);
  return m.hex_digest();
}

std::string sha256_hex(const void* data, size_t n) { return aether::sha256_hex(data, n); }

FileDigest digest_file(const std::string& path, bool decompress) {
  Md5 m;
  FileDigest d;
  std::vector<uint8_t> chunk(size_t(1) << 20);
  if (decompress) {
    ByteReader r(path);
    for (;;) {
      const size_t got = r.read(chunk.data(), chunk.size());
      m.update(chunk.data(), got);
      d.bytes += got;
      if (got < chunk.size()) break;
    }
  } else {
    FILE* f = std::fopen(path.c_str(), "rb");
    if (f == nullptr)
      throw Error(detail::cat(path, ": cannot open: ", std::strerror(errno)), ErrorKind::runtime);
    for (;;) {
      const size_t got = std::fread(chunk.data(), 1, chunk.size(), f);
      m.update(chunk.data(), got);
      d.bytes += got;
      if (got < chunk.size()) break;
    }
    const bool failed = std::ferror(f) != 0;
    std::fclose(f);
    if (failed) throw Error(detail::cat(path, ": offset ", d.bytes, ": read error"), ErrorKind::runtime);
  }
  d.md5 = m.hex_digest();
  return d;
}

}  // namespace aether::data
