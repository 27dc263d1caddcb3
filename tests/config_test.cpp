// The configuration from the environment (core/config.h): one parser for switches, whole numbers and
// text, errors that name the variable and its value, the README's table of variables against the
// variables the parser knows, and no other reader of the environment in src/.
#include "core/config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "aether/core/error.h"
#include "test_paths.h"

using namespace aether;
namespace fs = std::filesystem;

namespace {

// Parses a made-up environment into a fresh Config.
struct Parsed {
  Config c;
  explicit Parsed(const std::map<std::string, std::string>& env) {
    parse_config(c, [&](const char* name) -> const char* {
      auto it = env.find(name);
      return it == env.end() ? nullptr : it->second.c_str();
    });
  }
};

std::string read_text(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace

TEST(Config, DefaultsWhenNothingIsSet) {
  const Parsed p({});
  const Config& c = p.c;
  EXPECT_TRUE(c.errors.empty()) << c.errors;
  EXPECT_TRUE(c.fuse && c.onednn && c.postops && c.plan_cache && c.conv_weight_cache);
  EXPECT_FALSE(c.pool_library || c.profile || c.cuda_graphs || c.cuda_verbose);
  EXPECT_EQ(c.debug, 0);
  EXPECT_EQ(c.num_threads, 0);
  EXPECT_EQ(c.cpu_isa, kCpuIsaNative);
  EXPECT_EQ(c.cache_dir.get(), "");
  EXPECT_EQ(c.home.get(), "");
}

TEST(Config, CpuIsaIsOneOfItsWords) {
  const std::pair<const char*, int> ok[] = {
      {"native", kCpuIsaNative}, {"avx2", kCpuIsaAvx2}, {"AVX2", kCpuIsaAvx2}, {"avx512", kCpuIsaAvx512}};
  for (const auto& [word, isa] : ok) {
    const Parsed p(std::map<std::string, std::string>{{"AETHER_CPU_ISA", word}});
    EXPECT_TRUE(p.c.errors.empty()) << p.c.errors;
    EXPECT_EQ(p.c.cpu_isa, isa) << word;
    EXPECT_STREQ(cpu_isa_name(isa), word == std::string("AVX2") ? "avx2" : word);
  }
  for (const char* bad : {"avx", "avx-512", "avx2 ", "1", "x86-64-v3"}) {
    const Parsed p(std::map<std::string, std::string>{{"AETHER_CPU_ISA", bad}});
    EXPECT_EQ(p.c.cpu_isa, kCpuIsaNative) << bad;  // the default stays
    EXPECT_NE(p.c.errors.find(std::string("AETHER_CPU_ISA=") + bad +
                              " is not a choice it knows: expected native, "
                              "avx2 or avx512"),
              std::string::npos)
        << p.c.errors;
  }
}

TEST(Config, EverySwitchTakesTheSameWords) {
  for (const char* on : {"1", "true", "on", "yes", "TRUE", "On", "Yes"}) {
    const Parsed p({{"AETHER_POOL_LIBRARY", on}, {"AETHER_PROFILE", on}, {"AETHER_CUDA_GRAPHS", on}});
    EXPECT_TRUE(p.c.errors.empty()) << p.c.errors;
    EXPECT_TRUE(p.c.pool_library && p.c.profile && p.c.cuda_graphs) << on;
  }
  for (const char* off : {"0", "false", "off", "no", "FALSE", "Off", "NO"}) {
    const Parsed p({{"AETHER_FUSE", off}, {"AETHER_POSTOPS", off}, {"AETHER_PLAN_CACHE", off}});
    EXPECT_TRUE(p.c.errors.empty()) << p.c.errors;
    EXPECT_FALSE(p.c.fuse || p.c.postops || p.c.plan_cache) << off;
  }
  const Parsed empty({{"AETHER_FUSE", ""}, {"AETHER_POOL_LIBRARY", ""}});  // empty: as unset
  EXPECT_TRUE(empty.c.errors.empty()) << empty.c.errors;
  EXPECT_TRUE(empty.c.fuse);
  EXPECT_FALSE(empty.c.pool_library);
}

TEST(Config, AMalformedValueIsAnErrorNamingTheVariableAndItsValue) {
  const Parsed p({{"AETHER_POSTOPS", "maybe"},
                  {"AETHER_DEBUG", "9"},
                  {"AETHER_NUM_THREADS", "zero"},
                  {"AETHER_ONEDNN", "0"}});
  const std::string& e = p.c.errors;
  EXPECT_NE(
      e.find("AETHER_POSTOPS=maybe is not a switch: expected 1, true, on or yes, or 0, false, off or no"),
      std::string::npos)
      << e;
  EXPECT_NE(e.find("AETHER_DEBUG=9 is not a debug level: expected a whole number from 0 to 4"),
            std::string::npos)
      << e;
  EXPECT_NE(e.find("AETHER_NUM_THREADS=zero is not a thread count: expected a whole number from 1 to 1024"),
            std::string::npos)
      << e;
  EXPECT_EQ(e.find("AETHER_ONEDNN"), std::string::npos) << "well-formed: " << e;
  // Malformed values keep their defaults; the others are taken.
  EXPECT_TRUE(p.c.postops);
  EXPECT_EQ(p.c.debug, 0);
  EXPECT_EQ(p.c.num_threads, 0);
  EXPECT_FALSE(p.c.onednn);
  for (const char* bad : {"-1", "1.5", " 2", "2 ", "0x10", "9999999999", "1025", "0"}) {
    const Parsed q(std::map<std::string, std::string>{{"AETHER_NUM_THREADS", bad}});
    EXPECT_NE(q.c.errors.find(std::string("AETHER_NUM_THREADS=") + bad + " is not"), std::string::npos)
        << bad;
  }
  const Parsed ok({{"AETHER_NUM_THREADS", "1024"}, {"AETHER_DEBUG", "4"}});
  EXPECT_TRUE(ok.c.errors.empty()) << ok.c.errors;
  EXPECT_EQ(ok.c.num_threads, 1024);
  EXPECT_EQ(ok.c.debug, 4);
  // Values of 10 digits within the range (numbers of 9 digits at most were taken before: 1000000000
  // was "not a pixel count: expected a whole number from 1 to 1073741824").
  for (const char* pixels : {"1000000000", "1073741824", "0001073741824"}) {
    const Parsed big(std::map<std::string, std::string>{{"AETHER_MAX_IMAGE_PIXELS", pixels}});
    EXPECT_TRUE(big.c.errors.empty()) << big.c.errors;
    EXPECT_EQ(big.c.max_image_pixels, std::stol(pixels));
  }
  for (const char* bad : {"1073741825", "99999999999999999999999"}) {
    const Parsed big(std::map<std::string, std::string>{{"AETHER_MAX_IMAGE_PIXELS", bad}});
    EXPECT_NE(big.c.errors.find(std::string("AETHER_MAX_IMAGE_PIXELS=") + bad + " is not a pixel count"),
              std::string::npos)
        << big.c.errors;
  }
}

TEST(Config, TextIsTakenAsGiven) {
  const Parsed p({{"AETHER_CACHE_DIR", "/some where/x"},
                  {"AETHER_CXX", "clang++-14"},
                  {"AETHER_DATA", "rel/dir"},
                  {"AETHER_DEVICE", "cuda:1"},
                  {"HOME", "/home/u"},
                  {"XDG_CACHE_HOME", "/c"},
                  {"XDG_DATA_HOME", "/d"}});
  EXPECT_TRUE(p.c.errors.empty()) << p.c.errors;
  EXPECT_EQ(p.c.cache_dir.get(), "/some where/x");
  EXPECT_EQ(p.c.cxx.get(), "clang++-14");
  EXPECT_EQ(p.c.data.get(), "rel/dir");
  EXPECT_EQ(p.c.device.get(), "cuda:1");
  EXPECT_EQ(p.c.home.get(), "/home/u");
  EXPECT_EQ(p.c.xdg_cache_home.get(), "/c");
  EXPECT_EQ(p.c.xdg_data_home.get(), "/d");
}

TEST(Config, EveryVariableIsReadAndNoOtherIs) {
  std::set<std::string> asked;
  Config c;
  parse_config(c, [&](const char* name) -> const char* {
    asked.insert(name);
    return nullptr;
  });
  std::set<std::string> known;
  for (const ConfigVariable& v : config_variables()) known.insert(v.name);
  EXPECT_EQ(asked, known);
  EXPECT_EQ(known.size(), config_variables().size()) << "each variable once";
}

TEST(Config, PlanSettingsFollowTheSwitches) {
  Config& c = config();
  const bool was = c.postops;
  c.postops = true;
  const uint64_t on = plan_settings();
  c.postops = false;
  const uint64_t off = plan_settings();
  c.postops = was;
  EXPECT_NE(on, off);
}

// The README's table of environment variables lists exactly the variables the configuration reads.
TEST(Config, TheReadmeTableListsExactlyTheConfigurationsVariables) {
  const std::string readme = read_text(fs::path(AETHER_TEST_SOURCE_DIR) / ".." / "README.md");
  ASSERT_FALSE(readme.empty());
  const size_t start = readme.find("\n## Environment variables\n");
  ASSERT_NE(start, std::string::npos) << "README.md has no '## Environment variables' section";
  const size_t end = readme.find("\n## ", start + 1);
  std::istringstream in(readme.substr(start, end == std::string::npos ? std::string::npos : end - start));
  std::vector<std::string> listed;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("| `", 0) != 0) continue;
    const size_t close = line.find('`', 3);
    ASSERT_NE(close, std::string::npos) << line;
    const std::string cell = line.substr(3, close - 3);
    listed.push_back(cell.substr(0, cell.find('=')));
  }
  std::vector<std::string> known;
  for (const ConfigVariable& v : config_variables()) known.push_back(v.name);
  EXPECT_EQ(listed, known) << "README.md's table, in the order of core/config.cpp's";
}

// Nothing in src/ but the configuration reads the environment.
TEST(Config, OnlyTheConfigurationCallsGetenv) {
  const fs::path src = fs::path(AETHER_TEST_SOURCE_DIR) / ".." / "src";
  ASSERT_TRUE(fs::is_directory(src)) << src;
  std::vector<std::string> readers;
  for (const auto& e : fs::recursive_directory_iterator(src)) {
    if (!e.is_regular_file()) continue;
    const std::string rel = fs::relative(e.path(), src).string();
    if (rel == "core/config.cpp" || rel == "core/config.h") continue;
    // (secure_getenv( too; `environ` is only handed on to the compilers it starts)
    if (read_text(e.path()).find("getenv(") != std::string::npos) readers.push_back(rel);
  }
  EXPECT_TRUE(readers.empty()) << ::testing::PrintToString(readers);
}
