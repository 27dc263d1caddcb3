// Helpers of the tests that run the built `aether` program (cli_test, dist_train_test): a run with
// its output, crash signs, a temporary folder per test, a tiny Fashion-MNIST-style data set.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "data/fixtures.h"

#ifndef AETHER_CLI_PATH
#error "AETHER_CLI_PATH must be defined by tests/CMakeLists.txt"
#endif

namespace cli_util {
namespace fs = std::filesystem;

struct CliResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `aether <args>` through the shell with stdout and stderr captured.
inline CliResult run(const std::string& args) {
  const std::string cmd = std::string("'") + AETHER_CLI_PATH + "' " + args + " 2>&1";
  CliResult r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + (WIFSIGNALED(status) ? WTERMSIG(status) : 0);
  return r;
}

// No crash signs in any output.
inline void expect_no_crash(const CliResult& r) {
  for (const char* bad : {"terminate called", "what():", "Aborted", "Segmentation", "core dumped",
                          "AddressSanitizer", "runtime error:", "#0 0x"})
    EXPECT_EQ(r.out.find(bad), std::string::npos) << "found '" << bad << "' in:\n" << r.out;
}

// A failure: non-zero exit, output starting "aether: error: " and containing every part; only
// one line unless `multi_line` (e.g. the list of directories tried for a data set).
inline void expect_clear_error(const CliResult& r, const std::vector<std::string>& parts,
                               bool multi_line = false) {
  EXPECT_NE(r.code, 0) << r.out;
  expect_no_crash(r);
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n') << r.out;
  if (!multi_line) {
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "more than one line:\n" << r.out;
  }
  EXPECT_EQ(r.out.rfind("aether: error: ", 0), 0u) << r.out;
  for (const auto& p : parts)
    EXPECT_NE(r.out.find(p), std::string::npos) << "missing '" << p << "' in:\n" << r.out;
}
inline void expect_one_line_error(const CliResult& r, const std::vector<std::string>& parts) {
  expect_clear_error(r, parts);
}

struct TempDir {
  fs::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::temp_directory_path() / ("aether_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

// `n` train and `n` test images of rows x cols (uncompressed IDX files) in `dir`, label i % 10; the
// test images test_rows x test_cols when given.
inline void write_tiny_fashion(const fs::path& dir, uint32_t rows, uint32_t cols, uint32_t test_rows = 0,
                               uint32_t test_cols = 0, uint32_t n = 8) {
  namespace tu = aether::data::test_util;
  fs::create_directories(dir);
  for (const char* split : {"train", "t10k"}) {
    if (std::string(split) == "t10k" && test_rows > 0) std::tie(rows, cols) = std::pair(test_rows, test_cols);
    tu::Bytes pixels, labels;
    for (uint32_t i = 0; i < n; ++i) {
      labels.push_back(uint8_t(i % 10));
      for (uint32_t y = 0; y < rows; ++y)
        for (uint32_t x = 0; x < cols; ++x) pixels.push_back(tu::test_pixel(i, y, x, 0));
    }
    tu::write_file(dir / (std::string(split) + "-images-idx3-ubyte"), tu::idx_images(n, rows, cols, pixels));
    tu::write_file(dir / (std::string(split) + "-labels-idx1-ubyte"), tu::idx_labels(labels));
  }
}

}  // namespace cli_util
