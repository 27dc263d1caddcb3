// Checks of image files before stb_image decodes them (stb_guard.h).
#include "stb_guard.h"

#include <algorithm>
#include <cstdint>

#include "aether/core/error.h"

namespace aether::data::stb_guard {
namespace fs = std::filesystem;
namespace {

uint32_t le(std::span<const uint8_t> b, size_t at, int bytes) {
  uint32_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = v << 8 | (at + size_t(i) < b.size() ? b[at + size_t(i)] : 0);
  return v;
}

}  // namespace

bool is_bmp(std::span<const uint8_t> file) { return file.size() >= 2 && file[0] == 'B' && file[1] == 'M'; }

void check_bmp(const char* op, const fs::path& path, std::span<const uint8_t> b) {
  // The whole file: the header, then (for a palette BMP) every pixel's index.
  if (!is_bmp(b)) return;
  const int64_t offset = int32_t(le(b, 10, 4)), hsz = int32_t(le(b, 14, 4));
  if (hsz != 12 && hsz != 40 && hsz != 56 && hsz != 108 && hsz != 124) return;  // stb_image refuses it
  const bool core = hsz == 12;                                                  // OS/2 1.x: 16-bit sizes
  const int64_t w = core ? le(b, 18, 2) : int32_t(le(b, 18, 4));
  const int64_t h = core ? le(b, 20, 2) : int32_t(le(b, 22, 4));
  const int64_t bpp = le(b, core ? 24 : 28, 2);
  if (bpp >= 16 || w <= 0 || h == 0) return;  // no palette; stb_image refuses a bad size itself
  const int64_t entries = core ? (offset - 14 - 24) / 3 : (offset - 14 - hsz) >> 2;
  AETHER_CHECK_RUNTIME(entries >= 1 && entries <= 256, op, path.string(), ": not a readable BMP image (its ",
                       bpp, "-bit pixels need a palette of 1 to 256 colours, the pixel offset ", offset,
                       " leaves room for ", entries, ")");
  if (bpp != 1 && bpp != 4 && bpp != 8) return;  // stb_image refuses it
  const int64_t row = (w * bpp + 7) / 8, stride = row + (-row & 3), rows = h < 0 ? -h : h;
  // Missing bytes read as 0 (stb_image's get8 at the end of the file), a valid index.
  // The loops end with the file's bytes (a header may claim any size).
  for (int64_t y = 0; y < rows && offset + y * stride < int64_t(b.size()); ++y) {
    for (int64_t x = 0; x < w; ++x) {
      const size_t at = size_t(offset + y * stride + x * bpp / 8);
      if (at >= b.size()) break;
      const int shift = int(8 - bpp - (x * bpp) % 8);
      const int64_t index = (b[at] >> shift) & ((1 << bpp) - 1);
      AETHER_CHECK_RUNTIME(index < entries, op, path.string(), ": not a readable BMP image (pixel (", y, ", ",
                           x, ") of the file's rows is colour ", index, " of a palette of ", entries, ")");
    }
  }
}

}  // namespace aether::data::stb_guard
