// src/data/jpeg_image.h - JPEG files decoded by libjpeg-turbo (Debian's libjpeg62-turbo), for
// image_file.cpp.
#pragma once

#include "image_file.h"

namespace aether::data::jpeg {

// Whether `file` starts with JPEG's SOI marker.
bool is_jpeg(std::span<const uint8_t> file);

// The image of a JPEG file whose bytes are `file`: grey (1 channel) or RGB (3), and with `pixels`
// its pixels, decoded with libjpeg's defaults (accurate integer IDCT, smooth chroma upsampling;
// those of Pillow). CMYK and YCCK (Adobe) images come out RGB as Pillow converts them (R = (255 - C)
// (255 - K) / 255 of the ink values; an Adobe file stores them inverted). check is called with the
// header's size. Throws aether::Error (prefixed with `op`, naming `path`) with libjpeg's reason for
// a file it refuses, for a file that ends before its image does, and for one of over 500
// progressive scans (each scan decodes the whole image again: a few bytes each would take minutes).
DecodedImage read(const char* op, const std::filesystem::path& path, std::span<const uint8_t> file,
                  bool pixels, const SizeCheck& check);

}  // namespace aether::data::jpeg
