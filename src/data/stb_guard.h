// src/data/stb_guard.h - checks of image files before stb_image decodes them (image_file.cpp),
// one per bug of stb_image (Debian's 2022 libstb, compiled in by stb_image_impl.cpp) that
// fuzz/image_fuzz.cpp found and that a file can trigger. Each refuses the files that would
// trigger it, reading the file as stb_image does; other files pass. Each takes the file's bytes,
// all of them (image_file.cpp decodes those same bytes); `path` only names it in errors.
// stb_image's source is Debian's and is not patched here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

namespace aether::data::stb_guard {

// Whether `file` starts as a BMP does ("BM").
bool is_bmp(std::span<const uint8_t> file);

// BMP: stb_image looks each pixel of a 1-, 4- or 8-bit BMP up in a 256-entry palette on its stack
// of which only the file's entries are written, so an index past them, or a palette whose size
// (from the pixel data's offset) is negative, gives pixels of whatever the stack held. Throws
// aether::Error (prefixed with `op`, naming the file) for a palette BMP whose palette is empty,
// negative or over 256 entries, or one of whose pixels indexes past it. stb_image's reading: file
// header 14 bytes; info header of 12, 40, 56, 108 or 124 bytes; the palette between it and the
// pixel data's offset, 3 bytes an entry after a 12-byte header, else 4.
void check_bmp(const char* op, const std::filesystem::path& path, std::span<const uint8_t> b);

}  // namespace aether::data::stb_guard
