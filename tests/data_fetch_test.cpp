// Fetch and verify: MD5 against published test vectors, the tar reader on hand-built archives,
// CIFAR-10 unpacking, download from a local HTTP server (python3 http.server) with right and wrong
// MD5s and a 404, and verify_cifar10 / verify_fashion_mnist on synthetic and (when present) real data.
#include <gtest/gtest.h>

#include <cstring>

#include "aether/core/error.h"
#include "aether/data/checksum.h"
#include "aether/data/dataset.h"
#include "data/fixtures.h"
#include "fetch/fetch.h"
#include "fetch/tar.h"

using namespace aether::data;
using namespace aether::data::test_util;

namespace {

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

Bytes text(const std::string& s) { return Bytes(s.begin(), s.end()); }

std::vector<std::string> list_dir(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir)) names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

// A small CIFAR-10 archive: cifar-10-batches-bin/ with 2-record train batches, a 3-record test
// batch, batches.meta.txt and a readme that is not extracted.
Bytes cifar_tar() {
  Bytes t = tar_member("cifar-10-batches-bin/", {}, '5');
  for (int k = 1; k <= 5; ++k) {
    const Bytes m = tar_member("cifar-10-batches-bin/data_batch_" + std::to_string(k) + ".bin",
                               cifar_batch(2, 2 * (k - 1)));
    t.insert(t.end(), m.begin(), m.end());
  }
  for (const Bytes& m :
       {tar_member("cifar-10-batches-bin/test_batch.bin", cifar_batch(3, 100)),
        tar_member("cifar-10-batches-bin/batches.meta.txt", text("airplane\nautomobile\nbird\ncat\n"
                                                                 "deer\ndog\nfrog\nhorse\nship\ntruck\n")),
        tar_member("cifar-10-batches-bin/readme.html", text("<html></html>")), tar_end()}) {
    t.insert(t.end(), m.begin(), m.end());
  }
  return t;
}

const std::vector<std::string> kExtracted = {"batches.meta.txt", "data_batch_1.bin", "data_batch_2.bin",
                                             "data_batch_3.bin", "data_batch_4.bin", "data_batch_5.bin",
                                             "test_batch.bin"};

}  // namespace

TEST(DataMd5, PublishedTestVectors) {  // RFC 1321, appendix A.5
  EXPECT_EQ(md5_hex("", 0), "d41d8cd98f00b204e9800998ecf8427e");
  EXPECT_EQ(md5_hex("abc", 3), "900150983cd24fb0d6963f7d28e17f72");
  const std::string s = "12345678901234567890123456789012345678901234567890123456789012345678901234567890";
  EXPECT_EQ(md5_hex(s.data(), s.size()), "57edf4a22be3c955ac49da2e2107b67a");
  Md5 m;  // in pieces
  m.update("a", 1);
  m.update("bc", 2);
  EXPECT_EQ(m.hex_digest(), "900150983cd24fb0d6963f7d28e17f72");
}

TEST(DataMd5, DigestOfFileRawAndDecompressed) {
  TempDir d;
  write_file(d / "f.gz", gzip_stored(text("abc")));
  const FileDigest raw = digest_file((d / "f.gz").string(), false);
  EXPECT_EQ(raw.bytes, 10u + 5u + 3u + 8u);  // gzip header, stored block header, data, trailer
  EXPECT_EQ(raw.md5, md5_hex(read_file(d / "f.gz").data(), raw.bytes));
  const FileDigest dec = digest_file((d / "f.gz").string(), true);
  EXPECT_EQ(dec.bytes, 3u);
  EXPECT_EQ(dec.md5, "900150983cd24fb0d6963f7d28e17f72");
}

TEST(DataTar, ReadsMembersAndSkipsData) {
  TempDir d;
  Bytes t = tar_member("dir/", {}, '5');
  for (const Bytes& m :
       {tar_member("dir/a.txt", text("hello")), tar_member("dir/empty", {}),
        tar_member("dir/big", Bytes(1500, 7)), tar_member("b.txt", text("world!")), tar_end()}) {
    t.insert(t.end(), m.begin(), m.end());
  }
  write_file(d / "x.tar.gz", gzip_stored(t));
  ByteReader in((d / "x.tar.gz").string());
  TarReader tar(in);
  std::vector<std::pair<std::string, uint64_t>> seen;
  std::string a, b;
  while (auto e = tar.next()) {
    seen.push_back({e->name, e->size});
    char buf[64];
    if (e->name == "dir/a.txt") a.assign(buf, tar.read(buf, sizeof buf));
    if (e->name == "b.txt") {
      b.assign(buf, tar.read(buf, 3));  // in two pieces
      b.append(buf, tar.read(buf, sizeof buf));
      EXPECT_EQ(tar.read(buf, sizeof buf), 0u);
    }
  }
  EXPECT_EQ(seen, (std::vector<std::pair<std::string, uint64_t>>{
                      {"dir/", 0}, {"dir/a.txt", 5}, {"dir/empty", 0}, {"dir/big", 1500}, {"b.txt", 6}}));
  EXPECT_EQ(a, "hello");
  EXPECT_EQ(b, "world!");
}

TEST(DataTar, BadChecksumTruncationAndMissingEnd) {
  TempDir d;
  const Bytes good = [] {
    Bytes t = tar_member("a.txt", text("hello"));
    const Bytes m = tar_member("b.txt", text("world"));
    t.insert(t.end(), m.begin(), m.end());
    const Bytes e = tar_end();
    t.insert(t.end(), e.begin(), e.end());
    return t;
  }();
  auto scan = [&](const Bytes& archive) {
    write_file(d / "t.tar", archive);
    return error_of([&] {
      ByteReader in((d / "t.tar").string());
      TarReader tar(in);
      while (tar.next()) {
      }
    });
  };
  EXPECT_EQ(scan(good), "(no error)");
  Bytes bad = good;
  bad[1024 + 3] ^= 1;  // a name byte of the second header
  std::string msg = scan(bad);
  EXPECT_HAS(msg, (d / "t.tar").string() + ": offset 1024: tar header checksum");
  bad = good;
  bad[124 + 10] = '9';  // not an octal digit in the size field (checksum fixed up below)
  {
    unsigned sum = 0;
    for (size_t i = 0; i < 512; ++i) sum += (i >= 148 && i < 156) ? ' ' : bad[i];
    std::snprintf(reinterpret_cast<char*>(bad.data()) + 148, 8, "%06o", sum);
  }
  EXPECT_HAS(scan(bad), ": offset 0: tar header: unreadable size field");
  EXPECT_HAS(scan(head(good, 512 + 3)),
             ": offset 512: expected 5 more bytes of the data of tar member a.txt");
  EXPECT_HAS(scan(head(good, 1024)), ": offset 1024: expected a 512-byte tar header");
  EXPECT_HAS(scan(text("this is not a tar file")), ": offset 0: expected a 512-byte tar header");
  EXPECT_HAS(scan(Bytes(512, 'x')), ": offset 0: tar header checksum");
}

TEST(DataFetch, ExtractCifarArchive) {
  TempDir d;
  write_file(d / "c.tar.gz", gzip_stored(cifar_tar()));
  const fs::path dest = d / "out";
  fs::create_directories(dest);
  const auto files = extract_cifar10_archive(d / "c.tar.gz", dest);
  EXPECT_EQ(files.size(), 7u);
  EXPECT_EQ(list_dir(dest), kExtracted);  // and no temporary files
  EXPECT_EQ(read_file(dest / "data_batch_3.bin"), cifar_batch(2, 4));
  EXPECT_EQ(read_file(dest / "test_batch.bin"), cifar_batch(3, 100));
  const Dataset test = load_cifar10(dest, Split::test, 3);
  EXPECT_EQ(test.n, 3);
  EXPECT_EQ(test.labels, (std::vector<int64_t>{0, 1, 2}));
}

TEST(DataFetch, ExtractRejectsIncompleteOrMalformedArchives) {
  TempDir d;
  const fs::path dest = d / "out";
  fs::create_directories(dest);
  // No test batch.
  Bytes t = tar_member("data_batch_1.bin", cifar_batch(1));
  Bytes e = tar_end();
  t.insert(t.end(), e.begin(), e.end());
  write_file(d / "a.tar.gz", gzip_stored(t));
  std::string msg = error_of([&] { extract_cifar10_archive(d / "a.tar.gz", dest); });
  EXPECT_HAS(msg,
             "lacks data_batch_2.bin, data_batch_3.bin, data_batch_4.bin, data_batch_5.bin, test_batch.bin");
  EXPECT_TRUE(list_dir(dest).empty()) << "files were left behind";
  // A batch that is not a whole number of records.
  t = tar_member("data_batch_1.bin", Bytes(3000, 1));
  t.insert(t.end(), e.begin(), e.end());
  write_file(d / "b.tar.gz", gzip_stored(t));
  msg = error_of([&] { extract_cifar10_archive(d / "b.tar.gz", dest); });
  EXPECT_HAS(msg,
             ": offset 0: tar member data_batch_1.bin has 3000 bytes, expected a positive multiple of 3073");
  // A truncated archive, cut inside the last batch: nothing is written.
  const Bytes full = gzip_stored(cifar_tar());
  write_file(d / "c.tar.gz", head(full, full.size() * 3 / 4));
  msg = error_of([&] { extract_cifar10_archive(d / "c.tar.gz", dest); });
  EXPECT_HAS(msg, (d / "c.tar.gz").string() + ": offset ");
  EXPECT_TRUE(list_dir(dest).empty()) << "files were left behind";
  // A gzip CRC error after the tar data.
  Bytes bad_crc = full;
  bad_crc[bad_crc.size() - 6] ^= 1;
  write_file(d / "d.tar.gz", bad_crc);
  EXPECT_HAS(error_of([&] { extract_cifar10_archive(d / "d.tar.gz", dest); }), "gzip data is corrupt");
  EXPECT_TRUE(list_dir(dest).empty()) << "files were left behind";
}

class DataFetchHttp : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_command("python3") && !fs::exists("/usr/bin/python3")) GTEST_SKIP() << "no python3";
    fs::create_directories(served_);
    archive_ = gzip_stored(cifar_tar());
    write_file(served_ / "cifar-10-binary.tar.gz", archive_);
    ::setenv("no_proxy", "127.0.0.1,localhost", 1);
    ::setenv("NO_PROXY", "127.0.0.1,localhost", 1);
    server_ = std::make_unique<HttpServer>(served_);
    ASSERT_TRUE(server_->ok()) << "could not start tests/data/http_server.py";
  }
  TempDir dir_;
  fs::path served_ = dir_ / "www";
  Bytes archive_;
  std::unique_ptr<HttpServer> server_;
};

TEST_F(DataFetchHttp, DownloadsChecksAndUnpacks) {
  const fs::path dest = dir_ / "data" / "cifar-10";  // created by fetch_cifar10
  const std::string md5 = md5_hex(archive_.data(), archive_.size());
  uint64_t last_done = 0, calls = 0;
  const FetchResult r =
      fetch_cifar10(dest, server_->url("cifar-10-binary.tar.gz"), md5, [&](uint64_t done, uint64_t total) {
        EXPECT_GE(done, last_done);
        EXPECT_EQ(total, archive_.size());
        last_done = done;
        ++calls;
      });
  EXPECT_GT(calls, 0u);
  EXPECT_EQ(last_done, archive_.size());
  EXPECT_EQ(r.archive_md5, md5);
  EXPECT_EQ(r.archive_bytes, archive_.size());
  EXPECT_EQ(r.files.size(), 7u);
  EXPECT_EQ(list_dir(dest), kExtracted);  // the archive and temporary files are gone
  EXPECT_EQ(read_file(dest / "data_batch_5.bin"), cifar_batch(2, 8));
  const Dataset train = load_cifar10(dest, Split::train, 2);
  EXPECT_EQ(train.n, 10);
  // Upper-case MD5s are accepted; fetching again replaces the files.
  std::string upper = md5;
  for (char& ch : upper) ch = char(std::toupper(static_cast<unsigned char>(ch)));
  EXPECT_NO_THROW(fetch_cifar10(dest, server_->url("cifar-10-binary.tar.gz"), upper));
  EXPECT_EQ(list_dir(dest), kExtracted);
}

TEST_F(DataFetchHttp, WrongMd5FailsAndLeavesNothing) {
  const std::string wrong = "0123456789abcdef0123456789abcdef";
  const fs::path fresh = dir_ / "fresh";
  std::string msg = error_of([&] { fetch_cifar10(fresh, server_->url("cifar-10-binary.tar.gz"), wrong); });
  EXPECT_HAS(msg, "fetch_cifar10: MD5 mismatch for " + server_->url("cifar-10-binary.tar.gz"));
  EXPECT_HAS(msg, "got " + md5_hex(archive_.data(), archive_.size()) + ", expected " + wrong);
  EXPECT_FALSE(fs::exists(fresh)) << "the directory fetch_cifar10 created was left behind";
  // An existing directory keeps exactly what it had.
  const fs::path existing = dir_ / "existing";
  fs::create_directories(existing);
  write_file(existing / "keep.txt", text("x"));
  msg = error_of([&] { fetch_cifar10(existing, server_->url("cifar-10-binary.tar.gz"), wrong); });
  EXPECT_HAS(msg, "MD5 mismatch");
  EXPECT_EQ(list_dir(existing), std::vector<std::string>{"keep.txt"});
}

TEST_F(DataFetchHttp, HttpErrorIsReported) {
  const fs::path dest = dir_ / "d";
  fs::create_directories(dest);
  const std::string msg = error_of([&] { fetch_cifar10(dest, server_->url("no-such-file.tar.gz"), ""); });
  EXPECT_HAS(msg, "download: " + server_->url("no-such-file.tar.gz") + " failed");
  EXPECT_HAS(msg, "404");
  EXPECT_TRUE(list_dir(dest).empty());
  // download_file on its own.
  EXPECT_EQ(download_file(server_->url("cifar-10-binary.tar.gz"), dest / "a.tgz"),
            md5_hex(archive_.data(), archive_.size()));
  EXPECT_EQ(read_file(dest / "a.tgz"), archive_);
  EXPECT_EQ(list_dir(dest), std::vector<std::string>{"a.tgz"});
}

TEST(DataFetch, UnreachableServerIsReported) {
  TempDir d;
  // Port 9 on 127.0.0.1 (discard) is closed on a test machine; the connection is refused at once.
  const std::string msg = error_of([&] { download_file("http://127.0.0.1:9/x.tar.gz", d / "x"); });
  EXPECT_HAS(msg, "download: http://127.0.0.1:9/x.tar.gz failed");
  EXPECT_TRUE(list_dir(d.path()).empty());
}

// ---- verify -----------------------------------------------------------------------------------------

TEST(DataVerify, Cifar10ReportsSizeMismatchAndMissingFiles) {
  TempDir d;
  write_file(d / "c.tar.gz", gzip_stored(cifar_tar()));
  extract_cifar10_archive(d / "c.tar.gz", d.path());
  fs::remove(d / "data_batch_4.bin");
  const VerifyReport r = verify_cifar10(d.path());
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.files.size(), 6u);
  EXPECT_EQ(r.files[0].name, "data_batch_1.bin");
  EXPECT_EQ(r.files[0].bytes, 2u * 3073u);
  EXPECT_HAS(r.files[0].note, "size 6146, expected 30730000");
  EXPECT_HAS(r.files[3].note, "missing");
  EXPECT_TRUE(r.files[3].path.empty());
  EXPECT_HAS(r.summary(), "FAILED");
}

TEST(DataVerify, FashionMnistStructure) {
  TempDir d;
  // Right magic numbers, wrong counts.
  write_file(d / "train-images-idx3-ubyte.gz", gzip_stored(idx_images(2, 28, 28, Bytes(2 * 784, 5))));
  write_file(d / "train-labels-idx1-ubyte.gz", gzip_stored(idx_labels({1, 2})));
  write_file(d / "t10k-images-idx3-ubyte", idx_labels({1}));  // a labels file in place of images
  const VerifyReport r = verify_fashion_mnist(d.path());
  EXPECT_FALSE(r.ok);
  ASSERT_EQ(r.files.size(), 4u);
  EXPECT_HAS(r.files[0].note, "2 images of 28x28, expected 60000 of 28x28");
  EXPECT_HAS(r.files[1].note, "2 labels, expected 60000");
  EXPECT_HAS(r.files[2].note, "bad magic number");
  EXPECT_HAS(r.files[3].note, "missing");
}

TEST(DataVerify, RealFashionMnist) {
  const fs::path dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir / "train-images-idx3-ubyte.gz")) GTEST_SKIP() << dir << " is not installed";
  const VerifyReport r = verify_fashion_mnist(dir);
  EXPECT_TRUE(r.ok) << r.summary();
  EXPECT_HAS(r.files[0].note, "60000 images of 28x28");
  EXPECT_HAS(r.files[2].note, "10000 images of 28x28");
}

TEST(DataVerify, RealCifar10SharedCopy) {
  const fs::path dir = shared_dir() / "data" / "cifar-10";
  if (!has_dataset_files("cifar-10", dir)) GTEST_SKIP() << dir << " has no CIFAR-10 files";
  const VerifyReport r = verify_cifar10(dir);
  EXPECT_TRUE(r.ok) << r.summary();
  ASSERT_EQ(r.files.size(), 6u);
  for (const auto& f : r.files) EXPECT_EQ(f.bytes, 30730000u) << f.name;
  EXPECT_EQ(r.files[0].md5, "5dd7e06a14cb22eb9f671a540d1b7c25");
  EXPECT_EQ(r.files[5].name, "test_batch.bin");
  // The shared copy's test batch is the reordered one (see its README.md).
  EXPECT_EQ(r.files[5].md5, "a9ffd06ad4ad964e2565576b79102bdb");
  EXPECT_HAS(r.files[5].note, "reordered");
}
