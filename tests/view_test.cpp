// View and movement-op tests: reshape, permute/transpose, expand, slice (steps of both signs,
// negative indices), pad, flip, squeeze/unsqueeze, flatten, chains of views, cat/stack and
// contiguous. Expected values come from a small dense reference array written in this file; the
// no-copy rule is checked through Buffer sharing of realized nodes.
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <random>
#include <vector>

#include "aether/aether.h"

using namespace aether;

namespace {

// ---- a dense row-major reference array -------------------------------------------------------------
struct Ref {
  Shape shape;
  std::vector<double> data;

  static Ref iota(const Shape& s) {
    Ref r{s, std::vector<double>(size_t(numel(s)))};
    for (size_t i = 0; i < r.data.size(); ++i) r.data[i] = double(i) + 1;  // 1-based: 0 means "padding"
    return r;
  }
  Shape strides() const {
    Shape st(shape.size(), 1);
    for (int d = int(shape.size()) - 2; d >= 0; --d) st[d] = st[d + 1] * shape[d + 1];
    return st;
  }
  // Builds a new array of shape `s` whose element at multi-index i is f(i).
  static Ref build(const Shape& s, const std::function<double(const std::vector<int64_t>&)>& f) {
    Ref r{s, {}};
    std::vector<int64_t> idx(s.size(), 0);
    const int64_t n = numel(s);
    for (int64_t k = 0; k < n; ++k) {
      r.data.push_back(f(idx));
      for (int d = int(s.size()) - 1; d >= 0; --d) {
        if (++idx[d] < s[d]) break;
        idx[d] = 0;
      }
    }
    return r;
  }
  double at(const std::vector<int64_t>& idx) const {
    const Shape st = strides();
    int64_t off = 0;
    for (size_t d = 0; d < idx.size(); ++d) off += idx[d] * st[d];
    return data[size_t(off)];
  }
  Ref permute(const std::vector<int64_t>& p) const {
    Shape s;
    for (int64_t a : p) s.push_back(shape[size_t(a)]);
    return build(s, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> j(i.size());
      for (size_t d = 0; d < p.size(); ++d) j[size_t(p[d])] = i[d];
      return at(j);
    });
  }
  // Python semantics of x[start:stop:step] along `axis`.
  Ref slice(int axis, int64_t start, int64_t stop, int64_t step) const {
    const int64_t n = shape[size_t(axis)];
    std::vector<int64_t> picks;
    if (step > 0) {
      auto norm = [&](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t(0), n); };
      for (int64_t i = norm(start); i < norm(stop); i += step) picks.push_back(i);
    } else {
      auto norm = [&](int64_t v) { return std::clamp(v < 0 ? v + n : v, int64_t(-1), n - 1); };
      for (int64_t i = norm(start); i > norm(stop); i += step) picks.push_back(i);
    }
    Shape s = shape;
    s[size_t(axis)] = int64_t(picks.size());
    return build(s, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> j = i;
      j[size_t(axis)] = picks[size_t(i[size_t(axis)])];
      return at(j);
    });
  }
  Ref pad(const std::vector<std::pair<int64_t, int64_t>>& p) const {
    Shape s = shape;
    for (size_t d = 0; d < s.size(); ++d) s[d] += p[d].first + p[d].second;
    return build(s, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> j = i;
      for (size_t d = 0; d < i.size(); ++d) {
        j[d] = i[d] - p[d].first;
        if (j[d] < 0 || j[d] >= shape[d]) return 0.0;
      }
      return at(j);
    });
  }
  Ref flip(const std::vector<int64_t>& axes) const {
    return build(shape, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> j = i;
      for (int64_t a : axes) j[size_t(a)] = shape[size_t(a)] - 1 - i[size_t(a)];
      return at(j);
    });
  }
  Ref expand(const Shape& s) const {  // same ndim
    return build(s, [&](const std::vector<int64_t>& i) {
      std::vector<int64_t> j = i;
      for (size_t d = 0; d < i.size(); ++d)
        if (shape[d] == 1) j[d] = 0;
      return at(j);
    });
  }
  Ref reshape(const Shape& s) const { return Ref{s, data}; }
};

Tensor to_tensor(const Ref& r) { return Tensor::from_vector<double>(r.data, r.shape); }

void expect_equal(const Tensor& t, const Ref& r, const std::string& what = "") {
  ASSERT_EQ(t.shape(), r.shape) << what;
  EXPECT_EQ(t.to_vector<double>(), r.data) << what;
}

std::vector<float> iota_f(int64_t n) {
  std::vector<float> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = float(i);
  return v;
}

// A realized view shares its source's buffer.
void expect_shares(const Tensor& view, const Tensor& src) {
  view.realize();
  src.realize();
  EXPECT_EQ(view.node()->buffer.get(), src.node()->buffer.get()) << view.str();
}

}  // namespace

// ---- reshape -------------------------------------------------------------------------------------
TEST(View, ReshapeValuesAndInference) {
  const Ref r = Ref::iota({2, 3, 4});
  const Tensor x = to_tensor(r);
  expect_equal(x.reshape({6, 4}), r.reshape({6, 4}));
  expect_equal(x.reshape({4, -1}), r.reshape({4, 6}));
  expect_equal(x.reshape({-1}), r.reshape({24}));
  expect_equal(x.reshape({2, 1, 12, 1}), r.reshape({2, 1, 12, 1}));
  EXPECT_TRUE(x.reshape({2, 3, 4}).same(x));  // same shape: no node at all
  EXPECT_EQ(Tensor::scalar(5).reshape({1, 1}).shape(), (Shape{1, 1}));
  EXPECT_EQ(Tensor::scalar(5).reshape({1, 1}).reshape({}).item<float>(), 5.0f);
  EXPECT_EQ(Tensor::zeros({0, 3}).reshape({3, 0, 5}).shape(), (Shape{3, 0, 5}));
}

TEST(View, ReshapeIsAViewWhenPossible) {
  const Tensor x = to_tensor(Ref::iota({2, 3, 4}));
  expect_shares(x.reshape({6, 4}), x);
  expect_shares(x.reshape({24}), x);
  expect_shares(x.reshape({2, 12}), x);
  // A transposed tensor: splitting a dim or merging dims that stay adjacent in memory is a view.
  const Tensor t = x.permute({2, 0, 1});  // (4, 2, 3), strides (1, 12, 4)
  expect_shares(t.reshape({4, 6}), x);    // dims 1 and 2 merge: stride 12 == 4 * 3
  expect_shares(t.reshape({2, 2, 2, 3}), x);
  expect_shares(t.reshape({4, 2, 3, 1}), x);
  // Merging dims 0 and 1 (strides 1 and 12) is impossible in place: a copy, with right values.
  const Tensor m = t.reshape({8, 3});
  m.realize();
  EXPECT_NE(m.node()->buffer.get(), x.node()->buffer.get());
  expect_equal(m, Ref::iota({2, 3, 4}).permute({2, 0, 1}).reshape({8, 3}));
  // Flipping every dim keeps rows mergeable (negative strides); flipping one does not.
  const Tensor f = x.flip({0, 1, 2});
  expect_shares(f.reshape({24}), x);
  expect_equal(f.reshape({24}), Ref::iota({2, 3, 4}).flip({0, 1, 2}).reshape({24}));
  expect_equal(x.flip({1}).reshape({24}), Ref::iota({2, 3, 4}).flip({1}).reshape({24}));
  // An expanded dim merges only with size-1 partners.
  const Tensor e = Tensor::from_vector<float>({1, 2, 3}, {1, 3}).expand({4, 3});
  expect_shares(e.reshape({2, 2, 3}), e);
  expect_equal(e.reshape({12}), Ref::iota({1, 3}).expand({4, 3}).reshape({12}));
}

// ---- permute / transpose -----------------------------------------------------------------------------
TEST(View, PermuteTranspose) {
  const Ref r = Ref::iota({2, 3, 4});
  const Tensor x = to_tensor(r);
  expect_equal(x.permute({2, 0, 1}), r.permute({2, 0, 1}));
  expect_equal(x.permute({-1, 0, -2}), r.permute({2, 0, 1}));
  expect_equal(x.transpose(0, 2), r.permute({2, 1, 0}));
  expect_equal(x.t(), r.permute({0, 2, 1}));
  expect_equal(x.permute({1, 0, 2}).permute({1, 0, 2}), r);
  expect_shares(x.permute({2, 0, 1}), x);
  expect_shares(x.transpose(0, 1), x);
  EXPECT_TRUE(x.permute({0, 1, 2}).same(x));
}

// ---- expand / broadcast_to ---------------------------------------------------------------------------
TEST(View, ExpandBroadcast) {
  const Ref r = Ref::iota({3, 1});
  const Tensor x = to_tensor(r);
  expect_equal(x.expand({3, 4}), r.expand({3, 4}));
  expect_equal(x.broadcast_to({2, 3, 4}), r.reshape({1, 3, 1}).expand({2, 3, 4}));
  expect_equal(Tensor::scalar(7, DType::float64).expand({2, 2}), Ref{{2, 2}, {7, 7, 7, 7}});
  expect_equal(x.expand({3, 0}), Ref{{3, 0}, {}});
  expect_shares(x.expand({3, 5}), x);
  expect_shares(x.broadcast_to({2, 3, 5}), x);
  EXPECT_EQ(x.expand({3, 5}).realize().node()->view.strides[1], 0);
}

// ---- slice ---------------------------------------------------------------------------------------------
TEST(View, SliceSteps) {
  const Ref r = Ref::iota({7, 3});
  const Tensor x = to_tensor(r);
  struct Case {
    int64_t start, stop, step;
  };
  const Case cases[] = {{0, 7, 1},    {1, 5, 1},  {0, 7, 2},       {1, 7, 3},   {2, 100, 2}, {-3, 7, 1},
                        {-100, 3, 1}, {5, 2, 1},  {0, -1, 2},      {-5, -1, 3}, {6, 0, -1},  {6, -8, -1},
                        {-1, -8, -2}, {5, 1, -3}, {100, -100, -2}, {2, 5, -1},  {-1, 2, -4}, {0, 7, 10}};
  for (const auto& c : cases) {
    const std::string what = "slice(" + std::to_string(c.start) + ", " + std::to_string(c.stop) + ", " +
                             std::to_string(c.step) + ")";
    const Tensor s = x.slice(0, c.start, c.stop, c.step);
    expect_equal(s, r.slice(0, c.start, c.stop, c.step), what);
    if (s.numel() > 0) expect_shares(s, x);
  }
  // Along the last axis (negative axis index) too.
  expect_equal(x.slice(-1, 2, -4, -1), r.slice(1, 2, -4, -1));
  expect_equal(x.slice(1, 0, 3, 2), r.slice(1, 0, 3, 2));
  EXPECT_THROW(x.slice(0, 0, 3, 0), Error);
}

// ---- pad / flip ------------------------------------------------------------------------------------------
TEST(View, PadFlip) {
  const Ref r = Ref::iota({2, 3});
  const Tensor x = to_tensor(r);
  expect_equal(x.pad({{1, 2}, {0, 3}}), r.pad({{1, 2}, {0, 3}}));
  expect_equal(x.pad({{0, 0}, {2, 0}}).pad({{1, 1}, {1, 1}}), r.pad({{0, 0}, {2, 0}}).pad({{1, 1}, {1, 1}}));
  expect_equal(x.flip({0}), r.flip({0}));
  expect_equal(x.flip({-1}), r.flip({1}));
  expect_equal(x.flip({0, 1}), r.flip({0, 1}));
  expect_equal(x.flip({1}).flip({1}), r);
  // Flip of a padded view, and padding of a flipped one.
  expect_equal(x.pad({{1, 0}, {0, 2}}).flip({0, 1}), r.pad({{1, 0}, {0, 2}}).flip({0, 1}));
  expect_equal(x.flip({1}).pad({{0, 1}, {3, 0}}), r.flip({1}).pad({{0, 1}, {3, 0}}));
  // Padding an empty dim gives zeros; padding a size-1 dim then expanding keeps zeros.
  expect_equal(Tensor::zeros({0, 2}, DType::float64).pad({{1, 1}, {0, 0}}), Ref{{2, 2}, {0, 0, 0, 0}});
  expect_equal(to_tensor(Ref::iota({1, 2})).pad({{0, 0}, {1, 0}}).expand({3, 3}),
               Ref::iota({1, 2}).pad({{0, 0}, {1, 0}}).expand({3, 3}));
  expect_shares(x.pad({{1, 1}, {1, 1}}), x);
  expect_shares(x.flip({0}), x);
  EXPECT_THROW(x.pad({{-1, 0}, {0, 0}}), Error);
}

// ---- squeeze / unsqueeze / flatten
// -------------------------------------------------------------------------
TEST(View, SqueezeUnsqueezeFlatten) {
  const Ref r = Ref::iota({2, 1, 3, 1});
  const Tensor x = to_tensor(r);
  EXPECT_EQ(x.squeeze().shape(), (Shape{2, 3}));
  EXPECT_EQ(x.squeeze(1).shape(), (Shape{2, 3, 1}));
  EXPECT_EQ(x.squeeze(-1).shape(), (Shape{2, 1, 3}));
  EXPECT_THROW(x.squeeze(0), Error);
  EXPECT_EQ(x.unsqueeze(0).shape(), (Shape{1, 2, 1, 3, 1}));
  EXPECT_EQ(x.unsqueeze(-1).shape(), (Shape{2, 1, 3, 1, 1}));
  EXPECT_EQ(x.unsqueeze(2).shape(), (Shape{2, 1, 1, 3, 1}));
  EXPECT_EQ(x.squeeze().to_vector<double>(), r.data);
  EXPECT_EQ(Tensor::scalar(1).unsqueeze(0).shape(), (Shape{1}));
  EXPECT_EQ(Tensor::ones({1}).squeeze().shape(), (Shape{}));
  const Tensor y = to_tensor(Ref::iota({2, 3, 4, 5}));
  EXPECT_EQ(y.flatten().shape(), (Shape{120}));
  EXPECT_EQ(y.flatten(1).shape(), (Shape{2, 60}));
  EXPECT_EQ(y.flatten(1, 2).shape(), (Shape{2, 12, 5}));
  EXPECT_EQ(y.flatten(-2, -1).shape(), (Shape{2, 3, 20}));
  EXPECT_EQ(Tensor::scalar(2).flatten().shape(), (Shape{1}));
  EXPECT_THROW(y.flatten(2, 1), Error);
  expect_shares(y.flatten(1), y);
  expect_shares(x.squeeze(), x);
  expect_shares(x.unsqueeze(1), x);
}

// ---- chains of views, checked against indices computed here
// --------------------------------------------------
TEST(View, ChainPermuteSliceFlipPadReshape) {
  // x[i][j][k] = 100 i + 10 j + k, shape (4, 6, 5).
  std::vector<double> xv;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 6; ++j)
      for (int k = 0; k < 5; ++k) xv.push_back(100 * i + 10 * j + k + 1000);
  const Tensor x = Tensor::from_vector<double>(xv, {4, 6, 5});
  const Tensor p = x.permute({2, 0, 1});             // (5, 4, 6): p[a][b][c] = x[b][c][a]
  const Tensor s = p.slice(2, 1, 6, 2);              // (5, 4, 3): s[a][b][c] = p[a][b][1 + 2c]
  const Tensor f = s.flip({0});                      // f[a][b][c] = s[4 - a][b][c]
  const Tensor q = f.pad({{1, 0}, {0, 2}, {1, 1}});  // (6, 6, 5)
  const Tensor r = q.reshape({6, 30});
  ASSERT_EQ(r.shape(), (Shape{6, 30}));
  const auto got = r.to_vector<double>();
  for (int a = 0; a < 6; ++a)
    for (int m = 0; m < 30; ++m) {
      const int b = m / 5, c = m % 5;
      double want = 0;
      if (a >= 1 && b < 4 && c >= 1 && c < 4) {
        const int fa = a - 1, fc = c - 1;        // index into f
        const int pa = 4 - fa, pc = 1 + 2 * fc;  // index into p: p[pa][b][pc] = x[b][pc][pa]
        want = 100 * b + 10 * pc + pa + 1000;
      }
      ASSERT_EQ(got[size_t(a * 30 + m)], want) << "a=" << a << " m=" << m;
    }
  // Every step before the (masked) reshape is a view of x's buffer.
  expect_shares(q, x);
  // A chain whose reshape can stay a view: flip every dim, slice step 2, split a dim.
  const Tensor v = x.flip({0, 1, 2}).slice(1, 0, 6, 2).reshape({4, 3, 5, 1}).slice(2, -1, -6, -2);
  ASSERT_EQ(v.shape(), (Shape{4, 3, 3, 1}));
  const auto vg = v.to_vector<double>();
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) {
        // flip: x[3-i][5-j'][4-k'], j' = 2j, k' = 4 - 2k  ->  x[3-i][5-2j][2k]
        const double want = 100 * (3 - i) + 10 * (5 - 2 * j) + 2 * k + 1000;
        ASSERT_EQ(vg[size_t((i * 3 + j) * 3 + k)], want);
      }
  expect_shares(v, x);
}

// Random chains of movement ops against the reference array.
TEST(View, RandomChainsMatchReference) {
  std::mt19937 rng(1234);
  auto rnd = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  for (int trial = 0; trial < 150; ++trial) {
    Ref ref = Ref::iota({rnd(1, 4), rnd(1, 4), rnd(1, 3)});
    Tensor t = to_tensor(ref);
    std::string log;
    for (int step = 0; step < 6; ++step) {
      const int nd = int(ref.shape.size());
      const int op = int(rnd(0, 5));
      const int ax = int(rnd(0, nd - 1));
      if (op == 0) {
        std::vector<int64_t> p(static_cast<size_t>(nd));
        for (int i = 0; i < nd; ++i) p[size_t(i)] = i;
        std::shuffle(p.begin(), p.end(), rng);
        ref = ref.permute(p);
        t = t.permute(p);
        log += " permute";
      } else if (op == 1) {
        const int64_t n = ref.shape[size_t(ax)];
        int64_t step_ = rnd(1, 3) * (rnd(0, 1) ? 1 : -1);
        const int64_t a = rnd(-n - 1, n + 1), b = rnd(-n - 1, n + 1);
        ref = ref.slice(ax, a, b, step_);
        t = t.slice(ax, a, b, step_);
        log += " slice(" + std::to_string(ax) + "," + std::to_string(a) + "," + std::to_string(b) + "," +
               std::to_string(step_) + ")";
      } else if (op == 2) {
        std::vector<std::pair<int64_t, int64_t>> p(size_t(nd), {0, 0});
        p[size_t(ax)] = {rnd(0, 2), rnd(0, 2)};
        ref = ref.pad(p);
        t = t.pad(p);
        log += " pad";
      } else if (op == 3) {
        ref = ref.flip({ax});
        t = t.flip({ax});
        log += " flip(" + std::to_string(ax) + ")";
      } else if (op == 4) {
        // Expand a size-1 dim, if any.
        Shape s = ref.shape;
        if (s[size_t(ax)] == 1) s[size_t(ax)] = rnd(1, 3);
        ref = ref.expand(s);
        t = t.expand(s);
        log += " expand";
      } else {
        // Reshape: merge two adjacent dims or split one.
        Shape s = ref.shape;
        if (nd > 1 && rnd(0, 1)) {
          const size_t d = size_t(rnd(0, nd - 2));
          s[d] *= s[d + 1];
          s.erase(s.begin() + long(d) + 1);
        } else if (nd < 5 && s[size_t(ax)] % 2 == 0) {
          s[size_t(ax)] /= 2;
          s.insert(s.begin() + ax, 2);
        }
        ref = ref.reshape(s);
        t = t.reshape(s);
        log += " reshape";
      }
      ASSERT_EQ(t.shape(), ref.shape) << log;
    }
    ASSERT_EQ(t.to_vector<double>(), ref.data) << log;
  }
}

// ---- views never copy
// ------------------------------------------------------------------------------------------
TEST(View, ViewsNeverAllocate) {
  const Tensor x = Tensor::from_vector<float>(iota_f(60), {3, 4, 5}).realize();
  const int64_t before = Buffer::live_bytes();
  const Tensor v =
      x.permute({1, 2, 0}).slice(0, 3, 0, -2).flip({1}).pad({{1, 1}, {0, 0}, {0, 2}}).expand({4, 5, 5});
  v.realize();
  EXPECT_EQ(Buffer::live_bytes(), before);
  EXPECT_EQ(v.node()->buffer.get(), x.node()->buffer.get());
}

// ---- cat / stack
// ----------------------------------------------------------------------------------------------
TEST(View, Cat) {
  const Ref a = Ref::iota({2, 3}), b = Ref::iota({2, 1});
  const Tensor ta = to_tensor(a), tb = to_tensor(b) * 10.0;
  const Tensor c = cat({ta, tb, ta}, 1);
  ASSERT_EQ(c.shape(), (Shape{2, 7}));
  EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{1, 2, 3, 10, 1, 2, 3, 4, 5, 6, 20, 4, 5, 6}));
  EXPECT_EQ(cat({ta, ta}, -2).to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6, 1, 2, 3, 4, 5, 6}));
  EXPECT_EQ(cat({ta, Tensor::zeros({0, 3}, DType::float64)}, 0).shape(), (Shape{2, 3}));
  EXPECT_TRUE(cat({ta}, 0).to_vector<double>() == a.data);
  // Mixed dtypes promote.
  const Tensor i = Tensor::from_vector<int32_t>({1, 2}), f = Tensor::from_vector<float>({0.5f});
  const Tensor m = cat({i, f});
  EXPECT_EQ(m.dtype(), DType::float32);
  EXPECT_EQ(m.to_vector<float>(), (std::vector<float>{1, 2, 0.5f}));
  const Tensor u = cat({Tensor::from_vector<bool>({true, false}), Tensor::from_vector<uint8_t>({7})});
  EXPECT_EQ(u.dtype(), DType::uint8);
  EXPECT_EQ(u.to_vector<int>(), (std::vector<int>{1, 0, 7}));
  const Tensor bb = cat({Tensor::from_vector<bool>({true, false}), Tensor::from_vector<bool>({false, true})});
  EXPECT_EQ(bb.dtype(), DType::boolean);
  EXPECT_EQ(bb.to_vector<bool>(), (std::vector<bool>{true, false, false, true}));
  // Special values survive (cat must not mix pieces).
  const Tensor sp =
      cat({Tensor::from_vector<float>({INFINITY}), Tensor::from_vector<float>({-INFINITY, NAN})});
  const auto spv = sp.to_vector<float>();
  EXPECT_EQ(spv[0], INFINITY);
  EXPECT_EQ(spv[1], -INFINITY);
  EXPECT_TRUE(std::isnan(spv[2]));
  EXPECT_THROW(cat({ta, tb}, 0), Error);
  EXPECT_THROW(cat({}, 0), Error);
}

TEST(View, Stack) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3}), b = Tensor::from_vector<float>({4, 5, 6});
  const Tensor s0 = stack({a, b});
  EXPECT_EQ(s0.shape(), (Shape{2, 3}));
  EXPECT_EQ(s0.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  const Tensor s1 = stack({a, b}, 1);
  EXPECT_EQ(s1.shape(), (Shape{3, 2}));
  EXPECT_EQ(s1.to_vector<float>(), (std::vector<float>{1, 4, 2, 5, 3, 6}));
  EXPECT_EQ(stack({a, b}, -1).to_vector<float>(), s1.to_vector<float>());
  const Tensor mixed = stack({a, Tensor::from_vector<double>({7, 8, 9})});
  EXPECT_EQ(mixed.dtype(), DType::float64);
  EXPECT_EQ(mixed.to_vector<double>(), (std::vector<double>{1, 2, 3, 7, 8, 9}));
  const Tensor sc = stack({Tensor::scalar(1), Tensor::scalar(2)});
  EXPECT_EQ(sc.shape(), (Shape{2}));
  EXPECT_EQ(sc.to_vector<float>(), (std::vector<float>{1, 2}));
  EXPECT_THROW(stack({a, Tensor::ones({2})}), Error);
}

// ---- contiguous
// ---------------------------------------------------------------------------------------------------
TEST(View, Contiguous) {
  const Tensor x = Tensor::from_vector<float>(iota_f(6), {2, 3});
  EXPECT_TRUE(x.contiguous().same(x));  // already dense: nothing to do
  const Tensor t = x.t().contiguous();
  t.realize();
  EXPECT_NE(t.node()->buffer.get(), x.node()->buffer.get());
  EXPECT_TRUE(t.node()->view.is_contiguous());
  EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{0, 3, 1, 4, 2, 5}));
  const Tensor p = x.pad({{0, 0}, {1, 0}}).contiguous();
  EXPECT_EQ(p.to_vector<float>(), (std::vector<float>{0, 0, 1, 2, 0, 3, 4, 5}));
  EXPECT_TRUE(p.realize().node()->view.is_contiguous());
}

TEST(View, ViewIndexAndExtent) {
  View v = View::contiguous({2, 3});
  const int64_t i12[] = {1, 2};
  EXPECT_EQ(v.index(i12), 5);
  EXPECT_TRUE(v.is_contiguous());
  const View p = v.pad({1, 0}, {0, 1});  // (3, 4), data at rows 1..2, cols 0..2
  const int64_t pad_idx[] = {0, 0}, data_idx[] = {2, 1}, right_idx[] = {1, 3};
  EXPECT_EQ(p.index(pad_idx), -1);
  EXPECT_EQ(p.index(data_idx), 4);
  EXPECT_EQ(p.index(right_idx), -1);
  EXPECT_FALSE(p.is_contiguous());
  const View f = v.flip({1});
  EXPECT_EQ(f.extent(), std::make_pair(int64_t(0), int64_t(5)));
  const View s = v.slice({0, 1}, {2, 3}, {1, 2});  // (2, 1): elements 1, 4
  EXPECT_EQ(s.extent(), std::make_pair(int64_t(1), int64_t(4)));
}
