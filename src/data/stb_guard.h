// src/data/stb_guard.h - checks of image files before stb_image decodes them (image_folder.cpp),
// one per bug of stb_image (Debian's 2022 libstb, compiled in by stb_image_impl.cpp) that
// fuzz/image_fuzz.cpp found and that a file can trigger. Each refuses the files that would
// trigger it, reading the file as stb_image does; other files pass. Each takes the file's bytes,
// all of them (image_folder.cpp decodes those same bytes); `path` only names it in errors.
// stb_image's source is Debian's and is not patched here.
#pragma once

#include <cstdint>
#include <filesystem>
#include <span>

namespace aether::data::stb_guard {

// Whether a file starting with `head` is of a kind checked here (BMP, JPEG), so that the checks
// need all of its bytes.
bool checks(std::span<const uint8_t> head);

// BMP: stb_image looks each pixel of a 1-, 4- or 8-bit BMP up in a 256-entry palette on its stack
// of which only the file's entries are written, so an index past them, or a palette whose size
// (from the pixel data's offset) is negative, gives pixels of whatever the stack held. Throws
// aether::Error (prefixed with `op`, naming the file) for a palette BMP whose palette is empty,
// negative or over 256 entries, or one of whose pixels indexes past it. stb_image's reading: file
// header 14 bytes; info header of 12, 40, 56, 108 or 124 bytes; the palette between it and the
// pixel data's offset, 3 bytes an entry after a 12-byte header, else 4.
void check_bmp(const char* op, const std::filesystem::path& path, std::span<const uint8_t> b);

// JPEG: stb_image builds a Huffman table from the 16 code counts of a DHT segment without checking
// that they sum to at most 256, and writes that many code sizes and values into arrays of 257 and
// 256 (past them into the rest of its decoder state). Throws aether::Error for a JPEG with a DHT
// table of more than 256 codes (or one cut short by the end of its segment). The segments are found
// as a JPEG decoder finds them: from SOI, each marker's length, and inside entropy-coded data the
// next 0xFF byte not followed by 0x00, 0xFF or a restart marker; the scan stops at EOI.
void check_jpeg(const char* op, const std::filesystem::path& path, std::span<const uint8_t> b);

}  // namespace aether::data::stb_guard
