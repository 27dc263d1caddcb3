// Data-parallel training end to end, with ranks as processes over loopback (docs/distributed.md):
//  - the Model API unchanged: ranks started with RANK / WORLD_SIZE / MASTER_PORT (as a launcher
//    does) train a small MLP; 2 ranks x batch B/2 give the parameters of 1 rank x batch B (within
//    float tolerance), the two ranks hold bit-identical parameters, and a second run is bit-identical;
//  - `aether launch` (the built program, AETHER_CLI_PATH) on a tiny Fashion-MNIST-style set: a run
//    and its checkpoint resumed on 1 rank and on 2; a rank that exits or hangs (AETHER_DIST_FAULT)
//    fails the job with errors naming it, never a hang; --max-restarts 1 resumes and finishes.
// Assertions are on results and messages, never on wall-clock time.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "cli_util.h"
#include "dist/tcp_store.h"  // a free port for each job's store
#include "error_util.h"

extern char** environ;

using namespace aether;
using namespace cli_util;

namespace {

// A port that was free a moment ago (the OS's choice for a server that then stopped).
int free_port() {
  dist::TcpStoreServer probe(0);
  return probe.port();
}

// 100 samples of (4, 4, 1) with labels 0..3: the last global batch is partial (100 = 6 x 16 + 4).
data::Dataset make_data() {
  data::Dataset d;
  d.name = "synthetic";
  d.n = 100;
  d.h = d.w = 4;
  d.c = 1;
  d.num_classes = 4;
  for (int64_t i = 0; i < d.n; ++i) {
    d.labels.push_back(i % 4);
    for (int64_t k = 0; k < 16; ++k) d.images.push_back(uint8_t((i * 37 + k * (i % 4 + 3) * 11) % 256));
  }
  return d;
}

// How the test MLP normalises: not at all, with a BatchNorm1d per rank, or with a synchronized one.
enum class Norm { none, batch_norm, sync_batch_norm, batch_norm_lookahead };
Norm norm_named(const std::string& s) {
  return s == "bn"             ? Norm::batch_norm
         : s == "sync-bn"      ? Norm::sync_batch_norm
         : s == "bn-lookahead" ? Norm::batch_norm_lookahead
                               : Norm::none;
}

// Trains the test MLP (no dropout; a BatchNorm1d after the first layer unless `norm` is none) for 3
// epochs with `batch` samples per rank and returns its parameters, then its buffers, one after
// another (with lookahead every 2 steps: then the optimizer's state). The rank and world come from
// the environment.
// `comm`: TrainOptions::communicator (nullptr: the environment's); `hidden`: the hidden layer's width;
// `stop_after` > 0: Model::request_stop() after that many epochs.
std::vector<float> train_mlp(int64_t batch, Norm norm = Norm::none, dist::Communicator* comm = nullptr,
                             int64_t hidden = 32, int64_t stop_after = 0) {
  manual_seed(7);
  Model m;
  m.add(std::make_shared<nn::Flatten>()).add(std::make_shared<nn::Linear>(16, hidden));
  if (norm != Norm::none) m.add(std::make_shared<nn::BatchNorm1d>(hidden));
  m.add(std::make_shared<nn::ReLU>()).add(std::make_shared<nn::Linear>(hidden, 4));
  ModelConfig c;
  c.loss = "cross_entropy";
  c.optimizer = "sgd";
  c.lr = 0.05;
  c.momentum = 0.9;
  c.schedule = "cosine";
  if (norm == Norm::batch_norm_lookahead) c.lookahead_every = 2;
  m.configure(c).finalize({4, 4, 1});
  const data::Dataset d = make_data();
  TrainOptions o;
  o.epochs = 3;
  o.progress = false;
  o.data.batch_size = batch;
  o.data.seed = 3;
  o.sync_batch_norm = norm == Norm::sync_batch_norm;
  o.communicator = comm;
  o.on_epoch = [&](const EpochStats& e) {
    if (e.epoch + 1 == stop_after) m.request_stop();
  };
  const History h = m.train(d, o);
  std::printf("epochs %zu\n", h.epochs.size());
  std::vector<float> all;
  auto tensors = m.network().named_parameters();
  for (auto& b : m.network().named_buffers()) tensors.push_back(b);
  if (norm == Norm::batch_norm_lookahead)
    for (auto& s : m.optimizer()->named_state()) tensors.push_back(s);
  for (auto& [name, t] : tensors) {
    const auto v = t->to_vector<float>();
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

// max |a - b| over max |b| (at least 1): how far a run's values are from another's.
double relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double max_err = 0, max_val = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    max_err = std::max(max_err, double(std::abs(a[i] - b[i])));
    max_val = std::max(max_val, double(std::abs(b[i])));
  }
  EXPECT_GT(max_val, 0.0);
  return max_err / std::max(max_val, 1.0);
}

std::string file_text(const std::string& path) {
  std::ifstream f(path);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

std::vector<float> read_floats(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::vector<float> v;
  float x;
  while (f.read(reinterpret_cast<char*>(&x), sizeof x)) v.push_back(x);
  return v;
}

// Runs this test program's DistWorker.Train as ranks 0 and 1 of a job with batches[rank] and the
// normalisation `norm` ("", "bn", "sync-bn"; each writes its parameters and buffers to <out>.<rank>,
// its output to <out>.<rank>.log); `stop_after[rank]` > 0: the rank requests a stop after that many
// epochs. Returns the exit statuses.
std::vector<int> run_two_ranks(const std::string& out, std::vector<int64_t> batches,
                               const std::string& norm = "", std::vector<int64_t> stop_after = {0, 0}) {
  const int port = free_port();
  std::vector<pid_t> pids;
  for (int rank = 0; rank < 2; ++rank) {
    std::vector<std::string> env;
    for (char** e = environ; *e != nullptr; ++e) env.emplace_back(*e);
    env.push_back("RANK=" + std::to_string(rank));
    env.push_back("WORLD_SIZE=2");
    env.push_back("MASTER_ADDR=127.0.0.1");
    env.push_back("MASTER_PORT=" + std::to_string(port));
    env.push_back("AETHER_DIST_TIMEOUT=120");
    env.push_back("AETHER_TEST_WORKER_OUT=" + out);
    env.push_back("AETHER_TEST_WORKER_BATCH=" + std::to_string(batches[size_t(rank)]));
    env.push_back("AETHER_TEST_WORKER_NORM=" + norm);
    env.push_back("AETHER_TEST_WORKER_STOP=" + std::to_string(stop_after[size_t(rank)]));
    std::vector<char*> envp;
    for (auto& s : env) envp.push_back(s.data());
    envp.push_back(nullptr);
    std::string self = fs::read_symlink("/proc/self/exe").string(),
                filter = "--gtest_filter=DistWorker.Train";
    char* argv[] = {self.data(), filter.data(), nullptr};
    const std::string log = out + "." + std::to_string(rank) + ".log";
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    pid_t pid = -1;
    EXPECT_EQ(::posix_spawn(&pid, self.c_str(), &files, nullptr, argv, envp.data()), 0);
    posix_spawn_file_actions_destroy(&files);
    pids.push_back(pid);
  }
  std::vector<int> codes;
  for (pid_t p : pids) {
    int status = 0;
    ::waitpid(p, &status, 0);
    codes.push_back(WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status));
  }
  return codes;
}

// A communicator whose buffers are device memory (device_buffers(): the path Model::train takes with
// NCCL, each gradient bucket packed by a kernel on the model's device, reduced in place and sliced
// back into the gradients), here host memory in a world of one. It records each all-reduce's size.
class DeviceBuffersOfOne final : public dist::Communicator {
 public:
  explicit DeviceBuffersOfOne(const char* backend = "test-device-buffers") : backend_(backend) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Timeout timeout() const override { return std::chrono::seconds(60); }
  const char* backend() const override { return backend_; }
  bool device_buffers() const override { return true; }
  std::vector<size_t> reduced;  // the element count of each all-reduce, in order

 protected:
  void do_all_reduce(void*, size_t n, DType, dist::ReduceOp, Timeout) override { reduced.push_back(n); }
  void do_broadcast(void*, size_t, int, Timeout) override {}
  void do_all_gather(const void* in, void* out, size_t bytes, Timeout) override {
    std::memmove(out, in, bytes);
  }
  void do_barrier(Timeout) override {}
  std::unique_ptr<dist::Communicator> do_split(const std::string&) override {
    return std::make_unique<DeviceBuffersOfOne>(backend_);
  }

 private:
  const char* backend_;
};

}  // namespace

// A communicator given to train() is used in a world of one too, and training follows training
// without one: on host buffers (Gloo), and on device buffers (NCCL's path: the gradients packed
// into buckets by kernels, all-reduced in place, and each gradient a slice of its bucket).
TEST(DistTrain, AWorldOfOneCommunicatorTrainsAsWithoutOne) {
  for (Norm norm : {Norm::none, Norm::batch_norm}) {
    const std::vector<float> plain = train_mlp(16, norm);
    auto gloo = dist::Communicator::create(dist::Options{});
    EXPECT_LT(relative_error(train_mlp(16, norm, gloo.get()), plain), 1e-6) << "gloo";
    DeviceBuffersOfOne device;
    EXPECT_LT(relative_error(train_mlp(16, norm, &device), plain), 1e-6) << "device buffers";
    EXPECT_EQ(device.reduced.size(), size_t(21)) << "one bucket (the MLP's gradients, the loss and the "
                                                    "accuracy) for each of 3 x 7 steps";
  }
  // Two buckets (the automatic size: a quarter of the gradients, at least 256 KB), in reverse
  // parameter order: [bias 2 (4), weight 2 (4 x 8192), bias 1 (8192), loss, accuracy], [weight 1
  // (8192 x 16)]; the parameters still follow training without a communicator.
  const int64_t hidden = 8192;
  DeviceBuffersOfOne device;
  EXPECT_LT(
      relative_error(train_mlp(16, Norm::none, &device, hidden), train_mlp(16, Norm::none, nullptr, hidden)),
      1e-6);
  ASSERT_EQ(device.reduced.size(), size_t(42));
  for (size_t i = 0; i < device.reduced.size(); i += 2) {
    EXPECT_EQ(device.reduced[i], size_t(4 + 4 * hidden + hidden + 2)) << i;
    EXPECT_EQ(device.reduced[i + 1], size_t(hidden * 16)) << i;
  }
}

// NCCL reduces GPU memory: a model on the CPU stops with an error naming both, before any step.
TEST(DistTrain, NcclWithAModelOnTheCpuIsAClearError) {
  DeviceBuffersOfOne nccl("nccl");
  const std::string e = error_of([&] { train_mlp(16, Norm::none, &nccl); });
  EXPECT_NE(e.find("train: the communicator is NCCL"), std::string::npos) << e;
  EXPECT_NE(e.find("the model is on cpu"), std::string::npos) << e;
  EXPECT_TRUE(nccl.reduced.empty());
}

// One rank of run_two_ranks (skipped when run on its own).
TEST(DistWorker, Train) {
  const char* out = std::getenv("AETHER_TEST_WORKER_OUT");
  if (out == nullptr) GTEST_SKIP() << "a worker of DistTrain's tests";
  const int64_t batch = std::atoll(std::getenv("AETHER_TEST_WORKER_BATCH"));
  const char* norm = std::getenv("AETHER_TEST_WORKER_NORM");
  const char* stop = std::getenv("AETHER_TEST_WORKER_STOP");
  const std::vector<float> p = train_mlp(batch, norm_named(norm != nullptr ? norm : ""), nullptr, 32,
                                         stop != nullptr ? std::atoll(stop) : 0);
  std::ofstream f(std::string(out) + "." + std::getenv("RANK"), std::ios::binary);
  f.write(reinterpret_cast<const char*>(p.data()), std::streamsize(p.size() * sizeof(float)));
}

TEST(DistTrain, TwoRanksOfHalfTheBatchMatchOneRankAndEachOther) {
  TempDir tmp;
  ASSERT_EQ(run_two_ranks(tmp.file("a"), {8, 8}), (std::vector<int>{0, 0})) << file_text(tmp.file("a.0.log"));
  ASSERT_EQ(run_two_ranks(tmp.file("b"), {8, 8}), (std::vector<int>{0, 0})) << file_text(tmp.file("b.0.log"));
  const std::vector<float> r0 = read_floats(tmp.file("a.0")), r1 = read_floats(tmp.file("a.1"));
  const std::vector<float> again = read_floats(tmp.file("b.0"));
  const std::vector<float> one = train_mlp(16);  // this process: a world of one, batch 16
  ASSERT_EQ(r0.size(), one.size());
  ASSERT_FALSE(one.empty());
  EXPECT_EQ(std::memcmp(r0.data(), r1.data(), r0.size() * sizeof(float)), 0) << "ranks 0 and 1 differ";
  ASSERT_EQ(again.size(), r0.size());
  EXPECT_EQ(std::memcmp(r0.data(), again.data(), r0.size() * sizeof(float)), 0) << "two runs differ";
  // 21 steps of float32 arithmetic summed in another order: agreement to about 1e-5 of the values.
  EXPECT_LT(relative_error(r0, one), 1e-4) << "2 ranks x 8 vs 1 rank x 16";
}

// A synchronized BatchNorm normalises with the global batch's statistics: 2 ranks x 8 train the
// model of 1 rank x 16 (parameters and running statistics), the ranks alike. With per-rank
// statistics (the default) they do not: each rank normalises its 8 samples on their own.
TEST(DistTrain, SyncBatchNormOnTwoRanksOfHalfTheBatchMatchesOneRank) {
  TempDir tmp;
  ASSERT_EQ(run_two_ranks(tmp.file("s"), {8, 8}, "sync-bn"), (std::vector<int>{0, 0}))
      << file_text(tmp.file("s.0.log"));
  ASSERT_EQ(run_two_ranks(tmp.file("p"), {8, 8}, "bn"), (std::vector<int>{0, 0}))
      << file_text(tmp.file("p.0.log"));
  const std::vector<float> s0 = read_floats(tmp.file("s.0")), s1 = read_floats(tmp.file("s.1"));
  const std::vector<float> per_rank = read_floats(tmp.file("p.0"));
  const std::vector<float> one = train_mlp(16, Norm::batch_norm);  // a world of one, batch 16
  ASSERT_EQ(s0.size(), one.size());
  ASSERT_EQ(s1.size(), one.size());
  EXPECT_EQ(std::memcmp(s0.data(), s1.data(), s0.size() * sizeof(float)), 0) << "ranks 0 and 1 differ";
  EXPECT_LT(relative_error(s0, one), 1e-4) << "2 ranks x 8 with sync batch norm vs 1 rank x 16";
  EXPECT_GT(relative_error(per_rank, one), 1e-2) << "per-rank batch norm should differ from 1 rank x 16";
}

// With per-rank BatchNorm statistics and lookahead, each epoch ends with rank 0's statistics and
// rank 0's slow values of them on every rank: the ranks' models and optimizer states agree.
TEST(DistTrain, LookaheadOverPerRankBatchNormEndsTheRanksAlike) {
  TempDir tmp;
  ASSERT_EQ(run_two_ranks(tmp.file("l"), {8, 8}, "bn-lookahead"), (std::vector<int>{0, 0}))
      << file_text(tmp.file("l.0.log"));
  const std::vector<float> l0 = read_floats(tmp.file("l.0")), l1 = read_floats(tmp.file("l.1"));
  ASSERT_EQ(l0.size(), l1.size());
  // parameters (16x32 + 32 + 32 + 32 + 32x4 + 4), buffers (2 x 32), momentum and lookahead
  // state of every parameter, lookahead state of both buffers
  const size_t params = 16 * 32 + 32 + 32 + 32 + 32 * 4 + 4;
  EXPECT_EQ(l0.size(), params + 64 + 2 * params + 64);
  EXPECT_EQ(std::memcmp(l0.data(), l1.data(), l0.size() * sizeof(float)), 0) << "ranks 0 and 1 differ";
}

// Ranks that would not pair their collectives up (here: other batch sizes) stop at the start of
// train() with an error naming what differs, instead of waiting for the timeout.
TEST(DistTrain, RanksWithDifferentOptionsStopWithAClearError) {
  TempDir tmp;
  const std::vector<int> codes = run_two_ranks(tmp.file("a"), {8, 4});
  EXPECT_NE(codes[0], 0);
  EXPECT_NE(codes[1], 0);
  for (const char* log : {"a.0.log", "a.1.log"})
    EXPECT_NE(file_text(tmp.file(log)).find("rank 1 has batch size 4, rank 0 8"), std::string::npos)
        << file_text(tmp.file(log));
}

// Model::request_stop on several ranks: rank 0's request decides. Rank 1 asks to stop after epoch
// 1 and rank 0 after epoch 2: both stop after epoch 2 (with collectives that pair up), alike, with the
// model of one rank stopped there.
TEST(DistTrain, RankZerosStopRequestStopsEveryRank) {
  TempDir tmp;
  ASSERT_EQ(run_two_ranks(tmp.file("r"), {8, 8}, "", {2, 1}), (std::vector<int>{0, 0}))
      << file_text(tmp.file("r.0.log")) << file_text(tmp.file("r.1.log"));
  for (const char* log : {"r.0.log", "r.1.log"})
    EXPECT_NE(file_text(tmp.file(log)).find("epochs 2\n"), std::string::npos) << file_text(tmp.file(log));
  const std::vector<float> r0 = read_floats(tmp.file("r.0")), r1 = read_floats(tmp.file("r.1"));
  ASSERT_EQ(r0.size(), r1.size());
  EXPECT_EQ(std::memcmp(r0.data(), r1.data(), r0.size() * sizeof(float)), 0) << "ranks 0 and 1 differ";
  EXPECT_LT(relative_error(r0, train_mlp(16, Norm::none, nullptr, 32, 2)), 1e-4);
  EXPECT_GT(relative_error(r0, train_mlp(16)), 1e-3) << "a third epoch ran";
}

namespace {
// `aether launch` of 2 workers of `aether train` on the tiny set in dir (64 images per split).
std::string launch(const TempDir& tmp, const std::string& launch_opts, const std::string& train_opts) {
  return "launch --nproc-per-node 2 --master-port " + std::to_string(free_port()) + " " + launch_opts +
         " -- aether train --dataset fashion-mnist --data-dir '" + (tmp.path / "data").string() +
         "' --quiet " + train_opts;
}
void tiny_data(const TempDir& tmp) { write_tiny_fashion(tmp.path / "data", 28, 28, 0, 0, 64); }
}  // namespace

TEST(DistLaunch, TrainsAndTheCheckpointResumesOnOneRankAndOnTwo) {
  TempDir tmp;
  tiny_data(tmp);
  const std::string ck = tmp.file("ck.aether");
  const CliResult r = run(launch(tmp, "", "--model mlp --epochs 1 --batch-size 8 --save '" + ck + "'"));
  ASSERT_EQ(r.code, 0) << r.out;
  expect_no_crash(r);
  EXPECT_NE(r.out.find("rank 0 of 2 data-parallel ranks (gloo), global batch 16"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("test accuracy"), std::string::npos) << r.out;
  ASSERT_TRUE(fs::exists(ck));
  Model saved = Model::load(ck);
  EXPECT_EQ(saved.epochs_done(), 1);
  EXPECT_EQ(saved.steps_done(), 4);  // 64 images, global batches of 16
  // On one rank (no launcher) and on two: both continue from epoch 2.
  const std::string one = tmp.file("one.aether"), two = tmp.file("two.aether");
  fs::copy_file(ck, one);
  fs::copy_file(ck, two);
  const CliResult r1 = run("train --dataset fashion-mnist --data-dir '" + (tmp.path / "data").string() +
                           "' --quiet --resume '" + one + "' --epochs 2 --save '" + one + "'");
  ASSERT_EQ(r1.code, 0) << r1.out;
  EXPECT_NE(r1.out.find("at epoch 2/2"), std::string::npos) << r1.out;
  EXPECT_EQ(Model::load(one).steps_done(), 4 + 8);  // one rank: batches of 8
  const CliResult r2 = run(launch(tmp, "", "--resume '" + two + "' --epochs 2 --save '" + two + "'"));
  ASSERT_EQ(r2.code, 0) << r2.out;
  EXPECT_NE(r2.out.find("at epoch 2/2"), std::string::npos) << r2.out;
  EXPECT_EQ(Model::load(two).steps_done(), 4 + 4);
  // Without --batch-size the ranks share the preset's batch (mlp: 128) and follow its recipe.
  const CliResult d = run(launch(tmp, "", "--model mlp --epochs 1"));
  ASSERT_EQ(d.code, 0) << d.out;
  EXPECT_NE(d.out.find("global batch 128"), std::string::npos) << d.out;
  EXPECT_NE(d.out.find("epochs, batch 64,"), std::string::npos) << d.out;
}

// Early stopping on two ranks: every rank decides on rank 0's numbers, so both stop after the same
// epoch and restore the same one (train() checks that the ranks agree after restoring). The 48
// training images are noise with labels: a model that memorises them validates worse and worse.
TEST(DistLaunch, EarlyStoppingStopsEveryRankAlike) {
  TempDir tmp;
  tiny_data(tmp);
  const std::string ck = tmp.file("es.aether"), js = tmp.file("es.json");
  const CliResult r = run(launch(tmp, "",
                                 "--model mlp --epochs 30 --batch-size 8 --validation-split 0.25 "
                                 "--early-stopping 1 --save '" +
                                     ck + "' --metrics-json '" + js + "'"));
  ASSERT_EQ(r.code, 0) << r.out;
  expect_no_crash(r);
  EXPECT_NE(r.out.find("(48 train / 16 validation / 64 test images"), std::string::npos) << r.out;
  nlohmann::json j;
  std::ifstream(js) >> j;
  const auto& es = j.at("early_stopping");
  ASSERT_TRUE(es.at("stopped_early").get<bool>()) << j.dump();
  EXPECT_TRUE(es.at("restored_best").get<bool>()) << j.dump();
  EXPECT_EQ(j.at("history").size(), es.at("best_epoch").get<size_t>() + 1);
  EXPECT_EQ(Model::load(ck).epochs_done(), int64_t(j.at("history").size()));
}

TEST(DistLaunch, ARankThatExitsFailsTheJobNamingIt) {
  TempDir tmp;
  tiny_data(tmp);
  setenv("AETHER_DIST_FAULT", "exit:1:2", 1);
  const CliResult r = run(launch(tmp, "--timeout 60", "--model mlp --epochs 1 --batch-size 8"));
  unsetenv("AETHER_DIST_FAULT");
  EXPECT_NE(r.code, 0) << r.out;
  expect_no_crash(r);
  EXPECT_NE(r.out.find("AETHER_DIST_FAULT: rank 1 exits at step 2"), std::string::npos) << r.out;
  // The launcher names the rank; rank 0 fails on its own with an error naming it.
  EXPECT_NE(r.out.find("aether: error: launch: rank 1 (pid"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("exited with status 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on rank 0 of 2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1 did not report this failure"), std::string::npos) << r.out;
}

TEST(DistLaunch, ARankThatHangsTimesTheOthersOutNamingIt) {
  TempDir tmp;
  tiny_data(tmp);
  setenv("AETHER_DIST_FAULT", "hang:1:1", 1);
  const CliResult r = run(launch(tmp, "--timeout 5", "--model mlp --epochs 1 --batch-size 8"));
  unsetenv("AETHER_DIST_FAULT");
  EXPECT_NE(r.code, 0) << r.out;
  expect_no_crash(r);
  EXPECT_NE(r.out.find("rank 1 hangs at step 1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("on rank 0 of 2: timed out after 5000 ms"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("rank 1 did not report this failure"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("killing rank 1"), std::string::npos) << r.out;  // the hung rank does not stay
}

TEST(DistLaunch, MaxRestartsResumesFromTheCheckpointAndFinishes) {
  TempDir tmp;
  tiny_data(tmp);
  const std::string ck = tmp.file("ck.aether");
  setenv("AETHER_DIST_FAULT", "exit:1:6", 1);  // in epoch 2 (4 steps per epoch), after a checkpoint
  const CliResult r = run(launch(tmp, "--timeout 60 --max-restarts 1",
                                 "--model mlp --epochs 3 --batch-size 8 --save '" + ck + "'"));
  unsetenv("AETHER_DIST_FAULT");
  ASSERT_EQ(r.code, 0) << r.out;
  expect_no_crash(r);
  EXPECT_NE(r.out.find("rank 1 exits at step 6"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("restarting every worker (restart 1 of 1)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("at epoch 2/3 (step 4)"), std::string::npos) << r.out;
  const Model m = Model::load(ck);
  EXPECT_EQ(m.epochs_done(), 3);
  EXPECT_EQ(m.steps_done(), 12);
  // Without restarts left, the same fault fails the job.
  fs::remove(ck);
  setenv("AETHER_DIST_FAULT", "exit:1:6", 1);
  const CliResult f =
      run(launch(tmp, "--timeout 60", "--model mlp --epochs 3 --batch-size 8 --save '" + ck + "'"));
  unsetenv("AETHER_DIST_FAULT");
  EXPECT_NE(f.code, 0) << f.out;
}

// Early stopping across a restart: a rank fails in the epoch after the one past the best; the job
// resumes from the checkpoint with the early-stopping run it holds (best epoch and weights, epochs
// waited) and stops and restores as the uninterrupted job does, with the same weights.
TEST(DistLaunch, EarlyStoppingContinuesAcrossARestart) {
  TempDir tmp;
  tiny_data(tmp);
  const std::string args =
      "--model mlp --epochs 30 --batch-size 8 --validation-split 0.25 --early-stopping 3 ";
  auto job = [&](const std::string& name, const std::string& fault, nlohmann::json* metrics) {
    const std::string ck = tmp.file(name + ".aether"), js = tmp.file(name + ".json");
    if (!fault.empty()) setenv("AETHER_DIST_FAULT", fault.c_str(), 1);
    const CliResult r = run(launch(tmp, "--timeout 60 --max-restarts 1",
                                   args + "--save '" + ck + "' --metrics-json '" + js + "'"));
    unsetenv("AETHER_DIST_FAULT");
    EXPECT_EQ(r.code, 0) << r.out;
    std::ifstream(js) >> *metrics;
    return r.out;
  };
  nlohmann::json whole, restarted;
  job("whole", "", &whole);
  ASSERT_TRUE(whole.at("early_stopping").at("stopped_early").get<bool>()) << whole.dump();
  const int64_t best = whole.at("early_stopping").at("best_epoch").get<int64_t>() - 1;  // 0-based
  // 48 / (2 x 8) = 3 steps per epoch: the fault at the second step of epoch best + 2.
  const std::string out = job("restarted", detail::cat("exit:1:", (best + 2) * 3 + 1), &restarted);
  EXPECT_NE(out.find("restarting every worker (restart 1 of 1)"), std::string::npos) << out;
  EXPECT_EQ(restarted.at("early_stopping"), whole.at("early_stopping"));
  const Model a = Model::load(tmp.file("whole.aether")), b = Model::load(tmp.file("restarted.aether"));
  EXPECT_EQ(a.epochs_done(), best + 4);
  EXPECT_EQ(b.epochs_done(), a.epochs_done());
  auto pa = const_cast<Model&>(a).network().named_parameters(),
       pb = const_cast<Model&>(b).network().named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i)
    EXPECT_EQ(pa[i].second->to_vector<float>(), pb[i].second->to_vector<float>()) << pa[i].first;
}

TEST(DistLaunch, BadOptionsAreNamed) {
  CliResult r = run("launch --nproc-per-node 0 -- aether train");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--nproc-per-node"), std::string::npos) << r.out;
  r = run("launch --nnodes 2 --node-rank 2 -- aether train");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("--node-rank 2 is not below --nnodes 2"), std::string::npos) << r.out;
  r = run("launch --nproc-per-node 1 -- /nonexistent/program");
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("cannot run '/nonexistent/program' for rank 0"), std::string::npos) << r.out;
  expect_no_crash(r);
}
