// aether/data/image_folder.h - a data set of one's own images, one sub-folder per class (the layout
// of torchvision's ImageFolder, one tree per split):
//
//   DIR/train/<class>/<image>...     DIR/test/<class>/<image>...
//
//   aether::data::Dataset train = aether::data::load_image_folder(dir, aether::data::Split::train);
//   // train.images (N,H,W,C) uint8, train.labels (N) int64, train.class_names the class folders
//
// The CLI takes it as `--dataset image-folder --data-dir DIR`.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "aether/data/dataset.h"

namespace aether::data {

// The file names the image-folder readers take, by extension in any case: PNG (decoded by libpng),
// JPEG (libjpeg-turbo), BMP and GIF (stb_image) and binary PNM (P5/P6, read by aether). Each file's
// format is taken from its bytes, not its name. No TGA: a format without a signature, so that
// stb_image would take unreadable files of other kinds for one.
inline constexpr const char* kImageExtensions = ".png, .jpg, .jpeg, .bmp, .gif, .pnm, .pgm, .ppm";
bool is_image_file_name(const std::filesystem::path& p);

// The classes: the sub-folders of DIR/train, sorted by name (byte order); of DIR/test when there is
// no DIR/train. Label i is class_names[i] in both splits. Hidden folders (".name") are not classes.
std::vector<std::string> image_folder_classes(const std::filesystem::path& dir);

// The images of one split: PNG, JPEG, BMP, GIF (its first frame) and binary PNM/PGM/PPM files (by
// extension, in any case; kImageExtensions); other files and hidden ones are skipped. Their
// order is a fixed shuffle (the same for the same files on every machine), so that the last part
// that split_validation holds out is a sample of every class rather than the last class. With height and
// width > 0 every image is resized to (height, width) (stb_image_resize's default filter, Mitchell or
// Catmull-Rom); with 0 and 0 every image must have the same size (an error names the first image of another
// size). C is 1 when every image is grey (with or without alpha), else 3 (RGB; alpha is dropped, grey images
// are repeated over the three channels). Throws aether::Error naming the folder or file for: a missing split
// folder, fewer than 2 classes, a class folder of the split without images (train) or a test class that train
// does not have, an image that does not decode (the decoder's reason), a truncated PNM or JPEG, an image over
// AETHER_MAX_IMAGE_PIXELS (width x height; default 8192 x 8192) or a file larger than such an image
// could be (16 bytes a pixel of that limit and 16 MiB), and a size mismatch. Each file is read
// twice: its first bytes for its header (the whole file when they do not hold it), then the whole
// file to decode it (src/data/image_file.h).
Dataset load_image_folder(const std::filesystem::path& dir, Split split, int64_t height = 0,
                          int64_t width = 0);

// The image files of one folder (not its sub-folders), as load_image_folder picks them, sorted.
std::vector<std::filesystem::path> image_files(const std::filesystem::path& dir);

// Image files to predict on: each decoded to `channels` (1 or 3) and resized to (height, width)
// when its size differs, in the order given, without labels (the data set's name: the one file's
// path, or "images"). Throws aether::Error naming a file that does not decode.
Dataset load_images(const std::vector<std::filesystem::path>& files, int64_t height, int64_t width,
                    int64_t channels);

}  // namespace aether::data
