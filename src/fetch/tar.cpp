// TarReader: ustar / GNU tar headers (checksums, octal and base-256 sizes, long names).
#include "fetch/tar.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "aether/core/error.h"

namespace aether::data {
namespace {

constexpr size_t kBlock = 512;
constexpr size_t kNameOff = 0, kNameLen = 100;
constexpr size_t kSizeOff = 124, kSizeLen = 12;
constexpr size_t kSumOff = 148, kSumLen = 8;
constexpr size_t kTypeOff = 156;
constexpr size_t kMagicOff = 257;
constexpr size_t kPrefixOff = 345, kPrefixLen = 155;
constexpr uint64_t kMaxLongName = 1 << 16;

using Header = std::array<uint8_t, kBlock>;

std::string field_string(const Header& h, size_t off, size_t len) {
  const char* p = reinterpret_cast<const char*>(h.data() + off);
  return std::string(p, strnlen(p, len));
}

// Octal number padded with spaces / NULs, or GNU base-256 (high bit of the first byte set).
// Returns nullopt when malformed.
std::optional<uint64_t> parse_number(const Header& h, size_t off, size_t len) {
  if (h[off] & 0x80) {
    uint64_t v = h[off] & 0x7f;
    for (size_t i = 1; i < len; ++i) {
      if (v >> 56) return std::nullopt;
      v = (v << 8) | h[off + i];
    }
    return v;
  }
  size_t i = off, end = off + len;
  while (i < end && h[i] == ' ') ++i;
  uint64_t v = 0;
  bool any = false;
  for (; i < end && h[i] >= '0' && h[i] <= '7'; ++i) {
    if (v >> 60) return std::nullopt;
    v = v * 8 + uint64_t(h[i] - '0');
    any = true;
  }
  for (; i < end; ++i) {
    if (h[i] != ' ' && h[i] != 0) return std::nullopt;
  }
  if (!any) return std::nullopt;
  return v;
}

}  // namespace

void TarReader::skip_rest() {
  std::vector<uint8_t> sink(std::min<uint64_t>(remaining_ + padding_, 1 << 16));
  const std::string what = detail::cat("the data of tar member ", current_);
  while (remaining_ > 0) {
    const size_t n = size_t(std::min<uint64_t>(remaining_, sink.size()));
    in_.read_exact(sink.data(), n, detail::cat(remaining_, " more bytes of ", what));
    remaining_ -= n;
  }
  if (padding_ > 0) {
    in_.read_exact(sink.data(), size_t(padding_), detail::cat(padding_, " bytes of padding after ", what));
    padding_ = 0;
  }
}

size_t TarReader::read(void* dst, size_t n) {
  const size_t want = size_t(std::min<uint64_t>(n, remaining_));
  if (want == 0) return 0;
  in_.read_exact(dst, want, detail::cat(remaining_, " more bytes of the data of tar member ", current_));
  remaining_ -= want;
  return want;
}

std::optional<TarEntry> TarReader::next() {
  skip_rest();
  std::string long_name;
  for (;;) {
    Header h{};
    const uint64_t at = in_.offset();
    auto fail_at = [&](const std::string& msg) {
      throw Error(detail::cat(in_.path(), ": offset ", at, ": ", msg), ErrorKind::runtime);
    };
    in_.read_exact(h.data(), kBlock, "a 512-byte tar header (or the end-of-archive block)");
    if (std::all_of(h.begin(), h.end(), [](uint8_t b) { return b == 0; })) {
      current_.clear();
      return std::nullopt;  // end of archive (a second zero block may follow; it is not read)
    }
    const auto stored = parse_number(h, kSumOff, kSumLen);
    uint64_t sum_unsigned = 0;
    int64_t sum_signed = 0;
    for (size_t i = 0; i < kBlock; ++i) {
      const bool in_sum = i >= kSumOff && i < kSumOff + kSumLen;
      sum_unsigned += in_sum ? uint64_t(' ') : h[i];
      sum_signed += in_sum ? int64_t(' ') : int64_t(static_cast<int8_t>(h[i]));
    }
    if (!stored || (*stored != sum_unsigned && int64_t(*stored) != sum_signed)) {
      fail_at(detail::cat("tar header checksum ",
                          stored ? std::to_string(*stored) : std::string("(unreadable)"),
                          " does not match the "
                          "header's bytes (",
                          sum_unsigned, "); not a tar archive, or a corrupt one"));
    }
    const auto size = parse_number(h, kSizeOff, kSizeLen);
    if (!size) fail_at("tar header: unreadable size field");
    const char type = h[kTypeOff] == 0 ? '0' : char(h[kTypeOff]);
    std::string name = field_string(h, kNameOff, kNameLen);
    const bool ustar = std::memcmp(h.data() + kMagicOff, "ustar", 5) == 0;
    if (ustar) {
      const std::string prefix = field_string(h, kPrefixOff, kPrefixLen);
      if (!prefix.empty()) name = prefix + "/" + name;
    }
    current_ = name;
    remaining_ = *size;
    padding_ = (kBlock - *size % kBlock) % kBlock;
    if (type == 'L') {  // GNU long name: the data is the next member's name
      if (*size > kMaxLongName) fail_at(detail::cat("tar header: GNU long name of ", *size, " bytes"));
      std::string buf(size_t(*size), '\0');
      read(buf.data(), buf.size());
      skip_rest();
      long_name = std::string(buf.c_str());
      continue;
    }
    if (type == 'x' || type == 'g' || type == 'K') {  // pax headers, GNU long link name: skipped
      skip_rest();
      continue;
    }
    if (!long_name.empty()) name = current_ = long_name;
    TarEntry e;
    e.name = name;
    e.size = *size;
    e.type = type;
    e.offset = at;
    return e;
  }
}

}  // namespace aether::data
