// data::load_image_folder (aether/data/image_folder.h): classes from the train folder's sub-folders,
// images in class then file-name order with their pixels as written (PNG, BMP, PGM/PPM; JPEG within
// its loss), grey folders give one channel and mixed ones three, alpha is dropped, other and hidden
// files are skipped; every bad folder or file is an error that names it. A model learns the classes
// of a folder of bright and dark images.
#include "aether/data/image_folder.h"

#include <gtest/gtest.h>
#include <stb_image_write.h>

#include <array>
#include <fstream>
#include <random>
#include <string>
#include <vector>

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
  EXPECT_EQ(d.labels, (std::vector<int64_t>{0, 0, 0, 1, 1}));
  for (int i = 0; i < 5; ++i) {  // a.PNG, b.png, c.png, x.ppm, y.bmp: seeds 1..5
    const std::vector<uint8_t> want = pixels(4, 5, 3, i + 1);
    EXPECT_TRUE(std::equal(want.begin(), want.end(), d.images.begin() + i * 60)) << "image " << i;
  }
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
  const std::vector<uint8_t> ga = pixels(3, 2, 2, 20);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(g.images[size_t(6 + i)], ga[size_t(2 * i)]) << "pixel " << i;
  // One colour image makes every image RGB: grey repeated over the channels, alpha dropped.
  const fs::path mixed = tmp.path() / "mixed";
  write_pnm(mixed / "train/a/1.pgm", 3, 2, 1, pixels(3, 2, 1, 10));
  write_png(mixed / "train/b/1.png", 3, 2, 4, pixels(3, 2, 4, 30));  // RGBA
  const data::Dataset m = data::load_image_folder(mixed, data::Split::train);
  EXPECT_EQ(m.c, 3);
  const std::vector<uint8_t> gv = pixels(3, 2, 1, 10), rgba = pixels(3, 2, 4, 30);
  for (int i = 0; i < 6; ++i)
    for (int ch = 0; ch < 3; ++ch) {
      EXPECT_EQ(m.images[size_t(3 * i + ch)], gv[size_t(i)]) << "grey pixel " << i;
      EXPECT_EQ(m.images[size_t(18 + 3 * i + ch)], rgba[size_t(4 * i + ch)]) << "RGBA pixel " << i;
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
      ASSERT_NEAR(int(d.images[size_t(3 * i + ch)]), int(colours[size_t(i / 256)][size_t(ch)]), 4)
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
  for (int i = 0; i < 12 * 3; ++i) {
    EXPECT_EQ(d.images[size_t(i)], 77) << "flat grey, resized down: pixel value " << i;
    EXPECT_EQ(d.images[size_t(72 + i)], 200) << "flat colour, resized up: pixel value " << i;
  }
  const std::vector<uint8_t> same = pixels(4, 3, 1, 5);
  for (int i = 0; i < 12; ++i) EXPECT_EQ(d.images[size_t(36 + 3 * i)], same[size_t(i)]) << "pixel " << i;
  expect_has(error_of([&] { data::load_image_folder(tmp.path(), data::Split::train); }),
             {"every image must have the same size"});
  expect_has(error_of([&] { data::load_image_folder(tmp.path(), data::Split::train, 0, 3); }),
             {"size to resize to must be 1..65536 on both sides (or 0 and 0), got 0x3"});
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
             {"train/only/1.png is 2x2 pixels", "train/empty/1.png 3x2", "same size (or give a size"});
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
