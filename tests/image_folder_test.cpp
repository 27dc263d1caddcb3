// data::load_image_folder (aether/data/image_folder.h): classes from the train folder's sub-folders,
// each image with its class and its pixels as written (PNG, BMP, PGM/PPM; JPEG within its loss), in a
// fixed shuffle that mixes the classes (a validation split samples each); grey folders give one
// channel and mixed ones three, alpha is dropped, resizing, other and hidden files are skipped; every
// bad folder or file is an error that names it. A model learns a folder of bright and dark images.
#include "aether/data/image_folder.h"

#include <gtest/gtest.h>
#include <stb_image_write.h>

// clang-format off
#include <cstdio>  // jpeglib.h needs FILE
#include <jpeglib.h>
// clang-format on
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "core/config.h"
#include "error_util.h"
#include "model_util.h"
#include "temp_dir.h"

using namespace aether;
namespace fs = std::filesystem;

namespace {

// An image (h, w, c) whose pixel values are seed + a running index.
std::vector<uint8_t> pixels(int h, int w, int c, int seed) {
  std::vector<uint8_t> v(size_t(h * w * c));
  for (size_t i = 0; i < v.size(); ++i) v[i] = uint8_t(seed + int(i) * 7);
  return v;
}

void write_png(const fs::path& p, int h, int w, int c, const std::vector<uint8_t>& px) {
  fs::create_directories(p.parent_path());
  ASSERT_EQ(stbi_write_png(p.c_str(), w, h, c, px.data(), w * c), 1) << p;
}

// Binary PGM (c 1) or PPM (c 3).
void write_pnm(const fs::path& p, int h, int w, int c, const std::vector<uint8_t>& px) {
  fs::create_directories(p.parent_path());
  std::ofstream f(p, std::ios::binary);
  f << (c == 1 ? "P5" : "P6") << "\n" << w << " " << h << "\n255\n";
  f.write(reinterpret_cast<const char*>(px.data()), std::streamsize(px.size()));
}

void write_text(const fs::path& p, const std::string& s) {
  fs::create_directories(p.parent_path());
  std::ofstream(p) << s;
}

std::string load_error(const fs::path& dir, data::Split split) {
  return error_of([&] { data::load_image_folder(dir, split); });
}

// `message` holds each of `parts`.
void expect_has(const std::string& message, const std::vector<std::string>& parts) {
  EXPECT_FALSE(message.empty()) << "no error";
  for (const auto& p : parts) EXPECT_TRUE(contains(message, p)) << "'" << p << "' not in: " << message;
}

// Image i of d, (H, W, C) bytes.
std::vector<uint8_t> image(const data::Dataset& d, int64_t i) {
  const auto at = d.images.begin() + i * d.image_bytes();
  return std::vector<uint8_t>(at, at + d.image_bytes());
}

// The index of the image of class `label` (the only one of it).
int64_t only_of(const data::Dataset& d, int64_t label) {
  const auto at = std::find(d.labels.begin(), d.labels.end(), label);
  EXPECT_EQ(std::count(d.labels.begin(), d.labels.end(), label), 1) << "class " << label;
  return at - d.labels.begin();
}

}  // namespace

TEST(ImageFolder, ClassesFilesAndPixels) {
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  // train: cat (3 images, written out of name order), dog (2); test: dog only.
  write_png(dir / "train/cat/b.png", 4, 5, 3, pixels(4, 5, 3, 2));
  write_png(dir / "train/cat/a.PNG", 4, 5, 3, pixels(4, 5, 3, 1));
  write_png(dir / "train/cat/c.png", 4, 5, 3, pixels(4, 5, 3, 3));
  write_pnm(dir / "train/dog/x.ppm", 4, 5, 3, pixels(4, 5, 3, 4));
  ASSERT_EQ(stbi_write_bmp((dir / "train/dog/y.bmp").c_str(), 5, 4, 3, pixels(4, 5, 3, 5).data()), 1);
  write_text(dir / "train/dog/notes.txt", "not an image");  // skipped: not an image's extension
  write_text(dir / "train/dog/.hidden.png", "skipped");     // hidden
  fs::create_directories(dir / "train/.cache");             // a hidden folder is not a class
  write_png(dir / "test/dog/z.png", 4, 5, 3, pixels(4, 5, 3, 6));
  EXPECT_EQ(data::image_folder_classes(dir), (std::vector<std::string>{"cat", "dog"}));
  const data::Dataset d = data::load_image_folder(dir, data::Split::train);
  EXPECT_EQ(d.name, "image-folder");
  EXPECT_EQ(d.n, 5);
  EXPECT_EQ(std::vector<int64_t>({d.h, d.w, d.c}), std::vector<int64_t>({4, 5, 3}));
  EXPECT_EQ(d.class_names, (std::vector<std::string>{"cat", "dog"}));
  // Each image with its class (a.PNG, b.png, c.png, x.ppm, y.bmp: seeds 1..5), in a shuffled order
  // that every load repeats.
  std::multiset<std::pair<int64_t, std::vector<uint8_t>>> got, want;
  for (int64_t i = 0; i < 5; ++i) got.insert({d.labels[size_t(i)], image(d, i)});
  for (int seed = 1; seed <= 5; ++seed) want.insert({seed <= 3 ? 0 : 1, pixels(4, 5, 3, seed)});
  EXPECT_EQ(got, want);
  const data::Dataset again = data::load_image_folder(dir, data::Split::train);
  EXPECT_EQ(again.labels, d.labels);
  EXPECT_EQ(again.images, d.images);
  const data::Dataset t = data::load_image_folder(dir, data::Split::test);
  EXPECT_EQ(t.n, 1);
  EXPECT_EQ(t.labels, (std::vector<int64_t>{1}));  // dog is class 1, as in train
  EXPECT_EQ(t.num_classes, 2);
  // The same through load_dataset and the data set's names.
  EXPECT_EQ(data::load_dataset("image_folder", dir, data::Split::test).n, 1);
  EXPECT_EQ(data::canonical_dataset_name("folder"), "image-folder");
  EXPECT_TRUE(data::has_dataset_files("image-folder", dir));
  EXPECT_FALSE(data::has_dataset_files("image-folder", dir / "train"));
}

TEST(ImageFolder, ChannelsGreyMixedAndAlpha) {
  test::TempDir tmp;
  const fs::path grey = tmp.path() / "grey";
  write_pnm(grey / "train/a/1.pgm", 3, 2, 1, pixels(3, 2, 1, 10));
  write_png(grey / "train/b/1.png", 3, 2, 2, pixels(3, 2, 2, 20));  // grey + alpha
  const data::Dataset g = data::load_image_folder(grey, data::Split::train);
  EXPECT_EQ(g.c, 1);
  const std::vector<uint8_t> ga = pixels(3, 2, 2, 20), gb = image(g, only_of(g, 1));
  for (int i = 0; i < 6; ++i) EXPECT_EQ(gb[size_t(i)], ga[size_t(2 * i)]) << "pixel " << i;
  // One colour image makes every image RGB: grey repeated over the channels, alpha dropped.
  const fs::path mixed = tmp.path() / "mixed";
  write_pnm(mixed / "train/a/1.pgm", 3, 2, 1, pixels(3, 2, 1, 10));
  write_png(mixed / "train/b/1.png", 3, 2, 4, pixels(3, 2, 4, 30));  // RGBA
  const data::Dataset m = data::load_image_folder(mixed, data::Split::train);
  EXPECT_EQ(m.c, 3);
  const std::vector<uint8_t> gv = pixels(3, 2, 1, 10), rgba = pixels(3, 2, 4, 30);
  const std::vector<uint8_t> ma = image(m, only_of(m, 0)), mb = image(m, only_of(m, 1));
  for (int i = 0; i < 6; ++i)
    for (int ch = 0; ch < 3; ++ch) {
      EXPECT_EQ(ma[size_t(3 * i + ch)], gv[size_t(i)]) << "grey pixel " << i;
      EXPECT_EQ(mb[size_t(3 * i + ch)], rgba[size_t(4 * i + ch)]) << "RGBA pixel " << i;
    }
}

// JPEG (lossy): flat colours come back within a few levels.
TEST(ImageFolder, JpegDecodes) {
  test::TempDir tmp;
  const std::vector<std::array<uint8_t, 3>> colours = {{200, 40, 90}, {10, 180, 240}};
  for (size_t k = 0; k < 2; ++k) {
    std::vector<uint8_t> px;
    for (int i = 0; i < 16 * 16; ++i) px.insert(px.end(), colours[k].begin(), colours[k].end());
    const fs::path p = tmp.path() / "train" / ("c" + std::to_string(k)) / "1.jpg";
    fs::create_directories(p.parent_path());
    ASSERT_EQ(stbi_write_jpg(p.c_str(), 16, 16, 3, px.data(), 95), 1);
  }
  const data::Dataset d = data::load_image_folder(tmp.path(), data::Split::train);
  ASSERT_EQ(d.n, 2);
  EXPECT_EQ(d.c, 3);
  for (int64_t i = 0; i < 2 * 16 * 16; ++i)
    for (int ch = 0; ch < 3; ++ch)
      ASSERT_NEAR(int(d.images[size_t(3 * i + ch)]),
                  int(colours[size_t(d.labels[size_t(i / 256)])][size_t(ch)]), 4)
          << "pixel " << i;
}

// A size to resize to: images of several sizes all come out (height, width); a flat image stays
// flat, and one already of that size keeps its pixels.
TEST(ImageFolder, ResizesToAGivenSize) {
  test::TempDir tmp;
  write_pnm(tmp.path() / "train/a/big.pgm", 12, 9, 1, std::vector<uint8_t>(12 * 9, 77));
  write_pnm(tmp.path() / "train/a/same.pgm", 4, 3, 1, pixels(4, 3, 1, 5));
  write_png(tmp.path() / "train/b/small.png", 2, 2, 3, std::vector<uint8_t>(2 * 2 * 3, 200));
  const data::Dataset d = data::load_image_folder(tmp.path(), data::Split::train, 4, 3);
  ASSERT_EQ(d.n, 3);
  EXPECT_EQ(std::vector<int64_t>({d.h, d.w, d.c}), std::vector<int64_t>({4, 3, 3}));
  // Class b: the flat colour, resized up. Class a: the flat grey resized down, and `same`.
  EXPECT_EQ(image(d, only_of(d, 1)), std::vector<uint8_t>(36, 200));
  std::vector<uint8_t> same;
  for (const uint8_t v : pixels(4, 3, 1, 5)) same.insert(same.end(), 3, v);  // grey over RGB
  std::multiset<std::vector<uint8_t>> class_a, want_a = {std::vector<uint8_t>(36, 77), same};
  for (int64_t i = 0; i < 3; ++i)
    if (d.labels[size_t(i)] == 0) class_a.insert(image(d, i));
  EXPECT_EQ(class_a, want_a);
  expect_has(error_of([&] { data::load_image_folder(tmp.path(), data::Split::train); }),
             {"every image must have the same size"});
  expect_has(error_of([&] { data::load_image_folder(tmp.path(), data::Split::train, 0, 3); }),
             {"size to resize to must be 1..65536 on both sides (or 0 and 0), got 0x3"});
  // load_dataset resizes an image folder the same way; the fixed-size sets refuse a size before
  // reading anything (the folder holds no CIFAR-10 files).
  const data::Dataset by_name = data::load_dataset("image-folder", tmp.path(), data::Split::train, 4, 3);
  EXPECT_EQ(by_name.images, d.images);
  EXPECT_EQ(by_name.labels, d.labels);
  for (const char* fixed : {"cifar-10", "fashion-mnist"})
    expect_has(error_of([&] { data::load_dataset(fixed, tmp.path(), data::Split::train, 4, 3); }),
               {"load_dataset", "(4x3) is for image folders", fixed, "has one image size"});
}

// The order mixes the classes: a validation split's last part holds every class (in class order it
// would hold the last class alone).
TEST(ImageFolder, AValidationSplitSamplesEveryClass) {
  test::TempDir tmp;
  for (const char* cls : {"a", "b", "c"})
    for (int i = 0; i < 20; ++i)
      write_pnm(tmp.path() / "train" / cls / (std::to_string(i) + ".pgm"), 2, 2, 1, pixels(2, 2, 1, i));
  const auto [train, val] =
      data::split_validation(data::load_image_folder(tmp.path(), data::Split::train), 0.2);
  ASSERT_EQ(val.n, 12);
  EXPECT_EQ(std::set<int64_t>(val.labels.begin(), val.labels.end()), (std::set<int64_t>{0, 1, 2}));
}

// Loose images for predict: a folder's image files sorted, each converted to the channels asked for
// and resized to the size asked for, in the order given.
TEST(ImageFolder, LoadImagesForPredict) {
  test::TempDir tmp;
  write_png(tmp.path() / "in/b.png", 4, 3, 3, std::vector<uint8_t>(4 * 3 * 3, 90));
  write_pnm(tmp.path() / "in/a.pgm", 2, 2, 1, pixels(2, 2, 1, 40));
  write_text(tmp.path() / "in/readme.txt", "skipped");
  const std::vector<fs::path> files = data::image_files(tmp.path() / "in");
  ASSERT_EQ(files.size(), 2u);
  EXPECT_EQ(files[0].filename(), "a.pgm");
  EXPECT_TRUE(data::is_image_file_name("x.JPEG"));
  EXPECT_FALSE(data::is_image_file_name("x.txt"));
  const data::Dataset d = data::load_images(files, 2, 2, 3);  // a.pgm as it is, b.png resized down
  EXPECT_EQ(std::vector<int64_t>({d.n, d.h, d.w, d.c}), std::vector<int64_t>({2, 2, 2, 3}));
  std::vector<uint8_t> a;
  for (const uint8_t v : pixels(2, 2, 1, 40)) a.insert(a.end(), 3, v);
  EXPECT_EQ(image(d, 0), a);
  EXPECT_EQ(image(d, 1), std::vector<uint8_t>(12, 90));
  expect_has(error_of([&] { data::load_images({tmp.path() / "in/none.png"}, 2, 2, 1); }),
             {"load_images", "in/none.png: no such file"});
  expect_has(error_of([&] { data::load_images({tmp.path() / "in/readme.txt"}, 2, 2, 1); }),
             {"in/readme.txt: not a readable image"});
  expect_has(error_of([&] { data::load_images(files, 2, 2, 2); }), {"1 or 3 channels"});
  expect_has(error_of([&] { data::image_files(tmp.path() / "nowhere"); }), {"nowhere is not a folder"});
}

TEST(ImageFolder, BadFoldersAndFilesNameThemselves) {
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  expect_has(load_error(dir / "none", data::Split::train),
             {"has neither a train nor a test folder", "DIR/train/<class>/<image>"});
  write_png(dir / "train/only/1.png", 2, 2, 1, pixels(2, 2, 1, 0));
  expect_has(load_error(dir, data::Split::train),
             {"train has 1 class folder(s); a classifier needs at least 2"});
  fs::create_directories(dir / "train/empty");
  expect_has(load_error(dir, data::Split::train), {"train/empty holds no image"});
  write_png(dir / "train/empty/1.png", 2, 3, 1, pixels(2, 3, 1, 0));
  expect_has(load_error(dir, data::Split::train),
             {"train/empty/1.png is 3x2 pixels", "train/only/1.png 2x2", "same size (or give a size"});
  write_png(dir / "train/empty/1.png", 2, 2, 1, pixels(2, 2, 1, 0));
  EXPECT_EQ(data::load_image_folder(dir, data::Split::train).n, 2);
  expect_has(load_error(dir, data::Split::test), {"test is not a folder"});
  write_png(dir / "test/horse/1.png", 2, 2, 1, pixels(2, 2, 1, 0));
  expect_has(load_error(dir, data::Split::test),
             {"test/horse: class 'horse' is not one of the 2 class folders"});
  fs::remove_all(dir / "test/horse");
  write_text(dir / "test/only/broken.png", "\x89PNG but not really");
  expect_has(load_error(dir, data::Split::test), {"test/only/broken.png: not a readable image ("});
}

// Files that stb_image alone mishandles. PNM (read by aether, src/data/pnm.h): 16-bit values are
// big-endian (stb_image took the low byte on x86, and its conversion of 16-bit grey to RGB read
// past its buffer), values scale by 255 / maxval, a truncated file is an error (stb_image returned
// its buffer's old bytes). TGA, which stb_image recognised in any file whose first bytes pass a
// loose check (and returned a truncated one's missing rows as its buffer's old bytes), is not read.
// Any format: a header claiming a huge size is refused before decoding (stb_image allocates from the
// header before reading a pixel). BMP: a palette index past the palette is an error (stb_image read
// its stack). JPEG: a Huffman table of over 256 codes is an error (stb_image wrote past its tables;
// libjpeg-turbo, which decodes JPEG now, refuses it).
TEST(ImageFolder, FilesStbImageMishandles) {
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  // A 16-bit PGM, 3x2, values 257 k + 100 (big-endian), which scale to k: the low byte is k + 100.
  std::string pgm16 = "P5\n3 2\n65535\n";
  std::vector<uint8_t> grey;
  for (int k = 0; k < 6; ++k) {
    const int v = 257 * (30 * k + 3) + 100;
    grey.push_back(uint8_t(30 * k + 3));
    pgm16 += char(v >> 8);
    pgm16 += char(v & 255);
  }
  write_text(dir / "train/a/wide.pgm", pgm16);
  write_png(dir / "train/b/colour.png", 2, 3, 3, pixels(2, 3, 3, 9));
  const data::Dataset d = data::load_image_folder(dir, data::Split::train);
  ASSERT_EQ(d.c, 3);
  std::vector<uint8_t> rgb;
  for (const uint8_t v : grey) rgb.insert(rgb.end(), 3, v);
  EXPECT_EQ(image(d, only_of(d, 0)), rgb);
  EXPECT_EQ(image(data::load_images({dir / "train/a/wide.pgm"}, 2, 3, 3), 0), rgb);
  EXPECT_EQ(image(data::load_images({dir / "train/a/wide.pgm"}, 2, 3, 1), 0), grey);
  // maxval 1000, to grey: (1000, 500, 0) scale to (255, 128, 0) (127.5 rounds up), then luma.
  write_text(dir / "in/wide.ppm", std::string("P6\n1 1\n1000\n\x03\xe8\x01\xf4\0\0", 18));
  EXPECT_EQ(image(data::load_images({dir / "in/wide.ppm"}, 1, 1, 1), 0),
            std::vector<uint8_t>{uint8_t((255 * 77 + 128 * 150) >> 8)});
  // maxval 15, 8-bit: 15 is white.
  write_text(dir / "in/four_bits.pgm", std::string("P5 2 1 15\n\x0f\x05", 12));
  EXPECT_EQ(image(data::load_images({dir / "in/four_bits.pgm"}, 1, 2, 1), 0),
            (std::vector<uint8_t>{255, 85}));

  // Truncated: a 4x4 PGM needs 11 + 16 bytes.
  write_text(dir / "train/a/cut.pgm", "P5\n4 4\n255\n01234");
  expect_has(
      load_error(dir, data::Split::train),
      {"train/a/cut.pgm: truncated PNM image: its header (4x4, maxval 255) needs 27 bytes, the file has 16"});
  expect_has(error_of([&] { data::load_images({dir / "train/a/cut.pgm"}, 4, 4, 1); }),
             {"load_images", "cut.pgm: truncated PNM image"});
  write_text(dir / "train/a/cut.pgm", "P5\n4 4\n0\n0123456789abcdef");
  expect_has(load_error(dir, data::Split::train),
             {"cut.pgm: not a readable PNM image (its maxval must be a number 1..65535)"});
  write_text(dir / "train/a/cut.pgm", "P54 4 255\n0123456789abcdef");
  expect_has(load_error(dir, data::Split::train),
             {"cut.pgm: not a readable PNM image (no whitespace before its width)"});
  fs::remove(dir / "train/a/cut.pgm");
  EXPECT_EQ(data::load_image_folder(dir, data::Split::train).n, 2);

  // A truncated uncompressed TGA (found by fuzz/image_fuzz.cpp): not an image.
  write_text(dir / "train/a/tga.png", std::string("P\0\x02P[\x02P5\0\0\0\0\x01\0\x11` 4@W2P\0"
                                                  "5 \x17"
                                                  "4",
                                                  27));
  expect_has(load_error(dir, data::Split::train), {"train/a/tga.png: not a readable image ("});
  fs::remove(dir / "train/a/tga.png");

  // 8-bit palette BMPs, 2x1: a palette of 2 colours and pixels (0, 1) decode to the colours; a pixel
  // of colour 2 or a pixel offset that leaves no room for a palette is an error (stb_image read
  // colours from its stack). File header (14), info header (40), palette (B, G, R, 0 each), pixels.
  const auto palette_bmp = [](int offset, uint8_t second) {
    std::string b = "BM";
    const auto u32 = [&](uint32_t v) {
      for (int i = 0; i < 4; ++i) b += char((v >> (8 * i)) & 255);
    };
    u32(uint32_t(offset + 4)), u32(0), u32(uint32_t(offset));
    u32(40), u32(2), u32(1), b += std::string("\x01\0\x08\0", 4), u32(0), u32(4), u32(0), u32(0), u32(2),
        u32(0);
    b += std::string("\x10\x20\x30\0\xff\xfe\xfd\0", 8);
    b.resize(size_t(offset), '\0');
    return b + char(0) + char(second) + std::string(2, '\0');
  };
  write_text(dir / "in/palette.bmp", palette_bmp(62, 1));
  EXPECT_EQ(image(data::load_images({dir / "in/palette.bmp"}, 1, 2, 3), 0),
            (std::vector<uint8_t>{0x30, 0x20, 0x10, 0xfd, 0xfe, 0xff}));
  write_text(dir / "in/palette.bmp", palette_bmp(62, 2));
  expect_has(error_of([&] { data::load_images({dir / "in/palette.bmp"}, 1, 2, 3); }),
             {"palette.bmp: not a readable BMP image (pixel (0, 1) of the file's rows is colour 2 of a "
              "palette of 2)"});
  write_text(dir / "in/palette.bmp", palette_bmp(50, 0));
  expect_has(error_of([&] { data::load_images({dir / "in/palette.bmp"}, 1, 2, 3); }),
             {"palette.bmp: not a readable BMP image (its 8-bit pixels need a palette of 1 to 256 colours, "
              "the pixel "
              "offset 50 leaves room for -1)"});

  // A JPEG whose first Huffman table claims 2 x 255 + more codes (stb_image wrote past its tables).
  ASSERT_EQ(stbi_write_jpg((dir / "in/huffman.jpg").c_str(), 8, 8, 3, pixels(8, 8, 3, 1).data(), 90), 1);
  std::ifstream in(dir / "in/huffman.jpg", std::ios::binary);
  std::string jpeg((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(data::load_images({dir / "in/huffman.jpg"}, 8, 8, 3).n, 1);
  const size_t dht = jpeg.find("\xff\xc4");
  ASSERT_NE(dht, std::string::npos);
  jpeg[dht + 5] = jpeg[dht + 6] = '\xff';  // after the marker, the length and the class/id byte
  write_text(dir / "in/huffman.jpg", jpeg);
  expect_has(error_of([&] { data::load_images({dir / "in/huffman.jpg"}, 8, 8, 3); }),
             {"huffman.jpg: not a readable JPEG image (Bogus Huffman table definition)"});

  // A 13-byte GIF header claiming 65535 x 65535 pixels, over the default limit; the limit follows
  // AETHER_MAX_IMAGE_PIXELS (config().max_image_pixels).
  write_text(dir / "train/a/huge.gif", std::string("GIF89a\xff\xff\xff\xff\0\0\0", 13));
  expect_has(load_error(dir, data::Split::train),
             {"train/a/huge.gif: 65535x65535 pixels, over the limit of 67108864 (AETHER_MAX_IMAGE_PIXELS)"});
  expect_has(error_of([&] { data::load_images({dir / "train/a/huge.gif"}, 8, 8, 3); }),
             {"load_images", "huge.gif: 65535x65535 pixels, over the limit"});
  fs::remove(dir / "train/a/huge.gif");
  config().max_image_pixels = 5;
  expect_has(load_error(dir, data::Split::train),
             {": 3x2 pixels, over the limit of 5 (AETHER_MAX_IMAGE_PIXELS)"});
  config().max_image_pixels = 6;
  EXPECT_EQ(data::load_image_folder(dir, data::Split::train).n, 2);
  config().max_image_pixels = 1 << 26;
}

namespace {

std::string be32(uint32_t v) {
  return {char(v >> 24), char((v >> 16) & 255), char((v >> 8) & 255), char(v & 255)};
}

// A PNG file of the chunks given (type, data), each with its CRC (zlib's crc32, PNG's CRC).
std::string png_of(const std::vector<std::pair<std::string, std::string>>& chunks) {
  std::string f = "\x89PNG\r\n\x1a\n";
  for (const auto& [type, data] : chunks) {
    const std::string typed = type + data;
    const auto crc = uint32_t(crc32(0, reinterpret_cast<const Bytef*>(typed.data()), uInt(typed.size())));
    f += be32(uint32_t(data.size())) + typed + be32(crc);
  }
  return f;
}

// `raw` as a zlib stream (zlib's compress), as a PNG's image data holds it.
std::string zlib_of(const std::string& raw) {
  std::string out(compressBound(uLong(raw.size())), '\0');
  uLongf size = uLongf(out.size());
  EXPECT_EQ(compress(reinterpret_cast<Bytef*>(out.data()), &size, reinterpret_cast<const Bytef*>(raw.data()),
                     uLong(raw.size())),
            Z_OK);
  out.resize(size);
  return out;
}

}  // namespace

// A folder whose images, at their size, need more memory than the machine has is refused after the
// headers are read and before any pixels are (it ended as std::bad_alloc or the OOM killer's
// SIGKILL): PNG headers of 30000x30000 grey (0.84 GiB each), enough of them to pass the machine's
// memory, each file 70 bytes.
TEST(ImageFolder, ImagesLargerThanMemoryAreRefusedBeforeTheyAreRead) {
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  const uint64_t memory = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGE_SIZE));
  const uint64_t each = uint64_t(30000) * 30000, n = memory / each + 2;
  const std::string png = png_of({{"IHDR", be32(30000) + be32(30000) + std::string("\x08\0\0\0\0", 5)},
                                  {"IDAT", zlib_of(std::string(4, '\0'))},
                                  {"IEND", ""}});
  for (uint64_t i = 0; i < n; ++i)
    write_text(dir / "train" / (i % 2 ? "a" : "b") / (std::to_string(i) + ".png"), png);
  config().max_image_pixels = 1 << 30;
  expect_has(load_error(dir, data::Split::train),
             {"load_image_folder",
              (dir / "train").string() + ": " + std::to_string(n) + " images of 30000x30000x1 need ",
              " GiB of memory, more than this machine has (", "resize them as they load (--image-size HxW"});
  std::vector<fs::path> files;
  for (uint64_t i = 0; i < n; ++i)
    files.push_back(dir / "train" / (i % 2 ? "a" : "b") / (std::to_string(i) + ".png"));
  expect_has(error_of([&] { data::load_images(files, 30000, 30000, 1); }),
             {"load_images: images: " + std::to_string(n) + " images of 30000x30000x1 need",
              "pass fewer at a time"});
  config().max_image_pixels = 1 << 26;
}

// PNG by libpng: a palette with alpha (tRNS) comes out RGBA, whatever chunks come before it (here
// 100,000 bytes of tEXt, past the first 96 KiB that a header is first read from); grey of 2 bits
// scales to 8, 16-bit values to their high byte (as stb_image did). A bad CRC of an ancillary
// chunk only drops it; of the image data, and image data cut short, are errors naming the file.
TEST(ImageFolder, PngByLibpng) {
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  // 2x1, 8-bit palette of 2 colours with alpha (tRNS), pixels (0, 1), after a 5,000-byte tEXt chunk.
  const std::string ihdr = be32(2) + be32(1) + std::string("\x08\x03\0\0\0", 5);
  write_text(dir / "train/a/palette.png",
             png_of({{"IHDR", ihdr},
                     {"tEXt", "Comment" + std::string(1, '\0') + std::string(100000, 'x')},
                     {"PLTE", "\x0a\x14\x1e\xc8\x64\x32"},
                     {"tRNS", "\xff\x80"},
                     {"IDAT", zlib_of(std::string("\0\0\x01", 3))},
                     {"IEND", ""}}));
  ASSERT_GT(fs::file_size(dir / "train/a/palette.png"), 96u << 10);
  write_png(dir / "train/b/grey.png", 1, 2, 1, pixels(1, 2, 1, 3));
  const data::Dataset d = data::load_image_folder(dir, data::Split::train);
  ASSERT_EQ(d.c, 3);  // RGBA: alpha dropped
  EXPECT_EQ(image(d, only_of(d, 0)), (std::vector<uint8_t>{10, 20, 30, 200, 100, 50}));
  EXPECT_EQ(image(d, only_of(d, 1)), (std::vector<uint8_t>{3, 3, 3, 10, 10, 10}));

  // 4x1 grey of 2 bits, values 0..3 (one byte); 2x1 grey of 16 bits, 0x12ff and 0xab00.
  write_text(dir / "in/grey2.png", png_of({{"IHDR", be32(4) + be32(1) + std::string("\x02\0\0\0\0", 5)},
                                           {"IDAT", zlib_of(std::string("\0\x1b", 2))},
                                           {"IEND", ""}}));
  EXPECT_EQ(image(data::load_images({dir / "in/grey2.png"}, 1, 4, 1), 0),
            (std::vector<uint8_t>{0, 85, 170, 255}));
  const std::string grey16 = png_of({{"IHDR", be32(2) + be32(1) + std::string("\x10\0\0\0\0", 5)},
                                     {"tEXt", "Comment" + std::string(1, '\0') + "x"},
                                     {"IDAT", zlib_of(std::string("\0\x12\xff\xab\0", 5))},
                                     {"IEND", ""}});
  write_text(dir / "in/grey16.png", grey16);
  EXPECT_EQ(image(data::load_images({dir / "in/grey16.png"}, 1, 2, 1), 0),
            (std::vector<uint8_t>{0x12, 0xab}));
  std::string bad = grey16;
  const size_t text_crc = bad.find("IDAT") - 8;  // the tEXt chunk's CRC, before the IDAT's length
  bad[text_crc] = char(bad[text_crc] ^ 1);
  write_text(dir / "in/grey16.png", bad);
  EXPECT_EQ(image(data::load_images({dir / "in/grey16.png"}, 1, 2, 1), 0),
            (std::vector<uint8_t>{0x12, 0xab}));
  bad = grey16;
  const size_t idat_crc = bad.find("IEND") - 8;
  bad[idat_crc] = char(bad[idat_crc] ^ 1);
  write_text(dir / "in/grey16.png", bad);
  expect_has(error_of([&] { data::load_images({dir / "in/grey16.png"}, 1, 2, 1); }),
             {"load_images", "grey16.png: not a readable PNG image (IDAT: CRC error)"});
  write_text(dir / "in/grey16.png", grey16.substr(0, grey16.find("IDAT") + 8));
  expect_has(error_of([&] { data::load_images({dir / "in/grey16.png"}, 1, 2, 1); }),
             {"grey16.png: not a readable PNG image (the file ends too early)"});
}

namespace {

// A JPEG by libjpeg of a flat (h, w) image whose every pixel is `value` (1 to 4 components) in
// colour space `space`: quality 100, progressive or not, with an Adobe marker or not.
std::string libjpeg_file(int h, int w, J_COLOR_SPACE space, const std::vector<uint8_t>& value,
                         bool progressive, bool adobe) {
  jpeg_compress_struct c;
  jpeg_error_mgr errors;
  c.err = jpeg_std_error(&errors);
  jpeg_create_compress(&c);
  unsigned char* out = nullptr;
  unsigned long size = 0;
  jpeg_mem_dest(&c, &out, &size);
  c.image_width = JDIMENSION(w);
  c.image_height = JDIMENSION(h);
  c.input_components = int(value.size());
  c.in_color_space = space;
  jpeg_set_defaults(&c);
  jpeg_set_quality(&c, 100, TRUE);
  if (progressive) jpeg_simple_progression(&c);
  c.write_Adobe_marker = adobe ? TRUE : FALSE;
  jpeg_start_compress(&c, TRUE);
  std::vector<uint8_t> row;
  for (int x = 0; x < w; ++x) row.insert(row.end(), value.begin(), value.end());
  while (c.next_scanline < c.image_height) {
    JSAMPROW r = row.data();
    jpeg_write_scanlines(&c, &r, 1);
  }
  jpeg_finish_compress(&c);
  std::string file(reinterpret_cast<const char*>(out), size);
  jpeg_destroy_compress(&c);
  std::free(out);
  return file;
}

}  // namespace

// JPEG by libjpeg-turbo: grey stays one channel; a frame after 120,000 bytes of comments is found
// (its header read from the whole file); CMYK comes out RGB as Pillow converts it, the ink
// values of an Adobe file stored inverted (R = C' K' / 255 of the stored values), else as they are
// (R = (255 - C) (255 - K) / 255); a file that ends before its image is an error, as is one of over
// 500 progressive scans (here one scan repeated: libjpeg decodes each, a few bytes apiece).
TEST(ImageFolder, JpegByLibjpegTurbo) {
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  const auto near = [](const std::vector<uint8_t>& got, const std::vector<uint8_t>& want) {
    ASSERT_EQ(got.size() % want.size(), 0u);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_NEAR(int(got[i]), int(want[i % want.size()]), 2) << "value " << i;
  };
  write_text(dir / "train/a/grey.jpg", libjpeg_file(8, 8, JCS_GRAYSCALE, {77}, false, false));
  write_text(dir / "train/b/grey.jpg", libjpeg_file(8, 8, JCS_GRAYSCALE, {150}, true, false));
  const data::Dataset d = data::load_image_folder(dir, data::Split::train);
  ASSERT_EQ(d.c, 1);
  near(image(d, only_of(d, 0)), {77});
  near(image(d, only_of(d, 1)), {150});

  write_text(dir / "in/adobe.jpg", libjpeg_file(8, 8, JCS_CMYK, {200, 100, 50, 128}, false, true));
  near(image(data::load_images({dir / "in/adobe.jpg"}, 8, 8, 3), 0), {100, 50, 25});
  write_text(dir / "in/cmyk.jpg", libjpeg_file(8, 8, JCS_CMYK, {200, 100, 50, 128}, false, false));
  near(image(data::load_images({dir / "in/cmyk.jpg"}, 8, 8, 3), 0), {27, 77, 102});

  const std::string rgb = libjpeg_file(16, 16, JCS_RGB, {200, 40, 90}, true, false);
  write_text(dir / "in/rgb.jpg", rgb);
  near(image(data::load_images({dir / "in/rgb.jpg"}, 16, 16, 3), 0), {200, 40, 90});
  // Two comment segments of 60,000 bytes before the frame: its header is past the first 96 KiB.
  std::string comments = rgb.substr(0, 2);
  for (int k = 0; k < 2; ++k) comments += std::string("\xff\xfe\xea\x62", 4) + std::string(60000, 'c');
  write_text(dir / "train/a/grey.jpg", comments + rgb.substr(2));
  const data::Dataset commented = data::load_image_folder(dir, data::Split::train, 16, 16);
  ASSERT_EQ(commented.c, 3);
  near(image(commented, only_of(commented, 0)), {200, 40, 90});
  const std::string baseline = libjpeg_file(16, 16, JCS_RGB, {200, 40, 90}, false, false);
  const size_t scan = baseline.find("\xff\xda");  // cut halfway into its one scan's data
  ASSERT_NE(scan, std::string::npos);
  write_text(dir / "in/cut.jpg", baseline.substr(0, (scan + baseline.size()) / 2));
  expect_has(error_of([&] { data::load_images({dir / "in/cut.jpg"}, 16, 16, 3); }),
             {"load_images", "cut.jpg: truncated JPEG image (the file ends before its image does)"});
  const size_t last_scan = rgb.rfind("\xff\xda"), eoi = rgb.size() - 2;
  ASSERT_NE(last_scan, std::string::npos);
  std::string scans = rgb.substr(0, eoi);
  for (int k = 0; k < 600; ++k) scans += rgb.substr(last_scan, eoi - last_scan);
  write_text(dir / "in/scans.jpg", scans + rgb.substr(eoi));
  expect_has(error_of([&] { data::load_images({dir / "in/scans.jpg"}, 16, 16, 3); }),
             {"scans.jpg: not a readable JPEG image (more than 500 progressive scans)"});
}

// A file larger than any image within AETHER_MAX_IMAGE_PIXELS could be (16 bytes a pixel and
// 16 MiB) is refused before it is read whole: a 1x1 PNG padded to 17 MiB (stb_image ignores what
// follows IEND) loads under the default limit and not under a limit of 1 pixel.
TEST(ImageFolder, AFileOverTheSizeLimit) {
  test::TempDir tmp;
  const fs::path dir = tmp.path();
  write_png(dir / "train/a/big.png", 1, 1, 1, {7});
  fs::resize_file(dir / "train/a/big.png", 17u << 20);
  write_png(dir / "train/b/small.png", 1, 1, 1, {9});
  const data::Dataset d = data::load_image_folder(dir, data::Split::train);
  EXPECT_EQ(image(d, only_of(d, 0)), std::vector<uint8_t>{7});
  config().max_image_pixels = 1;
  expect_has(load_error(dir, data::Split::train),
             {"train/a/big.png: 17825792 bytes, more than an image within the pixel limit of 1 "
              "(AETHER_MAX_IMAGE_PIXELS) may have (16777232)"});
  expect_has(error_of([&] { data::load_images({dir / "train/a/big.png"}, 1, 1, 1); }),
             {"load_images", "big.png: 17825792 bytes, more than"});
  config().max_image_pixels = 1 << 26;
}

// Bright images are class "bright", dark ones "dark": a small model learns them from the folder,
// so labels and pixels travel together.
TEST(ImageFolder, AModelLearnsTheFolderClasses) {
  test::TempDir tmp;
  std::mt19937 gen(3);
  std::uniform_int_distribution<int> noise(0, 60);
  for (const char* split : {"train", "test"})
    for (int i = 0; i < (split[1] == 'r' ? 40 : 20); ++i)
      for (const bool bright : {false, true}) {
        std::vector<uint8_t> px(6 * 6);
        for (auto& p : px) p = uint8_t((bright ? 150 : 40) + noise(gen));
        write_pnm(tmp.path() / split / (bright ? "bright" : "dark") / (std::to_string(i) + ".pgm"), 6, 6, 1,
                  px);
      }
  const data::Dataset train = data::load_image_folder(tmp.path(), data::Split::train),
                      test = data::load_image_folder(tmp.path(), data::Split::test);
  ASSERT_EQ(train.n, 80);
  manual_seed(1);
  Model m;
  m.add(model_test::mk<nn::Flatten>()).add(model_test::mk<nn::Linear>(36, 2));
  ModelConfig c;
  c.optimizer = "adam";
  c.lr = 0.05;
  m.configure(c).finalize({6, 6, 1});
  TrainOptions o = model_test::train_options(5);
  m.train(train, o);
  const EvalResult r = m.evaluate(test);
  EXPECT_GE(r.accuracy, 0.95);
  EXPECT_EQ(r.samples, 40);
}
