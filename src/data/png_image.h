// src/data/png_image.h - PNG files decoded by libpng (Debian's libpng16), for image_file.cpp.
#pragma once

#include "image_file.h"

namespace aether::data::png {

// Whether `file` starts with PNG's signature.
bool is_png(std::span<const uint8_t> file);

// The image of a PNG file whose bytes are `file`: its size and channels, and with `pixels` its
// pixels, 8 bits a channel: a palette expanded to RGB, a tRNS chunk to an alpha channel, grey of
// 1, 2 or 4 bits scaled to 8, 16-bit values to their high byte (as stb_image did). Gamma and colour
// profiles are not applied (as stb_image and Pillow). check is called with the header's size.
// Throws aether::Error (prefixed with `op`, naming `path`) with libpng's reason for a file it
// refuses: a bad signature, a bad CRC of a critical chunk, too few image data.
DecodedImage read(const char* op, const std::filesystem::path& path, std::span<const uint8_t> file,
                  bool pixels, const SizeCheck& check);

}  // namespace aether::data::png
