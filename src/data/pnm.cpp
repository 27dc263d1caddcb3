// Binary PNM (P5, P6) reading (pnm.h).
#include "pnm.h"

#include <algorithm>

#include "aether/core/error.h"

namespace aether::data::pnm {
namespace fs = std::filesystem;
namespace {

bool space(uint8_t ch) {
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r';
}
bool digit(uint8_t ch) { return ch >= '0' && ch <= '9'; }

uint64_t pixel_bytes(const Header& h) {
  return uint64_t(h.width * h.height * h.channels) * (h.maxval > 255 ? 2 : 1);
}

}  // namespace

std::optional<Header> parse_header(const char* op, const fs::path& path, std::span<const uint8_t> head,
                                   uint64_t file_size) {
  const size_t n = std::min(head.size(), kMaxHeaderBytes);
  if (n < 2 || head[0] != 'P' || (head[1] != '5' && head[1] != '6')) return std::nullopt;
  size_t at = 2;
  int64_t v[3] = {0, 0, 0};  // width, height, maxval
  const char* names[3] = {"width", "height", "maxval"};
  for (int k = 0; k < 3; ++k) {
    const size_t before = at;
    while (at < n && (space(head[at]) || head[at] == '#')) {
      if (head[at] == '#')
        while (at < n && head[at] != '\n' && head[at] != '\r') ++at;
      else
        ++at;
    }
    AETHER_CHECK_RUNTIME(at > before, op, path.string(),
                         ": not a readable PNM image (no whitespace before its ", names[k], ")");
    const size_t first = at;
    while (at < n && digit(head[at]) && at - first < 6) v[k] = v[k] * 10 + (head[at++] - '0');
    AETHER_CHECK_RUNTIME(at > first && v[k] >= 1 && v[k] <= 65535 && (at == n || !digit(head[at])), op,
                         path.string(), ": not a readable PNM image (its ", names[k],
                         " must be a number 1..65535)");
  }
  AETHER_CHECK_RUNTIME(at < n && space(head[at]), op, path.string(),
                       ": not a readable PNM image (no whitespace after its maxval within its first ",
                       kMaxHeaderBytes, " bytes)");
  Header h{v[0], v[1], head[1] == '6' ? 3 : 1, v[2], at + 1};
  const uint64_t need = h.data_offset + pixel_bytes(h);
  AETHER_CHECK_RUNTIME(file_size >= need, op, path.string(), ": truncated PNM image: its header (", h.width,
                       "x", h.height, ", maxval ", h.maxval, ") needs ", need, " bytes, the file has ",
                       file_size);
  return h;
}

std::vector<uint8_t> read_pixels(const char* op, const fs::path& path, const Header& h,
                                 std::span<const uint8_t> file) {
  const size_t values = size_t(h.width * h.height * h.channels), bytes = h.maxval > 255 ? 2 : 1;
  AETHER_CHECK_RUNTIME(file.size() >= h.data_offset + pixel_bytes(h), op, path.string(),
                       ": truncated PNM image: its header needs ", h.data_offset + pixel_bytes(h),
                       " bytes, the file has ", file.size());
  const uint8_t* raw = file.data() + h.data_offset;  // (height, width, channels) values as stored
  std::vector<uint8_t> out(values);                  // (height, width, channels)
  const uint32_t maxval = uint32_t(h.maxval);
  for (size_t i = 0; i < values; ++i) {
    const uint32_t x = bytes == 1 ? raw[i] : uint32_t(raw[2 * i]) << 8 | raw[2 * i + 1];
    out[i] = uint8_t((std::min(x, maxval) * 255 + maxval / 2) / maxval);  // values over maxval: white
  }
  return out;
}

}  // namespace aether::data::pnm
