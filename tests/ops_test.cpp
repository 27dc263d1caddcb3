// Forward tests of every primitive and tensor op against std:: computations done here, for each
// dtype the op supports: unary math, binary arithmetic and comparisons, where, cast, reductions,
// activations and matmul; broadcasting, scalar overloads, NaN/Inf propagation, empty and 0-dim
// tensors. Integer semantics (rounding, integer division, numbers with integer tensors, wrapping)
// are in integer_ops_test.cpp; the helpers in ops_util.h.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <numbers>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "error_util.h"
#include "ops_util.h"

using namespace aether;
using namespace ops_test;

namespace {

// Reference reduction of a row-major array over `axes`, keepdim layout.
std::vector<double> reduce_ref(const std::vector<double>& x, const Shape& s, const std::vector<int>& axes,
                               const std::function<double(const std::vector<double>&)>& f, Shape* out_shape) {
  Shape os = s;
  for (int a : axes) os[size_t(a)] = 1;
  *out_shape = os;
  std::vector<std::vector<double>> groups(size_t(numel(os)));
  std::vector<int64_t> idx(s.size(), 0);
  for (size_t k = 0; k < x.size(); ++k) {
    int64_t o = 0;
    for (size_t d = 0; d < s.size(); ++d) o = o * os[d] + (os[d] == 1 ? 0 : idx[d]);
    groups[size_t(o)].push_back(x[k]);
    for (int d = int(s.size()) - 1; d >= 0; --d) {
      if (++idx[size_t(d)] < s[size_t(d)]) break;
      idx[size_t(d)] = 0;
    }
  }
  std::vector<double> out;
  for (auto& g : groups) out.push_back(f(g));
  return out;
}
Shape drop(const Shape& keep, const std::vector<int>& axes) {
  Shape out;
  for (size_t d = 0; d < keep.size(); ++d)
    if (std::find(axes.begin(), axes.end(), int(d)) == axes.end()) out.push_back(keep[d]);
  return out;
}

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }

}  // namespace

// ---- unary math on floats -----------------------------------------------------------------------------
TEST(Ops, UnaryFloat) {
  const std::vector<double> any = {-2.5, -1, -0.5, 0.25, 0.5, 1, 1.5, 3};
  const std::vector<double> pos = {0.25, 0.5, 1, 1.5, 3, 8};
  struct Case {
    const char* name;
    bool positive_only;
    std::function<Tensor(const Tensor&)> op;
    std::function<double(double)> ref;
  };
  const std::vector<Case> cases = {
      {"neg", false, [](const Tensor& x) { return -x; }, [](double x) { return -x; }},
      {"neg()", false, [](const Tensor& x) { return x.neg(); }, [](double x) { return -x; }},
      {"exp", false, [](const Tensor& x) { return x.exp(); }, [](double x) { return std::exp(x); }},
      {"log", true, [](const Tensor& x) { return x.log(); }, [](double x) { return std::log(x); }},
      {"sqrt", true, [](const Tensor& x) { return x.sqrt(); }, [](double x) { return std::sqrt(x); }},
      {"rsqrt", true, [](const Tensor& x) { return x.rsqrt(); }, [](double x) { return 1 / std::sqrt(x); }},
      {"reciprocal", false, [](const Tensor& x) { return x.reciprocal(); }, [](double x) { return 1 / x; }},
      {"sin", false, [](const Tensor& x) { return x.sin(); }, [](double x) { return std::sin(x); }},
      {"cos", false, [](const Tensor& x) { return x.cos(); }, [](double x) { return std::cos(x); }},
      {"abs", false, [](const Tensor& x) { return x.abs(); }, [](double x) { return std::fabs(x); }},
      {"square", false, [](const Tensor& x) { return x.square(); }, [](double x) { return x * x; }},
      {"pow2", false, [](const Tensor& x) { return x.pow(2); }, [](double x) { return x * x; }},
      {"pow3", false, [](const Tensor& x) { return x.pow(3); }, [](double x) { return x * x * x; }},
      {"pow4", false, [](const Tensor& x) { return x.pow(4); }, [](double x) { return std::pow(x, 4); }},
      {"pow-2", false, [](const Tensor& x) { return x.pow(-2); }, [](double x) { return 1 / (x * x); }},
      {"pow-1", false, [](const Tensor& x) { return x.pow(-1); }, [](double x) { return 1 / x; }},
      {"pow0", false, [](const Tensor& x) { return x.pow(0); }, [](double) { return 1.0; }},
      {"pow1", false, [](const Tensor& x) { return x.pow(1); }, [](double x) { return x; }},
      {"pow0.5", true, [](const Tensor& x) { return x.pow(0.5); }, [](double x) { return std::sqrt(x); }},
      {"pow2.5", true, [](const Tensor& x) { return x.pow(2.5); }, [](double x) { return std::pow(x, 2.5); }},
      {"pow-1.5", true, [](const Tensor& x) { return x.pow(-1.5); },
       [](double x) { return std::pow(x, -1.5); }},
      {"pow7", false, [](const Tensor& x) { return x.pow(7); }, [](double x) { return std::pow(x, 7); }},
      {"relu", false, [](const Tensor& x) { return x.relu(); }, [](double x) { return x > 0 ? x : 0; }},
      {"sigmoid", false, [](const Tensor& x) { return x.sigmoid(); }, sigmoid_ref},
      {"tanh", false, [](const Tensor& x) { return x.tanh(); }, [](double x) { return std::tanh(x); }},
      {"clamp", false, [](const Tensor& x) { return x.clamp(-1, 1.5); },
       [](double x) { return std::min(std::max(x, -1.0), 1.5); }},
  };
  for (DType t : kFloats)
    for (const auto& c : cases) {
      const auto& in = c.positive_only ? pos : any;
      // Integer exponents (pow 3, 7, -2...) must work for negative x too.
      expect_values(c.op(make(in, t)), t, {int64_t(in.size())}, map(in, c.ref),
                    std::string(c.name) + " " + dtype_name(t), 2 * tol(t));
    }
}

// ---- unary ops on integers and bool -------------------------------------------------------------------
TEST(Ops, UnaryInt) {
  for (DType t : kInts) {
    const std::vector<double> v = t == DType::uint8 ? std::vector<double>{0, 1, 2, 7, 200, 255}
                                                    : std::vector<double>{-7, -1, 0, 1, 2, 100};
    const Shape s{6};
    const std::string n = dtype_name(t);
    expect_values(-make(v, t), t, s, map(v, [&](double x) { return round_to(-x, t); }), "neg " + n);
    expect_values(make(v, t).square(), t, s, map(v, [&](double x) { return round_to(x * x, t); }),
                  "square " + n);
    expect_values(make(v, t).pow(2), t, s, map(v, [&](double x) { return round_to(x * x, t); }), "pow2 " + n);
    expect_values(make(v, t).pow(3), t, s, map(v, [&](double x) { return round_to(x * x * x, t); }),
                  "pow3 " + n);
    expect_values(make(v, t).abs(), t, s, map(v, [&](double x) { return std::fabs(x); }), "abs " + n);
    expect_values(make(v, t).relu(), t, s, map(v, [&](double x) { return x > 0 ? x : 0; }), "relu " + n);
    // Float-only math promotes to float32.
    expect_values(make(v, t).exp(), DType::float32, s,
                  map(v, [](double x) { return double(float(std::exp(x))); }), "exp " + n);
    expect_values(make(v, t).sin(), DType::float32, s, map(v, [](double x) { return std::sin(x); }),
                  "sin " + n);
    expect_values(make(v, t).sigmoid(), DType::float32, s, map(v, sigmoid_ref), "sigmoid " + n);
    expect_values(make(v, t).tanh(), DType::float32, s, map(v, [](double x) { return std::tanh(x); }),
                  "tanh " + n);
    expect_values(make(v, t).abs().sqrt(), DType::float32, s,
                  map(v, [](double x) { return std::sqrt(std::fabs(x)); }), "sqrt " + n);
  }
  // bool: math promotes to float32; negation is refused.
  const Tensor b = make({0, 1}, DType::boolean);
  expect_values(b.exp(), DType::float32, {2}, {1, std::exp(1.0)}, "exp bool");
  expect_values(b.relu(), DType::boolean, {2}, {0, 1}, "relu bool");
  EXPECT_THROW(-b, Error);
}

// ---- binary arithmetic and comparisons
// ----------------------------------------------------------------------
TEST(Ops, BinaryAllDTypes) {
  struct Data {
    DType t;
    std::vector<double> a, b;
  };
  const std::vector<double> fa = {-2, -1, 0, 0.5, 1, 3, -0.25}, fb = {1, -1, 2, 0.5, -3, 3, 4};
  const std::vector<Data> data = {
      {DType::float32, fa, fb},
      {DType::float16, fa, fb},
      {DType::bfloat16, fa, fb},
      {DType::float64, fa, fb},
      {DType::int32, {-2, -1, 0, 5, 7, -7, 2147483647}, {3, -1, 2, 5, 2, 2, 1}},
      {DType::int64, {-2, -1, 0, 5, 7, -7, 1e15}, {3, -1, 2, 5, 2, 2, 3}},
      {DType::uint8, {0, 1, 5, 200, 255, 3, 17}, {5, 1, 0, 100, 2, 3, 17}},
      {DType::boolean, {1, 1, 0, 0}, {1, 0, 1, 0}},
  };
  for (const auto& d : data) {
    const DType t = d.t;
    const std::string n = dtype_name(t);
    const Tensor a = make(d.a, t), b = make(d.b, t);
    const Shape s{int64_t(d.a.size())};
    const bool fl = is_float(t);
    // Arithmetic: floats round the exact result; integers wrap; bool add/mul are or/and.
    auto arith = [&](double x) { return t == DType::boolean ? double(x != 0) : round_to(x, t); };
    expect_values(a + b, t, s, zip(d.a, d.b, [&](double x, double y) { return arith(x + y); }), "add " + n);
    expect_values(a * b, t, s, zip(d.a, d.b, [&](double x, double y) { return arith(x * y); }), "mul " + n);
    if (t != DType::boolean)
      expect_values(a - b, t, s, zip(d.a, d.b, [&](double x, double y) { return arith(x - y); }), "sub " + n);
    // True division: integers and bool divide as float32.
    const DType dt = fl ? t : DType::float32;
    expect_values(a / b, dt, s, zip(d.a, d.b, [&](double x, double y) { return x / y; }), "div " + n);
    // pow: C's pow, integers and bool in float32 (negative bases with integer exponents, 200^100 = inf).
    expect_values(a.pow(b), dt, s,
                  zip(d.a, d.b, [&](double x, double y) { return round_to(std::pow(x, y), dt); }),
                  "pow " + n);
    expect_values(a.maximum(b), t, s, zip(d.a, d.b, [](double x, double y) { return std::max(x, y); }),
                  "maximum " + n);
    expect_values(a.minimum(b), t, s, zip(d.a, d.b, [](double x, double y) { return std::min(x, y); }),
                  "minimum " + n);
    const DType B = DType::boolean;
    expect_values(a.lt(b), B, s, zip(d.a, d.b, [](double x, double y) { return double(x < y); }), "lt " + n);
    expect_values(a.le(b), B, s, zip(d.a, d.b, [](double x, double y) { return double(x <= y); }), "le " + n);
    expect_values(a.gt(b), B, s, zip(d.a, d.b, [](double x, double y) { return double(x > y); }), "gt " + n);
    expect_values(a.ge(b), B, s, zip(d.a, d.b, [](double x, double y) { return double(x >= y); }), "ge " + n);
    expect_values(a.eq(b), B, s, zip(d.a, d.b, [](double x, double y) { return double(x == y); }), "eq " + n);
    expect_values(a.ne(b), B, s, zip(d.a, d.b, [](double x, double y) { return double(x != y); }), "ne " + n);
    // Against a scalar: the tensor's float dtype, or float32 for integers and bools (2.5 equals none).
    const DType ct = fl ? t : DType::float32;
    for (const double v : {d.b[3], 2.5}) {
      auto same = [&](double x, double) { return double(round_to(x, ct) == round_to(v, ct)); };
      expect_values(a.eq(v), B, s, zip(d.a, d.a, same), "eq scalar " + n);
      expect_values(a.ne(v), B, s, zip(d.a, d.a, [&](double x, double y) { return 1 - same(x, y); }),
                    "ne scalar " + n);
    }
    expect_values(a < b, B, s,
                  zip(
                      d.a, d.b, [](double x, double y) { return double(x < y); }),
                  "< " + n);
    expect_values(a <= b, B, s, zip(d.a, d.b, [](double x, double y) { return double(x <= y); }), "<= " + n);
    expect_values(a > b, B, s, zip(d.a, d.b, [](double x, double y) { return double(x > y); }), "> " + n);
    expect_values(a >= b, B, s, zip(d.a, d.b, [](double x, double y) { return double(x >= y); }), ">= " + n);
  }
}

// ---- take: elements at integer indices along an axis
// -------------------------------------------------------- NumPy's take on a row-major (A, B, C) array along
// `axis`, indices of any shape (flattened here).
std::vector<double> take_ref(const std::vector<double>& x, const Shape& s, const std::vector<int64_t>& idx,
                             int axis) {
  std::vector<double> out;
  int64_t pre = 1, post = 1;
  for (int d = 0; d < axis; ++d) pre *= s[size_t(d)];
  for (size_t d = size_t(axis) + 1; d < s.size(); ++d) post *= s[d];
  const int64_t n = s[size_t(axis)];
  for (int64_t p = 0; p < pre; ++p)
    for (int64_t i : idx)
      for (int64_t q = 0; q < post; ++q) out.push_back(x[size_t((p * n + (i < 0 ? i + n : i)) * post + q)]);
  return out;
}

TEST(Ops, Take) {
  const Shape s{3, 4, 2};
  std::vector<double> v(24);
  for (size_t i = 0; i < v.size(); ++i) v[i] = double(i) - 5;
  const std::vector<int64_t> rows = {2, 0, 2, -1}, grid = {3, -1, 0, 1, 1, -4};  // grid: (2, 3)
  for (DType t : {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32, DType::int64,
                  DType::uint8, DType::boolean}) {
    const std::string n = dtype_name(t);
    const auto stored =
        t == DType::uint8 || t == DType::boolean ? map(v, [&](double e) { return round_to(e, t); }) : v;
    const Tensor x = make(stored, s, t);
    expect_values(x.take(Tensor::from_vector<int64_t>(rows)), t, {4, 4, 2}, take_ref(stored, s, rows, 0),
                  "take axis 0 " + n, 0);
    expect_values(x.take(Tensor::from_vector<int64_t>(grid, {2, 3}), 1), t, {3, 2, 3, 2},
                  take_ref(stored, s, grid, 1), "take axis 1, 2-D indices " + n, 0);
    expect_values(x.take(Tensor::from_vector<int32_t>({1, 0, 1}), -1), t, {3, 4, 3},
                  take_ref(stored, s, {1, 0, 1}, 2), "take axis -1, int32 indices " + n, 0);
  }
  // No indices: an empty axis; a 0-d index removes the axis (as NumPy's take).
  EXPECT_EQ(make(v, s, DType::float32).take(Tensor::zeros({0}, DType::int64), 1).shape(), (Shape{3, 0, 2}));
  expect_values(make(v, s, DType::float32).take(Tensor::full({}, 2, DType::int64), 0), DType::float32, {4, 2},
                take_ref(v, s, {2}, 0), "take a 0-d index", 0);
  // Out of bounds: an error of kind index naming the index, when computed; nothing else is lost.
  const Tensor x = make(v, s, DType::float32);
  for (int64_t bad : {3, -4, 100}) {
    const Thrown e = thrown([&] { x.take(Tensor::from_vector<int64_t>({0, bad})).realize(); });
    EXPECT_EQ(e.kind, ErrorKind::index) << "index " << bad << ": " << e.message;
    EXPECT_TRUE(contains(e.message, detail::cat("index ", bad, " is out of bounds for an axis of size 3")))
        << e.message;
  }
  expect_values(x.take(Tensor::from_vector<int64_t>({1}), 0), DType::float32, {1, 4, 2},
                take_ref(v, s, {1}, 0), "take after an error", 0);
  EXPECT_THROW(x.take(Tensor::from_vector<float>({1})), Error);                      // float indices
  EXPECT_THROW(x.take(make({1}, DType::boolean)), Error);                            // a mask
  EXPECT_THROW(x.take(Tensor::from_vector<int64_t>({0}), 3), Error);                 // no axis 3
  EXPECT_THROW(Tensor::scalar(1.0).take(Tensor::from_vector<int64_t>({0})), Error);  // no axis at all
}

// sign: -1, 0, 1 in the tensor's dtype; NaN stays NaN. clone: a new tensor of the same value.
TEST(Ops, SignAndClone) {
  const std::vector<double> v = {-2.5, -0.0, 0, 3, kInf, -kInf, kNaN};
  for (DType t : kFloats)
    expect_values(make(v, t).sign(), t, {7}, {-1, 0, 0, 1, 1, -1, kNaN}, std::string("sign ") + dtype_name(t),
                  0);
  for (DType t : kInts) {
    const std::vector<double> iv =
        t == DType::uint8 ? std::vector<double>{0, 7, 255} : std::vector<double>{-9, 0, 4};
    expect_values(make(iv, t).sign(), t, {3}, map(iv, [](double e) { return double((e > 0) - (e < 0)); }),
                  std::string("sign ") + dtype_name(t), 0);
  }
  EXPECT_THROW(make({1}, DType::boolean).sign(), Error);
  const Tensor x = make({1, 2, 3}, DType::float16);
  const Tensor c = x.clone();
  EXPECT_FALSE(c.same(x));
  expect_values(c, DType::float16, {3}, {1, 2, 3}, "clone", 0);
}

// isnan, isinf, isfinite in every dtype (integers: never NaN or infinite); logsumexp against a
// double computation, over one axis, several and all, with infinite rows, and its gradient (the
// softmax, finite differences in grad_test's style).
TEST(Ops, NonFiniteTestsAndLogsumexp) {
  const std::vector<double> v = {1.5, kNaN, kInf, -kInf, 0, -2};
  for (DType t : kFloats) {
    const Tensor x = make(v, t);
    expect_values(x.isnan(), DType::boolean, {6}, {0, 1, 0, 0, 0, 0}, std::string("isnan ") + dtype_name(t));
    expect_values(x.isinf(), DType::boolean, {6}, {0, 0, 1, 1, 0, 0}, std::string("isinf ") + dtype_name(t));
    expect_values(x.isfinite(), DType::boolean, {6}, {1, 0, 0, 0, 1, 1},
                  std::string("isfinite ") + dtype_name(t));
  }
  for (DType t : {DType::int32, DType::uint8, DType::boolean}) {
    const Tensor x = make({0, 1, 7}, t);
    expect_values(x.isnan(), DType::boolean, {3}, {0, 0, 0}, std::string("isnan ") + dtype_name(t));
    expect_values(x.isinf(), DType::boolean, {3}, {0, 0, 0}, std::string("isinf ") + dtype_name(t));
    expect_values(x.isfinite(), DType::boolean, {3}, {1, 1, 1}, std::string("isfinite ") + dtype_name(t));
  }
  // Rows: large values (exp would overflow without the shift), all -inf, one +inf, one NaN.
  const std::vector<double> rows = {1000, 1001, 999, -kInf, -kInf, -kInf, 1, kInf, 3, 2, kNaN, 1};
  const Tensor x = make(rows, {4, 3}, DType::float64);
  auto lse = [](std::vector<double> r) {
    double m = -kInf;
    for (double e : r) m = std::max(m, e);
    if (!std::isfinite(m)) m = 0;
    double s = 0;
    for (double e : r) s += std::exp(e - m);
    return std::log(s) + m;
  };
  std::vector<double> want;
  for (size_t r = 0; r < 4; ++r) want.push_back(lse({rows[3 * r], rows[3 * r + 1], rows[3 * r + 2]}));
  want[3] = kNaN;  // std::max skips the NaN; any NaN makes the sum NaN
  expect_values(x.logsumexp({1}), DType::float64, {4}, want, "logsumexp rows");
  expect_values(x.logsumexp({1}, true), DType::float64, {4, 1}, want, "logsumexp keepdim");
  const Tensor f = make({0.5, -1, 2, 3, 0, 1}, {2, 3}, DType::float32);
  expect_values(f.logsumexp(), DType::float32, {}, {lse({0.5, -1, 2, 3, 0, 1})}, "logsumexp of all");
  expect_values(f.logsumexp({0, 1}), DType::float32, {}, {lse({0.5, -1, 2, 3, 0, 1})},
                "logsumexp of both axes");
  expect_values(f.logsumexp({0}), DType::float32, {3}, {lse({0.5, 3}), lse({-1, 0}), lse({2, 1})}, "axis 0");
  expect_values(make({1, 2}, DType::int32).logsumexp(), DType::float32, {}, {lse({1, 2})},
                "int32 as float32");
  // The gradient is the softmax.
  const Tensor g = Tensor::from_vector<double>({1000, 1001, 999}).set_requires_grad();
  g.logsumexp().backward();
  const double s = std::exp(-1) + 1 + std::exp(-2);
  expect_values(g.grad(), DType::float64, {3}, {std::exp(-1) / s, 1 / s, std::exp(-2) / s}, "gradient");
}

// ---- broadcasting ----------------------------------------------------------------------------------------
TEST(Ops, Broadcasting) {
  const Tensor a = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 1, 3});
  const Tensor b = Tensor::from_vector<float>({10, 20, 30, 40}, {4, 1});
  const Tensor c = a + b;
  ASSERT_EQ(c.shape(), (Shape{2, 4, 3}));
  const auto v = c.to_vector<float>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 4; ++j)
      for (int k = 0; k < 3; ++k)
        EXPECT_EQ(v[size_t((i * 4 + j) * 3 + k)], float(i * 3 + k + 1 + (j + 1) * 10));
  EXPECT_EQ((Tensor::scalar(2) * Tensor::ones({2, 2})).shape(), (Shape{2, 2}));
  EXPECT_EQ((Tensor::ones({1}) + Tensor::ones({0})).shape(), (Shape{0}));
  EXPECT_EQ((Tensor::ones({3, 1}) - Tensor::ones({1, 0})).shape(), (Shape{3, 0}));
  EXPECT_EQ((Tensor::ones({2, 3}) > Tensor::ones({3})).shape(), (Shape{2, 3}));
  EXPECT_THROW(Tensor::ones({2, 3}) + Tensor::ones({2}), Error);
  // Mixed dtypes and broadcasting together.
  const Tensor m =
      Tensor::from_vector<int32_t>({1, 2}, {2, 1}) * Tensor::from_vector<float>({0.5f, 1.5f, 2.5f});
  expect_values(m, DType::float32, {2, 3}, {0.5, 1.5, 2.5, 1, 3, 5}, "int32 (2,1) * float32 (3)");
}

// ---- scalar overloads -------------------------------------------------------------------------------------
TEST(Ops, ScalarOverloads) {
  const Tensor h = make({1, 2}, DType::float16);
  EXPECT_EQ((h + 2.0).dtype(), DType::float16);
  EXPECT_EQ((2.0 * h).dtype(), DType::float16);
  const Tensor d = make({1, 2}, DType::float64);
  EXPECT_EQ((d - 0.1).dtype(), DType::float64);
  expect_values(d - 0.1, DType::float64, {2}, {0.9, 1.9}, "f64 - 0.1");  // the scalar stays double
  const Tensor i = make({1, 4}, DType::int32);
  expect_values(i + 2.0, DType::float32, {2}, {3, 6}, "int + 2.0");
  expect_values(i * 0.5, DType::float32, {2}, {0.5, 2}, "int * 0.5");
  expect_values(1.0 / i, DType::float32, {2}, {1, 0.25}, "1 / int");
  expect_values(10.0 - i, DType::float32, {2}, {9, 6}, "10 - int");
  expect_values(i / 2.0, DType::float32, {2}, {0.5, 2}, "int / 2");
  expect_values(make({1, 0}, DType::boolean) + 1.0, DType::float32, {2}, {2, 1}, "bool + 1");
  const Tensor f = make({1, 2, 3}, DType::float32);
  expect_values(f < 2.0, DType::boolean, {3}, {1, 0, 0}, "< scalar");
  expect_values(f <= 2.0, DType::boolean, {3}, {1, 1, 0}, "<= scalar");
  expect_values(f > 2.0, DType::boolean, {3}, {0, 0, 1}, "> scalar");
  expect_values(f >= 2.0, DType::boolean, {3}, {0, 1, 1}, ">= scalar");
  expect_values(3.0 - f, DType::float32, {3}, {2, 1, 0}, "3 - f");
  expect_values(6.0 / f, DType::float32, {3}, {6, 3, 2}, "6 / f");
  expect_values(f / 2.0, DType::float32, {3}, {0.5, 1, 1.5}, "f / 2");
}

// ---- where and cast
// ------------------------------------------------------------------------------------------
TEST(Ops, Where) {
  const Tensor c = Tensor::from_vector<bool>({true, false, true, false, false, true}, {2, 3});
  const Tensor a = Tensor::from_vector<float>({1, 2, 3});
  expect_values(where(c, a, -1.0), DType::float32, {2, 3}, {1, -1, 3, -1, -1, 3}, "where(c, a, -1)");
  expect_values(where(c, 5.0, a), DType::float32, {2, 3}, {5, 2, 5, 1, 2, 5}, "where(c, 5, a)");
  // Non-bool conditions are cast (nonzero is true); branch dtypes promote.
  const Tensor ci = Tensor::from_vector<int32_t>({0, 3, -1});
  const Tensor x = Tensor::from_vector<int64_t>({1, 2, 3}), y = Tensor::from_vector<double>({0.5, 0.5, 0.5});
  expect_values(where(ci, x, y), DType::float64, {3}, {0.5, 2, 3}, "where int cond");
  // Selected NaN passes, unselected NaN does not leak.
  const Tensor n = Tensor::from_vector<float>({NAN, NAN});
  expect_values(where(Tensor::from_vector<bool>({true, false}), n, 7.0), DType::float32, {2}, {kNaN, 7},
                "where NaN");
  for (DType t : {DType::float16, DType::bfloat16, DType::int32, DType::uint8, DType::boolean}) {
    const Tensor p = make({1, 0, 1}, t), q = make({0, 1, 0}, t);
    expect_values(where(Tensor::from_vector<bool>({true, true, false}), p, q), t, {3}, {1, 0, 0},
                  std::string("where ") + dtype_name(t));
  }
}

// ---- reductions -------------------------------------------------------------------------------------------
TEST(Ops, Reductions) {
  const Shape s{2, 3, 4};
  std::vector<double> base;
  for (int i = 0; i < 24; ++i) base.push_back(double((i * 7) % 11) - 4);  // mixed signs, some ties
  const std::vector<std::vector<int>> axes_sets = {{}, {0}, {1}, {2}, {0, 2}, {1, 2}, {0, 1, 2}};
  auto sum = [](const std::vector<double>& g) {
    double r = 0;
    for (double x : g) r += x;
    return r;
  };
  auto mx = [](const std::vector<double>& g) { return *std::max_element(g.begin(), g.end()); };
  auto mn = [](const std::vector<double>& g) { return *std::min_element(g.begin(), g.end()); };
  for (DType t : {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32, DType::int64,
                  DType::uint8, DType::boolean}) {
    std::vector<double> v = base;
    if (t == DType::uint8) v = map(base, [](double x) { return x + 4; });
    if (t == DType::boolean) v = map(base, [](double x) { return double(x > 0); });
    const Tensor x = make(v, s, t);
    const std::string n = dtype_name(t);
    const DType sum_t = is_float(t) ? t : DType::int64;
    const DType mean_t = is_float(t) ? t : DType::float32;
    for (const auto& ax : axes_sets) {
      const std::vector<int64_t> axes(ax.begin(), ax.end());
      std::vector<int> all = ax;
      if (all.empty()) all = {0, 1, 2};
      for (bool keep : {false, true}) {
        Shape ks;
        const std::string w = n + " axes=" + std::to_string(ax.size()) + (keep ? " keepdim" : "");
        const auto sums = reduce_ref(v, s, all, sum, &ks);
        const Shape os = keep ? ks : drop(ks, all);
        expect_values(x.sum(axes, keep), sum_t, os, map(sums, [&](double r) { return round_to(r, sum_t); }),
                      "sum " + w);
        expect_values(x.max(axes, keep), t, os, reduce_ref(v, s, all, mx, &ks), "max " + w);
        expect_values(x.min(axes, keep), t, os, reduce_ref(v, s, all, mn, &ks), "min " + w);
        auto anyv = [](const std::vector<double>& g) {
          return double(std::any_of(g.begin(), g.end(), [](double e) { return e != 0; }));
        };
        auto allv = [](const std::vector<double>& g) {
          return double(std::all_of(g.begin(), g.end(), [](double e) { return e != 0; }));
        };
        if (!keep) {  // (keepdim is the sum's: not checked again, each check compiles kernels)
          expect_values(x.any(axes), DType::boolean, os, reduce_ref(v, s, all, anyv, &ks), "any " + w);
          expect_values(x.all(axes), DType::boolean, os, reduce_ref(v, s, all, allv, &ks), "all " + w);
        }
        if (t == DType::boolean) continue;
        const auto means = reduce_ref(
            v, s, all, [&](const std::vector<double>& g) { return sum(g) / g.size(); }, &ks);
        expect_values(x.mean(axes, keep), mean_t, os, means, "mean " + w);
        for (int corr : {0, 1}) {
          const auto vars = reduce_ref(
              v, s, all,
              [&](const std::vector<double>& g) {
                const double m = sum(g) / g.size();
                double acc = 0;
                for (double e : g) acc += (e - m) * (e - m);
                return acc / double(g.size() - corr);
              },
              &ks);
          if (corr == 1 && numel(s) / numel(ks) < 2) continue;
          expect_values(x.var(axes, keep, corr), mean_t, os, vars, "var" + std::to_string(corr) + " " + w,
                        4 * tol(mean_t));
          if (t == DType::float32 || t == DType::int32)  // sqrt of var, checked for all dtypes above
            expect_values(x.std(axes, keep, corr), mean_t, os,
                          map(vars, [](double r) { return std::sqrt(r); }),
                          "std" + std::to_string(corr) + " " + w, 4 * tol(mean_t));
        }
      }
    }
    // argmax and argmin along each axis: the first maximum (minimum) wins.
    for (const bool largest : {true, false})
      for (int a = 0; a < 3; ++a)
        for (bool keep : {false, true}) {
          Shape ks;
          std::vector<double> want;
          reduce_ref(v, s, {a}, mx, &ks);
          for (int64_t i = 0; i < numel(ks); ++i) {  // scan each line for its first extreme element
            int64_t idx[3] = {i / (ks[1] * ks[2]), (i / ks[2]) % ks[1], i % ks[2]};
            int best = 0;
            double best_v = largest ? -kInf : kInf;
            for (int k = 0; k < s[size_t(a)]; ++k) {
              idx[a] = k;
              const double e = v[size_t(idx[0] * 12 + idx[1] * 4 + idx[2])];
              if (largest ? e > best_v : e < best_v) {
                best = k;
                best_v = e;
              }
            }
            want.push_back(best);
          }
          expect_values(largest ? x.argmax(a, keep) : x.argmin(a, keep), DType::int64,
                        keep ? ks : drop(ks, {a}), want,
                        std::string(largest ? "argmax " : "argmin ") + n + " axis " + std::to_string(a));
        }
  }
  // Negative axes.
  const Tensor x = make(base, s, DType::float32);
  EXPECT_EQ(x.sum({-1}).to_vector<float>(), x.sum({2}).to_vector<float>());
  EXPECT_EQ(x.argmax(-2).to_vector<int64_t>(), x.argmax(1).to_vector<int64_t>());
}

// any/all of nothing are false/true (NumPy's); NaN is true.
TEST(Ops, AnyAllOfEmptyAndNaN) {
  const Tensor e = Tensor::zeros({0, 3});
  expect_values(e.any(), DType::boolean, {}, {0}, "any of nothing");
  expect_values(e.all(), DType::boolean, {}, {1}, "all of nothing");
  expect_values(e.any({0}), DType::boolean, {3}, {0, 0, 0}, "any over an empty axis");
  const Tensor n = Tensor::from_vector<float>({NAN, 0});
  expect_values(n.any(), DType::boolean, {}, {1}, "any NaN");
  expect_values(n.all(), DType::boolean, {}, {0}, "all NaN, 0");
}

// Truth values (x != 0, NaN true) combined elementwise, broadcast, in every dtype: NumPy's
// logical_not/and/or/xor.
TEST(Ops, LogicalOps) {
  const std::vector<double> av = {0, 1, 0, 1, 3, 0}, bv = {0, 0, 1, 1, -2, NAN};
  for (DType t : {DType::boolean, DType::uint8, DType::int32, DType::int64, DType::float16, DType::float32}) {
    SCOPED_TRACE(dtype_name(t));
    std::vector<double> a = av, b = bv;
    if (!is_float(t)) b[5] = 7;  // NaN: floats only
    if (t == DType::boolean) a[4] = b[4] = 1;
    if (t == DType::uint8) b[4] = 2;
    const Tensor x = make(a, t), y = make(b, t);
    const Shape s{6};
    auto truth = [](double v) { return v != 0; };  // NaN != 0
    expect_values(x.logical_not(), DType::boolean, s, map(a, [&](double v) { return double(!truth(v)); }),
                  "not");
    expect_values(x.logical_and(y), DType::boolean, s,
                  zip(a, b, [&](double p, double q) { return double(truth(p) && truth(q)); }), "and");
    expect_values(x.logical_or(y), DType::boolean, s,
                  zip(a, b, [&](double p, double q) { return double(truth(p) || truth(q)); }), "or");
    expect_values(x.logical_xor(y), DType::boolean, s,
                  zip(a, b, [&](double p, double q) { return double(truth(p) != truth(q)); }), "xor");
  }
  // Mixed dtypes and broadcasting.
  expect_values(make({0, 2}, DType::int32).logical_and(Tensor::scalar(0.5)), DType::boolean, {2}, {0, 1},
                "and int32, float scalar");
  expect_values(make({0, 1}, DType::boolean).reshape({2, 1}).logical_or(make({0, 1, 0}, DType::boolean)),
                DType::boolean, {2, 3}, {0, 1, 0, 1, 1, 1}, "or broadcast");
}

TEST(Ops, ArgmaxTiesAndNaN) {
  EXPECT_EQ(Tensor::from_vector<float>({3, 1, 1, 2}).argmin(0).item<int64_t>(), 1);
  EXPECT_EQ(Tensor::from_vector<float>({1, NAN, -3, NAN}).argmin(0).item<int64_t>(), 1);  // NaN, as NumPy
  EXPECT_EQ(make({200, 0, 255, 0}, DType::uint8).argmin(0).item<int64_t>(), 1);  // no negation to wrap
  EXPECT_EQ(make({-2147483648.0, 5, -2147483648.0}, DType::int32).argmin(0).item<int64_t>(), 0);
  EXPECT_THROW(Tensor::zeros({0}).argmin(0), Error);
  EXPECT_EQ(Tensor::from_vector<float>({1, 3, 3, 2}).argmax(0).item<int64_t>(), 1);
  EXPECT_EQ(Tensor::from_vector<float>({1, NAN, 3, NAN}).argmax(0).item<int64_t>(), 1);
  EXPECT_EQ(Tensor::from_vector<int64_t>({-5, -5, -7}).argmax(0).item<int64_t>(), 0);
  EXPECT_EQ(Tensor::from_vector<float>({-INFINITY, -INFINITY}).argmax(0).item<int64_t>(), 0);
  EXPECT_EQ(Tensor::from_vector<float>({7}).argmax(0, true).shape(), (Shape{1}));
}

// ---- NaN and Inf
// -------------------------------------------------------------------------------------------
TEST(Ops, NaNAndInfPropagation) {
  for (DType t : kFloats) {
    const std::string n = dtype_name(t);
    expect_values(make({kInf, -kInf, kNaN}, t).exp(), t, {3}, {kInf, 0, kNaN}, "exp " + n);
    expect_values(make({0, -1, kInf, -0.0}, t).log(), t, {4}, {-kInf, kNaN, kInf, -kInf}, "log " + n);
    expect_values(make({-1, kInf}, t).sqrt(), t, {2}, {kNaN, kInf}, "sqrt " + n);
    expect_values(make({0, -0.0, kInf}, t).reciprocal(), t, {3}, {kInf, -kInf, 0}, "reciprocal " + n);
    expect_values(make({kNaN, 1}, t).maximum(make({1, kNaN}, t)), t, {2}, {kNaN, kNaN}, "maximum NaN " + n);
    expect_values(make({kNaN, 1}, t).minimum(make({1, kNaN}, t)), t, {2}, {kNaN, kNaN}, "minimum NaN " + n);
    expect_values(make({1, kNaN, 3}, t).max(), t, {}, {kNaN}, "max NaN " + n);
    expect_values(make({1, kNaN, 3}, t).min(), t, {}, {kNaN}, "min NaN " + n);
    expect_values(make({kInf, -kInf, 1}, t).sum(), t, {}, {kNaN}, "sum inf-inf " + n);
    expect_values(make({kInf, 1}, t).sum(), t, {}, {kInf}, "sum inf " + n);
    expect_values(make({kNaN, -1, 2}, t).relu(), t, {3}, {kNaN, 0, 2}, "relu NaN " + n);
    expect_values(make({kInf, -kInf, kNaN}, t).sigmoid(), t, {3}, {1, 0, kNaN}, "sigmoid inf " + n);
    expect_values(make({kInf, -kInf}, t).tanh(), t, {2}, {1, -1}, "tanh inf " + n);
    expect_values(make({kNaN, -kInf}, t).abs(), t, {2}, {kNaN, kInf}, "abs " + n);
    expect_values(make({kNaN, 1}, t).eq(make({kNaN, 1}, t)), DType::boolean, {2}, {0, 1}, "NaN == NaN " + n);
    expect_values(make({kNaN}, t).ne(make({kNaN}, t)), DType::boolean, {1}, {1}, "NaN != NaN " + n);
    expect_values(make({kNaN}, t) < make({1}, t), DType::boolean, {1}, {0}, "NaN < 1 " + n);
    expect_values(make({kNaN, 5}, t).clamp(0, 1), t, {2}, {kNaN, 1}, "clamp NaN " + n);
    expect_values(make({kInf}, t) * make({0}, t), t, {1}, {kNaN}, "inf * 0 " + n);
    expect_values(make({1, -1, 0}, t) / make({0, 0, 0}, t), t, {3}, {kInf, -kInf, kNaN}, "x / 0 " + n);
    expect_values(make({2, kNaN}, t).mean(), t, {}, {kNaN}, "mean NaN " + n);
  }
  // float16 overflow in arithmetic gives inf.
  expect_values(make({60000}, DType::float16) * 2.0, DType::float16, {1}, {kInf}, "f16 overflow");
}

// ---- cast as an op
// --------------------------------------------------------------------------------------------
TEST(Ops, CastValues) {
  const Tensor f = Tensor::from_vector<float>({-1.7f, 0.2f, 2.5f, 300.0f});
  expect_values(f.cast(DType::int32), DType::int32, {4}, {-1, 0, 2, 300}, "f32 -> int32");
  expect_values(f.cast(DType::uint8), DType::uint8, {4}, {0, 0, 2, 255}, "f32 -> uint8");
  expect_values(f.cast(DType::boolean), DType::boolean, {4}, {1, 1, 1, 1}, "f32 -> bool");
  expect_values(f.cast(DType::float16), DType::float16, {4}, {-1.7, 0.2, 2.5, 300}, "f32 -> f16");
  expect_values(Tensor::from_vector<bool>({true, false}).cast(DType::float64), DType::float64, {2}, {1, 0},
                "bool -> f64");
}

// ---- matmul
// ---------------------------------------------------------------------------------------------------
namespace {
std::vector<double> matmul_ref(const std::vector<double>& a, const std::vector<double>& b, int64_t B,
                               int64_t M, int64_t K, int64_t N, bool b_batched = true) {
  std::vector<double> c(size_t(B * M * N), 0);
  for (int64_t bi = 0; bi < B; ++bi)
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        double acc = 0;
        for (int64_t k = 0; k < K; ++k)
          acc += a[size_t((bi * M + i) * K + k)] * b[size_t(((b_batched ? bi : 0) * K + k) * N + j)];
        c[size_t((bi * M + i) * N + j)] = acc;
      }
  return c;
}
std::vector<double> small_ints(int64_t n, int seed, int mod = 7) {
  std::vector<double> v;
  for (int64_t i = 0; i < n; ++i) v.push_back(double((i * 5 + seed * 3) % mod) - (mod / 2));
  return v;
}
}  // namespace

TEST(Ops, MatmulAllDTypes) {
  const int64_t M = 3, K = 5, N = 4;
  for (LibraryImpl impl : {LibraryImpl::onednn, LibraryImpl::naive}) {
    set_library_impl(impl);
    for (DType t : {DType::float32, DType::float16, DType::bfloat16, DType::float64, DType::int32,
                    DType::int64, DType::uint8}) {
      auto av = small_ints(M * K, 1), bv = small_ints(K * N, 2);
      if (t == DType::uint8) {
        av = map(av, [](double x) { return x + 3; });
        bv = map(bv, [](double x) { return x + 3; });
      }
      const Tensor a = make(av, {M, K}, t), b = make(bv, {K, N}, t);
      const auto want = matmul_ref(av, bv, 1, M, K, N);
      expect_values(
          a.matmul(b), t, {M, N}, map(want, [&](double x) { return round_to(x, t); }),
          std::string("matmul ") + dtype_name(t) + (impl == LibraryImpl::naive ? " naive" : " onednn"));
    }
  }
  set_library_impl(LibraryImpl::onednn);
  EXPECT_THROW(make({1, 0}, {1, 2}, DType::boolean).matmul(make({1, 1}, {2, 1}, DType::boolean)), Error);
}

TEST(Ops, MatmulShapes) {
  const auto av = small_ints(2 * 3 * 4, 1), bv = small_ints(4 * 5, 2);
  const Tensor a = make(av, {2, 3, 4}, DType::float64), b = make(bv, {4, 5}, DType::float64);
  // Batched x unbatched: b broadcasts over the batch.
  expect_values(matmul(a, b), DType::float64, {2, 3, 5}, matmul_ref(av, bv, 2, 3, 4, 5, false),
                "(2,3,4) x (4,5)");
  // Batch dims broadcast: (2,1,3,4) x (3,4,2) -> (2,3,3,2).
  const auto cv = small_ints(3 * 4 * 2, 3);
  const Tensor c = make(cv, {3, 4, 2}, DType::float64);
  const Tensor r = matmul(a.reshape({2, 1, 3, 4}), c);
  ASSERT_EQ(r.shape(), (Shape{2, 3, 3, 2}));
  const auto rv = r.to_vector<double>();
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int m = 0; m < 3; ++m)
        for (int n = 0; n < 2; ++n) {
          double acc = 0;
          for (int k = 0; k < 4; ++k)
            acc += av[size_t((i * 3 + m) * 4 + k)] * cv[size_t((j * 4 + k) * 2 + n)];
          EXPECT_EQ(rv[size_t(((i * 3 + j) * 3 + m) * 2 + n)], acc);
        }
  // Vectors: (K) x (K,N) -> (N); (M,K) x (K) -> (M); (K) x (K) -> ().
  const Tensor v = make({1, 2, 3, 4}, DType::float64);
  expect_values(matmul(v, b), DType::float64, {5}, matmul_ref({1, 2, 3, 4}, bv, 1, 1, 4, 5), "(4) x (4,5)");
  expect_values(matmul(b.t(), v), DType::float64, {5}, matmul_ref({1, 2, 3, 4}, bv, 1, 1, 4, 5),
                "(5,4) x (4)");
  expect_values(matmul(v, v), DType::float64, {}, {30}, "(4) x (4)");
  // Mixed dtypes promote; transposed (non-contiguous) operands work.
  expect_values(matmul(make({1, 2}, {1, 2}, DType::int32), make({0.5, 1.5}, {2, 1}, DType::float32)),
                DType::float32, {1, 1}, {3.5}, "int32 x float32");
  expect_values(
      matmul(b.t(), b), DType::float64, {5, 5},
      [&] {
        std::vector<double> bt(20);
        for (int i = 0; i < 4; ++i)
          for (int j = 0; j < 5; ++j) bt[size_t(j * 4 + i)] = bv[size_t(i * 5 + j)];
        return matmul_ref(bt, bv, 1, 5, 4, 5);
      }(),
      "b^T b");
  EXPECT_THROW(matmul(a, make({1, 2, 3}, DType::float64)), Error);
  EXPECT_THROW(matmul(Tensor::scalar(1), b), Error);
}

// ---- empty and 0-dim tensors
// -------------------------------------------------------------------------------------
TEST(Ops, EmptyTensors) {
  const Tensor e = Tensor::zeros({0, 3});
  EXPECT_EQ(e.numel(), 0);
  EXPECT_EQ((e + e).shape(), (Shape{0, 3}));
  EXPECT_TRUE((e.exp() * 2.0).to_vector<float>().empty());
  expect_values(e.sum({0}), DType::float32, {3}, {0, 0, 0}, "sum over empty axis");
  expect_values(e.sum(), DType::float32, {}, {0}, "sum of empty");
  expect_values(e.sum({1}), DType::float32, {0}, {}, "sum over a full axis of an empty tensor");
  expect_values(e.max({1}), DType::float32, {0}, {}, "max with nothing to reduce");
  EXPECT_THROW(e.max({0}), Error);
  EXPECT_THROW(e.argmax(0), Error);
  EXPECT_EQ(e.reshape({3, 0}).shape(), (Shape{3, 0}));
  EXPECT_EQ(e.t().shape(), (Shape{3, 0}));
  expect_values(matmul(e, Tensor::ones({3, 2})), DType::float32, {0, 2}, {}, "(0,3) x (3,2)");
  expect_values(matmul(Tensor::ones({2, 0}), Tensor::ones({0, 3})), DType::float32, {2, 3},
                {0, 0, 0, 0, 0, 0}, "(2,0) x (0,3)");
  expect_values(where(e.lt(e), e, 1.0), DType::float32, {0, 3}, {}, "where empty");
  expect_values(Tensor::arange(0, DType::int64), DType::int64, {0}, {}, "arange(0)");
  expect_values(e.cast(DType::int32), DType::int32, {0, 3}, {}, "cast empty");
}

TEST(Ops, ZeroDimTensors) {
  const Tensor a = Tensor::scalar(3), b = Tensor::scalar(4);
  EXPECT_EQ((a + b).shape(), Shape{});
  EXPECT_EQ((a * b).item<float>(), 12.0f);
  EXPECT_EQ(a.ndim(), 0);
  EXPECT_EQ(a.numel(), 1);
  expect_values(a + Tensor::ones({2, 2}), DType::float32, {2, 2}, {4, 4, 4, 4}, "scalar + (2,2)");
  expect_values(a.exp(), DType::float32, {}, {std::exp(3.0)}, "exp scalar");
  expect_values(a.sum(), DType::float32, {}, {3}, "sum of scalar");
  expect_values(a.max(), DType::float32, {}, {3}, "max of scalar");
  expect_values(a.mean(), DType::float32, {}, {3}, "mean of scalar");
  expect_values(Tensor::scalar(2, DType::int64).sum(), DType::int64, {}, {2}, "sum of int scalar");
  expect_values(Tensor::ones({2, 3}).sum(), DType::float32, {}, {6}, "full sum is 0-dim");
  expect_values(where(Tensor::scalar(1, DType::boolean), a, b), DType::float32, {}, {3}, "where scalars");
  EXPECT_EQ(Tensor::scalar(-2.5, DType::float64).item<double>(), -2.5);
  EXPECT_EQ(Tensor::scalar(7, DType::int32).item<int64_t>(), 7);
}

// ---- creation
// -------------------------------------------------------------------------------------------------
TEST(Ops, Creation) {
  expect_values(Tensor::full({2, 2}, 1.5, DType::float16), DType::float16, {2, 2}, {1.5, 1.5, 1.5, 1.5},
                "full");
  expect_values(Tensor::zeros({3}, DType::int32), DType::int32, {3}, {0, 0, 0}, "zeros");
  expect_values(Tensor::ones({2}, DType::boolean), DType::boolean, {2}, {1, 1}, "ones bool");
  expect_values(Tensor::arange(5), DType::int64, {5}, {0, 1, 2, 3, 4}, "arange(5)");
  expect_values(Tensor::arange(1, 2, 0.25, DType::float64), DType::float64, {4}, {1, 1.25, 1.5, 1.75},
                "arange step");
  expect_values(Tensor::arange(3, 0, -1, DType::int32), DType::int32, {3}, {3, 2, 1}, "arange down");
  expect_values(Tensor::eye(2, 3), DType::float32, {2, 3}, {1, 0, 0, 0, 1, 0}, "eye(2,3)");
  expect_values(Tensor::zeros_like(make({1, 2}, DType::uint8)), DType::uint8, {2}, {0, 0}, "zeros_like");
  expect_values(Tensor::ones_like(make({1, 2}, DType::float64)), DType::float64, {2}, {1, 1}, "ones_like");
  const std::vector<half> hv = {half(1.0f), half(-2.0f)};
  expect_values(Tensor::from_vector<half>(hv), DType::float16, {2}, {1, -2}, "from_vector<half>");
  EXPECT_EQ(Tensor::from_vector<float>({1.5f, 2.5f}).to_vector<int32_t>(), (std::vector<int32_t>{1, 2}));
}
