// The fused executor (scheduler -> kernel IR -> generated C++ -> run-time compile) against the
// reference backend, graph by graph, and the kernel cache's rules (warm cache, keys, unsafe
// directories, no compiler), checked in child processes so each starts with a fresh cache state.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/backend/backend.h"
#include "aether/core/random.h"
#include "aether/graph/autograd.h"
#include "aether/ops/nn.h"
#include "aether/optim/optimizer.h"
#include "codegen/compiler.h"
#include "codegen/ir.h"
#include "codegen/lower.h"
#include "codegen/render.h"
#include "temp_dir.h"
#include "test_values.h"

using namespace aether;
using aether::test::TempDir;
using namespace aether::optim;
namespace fs = std::filesystem;

namespace {

// A cache directory for one test, under /tmp itself whatever TMPDIR says (sticky, not under the
// user's home), as the cache's checks of every directory above it expect.
TempDir tmp_dir() { return TempDir("aether-cache-test", "/tmp"); }

using testing_values::input;
using testing_values::values;

struct Case {
  const char* name;
  std::function<std::vector<Tensor>()> build;
  bool may_fall_back = false;  // the IR cannot express part of it yet (runs on the reference)
};

std::vector<std::vector<double>> run(const Case& c, bool fused) {
  const bool was = fusion_enabled();
  set_fusion(fused);
  manual_seed(7);
  std::vector<Tensor> outs = c.build();
  realize(outs);
  std::vector<std::vector<double>> r;
  for (const Tensor& t : outs) r.push_back(t.to_vector<double>());
  set_fusion(was);
  return r;
}

const std::vector<Case>& cases() {
  static const std::vector<Case> cs = {
      {"elementwise chain",
       [] {
         const Tensor x = input({64, 48}, 1), y = input({64, 48}, 2);
         return std::vector<Tensor>{((x + y) * 0.5).exp() - y / (x.abs() + 1.0)};
       }},
      {"broadcast small inputs",
       [] {
         const Tensor x = input({256, 256}, 3), a = input({1, 256}, 4), b = input({256, 1}, 5);
         return std::vector<Tensor>{(x + a - b).relu(), (x * a).sqrt()};
       }},
      {"permuted, sliced, flipped and padded views",
       [] {
         const Tensor x = input({16, 24}, 6), y = input({24, 16}, 7);
         const Tensor t = x.transpose(0, 1) * y;                  // (24, 16)
         const Tensor s = x.slice(1, 1, 23, 3).flip({0}) + 1.0;   // (16, 8)
         const Tensor p = (x + 1.0).pad({{1, 2}, {0, 3}}).exp();  // (19, 27): exp(0) = 1 in the pad
         return std::vector<Tensor>{t, s, p, p.sum({0})};
       }},
      {"reshape of computed values into finer dims",
       [] {
         const Tensor x = input({48, 4}, 8), z = input({8, 6, 4}, 9);
         return std::vector<Tensor>{(x + 1.0).reshape({8, 6, 4}) * z, (x * 2.0).reshape({8, 6, 4}).sum({1})};
       }},
      {"reshape of computed values into coarser dims (an iteration dim would need splitting: not affine)",
       [] {
         const Tensor x = input({8, 6, 4}, 10), z = input({48, 4}, 11);
         return std::vector<Tensor>{(x + 1.0).reshape({48, 4}) * z,
                                    (x + 1.0).transpose(0, 1).reshape({3, 64})};
       },
       true},
      {"reductions over axes",
       [] {
         const Tensor x = input({32, 16, 8}, 11);
         return std::vector<Tensor>{x.sum(),    x.sum({0}),     x.sum({1}, true),
                                    x.max({2}), x.mean({0, 2}), x.min({1})};
       }},
      {"sibling reduces and their epilogues",
       [] {
         const Tensor x = input({128, 64}, 12), a = input({1, 64}, 13), b = input({1, 64}, 14);
         return std::vector<Tensor>{(x + a).sum() * 2.0, (x + b).sum() * 3.0, (x * a).sum({0}) + b};
       }},
      {"normalisation (mean, variance, broadcast back)",
       [] {
         const Tensor x = input({64, 10}, 15);
         const Tensor m = x.mean({1}, true);
         const Tensor c = x - m;
         return std::vector<Tensor>{c / ((c * c).mean({1}, true) + 1e-5).sqrt()};
       }},
      {"softmax and log-softmax",
       [] {
         const Tensor x = input({32, 10}, 16, -20, 20);
         const Tensor e = (x - x.max({1}, true)).exp();
         const Tensor sm = e / e.sum({1}, true);
         return std::vector<Tensor>{sm, (x - x.max({1}, true)) - e.sum({1}, true).log()};
       }},
      {"integers: wrap-around, division by zero, casts that saturate",
       [] {
         const Tensor a = Tensor::from_vector<int32_t>({2147483647, -7, 9, 0, -2147483647 - 1, 5}, {6});
         const Tensor b = Tensor::from_vector<int32_t>({1, 2, 0, 0, -1, -3}, {6});
         const Tensor f = Tensor::from_vector<float>({1e10f, -1e10f, NAN, 2.7f, -2.7f, 255.9f}, {6});
         return std::vector<Tensor>{a + b,
                                    a * b,
                                    a / b,
                                    -a,
                                    a.maximum(b),
                                    f.cast(DType::int32),
                                    f.cast(DType::uint8),
                                    f.cast(DType::int64),
                                    a.cast(DType::int64).sum(),
                                    a.sum()};
       }},
      {"comparisons, where and bool",
       [] {
         const Tensor x = input({40, 30}, 17), y = input({40, 30}, 18);
         return std::vector<Tensor>{where(x.lt(y), x, y * 2.0), x.ge(y), x.eq(x),
                                    x.gt(Tensor::scalar(0.0)).cast(DType::float32).sum()};
       }},
      {"float64",
       [] {
         const Tensor x = input({50, 20}, 19).cast(DType::float64),
                      y = input({50, 20}, 20).cast(DType::float64);
         return std::vector<Tensor>{((x * y).abs() + 1.0).log(), (x * y).sum({0})};
       }},
      {"random numbers",
       [] {
         const Tensor r = Tensor::rand({33, 17}), d = Tensor::rand({5, 7}, DType::float64);
         return std::vector<Tensor>{r * 2.0, d + 1.0, Tensor::rand({100}).sum()};
       }},
      {"a random scalar broadcast over a grid, with math on it (all invariant: hoisted out of the loops)",
       [] {
         const Tensor r = (Tensor::rand({}) * 3.0 + 1.0).cast(DType::bfloat16).cast(DType::float32) / 2.0;
         const Tensor x = input({6, 10}, 40), y = input({6, 10}, 41);
         return std::vector<Tensor>{(r * (x - y)).cast(DType::float64)};
       }},
      {"scalars and empty tensors",
       [] {
         const Tensor s = Tensor::scalar(3.0), e = Tensor::zeros({0, 4});
         return std::vector<Tensor>{s * 2.0 + 1.0, s.sum(), (e + 1.0).sum({0}), (e * 2.0)};
       }},
      {"16-bit floats: every op rounds like the reference, casts round once",
       [] {
         const Tensor x = input({16, 24}, 21).cast(DType::float16),
                      y = input({16, 24}, 26).cast(DType::float16);
         const Tensor b = input({16, 24}, 27).cast(DType::bfloat16);
         const Tensor d = input({16, 24}, 28, -70000, 70000).cast(DType::float64);
         return std::vector<Tensor>{(x * y + 0.1).cast(DType::float32),  // rounded after the mul and the add
                                    ((x - y).exp() / (y.abs() + 1.0)).sqrt(),
                                    (b * b * 3.0 - b).log(),  // log of negatives: NaN
                                    x.sum({0}),
                                    b.sum(),
                                    x.max({1}),
                                    x.gt(y),
                                    d.cast(DType::float16),
                                    d.cast(DType::bfloat16),  // overflow to inf
                                    (x * 1000.0).cast(DType::int32),
                                    (x + b.cast(DType::float16)).cast(DType::float64)};
       }},
      {"relu backward with a float16 output and a float32 gradient keeps float32",
       [] {
         const Tensor out = input({8, 6, 6, 4}, 29).cast(DType::float16).relu();
         const Tensor dy = input({8, 6, 6, 4}, 30);
         const Tensor dx = where(out.gt(Tensor::scalar(0.0)), dy, 0.0);
         EXPECT_EQ(dx.dtype(), DType::float32);
         return std::vector<Tensor>{dx};
       }},
      {"batch norm training + relu, forward and backward",
       [] {
         Tensor x = input({4, 5, 5, 8}, 22), w = input({8}, 23, 0.5, 1.5), b = input({8}, 24);
         const Tensor rm = Tensor::zeros({8}), rv = Tensor::ones({8});
         const Tensor dy = input({4, 5, 5, 8}, 25);
         x.set_requires_grad();
         w.set_requires_grad();
         b.set_requires_grad();
         const BatchNormResult r = batch_norm(x, w, b, rm, rv, true);
         const Tensor out = r.out.relu();
         auto g = gradients(out, {x, w, b}, dy);
         return std::vector<Tensor>{out, r.new_running_mean, r.new_running_var, g[0], g[1], g[2]};
       }},
  };
  return cs;
}

}  // namespace

TEST(Codegen, FusedMatchesReferenceOnEveryGraph) {
  ASSERT_TRUE(codegen::host_compiler_available()) << "the test machine has a C++ compiler";
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const auto want = run(c, false);
    const auto before = codegen::codegen_stats();
    const auto got = run(c, true);
    const auto after = codegen::codegen_stats();
    EXPECT_EQ(after.failures, before.failures) << "a generated kernel failed to compile";
    if (!c.may_fall_back) {
      EXPECT_EQ(after.fallbacks, before.fallbacks) << "a kernel ran on the reference backend";
    }
    EXPECT_GT(after.compiled + after.disk_hits + after.memory_hits,
              before.compiled + before.disk_hits + before.memory_hits)
        << "no generated kernel ran";
    ASSERT_EQ(got.size(), want.size());
    for (size_t o = 0; o < want.size(); ++o) {
      ASSERT_EQ(got[o].size(), want[o].size()) << "output " << o;
      for (size_t i = 0; i < want[o].size(); ++i) {
        const double w = want[o][i], g = got[o][i];
        if (g == w) continue;  // also infinities
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(g)) << "output " << o << " [" << i << "]";
          continue;
        }
        // Elementwise float32 math is bit-identical (no FMA contraction, same libm calls) but for exp
        // (the kernels' ae_expf is within 1 ulp of std::exp); sums
        // accumulate in double in both, in different orders.
        EXPECT_NEAR(g, w, 1e-6 * std::max(1.0, std::fabs(w))) << "output " << o << " [" << i << "]";
      }
    }
  }
}

// Turns fusion on for one test (the suite also runs with AETHER_FUSE=0).
struct FusionOn {
  bool was = fusion_enabled();
  FusionOn() { set_fusion(true); }
  ~FusionOn() { set_fusion(was); }
};

TEST(Codegen, KernelCountsMatchTheSchedule) {
  FusionOn on;
  // One elementwise chain over two inputs: one generated kernel, no intermediate stored.
  const Tensor x = input({1000}, 30), y = input({1000}, 31);
  const Tensor b = (x + y).exp();
  const Tensor c = b * 2.0 - y;
  const Schedule s = schedule({c});
  EXPECT_EQ(s.kernel_count, 1);
  const auto before = codegen::codegen_stats();
  c.realize();
  const auto after = codegen::codegen_stats();
  EXPECT_EQ((after.compiled + after.disk_hits + after.memory_hits) -
                (before.compiled + before.disk_hits + before.memory_hits),
            1);
  EXPECT_FALSE(b.is_realized());  // fused into c's kernel, never stored
  const auto xv = x.to_vector<float>(), yv = y.to_vector<float>(), cv = c.to_vector<float>();
  for (size_t i = 0; i < xv.size(); ++i) {  // the kernel's exp: within an ulp of std::exp
    const float want = std::exp(xv[i] + yv[i]) * 2.0f - yv[i];
    EXPECT_NEAR(cv[i], want, 1e-6f * std::max(1.0f, std::fabs(want))) << i;
  }
}

TEST(Codegen, IrListsLoadsAccumulationsAndStores) {
  const Tensor x = input({8, 4}, 32), a = input({1, 4}, 33);
  const Tensor s = (x + a).sum({0});
  const Schedule sch = schedule({s});
  ASSERT_EQ(sch.kernels.size(), 1u);
  std::string why;
  const auto lowered = codegen::lower(
      sch.kernels[0], [](const Node& n) { return n.realized() ? std::optional<View>(n.view) : std::nullopt; },
      &why);
  ASSERT_TRUE(lowered) << why;
  const std::string ir = ir::to_string(lowered->kernel);
  EXPECT_NE(ir.find("reducing axes 0"), std::string::npos) << ir;
  EXPECT_NE(ir.find("load float32 buf"), std::string::npos) << ir;
  EXPECT_NE(ir.find("accum"), std::string::npos) << ir;
  EXPECT_NE(ir.find("store"), std::string::npos) << ir;
}

// ---- the kernel cache, in child processes ----------------------------------------------------------
namespace {

// Run by the parent in a child process: computes a few kernels, checks them, prints the stats.
TEST(CodegenChild, Run) {
  if (!std::getenv("AETHER_CODEGEN_CHILD")) GTEST_SKIP() << "only run as a child of the cache tests";
  const Tensor x = Tensor::from_vector<float>({1, 2, 3, 4}, {4}),
               y = Tensor::from_vector<float>({5, 6, 7, 8}, {4});
  const Tensor e = (x + y) * 2.0;
  const Tensor s = (x * y).sum();
  realize({e, s});
  EXPECT_EQ(e.to_vector<float>(), (std::vector<float>{12, 16, 20, 24}));
  EXPECT_EQ(s.item<float>(), 70.0f);
  const auto st = codegen::codegen_stats();
  std::printf("stats compiled=%lld disk_hits=%lld failures=%lld\n", static_cast<long long>(st.compiled),
              static_cast<long long>(st.disk_hits), static_cast<long long>(st.failures));
}

struct ChildResult {
  std::string out;
  long long compiled = -1, disk_hits = -1, failures = -1;
  bool passed = false;
};
ChildResult child(const std::string& env) {
  const std::string cmd = "AETHER_FUSE=1 AETHER_CODEGEN_CHILD=1 " + env + " /proc/" +
                          std::to_string(getpid()) + "/exe --gtest_filter=CodegenChild.Run 2>&1";
  ChildResult r;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  while (fgets(buf, sizeof buf, p)) r.out += buf;
  const int status = pclose(p);
  r.passed = status == 0 && r.out.find("[  PASSED  ] 1 test") != std::string::npos;
  if (auto at = r.out.find("stats compiled="); at != std::string::npos)
    std::sscanf(r.out.c_str() + at, "stats compiled=%lld disk_hits=%lld failures=%lld", &r.compiled,
                &r.disk_hits, &r.failures);
  return r;
}
int count_ext(const fs::path& dir, const std::string& ext) {
  int n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ext;
  return n;
}

}  // namespace

TEST(CodegenCache, WarmCacheMeansTheSecondProcessCompilesNothing) {
  TempDir t = tmp_dir();
  const std::string dir = (t.path() / "new" / "kernels").string();  // created by aether
  const ChildResult first = child("AETHER_CACHE_DIR=" + dir);
  ASSERT_TRUE(first.passed) << first.out;
  EXPECT_GE(first.compiled, 1);
  EXPECT_EQ(first.disk_hits, 0);
  struct stat st {};
  ASSERT_EQ(stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u) << "the cache directory is private";
  const ChildResult second = child("AETHER_CACHE_DIR=" + dir);
  ASSERT_TRUE(second.passed) << second.out;
  EXPECT_EQ(second.compiled, 0);
  EXPECT_EQ(second.disk_hits, first.compiled);
}

TEST(CodegenCache, AnObjectWhoseKeyDoesNotMatchIsNotLoaded) {
  TempDir t = tmp_dir();
  const std::string dir = t.path().string();
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  const ChildResult first = child("AETHER_CACHE_DIR=" + dir);
  ASSERT_TRUE(first.passed) << first.out;
  ASSERT_GE(count_ext(t.path(), ".key"), 1);
  // A key that no longer matches (another compiler, flags or source): the object is rebuilt.
  for (const auto& e : fs::directory_iterator(t.path()))
    if (e.path().extension() == ".key") std::ofstream(e.path(), std::ios::app) << "tampered";
  const ChildResult second = child("AETHER_CACHE_DIR=" + dir);
  ASSERT_TRUE(second.passed) << second.out;
  EXPECT_EQ(second.compiled, first.compiled);
  EXPECT_EQ(second.disk_hits, 0);
  // A damaged object under a valid key fails to load and is rebuilt, never run.
  for (const auto& e : fs::directory_iterator(t.path()))
    if (e.path().extension() == ".so") std::ofstream(e.path(), std::ios::trunc) << "not an object file";
  const ChildResult third = child("AETHER_CACHE_DIR=" + dir);
  ASSERT_TRUE(third.passed) << third.out;
  EXPECT_EQ(third.compiled, first.compiled);
}

TEST(CodegenCache, ADirectoryOthersCanWriteIsNotUsed) {
  TempDir t = tmp_dir();
  const std::string dir = t.path().string();
  ASSERT_EQ(chmod(dir.c_str(), 0777), 0);
  const ChildResult r = child("AETHER_CACHE_DIR=" + dir);
  ASSERT_TRUE(r.passed) << r.out;
  EXPECT_NE(r.out.find("not using the kernel cache"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("others can write"), std::string::npos) << r.out;
  EXPECT_EQ(count_ext(t.path(), ".so"), 0) << "nothing was written to or loaded from it";
  // The private directory used instead held the kernels, and went with the process.
  const std::string keeping = "keeping compiled kernels in ";
  const auto at = r.out.find(keeping);
  ASSERT_NE(at, std::string::npos) << r.out;
  const std::string fallback =
      r.out.substr(at + keeping.size(), r.out.find(' ', at + keeping.size()) - (at + keeping.size()));
  EXPECT_EQ(fallback.rfind("/tmp/aether-kernels-", 0), 0u) << fallback;
  EXPECT_GE(r.compiled, 1);
  EXPECT_FALSE(fs::exists(fallback)) << fallback << " was left behind";
}

TEST(CodegenCache, WithoutACompilerEverythingRunsOnTheReference) {
  TempDir t = tmp_dir();
  ASSERT_EQ(chmod(t.path().c_str(), 0700), 0);
  const ChildResult r = child("AETHER_CACHE_DIR=" + t.path().string() + " AETHER_CXX=/nonexistent/c++");
  ASSERT_TRUE(r.passed) << r.out;  // the results are still right
  const std::string msg = "no working C++ compiler";
  const auto first = r.out.find(msg);
  EXPECT_NE(first, std::string::npos) << r.out;
  EXPECT_EQ(r.out.find(msg, first + 1), std::string::npos) << "said once";
  EXPECT_EQ(r.compiled, 0);
}

// ---- whole-step consequences of the fusion rules -------------------------------------------------
// The generated 16-bit conversions (branch-free, so that loops over them vectorise) give the
// reference's bits: every float16 and bfloat16 bit pattern widened, and every 4099th float32 bit
// pattern (all ranges and both signs: subnormals, ties, overflow, NaN) plus the edges of each
// range narrowed. Floats are compared by their bits (a NaN by being a NaN of the same sign).
TEST(Codegen, SixteenBitConversionsMatchTheReferenceBitForBit) {
  FusionOn on;
  auto bits = [](float f) { return std::bit_cast<uint32_t>(f); };
  auto same = [&](float g, float w) {
    return std::isnan(w) ? std::isnan(g) && std::signbit(g) == std::signbit(w) : bits(g) == bits(w);
  };
  std::vector<uint16_t> halves(65536);  // [65536] every bit pattern
  for (uint32_t h = 0; h < 65536; ++h) halves[h] = uint16_t(h);
  std::vector<float> floats;  // [~1.05M] float32 values to narrow
  for (uint64_t u = 0; u < (uint64_t(1) << 32); u += 4099)
    floats.push_back(std::bit_cast<float>(uint32_t(u)));
  for (uint32_t edge : {0x33000000u, 0x38800000u, 0x477ff000u, 0x47800000u, 0x7f800000u, 0x7f7fffffu}) {
    for (uint32_t d = 0; d < 4096; ++d) {  // around each edge, both signs
      for (uint32_t sign : {0u, 0x80000000u}) {
        floats.push_back(std::bit_cast<float>((edge - 2048 + d) | sign));
      }
    }
  }
  for (DType t : {DType::float16, DType::bfloat16}) {
    SCOPED_TRACE(dtype_name(t));
    const bool f16 = t == DType::float16;
    const auto before = codegen::codegen_stats();
    const std::vector<float> wide =
        Tensor::from_blob(halves.data(), {65536}, t).cast(DType::float32).to_vector<float>();
    const std::vector<float> narrow =  // read back through the reference's widening
        Tensor::from_blob(floats.data(), {int64_t(floats.size())}, DType::float32).cast(t).to_vector<float>();
    const auto after = codegen::codegen_stats();
    EXPECT_EQ(after.fallbacks, before.fallbacks);
    EXPECT_GE(after.compiled + after.disk_hits + after.memory_hits,
              before.compiled + before.disk_hits + before.memory_hits + 2)
        << "the casts ran in generated kernels";
    for (uint32_t h = 0; h < 65536; ++h) {
      const float w = f16 ? half_to_float(uint16_t(h)) : bf16_to_float(uint16_t(h));
      ASSERT_TRUE(same(wide[h], w)) << std::hex << "bits 0x" << h << ": 0x" << bits(wide[h]) << ", want 0x"
                                    << bits(w);
    }
    for (size_t i = 0; i < floats.size(); ++i) {
      const float x = floats[i];
      const float w = f16 ? half_to_float(float_to_half(x)) : bf16_to_float(float_to_bf16(x));
      ASSERT_TRUE(same(narrow[i], w))
          << std::hex << "float 0x" << bits(x) << " -> 0x" << bits(narrow[i]) << ", want 0x" << bits(w);
    }
  }
}

TEST(Codegen, OptimizerUpdatesEachParameterInOneKernel) {
  FusionOn on;
  for (const bool adam : {false, true}) {
    SCOPED_TRACE(adam ? "AdamW" : "SGD (Nesterov momentum, weight decay)");
    std::vector<Tensor> params{input({64, 32}, 40).set_requires_grad(), input({32}, 41).set_requires_grad(),
                               input({10, 64}, 42).set_requires_grad()};
    std::unique_ptr<Optimizer> opt;
    if (adam)
      opt = std::make_unique<AdamW>(params, AdamOptions{.lr = 1e-3, .weight_decay = 0.01});
    else
      opt = std::make_unique<SGD>(
          params, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 5e-4});
    for (int step = 0; step < 3; ++step) {
      for (size_t i = 0; i < params.size(); ++i)
        params[i].set_grad(input(params[i].shape(), uint32_t(50 + step * 3 + i)));
      plan_cache_clear();  // prepare the step's plan (and look its kernels up) afresh, to count them
      const auto before = codegen::codegen_stats();
      opt->step();
      const auto after = codegen::codegen_stats();
      const int64_t kernels = (after.compiled + after.disk_hits + after.memory_hits) -
                              (before.compiled + before.disk_hits + before.memory_hits);
      // One multi-output kernel per parameter buffer: it reads the weight, its gradient and the
      // state, and writes the new weight and the new state in the same pass.
      if (step > 0) {
        EXPECT_EQ(kernels, int64_t(params.size())) << "step " << step;
      }
      EXPECT_EQ(after.fallbacks, before.fallbacks);
    }
  }
}

TEST(Codegen, SoftmaxCrossEntropyStoresNoProbabilities) {
  // logits (256, 10), int64 labels: loss and d(loss)/d(logits) in one schedule.
  Tensor logits = input({256, 10}, 60);
  logits.set_requires_grad();
  std::vector<int64_t> ys;
  for (int i = 0; i < 256; ++i) ys.push_back(i % 10);
  const Tensor labels = Tensor::from_vector(ys);
  const Tensor loss = cross_entropy(logits, labels, 0.2);
  const auto g = gradients(loss, {logits});
  const Schedule s = schedule({loss, g[0]});
  int stored_full = 0;
  for (const Kernel& k : s.kernels)
    for (const auto& o : k.outputs) stored_full += numel(o->shape) == 256 * 10;
  std::cout << "softmax cross-entropy forward + backward: " << s.kernel_count << " kernels, " << stored_full
            << " stored (256, 10) buffers\n";
  // Only the gradient itself is a stored (256, 10) buffer: the probabilities are recomputed from the
  // logits and the small row statistics wherever they are needed, never written out.
  EXPECT_EQ(stored_full, 1);
}

namespace {
// The lowered kernels of `kind` in `outs`' schedule.
std::vector<ir::Kernel> lowered_kernels(const std::vector<Tensor>& outs, KernelKind kind) {
  const Schedule sch = schedule(outs);
  std::vector<ir::Kernel> all;
  for (const auto& k : sch.kernels) {
    if (k.kind != kind) continue;
    std::string why;
    const auto lowered = codegen::lower(
        k, [](const Node& n) { return n.realized() ? std::optional<View>(n.view) : std::nullopt; }, &why);
    EXPECT_TRUE(lowered) << why;
    if (lowered) all.push_back(lowered->kernel);
  }
  return all;
}

// The C++ source of the one reduce kernel of `outs`' schedule.
std::string reduce_source(const std::vector<Tensor>& outs) {
  const std::vector<ir::Kernel> ks = lowered_kernels(outs, KernelKind::Reduce);
  EXPECT_EQ(ks.size(), 1u);
  return ks.empty() ? "" : codegen::render_cpp(ks[0]);
}

// The kernel function's body in a rendered source (without the prelude's helpers and the signature).
std::string kernel_body(const std::string& src) { return src.substr(src.find("(void)scratch;")); }

// Fused against reference for each of `outs` (rebuilt by `make` with fusion off), within `rel`.
void expect_fused_matches(const std::vector<Tensor>& outs, const std::function<std::vector<Tensor>()>& make,
                          double rel = 1e-9) {
  const bool was = fusion_enabled();
  set_fusion(true);
  std::vector<std::vector<double>> fused;
  for (const Tensor& t : outs) fused.push_back(t.to_vector<double>());
  set_fusion(false);
  std::vector<std::vector<double>> ref;
  for (const Tensor& t : make()) ref.push_back(t.to_vector<double>());
  set_fusion(was);
  ASSERT_EQ(fused.size(), ref.size());
  for (size_t o = 0; o < ref.size(); ++o) {
    ASSERT_EQ(fused[o].size(), ref[o].size());
    for (size_t i = 0; i < ref[o].size(); ++i)
      EXPECT_NEAR(fused[o][i], ref[o][i], rel * (1 + std::abs(ref[o][i]))) << o << " " << i;
  }
}
}  // namespace

// Sums whose summands differ only by factors constant along the reduce axes (BatchNorm's backward:
// sum(dy) and sum(-(dy * scale)) per channel) accumulate once: the factors and the sign are applied
// to the one result in the epilogue. A factor that varies along the reduce axes stays in the sum.
TEST(Codegen, ASumsInvariantFactorsMoveToTheEpilogue) {
  const Tensor g = input({64, 32}, 43), s = input({1, 32}, 44), x = input({64, 32}, 45);
  const std::vector<Tensor> outs = {g.sum({0}), (-(g * s)).sum({0}), (s * g * 3.0).sum({0}),
                                    (g * x).sum({0})};
  const std::vector<ir::Kernel> reduces = lowered_kernels(outs, KernelKind::Reduce);
  EXPECT_EQ(reduces.size(), 1u);
  for (const ir::Kernel& k : reduces) {
    // sum(g) (with -s and 3s applied after) and sum(g * x)
    EXPECT_EQ(k.reductions.size(), 2u) << ir::to_string(k);
    int accums = 0;
    for (const ir::Inst& in : k.body) accums += in.kind == ir::InstKind::Accum;
    EXPECT_EQ(accums, 2);
  }
  expect_fused_matches(
      outs,
      [&] {
        return std::vector<Tensor>{g.sum({0}), (-(g * s)).sum({0}), (s * g * 3.0).sum({0}), (g * x).sum({0})};
      },
      1e-5);
}

// Max-pool backward over tiling windows: each window's first maximum does not depend on the
// position in the window, so the kernel computes it once per window in a loop of its own (window
// hoisting, render_cpp.cpp) and the loops over the window's positions only select; the gradient
// matches the reference bit for bit.
TEST(Codegen, MaxPoolBackwardComputesEachWindowsMaximumOnce) {
  const Tensor x = input({8, 16, 16, 32}, 43).detach().set_requires_grad();  // (N,H,W,C)
  const Tensor dy = input({8, 8, 8, 32}, 44);
  const Tensor dx = gradients(max_pool2d(x, 2), {x}, dy)[0];  // (8,16,16,32)
  int windowed = 0;
  for (const ir::Kernel& k : lowered_kernels({dx}, KernelKind::Elementwise))
    windowed += codegen::render_cpp(k).find("window hoisting") != std::string::npos;
  EXPECT_EQ(windowed, 1);
  const bool was = fusion_enabled();
  set_fusion(true);
  const std::vector<double> fused = dx.to_vector<double>();
  set_fusion(false);
  const std::vector<double> ref = gradients(max_pool2d(x, 2), {x}, dy)[0].to_vector<double>();
  set_fusion(was);
  ASSERT_EQ(fused.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(fused[i], ref[i]) << i;
}

// Hoisting (render_cpp.cpp): BatchNorm-like per-channel values are computed once per channel into
// arrays before the loops, and the constants (on no loop variable) once, as scalars in the
// function's scope: every fp_[] parameter is read before the first loop, none inside the
// vectorised one (as arrays, GELU's forward with BatchNorm applied loaded 20 of them per vector).
// The kernel matches the reference (within ae_expf's 1 ulp: GELU's erfc calls exp).
TEST(Codegen, ConstantsHoistAsScalarsPerChannelValuesAsArrays) {
  const Tensor x = input({8, 16, 16, 32}, 51), m = input({32}, 52), v = input({32}, 53);  // (N,H,W,C), (C)
  auto make = [&] { return std::vector<Tensor>{gelu((x - m) * (v * v + 1e-5).rsqrt() * 0.5 + 0.25)}; };
  const std::vector<ir::Kernel> ks = lowered_kernels(make(), KernelKind::Elementwise);
  ASSERT_EQ(ks.size(), 1u);
  const std::string body = kernel_body(codegen::render_cpp(ks[0]));
  const size_t first_loop = body.find("for (");
  ASSERT_NE(first_loop, std::string::npos) << body;
  EXPECT_NE(body.find("[32];"), std::string::npos) << "no per-channel array\n" << body;
  EXPECT_NE(body.find("fp_["), std::string::npos) << body;
  EXPECT_EQ(body.find("fp_[", first_loop), std::string::npos) << "a constant read inside the loops\n" << body;
  const bool was = fusion_enabled();
  set_fusion(true);
  const std::vector<double> fused = make()[0].to_vector<double>();
  set_fusion(false);
  const std::vector<double> ref = make()[0].to_vector<double>();
  set_fusion(was);
  ASSERT_EQ(fused.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_NEAR(fused[i], ref[i], 1e-6 * (1 + std::abs(ref[i]))) << i;
}

// Max-pool forward (a ReduceMax over the windows) gives each task a small block of outputs; their
// accumulators and results live in the task (in L1), not in scratch arrays the size of the whole
// output that would be written back to memory: the kernel asks for no scratch, and matches the
// reference.
TEST(Codegen, AnOwnedBlockOfOutputsAccumulatesInItsTask) {
  const Tensor x = input({8, 16, 16, 32}, 41);  // (N,H,W,C)
  const Tensor y = max_pool2d(x, 2);            // (8,8,8,32): 64 tasks of 8x32 outputs
  const std::string src = reduce_source({y});
  EXPECT_NE(src.find("aether_kernel_scratch(void) { return 0LL; }"), std::string::npos) << src;
  EXPECT_NE(src.find("base_"), std::string::npos) << src;
  const bool was = fusion_enabled();
  set_fusion(true);
  const std::vector<double> fused = y.to_vector<double>();
  set_fusion(false);
  const std::vector<double> ref = max_pool2d(x, 2).to_vector<double>();
  set_fusion(was);
  ASSERT_EQ(fused.size(), ref.size());
  for (size_t i = 0; i < ref.size(); ++i) ASSERT_EQ(fused[i], ref[i]) << i;
}

// At a batch of 256 a task per image would own a block too big for its stack (here 4x4x144
// outputs, 36 KiB of accumulators and results): the task index takes the next kept dim too, so
// each task owns one row of windows (4x144 outputs), still local, and the kernel asks for no
// scratch. It matches the reference.
TEST(Codegen, ABigOwnedBlockSplitsIntoRowsThatStayLocal) {
  const Tensor x = input({256, 8, 8, 144}, 49);  // (N,H,W,C)
  auto make = [&] { return std::vector<Tensor>{max_pool2d(x, 2)}; };
  const std::vector<Tensor> outs = make();
  const std::string src = reduce_source(outs);
  EXPECT_NE(src.find("aether_kernel_scratch(void) { return 0LL; }"), std::string::npos) << src;
  EXPECT_NE(src.find("s0[576];  // [576] accumulators"), std::string::npos) << src;
  EXPECT_NE(src.find("b_ < 1024;"), std::string::npos) << src;  // 256 images x 4 rows
  expect_fused_matches(outs, make, 0);
}

// An int32 sum accumulates in u32 lanes (it wraps to int32 at the end, so modulo 2^32 is exact),
// in both the slab and the owner paths, and wraps like the reference: the sums below overflow.
// A max's gradient counts its ties in int32 that way: the counted kernel has no double in it.
TEST(Codegen, Int32SumsAccumulateInU32AndWrapLikeTheReference) {
  std::vector<int32_t> v(64 * 48);
  for (size_t i = 0; i < v.size(); ++i) v[i] = int32_t(uint32_t(i * 2654435761u));
  const Tensor x = Tensor::from_vector<int32_t>(v, {64, 48});
  auto make = [&] {
    return std::vector<Tensor>{prim::reduce(Op::ReduceSum, x, {0}), prim::reduce(Op::ReduceSum, x, {1})};
  };
  for (const Tensor& t : make()) {
    const std::string src = reduce_source({t});
    const std::string body = kernel_body(src);
    EXPECT_NE(body.find("u32"), std::string::npos) << src;
    EXPECT_EQ(body.find("u64*"), std::string::npos) << src;
  }
  expect_fused_matches(make(), make, 0);

  std::vector<float> fv;
  for (const double d : input({8, 4, 4, 16}, 50).to_vector<double>()) fv.push_back(float(std::round(d * 2)));
  Tensor f = Tensor::from_vector<float>(fv, {8, 4, 4, 16});  // many ties
  f.set_requires_grad();
  const Tensor dy = input({8, 1, 1, 16}, 51);
  auto grad = [&] { return gradients(prim::reduce(Op::ReduceMax, f, {1, 2}), {f}, dy); };
  const Tensor m = prim::reduce(Op::ReduceMax, f, {1, 2});  // (8,1,1,16)
  m.realize();                                              // so the count's kernel can be lowered on its own
  const std::vector<Tensor> g = gradients(m, {f}, dy);
  int counts = 0;
  for (const ir::Kernel& k : lowered_kernels(g, KernelKind::Reduce)) {
    const std::string src = codegen::render_cpp(k);
    if (src.find("ReduceSum") == std::string::npos) continue;
    ++counts;
    const std::string body = kernel_body(src);
    EXPECT_NE(body.find("u32* __restrict__ a0"), std::string::npos) << src;
    EXPECT_EQ(body.find("double"), std::string::npos) << src;
  }
  EXPECT_EQ(counts, 1);
  expect_fused_matches(g, grad, 0);
}

// BatchNorm's statistics over (N, H, W, C) with rows of 32 channels: the rows of each task are
// summed into a local array of the row's 32 accumulators (two float64 sums: 512 bytes), added to
// the slab's partial sums once per task; with 128 channels (measured slower) they are not. Both
// match the reference.
TEST(Codegen, ChannelStatisticsAccumulateColumnBlocksAcrossRows) {
  for (const int64_t c : {32, 128}) {
    const Tensor x = input({16, 16, 16, c}, 46);
    auto make = [&] { return std::vector<Tensor>{x.sum({0, 1, 2}), (x * x).sum({0, 1, 2})}; };
    const std::vector<Tensor> outs = make();
    const std::string src = reduce_source(outs);
    EXPECT_EQ(src.find("l0[32];  // [32] this block's accumulators") != std::string::npos, c == 32)
        << c << "\n"
        << src;
    expect_fused_matches(outs, make);
  }
}

// A task that owns its outputs (a global pool over (N, H, W, C): N tasks of C sums) sums its rows in
// column blocks too, into its own accumulators.
TEST(Codegen, AnOwnerTaskSumsItsRowsInColumnBlocks) {
  const Tensor x = input({32, 16, 16, 32}, 48);
  auto make = [&] { return std::vector<Tensor>{x.sum({1, 2}), (x * x).sum({1, 2})}; };
  const std::vector<Tensor> outs = make();
  const std::string src = reduce_source(outs);
  EXPECT_NE(src.find("each task owns its outputs"), std::string::npos) << src;
  EXPECT_NE(src.find("this block's accumulators"), std::string::npos) << src;
  expect_fused_matches(outs, make);
}

// A reduce over the leading dims with many outputs per slab keeps the slabs' partial sums (zeroed,
// then combined by one thread) to 1/32 of the input's bytes: (16, 4, 4, 256) has 64 tasks but gets
// 2 slabs of 2 x 256 double sums for its 256 KiB.
TEST(Codegen, SlabPartialSumsStaySmallBesideTheInput) {
  const Tensor x = input({16, 4, 4, 256}, 47);
  auto make = [&] { return std::vector<Tensor>{x.sum({0, 1, 2}), (x * x).sum({0, 1, 2})}; };
  const std::vector<Tensor> outs = make();
  const std::string src = reduce_source(outs);
  const size_t at = src.find(" slabs][256]");
  ASSERT_NE(at, std::string::npos) << src;
  const size_t from = src.rfind('[', at);
  const int64_t slabs = std::stoll(src.substr(from + 1, at - from - 1));
  EXPECT_GE(slabs, 2);
  EXPECT_LE(slabs * 256 * 8 * 2 * 32, 16 * 4 * 4 * 256 * 4) << src;
  expect_fused_matches(outs, make);
}
