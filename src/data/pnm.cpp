// Binary PNM (P5, P6) reading (pnm.h).
#include "pnm.h"

#include <algorithm>
#include <fstream>

#include "aether/core/error.h"

namespace aether::data::pnm {
namespace fs = std::filesystem;
namespace {

bool space(char ch) {
  return ch == ' ' || ch == '\t' || ch == '\n' || ch == '\v' || ch == '\f' || ch == '\r';
}
bool digit(char ch) { return ch >= '0' && ch <= '9'; }

}  // namespace

std::optional<Header> read_header(const char* op, const fs::path& path) {
  std::ifstream f(path, std::ios::binary);
  char head[4096];
  f.read(head, sizeof head);
  const size_t n = size_t(f.gcount());
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
                       sizeof head, " bytes)");
  Header h{v[0], v[1], head[1] == '6' ? 3 : 1, v[2], at + 1};
  const uint64_t need = h.data_offset + uint64_t(h.width * h.height * h.channels) * (h.maxval > 255 ? 2 : 1);
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  AETHER_CHECK_RUNTIME(!ec && size >= need, op, path.string(), ": truncated PNM image: its header (", h.width,
                       "x", h.height, ", maxval ", h.maxval, ") needs ", need, " bytes, the file has ", size);
  return h;
}

std::vector<uint8_t> read_pixels(const char* op, const fs::path& path, const Header& h) {
  const size_t values = size_t(h.width * h.height * h.channels), bytes = h.maxval > 255 ? 2 : 1;
  std::vector<uint8_t> raw(values * bytes);  // as stored
  std::ifstream f(path, std::ios::binary);
  f.seekg(std::streamoff(h.data_offset));
  f.read(reinterpret_cast<char*>(raw.data()), std::streamsize(raw.size()));
  AETHER_CHECK_RUNTIME(size_t(f.gcount()) == raw.size(), op, path.string(), ": cannot read its ", raw.size(),
                       " bytes of pixels");
  std::vector<uint8_t> out(values);  // (height, width, channels)
  const uint32_t maxval = uint32_t(h.maxval);
  for (size_t i = 0; i < values; ++i) {
    const uint32_t x = bytes == 1 ? raw[i] : uint32_t(raw[2 * i]) << 8 | raw[2 * i + 1];
    out[i] = uint8_t((std::min(x, maxval) * 255 + maxval / 2) / maxval);  // values over maxval: white
  }
  return out;
}

}  // namespace aether::data::pnm
