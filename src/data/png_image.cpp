// PNG files decoded by libpng (png_image.h).
#include "png_image.h"

#include <png.h>

#include <cstring>

#include "aether/core/error.h"

namespace aether::data::png {
namespace {

// What libpng reads from, and the message of the error that stopped it.
struct Source {
  std::span<const uint8_t> file;
  size_t at = 0;
  char error[256] = "";
};

void on_error(png_structp png, png_const_charp message) {
  Source* s = static_cast<Source*>(png_get_error_ptr(png));
  std::snprintf(s->error, sizeof s->error, "%s", message);
  png_longjmp(png, 1);
}
void on_warning(png_structp, png_const_charp) {}  // a bad ancillary chunk, skipped by libpng

void on_read(png_structp png, png_bytep out, size_t n) {
  Source* s = static_cast<Source*>(png_get_io_ptr(png));
  if (n > s->file.size() - s->at) png_error(png, "the file ends too early");
  std::memcpy(out, s->file.data() + s->at, n);
  s->at += n;
}

// libpng's read and info structs, destroyed together.
struct Reader {
  png_structp png = nullptr;
  png_infop info = nullptr;
  ~Reader() { png_destroy_read_struct(&png, &info, nullptr); }
};

// The two calls into libpng, each returning false when libpng stopped with an error (Source::error).
// libpng's errors longjmp back to their setjmp, past any destructor: nothing between holds one.

// The header, and the transforms to 8-bit grey, grey + alpha, RGB or RGBA; *w, *h and *channels
// are what png_read_image then gives.
bool read_header(png_structp png, png_infop info, int* w, int* h, int* channels) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_info(png, info);
  png_set_expand(png);    // palette -> RGB, grey of 1, 2, 4 bits -> 8, tRNS -> alpha
  png_set_strip_16(png);  // 16-bit -> the high byte
  png_set_interlace_handling(png);
  png_read_update_info(png, info);
  *w = int(png_get_image_width(png, info));
  *h = int(png_get_image_height(png, info));
  *channels = png_get_channels(png, info);
  return true;
}

// The pixels, rows[y] (w * channels) for each row y. What follows the image data is not read: a
// file whose chunks after it are cut short or corrupt still decodes (as with stb_image and Pillow).
bool read_rows(png_structp png, png_bytepp rows) {
  if (setjmp(png_jmpbuf(png))) return false;
  png_read_image(png, rows);
  return true;
}

}  // namespace

bool is_png(std::span<const uint8_t> file) { return file.size() >= 8 && png_sig_cmp(file.data(), 0, 8) == 0; }

DecodedImage read(const char* op, const std::filesystem::path& path, std::span<const uint8_t> file,
                  bool pixels, const SizeCheck& check) {
  Source source{file};
  Reader r;
  r.png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &source, on_error, on_warning);
  AETHER_CHECK_RUNTIME(r.png != nullptr, op, path.string(), ": libpng cannot start");
  r.info = png_create_info_struct(r.png);
  AETHER_CHECK_RUNTIME(r.info != nullptr, op, path.string(), ": libpng cannot start");
  png_set_read_fn(r.png, &source, on_read);
  DecodedImage image;
  AETHER_CHECK_RUNTIME(read_header(r.png, r.info, &image.width, &image.height, &image.channels), op,
                       path.string(), ": not a readable PNG image (", source.error, ")");
  check(image.width, image.height);
  if (!pixels) return image;
  const size_t row = size_t(image.width) * size_t(image.channels);
  AETHER_CHECK_RUNTIME(png_get_rowbytes(r.png, r.info) == row, op, path.string(),
                       ": not a readable PNG image (unexpected row size)");
  image.pixels.resize(row * size_t(image.height));  // (height, width, channels)
  std::vector<png_bytep> rows(size_t(image.height));
  for (size_t y = 0; y < rows.size(); ++y) rows[y] = image.pixels.data() + y * row;
  AETHER_CHECK_RUNTIME(read_rows(r.png, rows.data()), op, path.string(), ": not a readable PNG image (",
                       source.error, ")");
  return image;
}

}  // namespace aether::data::png
