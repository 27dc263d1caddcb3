// SHA-256 and hex through OpenSSL (core/digest.h).
#include "core/digest.h"

#include <openssl/evp.h>

#include "aether/core/error.h"

namespace aether {

std::string hex_lower(const unsigned char* bytes, size_t n) {
  static const char* kHex = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (size_t i = 0; i < n; ++i) {
    out += kHex[bytes[i] >> 4];
    out += kHex[bytes[i] & 15];
  }
  return out;
}

std::string sha256_hex(const void* data, size_t n) {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  AETHER_CHECK(EVP_Digest(data, n, md, &len, EVP_sha256(), nullptr) == 1, "sha256",
               "OpenSSL could not compute a SHA-256 digest");
  return hex_lower(md, len);
}

}  // namespace aether
