// src/data/pnm.h - binary Netpbm images, P5 (grey) and P6 (RGB), for the image-folder readers
// (image_folder.cpp). Read here rather than by stb_image, whose PNM decoder (Debian's 2022 libstb)
// returns a truncated file's missing pixels as its buffer's old bytes, reads 16-bit values in the
// machine's byte order (the format's is big-endian), ignores maxval, and converts 16-bit pixels to
// other channels past the end of its buffer.
//
// The format (netpbm.sourceforge.net/doc/pgm.html): "P5" or "P6", then width, height and maxval
// (decimal, 1..65535), each after whitespace and "#" comment lines, then one whitespace byte and
// height * width * channels values, one byte each when maxval < 256, else two (big-endian).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <vector>

namespace aether::data::pnm {

struct Header {
  int64_t width = 0, height = 0, channels = 0, maxval = 0;  // channels: 1 (P5) or 3 (P6)
  uint64_t data_offset = 0;                                 // where the pixels start
};

// The header of the file at `path`, or nullopt when the file does not start with "P5" or "P6".
// Throws aether::Error (prefixed with `op` and naming the file) for a malformed header, one longer
// than 4096 bytes, or a file too short for its pixels.
std::optional<Header> read_header(const char* op, const std::filesystem::path& path);

// The pixels, (height, width, channels) uint8, each value v scaled to round(v * 255 / maxval).
std::vector<uint8_t> read_pixels(const char* op, const std::filesystem::path& path, const Header& h);

}  // namespace aether::data::pnm
