// fuzz/image_fuzz.cpp - libFuzzer target: the image-folder readers (src/data/image_file.cpp: libpng
// and libjpeg-turbo, Debian's shared libraries, not instrumented; stb_image's BMP and GIF decoders,
// compiled into libaether by src/data/stb_image_impl.cpp; aether's binary PNM reader,
// src/data/pnm.cpp; and stb_image_resize).
//
// The input is written to a per-process scratch image folder, DIR/train/{a,b}/image.png (the
// extension only lets the folder reader list it; the readers detect the format from the bytes), then
//   - load_image_folder(DIR, train): each header, then both copies decoded at their own size;
//   - load_image_folder(DIR, train, 6, 5): both decoded and resized;
//   - load_images({one copy}, 8, 8, 1): decoded to grey and resized, as `aether predict` does.
// Besides crashes and sanitizer reports, a finding is a result of the wrong shape or two copies of
// one file that decode to different pixels (a decoder reading memory it did not write).
//
// Images are limited to 2^18 pixels (AETHER_MAX_IMAGE_PIXELS, unless set): 32 bytes of GIF make
// an image of 41 million pixels, within the default limit of 2^26, which takes 0.3 s to decode in
// a release build but longer than libFuzzer's 10 s per input to decode and resize under ASan. At
// 2^20 a 5 x 196,608 BMP (983,040 pixels) took 8.6 s here, and 13 s while another job ran: the
// instrumented stb_image_resize (0.9 s for the whole `aether predict` of it in a release build).
#include <stdlib.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <string>

#include "aether/data/image_folder.h"
#include "fuzz_util.h"

namespace {
namespace fs = std::filesystem;

// DIR, made once per process under $TMPDIR (else /tmp) and removed at exit.
const fs::path& scratch_folder() {
  static const fs::path dir = [] {
    const char* tmp = std::getenv("TMPDIR");
    std::string tmpl = std::string(tmp && *tmp ? tmp : "/tmp") + "/aether-image-fuzz-XXXXXX";
    if (!mkdtemp(tmpl.data())) aether::fuzz::finding("mkdtemp failed");
    static fs::path for_exit;
    for_exit = tmpl;
    std::atexit([] {
      std::error_code ec;
      fs::remove_all(for_exit, ec);
    });
    fs::create_directories(for_exit / "train" / "a");
    fs::create_directories(for_exit / "train" / "b");
    return for_exit;
  }();
  return dir;
}

void check(const aether::data::Dataset& d, int64_t n, int64_t h, int64_t w) {
  if (d.n != n || (h > 0 && (d.h != h || d.w != w)) || d.h < 1 || d.w < 1 || (d.c != 1 && d.c != 3) ||
      d.images.size() != size_t(d.n * d.h * d.w * d.c))
    aether::fuzz::finding("a decoded data set of the wrong shape");
}

// The two copies (one per class) decode to the same pixels.
void check_copies_agree(const aether::data::Dataset& d) {
  const size_t bytes = size_t(d.image_bytes());
  if (!std::equal(d.images.begin(), d.images.begin() + long(bytes), d.images.begin() + long(bytes)))
    aether::fuzz::finding("two copies of one image decode to different pixels");
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  setenv("AETHER_MAX_IMAGE_PIXELS", "262144", /*overwrite=*/0);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace ad = aether::data;
  const fs::path& dir = scratch_folder();
  const fs::path a = dir / "train" / "a" / "image.png", b = dir / "train" / "b" / "image.png";
  aether::fuzz::write_file(a.string(), data, size);
  aether::fuzz::write_file(b.string(), data, size);
  aether::fuzz::expect_ok_or_error([&] {
    const ad::Dataset d = ad::load_image_folder(dir, ad::Split::train);
    check(d, 2, 0, 0);
    check_copies_agree(d);
  });
  aether::fuzz::expect_ok_or_error([&] {
    const ad::Dataset d = ad::load_image_folder(dir, ad::Split::train, 6, 5);
    check(d, 2, 6, 5);
    check_copies_agree(d);
  });
  aether::fuzz::expect_ok_or_error([&] { check(ad::load_images({a}, 8, 8, 1), 1, 8, 8); });
  return 0;
}
