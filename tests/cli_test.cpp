// Tests of the `aether` command-line program, run as a child process (its path comes from CMake
// as AETHER_CLI_PATH): exit codes and messages for bad input (one clear line, never a stack
// trace or "terminate called"), --version, devices, summary, and a real mini training run on
// Fashion-MNIST followed by evaluate and predict on its checkpoint (skipped without the data).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "aether/backend/cuda.h"

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

TEST(Cli, DefaultDeviceFromTheEnvironment) {
  // AETHER_DEVICE names the device tensors are created on; one that is not there is a clear error.
  setenv("AETHER_DEVICE", "tpu", 1);
  const CliResult bad = run("demo");
  setenv("AETHER_DEVICE", "cpu", 1);
  const CliResult cpu = run("demo");
  unsetenv("AETHER_DEVICE");
  EXPECT_NE(bad.code, 0) << bad.out;
  EXPECT_NE(bad.out.find("AETHER_DEVICE=tpu"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("unknown device 'tpu'"), std::string::npos) << bad.out;
  expect_no_crash(bad);
  EXPECT_EQ(cpu.code, 0) << cpu.out;
  if (aether::cuda_device_count() == 0) {  // no GPU here: asking for one says why, and nothing crashes
    setenv("AETHER_DEVICE", "cuda", 1);
    const CliResult gpu = run("demo");
    unsetenv("AETHER_DEVICE");
    EXPECT_NE(gpu.code, 0) << gpu.out;
    EXPECT_NE(gpu.out.find("AETHER_DEVICE=cuda"), std::string::npos) << gpu.out;
    EXPECT_NE(gpu.out.find(aether::cuda_unavailable_reason()), std::string::npos) << gpu.out;
    expect_no_crash(gpu);
  }
}

TEST(Cli, NumThreadsSizesThePool) {
  setenv("AETHER_NUM_THREADS", "3", 1);
  const CliResult three = run("devices");
  setenv("AETHER_NUM_THREADS", "zero", 1);
  const CliResult bad = run("demo --steps 1");  // a bad value is an error at the first computation
  unsetenv("AETHER_NUM_THREADS");
  EXPECT_NE(three.out.find(", 3 threads"), std::string::npos) << three.out;
  expect_clear_error(bad, {"AETHER_NUM_THREADS=zero", "from 1 to 1024"});
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
  if (aether::cuda_device_count() == 0)
    expect_one_line_error(run("train --model mlp --device cuda --epochs 1 --max-steps-per-epoch 1 --quiet"),
                          {"CUDA"});
  expect_one_line_error(run("train --model mlp --precision float16 --epochs 1 --max-steps-per-epoch 1 --quiet"),
                        {"float16", "not yet supported"});
  expect_one_line_error(run("train --model nope-net --epochs 1 --quiet"), {"nope-net"});
  // --resume honours --device and --precision too (it used to keep training on the CPU).
  TempDir tmp;
  const std::string ck = tmp.file("m.aether");
  ASSERT_EQ(run("train --model mlp --epochs 1 --max-steps-per-epoch 1 --quiet --save '" + ck + "'").code, 0);
  if (aether::cuda_device_count() == 0)
    expect_one_line_error(run("train --resume '" + ck + "' --device cuda --epochs 2 --max-steps-per-epoch 1 --quiet"),
                          {"CUDA"});
  expect_one_line_error(run("train --resume '" + ck + "' --precision float16 --epochs 2 --max-steps-per-epoch 1 --quiet"),
                        {"float16", "not yet supported"});
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

  // evaluate and predict take --device; one that is not there is a clear error, not a CPU run.
  expect_one_line_error(run("evaluate --checkpoint '" + ck + "' --device tpu"), {"tpu"});
  expect_one_line_error(run("predict --checkpoint '" + ck + "' --device tpu " + std::string(kFashionDir) +
                            "/t10k-images-idx3-ubyte.gz"),
                        {"tpu"});
  if (aether::cuda_device_count() == 0) {
    expect_one_line_error(run("evaluate --checkpoint '" + ck + "' --device cuda"), {"CUDA"});
    expect_one_line_error(run("predict --checkpoint '" + ck + "' --device cuda " + std::string(kFashionDir) +
                              "/t10k-images-idx3-ubyte.gz"),
                          {"CUDA"});
  }

  // A checkpoint with the wrong kind of input for predict: a clear error.
  expect_one_line_error(run("predict --checkpoint '" + ck + "' '" + std::string(kFashionDir) +
                            "/t10k-labels-idx1-ubyte.gz'"),
                        {"t10k-labels"});
}

TEST(Cli, ScheduleJsonTableAndDot) {
  const CliResult r = run("schedule bn-relu-train --batch 2 --json");
  ASSERT_EQ(r.code, 0) << r.out;
  expect_no_crash(r);
  const nlohmann::json j = nlohmann::json::parse(r.out);  // the whole output is one JSON object
  for (const char* key :
       {"kernel_count", "library_calls", "big_buffer_passes", "bytes_moved", "bytes_min", "kernels"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_GT(j.at("kernel_count").get<int>(), 0);
  EXPECT_EQ(j.at("library_calls").get<int>(), 0);
  // Reads x, dy (2*32*32*32 floats) and 4 (32) vectors; writes out, dx and 4 (32) vectors.
  EXPECT_EQ(j.at("bytes_min").get<int64_t>(), 2 * (2 * 65536 + 4 * 32) * 4);
  EXPECT_LE(j.at("bytes_min").get<int64_t>(), j.at("bytes_moved").get<int64_t>());

  TempDir tmp;
  const CliResult t = run("schedule conv-bn-relu-train --batch 2 --dot '" + tmp.file("k.dot") + "'");
  ASSERT_EQ(t.code, 0) << t.out;
  expect_no_crash(t);
  for (const char* part : {"generated kernels", "library calls      3", "bytes min", "Conv2dBwdWeight"})
    EXPECT_NE(t.out.find(part), std::string::npos) << part << " in:\n" << t.out;
  std::ifstream f(tmp.file("k.dot"));
  const std::string dot((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_EQ(dot.rfind("digraph", 0), 0u) << dot;
  EXPECT_NE(dot.find("shape=box"), std::string::npos) << dot;
  EXPECT_NE(dot.find("shape=ellipse"), std::string::npos) << dot;
  EXPECT_NE(dot.find("k0 -> k"), std::string::npos) << dot;  // the conv's output feeds other kernels
}

TEST(Cli, ScheduleUnknownGraph) {
  expect_one_line_error(run("schedule resnet-50"), {"resnet-50", "bn-relu-train", "cifarnet-step"});
  const CliResult b = run("schedule bn-relu-train --batch 0");
  EXPECT_NE(b.code, 0) << b.out;
  expect_no_crash(b);
}

// `aether bench`: each benchmark's JSON (timing keys, throughput, byte counts computed here from the
// shapes), --compare, and clear errors for an unknown benchmark or an option it does not take.
namespace {
nlohmann::json bench_json(const std::string& args) {
  const CliResult r = run("bench " + args + " --json");
  EXPECT_EQ(r.code, 0) << r.out;
  expect_no_crash(r);
  nlohmann::json j;
  EXPECT_NO_THROW(j = nlohmann::json::parse(r.out)) << r.out;  // the whole output is one JSON object
  return j;
}
void expect_timing(const nlohmann::json& j, int runs, const std::string& rate) {
  for (const char* key : {"median_ms", "min_ms", "max_ms", "runs"}) ASSERT_TRUE(j.contains(key)) << key << j;
  ASSERT_TRUE(j.contains(rate)) << rate << j;
  EXPECT_EQ(j.at("runs").get<int>(), runs);
  EXPECT_GT(j.at("min_ms").get<double>(), 0);
  EXPECT_LE(j.at("min_ms").get<double>(), j.at("median_ms").get<double>());
  EXPECT_LE(j.at("median_ms").get<double>(), j.at("max_ms").get<double>());
  EXPECT_GT(j.at(rate).get<double>(), 0);
}
}  // namespace

TEST(Cli, BenchBnReluJson) {
  setenv("AETHER_FUSE", "1", 1);  // the figures below are the fused schedule's (also in the .reference run)
  const nlohmann::json j = bench_json("bn-relu --shape 2,4,4,8 --runs 2");
  expect_timing(j, 2, "gb_per_s");
  // Reads x, dy (2*4*4*8 floats) and w, b, running mean, running var (8); writes out, dx and the
  // two new running stats, dw, db (8).
  EXPECT_EQ(j.at("bytes_min").get<int64_t>(), 2 * (2 * 256 + 4 * 8) * 4);
  EXPECT_GE(j.at("bytes_moved").get<int64_t>(), j.at("bytes_min").get<int64_t>());
  EXPECT_EQ(j.at("mode"), "fused");
  // gb_per_s is over the fused schedule's bytes and the median.
  EXPECT_NEAR(j.at("gb_per_s").get<double>(),
              j.at("bytes_moved").get<double>() / (j.at("median_ms").get<double>() * 1e-3) / 1e9,
              1e-6 * j.at("gb_per_s").get<double>());

  const nlohmann::json c = bench_json("bn-relu --shape 2,4,4,8 --runs 2 --warmup 1 --compare");
  expect_timing(c, 2, "gb_per_s");
  for (const char* key : {"fused_median_ms", "unfused_median_ms", "speedup"}) {
    ASSERT_TRUE(c.contains(key)) << key << c;
    EXPECT_GT(c.at(key).get<double>(), 0) << key;
  }
  EXPECT_NEAR(c.at("speedup").get<double>(),
              c.at("unfused_median_ms").get<double>() / c.at("fused_median_ms").get<double>(), 1e-9);

  const nlohmann::json u = bench_json("bn-relu --shape 2,4,4,8 --runs 1 --warmup 0 --unfused");
  expect_timing(u, 1, "gb_per_s");
  EXPECT_EQ(u.at("mode"), "unfused");
}

TEST(Cli, BenchReluBackwardConvStep) {
  const nlohmann::json r = bench_json("relu-backward --shape 2,3,4,5 --runs 3");
  expect_timing(r, 3, "gb_per_s");
  EXPECT_EQ(r.at("bytes").get<int64_t>(), 3 * 120 * 4);  // read out, dy; write dx
  EXPECT_EQ(r.at("kernel_count").get<int>(), 1);

  const nlohmann::json c = bench_json("conv --shape 1,4,4,2 --channels 3 --runs 1 --warmup 0");
  expect_timing(c, 1, "gflop_per_s");
  EXPECT_EQ(c.at("flop_per_pass").get<double>(), 2.0 * 1 * 4 * 4 * 3 * 2 * 9);
  expect_timing(c.at("forward_backward"), 1, "gflop_per_s");

  const nlohmann::json s = bench_json("step --model mlp --batch 2 --runs 1 --warmup 0");
  expect_timing(s, 1, "images_per_s");
  EXPECT_TRUE(std::isfinite(s.at("last_loss").get<double>()));
}

TEST(Cli, BenchErrors) {
  expect_one_line_error(run("bench warp-drive"),
                        {"warp-drive", "stream", "bn-relu", "relu-backward", "conv", "step"});
  expect_one_line_error(run("bench stream --channels 3"), {"--channels", "stream"});
  expect_one_line_error(run("bench bn-relu --shape 2,4,4"), {"--shape", "2,4,4"});
  expect_one_line_error(run("bench bn-relu --compare --unfused"), {"--compare"});
  const CliResult r = run("bench bn-relu --runs 0");
  EXPECT_NE(r.code, 0) << r.out;
  expect_no_crash(r);
}
