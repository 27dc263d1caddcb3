// Tests of the `aether` command-line program, run as a child process (its path comes from CMake
// as AETHER_CLI_PATH): exit codes and messages for bad input (one clear line, never a stack
// trace or "terminate called"), --version, devices, summary, and a real mini training run on
// Fashion-MNIST followed by evaluate and predict on its checkpoint (skipped without the data).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <set>
#include <string>
#include <tuple>
#include <utility>

#include "aether/backend/cuda.h"
#include "aether/core/random.h"
#include "aether/data/readers.h"
#include "aether/model/model.h"
#include "aether/model/presets.h"
#include "cli_util.h"
#include "data/fixtures.h"
#include "io/checkpoint.h"

namespace fs = std::filesystem;
using namespace cli_util;

namespace {

const char* kFashionDir = "/usr/share/datasets/fashion-mnist";

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
  const CliResult bad = run("demo --steps 1");
  const CliResult bad_summary = run("summary --model mlp"), help = run("--help");
  unsetenv("AETHER_NUM_THREADS");
  EXPECT_NE(three.out.find(", 3 threads"), std::string::npos) << three.out;
  // A bad value is the environment's error before the command runs, whatever the command (it was
  // named after the first call that read the configuration, or not noticed by commands that did not).
  expect_one_line_error(bad, {"environment: AETHER_NUM_THREADS=zero", "from 1 to 1024"});
  expect_one_line_error(bad_summary, {"environment: AETHER_NUM_THREADS=zero"});
  EXPECT_EQ(bad.code, 1);
  EXPECT_EQ(help.code, 0) << help.out;  // --help still helps
}

// AETHER_CPU_ISA caps generated kernels and oneDNN alike: under avx2 neither uses AVX-512 or
// anything past the AVX2 level (on an AVX-512 CPU this is what shows the cap works), under avx512
// nothing uses AMX, the cap is part of the kernel cache's key (the
// same kernel is a different object under another cap, on every CPU), and a bad value is an error.
TEST(Cli, CpuIsaCapsKernelsAndOneDnn) {
  TempDir tmp;
  auto cached_objects = [&](const std::string& dir) {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir))
      if (e.path().extension() == ".so") names.insert(e.path().filename().string());
    return names;
  };
  const std::string bench = "bench relu-backward --shape 2,4,4,8 --runs 1 --warmup 0";
  setenv("AETHER_CPU_ISA", "avx2", 1);
  const CliResult avx2 = run("devices");
  setenv("AETHER_CACHE_DIR", tmp.file("avx2").c_str(), 1);
  const CliResult avx2_bench = run(bench);
  setenv("AETHER_CPU_ISA", "avx512", 1);
  setenv("AETHER_CACHE_DIR", tmp.file("avx512").c_str(), 1);  // (devices compiles a probe kernel)
  const CliResult avx512 = run("devices");
  setenv("AETHER_CPU_ISA", "Native", 1);
  setenv("AETHER_CACHE_DIR", tmp.file("native").c_str(), 1);
  const CliResult native_bench = run(bench);
  setenv("AETHER_CPU_ISA", "sse", 1);
  const CliResult bad = run("demo --steps 1"), bad_devices = run("devices");
  unsetenv("AETHER_CPU_ISA");
  unsetenv("AETHER_CACHE_DIR");
  EXPECT_EQ(avx2.code, 0) << avx2.out;
  EXPECT_NE(avx2.out.find("AETHER_CPU_ISA=avx2): generated kernels __AVX2__"), std::string::npos) << avx2.out;
  EXPECT_EQ(avx2.out.find("AVX512"), std::string::npos) << avx2.out;
  // Nor what newer CPUs add beyond AVX2 (a Sapphire Rapids has AMX and AVX-VNNI): an AVX2 CPU's level.
  EXPECT_EQ(avx2.out.find("AMX"), std::string::npos) << avx2.out;
  EXPECT_EQ(avx2.out.find("VNNI"), std::string::npos) << avx2.out;
  EXPECT_EQ(avx512.code, 0) << avx512.out;
  EXPECT_EQ(avx512.out.find("AMX"), std::string::npos) << avx512.out;  // the avx512 cap: no AMX
  EXPECT_EQ(avx2.out.find("oneDNN avx512"), std::string::npos) << avx2.out;
  EXPECT_NE(avx2.out.find("oneDNN avx2"), std::string::npos) << avx2.out;
  ASSERT_EQ(avx2_bench.code, 0) << avx2_bench.out;
  ASSERT_EQ(native_bench.code, 0) << native_bench.out;
  const auto a = cached_objects(tmp.file("avx2")), n = cached_objects(tmp.file("native"));
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a.size(), n.size());
  for (const auto& name : a) EXPECT_EQ(n.count(name), 0u) << name << " has the same key under both caps";
  expect_clear_error(bad, {"AETHER_CPU_ISA=sse", "native, avx2 or avx512"});
  expect_clear_error(bad_devices, {"AETHER_CPU_ISA=sse", "native, avx2 or avx512"});
}

// The --model help of train, summary and bench lists every preset (from preset_names()).
TEST(Cli, HelpListsEveryPreset) {
  for (const char* command : {"train --help", "summary --help", "bench --help"}) {
    const CliResult r = run(command);
    EXPECT_EQ(r.code, 0) << command << "\n" << r.out;
    for (const std::string& name : aether::preset_names())
      EXPECT_NE(r.out.find(name), std::string::npos) << command << " does not name " << name << ":\n"
                                                     << r.out;
  }
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
  EXPECT_EQ(m.out.find("Frozen parameters"), std::string::npos) << m.out;  // none frozen
  // airbench94's frozen whitening filter (24 x 3 x 2 x 2) and BatchNorm weights (2 x (64 + 256 + 256))
  // are not trainable: 1,972,792 parameters in all.
  const CliResult ab = run("summary --model airbench94");
  EXPECT_EQ(ab.code, 0) << ab.out;
  EXPECT_NE(ab.out.find("Trainable parameters: 1971352\nFrozen parameters: 1440\n"), std::string::npos)
      << ab.out;
  // ResNet-20 with projection shortcuts: 269,722 parameters (He et al.'s 0.27M) + two conv1x1 + BN
  // shortcuts (16*32 + 2*32 + 32*64 + 2*64 = 2,752); without --dataset, CIFAR-10's 32x32x3 input.
  const CliResult rn = run("summary --model resnet20");
  EXPECT_EQ(rn.code, 0) << rn.out;
  EXPECT_NE(rn.out.find("resnet20 for cifar-10 (input (32, 32, 3))"), std::string::npos) << rn.out;
  EXPECT_NE(rn.out.find("Trainable parameters: 272474\n"), std::string::npos) << rn.out;
  EXPECT_NE(rn.out.find("Residual(Sequential + Sequential)  "), std::string::npos) << rn.out;
  EXPECT_NE(rn.out.find("(1, 8, 8, 64)"), std::string::npos) << rn.out;
}

TEST(Cli, UnknownPreset) {
  expect_one_line_error(run("summary --model resnet9000"), {"resnet9000", "mlp", "lenet", "cifarnet"});
}

// Exit status 2 for a usage error (CLI11's codes were 106 to 109 here), 1 for every other error.
TEST(Cli, UnknownSubcommandOrOption) {
  for (const char* usage : {"fly", "summary --bogus", "train --epochs", "evaluate",
                            "summary --model mlp --checkpoint m.aether", "train --quiet=maybe"}) {
    const CliResult r = run(usage);
    EXPECT_EQ(r.code, 2) << usage << ": " << r.out;
    expect_no_crash(r);
  }
  expect_one_line_error(run("fly"), {"unknown command 'fly'; the commands: demo, devices, train, evaluate"});
  expect_one_line_error(run(""), {"no command given; aether --help lists them"});
  EXPECT_EQ(run("summary --model nope").code, 1);
  EXPECT_EQ(run("--help").code, 0);
}

TEST(Cli, MissingDataDir) {
  // The message lists every directory tried, one per line, and how to get the data.
  expect_clear_error(run("train --dataset fashion-mnist --model mlp --data-dir /nonexistent"),
                     {"fashion-mnist", "/nonexistent", "--data-dir"}, true);
  expect_clear_error(run("train --dataset cifar10 --data-dir /nonexistent"), {"cifar-10", "/nonexistent"},
                     true);
  // Without --dataset, a CIFAR-10 preset trains on CIFAR-10 (not the default fashion-mnist).
  for (const char* model : {"resnet20", "airbench94"})
    expect_clear_error(run(std::string("train --model ") + model + " --data-dir /nonexistent"),
                       {"cifar-10", "/nonexistent"}, true);
  expect_clear_error(run("data verify fashion-mnist --data-dir /nonexistent"), {"/nonexistent"}, true);
  expect_clear_error(run("evaluate --checkpoint /nonexistent/m.aether --data-dir /nonexistent"),
                     {"/nonexistent"}, true);
  expect_one_line_error(run("train --dataset mnist-ish --data-dir /nonexistent"), {"mnist-ish"});
}

// A checkpoint written through the API (Python's or C++'s Model.save) records no data set: evaluate
// asks for --dataset (it read 'data set: unknown name "", expected fashion-mnist, ...'), and train
// --resume says it has no loader settings to continue with (it read "[json.exception.out_of_range.403]
// key 'loader' not found"); a record of the wrong types is an error naming the file.
TEST(Cli, ApiCheckpointsAreAskedForWhatTheyDoNotRecord) {
  TempDir tmp;
  const std::string ck = tmp.file("api.aether");
  aether::Preset p = aether::make_preset("mlp", {28, 28, 1}, 10);
  aether::Model m;
  for (auto& l : p.network->children()) m.add(l.second);
  m.configure(p.config).finalize({28, 28, 1});
  m.save(ck);
  expect_one_line_error(run("evaluate --checkpoint '" + ck + "'"),
                        {"evaluate: " + ck + " does not record the data set it was trained on",
                         "pass --dataset fashion-mnist, cifar10 or image-folder"});
  const CliResult s = run("summary --checkpoint '" + ck + "'");
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find(ck + ": a model, trained 0 epochs (0 steps), precision float32\n"), std::string::npos)
      << s.out;
  expect_one_line_error(run("train --resume '" + ck + "' --epochs 2 --quiet"),
                        {"train: --resume " + ck + " was not written by aether train",
                         "ae.Model.load(path).train(X, y, epochs=N)"});
  m.set_info(R"({"model": "mlp", "dataset": "fashion-mnist", "epochs": "two", "loader": {"batch_size": 8}})");
  m.save(ck);
  expect_one_line_error(run("train --resume '" + ck + "' --quiet"),
                        {"train: --resume " + ck +
                         ": its training record (the model's info) is not what aether "
                         "train writes: [json.exception.type_error.302]"});
  m.set_info(R"({"model": ["mlp"], "dataset": 7})");  // names of other types are no names
  m.save(ck);
  expect_one_line_error(run("evaluate --checkpoint '" + ck + "'"), {"does not record the data set"});
  EXPECT_NE(run("summary --checkpoint '" + ck + "'").out.find(ck + ": a model, trained 0 epochs"),
            std::string::npos);
}

TEST(Cli, NotACheckpoint) {
  TempDir tmp;
  const std::string f = tmp.file("notes.txt");
  std::ofstream(f) << "just some text, not a checkpoint\n";
  expect_one_line_error(run("evaluate --checkpoint '" + f + "'"), {f});
  expect_one_line_error(run("evaluate --checkpoint '" + tmp.file("missing.aether") + "'"),
                        {"missing.aether"});
  expect_one_line_error(run("predict --checkpoint '" + f + "' /dev/null"), {f});
}

TEST(Cli, BadDevicePrecisionAndResume) {
  if (!fs::exists(fs::path(kFashionDir) / "train-images-idx3-ubyte.gz")) GTEST_SKIP() << "no " << kFashionDir;
  if (aether::cuda_device_count() == 0)
    expect_one_line_error(run("train --model mlp --device cuda --epochs 1 --max-steps-per-epoch 1 --quiet"),
                          {"CUDA"});
  expect_one_line_error(
      run("train --model mlp --precision float8 --epochs 1 --max-steps-per-epoch 1 --quiet"),
      {"float8", "unknown precision"});
  expect_one_line_error(run("train --model nope-net --epochs 1 --quiet"), {"nope-net"});
  // --resume honours --device and --precision too (it used to keep training on the CPU).
  TempDir tmp;
  const std::string ck = tmp.file("m.aether");
  ASSERT_EQ(run("train --model mlp --epochs 1 --max-steps-per-epoch 1 --quiet --save '" + ck + "'").code, 0);
  if (aether::cuda_device_count() == 0)
    expect_one_line_error(
        run("train --resume '" + ck + "' --device cuda --epochs 2 --max-steps-per-epoch 1 --quiet"),
        {"CUDA"});
  expect_one_line_error(
      run("train --resume '" + ck + "' --precision half --epochs 2 --max-steps-per-epoch 1 --quiet"),
      {"half", "unknown precision"});
  // A float32 checkpoint resumes in bfloat16 and records the precision it trained in last.
  const std::string ck2 = tmp.file("m2.aether");
  ASSERT_EQ(run("train --resume '" + ck +
                "' --precision bf16 --epochs 2 --max-steps-per-epoch 1 --quiet --save '" + ck2 + "'")
                .code,
            0);
  EXPECT_EQ(aether::Model::load(ck2).precision(), "bfloat16");
  // The resumed run's --epochs is the checkpoint's run now (it kept the first run's 1: "trained 2 of 1").
  expect_one_line_error(run("train --resume '" + ck2 + "' --quiet"),
                        {"has done 2 epochs, its run was for 2"});
  // summary --checkpoint: the saved network, what it was trained on, for how long and in which precision.
  const CliResult s = run("summary --checkpoint '" + ck2 + "'");
  EXPECT_EQ(s.code, 0) << s.out;
  EXPECT_NE(s.out.find(ck2 + ": mlp on fashion-mnist, trained 2 of 2 epochs (2 steps), precision bfloat16\n"),
            std::string::npos)
      << s.out;
  EXPECT_NE(s.out.find("Linear(784 -> 512)"), std::string::npos) << s.out;
  EXPECT_NE(s.out.find("Trainable parameters: 535818\n"), std::string::npos) << s.out;
  expect_one_line_error(run("summary --checkpoint '" + ck2 + "' --model lenet"), {"--model", "--checkpoint"});
  expect_one_line_error(run("summary --checkpoint '" + tmp.file("none.aether") + "'"), {"none.aether"});
}

TEST(Cli, MiniTrainingEvaluatePredict) {
  if (!fs::exists(fs::path(kFashionDir) / "train-images-idx3-ubyte.gz")) GTEST_SKIP() << "no " << kFashionDir;
  TempDir tmp;
  const std::string ck = tmp.file("m.aether"), js = tmp.file("m.json");
  const CliResult t =
      run("train --dataset fashion-mnist --model mlp --epochs 1 --max-steps-per-epoch 3 --batch-size 32 "
          "--save '" +
          ck + "' --metrics-json '" + js + "' --quiet");
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
  // Each class's accuracy and the confusion matrix ([label][predicted]): its rows hold each class's
  // 1,000 test images, its diagonal the accuracy.
  EXPECT_NE(e.out.find("per class: T-shirt/top "), std::string::npos) << e.out;
  ASSERT_EQ(ej.at("class_names").size(), 10u);
  EXPECT_EQ(ej.at("class_names")[9], "Ankle boot");
  const auto confusion = ej.at("confusion_matrix").get<std::vector<std::vector<int64_t>>>();
  ASSERT_EQ(confusion.size(), 10u);
  int64_t diagonal = 0;
  for (size_t c = 0; c < 10; ++c) {
    ASSERT_EQ(confusion[c].size(), 10u);
    EXPECT_EQ(std::accumulate(confusion[c].begin(), confusion[c].end(), int64_t(0)), 1000) << "class " << c;
    diagonal += confusion[c][c];
    EXPECT_NEAR(ej.at("class_accuracy").at(ej.at("class_names")[c].get<std::string>()).get<double>(),
                double(confusion[c][c]) / 1000, 1e-12);
  }
  EXPECT_NEAR(double(diagonal) / 10000, ej.at("test_accuracy").get<double>(), 1e-6);

  const CliResult p = run("predict --checkpoint '" + ck + "' " + std::string(kFashionDir) +
                          "/t10k-images-idx3-ubyte.gz --limit 3");
  ASSERT_EQ(p.code, 0) << p.out;
  expect_no_crash(p);
  int lines = 0;
  for (char ch : p.out) lines += ch == '\n';
  EXPECT_EQ(lines, 3) << p.out;
  EXPECT_EQ(p.out.rfind("0\tclass ", 0), 0u) << p.out;
  EXPECT_NE(p.out.find("2\tclass "), std::string::npos) << p.out;
  // Each line ends with its class's name, which train saved with the model.
  const std::vector<std::string> names =
      aether::data::load_fashion_mnist(kFashionDir, aether::data::Split::test).class_names;
  const std::string line = p.out.substr(0, p.out.find('\n'));
  const int c = std::stoi(line.substr(line.find("class ") + 6));
  EXPECT_EQ(line.substr(line.rfind('\t') + 1), names.at(size_t(c))) << line;
  // predict --precision: a line per image in bfloat16 too (an mlp of 3 steps: its classes may differ
  // from float32's where the top two probabilities are close), and a clear error for an unknown one.
  const CliResult pb = run("predict --checkpoint '" + ck + "' " + std::string(kFashionDir) +
                           "/t10k-images-idx3-ubyte.gz --limit 3 --precision bf16");
  ASSERT_EQ(pb.code, 0) << pb.out;
  EXPECT_EQ(std::count(pb.out.begin(), pb.out.end(), '\n'), 3) << pb.out;
  expect_one_line_error(run("predict --checkpoint '" + ck + "' " + std::string(kFashionDir) +
                            "/t10k-images-idx3-ubyte.gz --precision float8"),
                        {"float8", "unknown precision"});

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
  expect_one_line_error(
      run("predict --checkpoint '" + ck + "' '" + std::string(kFashionDir) + "/t10k-labels-idx1-ubyte.gz'"),
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

// ---------------------------------------------------------------------------------------------
// Hostile arguments (issue 13): no run loses a checkpoint, every value is checked as given and
// before any data is read, and evaluate / predict never report non-finite numbers as results.
// These runs use a tiny Fashion-MNIST-style data set written here (8 images per split).
namespace {
namespace tu = aether::data::test_util;

// `aether train` on the tiny set in `dir`, one step per epoch; tiny_train: a new MLP.
std::string tiny_run(const fs::path& dir, const std::string& more) {
  return "train --dataset fashion-mnist --data-dir '" + dir.string() + "' --max-steps-per-epoch 1 --quiet " +
         more;
}
std::string tiny_train(const fs::path& dir, const std::string& more) {
  return tiny_run(dir, "--model mlp --batch-size 4 " + more);
}

std::string file_bytes(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

// No run of more than 40 digits (what is echoed of a given value): no number, DBL_MAX say,
// printed in full.
void expect_no_long_number(const CliResult& r) {
  size_t digits = 0;
  for (char c : r.out) {
    digits = (c >= '0' && c <= '9') ? digits + 1 : 0;
    ASSERT_LE(digits, 40u) << r.out;
  }
}
}  // namespace

TEST(CliArgs, SaveRefusesToReplaceAnExistingFile) {
  TempDir tmp;
  write_tiny_fashion(tmp.path / "data", 28, 28);
  const std::string ck = tmp.file("good.aether"), other = tmp.file("other.aether");
  const CliResult first = run(tiny_train(tmp.path / "data", "--epochs 1 --save '" + ck + "'"));
  ASSERT_EQ(first.code, 0) << first.out;
  const std::string good = file_bytes(ck);
  ASSERT_FALSE(good.empty());
  // A new run onto it: refused before any training (one line, no banner), the file untouched.
  expect_one_line_error(run(tiny_train(tmp.path / "data", "--epochs 1 --save '" + ck + "'")),
                        {ck, "--overwrite"});
  EXPECT_TRUE(file_bytes(ck) == good);
  // Continuing it in place is what --resume is for; saving a resumed run over another file is not.
  std::ofstream(other) << "someone else's checkpoint";
  expect_one_line_error(
      run(tiny_run(tmp.path / "data", "--resume '" + ck + "' --epochs 2 --save '" + other + "'")),
      {other, "--overwrite"});
  EXPECT_EQ(file_bytes(other), "someone else's checkpoint");
  EXPECT_TRUE(file_bytes(ck) == good);
  const CliResult resumed =
      run(tiny_run(tmp.path / "data", "--resume '" + ck + "' --epochs 2 --save '" + ck + "'"));
  EXPECT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_EQ(aether::read_checkpoint_manifest(ck).at("training_state").at("epoch"), 2);
  // --overwrite lets a new run replace it.
  const CliResult over = run(tiny_train(tmp.path / "data", "--epochs 1 --overwrite --save '" + ck + "'"));
  EXPECT_EQ(over.code, 0) << over.out;
  EXPECT_EQ(aether::read_checkpoint_manifest(ck).at("training_state").at("epoch"), 1);
}

TEST(CliArgs, DivergingRunKeepsTheGoodCheckpoint) {
  // The run of issue 13: a learning rate that blows the weights up. The epoch's numbers are not
  // finite, so the run stops with an error and the good checkpoint it would have replaced stays.
  TempDir tmp;
  write_tiny_fashion(tmp.path / "data", 28, 28);
  const std::string ck = tmp.file("good.aether"), js = tmp.file("m.json");
  ASSERT_EQ(run(tiny_train(tmp.path / "data", "--epochs 1 --save '" + ck + "'")).code, 0);
  auto expect_kept = [&](const CliResult& r, const std::string& good) {
    EXPECT_NE(r.code, 0) << r.out;
    expect_no_crash(r);
    EXPECT_NE(r.out.find("aether: error: "), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("saved "), std::string::npos) << r.out;
    EXPECT_TRUE(file_bytes(ck) == good) << "the diverged model was saved over the good checkpoint";
    EXPECT_FALSE(fs::exists(js));
  };
  // A new run told to replace it.
  const std::string good = file_bytes(ck);
  expect_kept(run(tiny_train(tmp.path / "data", "--lr 1e30 --optimizer sgd --epochs 3 --overwrite --save '" +
                                                    ck + "' --metrics-json '" + js + "'")),
              good);
  // A resumed run saving in place: the same checkpoint (finite weights) with a peak learning
  // rate of 1e30 in its configuration.
  aether::Checkpoint c = aether::load_checkpoint(ck);
  c.manifest_extra.at("config")["lr"] = 1e30;
  aether::save_checkpoint(ck, c);
  const std::string hot = file_bytes(ck);
  expect_kept(run(tiny_run(tmp.path / "data", "--resume '" + ck + "' --epochs 3 --save '" + ck +
                                                  "' --metrics-json '" + js + "'")),
              hot);
}

TEST(CliArgs, OutputPathsAreCheckedBeforeTraining) {
  // Each is refused in one line, before the data is read or an epoch is trained (the banner and
  // an epoch would come first otherwise), and nothing is written.
  TempDir tmp;
  write_tiny_fashion(tmp.path / "data", 28, 28);
  const std::string data = (tmp.path / "data").string();
  std::ofstream(tmp.file("plain.txt")) << "a file, not a directory";
  fs::create_directories(tmp.path / "adir");
  const std::string missing = tmp.file("missing/m.aether"), under_file = tmp.file("plain.txt/m.aether");
  for (const char* opt : {"--save", "--metrics-json"}) {
    const std::string o = opt;
    expect_one_line_error(run(tiny_train(data, "--epochs 1 " + o + " '" + missing + "'")),
                          {o, missing, "does not exist"});
    expect_one_line_error(run(tiny_train(data, "--epochs 1 " + o + " '" + tmp.file("adir") + "'")),
                          {o, tmp.file("adir"), "is a directory"});
    expect_one_line_error(run(tiny_train(data, "--epochs 1 " + o + " '" + under_file + "'")),
                          {o, "is not a directory"});
  }
  // A name too long for the directory (with the temporary file's suffix).
  expect_one_line_error(run(tiny_train(data, "--epochs 1 --save '" + tmp.file(std::string(250, 'a')) + "'")),
                        {"--save", "too long"});
  // The metrics must not land on the checkpoint.
  expect_one_line_error(run(tiny_train(data, "--epochs 1 --save '" + tmp.file("m.aether") +
                                                 "' --metrics-json '" + tmp.file("m.aether") + "'")),
                        {"--metrics-json", "--save"});
  if (::geteuid() != 0) {  // root writes anywhere
    fs::create_directories(tmp.path / "locked");
    fs::permissions(tmp.path / "locked", fs::perms::owner_read | fs::perms::owner_exec);
    expect_one_line_error(run(tiny_train(data, "--epochs 1 --save '" + tmp.file("locked/m.aether") + "'")),
                          {"--save", "not writable"});
    fs::permissions(tmp.path / "locked", fs::perms::owner_all);
  }
  // evaluate --metrics-json and schedule --dot are checked before any work too.
  expect_one_line_error(
      run("evaluate --checkpoint /nonexistent/c.aether --metrics-json '" + tmp.file("adir") + "'"),
      {"--metrics-json", "is a directory"});
  expect_one_line_error(run("schedule bn-relu-train --batch 2 --dot '" + missing + "'"),
                        {"--dot", "does not exist"});
  EXPECT_FALSE(fs::exists(tmp.file("m.aether")));
  EXPECT_TRUE(fs::is_empty(tmp.path / "adir"));
}

TEST(CliArgs, NumbersAreCheckedAsGiven) {
  // Given values are checked, never replaced by a default: lr 0 or nan, epochs 0 and the like
  // used to mean "the preset's"; a huge --epochs was clamped; "abc" was "not in range" and the
  // bounds were printed with DBL_MAX in full. The data directory does not exist: the check
  // comes first.
  const std::string train = "train --model mlp --quiet --data-dir /nonexistent ";
  const std::string huge = "99999999999999999999999999";
  const std::vector<std::pair<std::string, std::vector<std::string>>> cases = {
      {train + "--lr nan", {"--lr", "'nan'", "not a finite number"}},
      {train + "--lr inf", {"--lr", "'inf'", "not a finite number"}},
      {train + "--lr 0", {"--lr", "'0'", "> 0"}},
      {train + "--lr -0.1", {"--lr", "'-0.1'", "> 0"}},
      {train + "--lr abc", {"--lr", "'abc'", "not a number"}},
      {train + "--lr 1e999", {"--lr", "'1e999'", "too large"}},
      {train + "--epochs 0", {"--epochs", "'0'", "at least 1"}},
      {train + "--epochs -2", {"--epochs", "'-2'", "at least 1"}},
      {train + "--epochs 1000001", {"--epochs", "'1000001'", "at most 1000000"}},
      {train + "--epochs " + huge, {"--epochs", huge, "too large"}},
      {train + "--epochs abc", {"--epochs", "'abc'", "not an integer"}},
      {train + "--epochs 1.5", {"--epochs", "'1.5'", "not an integer"}},
      {train + "--epochs +-1", {"--epochs", "'+-1'", "not an integer"}},
      {train + "--batch-size 0", {"--batch-size", "'0'", "at least 1"}},
      {train + "--batch-size 65537", {"--batch-size", "'65537'", "at most 65536"}},
      {train + "--max-steps-per-epoch -1", {"--max-steps-per-epoch", "'-1'", "at least 1"}},
      {train + "--max-steps-per-epoch 0", {"--max-steps-per-epoch", "'0'", "at least 1"}},
      {train + "--seed -1", {"--seed", "'-1'", "not a non-negative integer"}},
      {train + "--seed " + huge, {"--seed", huge, "too large"}},
      {train + "--optimizer rmsprop", {"--optimizer", "'rmsprop'", "sgd, adam or adamw"}},
      {train + "--validation-split 0", {"--validation-split", "'0'", "> 0"}},
      {train + "--validation-split 1", {"--validation-split must be below 1, got 1"}},
      {train + "--validation-split x", {"--validation-split", "'x'", "not a number"}},
      {train + "--validation-split 0.1 --early-stopping -1", {"--early-stopping", "'-1'", "at least 0"}},
      {train + "--validation-split 0.1 --reduce-lr-on-plateau x",
       {"--reduce-lr-on-plateau", "'x'", "not an integer"}},
      {train + "--validation-split 0.1 --reduce-lr-on-plateau 1 --reduce-lr-factor 0",
       {"--reduce-lr-factor", "'0'", "> 0"}},
      {train + "--epochs " + std::string(100, '7'), {"--epochs", "'" + std::string(40, '7') + "...'"}},
      {"predict --checkpoint /nonexistent/c.aether x --limit -1", {"--limit", "'-1'", "at least 0"}},
      {"predict --checkpoint /nonexistent/c.aether x --limit 1e3", {"--limit", "'1e3'", "not an integer"}},
      {"schedule bn-relu-train --batch 0", {"--batch", "'0'", "at least 1"}},
      {"schedule bn-relu-train --batch abc", {"--batch", "'abc'", "not an integer"}},
      {"schedule bn-relu-train --batch 65537", {"--batch", "at most 65536"}},
      {"bench bn-relu --runs 0", {"--runs", "'0'", "at least 1"}},
      {"bench bn-relu --warmup -1", {"--warmup", "'-1'", "at least 0"}},
      {"bench bn-relu --threads x", {"--threads", "'x'", "not an integer"}},
      {"bench conv --channels 0", {"--channels", "'0'", "at least 1"}},
      {"bench step --batch " + huge, {"--batch", huge, "too large"}},
      {"bench stream --mib 0", {"--mib", "'0'", "at least 1"}},
      {"bench bn-relu --shape 999999,999999,999999,9", {"--shape", "too large"}},
      {"bench conv --shape 999999999999,999999999999,999999999999,999999999999", {"--shape", "too large"}},
      {"bench stream --mib 4097", {"--mib", "'4097'", "at most 4096"}},
      {"demo --lr nan", {"--lr", "'nan'", "not a finite number"}},
      {"demo --steps 0", {"--steps", "'0'", "at least 1"}},
      {"demo --hidden 1e9", {"--hidden", "'1e9'", "not an integer"}},
  };
  for (const auto& [args, parts] : cases) {
    SCOPED_TRACE(args);
    const CliResult r = run(args);
    expect_one_line_error(r, parts);
    expect_no_long_number(r);
    EXPECT_LT(r.out.size(), 200u) << r.out;
  }
  // CLI11's own errors (a missing value, an unknown option) are one line too.
  expect_one_line_error(run("train --epochs"), {"--epochs"});
  expect_one_line_error(run("train --bogus"), {"--bogus"});
}

TEST(CliArgs, ResumeRejectsWhatTheCheckpointFixes) {
  TempDir tmp;
  write_tiny_fashion(tmp.path / "data", 28, 28);
  const std::string data = (tmp.path / "data").string(), ck = tmp.file("m.aether");
  ASSERT_EQ(run(tiny_train(data, "--epochs 1 --save '" + ck + "'")).code, 0);
  const std::string resume = "--resume '" + ck + "' --epochs 2 ";
  for (const auto& [opt, what] :
       std::vector<std::pair<std::string, std::string>>{{"--model lenet", "the model"},
                                                        {"--lr 0.1", "the learning rate"},
                                                        {"--optimizer sgd", "the optimizer"},
                                                        {"--batch-size 8", "the batch size"},
                                                        {"--seed 7", "the random state"}}) {
    const std::string name = opt.substr(0, opt.find(' '));
    expect_one_line_error(run(tiny_run(data, resume + opt)),
                          {name + " cannot be combined with --resume", what});
  }
  // A checkpoint whose run is complete has nothing to train without a larger --epochs.
  expect_one_line_error(run(tiny_run(data, "--resume '" + ck + "'")), {ck, "nothing to train", "--epochs"});
  expect_one_line_error(run(tiny_run(data, "--resume '" + ck + "' --epochs 1")), {ck, "nothing to train"});
  // What the resumed run honours is still taken.
  const CliResult r = run(tiny_run(
      data, "--resume '" + ck + "' --epochs 2 --device cpu --precision float32 --save '" + ck + "'"));
  EXPECT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(aether::read_checkpoint_manifest(ck).at("training_state").at("step"), 2);
}

TEST(CliArgs, ValidationSplitAndEarlyStopping) {
  // 8 images labelled 0..7: --validation-split 0.25 validates on the last two, whose classes (6, 7)
  // the six training images never show, so the validation loss rises as training goes on and
  // --early-stopping 0 stops at the first epoch that does not improve on the best.
  TempDir tmp;
  write_tiny_fashion(tmp.path / "data", 28, 28);
  const std::string data = (tmp.path / "data").string(), ck = tmp.file("m.aether"), js = tmp.file("m.json");
  const CliResult r = run(tiny_train(data, "--epochs 20 --validation-split 0.25 --early-stopping 0 --save '" +
                                               ck + "' --metrics-json '" + js + "'"));
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(6 train / 2 validation / 8 test images"), std::string::npos) << r.out;
  nlohmann::json j;
  std::ifstream(js) >> j;
  EXPECT_EQ(j.at("validation_split"), 0.25);
  const auto& es = j.at("early_stopping");
  const auto& h = j.at("history");
  ASSERT_TRUE(es.at("stopped_early").get<bool>()) << j.dump();
  EXPECT_TRUE(es.at("restored_best").get<bool>());
  const int best = es.at("best_epoch");  // 1-based, as the history's epochs
  EXPECT_EQ(int(h.size()), best + 1);    // patience 0 acts as 1
  EXPECT_LT(h.size(), 20u);
  for (const auto& e : h)
    EXPECT_GE(e.at("val_loss").get<double>(), h[size_t(best - 1)].at("val_loss").get<double>());
  // The saved model is the best epoch's: evaluating it on the test set gives the run's test result.
  const CliResult e = run("evaluate --checkpoint '" + ck + "' --data-dir '" + data + "' --metrics-json '" +
                          tmp.file("e.json") + "'");
  ASSERT_EQ(e.code, 0) << e.out;
  nlohmann::json ej;
  std::ifstream(tmp.file("e.json")) >> ej;
  EXPECT_EQ(ej.at("test_loss").get<double>(), j.at("test_loss").get<double>());
  EXPECT_EQ(ej.at("samples"), 8);

  // A resumed run keeps the checkpoint's split; --early-stopping never chooses by the test set.
  expect_one_line_error(run(tiny_run(data, "--resume '" + ck + "' --epochs 30 --validation-split 0.5")),
                        {"--validation-split cannot be combined with --resume", "the validation split"});
  expect_one_line_error(run(tiny_train(data, "--epochs 2 --early-stopping 1")),
                        {"--early-stopping needs --validation-split", "the test set must not choose it"});
  const std::string plain = tmp.file("plain.aether");
  ASSERT_EQ(run(tiny_train(data, "--epochs 1 --save '" + plain + "'")).code, 0);
  expect_one_line_error(run(tiny_run(data, "--resume '" + plain + "' --epochs 2 --early-stopping 1")),
                        {"--early-stopping needs a validation split", "trained without --validation-split"});
  const CliResult resumed = run(tiny_run(data, "--resume '" + ck + "' --epochs 30 --early-stopping 3"));
  ASSERT_EQ(resumed.code, 0) << resumed.out;
  EXPECT_NE(resumed.out.find("/ 2 validation /"), std::string::npos) << resumed.out;
}

TEST(CliArgs, ReduceLrOnPlateau) {
  // As above, the validation loss of the last two images rises: --reduce-lr-on-plateau 0 halves
  // (--reduce-lr-factor 0.5) the scheduled learning rate after each epoch that does not improve.
  TempDir tmp;
  write_tiny_fashion(tmp.path / "data", 28, 28);
  const std::string data = (tmp.path / "data").string();
  auto history = [&](const std::string& opts) {
    const std::string js = tmp.file("m.json");
    const CliResult r =
        run(tiny_train(data, "--epochs 5 --validation-split 0.25 --metrics-json '" + js + "' " + opts));
    EXPECT_EQ(r.code, 0) << r.out;
    nlohmann::json j;
    std::ifstream(js) >> j;
    return j.at("history");
  };
  const nlohmann::json plain = history(""),
                       reduced = history("--reduce-lr-on-plateau 0 --reduce-lr-factor 0.5");
  ASSERT_EQ(plain.size(), 5u);
  ASSERT_EQ(reduced.size(), 5u);
  double best = INFINITY, factor = 1;
  int reductions = 0;
  for (size_t e = 0; e < 5; ++e) {
    const auto& h = reduced[e];
    // The cosine schedule's value (the run without) times the factor so far.
    EXPECT_DOUBLE_EQ(h.at("lr").get<double>(), plain[e].at("lr").get<double>() * factor) << e;
    const double v = h.at("val_loss");
    const bool worse = v >= best;
    best = std::min(best, v);
    EXPECT_EQ(h.at("lr_reduced").get<bool>(), worse) << e;
    if (worse) factor *= 0.5, ++reductions;
  }
  EXPECT_GE(reductions, 1);
  expect_one_line_error(run(tiny_train(data, "--epochs 2 --reduce-lr-on-plateau 1")),
                        {"--reduce-lr-on-plateau needs --validation-split"});
  expect_one_line_error(run(tiny_train(data, "--epochs 2 --validation-split 0.25 --reduce-lr-factor 0.5")),
                        {"--reduce-lr-factor needs --reduce-lr-on-plateau"});
  expect_one_line_error(
      run(tiny_train(data,
                     "--epochs 2 --validation-split 0.25 --reduce-lr-on-plateau 1 --reduce-lr-factor 1")),
      {"--reduce-lr-factor must be below 1, got 1"});
}

TEST(CliArgs, ResumeWithoutDatasetUsesTheCheckpoints) {
  // --dataset not given means the checkpoint's data set, not fashion-mnist (a CIFAR-10 run could
  // not be resumed without repeating --dataset cifar10). A checkpoint marked as trained on
  // cifar-10 (no CIFAR-10 files here: the run looks for them), and a --dataset that differs.
  TempDir tmp;
  write_tiny_fashion(tmp.path / "data", 28, 28);
  const std::string ck = tmp.file("c.aether");
  ASSERT_EQ(run(tiny_train(tmp.path / "data", "--epochs 1 --save '" + ck + "'")).code, 0);
  aether::Checkpoint c = aether::load_checkpoint(ck);
  c.manifest_extra.at("info")["dataset"] = "cifar-10";
  aether::save_checkpoint(ck, c);
  const CliResult r = run("train --data-dir /nonexistent --resume '" + ck + "' --epochs 2 --quiet");
  expect_clear_error(r, {"cifar-10", "/nonexistent"}, true);
  EXPECT_EQ(r.out.find("fashion"), std::string::npos) << r.out;
  expect_one_line_error(run("train --dataset fashion-mnist --resume '" + ck + "' --epochs 2"),
                        {"cifar-10", "fashion-mnist"});
}

TEST(CliArgs, EvaluateAndPredictRefuseNonFiniteOutputsAndWrongShapes) {
  TempDir tmp;
  write_tiny_fashion(tmp.path / "data", 28, 28);
  write_tiny_fashion(tmp.path / "wide", 14, 56);
  const std::string ck = tmp.file("m.aether"), bad = tmp.file("huge.aether"), js = tmp.file("e.json");
  ASSERT_EQ(run(tiny_train(tmp.path / "data", "--epochs 1 --save '" + ck + "'")).code, 0);
  // 14x56 images hold as many pixels as 28x28 ones: still the wrong input for this model.
  expect_one_line_error(run("evaluate --checkpoint '" + ck + "' --data-dir '" + tmp.file("wide") +
                            "' --metrics-json '" + js + "'"),
                        {"(14, 56, 1)", "(28, 28, 1)"});
  EXPECT_FALSE(fs::exists(js));
  // train checks its two splits against each other, and a resumed model against the data, first.
  write_tiny_fashion(tmp.path / "mixed", 28, 28, 14, 56);
  expect_one_line_error(run(tiny_train(tmp.path / "mixed", "--epochs 1")), {"(14, 56, 1)", "(28, 28, 1)"});
  expect_one_line_error(run(tiny_run(tmp.path / "wide", "--resume '" + ck + "' --epochs 2")),
                        {"(14, 56, 1)", "(28, 28, 1)", ck});
  // Finite weights whose outputs are not: every float weight 1e30 overflows the logits.
  aether::Checkpoint c = aether::load_checkpoint(ck);
  for (auto& [name, t] : c.model)
    if (t.dtype() == aether::DType::float32) t = aether::Tensor::full(t.shape(), 1e30);
  aether::save_checkpoint(bad, c);
  const CliResult e = run("evaluate --checkpoint '" + bad + "' --data-dir '" + tmp.file("data") +
                          "' --metrics-json '" + js + "'");
  expect_one_line_error(e, {});
  EXPECT_EQ(e.out.find("test: accuracy"), std::string::npos) << e.out;
  EXPECT_FALSE(fs::exists(js));
  const CliResult p =
      run("predict --checkpoint '" + bad + "' '" + tmp.file("data/t10k-images-idx3-ubyte") + "'");
  expect_one_line_error(p, {});
  EXPECT_EQ(p.out.find("class"), std::string::npos) << p.out;
  // The same checks pass a sound checkpoint.
  const CliResult ok = run("evaluate --checkpoint '" + ck + "' --data-dir '" + tmp.file("data") + "'");
  EXPECT_EQ(ok.code, 0) << ok.out;
  const CliResult okp =
      run("predict --checkpoint '" + ck + "' '" + tmp.file("data/t10k-images-idx3-ubyte") + "' --limit 0");
  EXPECT_EQ(okp.code, 0) << okp.out;
  EXPECT_NE(okp.out.find("7\tclass "), std::string::npos) << okp.out;  // --limit 0: all 8 images
}
