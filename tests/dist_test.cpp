// dist tests: dist::Communicator on Gloo with the ranks as threads of this process over loopback,
// meeting through a file store in a fresh directory or a TCP store on an ephemeral port. Every
// collective against a serial reference computed here (exact for float32 sums of small integers;
// 16-bit results within one unit in the last place of the exactly rounded sum), world sizes 1 to 3;
// timeouts and failed peers (asserting on messages, never on wall-clock time); the launchers'
// environment variables; the TCP store's own errors.
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <latch>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <thread>
#include <vector>

#include "aether/core/dtype.h"
#include "aether/core/error.h"
#include "aether/dist/communicator.h"
#include "core/config.h"
#include "dist/tcp_store.h"  // a store server on an ephemeral port, started by the test
#include "temp_dir.h"

using namespace aether;
using aether::test::TempDir;
using namespace aether::dist;
namespace fs = std::filesystem;
using std::chrono::milliseconds;

namespace {

enum class Kind { file, tcp };

// Where a test's ranks meet: a fresh file store directory, or a TCP store server on a free port.
struct Meeting {
  Kind kind;
  TempDir dir;
  std::unique_ptr<TcpStoreServer> server;
  explicit Meeting(Kind k) : kind(k) {
    if (k == Kind::tcp) server = std::make_unique<TcpStoreServer>(0);
  }
  Options options(int rank, int world, milliseconds timeout) const {
    Options o;
    o.rank = rank;
    o.world_size = world;
    o.hostname = "127.0.0.1";
    o.timeout = timeout;
    if (kind == Kind::file) {
      o.store = StoreKind::file;
      o.file_store_path = (dir.path() / "store").string();
    } else {
      o.store = StoreKind::tcp;
      o.master_addr = "127.0.0.1";
      o.master_port = server->port();
      o.host_store = false;
    }
    return o;
  }
};

// Runs body(communicator) on `world` threads, one per rank; the communicators are destroyed after
// every rank has finished. A rank's exception fails the test, naming the rank.
void run_ranks(Kind kind, int world, const std::function<void(Communicator&)>& body) {
  Meeting meeting(kind);
  std::vector<std::string> errors(static_cast<size_t>(world));
  std::latch done(world);
  std::vector<std::thread> threads;
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      std::unique_ptr<Communicator> c;
      try {
        c = Communicator::create(meeting.options(r, world, std::chrono::seconds(60)));
        body(*c);
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
      done.arrive_and_wait();  // nobody leaves while another rank may still talk to it
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < world; ++r) EXPECT_EQ(errors[size_t(r)], "") << "rank " << r;
}

// f() throws an aether::Error whose message contains every part.
void expect_error(const std::function<void()>& f, std::initializer_list<std::string> parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const std::string& p : parts)
      EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-aether exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "did not throw";
}

constexpr size_t kSizes[] = {1, 7, 1000003};

// Rank r's float32 element i: a small integer, so sums are exact.
float value(size_t i, int r) { return float((i * 7 + size_t(r) * 3) % 11) - 4.0f; }

// A 16-bit value of rank r (not a small integer: sums round).
float value16(size_t i, int r) { return 0.37f * float((i * 13 + size_t(r) * 5) % 29) - 3.1f; }

uint16_t to16(float f, DType t) { return t == DType::float16 ? float_to_half(f) : float_to_bf16(f); }
float from16(uint16_t b, DType t) { return t == DType::float16 ? half_to_float(b) : bf16_to_float(b); }

struct World {
  Kind kind;
  int size;
};

// Readable test names in ctest (gtest_discover_tests prints the parameter).
void PrintTo(Kind k, std::ostream* os) { *os << (k == Kind::file ? "file store" : "TCP store"); }
void PrintTo(const World& w, std::ostream* os) {
  PrintTo(w.kind, os);
  *os << ", world " << w.size;
}

class Dist : public ::testing::TestWithParam<World> {};

std::string world_name(const ::testing::TestParamInfo<World>& info) {
  return std::string(info.param.kind == Kind::file ? "FileStore" : "TcpStore") + "World" +
         std::to_string(info.param.size);
}

}  // namespace

INSTANTIATE_TEST_SUITE_P(Worlds, Dist,
                         ::testing::Values(World{Kind::file, 1}, World{Kind::file, 2}, World{Kind::file, 3},
                                           World{Kind::tcp, 1}, World{Kind::tcp, 2}, World{Kind::tcp, 3}),
                         world_name);

TEST_P(Dist, AllReduceFloat32SumAverageMaxAgainstASerialReference) {
  const int world = GetParam().size;
  run_ranks(GetParam().kind, world, [&](Communicator& c) {
    EXPECT_EQ(c.world_size(), world);
    EXPECT_STREQ(c.backend(), "gloo");
    for (size_t n : kSizes) {
      for (ReduceOp op : {ReduceOp::sum, ReduceOp::average, ReduceOp::max}) {
        std::vector<float> x(n);  // (n)
        for (size_t i = 0; i < n; ++i) x[i] = value(i, c.rank());
        c.all_reduce(x.data(), n, DType::float32, op);
        size_t wrong = 0;
        for (size_t i = 0; i < n; ++i) {
          float want = op == ReduceOp::max ? value(i, 0) : 0.0f;
          for (int r = 0; r < world; ++r)
            want = op == ReduceOp::max ? std::max(want, value(i, r)) : want + value(i, r);
          if (op == ReduceOp::average) want /= float(world);
          wrong += x[i] != want;
        }
        EXPECT_EQ(wrong, 0u) << "n " << n << " " << reduce_op_name(op) << " rank " << c.rank();
      }
    }
  });
}

TEST_P(Dist, AllReduceIntegers) {
  const int world = GetParam().size;
  run_ranks(GetParam().kind, world, [&](Communicator& c) {
    std::vector<int32_t> a(7);
    std::vector<int64_t> b(7);
    for (size_t i = 0; i < 7; ++i) {
      a[i] = int32_t(i) * 100 + c.rank();
      b[i] = (int64_t(1) << 40) + int64_t(i) * (c.rank() + 1);
    }
    c.all_reduce(a.data(), a.size(), DType::int32, ReduceOp::sum);
    c.all_reduce(b.data(), b.size(), DType::int64, ReduceOp::max);
    for (size_t i = 0; i < 7; ++i) {
      EXPECT_EQ(a[i], int32_t(i) * 100 * world + world * (world - 1) / 2);
      EXPECT_EQ(b[i], (int64_t(1) << 40) + int64_t(i) * world);
    }
  });
}

// 16-bit floats are widened, summed in float32 and rounded once: within one unit in the last place
// of the exact sum rounded to the dtype (float32's own rounding is far below that unit, but may tip
// a value that lies next to a 16-bit rounding boundary).
TEST_P(Dist, AllReduce16BitFloatsAccumulateInFloat32) {
  const int world = GetParam().size;
  run_ranks(GetParam().kind, world, [&](Communicator& c) {
    for (DType t : {DType::float16, DType::bfloat16}) {
      const double ulp = t == DType::float16 ? std::ldexp(1.0, -10) : std::ldexp(1.0, -7);
      for (size_t n : kSizes) {
        for (ReduceOp op : {ReduceOp::sum, ReduceOp::average, ReduceOp::max}) {
          std::vector<uint16_t> x(n);  // (n) float16 or bfloat16 bits
          for (size_t i = 0; i < n; ++i) x[i] = to16(value16(i, c.rank()), t);
          c.all_reduce(x.data(), n, t, op);
          size_t wrong = 0;
          for (size_t i = 0; i < n; ++i) {
            double want = op == ReduceOp::max ? -1e30 : 0.0;
            for (int r = 0; r < world; ++r) {
              const double v = from16(to16(value16(i, r), t), t);  // what rank r sent
              want = op == ReduceOp::max ? std::max(want, v) : want + v;
            }
            if (op == ReduceOp::average) want /= world;
            const double rounded = from16(to16(float(want), t), t);
            wrong += std::abs(from16(x[i], t) - rounded) > ulp * std::abs(rounded) + 1e-30;
          }
          EXPECT_EQ(wrong, 0u) << dtype_name(t) << " n " << n << " " << reduce_op_name(op);
        }
      }
    }
  });
}

// A split's collectives pair up among themselves: each rank runs the parent's all-reduces on this
// thread and the split's on another, at once (they reach the wire in any order, a different one on
// each rank), and every sum is right. Sharing one set of connections, the two streams would cross
// (a sum of the wrong buffers) or wait for each other forever.
TEST_P(Dist, ASplitsCollectivesPairUpApartFromItsParents) {
  const int world = GetParam().size;
  run_ranks(GetParam().kind, world, [&](Communicator& c) {
    std::unique_ptr<Communicator> s = c.split("test");
    EXPECT_EQ(s->rank(), c.rank());
    EXPECT_EQ(s->world_size(), world);
    const float ranks = float(world * (world + 1) / 2);  // the sum of (rank + 1) over the ranks
    size_t wrong_split = 0;
    std::string split_error;
    std::thread other([&] {
      try {
        for (int k = 0; k < 30; ++k) {
          std::vector<float> b(size_t(1000 + k), 10.0f * float(c.rank() + 1));  // (1000 + k)
          s->all_reduce(b.data(), b.size(), DType::float32, ReduceOp::sum);
          for (float v : b) wrong_split += v != 10.0f * ranks;
        }
      } catch (const std::exception& e) {
        split_error = e.what();
      }
    });
    size_t wrong = 0;
    for (int k = 0; k < 30; ++k) {
      std::vector<float> a(size_t(2000 + k), float(c.rank() + 1));  // (2000 + k)
      c.all_reduce(a.data(), a.size(), DType::float32, ReduceOp::sum);
      for (float v : a) wrong += v != ranks;
    }
    other.join();
    EXPECT_EQ(split_error, "");
    EXPECT_EQ(wrong, 0u);
    EXPECT_EQ(wrong_split, 0u);
    // A second split of the same name is another communicator; a name with '/' is refused.
    std::unique_ptr<Communicator> s2 = c.split("test");
    float x = 1;
    s2->all_reduce(&x, 1, DType::float32, ReduceOp::sum);
    EXPECT_EQ(x, float(world));
    expect_error([&] { c.split("a/b"); }, {"split", "'a/b'"});
  });
}

// 256 + 1 + 1 in bfloat16: summed pairwise in bfloat16 each addition would round 257 back to 256; in
// float32 the sum is 258, which bfloat16 holds.
TEST(DistThreeRanks, BFloat16SumIsNotRoundedAtEveryStep) {
  run_ranks(Kind::file, 3, [&](Communicator& c) {
    uint16_t x = float_to_bf16(c.rank() == 0 ? 256.0f : 1.0f);
    c.all_reduce(&x, 1, DType::bfloat16, ReduceOp::sum);
    EXPECT_EQ(bf16_to_float(x), 258.0f);
  });
}

TEST_P(Dist, AllReduceOfSeveralBuffersInOneCall) {
  const int world = GetParam().size;
  run_ranks(GetParam().kind, world, [&](Communicator& c) {
    std::vector<std::vector<float>> xs = {
        std::vector<float>(1), std::vector<float>(7), {}, std::vector<float>(1000)};
    std::vector<Buffer> buffers;
    for (size_t k = 0; k < xs.size(); ++k) {
      for (size_t i = 0; i < xs[k].size(); ++i) xs[k][i] = value(i + k, c.rank());
      buffers.push_back({xs[k].data(), xs[k].size()});
    }
    c.all_reduce(buffers, DType::float32, ReduceOp::sum);
    for (size_t k = 0; k < xs.size(); ++k) {
      for (size_t i = 0; i < xs[k].size(); ++i) {
        float want = 0;
        for (int r = 0; r < world; ++r) want += value(i + k, r);
        if (xs[k][i] != want) {
          ADD_FAILURE() << "buffer " << k << " element " << i << ": " << xs[k][i] << " != " << want;
          return;
        }
      }
    }
  });
}

TEST_P(Dist, BroadcastFromTheLastRank) {
  const int world = GetParam().size;
  const int root = world - 1;  // not 0 once there are two ranks
  run_ranks(GetParam().kind, world, [&](Communicator& c) {
    for (size_t n : kSizes) {
      std::vector<int64_t> x(n, -1);  // (n)
      if (c.rank() == root)
        for (size_t i = 0; i < n; ++i) x[i] = int64_t(i) * 3 + 1;
      c.broadcast(x.data(), n, DType::int64, root);
      size_t wrong = 0;
      for (size_t i = 0; i < n; ++i) wrong += x[i] != int64_t(i) * 3 + 1;
      EXPECT_EQ(wrong, 0u) << "n " << n << " rank " << c.rank();
    }
  });
}

TEST_P(Dist, AllGather) {
  const int world = GetParam().size;
  run_ranks(GetParam().kind, world, [&](Communicator& c) {
    for (size_t n : {size_t(1), size_t(7)}) {
      std::vector<float> in(n), out(n * size_t(world), -1.0f);  // in (n), out (world, n)
      for (size_t i = 0; i < n; ++i) in[i] = float(c.rank() * 100) + float(i);
      c.all_gather(in.data(), out.data(), n, DType::float32);
      for (int r = 0; r < world; ++r)
        for (size_t i = 0; i < n; ++i) EXPECT_EQ(out[size_t(r) * n + i], float(r * 100) + float(i));
    }
  });
}

TEST_P(Dist, ReduceScatter) {
  const int world = GetParam().size;
  run_ranks(GetParam().kind, world, [&](Communicator& c) {
    const size_t n = 7;
    std::vector<float> in(n * size_t(world)), out(n, -1.0f);  // in (world, n), out (n)
    for (size_t k = 0; k < in.size(); ++k) in[k] = float(c.rank()) + float(k) * 10.0f;
    c.reduce_scatter(in.data(), out.data(), n, DType::float32, ReduceOp::sum);
    for (size_t i = 0; i < n; ++i) {
      const size_t k = size_t(c.rank()) * n + i;
      EXPECT_EQ(out[i], float(world * (world - 1) / 2) + float(world) * float(k) * 10.0f) << i;
    }
  });
}

TEST_P(Dist, BarrierWaitsForEveryRank) {
  const int world = GetParam().size;
  std::atomic<int> arrived{0};
  run_ranks(GetParam().kind, world, [&](Communicator& c) {
    if (c.rank() == 0) std::this_thread::sleep_for(milliseconds(100));  // the last to arrive
    arrived++;
    c.barrier();
    EXPECT_EQ(arrived.load(), world);
    c.barrier();
  });
}

TEST_P(Dist, BadArgumentsThrowBeforeCommunicating) {
  const int world = GetParam().size;
  run_ranks(GetParam().kind, world, [&](Communicator& c) {
    std::vector<int32_t> x(3);
    expect_error([&] { c.all_reduce(x.data(), 3, DType::int32, ReduceOp::average); },
                 {"dist all_reduce", "average needs a float dtype, got int32"});
    expect_error([&] { c.all_reduce(x.data(), 3, DType::boolean, ReduceOp::sum); }, {"bool"});
    expect_error([&] { c.broadcast(x.data(), 3, DType::int32, world); },
                 {"dist broadcast", "root " + std::to_string(world) + " is not a rank"});
    expect_error([&] { c.barrier(milliseconds(0)); }, {"timeout 0 ms is not positive"});
    // Bad arguments do not break the communicator.
    c.all_reduce(x.data(), 3, DType::int32, ReduceOp::sum);
  });
}

// ---- failures -------------------------------------------------------------------------------------

class DistFailure : public ::testing::TestWithParam<Kind> {};
INSTANTIATE_TEST_SUITE_P(Stores, DistFailure, ::testing::Values(Kind::file, Kind::tcp),
                         [](const ::testing::TestParamInfo<Kind>& info) {
                           return std::string(info.param == Kind::file ? "FileStore" : "TcpStore");
                         });

// Ranks 0 and 1 of 3 start; rank 2 never does: both throw, naming rank 2 and the timeout.
TEST_P(DistFailure, ARankThatNeverJoinsTimesOutTheOthers) {
  Meeting meeting(GetParam());
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        Communicator::create(meeting.options(r, 3, milliseconds(2000)));
      } catch (const Error& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (int r = 0; r < 2; ++r) {
    const std::string& m = errors[size_t(r)];
    EXPECT_NE(
        m.find("rank " + std::to_string(r) + " of 3: timed out after 2000 ms waiting for rank(s) 2 to join"),
        std::string::npos)
        << m;
  }
}

// Rank 1 joins, then stops before the all-reduce: rank 0's all-reduce throws (timed out, or its
// connection closed), naming the collective, the rank and the timeout; the communicator stays failed.
TEST_P(DistFailure, APeerThatStopsFailsTheCollective) {
  Meeting meeting(GetParam());
  std::latch joined(2);
  std::string error0, later0, error1;
  std::thread rank1([&] {
    try {
      auto c = Communicator::create(meeting.options(1, 2, milliseconds(20000)));
      joined.arrive_and_wait();
    } catch (const std::exception& e) {
      error1 = e.what();
      joined.count_down();
    }  // rank 1's communicator is gone
  });
  try {
    auto c = Communicator::create(meeting.options(0, 2, milliseconds(20000)));
    joined.arrive_and_wait();
    rank1.join();
    std::vector<float> x(7, 1.0f);
    try {
      c->all_reduce(x.data(), x.size(), DType::float32, ReduceOp::sum, milliseconds(1500));
    } catch (const Error& e) {
      error0 = e.what();
    }
    try {
      c->barrier();
    } catch (const Error& e) {
      later0 = e.what();
    }
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
    if (rank1.joinable()) rank1.join();
  }
  EXPECT_EQ(error1, "");
  EXPECT_NE(error0.find("dist all_reduce (7 x float32, sum) on rank 0 of 2"), std::string::npos) << error0;
  EXPECT_NE(error0.find("1500 ms"), std::string::npos) << error0;
  EXPECT_NE(later0.find("this communicator failed earlier and cannot be used again"), std::string::npos)
      << later0;
}

// Rank 1 is alive but late: rank 0's barrier with a short timeout says it timed out.
TEST_P(DistFailure, ACollectiveThatTakesTooLongTimesOut) {
  Meeting meeting(GetParam());
  std::latch joined(2), rank0_done(2);
  std::string error0;
  std::thread rank1([&] {
    try {
      auto c = Communicator::create(meeting.options(1, 2, milliseconds(20000)));
      joined.arrive_and_wait();
      rank0_done.arrive_and_wait();  // never calls the barrier
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
  });
  try {
    auto c = Communicator::create(meeting.options(0, 2, milliseconds(20000)));
    joined.arrive_and_wait();
    try {
      c->barrier(milliseconds(500));
    } catch (const Error& e) {
      error0 = e.what();
    }
    rank0_done.arrive_and_wait();
  } catch (const std::exception& e) {
    ADD_FAILURE() << e.what();
  }
  rank1.join();
  EXPECT_NE(error0.find("dist barrier on rank 0 of 2: timed out after 500 ms"), std::string::npos) << error0;
}

TEST(DistOptions, InvalidOptionsAreNamed) {
  Options o;
  o.world_size = 2;
  o.rank = 2;
  expect_error([&] { Communicator::create(o); }, {"dist::Communicator::create", "rank 2 is not in [0, 2)"});
  o.rank = 0;
  o.store = StoreKind::file;
  expect_error([&] { Communicator::create(o); }, {"file store needs a directory"});
  o.store = StoreKind::tcp;
  o.master_port = 0;
  expect_error([&] { Communicator::create(o); }, {"master port 0 is not a TCP port"});
  o.master_port = 29500;
  o.timeout = milliseconds(0);
  expect_error([&] { Communicator::create(o); }, {"timeout 0 ms is not positive"});
}

TEST(DistOptions, AWorldOfOneNeedsNoStore) {
  Options o;  // world 1, TCP store at 127.0.0.1:29500 that nobody serves
  auto c = Communicator::create(o);
  float x[3] = {1, 2, 3};
  c->all_reduce(x, 3, DType::float32, ReduceOp::average);
  c->barrier();
  EXPECT_EQ(x[2], 3.0f);
}

// Rank 0 hosts the TCP store itself (the default), on a port that was free a moment ago.
TEST(DistOptions, RankZeroHostsTheTcpStore) {
  int port = 0;
  {
    TcpStoreServer probe(0);
    port = probe.port();
  }
  std::vector<std::string> errors(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] {
      try {
        Options o;
        o.rank = r;
        o.world_size = 2;
        o.master_port = port;
        o.hostname = "127.0.0.1";
        o.timeout = milliseconds(30000);
        auto c = Communicator::create(o);
        int32_t x = r + 1;
        c->all_reduce(&x, 1, DType::int32, ReduceOp::sum);
        EXPECT_EQ(x, 3);
        c->barrier();  // rank 0 (the store's host) leaves last
      } catch (const std::exception& e) {
        errors[size_t(r)] = e.what();
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(errors[0], "");
  EXPECT_EQ(errors[1], "");
}

// ---- the launchers' environment ------------------------------------------------------------------

namespace {
Options from(const std::map<std::string, std::string>& env) {
  return Options::from_env([&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}
}  // namespace

TEST(DistEnv, TorchrunOpenMpiAndSlurmVariables) {
  Options o = from({{"RANK", "3"},
                    {"WORLD_SIZE", "8"},
                    {"LOCAL_RANK", "1"},
                    {"MASTER_ADDR", "node7"},
                    {"MASTER_PORT", "1234"}});
  EXPECT_EQ(o.rank, 3);
  EXPECT_EQ(o.world_size, 8);
  EXPECT_EQ(o.local_rank, 1);
  EXPECT_EQ(o.master_addr, "node7");
  EXPECT_EQ(o.master_port, 1234);
  EXPECT_EQ(o.store, StoreKind::tcp);
  EXPECT_EQ(o.hostname, "");  // another machine's store: this machine's own name
  o = from(
      {{"OMPI_COMM_WORLD_RANK", "2"}, {"OMPI_COMM_WORLD_SIZE", "4"}, {"OMPI_COMM_WORLD_LOCAL_RANK", "0"}});
  EXPECT_EQ(o.rank, 2);
  EXPECT_EQ(o.world_size, 4);
  EXPECT_EQ(o.master_addr, "127.0.0.1");
  EXPECT_EQ(o.master_port, 29500);
  EXPECT_EQ(o.hostname, "127.0.0.1");  // a store on loopback: every rank is on this machine
  o = from({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "2"}});
  EXPECT_EQ(o.rank, 5);
  EXPECT_EQ(o.world_size, 6);
  EXPECT_EQ(o.local_rank, 2);
  // torchrun's variables win over Slurm's (torchrun inside an allocation).
  o = from({{"RANK", "1"}, {"WORLD_SIZE", "2"}, {"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "1"}});
  EXPECT_EQ(o.world_size, 2);
  // An salloc shell (SLURM_NTASKS for the allocation, no task of srun): one process.
  o = from({{"SLURM_NTASKS", "4"}});
  EXPECT_EQ(o.world_size, 1);
  o = from({});
  EXPECT_EQ(o.rank, 0);
  EXPECT_EQ(o.world_size, 1);
  EXPECT_EQ(o.iface, "");
  EXPECT_EQ(o.timeout, std::chrono::seconds(300));
  // The interface ranks talk over (PyTorch's variable) and the collectives' timeout.
  o = from(
      {{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"GLOO_SOCKET_IFNAME", "veth0"}, {"AETHER_DIST_TIMEOUT", "42"}});
  EXPECT_EQ(o.iface, "veth0");
  EXPECT_EQ(o.timeout, std::chrono::seconds(42));
}

// Options::from_env() reads the process's configuration (core/config.h), which tests set directly.
TEST(DistEnv, FromTheProcessConfiguration) {
  Config& c = config();
  const std::string rank = c.rank.get(), size = c.world_size.get(), port = c.master_port.get();
  c.rank.set("1");
  c.world_size.set("2");
  c.master_port.set("4321");
  const Options o = Options::from_env();
  c.rank.set(rank);
  c.world_size.set(size);
  c.master_port.set(port);
  EXPECT_EQ(o.rank, 1);
  EXPECT_EQ(o.world_size, 2);
  EXPECT_EQ(o.master_port, 4321);
}

TEST(DistEnv, MalformedValuesAreNamed) {
  expect_error(
      [] {
        from({{"RANK", "abc"}, {"WORLD_SIZE", "2"}});
      },
      {"dist::Options::from_env", "RANK=abc is not a rank"});
  expect_error([] { from({{"RANK", "0"}, {"WORLD_SIZE", "0"}}); }, {"WORLD_SIZE=0 is not a world size"});
  expect_error([] { from({{"RANK", "2"}, {"WORLD_SIZE", "2"}}); }, {"RANK=2 is not below WORLD_SIZE=2"});
  expect_error([] { from({{"RANK", "1"}}); }, {"RANK=1 is set but WORLD_SIZE is not"});
  expect_error([] { from({{"WORLD_SIZE", "4"}}); }, {"WORLD_SIZE=4 is set but RANK is not"});
  expect_error(
      [] {
        from({{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"LOCAL_RANK", "-1"}});
      },
      {"LOCAL_RANK=-1 is not a local rank"});
  expect_error(
      [] {
        from({{"MASTER_PORT", "70000"}});
      },
      {"MASTER_PORT=70000 is not a TCP port", "1 to 65535"});
  expect_error([] { from({{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", " 2"}}); }, {"SLURM_NTASKS= 2"});
  expect_error(
      [] {
        from({{"AETHER_DIST_TIMEOUT", "0"}});
      },
      {"AETHER_DIST_TIMEOUT=0 is not a timeout in seconds"});
}

// ---- the TCP store ---------------------------------------------------------------------------------

TEST(DistTcpStore, SetGetWait) {
  TcpStoreServer server(0);
  TcpStore a("127.0.0.1", server.port(), milliseconds(5000));
  TcpStore b("localhost", server.port(), milliseconds(5000));
  a.set("k", {'x', '\0', 'y'});
  EXPECT_EQ(b.get("k"), (std::vector<char>{'x', '\0', 'y'}));
  EXPECT_TRUE(b.check({"k"}));
  EXPECT_FALSE(b.check({"k", "absent"}));
  std::thread later([&] {
    std::this_thread::sleep_for(milliseconds(50));
    a.set("late", {});
  });
  b.wait({"k", "late"});
  later.join();
  expect_error(
      [&] {
        b.wait({"k", "never"}, milliseconds(100));
      },
      {"dist TCP store: timed out after 100 ms waiting for key(s) 'never'"});
}

TEST(DistTcpStore, APortThatIsTakenIsNamed) {
  TcpStoreServer server(0);
  const std::string port = std::to_string(server.port());
  expect_error([&] { TcpStoreServer again(server.port()); },
               {"dist TCP store", "cannot listen on port " + port, "MASTER_PORT"});
}

TEST(DistTcpStore, NoServerIsNamedWithItsAddress) {
  int port = 0;
  {
    TcpStoreServer gone(0);
    port = gone.port();
  }
  expect_error([&] { TcpStore client("127.0.0.1", port, milliseconds(300)); },
               {"could not connect to the store at 127.0.0.1:" + std::to_string(port), "within 300 ms",
                "MASTER_ADDR"});
  expect_error([&] { TcpStore client("no-such-host.invalid", 29500, milliseconds(300)); },
               {"cannot resolve the store's host 'no-such-host.invalid'"});
}

// A server that stops: the client's next request says so.
TEST(DistTcpStore, AServerThatStopsIsNamed) {
  auto server = std::make_unique<TcpStoreServer>(0);
  const int port = server->port();
  TcpStore client("127.0.0.1", port, milliseconds(2000));
  client.set("a", {'1'});
  server.reset();
  expect_error([&] { client.set("b", {'2'}); },
               {"the store at 127.0.0.1:" + std::to_string(port), "closed the connection"});
}

// A communicator whose buffers are device memory (as NCCL's): the base class must hand every call
// to the implementation untouched, without reading or writing an element on the host. The buffers
// here are a page that cannot be read or written: any host access would crash the test.
namespace {
class DeviceBufferRecorder final : public Communicator {
 public:
  explicit DeviceBufferRecorder(bool device) : device_(device) {}
  int rank() const override { return 0; }
  int world_size() const override { return 1; }
  Timeout timeout() const override { return std::chrono::seconds(5); }
  const char* backend() const override { return "recorder"; }
  std::vector<std::string> calls;

 protected:
  bool device_buffers() const override { return device_; }
  void do_all_reduce(void*, size_t n, DType dtype, ReduceOp op, Timeout) override {
    calls.push_back(detail::cat("all_reduce ", n, " ", dtype_name(dtype), " ", reduce_op_name(op)));
  }
  void do_all_reduce_many(std::span<const Buffer> buffers, DType dtype, ReduceOp op, Timeout) override {
    calls.push_back(
        detail::cat("all_reduce_many ", buffers.size(), " ", dtype_name(dtype), " ", reduce_op_name(op)));
  }
  void do_reduce_scatter(const void*, void*, size_t n, DType dtype, ReduceOp op, Timeout) override {
    calls.push_back(detail::cat("reduce_scatter ", n, " ", dtype_name(dtype), " ", reduce_op_name(op)));
  }
  void do_broadcast(void*, size_t bytes, int root, Timeout) override {
    calls.push_back(detail::cat("broadcast ", bytes, " ", root));
  }
  void do_all_gather(const void*, void*, size_t bytes, Timeout) override {
    calls.push_back(detail::cat("all_gather ", bytes));
  }
  void do_barrier(Timeout) override { calls.push_back("barrier"); }
  std::unique_ptr<Communicator> do_split(const std::string&) override {
    return std::make_unique<DeviceBufferRecorder>(device_);
  }

 private:
  bool device_;
};
}  // namespace

TEST(DistDeviceBuffers, TheBaseClassLeavesDeviceBuffersToTheImplementation) {
  const long page = sysconf(_SC_PAGESIZE);
  void* p = mmap(nullptr, size_t(page), PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);  // no host access
  ASSERT_NE(p, MAP_FAILED);
  DeviceBufferRecorder c(/*device=*/true);
  c.all_reduce(p, 8, DType::float16, ReduceOp::average);
  c.all_reduce(p, 8, DType::bfloat16, ReduceOp::sum);
  c.all_reduce(p, 8, DType::float32, ReduceOp::average);
  const std::vector<Buffer> two = {{p, 4}, {static_cast<char*>(p) + 64, 2}};
  c.all_reduce(std::span<const Buffer>(two), DType::float32, ReduceOp::average);
  c.reduce_scatter(p, static_cast<char*>(p) + 128, 4, DType::float16, ReduceOp::sum);
  c.all_gather(p, static_cast<char*>(p) + 256, 4, DType::int32);  // a world of one: no host memmove
  c.broadcast(p, 4, DType::float32, 0);                           // a world of one: nothing to send
  c.barrier();
  munmap(p, size_t(page));
  EXPECT_EQ(c.calls,
            (std::vector<std::string>{"all_reduce 8 float16 average", "all_reduce 8 bfloat16 sum",
                                      "all_reduce 8 float32 average", "all_reduce_many 2 float32 average",
                                      "reduce_scatter 4 float16 sum", "all_gather 16"}));
}

// The same calls on host buffers (Gloo's side): 16-bit floats reach the implementation widened to
// float32, average as a sum, several buffers as one packed all-reduce, reduce-scatter as an
// all-reduce of the whole input.
TEST(DistDeviceBuffers, HostBuffersAreWidenedAndPackedForTheImplementation) {
  std::vector<uint16_t> h(8, 0x3c00);  // 1.0 in float16
  std::vector<float> f(8, 1.0f), out(8);
  DeviceBufferRecorder c(/*device=*/false);
  c.all_reduce(h.data(), 8, DType::float16, ReduceOp::average);
  const std::vector<Buffer> two = {{f.data(), 4}, {f.data() + 4, 2}};
  c.all_reduce(std::span<const Buffer>(two), DType::float32, ReduceOp::sum);
  c.reduce_scatter(f.data(), out.data(), 4, DType::float32, ReduceOp::max);
  EXPECT_EQ(c.calls, (std::vector<std::string>{"all_reduce 8 float32 sum", "all_reduce 6 float32 sum",
                                               "all_reduce 4 float32 max"}));
  EXPECT_EQ(h[0], 0x3c00);  // the average of one rank's 1.0
}
