// Data sets of image files, one folder per class (aether/data/image_folder.h); each file decoded
// by image_file.cpp and resized by stb_image_resize (Debian's libstb-dev, compiled in by
// stb_image_impl.cpp).
#include "aether/data/image_folder.h"

#include <stb_image_resize.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "aether/core/error.h"
#include "image_file.h"

namespace aether::data {
namespace fs = std::filesystem;
namespace {

bool hidden(const fs::path& p) { return p.filename().string().rfind('.', 0) == 0; }

// The sorted entries of `dir`, not hidden: its folders, or its files with an image extension.
std::vector<fs::path> listed(const fs::path& dir, bool directories) {
  std::vector<fs::path> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const fs::path& p = it->path();
    if (hidden(p)) continue;
    if (directories ? it->is_directory(ec) : (it->is_regular_file(ec) && is_image_file_name(p)))
      out.push_back(p);
  }
  AETHER_CHECK_RUNTIME(!ec, "load_image_folder", dir.string(), ": cannot list: ", ec.message());
  std::sort(out.begin(), out.end());
  return out;
}

constexpr uint64_t kImageFolderOrderSeed = 20261207;

struct ImageFile {
  fs::path path;
  int64_t label = 0;
  DecodedImage image;  // its size and channels (no pixels)
};

// px (n pixels of `comp` channels) as c channels (1 or 3) in out: grey repeated over RGB, alpha
// dropped, colour to grey as stb_image converts it (luma (77 R + 150 G + 29 B) / 256).
void convert_channels(const uint8_t* px, int64_t n, int comp, int64_t c, uint8_t* out) {
  for (int64_t i = 0; i < n; ++i, px += comp, out += c) {
    if (comp <= 2) {
      std::fill(out, out + c, px[0]);
    } else if (c == 3) {
      std::copy(px, px + 3, out);
    } else {
      out[0] = uint8_t((px[0] * 77 + px[1] * 150 + px[2] * 29) >> 8);
    }
  }
}

// Decodes the image at `path` into out (h, w, c) uint8: converted to c channels and resized to
// (h, w) when its size differs.
void decode_into(const char* op, const fs::path& path, int64_t h, int64_t w, int64_t c, uint8_t* out) {
  const DecodedImage image = read_image_file(op, path, /*pixels=*/true);
  const std::vector<uint8_t>& px = image.pixels;  // (ih, iw, comp)
  const int iw = image.width, ih = image.height, comp = image.channels;
  const int64_t pixels = int64_t(iw) * ih;
  if (iw == w && ih == h) {
    convert_channels(px.data(), pixels, comp, c, out);
    return;
  }
  std::vector<uint8_t> converted(size_t(pixels * c));  // (ih, iw, c)
  convert_channels(px.data(), pixels, comp, c, converted.data());
  AETHER_CHECK_RUNTIME(stbir_resize_uint8(converted.data(), iw, ih, 0, out, int(w), int(h), 0, int(c)) == 1,
                       op, path.string(), ": cannot resize from ", iw, "x", ih, " to ", w, "x", h);
}

// The machine's memory: physical pages times their size (0 when unknown).
uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? uint64_t(pages) * uint64_t(page) : 0;
}

std::string gib(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f GiB", double(bytes) / double(uint64_t(1) << 30));
  return text;
}

// n images of (h, w, c) uint8 are about to be allocated and filled: more than the machine's memory
// would end as std::bad_alloc or the OOM killer's SIGKILL, so say what and how to shrink it.
void check_fits_in_memory(const char* op, const std::string& what, uint64_t n, int64_t h, int64_t w,
                          int64_t c, const std::string& hint) {
  const uint64_t memory = physical_memory_bytes();
  const uint64_t bytes = n * uint64_t(h) * uint64_t(w) * uint64_t(c);
  AETHER_CHECK_RUNTIME(memory == 0 || bytes <= memory, op, what, ": ", n, " images of ", h, "x", w, "x", c,
                       " need ", gib(bytes), " of memory, more than this machine has (", gib(memory), "); ",
                       hint);
}

}  // namespace

bool is_image_file_name(const fs::path& p) {
  std::string e = p.extension().string();
  std::transform(e.begin(), e.end(), e.begin(), [](unsigned char ch) { return char(std::tolower(ch)); });
  static const std::string list = std::string(", ") + kImageExtensions + ",";  // ", .png, ..., .ppm,"
  return !e.empty() && list.find(", " + e + ",") != std::string::npos;
}

std::vector<fs::path> image_files(const fs::path& dir) {
  std::error_code ec;
  AETHER_CHECK_RUNTIME(fs::is_directory(dir, ec), "image_files", dir.string(), " is not a folder");
  return listed(dir, /*directories=*/false);
}

Dataset load_images(const std::vector<fs::path>& files, int64_t height, int64_t width, int64_t channels) {
  AETHER_CHECK(
      height >= 1 && width >= 1 && height <= 65536 && width <= 65536 && (channels == 1 || channels == 3),
      "load_images", "needs a size of 1..65536 on both sides and 1 or 3 channels, got ", height, "x", width,
      "x", channels);
  AETHER_CHECK(!files.empty(), "load_images", "no image files");
  Dataset d;
  d.name = files.size() == 1 ? files[0].string() : "images";
  d.n = int64_t(files.size());
  d.h = height;
  d.w = width;
  d.c = channels;
  check_fits_in_memory("load_images", d.name, files.size(), height, width, channels, "pass fewer at a time");
  const size_t bytes = size_t(height * width * channels);
  d.images.resize(files.size() * bytes);
  for (size_t i = 0; i < files.size(); ++i) {
    std::error_code ec;
    AETHER_CHECK_KIND(ErrorKind::not_found, fs::is_regular_file(files[i], ec), "load_images",
                      files[i].string(), ": no such file");
    decode_into("load_images", files[i], height, width, channels, d.images.data() + i * bytes);
  }
  return d;
}

std::vector<std::string> image_folder_classes(const fs::path& dir) {
  std::error_code ec;
  const fs::path from = fs::is_directory(dir / "train", ec) ? dir / "train" : dir / "test";
  AETHER_CHECK_KIND(ErrorKind::not_found, fs::is_directory(from, ec), "load_image_folder", dir.string(),
                    " has neither a train nor a test folder (expected DIR/train/<class>/<image> and "
                    "DIR/test/<class>/<image>)");
  std::vector<std::string> names;
  for (const fs::path& p : listed(from, /*directories=*/true)) names.push_back(p.filename().string());
  AETHER_CHECK_RUNTIME(names.size() >= 2, "load_image_folder", from.string(), " has ", names.size(),
                       " class folder(s); a classifier needs at least 2");
  return names;
}

Dataset load_image_folder(const fs::path& dir, Split split, int64_t height, int64_t width) {
  AETHER_CHECK(
      (height == 0 && width == 0) || (height >= 1 && width >= 1 && height <= 65536 && width <= 65536),
      "load_image_folder", "the size to resize to must be 1..65536 on both sides (or 0 and 0), got ", height,
      "x", width);
  const bool resize = height > 0;
  const std::vector<std::string> classes = image_folder_classes(dir);
  const fs::path root = dir / split_name(split);
  std::error_code ec;
  AETHER_CHECK_RUNTIME(fs::is_directory(root, ec), "load_image_folder", root.string(), " is not a folder");
  // Pass 1: every image's size and channels from its header.
  std::vector<ImageFile> files;
  for (const fs::path& class_dir : listed(root, /*directories=*/true)) {
    const std::string name = class_dir.filename().string();
    const auto at = std::find(classes.begin(), classes.end(), name);
    AETHER_CHECK_RUNTIME(at != classes.end(), "load_image_folder", class_dir.string(), ": class '", name,
                         "' is not one of the ", classes.size(), " class folders of ",
                         (dir / "train").string());
    const std::vector<fs::path> images = listed(class_dir, /*directories=*/false);
    AETHER_CHECK_RUNTIME(!images.empty() || split == Split::test, "load_image_folder", class_dir.string(),
                         " holds no image (", kImageExtensions, ")");
    for (const fs::path& p : images) {
      files.push_back({p, at - classes.begin(), read_image_file("load_image_folder", p, /*pixels=*/false)});
    }
  }
  AETHER_CHECK_RUNTIME(!files.empty(), "load_image_folder", root.string(), " holds no image");
  // A fixed pseudo-random order, the same on every machine (Fisher-Yates with mt19937_64, whose
  // output the standard fixes): the classes mixed, so that a validation split's last part holds a
  // sample of each, as Keras' shuffled image_dataset_from_directory gives.
  std::mt19937_64 gen(kImageFolderOrderSeed);
  for (size_t i = files.size(); i > 1; --i) std::swap(files[i - 1], files[size_t(gen() % i)]);
  const ImageFile& first = files[0];
  bool colour = false;
  for (const ImageFile& f : files) {
    const DecodedImage &s = f.image, &s0 = first.image;
    AETHER_CHECK_RUNTIME(resize || (s.height == s0.height && s.width == s0.width), "load_image_folder",
                         f.path.string(), " is ", s.width, "x", s.height, " pixels, ", first.path.string(),
                         " ", s0.width, "x", s0.height,
                         "; every image must have the same size (or give a size to resize them to: "
                         "--image-size HxW)");
    colour = colour || s.channels >= 3;
  }
  Dataset d;
  d.name = "image-folder";
  d.split = split;
  d.n = int64_t(files.size());
  d.h = resize ? height : first.image.height;
  d.w = resize ? width : first.image.width;
  d.c = colour ? 3 : 1;
  d.num_classes = int(classes.size());
  d.class_names = classes;
  // Pass 2: the pixels, converted to C channels (and resized).
  check_fits_in_memory("load_image_folder", root.string(), files.size(), d.h, d.w, d.c,
                       resize ? "resize them to a smaller size"
                              : "resize them as they load (--image-size HxW; in Python, image_size=(H, W))");
  const size_t bytes = size_t(d.h * d.w * d.c);
  d.images.resize(files.size() * bytes);
  d.labels.reserve(files.size());
  for (size_t i = 0; i < files.size(); ++i) {
    decode_into("load_image_folder", files[i].path, d.h, d.w, d.c, d.images.data() + i * bytes);
    d.labels.push_back(files[i].label);
  }
  d.check();
  return d;
}

}  // namespace aether::data
