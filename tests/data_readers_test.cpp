// Data readers: IDX (plain / gzip) and CIFAR-10 batches (plain / xz / gzip) built by hand in a temp
// dir, broken files (truncated, bad magic, wrong dims, labels out of range, corrupt compression),
// the Fashion-MNIST / CIFAR-10 data set loaders, and smoke tests on the real data when present.
#include <gtest/gtest.h>

#include <array>

#include "aether/core/error.h"
#include "aether/data/byte_reader.h"
#include "aether/data/dataset.h"
#include "aether/data/readers.h"
#include "data/fixtures.h"

using namespace aether::data;
using namespace aether::data::test_util;

namespace {

// The message of the aether::Error that f throws ("(no error)" when it returns, "(other
// exception)" for any other exception).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const aether::Error& e) {
    return e.what();
  } catch (...) {
    return "(other exception)";
  }
  return "(no error)";
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << "message: " << (msg)

// 3 images of 4x5: pixel (i, y, x) = test_pixel(i, y, x, 0).
Bytes small_pixels() {
  Bytes p;
  for (int64_t i = 0; i < 3; ++i) {
    for (int64_t y = 0; y < 4; ++y) {
      for (int64_t x = 0; x < 5; ++x) p.push_back(test_pixel(i, y, x, 0));
    }
  }
  return p;
}

}  // namespace

TEST(DataIdx, PlainAndGzipImagesAndLabels) {
  TempDir d;
  const Bytes pixels = small_pixels();
  const Bytes img = idx_images(3, 4, 5, pixels);
  const Bytes lab = idx_labels({3, 0, 9});
  write_file(d / "img", img);
  write_file(d / "img.gz", gzip_stored(img));
  write_file(d / "lab", lab);
  write_file(d / "lab.gz", gzip_stored(lab));
  for (const char* name : {"img", "img.gz"}) {
    const IdxImages im = read_idx_images((d / name).string());
    EXPECT_EQ(im.n, 3);
    EXPECT_EQ(im.rows, 4);
    EXPECT_EQ(im.cols, 5);
    EXPECT_EQ(im.pixels, pixels) << name;
  }
  for (const char* name : {"lab", "lab.gz"}) {
    EXPECT_EQ(read_idx_labels((d / name).string(), 10), (std::vector<uint8_t>{3, 0, 9})) << name;
  }
  // Compression is detected by magic bytes, not by name.
  write_file(d / "plain.gz", img);
  write_file(d / "gzipped", gzip_stored(img));
  EXPECT_EQ(read_idx_images((d / "plain.gz").string()).pixels, pixels);
  EXPECT_EQ(read_idx_images((d / "gzipped").string()).pixels, pixels);
  EXPECT_EQ(ByteReader((d / "gzipped").string()).compression(), Compression::gzip);
  EXPECT_EQ(ByteReader((d / "plain.gz").string()).compression(), Compression::none);
}

TEST(DataIdx, LargeGzipSpansManyBlocks) {
  TempDir d;
  // 200 images of 28x28 = 156,800 bytes: three stored deflate blocks.
  Bytes pixels(200 * 28 * 28);
  for (size_t i = 0; i < pixels.size(); ++i) pixels[i] = uint8_t((i * 7919) % 256);
  write_file(d / "img.gz", gzip_stored(idx_images(200, 28, 28, pixels)));
  EXPECT_EQ(read_idx_images((d / "img.gz").string()).pixels, pixels);
}

TEST(DataIdx, TruncatedAtEveryOffsetNamesFileAndOffset) {
  TempDir d;
  const Bytes img = idx_images(3, 4, 5, small_pixels());  // 16 + 60 bytes
  for (size_t len = 0; len < img.size(); ++len) {
    const fs::path p = d / "train-images-idx3-ubyte";
    write_file(p, head(img, len));
    const std::string msg = error_of([&] { read_idx_images(p.string()); });
    EXPECT_HAS(msg, p.string());
    EXPECT_HAS(msg, ": offset ");
    EXPECT_HAS(msg, "file ends after");
  }
  const fs::path p = d / "t.idx";
  write_file(p, head(img, 10));
  EXPECT_HAS(error_of([&] { read_idx_images(p.string()); }),
             p.string() + ": offset 8: expected a 4-byte row count, file ends after 2 (at offset 10)");
  write_file(p, head(img, 16 + 7));
  EXPECT_HAS(error_of([&] { read_idx_images(p.string()); }),
             p.string() +
                 ": offset 16: expected 60 bytes of image data (3 images of 4x5), file ends after 7 "
                 "(at offset 23)");
  const Bytes lab = idx_labels({1, 2, 3, 4});
  write_file(p, head(lab, 10));
  EXPECT_HAS(error_of([&] { read_idx_labels(p.string()); }),
             p.string() + ": offset 8: expected 4 bytes of label data, file ends after 2");
}

TEST(DataIdx, TruncatedGzipIsAnErrorNotAShortRead) {
  TempDir d;
  const Bytes gz = gzip_stored(idx_images(3, 4, 5, small_pixels()));
  // Cut inside the header, the data and the 8-byte trailer (CRC, size).
  for (size_t len :
       {size_t(5), size_t(12), size_t(20), size_t(40), gz.size() - 8, gz.size() - 3, gz.size() - 1}) {
    const fs::path p = d / "train-images-idx3-ubyte.gz";
    write_file(p, head(gz, len));
    const std::string msg = error_of([&] { read_idx_images(p.string()); });
    EXPECT_HAS(msg, p.string() + ": offset ");
    EXPECT_EQ(msg.find("(no error)"), std::string::npos) << "cut at " << len;
  }
}

TEST(DataIdx, CorruptGzipIsDetected) {
  TempDir d;
  const Bytes gz = gzip_stored(idx_images(3, 4, 5, small_pixels()));
  Bytes bad_crc = gz;
  bad_crc[gz.size() - 8] ^= 0x55;  // first CRC byte
  write_file(d / "crc.gz", bad_crc);
  EXPECT_HAS(error_of([&] { read_idx_images((d / "crc.gz").string()); }), "gzip data is corrupt");
  Bytes bad_len = gz;
  bad_len[13] ^= 0xff;  // NLEN of the stored block no longer matches LEN
  write_file(d / "len.gz", bad_len);
  const std::string msg = error_of([&] { read_idx_images((d / "len.gz").string()); });
  EXPECT_HAS(msg, (d / "len.gz").string() + ": offset 0: gzip data is corrupt");
}

TEST(DataIdx, BadMagicWrongDimsAndExtraBytes) {
  TempDir d;
  const fs::path p = d / "x";
  write_file(p, idx_labels({1, 2}));
  EXPECT_HAS(error_of([&] { read_idx_images(p.string()); }),
             p.string() + ": offset 0: bad magic number 0x00000801, expected 0x00000803");
  write_file(p, idx_images(3, 4, 5, small_pixels()));
  EXPECT_HAS(error_of([&] { read_idx_labels(p.string()); }),
             "bad magic number 0x00000803, expected 0x00000801");
  write_file(p, idx_images(3, 0, 5, {}));
  EXPECT_HAS(error_of([&] { read_idx_images(p.string()); }), ": offset 8: row count is 0, expected 1..65536");
  // Header says 2 images but 3 follow.
  write_file(p, idx_images(2, 4, 5, small_pixels()));
  EXPECT_HAS(error_of([&] { read_idx_images(p.string()); }),
             p.string() + ": offset 56: expected the end of the file after 40 bytes of image data");
  // A header claiming far more data than there is fails without allocating it.
  write_file(p, idx_images(2000000000, 60000, 60000, {1, 2, 3}));
  EXPECT_HAS(error_of([&] { read_idx_images(p.string()); }), "more than the limit");
  write_file(p, idx_images(1000, 1000, 1000, {1, 2, 3}));  // 10^9 bytes: under kMaxDataFileBytes
  EXPECT_HAS(error_of([&] { read_idx_images(p.string()); }), "file ends after 3");
}

TEST(DataIdx, LabelOutOfRange) {
  TempDir d;
  const fs::path p = d / "labels";
  write_file(p, gzip_stored(idx_labels({1, 10, 2})));
  EXPECT_HAS(error_of([&] { read_idx_labels(p.string(), 10); }),
             p.string() + ": offset 9: label 10 of item 1 is out of range, expected 0..9");
  EXPECT_EQ(read_idx_labels(p.string(), 0).size(), 3u);  // unchecked
}

TEST(DataIdx, MissingFile) {
  EXPECT_HAS(error_of([] { read_idx_images("/nonexistent/dir/img.gz"); }),
             "/nonexistent/dir/img.gz: cannot open");
}

// ---- CIFAR-10 -------------------------------------------------------------------------------------

// Checks images (N,32,32,3) against test_pixel(first + k, ...) and labels (first + k) % 10.
void expect_cifar_images(const std::vector<uint8_t>& images, const std::vector<int64_t>& labels, int64_t n,
                         int64_t first = 0, int64_t offset = 0) {
  ASSERT_GE(int64_t(images.size()), (offset + n) * 3072);
  for (int64_t k = 0; k < n; ++k) {
    EXPECT_EQ(labels[size_t(offset + k)], (first + k) % 10);
    for (int64_t y = 0; y < 32; ++y) {
      for (int64_t x = 0; x < 32; ++x) {
        for (int64_t c = 0; c < 3; ++c) {
          const uint8_t got = images[size_t((((offset + k) * 32 + y) * 32 + x) * 3 + c)];
          ASSERT_EQ(got, test_pixel(first + k, y, x, c))
              << "image " << k << " at " << y << "," << x << "," << c;
        }
      }
    }
  }
}

TEST(DataCifar, PlainGzipAndXzToNhwc) {
  TempDir d;
  const Bytes batch = cifar_batch(3);
  ASSERT_EQ(batch.size(), 3u * 3073u);
  write_file(d / "b.bin", batch);
  write_file(d / "b.bin.gz", gzip_stored(batch));
  std::vector<std::string> files = {"b.bin", "b.bin.gz"};
  if (have_command("xz")) files.push_back(xz_file(d / "b.bin").filename().string());
  for (const auto& f : files) {
    std::vector<uint8_t> images;
    std::vector<int64_t> labels;
    EXPECT_EQ(read_cifar10_batch((d / f).string(), images, labels, 3), 3) << f;
    EXPECT_EQ(images.size(), 3u * 3072u);
    expect_cifar_images(images, labels, 3);
    images.clear();
    labels.clear();
    EXPECT_EQ(read_cifar10_batch((d / f).string(), images, labels, 0), 3) << f;  // any count
  }
  if (!have_command("xz")) GTEST_SKIP() << "no xz program: the .xz case was not run";
}

TEST(DataCifar, AppendsAfterExistingData) {
  TempDir d;
  write_file(d / "a.bin", cifar_batch(2, 0));
  write_file(d / "b.bin", cifar_batch(3, 2));
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  read_cifar10_batch((d / "a.bin").string(), images, labels, 2);
  read_cifar10_batch((d / "b.bin").string(), images, labels, 3);
  ASSERT_EQ(labels.size(), 5u);
  expect_cifar_images(images, labels, 5);
}

TEST(DataCifar, TruncatedWrongCountAndBadLabels) {
  TempDir d;
  const Bytes batch = cifar_batch(3);
  const fs::path p = d / "data_batch_1.bin";
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  for (size_t len :
       {size_t(0), size_t(1), size_t(3072), size_t(3073), size_t(3073 + 100), batch.size() - 1}) {
    write_file(p, head(batch, len));
    const std::string msg = error_of([&] { read_cifar10_batch(p.string(), images, labels, 3); });
    EXPECT_HAS(msg, p.string() + ": offset ");
    EXPECT_HAS(msg, "expected 9219 bytes (3 records of 3073 bytes), file ends after " + std::to_string(len));
    EXPECT_TRUE(images.empty() && labels.empty()) << "a failed read must not leave partial data";
  }
  write_file(p, head(batch, 3073 + 100));
  EXPECT_HAS(
      error_of([&] { read_cifar10_batch(p.string(), images, labels, 0); }),
      p.string() + ": offset 3073: expected a 3073-byte record (number 1), file ends after 100 bytes of it");
  write_file(p, Bytes{});
  EXPECT_HAS(error_of([&] { read_cifar10_batch(p.string(), images, labels, 0); }), "file ends after 0 bytes");
  write_file(p, batch);
  EXPECT_HAS(error_of([&] { read_cifar10_batch(p.string(), images, labels, 2); }),
             p.string() + ": offset 6146: expected the end of the file after 2 records");
  Bytes bad = batch;
  bad[3073] = 10;  // label of record 1
  write_file(p, bad);
  EXPECT_HAS(error_of([&] { read_cifar10_batch(p.string(), images, labels, 3); }),
             p.string() + ": offset 3073: label 10 of record 1 is out of range, expected 0..9");
  EXPECT_TRUE(images.empty() && labels.empty());
}

TEST(DataCifar, TruncatedAndCorruptXz) {
  if (!have_command("xz")) GTEST_SKIP() << "no xz program";
  TempDir d;
  write_file(d / "b.bin", cifar_batch(3));
  const Bytes xz = read_file(xz_file(d / "b.bin"));
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  for (size_t len : {size_t(6), size_t(30), xz.size() / 2, xz.size() - 10, xz.size() - 1}) {
    const fs::path p = d / "test_batch.bin.xz";
    write_file(p, head(xz, len));
    const std::string msg = error_of([&] { read_cifar10_batch(p.string(), images, labels, 3); });
    EXPECT_HAS(msg, p.string() + ": offset ");
    EXPECT_EQ(msg.find("(no error)"), std::string::npos) << "cut at " << len;
  }
  Bytes bad = xz;
  bad[bad.size() / 2] ^= 0x40;
  const fs::path p = d / "corrupt.bin.xz";
  write_file(p, bad);
  EXPECT_HAS(error_of([&] { read_cifar10_batch(p.string(), images, labels, 3); }), p.string() + ": offset ");
}

// ---- data set loaders -------------------------------------------------------------------------------

TEST(DataFashionMnist, LoadsSyntheticFiles) {
  TempDir d;
  const Bytes pixels = small_pixels();
  write_file(d / "t10k-images-idx3-ubyte.gz", gzip_stored(idx_images(3, 4, 5, pixels)));
  write_file(d / "t10k-labels-idx1-ubyte", idx_labels({7, 0, 9}));  // plain file also accepted
  const Dataset ds = load_fashion_mnist(d.path(), Split::test);
  EXPECT_EQ(ds.name, "fashion-mnist");
  EXPECT_EQ(ds.split, Split::test);
  EXPECT_EQ(ds.n, 3);
  EXPECT_EQ(ds.h, 4);
  EXPECT_EQ(ds.w, 5);
  EXPECT_EQ(ds.c, 1);
  EXPECT_EQ(ds.num_classes, 10);
  ASSERT_EQ(ds.class_names.size(), 10u);
  EXPECT_EQ(ds.class_names[0], "T-shirt/top");
  EXPECT_EQ(ds.class_names[9], "Ankle boot");
  EXPECT_EQ(ds.images, pixels);
  EXPECT_EQ(ds.labels, (std::vector<int64_t>{7, 0, 9}));
  EXPECT_NO_THROW(ds.check());
  // The train split is missing.
  const std::string msg = error_of([&] { load_fashion_mnist(d.path(), Split::train); });
  EXPECT_HAS(msg, "load_fashion_mnist: missing file");
  EXPECT_HAS(msg, (d / "train-images-idx3-ubyte.gz").string());
}

TEST(DataFashionMnist, ImageAndLabelCountsMustMatch) {
  TempDir d;
  write_file(d / "train-images-idx3-ubyte.gz", gzip_stored(idx_images(3, 4, 5, small_pixels())));
  write_file(d / "train-labels-idx1-ubyte.gz", gzip_stored(idx_labels({1, 2})));
  const std::string msg = error_of([&] { load_fashion_mnist(d.path(), Split::train); });
  EXPECT_HAS(msg, (d / "train-images-idx3-ubyte.gz").string() +
                      ": offset 4: image count 3 does not match the 2 labels in " +
                      (d / "train-labels-idx1-ubyte.gz").string());
  write_file(d / "train-labels-idx1-ubyte.gz", gzip_stored(idx_labels({1, 2, 12})));
  EXPECT_HAS(error_of([&] { load_fashion_mnist(d.path(), Split::train); }),
             "label 12 of item 2 is out of range");
}

TEST(DataCifar, LoadsSyntheticDirectory) {
  TempDir d;
  // data_batch_k holds images 2(k-1), 2(k-1)+1; mixed compression.
  for (int k = 1; k <= 5; ++k) {
    const fs::path p = d / ("data_batch_" + std::to_string(k) + ".bin");
    write_file(p, cifar_batch(2, 2 * (k - 1)));
    if (k == 2) {
      write_file(fs::path(p.string() + ".gz"), gzip_stored(read_file(p)));
      fs::remove(p);
    }
    if (k == 4 && have_command("xz")) {
      xz_file(p);
      fs::remove(p);
    }
  }
  write_file(d / "test_batch.bin", cifar_batch(3, 100));
  write_file(d / "batches.meta.txt", Bytes{'a',  '\n', 'b',  '\n', 'c',  '\n', 'd',  '\n', 'e',  '\n', 'f',
                                           '\n', 'g',  '\n', 'h',  '\n', 'i',  '\n', 'j',  '\n', '\n'});
  const Dataset train = load_cifar10(d.path(), Split::train, 2);
  EXPECT_EQ(train.n, 10);
  EXPECT_EQ(train.h, 32);
  EXPECT_EQ(train.w, 32);
  EXPECT_EQ(train.c, 3);
  EXPECT_EQ(train.num_classes, 10);
  EXPECT_EQ(train.class_names.front(), "a");
  EXPECT_EQ(train.class_names.back(), "j");
  expect_cifar_images(train.images, train.labels, 10);
  EXPECT_NO_THROW(train.check());
  const Dataset test = load_cifar10(d.path(), Split::test, 0);
  EXPECT_EQ(test.n, 3);
  expect_cifar_images(test.images, test.labels, 3, 100);
  // The default expects 10,000 records per file.
  EXPECT_HAS(error_of([&] { load_cifar10(d.path(), Split::test); }),
             "expected 30730000 bytes (10000 records");
  fs::remove(d / "data_batch_3.bin");
  const std::string msg = error_of([&] { load_cifar10(d.path(), Split::train, 2); });
  EXPECT_HAS(msg, "load_cifar10: missing file: tried " + (d / "data_batch_3.bin").string());
}

TEST(DataDataset, CheckCatchesInconsistentSizes) {
  Dataset ds;
  ds.name = "x";
  ds.n = 2;
  ds.h = ds.w = 2;
  ds.c = 1;
  ds.num_classes = 3;
  ds.images.assign(8, 0);
  ds.labels = {0, 2};
  EXPECT_NO_THROW(ds.check());
  ds.labels = {0, 3};
  EXPECT_HAS(error_of([&] { ds.check(); }), "label 3 of item 1 is out of range");
  ds.labels = {0};
  EXPECT_HAS(error_of([&] { ds.check(); }), "1 labels for 2 images");
  ds.labels = {0, 1};
  ds.images.pop_back();
  EXPECT_HAS(error_of([&] { ds.check(); }), "7 image bytes");
}

// ---- real data (skipped when absent) --------------------------------------------------------------

TEST(DataRealData, FashionMnistTestSplit) {
  const fs::path dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir / "t10k-images-idx3-ubyte.gz")) GTEST_SKIP() << dir << " is not installed";
  const Dataset ds = load_fashion_mnist(dir, Split::test);
  EXPECT_EQ(ds.n, 10000);
  EXPECT_EQ(ds.h, 28);
  EXPECT_EQ(ds.w, 28);
  EXPECT_EQ(ds.c, 1);
  std::array<int, 10> hist{};
  for (int64_t l : ds.labels) {
    ASSERT_TRUE(l >= 0 && l < 10);
    ++hist[size_t(l)];
  }
  for (int h : hist) EXPECT_EQ(h, 1000);
  // Values read independently with Python's gzip module.
  EXPECT_EQ(ds.labels[0], 9);  // an ankle boot
  EXPECT_EQ(ds.labels[1], 2);
  EXPECT_EQ(ds.images[14 * 28 + 14], 110);
  int64_t sum = 0;
  for (int64_t i = 0; i < 784; ++i) sum += ds.images[size_t(i)];
  EXPECT_EQ(sum, 33456);
}

TEST(DataRealData, Cifar10TestBatch) {
  const fs::path dir = shared_dir() / "data" / "cifar-10";
  if (!has_dataset_files("cifar-10", dir)) GTEST_SKIP() << dir << " has no CIFAR-10 files";
  const Dataset ds = load_cifar10(dir, Split::test);
  EXPECT_EQ(ds.n, 10000);
  EXPECT_EQ(ds.h, 32);
  EXPECT_EQ(ds.w, 32);
  EXPECT_EQ(ds.c, 3);
  EXPECT_EQ(ds.images.size(), 10000u * 3072u);
  EXPECT_EQ(ds.class_names[0], "airplane");
  EXPECT_EQ(ds.class_names[9], "truck");
  std::array<int, 10> hist{};
  for (int64_t l : ds.labels) {
    ASSERT_TRUE(l >= 0 && l < 10);
    ++hist[size_t(l)];
  }
  for (int h : hist) EXPECT_EQ(h, 1000);
  // Values read independently with Python's lzma module (record planes -> (y, x, c)).
  auto px = [&](int64_t i, int64_t y, int64_t x, int64_t c) {
    return int(ds.images[size_t(((i * 32 + y) * 32 + x) * 3 + c)]);
  };
  EXPECT_EQ(ds.labels[0], 0);
  EXPECT_EQ((std::array<int, 3>{px(0, 0, 0, 0), px(0, 0, 0, 1), px(0, 0, 0, 2)}),
            (std::array<int, 3>{155, 156, 149}));
  EXPECT_EQ((std::array<int, 3>{px(0, 5, 7, 0), px(0, 5, 7, 1), px(0, 5, 7, 2)}),
            (std::array<int, 3>{195, 147, 165}));
  EXPECT_EQ((std::array<int, 3>{px(0, 31, 31, 0), px(0, 31, 31, 1), px(0, 31, 31, 2)}),
            (std::array<int, 3>{73, 68, 50}));
  EXPECT_EQ(ds.labels[9999], 9);
  EXPECT_EQ((std::array<int, 3>{px(9999, 16, 3, 0), px(9999, 16, 3, 1), px(9999, 16, 3, 2)}),
            (std::array<int, 3>{148, 161, 157}));
}

// ---- limits (kMaxDataFileBytes) ---------------------------------------------------------------------

TEST(DataLimits, IdxClaimsPastTheLimitAreRefusedBeforeReading) {
  TempDir d;
  const fs::path p = d / "img.gz";
  // 2^40 bytes (16,777,216 images of 256x256) claimed by a gzip file of a few bytes: refused at
  // once, not after decompressing whatever the file holds.
  write_file(p, gzip_stored(idx_images(16777216, 256, 256, {1, 2, 3})));
  EXPECT_HAS(error_of([&] { read_idx_images(p.string()); }),
             p.string() +
                 ": offset 16: the header claims 1099511627776 bytes of image data (16777216 images of "
                 "256x256), more than the limit of 1073741824 bytes of data in one file");
  write_file(p, idx_images(16777216, 256, 256, {1, 2, 3}));  // plain
  EXPECT_HAS(error_of([&] { read_idx_images(p.string()); }), "more than the limit of 1073741824 bytes");
  // Under the limit, but more than a gzip file of this size can hold.
  write_file(p, gzip_stored(idx_images(1000, 1000, 1000, {1, 2, 3})));
  EXPECT_HAS(error_of([&] { read_idx_images(p.string()); }),
             p.string() +
                 ": offset 16: the header claims 1000000000 bytes of image data (1000 images of 1000x1000), "
                 "but the gzip file cannot hold more than ");
  // Labels: magic and a count of 2,000,000,000.
  Bytes labels;
  put_be32(labels, 0x801);
  put_be32(labels, 2000000000);
  labels.push_back(1);
  write_file(p, gzip_stored(labels));
  EXPECT_HAS(error_of([&] { read_idx_labels(p.string()); }),
             p.string() +
                 ": offset 8: the header claims 2000000000 bytes of label data, more than the limit of "
                 "1073741824 bytes");
  labels.resize(8);
  labels[4] = 0;
  labels[5] = 0x10;  // 1,048,576 labels
  write_file(p, gzip_stored(labels));
  EXPECT_HAS(error_of([&] { read_idx_labels(p.string()); }), "but the gzip file cannot hold more than");
}

TEST(DataLimits, CifarFilesPastTheLimitAreRefused) {
  TempDir d;
  const fs::path p = d / "huge.bin";
  // A sparse plain file of zero records (all valid: label 0), one record past the limit.
  { std::ofstream out(p, std::ios::binary); }
  fs::resize_file(p, aether::kMaxDataFileBytes + uint64_t(kCifarRecordBytes));
  std::vector<uint8_t> images;
  std::vector<int64_t> labels;
  EXPECT_HAS(
      error_of([&] { read_cifar10_batch(p.string(), images, labels, 0); }),
      p.string() + ": offset 0: the file holds 1073744897 bytes, more than the limit of 1073741824 bytes");
  EXPECT_TRUE(images.empty() && labels.empty());
  write_file(p, cifar_batch(1));
  EXPECT_HAS(
      error_of([&] { read_cifar10_batch(p.string(), images, labels, 400000); }),
      p.string() +
          ": offset 0: expected 400000 records of 3073 bytes, more than the limit of 1073741824 bytes");
  EXPECT_EQ(read_cifar10_batch(p.string(), images, labels, 1), 1);
}

TEST(DataLimits, ReadFileBytesStopsAtItsLimit) {
  TempDir d;
  const Bytes data(size_t(3) << 20, 7);
  write_file(d / "plain", data);
  write_file(d / "gz", gzip_stored(data));
  for (const char* name : {"plain", "gz"}) {
    const std::string p = (d / name).string();
    EXPECT_EQ(read_file_bytes(p, data.size()), data) << name;
    EXPECT_HAS(error_of([&] { read_file_bytes(p, data.size() - 1); }),
               p + ": offset 3145728: the data is longer than the limit of 3145727 bytes");
  }
}
