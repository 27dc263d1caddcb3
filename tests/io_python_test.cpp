// tests/io_python_test.cpp - optional cross-check with the reference Python `safetensors` package:
// Python reads the files aether writes, and aether reads the files Python writes.
//
// Runs only where `python3` (or $AETHER_PYTHON) can import safetensors and numpy; elsewhere every
// test is skipped (GTEST_SKIP), so the suite never needs Python. Select with
// `ctest -R PythonCrossCheck`. The helper script is tests/io/safetensors_crosscheck.py.
#include <gtest/gtest.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>

#include "aether/aether.h"
#include "aether/io/safetensors.h"
#include "test_paths.h"

using namespace aether;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string python() {
  const char* p = std::getenv("AETHER_PYTHON");
  return p && *p ? p : "python3";
}

std::string script() {
  return (fs::path(AETHER_TEST_SOURCE_DIR) / "io" / "safetensors_crosscheck.py").string();
}

std::string quote(const std::string& s) { return "'" + s + "'"; }  // test paths hold no quotes

// Runs `cmd`; returns its exit status and stdout.
std::pair<int, std::string> run(const std::string& cmd) {
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return {-1, ""};
  std::string out;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
  return {::pclose(p), out};
}

bool have_reference() {
  static const bool ok =
      run(quote(python()) + " -c 'import safetensors, numpy' >/dev/null 2>&1").first == 0 &&
      fs::exists(script());
  return ok;
}

class PythonCrossCheck : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!have_reference())
      GTEST_SKIP() << python() << " with the safetensors and numpy packages is not available";
    dir_ = fs::temp_directory_path() / ("aether_io_py_" + std::to_string(::getpid()));
    fs::create_directories(dir_);
  }
  void TearDown() override {
    if (!dir_.empty()) fs::remove_all(dir_);
  }
  fs::path dir_;
};

}  // namespace

TEST_F(PythonCrossCheck, PythonReadsOurFile) {
  const std::string path = (dir_ / "ours.safetensors").string();
  const Tensor base = Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {2, 3});
  save_safetensors(path,
                   {
                       {"0.conv.weight", Tensor::from_vector<float>({1.5f, -2.25f, 0, 3e38f}, {1, 2, 2, 1})},
                       {"half", Tensor::from_vector<float>({1, -2, 65504}, {3}).cast(DType::float16)},
                       {"brain", Tensor::from_vector<float>({1, -3, 0.5f}, {3}).cast(DType::bfloat16)},
                       {"double", Tensor::from_vector<double>({1.0 / 3, -1e300}, {2, 1})},
                       {"int", Tensor::from_vector<int32_t>({INT32_MIN, 7}, {2})},
                       {"long", Tensor::from_vector<int64_t>({-(int64_t(1) << 40)}, {})},
                       {"byte", Tensor::from_vector<uint8_t>({0, 255}, {2})},
                       {"flag", Tensor::from_vector<bool>({true, false, true}, {3})},
                       {"empty", Tensor::zeros({0, 3})},
                       {"view", base.permute({1, 0})},
                   },
                   {{"framework", "aether"}});
  const auto [status, out] = run(quote(python()) + " " + quote(script()) + " read " + quote(path));
  ASSERT_EQ(status, 0) << out;
  const json got = json::parse(out);
  EXPECT_EQ(got["metadata"], (json{{"framework", "aether"}}));
  const json& t = got["tensors"];
  ASSERT_EQ(t.size(), 10u);
  auto expect = [&](const char* name, const char* dtype, const json& shape, const json& values) {
    SCOPED_TRACE(name);
    EXPECT_EQ(t[name]["dtype"], dtype);
    EXPECT_EQ(t[name]["shape"], shape);
    EXPECT_EQ(t[name]["values"], values);
  };
  expect("0.conv.weight", "F32", {1, 2, 2, 1}, {1.5, -2.25, 0.0, double(3e38f)});
  expect("half", "F16", {3}, {1.0, -2.0, 65504.0});
  expect("brain", "BF16", {3}, {1.0, -3.0, 0.5});
  expect("double", "F64", {2, 1}, {1.0 / 3, -1e300});
  expect("int", "I32", {2}, {INT32_MIN, 7});
  expect("long", "I64", json::array(), {-(int64_t(1) << 40)});
  expect("byte", "U8", {2}, {0, 255});
  expect("flag", "BOOL", {3}, {true, false, true});
  expect("empty", "F32", {0, 3}, json::array());
  expect("view", "F32", {3, 2}, {0.0, 3.0, 1.0, 4.0, 2.0, 5.0});
}

TEST_F(PythonCrossCheck, WeReadPythonFile) {
  const std::string path = (dir_ / "theirs.safetensors").string();
  const auto [status, out] = run(quote(python()) + " " + quote(script()) + " write " + quote(path));
  ASSERT_EQ(status, 0) << out;
  const auto st = load_safetensors(path);
  EXPECT_EQ(st.metadata, (SafetensorsMetadata{{"source", "python"}}));
  std::map<std::string, Tensor> t(st.tensors.begin(), st.tensors.end());
  ASSERT_EQ(t.size(), 8u);
  EXPECT_EQ(t["w"].shape(), (Shape{2, 3}));
  EXPECT_EQ(t["w"].to_vector<float>(), (std::vector<float>{-1, -0.5, 0, 0.5, 1, 1.5}));
  EXPECT_EQ(t["h"].dtype(), DType::float16);
  EXPECT_EQ(t["h"].to_vector<float>(), (std::vector<float>{1, -2, 65504}));
  EXPECT_EQ(t["d"].shape(), (Shape{2, 1}));
  EXPECT_EQ(t["d"].to_vector<double>(), (std::vector<double>{1.5, -4}));
  EXPECT_EQ(t["i"].to_vector<int32_t>(), (std::vector<int32_t>{INT32_MIN, 7}));
  EXPECT_EQ(t["l"].shape(), Shape{});
  EXPECT_EQ(t["l"].item<int64_t>(), -(int64_t(1) << 40));
  EXPECT_EQ(t["u"].dtype(), DType::uint8);
  EXPECT_EQ(t["u"].to_vector<int32_t>(), (std::vector<int32_t>{0, 255}));
  EXPECT_EQ(t["b"].to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(t["e"].shape(), (Shape{0, 3}));
}
