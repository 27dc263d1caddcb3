// src/data/pnm.h - binary Netpbm images, P5 (grey) and P6 (RGB), for the image-folder readers
// (image_folder.cpp). Read here rather than by stb_image, whose PNM decoder (Debian's 2022 libstb)
// returns a truncated file's missing pixels as its buffer's old bytes, reads 16-bit values in the
// machine's byte order (the format's is big-endian), ignores maxval, and converts 16-bit pixels to
// other channels past the end of its buffer.
//
// The format (netpbm.sourceforge.net/doc/pgm.html): "P5" or "P6", then width, height and maxval
// (decimal, 1..65535), each after whitespace and "#" comment lines, then one whitespace byte and
// height * width * channels values, one byte each when maxval < 256, else two (big-endian).
// Both functions read a file's bytes that the caller has read; `path` only names it in errors.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <vector>

namespace aether::data::pnm {

constexpr size_t kMaxHeaderBytes = 4096;  // a longer header is an error

struct Header {
  int64_t width = 0, height = 0, channels = 0, maxval = 0;  // channels: 1 (P5) or 3 (P6)
  uint64_t data_offset = 0;                                 // where the pixels start
};

// The header of a file whose first bytes are `head` (the whole file, or at least its first
// kMaxHeaderBytes) and whose size is `file_size`, or nullopt when it does not start with "P5" or
// "P6". Throws aether::Error (prefixed with `op` and naming the file) for a malformed header, one
// longer than kMaxHeaderBytes, or a file too short for its pixels.
std::optional<Header> parse_header(const char* op, const std::filesystem::path& path,
                                   std::span<const uint8_t> head, uint64_t file_size);

// The pixels of a file whose bytes are `file` (all of them) and whose header is h,
// (height, width, channels) uint8, each value v scaled to round(v * 255 / maxval).
std::vector<uint8_t> read_pixels(const char* op, const std::filesystem::path& path, const Header& h,
                                 std::span<const uint8_t> file);

}  // namespace aether::data::pnm
