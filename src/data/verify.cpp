// Data set verification: CIFAR-10 batch sizes and MD5s, Fashion-MNIST IDX structure.
#include "aether/data/verify.h"

#include <future>
#include <sstream>

#include "aether/core/error.h"
#include "aether/data/checksum.h"
#include "aether/data/readers.h"

namespace aether::data {
namespace fs = std::filesystem;
namespace {

fs::path first_existing(const fs::path& dir, const std::string& name,
                        const std::vector<std::string>& suffixes) {
  for (const auto& s : suffixes) {
    std::error_code ec;
    const fs::path p = dir / (name + s);
    if (fs::is_regular_file(p, ec)) return p;
  }
  return {};
}

void finish(VerifyReport& r) {
  r.ok = !r.files.empty();
  for (const auto& f : r.files) r.ok = r.ok && f.ok;
}

}  // namespace

std::string VerifyReport::summary() const {
  std::ostringstream os;
  os << dataset << " in " << dir.string() << ":\n";
  for (const auto& f : files) {
    os << "  " << (f.ok ? "ok    " : "FAILED") << "  " << f.name;
    if (!f.path.empty()) os << "  (" << f.path.filename().string() << ", " << f.bytes << " bytes)";
    if (!f.md5.empty()) os << "  md5 " << f.md5;
    if (!f.note.empty()) os << "  " << f.note;
    os << "\n";
  }
  os << (ok ? "OK" : "FAILED") << "\n";
  return os.str();
}

namespace {

// Checks one batch file: size and MD5 of its decompressed content.
FileCheck check_cifar_batch(const fs::path& dir, const Cifar10Md5& b) {
  FileCheck f;
  f.name = b.name;
  f.expected_md5 = b.md5;
  f.path = first_existing(dir, b.name, {"", ".xz", ".gz"});
  if (f.path.empty()) {
    f.note = "missing (looked for " + f.name + "[.xz|.gz])";
    return f;
  }
  try {
    const FileDigest d = digest_file(f.path.string(), /*decompress=*/true);
    f.bytes = d.bytes;
    f.md5 = d.md5;
    const bool is_test = f.name == "test_batch.bin";
    if (d.bytes != kCifar10BatchBytes) {
      f.note = detail::cat("size ", d.bytes, ", expected ", kCifar10BatchBytes);
    } else if (d.md5 == b.md5) {
      f.ok = true;
      f.note = is_test ? "matches the official test batch" : "matches the published md5";
    } else if (is_test && d.md5 == kCifar10ReorderedTestMd5) {
      f.ok = true;
      f.note = "matches the reordered test batch (official images and labels, round-robin class order)";
    } else {
      f.note = is_test ? detail::cat("md5 mismatch, expected ", b.md5, " (official) or ",
                                     kCifar10ReorderedTestMd5, " (reordered copy)")
                       : detail::cat("md5 mismatch, expected ", b.md5);
    }
  } catch (const Error& e) {
    f.note = e.what();
  }
  return f;
}

}  // namespace

VerifyReport verify_cifar10(const fs::path& dir) {
  VerifyReport r;
  r.dataset = "cifar-10";
  r.dir = dir;
  // The files are independent: decompress and hash them concurrently.
  std::vector<std::future<FileCheck>> checks;
  for (const auto& b : kCifar10BatchMd5)
    checks.push_back(std::async(std::launch::async, check_cifar_batch, dir, b));
  for (auto& c : checks) r.files.push_back(c.get());
  finish(r);
  return r;
}

VerifyReport verify_fashion_mnist(const fs::path& dir) {
  VerifyReport r;
  r.dataset = "fashion-mnist";
  r.dir = dir;
  struct Part {
    const char* prefix;
    int64_t count;
  };
  for (const Part part : {Part{"train", 60000}, Part{"t10k", 10000}}) {
    FileCheck img, lab;
    img.name = std::string(part.prefix) + "-images-idx3-ubyte";
    lab.name = std::string(part.prefix) + "-labels-idx1-ubyte";
    img.path = first_existing(dir, img.name, {".gz", ""});
    lab.path = first_existing(dir, lab.name, {".gz", ""});
    int64_t n_images = -1;
    if (img.path.empty()) {
      img.note = "missing (looked for " + img.name + "[.gz])";
    } else {
      try {
        const IdxImages im = read_idx_images(img.path.string());
        n_images = im.n;
        img.bytes = 16 + im.pixels.size();
        if (im.n != part.count || im.rows != 28 || im.cols != 28) {
          img.note =
              detail::cat(im.n, " images of ", im.rows, "x", im.cols, ", expected ", part.count, " of 28x28");
        } else {
          img.ok = true;
          img.note = detail::cat(im.n, " images of 28x28");
        }
      } catch (const Error& e) {
        img.note = e.what();
      }
    }
    if (lab.path.empty()) {
      lab.note = "missing (looked for " + lab.name + "[.gz])";
    } else {
      try {
        const auto labels = read_idx_labels(lab.path.string(), 10);
        lab.bytes = 8 + labels.size();
        if (int64_t(labels.size()) != part.count) {
          lab.note = detail::cat(labels.size(), " labels, expected ", part.count);
        } else if (n_images >= 0 && n_images != int64_t(labels.size())) {
          lab.note = detail::cat(labels.size(), " labels for ", n_images, " images");
        } else {
          lab.ok = true;
          lab.note = detail::cat(labels.size(), " labels in 0..9");
        }
      } catch (const Error& e) {
        lab.note = e.what();
      }
    }
    r.files.push_back(img);
    r.files.push_back(lab);
  }
  finish(r);
  return r;
}

}  // namespace aether::data
