// Forward tests of the ops along one axis (src/ops/along_axis.cpp: cumsum, cumprod (and prod), argsort, sort,
// topk, take_along_axis) against plain loops and std::stable_sort here, for every dtype, every axis, ties,
// NaN, empty axes and bad input. Gradients are in grad_test.cpp.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "error_util.h"

using namespace aether;

namespace {

const double kNaN = std::numeric_limits<double>::quiet_NaN();
const DType kAll[] = {DType::float32, DType::float16, DType::bfloat16, DType::float64,
                      DType::int32,   DType::int64,   DType::uint8,    DType::boolean};

// Values of x (shape s) as lines along `axis`: for each line, the flat positions of its elements.
std::vector<std::vector<size_t>> lines(const Shape& s, int axis) {
  int64_t pre = 1, post = 1;
  for (int d = 0; d < axis; ++d) pre *= s[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d) post *= s[d];
  std::vector<std::vector<size_t>> out;
  for (int64_t p = 0; p < pre; ++p)
    for (int64_t q = 0; q < post; ++q) {
      std::vector<size_t> line;
      for (int64_t i = 0; i < s[size_t(axis)]; ++i)
        line.push_back(size_t((p * s[size_t(axis)] + i) * post + q));
      out.push_back(line);
    }
  return out;
}

// The stable order of one line: NaN is the largest value.
std::vector<int64_t> order(const std::vector<double>& v, bool descending) {
  std::vector<int64_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  auto less = [&](int64_t a, int64_t b) {
    const double x = v[size_t(a)], y = v[size_t(b)];
    if (std::isnan(x) || std::isnan(y)) return !std::isnan(x) && std::isnan(y);
    return x < y;
  };
  std::stable_sort(idx.begin(), idx.end(),
                   [&](int64_t a, int64_t b) { return descending ? less(b, a) : less(a, b); });
  return idx;
}

// v as dtype t stores it: integers truncated (uint8 of |v|), bools v != 0; v is exact in every float
// dtype (small multiples of 1/2).
std::vector<double> stored(const std::vector<double>& v, DType t) {
  std::vector<double> out;
  for (double x : v)
    out.push_back(t == DType::boolean ? double(x != 0)
                  : t == DType::uint8 ? std::trunc(std::fabs(x))
                  : is_float(t)       ? x
                                      : std::trunc(x));
  return out;
}

Tensor make(const std::vector<double>& v, const Shape& s, DType t) {
  return Tensor::from_vector<double>(v, s).cast(t).realize();
}

void expect_same(const std::vector<double>& got, const std::vector<double>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(std::isnan(want[i]) ? std::isnan(got[i]) : got[i] == want[i])) {
      ADD_FAILURE() << what << " [" << i << "]: got " << got[i] << ", want " << want[i];
      return;
    }
}

}  // namespace

// argsort / sort / topk: every dtype, every axis, both directions, against std::stable_sort.
TEST(Ops, SortArgsortTopk) {
  const Shape s{3, 5, 4};
  std::vector<double> v(60);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double((i * 7) % 11) - 3;  // many ties
  for (DType t : kAll) {
    const std::vector<double> x = stored(v, t);
    const Tensor tx = make(x, s, t);  // (x is what t holds)
    for (int axis = 0; axis < 3; ++axis)
      for (bool desc : {false, true}) {
        const std::string what = detail::cat(dtype_name(t), " axis ", axis, desc ? " descending" : "");
        std::vector<double> want_idx(x.size()), want_val(x.size());
        std::vector<double> top_idx, top_val;  // k = 2 along the axis, in the same layout
        const int64_t k = 2;
        Shape ks = s;
        ks[size_t(axis)] = k;
        top_idx.assign(size_t(numel(ks)), 0);
        top_val.assign(size_t(numel(ks)), 0);
        const auto kl = lines(ks, axis);
        const auto ls = lines(s, axis);
        for (size_t l = 0; l < ls.size(); ++l) {
          std::vector<double> line;
          for (size_t p : ls[l]) line.push_back(x[p]);
          const std::vector<int64_t> o = order(line, desc);
          for (size_t i = 0; i < o.size(); ++i) {
            want_idx[ls[l][i]] = double(o[i]);
            want_val[ls[l][i]] = line[size_t(o[i])];
          }
          for (size_t i = 0; i < size_t(k); ++i) {
            top_idx[kl[l][i]] = double(o[i]);
            top_val[kl[l][i]] = line[size_t(o[i])];
          }
        }
        const Tensor ai = tx.argsort(axis, desc);
        ASSERT_EQ(ai.dtype(), DType::int64);
        ASSERT_EQ(ai.shape(), s);
        expect_same(ai.to_vector<double>(), want_idx, "argsort " + what);
        const auto [sv, si] = tx.sort(axis - 3, desc);  // negative axes too
        ASSERT_EQ(sv.dtype(), t);
        expect_same(sv.to_vector<double>(), want_val, "sort values " + what);
        expect_same(si.to_vector<double>(), want_idx, "sort indices " + what);
        const auto [tv, ti] = tx.topk(k, axis, /*largest=*/desc);
        ASSERT_EQ(tv.shape(), ks);
        expect_same(tv.to_vector<double>(), top_val, "topk values " + what);
        expect_same(ti.to_vector<double>(), top_idx, "topk indices " + what);
      }
  }
}

// NaN is the largest value: last ascending (NumPy), first descending (PyTorch); signed zeros and
// infinities keep their order; equal values keep their positions.
TEST(Ops, SortNaNInfinitiesAndTies) {
  const double inf = std::numeric_limits<double>::infinity();
  const std::vector<double> v = {3, kNaN, -inf, 1, kNaN, inf, 1, -0.0, 0.0, -2};
  for (DType t : {DType::float32, DType::float16, DType::bfloat16, DType::float64}) {
    const Tensor x = make(v, {10}, t);
    expect_same(x.argsort().to_vector<double>(), {2, 9, 7, 8, 3, 6, 0, 5, 1, 4}, dtype_name(t));
    expect_same(x.argsort(0, true).to_vector<double>(), {1, 4, 5, 0, 3, 6, 7, 8, 9, 2}, dtype_name(t));
    expect_same(x.sort().first.to_vector<double>(), {-inf, -2, -0.0, 0, 1, 1, 3, inf, kNaN, kNaN},
                dtype_name(t));
    expect_same(x.topk(3).first.to_vector<double>(), {kNaN, kNaN, inf}, dtype_name(t));
  }
  // Integers at the ends of their range sort as integers (no float rounding: 2^53 + 1 > 2^53).
  const Tensor big = Tensor::from_vector<int64_t>({(int64_t(1) << 53) + 1, int64_t(1) << 53,
                                                   std::numeric_limits<int64_t>::min(),
                                                   std::numeric_limits<int64_t>::max()});
  EXPECT_EQ(big.argsort().to_vector<int64_t>(), (std::vector<int64_t>{2, 1, 0, 3}));
}

// topk of long rows takes the partial sort (k < L / 8): the same positions as the stable order's
// first k, ties and NaN included, both directions; so does every k up to L.
TEST(Ops, TopkOfLongRowsIsTheStableOrdersStart) {
  const int64_t l = 100;
  std::vector<double> v(size_t(3 * l));
  for (size_t i = 0; i < v.size(); ++i) v[i] = double((i * 37) % 11) - 5;  // each value about 9 times a row
  v[7] = v[150] = v[151] = kNaN;
  for (DType t : {DType::float32, DType::bfloat16, DType::int32})
    for (bool largest : {true, false})
      for (int64_t k : {1, 5, 11, 12, 60, 100}) {
        std::vector<double> x = v;
        if (t == DType::int32)
          for (double& e : x) e = std::isnan(e) ? 6 : e;  // integers have no NaN: the largest value instead
        std::vector<double> want_i, want_v;
        for (int64_t r = 0; r < 3; ++r) {
          const std::vector<double> line(x.begin() + r * l, x.begin() + (r + 1) * l);
          const auto o = order(line, largest);
          for (int64_t j = 0; j < k; ++j) {
            want_i.push_back(double(o[size_t(j)]));
            want_v.push_back(line[size_t(o[size_t(j)])]);
          }
        }
        const auto [tv, ti] = make(x, {3, l}, t).topk(k, 1, largest);
        const std::string what = detail::cat(dtype_name(t), largest ? " largest " : " smallest ", k);
        expect_same(ti.to_vector<double>(), want_i, "topk indices " + what);
        expect_same(tv.to_vector<double>(), want_v, "topk values " + what);
      }
}

TEST(Ops, SortEdgeCasesAndErrors) {
  // Empty axes and a 1-element axis; a 0-d tensor has no axis.
  EXPECT_EQ(Tensor::zeros({3, 0}).argsort().shape(), (Shape{3, 0}));
  EXPECT_EQ(Tensor::zeros({0, 4}).sort(1).first.shape(), (Shape{0, 4}));
  expect_same(Tensor::from_vector<float>({5, 6}, {2, 1}).argsort(1).to_vector<double>(), {0, 0}, "1 wide");
  EXPECT_EQ(Tensor::zeros({2, 3}).topk(0, 1).first.shape(), (Shape{2, 0}));
  EXPECT_THROW(Tensor::scalar(1.0).argsort(), Error);
  EXPECT_THROW(Tensor::zeros({2, 3}).argsort(2), Error);
  try {
    Tensor::zeros({2, 3}).topk(4, 1);
    ADD_FAILURE() << "k larger than the axis accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("k must be in [0, 3]"), std::string::npos) << e.what();
  }
  EXPECT_THROW(Tensor::zeros({2, 3}).topk(-1, 1), Error);
  // A sort inside a bigger graph: the values feed arithmetic, and ranks come from argsort twice.
  const Tensor x = Tensor::from_vector<float>({0.5f, -1, 2, 0});
  expect_same((x.sort().first * 2 + 1).to_vector<double>(), {-1, 1, 2, 5}, "sort then arithmetic");
  expect_same(x.argsort().argsort().to_vector<double>(), {2, 0, 3, 1}, "ranks");
}

// cumsum: every dtype and axis against a running sum in double (ints and bools sum in int64).
TEST(Ops, Cumsum) {
  const Shape s{3, 4, 5};
  std::vector<double> v(60);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double((i * 5) % 9) - 2;
  for (DType t : kAll) {
    const std::vector<double> x = stored(v, t);
    const Tensor tx = make(x, s, t);  // (x is what t holds)
    const DType want_t = is_float(t) ? t : DType::int64;
    for (int axis = -3; axis < 3; ++axis) {
      std::vector<double> want(x.size());
      for (const auto& line : lines(s, axis < 0 ? axis + 3 : axis)) {
        double acc = 0;
        for (size_t p : line) want[p] = acc += x[p];  // small integers: exact in every float dtype
      }
      const Tensor c = tx.cumsum(axis);
      ASSERT_EQ(c.dtype(), want_t) << dtype_name(t);
      ASSERT_EQ(c.shape(), s);
      expect_same(c.to_vector<double>(), want, detail::cat("cumsum ", dtype_name(t), " axis ", axis));
    }
  }
  // Each running sum is rounded once from the exact sum: 2^24 + 1 + 1 in float32 is 2^24 + 2, where
  // float32 sums would stay at 2^24.
  const Tensor f = Tensor::from_vector<float>({16777216.0f, 1, 1});
  EXPECT_EQ(f.cumsum(0).to_vector<float>(), (std::vector<float>{16777216.0f, 16777216.0f, 16777218.0f}));
  // float64 sums in float64 (never through float32); int64 wraps.
  const Tensor d = Tensor::from_vector<double>({1, 1e-10, 1e-10});
  EXPECT_EQ(d.cumsum(0).to_vector<double>(), (std::vector<double>{1, 1 + 1e-10, 1 + 1e-10 + 1e-10}));
  const int64_t top = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(Tensor::from_vector<int64_t>({top, 1}).cumsum(0).to_vector<int64_t>(),
            (std::vector<int64_t>{top, std::numeric_limits<int64_t>::min()}));
  EXPECT_EQ(Tensor::zeros({0, 3}).cumsum(0).shape(), (Shape{0, 3}));
  EXPECT_THROW(Tensor::scalar(1.0).cumsum(0), Error);
}

// cumprod and prod against loops, every dtype and axis (products of -1..3 over at most 5 elements:
// |p| <= 243, exact in every dtype, bfloat16's 8 bits included); int64 wraps; the empty product is 1.
TEST(Ops, CumprodAndProd) {
  const Shape s{3, 4, 5};
  std::vector<double> v(60);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double((i * 7) % 5) - 1;  // -1, 0, 1, 2, 3
  for (DType t : kAll) {
    const std::vector<double> x = stored(v, t);
    const Tensor tx = make(x, s, t);  // (x is what t holds)
    const DType want_t = is_float(t) ? t : DType::int64;
    for (int axis = -3; axis < 3; ++axis) {
      std::vector<double> want(x.size());
      Shape ps = s;  // prod's shape: the axis removed
      ps.erase(ps.begin() + (axis < 0 ? axis + 3 : axis));
      std::vector<double> want_prod;
      for (const auto& line : lines(s, axis < 0 ? axis + 3 : axis)) {
        double acc = 1;
        for (size_t p : line) want[p] = acc *= x[p];  // |products| <= 3^5: exact in every dtype
        want_prod.push_back(acc);
      }
      const std::string what = detail::cat(dtype_name(t), " axis ", axis);
      const Tensor c = tx.cumprod(axis), p = tx.prod({axis});
      ASSERT_EQ(c.dtype(), want_t) << what;
      ASSERT_EQ(c.shape(), s);
      expect_same(c.to_vector<double>(), want, "cumprod " + what);
      ASSERT_EQ(p.dtype(), want_t) << what;
      ASSERT_EQ(p.shape(), ps);
      // prod's lines come in the order of the dims kept: the loop's order
      expect_same(p.to_vector<double>(), want_prod, "prod " + what);
    }
  }
  // Several axes, keepdim, all axes; each product rounded once (float32: 4097 * 4097 * 3 is
  // 50,356,227 exactly, 50,356,228 rounded once; two float32 roundings give 50,356,224).
  const Tensor m = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}, {2, 3, 2});
  EXPECT_EQ(m.prod({0, 2}).to_vector<double>(),
            (std::vector<double>{1 * 2 * 7 * 8, 3 * 4 * 9 * 10, 5 * 6 * 11 * 12}));
  EXPECT_EQ(m.prod({0, 2}, true).shape(), (Shape{1, 3, 1}));
  EXPECT_EQ(m.prod().item<double>(), 479001600.0);
  EXPECT_EQ(Tensor::from_vector<float>({4097, 4097, 3}).prod().item<float>(), 50356228.0f);
  const int64_t big = int64_t(1) << 62;
  EXPECT_EQ(Tensor::from_vector<int64_t>({big, 4, 3}).cumprod(0).to_vector<int64_t>(),
            (std::vector<int64_t>{big, 0, 0}));  // 2^64 wraps to 0
  EXPECT_EQ(Tensor::zeros({2, 0}).prod({1}).to_vector<float>(), (std::vector<float>{1, 1}));
  EXPECT_EQ(Tensor::zeros({0, 3}).cumprod(0).shape(), (Shape{0, 3}));
  EXPECT_EQ(Tensor::scalar(2.5).prod().item<float>(), 2.5f);
  EXPECT_THROW(Tensor::scalar(1.0).cumprod(0), Error);
}

// take_along_axis: NumPy's rule, broadcasting in the other dims, negative indices, errors.
TEST(Ops, TakeAlongAxis) {
  const Shape s{2, 3, 4};
  std::vector<double> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i) * 1.5 - 7;
  for (DType t : kAll) {
    const std::vector<double> x = stored(v, t);
    const Tensor tx = make(x, s, t);  // (x is what t holds)
    // Along axis 1 with indices (2, 2, 1): broadcast over axis 2 (4 columns).
    const std::vector<int64_t> ix = {2, -1, 0, 1};
    const Tensor r = tx.take_along_axis(Tensor::from_vector<int64_t>(ix, {2, 2, 1}), 1);
    ASSERT_EQ(r.dtype(), t);
    ASSERT_EQ(r.shape(), (Shape{2, 2, 4}));
    std::vector<double> want;
    for (int64_t a = 0; a < 2; ++a)
      for (int64_t k = 0; k < 2; ++k)
        for (int64_t c = 0; c < 4; ++c) {
          const int64_t i = ix[size_t(a * 2 + k)];
          want.push_back(x[size_t((a * 3 + (i < 0 ? i + 3 : i)) * 4 + c)]);
        }
    expect_same(r.to_vector<double>(), want, detail::cat("take_along_axis ", dtype_name(t)));
  }
  // The argsort of a line takes its sorted values (NumPy's example), int32 indices too.
  const Tensor x = Tensor::from_vector<float>({10, 30, 20, 60, 40, 50}, {2, 3});
  expect_same(x.take_along_axis(x.argsort(1).cast(DType::int32), 1).to_vector<double>(),
              {10, 20, 30, 40, 50, 60}, "sorted by argsort");
  // Errors: another ndim, float indices, out of bounds (an index error naming it, when computed).
  EXPECT_THROW(x.take_along_axis(Tensor::from_vector<int64_t>({0}), 1), Error);
  EXPECT_THROW(x.take_along_axis(Tensor::from_vector<float>({0}, {1, 1}), 1), Error);
  EXPECT_THROW(x.take_along_axis(Tensor::from_vector<int64_t>({0, 0}, {1, 2}), 0), Error);  // 2 vs 3 columns
  for (int64_t bad : {3, -4}) {
    const Thrown e = thrown([&] {
      x.take_along_axis(Tensor::from_vector<int64_t>({0, bad}, {2, 1}), 1).realize();
    });
    EXPECT_EQ(e.kind, ErrorKind::index) << "index " << bad << ": " << e.message;
    EXPECT_TRUE(contains(e.message, detail::cat("index ", bad, " is out of bounds for an axis of size 3")))
        << e.message;
  }
}

// index_add: every float dtype and axis against a loop, repeated and negative indices; errors.
TEST(Ops, IndexAdd) {
  const Shape s{3, 4, 2};
  std::vector<double> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i % 7) - 3;
  const std::vector<int64_t> idx = {1, -1, 1, 0, 1};  // 1 three times, the last, 0
  for (DType t : {DType::float32, DType::float16, DType::bfloat16, DType::float64})
    for (int axis = 0; axis < 3; ++axis) {
      const int64_t n = s[size_t(axis)];
      Shape vs = s;
      vs[size_t(axis)] = int64_t(idx.size());
      std::vector<double> add(size_t(numel(vs)));
      for (size_t i = 0; i < add.size(); ++i) add[i] = double(i % 5) * 0.5 - 1;
      std::vector<double> want = v;
      const auto to = lines(s, axis), from = lines(vs, axis);  // the same lines, n and 5 long
      for (size_t l = 0; l < to.size(); ++l)
        for (size_t k = 0; k < idx.size(); ++k)
          want[to[l][size_t(idx[k] < 0 ? idx[k] + n : idx[k])]] += add[from[l][k]];
      const Tensor r = make(v, s, t).index_add(axis, Tensor::from_vector<int64_t>(idx), make(add, vs, t));
      ASSERT_EQ(r.dtype(), t);
      expect_same(r.to_vector<double>(), want, detail::cat("index_add ", dtype_name(t), " axis ", axis));
    }
  const Tensor x = Tensor::zeros({3, 2});
  // float64 values into float32: cast first; int32 indices; an empty index list adds nothing.
  expect_same(x.index_add(0, Tensor::from_vector<int32_t>({2}), Tensor::ones({1, 2}, DType::float64))
                  .to_vector<double>(),
              {0, 0, 0, 0, 1, 1}, "int32 indices");
  expect_same(x.index_add(1, Tensor::zeros({0}, DType::int64), Tensor::zeros({3, 0})).to_vector<double>(),
              std::vector<double>(6, 0), "no indices");
  EXPECT_THROW(Tensor::zeros({3}, DType::int32)
                   .index_add(0, Tensor::from_vector<int64_t>({0}), Tensor::ones({1}, DType::int32)),
               Error);
  const Thrown shape = thrown([&] {
    x.index_add(0, Tensor::from_vector<int64_t>({0, 1}), Tensor::ones({2, 3}));
  });
  EXPECT_TRUE(contains(shape.message, "values must have shape (2, 2)")) << shape.message;
  const Thrown bad = thrown([&] {
    x.index_add(0, Tensor::from_vector<int64_t>({3}), Tensor::ones({1, 2})).realize();
  });
  EXPECT_EQ(bad.kind, ErrorKind::index) << bad.message;
  EXPECT_TRUE(contains(bad.message, "index 3 is out of bounds for an axis of size 3")) << bad.message;
}
