// Where data lives: resolve_data_dir with --data-dir, $AETHER_DATA, the shared/ directory found from
// the current directory, the download directory ($XDG_DATA_HOME, $HOME), and the error that lists
// what was tried.
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>

#include "aether/core/error.h"
#include "aether/data/dataset.h"
#include "core/config.h"
#include "data/fixtures.h"

using namespace aether::data;
using namespace aether::data::test_util;

namespace {

// Sets (or unsets, with nullopt) an environment variable's value in the configuration (core/config.h,
// which reads the environment once) for the lifetime of the guard.
class ScopedEnv {
 public:
  ScopedEnv(const std::string& name, std::optional<std::string> value)
      : text_(setting(name)), old_(text_.get()) {
    text_.set(value.value_or(""));
  }
  ~ScopedEnv() { text_.set(old_); }

 private:
  static aether::ConfigText& setting(const std::string& name) {
    aether::Config& c = aether::config();
    if (name == "AETHER_DATA") return c.data;
    if (name == "XDG_DATA_HOME") return c.xdg_data_home;
    EXPECT_EQ(name, "HOME");
    return c.home;
  }
  aether::ConfigText& text_;
  std::string old_;
};

class ScopedCwd {
 public:
  explicit ScopedCwd(const fs::path& p) : old_(fs::current_path()) { fs::current_path(p); }
  ~ScopedCwd() { fs::current_path(old_); }

 private:
  fs::path old_;
};

void touch(const fs::path& p) {
  fs::create_directories(p.parent_path());
  write_file(p, Bytes{0});
}

}  // namespace

TEST(DataDir, CanonicalNames) {
  EXPECT_EQ(canonical_dataset_name("cifar10"), "cifar-10");
  EXPECT_EQ(canonical_dataset_name("CIFAR-10"), "cifar-10");
  EXPECT_EQ(canonical_dataset_name("fashion_mnist"), "fashion-mnist");
  EXPECT_EQ(canonical_dataset_name("fashion-mnist"), "fashion-mnist");
  EXPECT_THROW(canonical_dataset_name("imagenet"), aether::Error);
  EXPECT_THROW(resolve_data_dir("mnist3d", "/tmp"), aether::Error);
}

TEST(DataDir, HasDatasetFiles) {
  TempDir d;
  EXPECT_FALSE(has_dataset_files("cifar-10", d.path()));
  touch(d / "test_batch.bin.xz");
  EXPECT_TRUE(has_dataset_files("cifar-10", d.path()));
  EXPECT_FALSE(has_dataset_files("fashion-mnist", d.path()));
  touch(d / "t10k-images-idx3-ubyte.gz");
  EXPECT_TRUE(has_dataset_files("fashion-mnist", d.path()));
}

TEST(DataDir, CommandLineDirectoryWins) {
  TempDir d;
  touch(d / "cli" / "data_batch_1.bin");
  touch(d / "env" / "data_batch_1.bin");
  ScopedEnv env("AETHER_DATA", (d / "env").string());
  EXPECT_EQ(resolve_data_dir("cifar-10", (d / "cli").string()), (d / "cli").lexically_normal());
  EXPECT_EQ(resolve_data_dir("cifar-10", ""), (d / "env").lexically_normal());
  // A root directory holding one folder per data set works too.
  touch(d / "root" / "cifar-10" / "test_batch.bin");
  EXPECT_EQ(resolve_data_dir("cifar10", (d / "root").string()), (d / "root" / "cifar-10").lexically_normal());
}

TEST(DataDir, ExplicitDirectoryWithoutFilesIsAnErrorListingWhatWasTried) {
  TempDir d;
  ScopedEnv env("AETHER_DATA", std::nullopt);
  const std::string empty = (d / "empty").string();
  fs::create_directories(empty);
  try {
    resolve_data_dir("cifar-10", empty);
    FAIL() << "no error";
  } catch (const aether::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no cifar-10 files found (from --data-dir); tried:"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\n  " + empty + "\n"), std::string::npos) << msg;
    EXPECT_NE(msg.find("\n  " + empty + "/cifar-10"), std::string::npos) << msg;
    EXPECT_EQ(msg.find("/usr/share"), std::string::npos)
        << "an explicit directory must not fall back: " << msg;
  }
  // The message names the folder the way its caller takes it: Python's keyword, not the CLI's flag.
  try {
    resolve_data_dir("cifar-10", empty, "data_dir");
    FAIL() << "no error";
  } catch (const aether::Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("no cifar-10 files found (from data_dir); tried:"), std::string::npos) << msg;
    EXPECT_NE(
        msg.find(
            "\nPass data_dir=DIR or set AETHER_DATA=DIR, or download it with `aether data fetch cifar10`"),
        std::string::npos)
        << msg;
    EXPECT_EQ(msg.find("--data-dir"), std::string::npos) << msg;
  }
  ScopedEnv env2("AETHER_DATA", empty);
  try {
    resolve_data_dir("fashion-mnist", "");
    FAIL() << "no error";
  } catch (const aether::Error& e) {
    EXPECT_NE(std::string(e.what()).find("(from AETHER_DATA)"), std::string::npos) << e.what();
  }
}

TEST(DataDir, DownloadDirectory) {
  {
    ScopedEnv xdg("XDG_DATA_HOME", "/x/data");
    EXPECT_EQ(default_download_dir("cifar10"), fs::path("/x/data/aether/cifar-10"));
  }
  ScopedEnv xdg("XDG_DATA_HOME", std::nullopt);
  ScopedEnv home("HOME", "/home/someone");
  EXPECT_EQ(default_download_dir("cifar-10"), fs::path("/home/someone/.local/share/aether/cifar-10"));
}

TEST(DataDir, DefaultsFindSharedDataAboveTheCurrentDirectoryThenTheDownloadDirectory) {
  TempDir tmp;
  const fs::path d = fs::canonical(tmp.path());  // what getcwd() reports
  ScopedEnv env("AETHER_DATA", std::nullopt);
  ScopedEnv xdg("XDG_DATA_HOME", (d / "xdg").string());
  fs::create_directories(d / "work" / "repo" / "build");
  ScopedCwd cwd(d / "work" / "repo" / "build");
  // Nothing yet in <tmp>/work/shared; the download directory is among the candidates.
  const auto cands = data_dir_candidates("cifar-10");
  EXPECT_NE(std::find(cands.begin(), cands.end(), d / "work" / "shared" / "data" / "cifar-10"), cands.end());
  EXPECT_EQ(std::find(cands.begin(), cands.end(), d / "xdg" / "aether" / "cifar-10"), cands.end() - 1);
  touch(d / "xdg" / "aether" / "cifar-10" / "test_batch.bin");
  // (A shared/ directory above the executable may be found first; only check what comes first
  // relative to the current directory.)
  touch(d / "work" / "shared" / "data" / "cifar-10" / "data_batch_1.bin.xz");
  EXPECT_EQ(resolve_data_dir("cifar-10"), (d / "work" / "shared" / "data" / "cifar-10").lexically_normal());
}

TEST(DataDir, FashionMnistDefaultIsTheDebianPackage) {
  ScopedEnv env("AETHER_DATA", std::nullopt);
  const auto cands = data_dir_candidates("fashion-mnist");
  ASSERT_FALSE(cands.empty());
  EXPECT_EQ(cands.front(), fs::path("/usr/share/datasets/fashion-mnist"));
  if (!fs::exists("/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz")) GTEST_SKIP();
  EXPECT_EQ(resolve_data_dir("fashion-mnist"), fs::path("/usr/share/datasets/fashion-mnist"));
}
