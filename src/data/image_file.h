// src/data/image_file.h - one image file to its size and pixels, for the image-folder readers
// (image_folder.cpp). The format is taken from the file's first bytes, not its name, and each is
// decoded by a well-kept library where Debian has one: PNG by libpng, JPEG by libjpeg-turbo
// (png_image.cpp, jpeg_image.cpp); BMP and GIF by stb_image (stb_image_impl.cpp), after
// stb_guard's checks; binary PNM by pnm.cpp.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <vector>

namespace aether::data {

// An image: its size, its channels (1 grey, 2 grey + alpha, 3 RGB, 4 RGBA) and, when decoded, its
// pixels, (height, width, channels) uint8.
struct DecodedImage {
  int width = 0, height = 0, channels = 0;
  std::vector<uint8_t> pixels;
};

// Called with an image's size from its header, before any pixel is decoded; throws to refuse it.
using SizeCheck = std::function<void(int width, int height)>;

// The image in the file at `path`: its header (from the file's first 96 KiB when they hold it), or
// with `pixels` its header and pixels (the file read whole once). Throws aether::Error (prefixed
// with `op`, naming the file) for a file that cannot be read, is not an image of a format above or
// does not decode (the decoder's reason), is larger than an image within AETHER_MAX_IMAGE_PIXELS
// could be (16 bytes a pixel and 16 MiB), or whose header gives more pixels than
// AETHER_MAX_IMAGE_PIXELS: the decoders allocate up to 13 bytes a pixel from the header alone.
DecodedImage read_image_file(const char* op, const std::filesystem::path& path, bool pixels);

}  // namespace aether::data
