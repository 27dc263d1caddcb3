// Random number tests: Philox4x32-10 known-answer vectors (Random123's kat_vectors), the element
// layout of rand(), reproducibility from manual_seed, independence from the OpenMP thread count,
// ranges for every float dtype, rough moments of rand/randn/randint.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <vector>

#include "aether/aether.h"

// OpenMP's runtime API, declared here so the test needs no OpenMP compile flags (the library links it).
extern "C" void omp_set_num_threads(int n);
extern "C" int omp_get_max_threads();

using namespace aether;

namespace {

// Raw bytes of a tensor in its own dtype, for bitwise comparisons.
std::vector<unsigned char> bytes(const Tensor& t) {
  std::vector<unsigned char> b(static_cast<size_t>(t.numel() * dtype_size(t.dtype())));
  t.copy_to(b.data(), t.dtype());
  return b;
}

struct Moments {
  double mean, var, lo, hi;
};
Moments moments(const std::vector<double>& v) {
  double s = 0, s2 = 0;
  for (double x : v) s += x;
  const double m = s / double(v.size());
  for (double x : v) s2 += (x - m) * (x - m);
  return {m, s2 / double(v.size()), *std::min_element(v.begin(), v.end()),
          *std::max_element(v.begin(), v.end())};
}

}  // namespace

// Random123 kat_vectors, "philox4x32 10" lines.
TEST(Philox, KnownAnswerVectors) {
  using A4 = std::array<uint32_t, 4>;
  EXPECT_EQ(philox4x32_10({0, 0, 0, 0}, {0, 0}), (A4{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}));
  EXPECT_EQ(philox4x32_10({0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}, {0xffffffff, 0xffffffff}),
            (A4{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}));
  EXPECT_EQ(philox4x32_10({0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}, {0xa4093822, 0x299f31d0}),
            (A4{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}));
}

TEST(Philox, CounterLayout) {
  // philox_bits(seed, stream, index): counter (index lo, index hi, stream lo, stream hi), key (seed lo, hi).
  const uint64_t seed = 0x0123456789abcdefull, stream = 0xfedcba9876543210ull, index = 0x1122334455667788ull;
  EXPECT_EQ(philox_bits(seed, stream, index),
            philox4x32_10({0x55667788u, 0x11223344u, 0x76543210u, 0xfedcba98u}, {0x89abcdefu, 0x01234567u}));
}

// rand() element i of the first draw after manual_seed(s) is built from Philox(s, stream 0, i).
TEST(Random, RandElementsFollowTheDocumentedLayout) {
  manual_seed(77);
  const auto f32 = Tensor::rand({5}).to_vector<float>();
  const auto f64 = Tensor::rand({5}, DType::float64).to_vector<double>();
  for (uint64_t i = 0; i < 5; ++i) {
    const auto b0 = philox4x32_10({uint32_t(i), 0, 0, 0}, {77, 0});
    EXPECT_EQ(f32[i], float(b0[0] >> 8) / 16777216.0f) << i;
    const auto b1 = philox4x32_10({uint32_t(i), 0, 1, 0}, {77, 0});  // the second draw: stream 1
    const uint64_t bits53 = (uint64_t(b1[0]) << 21) | (b1[1] >> 11);
    EXPECT_EQ(f64[i], double(bits53) / 9007199254740992.0) << i;
  }
}

TEST(Random, ReproducibleFromSeed) {
  for (DType t : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
    manual_seed(123);
    const Tensor a = Tensor::rand({64}, t), b = Tensor::randn({64}, t);
    const Tensor c = Tensor::randint(-5, 9, {64});
    manual_seed(123);
    const Tensor a2 = Tensor::rand({64}, t), b2 = Tensor::randn({64}, t);
    const Tensor c2 = Tensor::randint(-5, 9, {64});
    EXPECT_EQ(bytes(a), bytes(a2)) << dtype_name(t);
    EXPECT_EQ(bytes(b), bytes(b2)) << dtype_name(t);
    EXPECT_EQ(bytes(c), bytes(c2)) << dtype_name(t);
    manual_seed(124);
    EXPECT_NE(bytes(Tensor::rand({64}, t)), bytes(a)) << dtype_name(t);
  }
  // Saving and restoring the generator state replays the same draws.
  manual_seed(5);
  Tensor::rand({3});
  const GeneratorState st = generator_state();
  const auto x = Tensor::rand({16}).to_vector<float>();
  set_generator_state(st);
  EXPECT_EQ(Tensor::rand({16}).to_vector<float>(), x);
  EXPECT_EQ(current_seed(), 5u);
}

TEST(Random, SuccessiveCallsDiffer) {
  manual_seed(9);
  const auto a = Tensor::rand({32}).to_vector<float>();
  const auto b = Tensor::rand({32}).to_vector<float>();
  EXPECT_NE(a, b);
  const auto c = Tensor::randn({32}).to_vector<float>();
  const auto d = Tensor::randn({32}).to_vector<float>();
  EXPECT_NE(c, d);
  // The elements of one draw differ from each other too.
  std::vector<float> s = a;
  std::sort(s.begin(), s.end());
  EXPECT_EQ(std::adjacent_find(s.begin(), s.end()), s.end());
}

TEST(Random, IndependentOfThreadCount) {
  const int saved = omp_get_max_threads();
  auto draw = [](int threads) {
    omp_set_num_threads(threads);
    manual_seed(2024);
    std::vector<std::vector<unsigned char>> out;
    for (DType t : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
      out.push_back(bytes(Tensor::rand({10007}, t)));
      out.push_back(bytes(Tensor::randn({10007}, t)));
    }
    out.push_back(bytes(Tensor::randint(0, 1000, {10007}, DType::int32)));
    out.push_back(bytes(Tensor::uniform({10007}, -3, 2)));
    return out;
  };
  const auto one = draw(1), two = draw(2), four = draw(4);
  omp_set_num_threads(saved);
  EXPECT_EQ(one, two);
  EXPECT_EQ(one, four);
}

TEST(Random, UniformRangeAndMoments) {
  manual_seed(31);
  const int64_t n = 20000;
  for (DType t : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
    const Tensor r = Tensor::rand({n}, t);
    EXPECT_EQ(r.dtype(), t);
    const auto m = moments(r.to_vector<double>());
    EXPECT_GE(m.lo, 0.0) << dtype_name(t);
    EXPECT_LT(m.hi, 1.0) << dtype_name(t);  // never rounds up to 1, even in 16-bit floats
    EXPECT_NEAR(m.mean, 0.5, 0.01) << dtype_name(t);
    EXPECT_NEAR(m.var, 1.0 / 12, 0.005) << dtype_name(t);
  }
  const auto u = moments(Tensor::uniform({n}, -3, 5).to_vector<double>());
  EXPECT_GE(u.lo, -3.0);
  EXPECT_LT(u.hi, 5.0);
  EXPECT_NEAR(u.mean, 1.0, 0.08);
  EXPECT_NEAR(u.var, 64.0 / 12, 0.3);
  EXPECT_THROW(Tensor::rand({2}, DType::int32), Error);
}

TEST(Random, NormalMoments) {
  manual_seed(32);
  for (DType t : {DType::float32, DType::float64, DType::float16, DType::bfloat16}) {
    const Tensor r = Tensor::randn({20000}, t);
    EXPECT_EQ(r.dtype(), t);
    const auto v = r.to_vector<double>();
    const auto m = moments(v);
    EXPECT_NEAR(m.mean, 0.0, 0.03) << dtype_name(t);
    EXPECT_NEAR(m.var, 1.0, 0.05) << dtype_name(t);
    EXPECT_TRUE(std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); })) << dtype_name(t);
    // Tails: about 4.55% beyond 2 sigma.
    const double beyond =
        double(std::count_if(v.begin(), v.end(), [](double x) { return std::fabs(x) > 2; }));
    EXPECT_NEAR(beyond / double(v.size()), 0.0455, 0.008) << dtype_name(t);
  }
}

TEST(Random, RandintRangeAndUniformity) {
  manual_seed(33);
  for (auto [lo, hi] : {std::pair<int64_t, int64_t>{0, 10}, {-3, 3}, {-7, -2}, {100, 101}}) {
    for (DType t : {DType::int64, DType::int32}) {
      const Tensor r = Tensor::randint(lo, hi, {12000}, t);
      EXPECT_EQ(r.dtype(), t);
      std::map<int64_t, int> counts;
      for (int64_t v : r.to_vector<int64_t>()) ++counts[v];
      EXPECT_EQ(int64_t(counts.size()), hi - lo) << lo << ".." << hi;
      EXPECT_EQ(counts.begin()->first, lo);
      EXPECT_EQ(counts.rbegin()->first, hi - 1);
      const double expect = 12000.0 / double(hi - lo);
      for (auto [v, c] : counts) EXPECT_NEAR(c, expect, 5 * std::sqrt(expect) + 1) << "value " << v;
    }
  }
  const auto u8 = Tensor::randint(250, 256, {600}, DType::uint8).to_vector<int>();
  EXPECT_EQ(*std::min_element(u8.begin(), u8.end()), 250);
  EXPECT_EQ(*std::max_element(u8.begin(), u8.end()), 255);
  EXPECT_THROW(Tensor::randint(3, 3, {2}), Error);
  EXPECT_THROW(Tensor::randint(0, 3, {2}, DType::float32), Error);
}
