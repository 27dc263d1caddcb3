// Test fixtures for the data layer: temporary directories and hand-built files (IDX, CIFAR-10
// records, gzip with stored blocks and our own CRC-32, ustar archives), written independently of
// the code under test. Header-only; included by tests/data_*_test.cpp.
#pragma once

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include "temp_dir.h"
#include "test_paths.h"

extern char** environ;

namespace aether::data::test_util {
namespace fs = std::filesystem;
using Bytes = std::vector<uint8_t>;

using aether::test::TempDir;  // tests/temp_dir.h

inline void write_file(const fs::path& p, const Bytes& b) {
  std::ofstream out(p, std::ios::binary);
  out.write(reinterpret_cast<const char*>(b.data()), std::streamsize(b.size()));
  if (!out) throw std::runtime_error("cannot write " + p.string());
}

inline Bytes read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return Bytes(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

inline Bytes head(const Bytes& b, size_t n) {
  return Bytes(b.begin(), b.begin() + ptrdiff_t(std::min(n, b.size())));
}

inline void put_be32(Bytes& b, uint32_t v) {
  for (int s = 24; s >= 0; s -= 8) b.push_back(uint8_t(v >> s));
}
inline void put_le32(Bytes& b, uint32_t v) {
  for (int s = 0; s <= 24; s += 8) b.push_back(uint8_t(v >> s));
}

// IDX images: magic 0x803, N, rows, cols (big-endian), then pixels.
inline Bytes idx_images(uint32_t n, uint32_t rows, uint32_t cols, const Bytes& pixels,
                        uint32_t magic = 0x803) {
  Bytes b;
  put_be32(b, magic);
  put_be32(b, n);
  put_be32(b, rows);
  put_be32(b, cols);
  b.insert(b.end(), pixels.begin(), pixels.end());
  return b;
}
inline Bytes idx_labels(const Bytes& labels, uint32_t magic = 0x801) {
  Bytes b;
  put_be32(b, magic);
  put_be32(b, uint32_t(labels.size()));
  b.insert(b.end(), labels.begin(), labels.end());
  return b;
}

// Pixel value of image i at (y, x, c) used by the synthetic sets: distinct per position and image.
inline uint8_t test_pixel(int64_t i, int64_t y, int64_t x, int64_t c) {
  return uint8_t((i * 37 + y * 11 + x * 5 + c * 101 + 3) % 251);
}

// One CIFAR-10 record for the (32,32,3) image given by test_pixel(i, ...): label, R, G, B planes.
inline Bytes cifar_record(uint8_t label, int64_t i) {
  Bytes r{label};
  for (int64_t c = 0; c < 3; ++c) {
    for (int64_t y = 0; y < 32; ++y) {
      for (int64_t x = 0; x < 32; ++x) r.push_back(test_pixel(i, y, x, c));
    }
  }
  return r;
}
// `n` records starting at image number `first`, labels (first + k) % 10.
inline Bytes cifar_batch(int64_t n, int64_t first = 0) {
  Bytes b;
  for (int64_t k = 0; k < n; ++k) {
    const Bytes r = cifar_record(uint8_t((first + k) % 10), first + k);
    b.insert(b.end(), r.begin(), r.end());
  }
  return b;
}

// CRC-32 (IEEE 802.3, reflected, poly 0xEDB88320), bit by bit.
inline uint32_t crc32_ieee(const Bytes& b) {
  uint32_t crc = 0xffffffffu;
  for (uint8_t byte : b) {
    crc ^= byte;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  return ~crc;
}

// A gzip file (RFC 1952) whose deflate stream uses stored blocks only (RFC 1951, BTYPE 00).
inline Bytes gzip_stored(const Bytes& data) {
  Bytes g = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3};
  size_t pos = 0;
  do {
    const size_t len = std::min<size_t>(65535, data.size() - pos);
    const bool last = pos + len == data.size();
    g.push_back(last ? 1 : 0);
    g.push_back(uint8_t(len));
    g.push_back(uint8_t(len >> 8));
    g.push_back(uint8_t(~len));
    g.push_back(uint8_t(~len >> 8));
    g.insert(g.end(), data.begin() + ptrdiff_t(pos), data.begin() + ptrdiff_t(pos + len));
    pos += len;
  } while (pos < data.size());
  put_le32(g, crc32_ieee(data));
  put_le32(g, uint32_t(data.size()));
  return g;
}

// One ustar member (header + data padded to 512 bytes).
inline Bytes tar_member(const std::string& name, const Bytes& data, char type = '0') {
  Bytes h(512, 0);
  auto put = [&](size_t off, const std::string& s) {
    std::copy(s.begin(), s.end(), h.begin() + ptrdiff_t(off));
  };
  char num[32];
  put(0, name);
  put(100, "0000644");
  put(108, "0000000");
  put(116, "0000000");
  std::snprintf(num, sizeof num, "%011llo", static_cast<unsigned long long>(data.size()));
  put(124, num);
  put(136, "14707475500");
  put(148, "        ");
  h[156] = uint8_t(type);
  put(257, "ustar");  // "ustar\0" + version "00"
  put(263, "00");
  unsigned sum = 0;
  for (uint8_t c : h) sum += c;
  std::snprintf(num, sizeof num, "%06o", sum);
  put(148, num);  // six digits, NUL, space
  h[154] = 0;
  h[155] = ' ';
  Bytes out = h;
  out.insert(out.end(), data.begin(), data.end());
  out.resize((out.size() + 511) / 512 * 512, 0);
  return out;
}
inline Bytes tar_end() { return Bytes(1024, 0); }

// Runs a shell command; returns its exit status.
inline int sh(const std::string& cmd) { return std::system(cmd.c_str()); }
inline bool have_command(const std::string& name) {
  return sh("command -v " + name + " >/dev/null 2>&1") == 0;
}

// Compresses `src` to `src`.xz with the xz program; returns the new path.
inline fs::path xz_file(const fs::path& src) {
  const int rc = sh("xz -z -k -f -T1 -0 '" + src.string() + "'");
  if (rc != 0) throw std::runtime_error("xz failed");
  return fs::path(src.string() + ".xz");
}

// The repository's shared directory: $AETHER_SHARED_DIR, else <repo>/../shared from this file.
inline fs::path shared_dir() {
  if (const char* e = std::getenv("AETHER_SHARED_DIR"); e != nullptr && *e != 0) return e;
  return (fs::path(AETHER_TEST_SOURCE_DIR) / ".." / ".." / "shared").lexically_normal();
}

// python3 -m http.server (tests/data/http_server.py) serving `dir` on 127.0.0.1 at a free port.
class HttpServer {
 public:
  explicit HttpServer(const fs::path& dir) {
    const fs::path script = fs::path(AETHER_TEST_SOURCE_DIR) / "data" / "http_server.py";
    const fs::path port_file = dir.parent_path() / (dir.filename().string() + ".port");
    const std::string python = fs::exists("/usr/bin/python3") ? "/usr/bin/python3" : "python3";
    std::vector<std::string> args = {python, script.string(), dir.string(), port_file.string()};
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    const int rc = posix_spawnp(&pid_, argv[0], &fa, nullptr, argv.data(), environ);
    posix_spawn_file_actions_destroy(&fa);
    if (rc != 0) {
      pid_ = -1;
      return;
    }
    for (int i = 0; i < 200 && port_ == 0; ++i) {  // up to 10 s
      std::ifstream in(port_file);
      if (in >> port_) break;
      port_ = 0;
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    std::error_code ec;
    fs::remove(port_file, ec);
  }
  ~HttpServer() {
    if (pid_ > 0) {
      ::kill(pid_, SIGTERM);
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;
  bool ok() const { return pid_ > 0 && port_ > 0; }
  std::string url(const std::string& file) const {
    return "http://127.0.0.1:" + std::to_string(port_) + "/" + file;
  }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
};

}  // namespace aether::data::test_util
