// One image file to its size and pixels (image_file.h).
#include "image_file.h"

#include <stb_image.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <memory>

#include "aether/core/error.h"
#include "core/config.h"
#include "jpeg_image.h"
#include "png_image.h"
#include "pnm.h"
#include "stb_guard.h"

namespace aether::data {
namespace fs = std::filesystem;
namespace {

// The most bytes an image file may have: 16 a pixel of the pixel limit (twice the most any of the
// formats read stores a pixel in, 16-bit RGBA PNG without compression), and 16 MiB of metadata.
uint64_t max_file_bytes() { return 16 * uint64_t(config().max_image_pixels) + (uint64_t(16) << 20); }

// The bytes of the file at `path`: its first `most` (all of them when it is shorter), or with most 0
// all of them; *size is set to the file's size. A file over max_file_bytes() is refused. Errors name
// the file.
std::vector<uint8_t> read_file(const char* op, const fs::path& path, uint64_t most, uint64_t* size) {
  std::ifstream f(path, std::ios::binary | std::ios::ate);
  AETHER_CHECK_RUNTIME(f.is_open(), op, path.string(), ": cannot open it");
  const std::streamoff end = f.tellg();
  AETHER_CHECK_RUNTIME(end >= 0, op, path.string(), ": cannot read it");
  *size = uint64_t(end);
  AETHER_CHECK_RUNTIME(*size <= max_file_bytes(), op, path.string(), ": ", *size,
                       " bytes, more than an image within the pixel limit of ", config().max_image_pixels,
                       " (AETHER_MAX_IMAGE_PIXELS) may have (", max_file_bytes(), ")");
  std::vector<uint8_t> b(static_cast<size_t>(most == 0 ? *size : std::min(most, *size)));
  f.seekg(0);
  f.read(reinterpret_cast<char*>(b.data()), std::streamsize(b.size()));
  AETHER_CHECK_RUNTIME(f.gcount() == std::streamsize(b.size()), op, path.string(), ": cannot read its ",
                       b.size(), " bytes");
  return b;
}

// The bytes read for an image's header: enough for the segments before a JPEG's frame, of which
// one (EXIF, say) may have up to 64 KiB, and far more than the other formats need.
constexpr uint64_t kHeadBytes = 96 << 10;

// BMP and GIF by stb_image, after stb_guard's checks.
DecodedImage read_stb(const char* op, const fs::path& path, std::span<const uint8_t> b, bool pixels,
                      const SizeCheck& check) {
  stb_guard::check_bmp(op, path, b);  // before stb_image reads even the header
  AETHER_CHECK_RUNTIME(b.size() <= size_t(std::numeric_limits<int>::max()), op, path.string(), ": ", b.size(),
                       " bytes; stb_image reads at most 2 GiB");
  DecodedImage image;
  AETHER_CHECK_RUNTIME(
      stbi_info_from_memory(b.data(), int(b.size()), &image.width, &image.height, &image.channels) == 1 &&
          image.width > 0 && image.height > 0 && image.channels >= 1 && image.channels <= 4,
      op, path.string(), ": not a readable image (", stbi_failure_reason(), ")");
  check(image.width, image.height);
  if (!pixels) return image;
  const std::unique_ptr<stbi_uc, void (*)(void*)> px(
      stbi_load_from_memory(b.data(), int(b.size()), &image.width, &image.height, &image.channels, 0),
      stbi_image_free);
  AETHER_CHECK_RUNTIME(px != nullptr && image.channels >= 1 && image.channels <= 4, op, path.string(),
                       ": cannot decode (", px ? "unexpected channels" : stbi_failure_reason(), ")");
  image.pixels.assign(px.get(), px.get() + int64_t(image.width) * image.height * image.channels);
  return image;
}

// The image of a file whose bytes are b (all of them, or with !pixels its first ones) and whose size
// is `size`, by its format's decoder.
DecodedImage decode(const char* op, const fs::path& path, std::span<const uint8_t> b, uint64_t size,
                    bool pixels, const SizeCheck& check) {
  if (const auto p = pnm::parse_header(op, path, b, size)) {
    DecodedImage image{int(p->width), int(p->height), int(p->channels), {}};
    check(image.width, image.height);
    if (pixels) image.pixels = pnm::read_pixels(op, path, *p, b);
    return image;
  }
  if (png::is_png(b)) return png::read(op, path, b, pixels, check);
  if (jpeg::is_jpeg(b)) return jpeg::read(op, path, b, pixels, check);
  return read_stb(op, path, b, pixels, check);
}

}  // namespace

DecodedImage read_image_file(const char* op, const fs::path& path, bool pixels) {
  const SizeCheck check = [&](int w, int h) {
    check_config(op);
    const int64_t most = config().max_image_pixels;
    AETHER_CHECK_RUNTIME(int64_t(w) * h <= most, op, path.string(), ": ", w, "x", h,
                         " pixels, over the limit of ", most,
                         " (AETHER_MAX_IMAGE_PIXELS); scale it down first or raise the limit");
  };
  uint64_t size = 0;
  if (!pixels) {
    // The header from the file's first bytes when they hold it (a PNM's header, a PNG's chunks
    // before its image data, a JPEG's segments before its frame, a GIF's screen), else from the whole
    // file (its header past them, or not a readable image: the whole file's error is the one
    // reported). A BMP is read whole for stb_guard.
    const std::vector<uint8_t> head = read_file(op, path, kHeadBytes, &size);
    if (head.size() == size) return decode(op, path, head, size, false, check);
    if (!stb_guard::is_bmp(head)) {
      try {
        return decode(op, path, head, size, false, check);
      } catch (const Error&) {
      }
    }
  }
  const std::vector<uint8_t> b = read_file(op, path, 0, &size);
  return decode(op, path, b, size, pixels, check);
}

}  // namespace aether::data
