// einsum against a loop over every assignment of its letters (in double), for each way it computes
// (a product, a product summed, a matmul, diagonals, sums, '...', broadcasting); dtypes; errors.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "error_util.h"

using namespace aether;

namespace {

// The oracle: spec with letters only and "->"; out[o] = sum over every label assignment of the
// operands' products. A size-1 dim broadcasts (index 0).
std::vector<double> einsum_loops(const std::string& spec, const std::vector<Tensor>& xs) {
  const size_t arrow = spec.find("->");
  std::vector<std::string> terms;
  for (size_t s = 0;;) {
    const size_t c = spec.find(',', s);
    terms.push_back(spec.substr(s, std::min(c, arrow) - s));
    if (c == std::string::npos || c > arrow) break;
    s = c + 1;
  }
  const std::string out = spec.substr(arrow + 2);
  std::map<char, int64_t> size;
  std::vector<std::vector<double>> v;
  for (size_t i = 0; i < xs.size(); ++i) {
    v.push_back(xs[i].to_vector<double>());
    for (size_t d = 0; d < terms[i].size(); ++d)
      size[terms[i][d]] = std::max(size[terms[i][d]], xs[i].shape()[d]);
  }
  std::string labels;
  for (auto [c, n] : size) labels += c;
  int64_t n_out = 1;
  for (char c : out) n_out *= size[c];
  std::vector<double> r(size_t(n_out), 0.0);
  std::map<char, int64_t> at;
  for (char c : labels) at[c] = 0;
  for (auto [c, n] : size)
    if (n == 0) return r;  // no assignment: every sum is empty
  for (;;) {
    double p = 1;
    for (size_t i = 0; i < xs.size(); ++i) {
      int64_t off = 0;
      for (size_t d = 0; d < terms[i].size(); ++d) {
        const int64_t n = xs[i].shape()[d];
        off = off * n + (n == 1 ? 0 : at[terms[i][d]]);
      }
      p *= v[i][size_t(off)];
    }
    int64_t o = 0;
    for (char c : out) o = o * size[c] + at[c];
    r[size_t(o)] += p;
    size_t k = labels.size();  // next assignment, the last label fastest
    while (k > 0 && ++at[labels[k - 1]] == size[labels[k - 1]]) at[labels[--k]] = 0;
    if (k == 0) break;
  }
  return r;
}

Tensor randn(const Shape& s, uint64_t seed) {
  manual_seed(seed);
  return Tensor::randn(s);
}

void expect_matches(const std::string& spec, const std::vector<Tensor>& xs, const std::string& loops,
                    const Shape& shape) {
  SCOPED_TRACE(spec);
  const Tensor r = einsum(spec, xs);
  EXPECT_EQ(r.shape(), shape);
  const auto want = einsum_loops(loops, xs);
  const auto got = r.to_vector<double>();
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-4 * (1 + std::fabs(want[i]))) << i;
}

}  // namespace

TEST(Einsum, MatchesLoops) {
  const Tensor a = randn({2, 3}, 1), b = randn({3, 4}, 2), sq = randn({3, 3}, 3), v = randn({3}, 4);
  expect_matches("ij,jk->ik", {a, b}, "ij,jk->ik", {2, 4});  // matmul
  expect_matches("ij,jk", {a, b}, "ij,jk->ik", {2, 4});      // implicit output
  expect_matches("ij->ji", {a}, "ij->ji", {3, 2});
  expect_matches("ba", {a}, "ba->ab", {3, 2});  // implicit: ASCII order
  expect_matches("ij->", {a}, "ij->", {});
  expect_matches("ij->j", {a}, "ij->j", {3});
  expect_matches("ii->i", {sq}, "ii->i", {3});                              // diagonal
  expect_matches("ii", {sq}, "ii->", {});                                   // trace
  expect_matches("i,j->ij", {v, randn({2}, 5)}, "i,j->ij", {3, 2});         // outer
  expect_matches("i,i->", {v, randn({3}, 6)}, "i,i->", {});                 // dot
  expect_matches("ij,j->i", {a, v}, "ij,j->i", {2});                        // matrix-vector
  expect_matches("ij,ij->ij", {a, randn({2, 3}, 7)}, "ij,ij->ij", {2, 3});  // Hadamard
  expect_matches("bij,bjk->bik", {randn({2, 2, 3}, 8), randn({2, 3, 4}, 9)}, "bij,bjk->bik", {2, 2, 4});
  expect_matches("bhqd,bhkd->bhqk", {randn({2, 2, 3, 4}, 10), randn({2, 2, 5, 4}, 11)}, "bhqd,bhkd->bhqk",
                 {2, 2, 3, 5});  // attention scores
  expect_matches("ijk,jkl->il", {randn({2, 3, 2}, 12), randn({3, 2, 4}, 13)}, "ijk,jkl->il", {2, 4});
  expect_matches("bi,ij,bj->b", {randn({4, 3}, 14), sq, randn({4, 3}, 15)}, "bi,ij,bj->b", {4});  // bilinear
  expect_matches("ij,jk,kl->il", {a, b, randn({4, 2}, 16)}, "ij,jk,kl->il", {2, 2});
  expect_matches("iij->ji", {randn({3, 3, 2}, 17)}, "iij->ji", {2, 3});
  expect_matches("ij,ik->jk", {randn({4, 3}, 18), randn({4, 2}, 19)}, "ij,ik->jk", {3, 2});  // x^T y
  expect_matches("Ba,a", {a, v}, "Ba,a->B", {2});
}

TEST(Einsum, EllipsisAndBroadcasting) {
  const Tensor a = randn({2, 1, 2, 3}, 1), b = randn({5, 3, 4}, 2);
  // '...' aligned on the right: a's (2, 1) with b's (5).
  expect_matches("...ij,...jk->...ik", {a, b}, "xyij,yjk->xyik", {2, 5, 2, 4});
  expect_matches("...ij,...jk", {a, b}, "xyij,yjk->xyik", {2, 5, 2, 4});
  expect_matches("...ij->...ji", {a}, "xyij->xyji", {2, 1, 3, 2});
  expect_matches("i...->...", {a}, "ixyz->xyz", {1, 2, 3});
  expect_matches("...->...", {b}, "xyz->xyz", {5, 3, 4});
  // Size-1 dims stretch, as NumPy's einsum does: (1, 3) with (2, 3); a summed j of 1 and 3.
  expect_matches("ij,ij->ij", {randn({1, 3}, 3), randn({2, 3}, 4)}, "ij,ij->ij", {2, 3});
  expect_matches("ij,jk->ik", {randn({2, 1}, 5), randn({3, 4}, 6)}, "ij,jk->ik", {2, 4});
  expect_matches("i,i->", {randn({1}, 7), randn({3}, 8)}, "i,i->", {});
  expect_matches("bij,jk->bik", {randn({1, 2, 3}, 9), randn({3, 4}, 10)}, "bij,jk->bik", {1, 2, 4});
}

TEST(Einsum, DtypesAndEmptyDims) {
  const Tensor i = Tensor::from_vector<int64_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  const Tensor j = Tensor::from_vector<int64_t>({(int64_t(1) << 40) + 1, 1, 1, 0, 2, 1}, {3, 2});
  const Tensor r = einsum("ij,jk->ik", {i, j});
  EXPECT_EQ(r.dtype(), DType::int64);  // exact above 2^53: no float on the way
  const int64_t big = (int64_t(1) << 40) + 1;
  EXPECT_EQ(r.to_vector<int64_t>(),
            (std::vector<int64_t>{big + 2 + 6, 1 + 0 + 3, 4 * big + 5 + 12, 4 + 0 + 6}));
  EXPECT_EQ(einsum("ij->", {i.cast(DType::int32)}).dtype(), DType::int32);
  EXPECT_EQ(einsum("ij,jk->ik", {i.cast(DType::float32), j.cast(DType::float64)}).dtype(), DType::float64);
  // bool: true where some product is (NumPy's any of the ands).
  const Tensor p = Tensor::from_vector<bool>({true, false, false, false}, {2, 2});
  const Tensor q = Tensor::from_vector<bool>({false, true, true, false}, {2, 2});
  const Tensor pq = einsum("ij,jk->ik", {p, q});
  EXPECT_EQ(pq.dtype(), DType::boolean);
  EXPECT_EQ(pq.to_vector<bool>(), (std::vector<bool>{false, true, false, false}));
  // 16-bit floats come back in their dtype, summed in float32.
  const Tensor h = Tensor::full({1, 300}, 1.0, DType::bfloat16);
  const Tensor hh = einsum("ij,kj->ik", {h, h});
  EXPECT_EQ(hh.dtype(), DType::bfloat16);
  EXPECT_EQ(hh.item<float>(), 300.0f);  // bfloat16 steps of 2 near 300: a bfloat16 sum would stop at 256
  // Empty dims: a sum over nothing is 0.
  EXPECT_EQ(einsum("ij,jk->ik", {Tensor::ones({2, 0}), Tensor::ones({0, 3})}).to_vector<float>(),
            std::vector<float>(6, 0.0f));
  EXPECT_EQ(einsum("i->", {Tensor::ones({0})}).item<float>(), 0.0f);
  EXPECT_EQ(einsum("ij,jk->ik", {Tensor::ones({0, 2}), Tensor::ones({2, 3})}).shape(), (Shape{0, 3}));
}

TEST(Einsum, ErrorsNameTheProblem) {
  const Tensor a = Tensor::ones({2, 3}), b = Tensor::ones({4, 5}), sq = Tensor::ones({2, 3});
  auto msg = [](auto f) { return thrown(f); };
  const std::vector<std::pair<Thrown, std::string>> cases = {
      {msg([&] { einsum("ij,jk->ik", {a}); }), "names 2 operands, but 1 were given"},
      {msg([&] {
         einsum("ij,jk->ik", {a, b});
       }),
       "'j' has size 3 in operand 0 and 4 in operand 1"},
      {msg([&] { einsum("ijk->i", {a}); }), "operand 0 has 2 dims, but 'ijk' names 3"},
      {msg([&] { einsum("i->i", {a}); }), "operand 0 has 2 dims, but 'i' names 1"},
      {msg([&] { einsum("i1->i", {a}); }), "'1' is not a letter"},
      {msg([&] { einsum("i..j->i", {a}); }), "a '.' outside one '...'"},
      {msg([&] { einsum("ij->ii", {a}); }), "the output repeats 'i'"},
      {msg([&] { einsum("ij->k", {a}); }), "the output's 'k' is in no operand"},
      {msg([&] { einsum("ij->i->j", {a}); }), "more than one '->'"},
      {msg([&] { einsum("...j->j", {a}); }), "needs '...'"},
      {msg([&] { einsum("ii->i", {sq}); }), "'i' is repeated in operand 0 with sizes 2 and 3"},
  };
  for (const auto& [t, part] : cases) {
    EXPECT_EQ(t.kind, ErrorKind::value) << part;
    EXPECT_TRUE(contains(t.message, "einsum: ")) << t.message;
    EXPECT_TRUE(contains(t.message, part)) << t.message << " lacks " << part;
  }
}
