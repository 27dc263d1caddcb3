// JPEG files decoded by libjpeg-turbo (jpeg_image.h).
#include "jpeg_image.h"

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>
#include <jerror.h>
// clang-format on

#include <csetjmp>
#include <cstring>

#include "aether/core/error.h"

namespace aether::data::jpeg {
namespace {

constexpr int kMaxScans = 500;  // libjpeg-turbo's own fuzzers and djpeg -maxscans use this bound

// libjpeg's error manager, extended with where errors jump to and what was seen.
struct Errors {
  jpeg_error_mgr mgr;  // first: libjpeg passes &mgr as the whole
  std::jmp_buf jump;
  char message[JMSG_LENGTH_MAX] = "";
  bool truncated = false;  // libjpeg met the end of the file and made up the rest of the image
};

[[noreturn]] void on_error(j_common_ptr c) {
  Errors* e = reinterpret_cast<Errors*>(c->err);
  c->err->format_message(c, e->message);
  std::longjmp(e->jump, 1);
}

// Warnings (corrupt entropy-coded data, which libjpeg resyncs past) are not errors, as with
// Pillow; the end of the file before the end of the image is.
void on_message(j_common_ptr c, int level) {
  if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) reinterpret_cast<Errors*>(c->err)->truncated = true;
}

void on_progress(j_common_ptr c) {
  const auto* d = reinterpret_cast<j_decompress_ptr>(c);
  if (c->is_decompressor && d->input_scan_number > kMaxScans) {
    Errors* e = reinterpret_cast<Errors*>(c->err);
    std::snprintf(e->message, sizeof e->message, "more than %d progressive scans", kMaxScans);
    std::longjmp(e->jump, 1);
  }
}

// libjpeg's decompressor with its error manager, destroyed together.
struct Reader {
  jpeg_decompress_struct d{};
  Errors errors;
  jpeg_progress_mgr progress{};
  bool created = false;
  ~Reader() {
    if (created) jpeg_destroy_decompress(&d);
  }
};

// The calls into libjpeg, each returning false when libjpeg stopped with an error
// (Errors::message). libjpeg's errors longjmp back to their setjmp, past any destructor: nothing
// between holds one.

// The header, with the output colour space set: grey, RGB, or CMYK (converted by convert_cmyk).
bool read_header(Reader* r, const uint8_t* file, size_t n) {
  if (setjmp(r->errors.jump)) return false;
  jpeg_create_decompress(&r->d);
  r->created = true;
  r->d.progress = &r->progress;
  jpeg_mem_src(&r->d, file, static_cast<unsigned long>(n));
  jpeg_read_header(&r->d, TRUE);
  const J_COLOR_SPACE in = r->d.jpeg_color_space;
  r->d.out_color_space = in == JCS_GRAYSCALE                ? JCS_GRAYSCALE
                         : in == JCS_CMYK || in == JCS_YCCK ? JCS_CMYK
                                                            : JCS_RGB;
  return true;
}

// The pixels, (height, width, output_components) at out. What follows the image is not read.
bool read_rows(Reader* r, uint8_t* out) {
  if (setjmp(r->errors.jump)) return false;
  jpeg_start_decompress(&r->d);
  const size_t row = size_t(r->d.output_width) * size_t(r->d.output_components);
  while (r->d.output_scanline < r->d.output_height) {
    JSAMPROW at = out + size_t(r->d.output_scanline) * row;
    jpeg_read_scanlines(&r->d, &at, 1);
  }
  return true;
}

// CMYK (n pixels, 4 bytes each) to RGB in place (3 bytes each): R = (255 - C) (255 - K) / 255,
// rounded, of the ink values; `inverted` (an Adobe file) stores 255 - ink.
void convert_cmyk(uint8_t* px, size_t n, bool inverted) {
  for (size_t i = 0; i < n; ++i) {
    const uint8_t* in = px + 4 * i;
    const int k = inverted ? in[3] : 255 - in[3];
    uint8_t rgb[3];
    for (int ch = 0; ch < 3; ++ch) {
      const int c = inverted ? in[ch] : 255 - in[ch];
      rgb[ch] = uint8_t((c * k + 127) / 255);
    }
    std::memcpy(px + 3 * i, rgb, 3);
  }
}

}  // namespace

bool is_jpeg(std::span<const uint8_t> file) { return file.size() >= 2 && file[0] == 0xff && file[1] == 0xd8; }

DecodedImage read(const char* op, const std::filesystem::path& path, std::span<const uint8_t> file,
                  bool pixels, const SizeCheck& check) {
  Reader r;
  r.d.err = jpeg_std_error(&r.errors.mgr);
  r.errors.mgr.error_exit = on_error;
  r.errors.mgr.emit_message = on_message;
  r.progress.progress_monitor = on_progress;
  AETHER_CHECK_RUNTIME(read_header(&r, file.data(), file.size()), op, path.string(),
                       ": not a readable JPEG image (", r.errors.message, ")");
  const bool cmyk = r.d.out_color_space == JCS_CMYK;
  DecodedImage image{
      int(r.d.image_width), int(r.d.image_height), r.d.out_color_space == JCS_GRAYSCALE ? 1 : 3, {}};
  check(image.width, image.height);
  if (!pixels) return image;
  std::vector<uint8_t> px(size_t(image.width) * size_t(image.height) * (cmyk ? 4 : size_t(image.channels)));
  AETHER_CHECK_RUNTIME(read_rows(&r, px.data()), op, path.string(), ": not a readable JPEG image (",
                       r.errors.message, ")");
  AETHER_CHECK_RUNTIME(!r.errors.truncated, op, path.string(),
                       ": truncated JPEG image (the file ends before its image does)");
  AETHER_CHECK_RUNTIME(int(r.d.output_width) == image.width && int(r.d.output_height) == image.height, op,
                       path.string(), ": not a readable JPEG image (unexpected output size)");
  if (cmyk) {
    convert_cmyk(px.data(), px.size() / 4, r.d.saw_Adobe_marker);
    px.resize(px.size() / 4 * 3);
  }
  image.pixels = std::move(px);
  return image;
}

}  // namespace aether::data::jpeg
