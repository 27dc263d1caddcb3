// Tests of the `aether` command-line program, run as a child process (its path comes from CMake
// as AETHER_CLI_PATH): exit codes and messages for bad input (one clear line, never a stack
// trace or "terminate called"), --version, devices, summary, and a real mini training run on
// Fashion-MNIST followed by evaluate and predict on its checkpoint (skipped without the data).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#ifndef AETHER_CLI_PATH
#error "AETHER_CLI_PATH must be defined by tests/CMakeLists.txt"
#endif

namespace fs = std::filesystem;

namespace {

const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

struct CliResult {
  int code = -1;
  std::string out;  // stdout and stderr together
};

// Runs `aether <args>` through the shell with stdout and stderr captured.
CliResult run(const std::string& args) {
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
void expect_no_crash(const CliResult& r) {
  for (const char* bad : {"terminate called", "what():", "Aborted", "Segmentation", "core dumped", "AddressSanitizer",
                          "runtime error:", "#0 0x"})
    EXPECT_EQ(r.out.find(bad), std::string::npos) << "found '" << bad << "' in:\n" << r.out;
}

// A failure: non-zero exit, output starting "aether: error: " and containing every part; only
// one line unless `multi_line` (e.g. the list of directories tried for a data set).
void expect_clear_error(const CliResult& r, const std::vector<std::string>& parts, bool multi_line = false) {
  EXPECT_NE(r.code, 0) << r.out;
  expect_no_crash(r);
  ASSERT_FALSE(r.out.empty());
  EXPECT_EQ(r.out.back(), '\n') << r.out;
  if (!multi_line) {
    EXPECT_EQ(r.out.find('\n'), r.out.size() - 1) << "more than one line:\n" << r.out;
  }
  EXPECT_EQ(r.out.rfind("aether: error: ", 0), 0u) << r.out;
  for (const auto& p : parts) EXPECT_NE(r.out.find(p), std::string::npos) << "missing '" << p << "' in:\n" << r.out;
}
void expect_one_line_error(const CliResult& r, const std::vector<std::string>& parts) { expect_clear_error(r, parts); }

struct TempDir {
  fs::path path;
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    path = fs::temp_directory_path() / ("aether_cli_test_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace

TEST(Cli, Version) {
  const CliResult r = run("--version");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("aether ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find_first_of("0123456789"), std::string::npos) << r.out;
  expect_no_crash(r);
}

TEST(Cli, Devices) {
  const CliResult r = run("devices");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("cpu", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("threads"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cuda"), std::string::npos) << r.out;
  expect_no_crash(r);
}

TEST(Cli, SummaryCifarnet) {
  const CliResult r = run("summary --model cifarnet");
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Trainable parameters: 1166506"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Output shape"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("(1, 32, 32, 32)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("GlobalMaxPool2d"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Linear(256 -> 10)"), std::string::npos) << r.out;
  expect_no_crash(r);
  const CliResult m = run("summary --model mlp");
  EXPECT_EQ(m.code, 0) << m.out;
  // 784*512+512 + 512*256+256 + 256*10+10
  EXPECT_NE(m.out.find("Trainable parameters: 535818"), std::string::npos) << m.out;
}

TEST(Cli, UnknownPreset) {
  expect_one_line_error(run("summary --model resnet9000"), {"resnet9000", "mlp", "lenet", "cifarnet"});
}

TEST(Cli, UnknownSubcommandOrOption) {
  const CliResult r = run("fly");
  EXPECT_NE(r.code, 0) << r.out;
  expect_no_crash(r);
  const CliResult o = run("summary --bogus");
  EXPECT_NE(o.code, 0) << o.out;
  expect_no_crash(o);
}

TEST(Cli, MissingDataDir) {
  // The message lists every directory tried, one per line, and how to get the data.
  expect_clear_error(run("train --dataset fashion-mnist --model mlp --data-dir /nonexistent"),
                     {"fashion-mnist", "/nonexistent", "--data-dir"}, true);
  expect_clear_error(run("train --dataset cifar10 --data-dir /nonexistent"), {"cifar-10", "/nonexistent"}, true);
  expect_clear_error(run("data verify fashion-mnist --data-dir /nonexistent"), {"/nonexistent"}, true);
  expect_clear_error(run("evaluate --checkpoint /nonexistent/m.aether --data-dir /nonexistent"), {"/nonexistent"},
                     true);
  expect_one_line_error(run("train --dataset mnist-ish --data-dir /nonexistent"), {"mnist-ish"});
}

TEST(Cli, NotACheckpoint) {
  TempDir tmp;
  const std::string f = tmp.file("notes.txt");
  std::ofstream(f) << "just some text, not a checkpoint\n";
  expect_one_line_error(run("evaluate --checkpoint '" + f + "'"), {f});
  expect_one_line_error(run("evaluate --checkpoint '" + tmp.file("missing.aether") + "'"), {"missing.aether"});
  expect_one_line_error(run("predict --checkpoint '" + f + "' /dev/null"), {f});
}

TEST(Cli, BadDevicePrecisionAndResume) {
  if (!fs::exists(fs::path(kFashionDir) / "train-images-idx3-ubyte.gz")) GTEST_SKIP() << "no " << kFashionDir;
  expect_one_line_error(run("train --model mlp --device cuda --epochs 1 --max-steps-per-epoch 1 --quiet"),
                        {"CUDA"});
  expect_one_line_error(run("train --model mlp --precision float16 --epochs 1 --max-steps-per-epoch 1 --quiet"),
                        {"float16", "not yet supported"});
  expect_one_line_error(run("train --model nope-net --epochs 1 --quiet"), {"nope-net"});
}

TEST(Cli, MiniTrainingEvaluatePredict) {
  if (!fs::exists(fs::path(kFashionDir) / "train-images-idx3-ubyte.gz")) GTEST_SKIP() << "no " << kFashionDir;
  TempDir tmp;
  const std::string ck = tmp.file("m.aether"), js = tmp.file("m.json");
  const CliResult t = run("train --dataset fashion-mnist --model mlp --epochs 1 --max-steps-per-epoch 3 --batch-size 32 "
                    "--save '" + ck + "' --metrics-json '" + js + "' --quiet");
  ASSERT_EQ(t.code, 0) << t.out;
  expect_no_crash(t);
  EXPECT_NE(t.out.find("test accuracy"), std::string::npos) << t.out;
  ASSERT_TRUE(fs::exists(ck));
  ASSERT_TRUE(fs::exists(js));
  nlohmann::json j;
  std::ifstream(js) >> j;
  for (const char* k : {"test_accuracy", "test_loss", "train_loss", "epochs", "seconds", "images_per_second"})
    EXPECT_TRUE(j.contains(k)) << k << " missing from " << j.dump();
  EXPECT_EQ(j.at("epochs"), 1);
  EXPECT_GT(j.at("test_accuracy").get<double>(), 0.2);  // 3 Adam steps already beat chance (0.1)
  EXPECT_LE(j.at("test_accuracy").get<double>(), 1.0);
  EXPECT_TRUE(std::isfinite(j.at("test_loss").get<double>()));
  EXPECT_TRUE(std::isfinite(j.at("train_loss").get<double>()));
  EXPECT_GT(j.at("images_per_second").get<double>(), 0);

  const CliResult e = run("evaluate --checkpoint '" + ck + "' --metrics-json '" + tmp.file("e.json") + "'");
  ASSERT_EQ(e.code, 0) << e.out;
  expect_no_crash(e);
  EXPECT_NE(e.out.find("accuracy"), std::string::npos) << e.out;
  nlohmann::json ej;
  std::ifstream(tmp.file("e.json")) >> ej;
  EXPECT_EQ(ej.at("samples"), 10000);
  // The same model on the same test set: the same accuracy the training run reported.
  EXPECT_NEAR(ej.at("test_accuracy").get<double>(), j.at("test_accuracy").get<double>(), 1e-9);

  const CliResult p = run("predict --checkpoint '" + ck + "' " + std::string(kFashionDir) +
                    "/t10k-images-idx3-ubyte.gz --limit 3");
  ASSERT_EQ(p.code, 0) << p.out;
  expect_no_crash(p);
  int lines = 0;
  for (char ch : p.out) lines += ch == '\n';
  EXPECT_EQ(lines, 3) << p.out;
  EXPECT_EQ(p.out.rfind("0\tclass ", 0), 0u) << p.out;
  EXPECT_NE(p.out.find("2\tclass "), std::string::npos) << p.out;

  // A checkpoint with the wrong kind of input for predict: a clear error.
  expect_one_line_error(run("predict --checkpoint '" + ck + "' '" + std::string(kFashionDir) +
                            "/t10k-labels-idx1-ubyte.gz'"),
                        {"t10k-labels"});
}
