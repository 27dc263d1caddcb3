// Internal: digests through OpenSSL's EVP interface, for every stage that vouches for bytes (the
// kernel caches) or identifies files (data/checksum.h builds MD5 of data files on these).
#pragma once

#include <cstddef>
#include <string>

namespace aether {

std::string hex_lower(const unsigned char* bytes, size_t n);  // 2n lowercase hex digits
std::string sha256_hex(const void* data, size_t n);           // 64 lowercase hex digits

}  // namespace aether
