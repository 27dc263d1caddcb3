// Forward tests of integer semantics against std:: computations done here: rounding and integer
// division of floats and integers (NumPy's and Python's rules), numbers with integer tensors, clamping
// and min/max at the ends of the integer ranges, wrapping arithmetic. The other op tests: ops_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "ops_util.h"

using namespace aether;
using namespace ops_test;

// ---- rounding and integer division ----------------------------------------------------------------------
TEST(Ops, Rounding) {
  // Ties, values just off a tie (0.49999997 is float32's largest below 0.5: floor(x + 0.5) gets it
  // wrong), signed zeros, whole numbers, inf and NaN. Every value is exact in every float dtype but
  // the 0.49999997s (float32 and float64 only).
  const std::vector<double> v = {-2.5, -1.5, -0.5, 0.5, 1.5, 2.5,       -2.75, -0.25, 0.25,
                                 1.25, 3.75, -3,   0,   7,   1048576.5, kInf,  -kInf, kNaN};
  const std::vector<double> near = {0.49999997019767761, -0.49999997019767761, 2.5000002384185791};
  for (DType t : kFloats) {
    const std::string n = dtype_name(t);
    const Tensor x = make(v, t);
    const Shape s{int64_t(v.size())};
    // 1048576.5 is whole in float16 (inf) and bfloat16 (1048576): compare with the stored value.
    const auto stored = map(v, [&](double e) { return round_to(e, t); });
    expect_values(x.floor(), t, s, map(stored, [](double e) { return std::floor(e); }), "floor " + n, 0);
    expect_values(x.ceil(), t, s, map(stored, [](double e) { return std::ceil(e); }), "ceil " + n, 0);
    expect_values(x.trunc(), t, s, map(stored, [](double e) { return std::trunc(e); }), "trunc " + n, 0);
    // std::nearbyint in the default rounding mode: to nearest, ties to even.
    expect_values(x.round(), t, s, map(stored, [](double e) { return std::nearbyint(e); }), "round " + n, 0);
    if (t == DType::float32 || t == DType::float64) {
      const auto want = map(near, [&](double e) { return std::nearbyint(round_to(e, t)); });
      expect_values(make(near, t).round(), t, {3}, want, "round near ties " + n, 0);
    }
  }
  // Integers and bool are whole already: returned as they are, dtype kept.
  for (DType t : {DType::int32, DType::int64, DType::uint8, DType::boolean}) {
    const Tensor x = make({0, 1, 5}, t);
    for (const Tensor& r : {x.floor(), x.ceil(), x.trunc(), x.round()})
      EXPECT_TRUE(r.same(x)) << dtype_name(t);
  }
}

// Python's // and % on floats (CPython's float_floor_div and float_rem, which NumPy follows), in C.
template <typename C>
C py_floordiv(C a, C b) {
  if (b == 0) return a / b;
  const C mod = std::fmod(a, b);
  C div = (a - mod) / b;
  if (mod != 0 && (b < 0) != (mod < 0)) div -= 1;
  C f = std::floor(div);
  if (div - f > C(0.5)) f += 1;
  return f;
}
template <typename C>
C py_mod(C a, C b) {
  const C mod = std::fmod(a, b);
  return mod != 0 && (b < 0) != (mod < 0) ? mod + b : mod;
}

TEST(Ops, IntegerDivisionOfFloats) {
  const std::vector<double> a = {7, -7, 7, -7, 5.5, -5.5, 1, -1, 0.75, 3, 1, -1, 0, 1e30, 2.5},
                            b = {2, 2, -2, -2, -2, 2.5, 0.1, 0.1, 0.25, 0, 0, 0, 0, 3, kInf};
  for (DType t : kFloats) {
    const std::string n = dtype_name(t);
    const Tensor x = make(a, t), y = make(b, t);
    const Shape s{int64_t(a.size())};
    // The reference in float64 for float64; in float32, rounded once to t, for the others (16-bit
    // floats compute in float32), on the stored inputs.
    auto want = [&](auto f) {
      return zip(a, b, [&](double p, double q) {
        p = round_to(p, t), q = round_to(q, t);
        return t == DType::float64 ? f(p, q) : round_to(double(f(float(p), float(q))), t);
      });
    };
    expect_values(x.fmod(y), t, s, want([](auto p, auto q) { return std::fmod(p, q); }), "fmod " + n, 0);
    expect_values(x.floor_divide(y), t, s, want([](auto p, auto q) { return py_floordiv(p, q); }),
                  "floor_divide " + n, 0);
    expect_values(x.remainder(y), t, s, want([](auto p, auto q) { return py_mod(p, q); }), "remainder " + n,
                  0);
  }
  // Known values (Python's): 0.1 is stored above 1/10 in float32 and float64, so 1 // 0.1 is 9, not
  // floor(1 / 0.1) = 10; % takes the divisor's sign, fmod the dividend's; // 0 is a / 0.
  for (DType t : {DType::float32, DType::float64}) {
    const Tensor x = make({1, -1, 7, -7, 5.5, 1, -1, 0}, t), y = make({0.1, 0.1, -2, 2, -2, 0, 0, 0}, t);
    const Shape s{8};
    const std::string n = dtype_name(t);
    expect_values(x.floor_divide(y), t, s, {9, -10, -4, -4, -3, kInf, -kInf, kNaN}, "// known " + n, 0);
    expect_values(x.remainder(y), t, s,
                  {round_to(1 - 9 * round_to(0.1, t), t), round_to(10 * round_to(0.1, t) - 1, t), -1, 1, -0.5,
                   kNaN, kNaN, kNaN},
                  "% known " + n, 1e-7);
    expect_values(x.fmod(y), t, s,
                  {round_to(1 - 9 * round_to(0.1, t), t), -round_to(1 - 9 * round_to(0.1, t), t), 1, -1, 1.5,
                   kNaN, kNaN, kNaN},
                  "fmod known " + n, 1e-7);
  }
  // A scalar divisor is in the tensor's float dtype.
  expect_values(make({7.5, -7.5}, DType::float16).remainder(2), DType::float16, {2}, {1.5, 0.5}, "% scalar",
                0);
  expect_values(make({7.5, -7.5}, DType::float16).floor_divide(2), DType::float16, {2}, {3, -4}, "// scalar",
                0);
}

TEST(Ops, IntegerDivisionOfIntegers) {
  // C's / and % truncate; Python's // and % round down. x / 0 and x % 0 are 0 (NumPy's values, never
  // a trap), INT_MIN // -1 wraps to INT_MIN (NumPy's) and INT_MIN % -1 is 0.
  auto floordiv = [](int64_t p, int64_t q) -> int64_t {
    if (q == 0) return 0;
    if (q == -1) return int64_t(0 - uint64_t(p));
    const int64_t d = p / q;
    return p % q != 0 && (p < 0) != (q < 0) ? d - 1 : d;
  };
  auto mod = [](int64_t p, int64_t q) -> int64_t {
    if (q == 0 || q == -1) return 0;
    const int64_t r = p % q;
    return r != 0 && (r < 0) != (q < 0) ? r + q : r;
  };
  auto fmod = [](int64_t p, int64_t q) -> int64_t { return q == 0 || q == -1 ? 0 : p % q; };
  struct Data {
    DType t;
    std::vector<double> a, b;
  };
  const std::vector<Data> data = {
      {DType::int32,
       {7, -7, 7, -7, 6, -6, 0, 5, -2147483648.0, -2147483648.0, 2147483647},
       {2, 2, -2, -2, 3, 3, 4, 0, -1, 3, -10}},
      {DType::int64,
       {7, -7, 7, -7, 6, -6, 0, 5, -9.2233720368547758e18, 1e15 + 1, -1e15 - 1},
       {2, 2, -2, -2, 3, 3, 4, 0, -1, 7, 7}},
      {DType::uint8, {7, 255, 0, 5, 200, 13}, {2, 16, 4, 0, 255, 13}},
  };
  for (const auto& d : data) {
    const std::string n = dtype_name(d.t);
    const Tensor x = make(d.a, d.t), y = make(d.b, d.t);
    const Shape s{int64_t(d.a.size())};
    auto want = [&](auto f) {
      return zip(d.a, d.b,
                 [&](double p, double q) { return round_to(double(f(int64_t(p), int64_t(q))), d.t); });
    };
    expect_values(x.floor_divide(y), d.t, s, want(floordiv), "floor_divide " + n);
    expect_values(x.remainder(y), d.t, s, want(mod), "remainder " + n);
    expect_values(x.fmod(y), d.t, s, want(fmod), "fmod " + n);
  }
  // An integer tensor with an integer number stays integer, with a float number computes in float32
  // (the scalar rule); int with float promotes.
  expect_values(make({7, -7}, DType::int32).floor_divide(2), DType::int32, {2}, {3, -4}, "int // int scalar");
  expect_values(make({7, -7}, DType::int32).floor_divide(2.0), DType::float32, {2}, {3, -4}, "int // scalar");
  expect_values(make({7, -7}, DType::int32).remainder(make({2.5}, DType::float64)), DType::float64, {2},
                {2, 0.5}, "int32 % float64");
  // bool is refused, by name.
  const Tensor b = make({1, 0}, DType::boolean);
  const std::vector<std::pair<std::string, std::function<Tensor()>>> refused = {
      {"floor_divide", [&] { return b.floor_divide(b); }},
      {"remainder", [&] { return b.remainder(b); }},
      {"fmod", [&] { return b.fmod(b); }}};
  for (const auto& [name, f] : refused) {
    try {
      f();
      ADD_FAILURE() << name << " took bool tensors";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find(name + ": takes no bool"), std::string::npos) << e.what();
    }
  }
}

// Numbers with integer tensors follow NumPy's and PyTorch's rules for Python numbers: an integer
// keeps the tensor's dtype where it fits (else int64: exact, also above 2^53), a float computes in
// float32; bools with any number are arithmetic in int64. With float tensors, any number takes
// the tensor's dtype. (Integers once all became float32: int64 labels + 1 was float32, 2^60 + 1 == 2^60.)
TEST(Ops, IntegerNumbersKeepIntegerTensorsInteger) {
  const Tensor i32 = make({7, -7, 0}, DType::int32), u8 = make({0, 3, 255}, DType::uint8);
  expect_values(i32 + 1, DType::int32, {3}, {8, -6, 1}, "int32 + 1");
  expect_values(3 - i32, DType::int32, {3}, {-4, 10, 3}, "3 - int32");
  expect_values(i32 * int64_t(5), DType::int32, {3}, {35, -35, 0}, "int32 * int64_t 5");
  expect_values(i32 + 3000000000LL, DType::int64, {3}, {3000000007.0, 2999999993.0, 3e9},
                "int32 + a big int");
  expect_values(i32.remainder(3), DType::int32, {3}, {1, 2, 0}, "int32 % 3");
  expect_values(i32.fmod(3), DType::int32, {3}, {1, -1, 0}, "int32 fmod 3");
  expect_values(floor_divide(20, i32 + 1), DType::int32, {3}, {2, -4, 20}, "20 // int32");
  expect_values(i32.maximum(0), DType::int32, {3}, {7, 0, 0}, "maximum int32, 0");
  expect_values(where(i32 > 0, i32, 9), DType::int32, {3}, {7, 9, 9}, "where int32, 9");
  expect_values(u8 + 1, DType::uint8, {3}, {1, 4, 0}, "uint8 + 1 wraps, as NumPy's uint8");
  expect_values(u8 + 300, DType::int64, {3}, {300, 303, 555}, "uint8 + 300 (does not fit): int64");
  expect_values(u8 - (-1), DType::int64, {3}, {1, 4, 256}, "uint8 - -1: int64");
  expect_values(make({1, 0}, DType::boolean) + 1, DType::int64, {2}, {2, 1}, "bool + 1");
  expect_values(i32 * 0.5, DType::float32, {3}, {3.5, -3.5, 0}, "int32 * 0.5");
  expect_values(i32 / 2, DType::float32, {3}, {3.5, -3.5, 0}, "int32 / 2: true division");
  expect_values(make({1.5, 2}, DType::float16) + 1, DType::float16, {2}, {2.5, 3}, "float16 + 1");
  // Exact above 2^53, where a double (and float32) cannot tell neighbours apart.
  const int64_t big = (int64_t(1) << 60) + 1;
  const Tensor b = Tensor::from_vector<int64_t>({big, big - 1});
  EXPECT_EQ((b + 2).to_vector<int64_t>(), (std::vector<int64_t>{big + 2, big + 1}));
  EXPECT_EQ(b.eq(big).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ((b > big - 1).to_vector<bool>(), (std::vector<bool>{true, false}));
  EXPECT_EQ(b.remainder(7).to_vector<int64_t>(), (std::vector<int64_t>{big % 7, (big - 1) % 7}));
  EXPECT_EQ(b.clamp(0, big - 1).to_vector<int64_t>(), (std::vector<int64_t>{big - 1, big - 1}));
}

TEST(Ops, ClampIntAndMinMaxExtremes) {
  // minimum/maximum of extreme integer values (negation tricks overflow here).
  const Tensor a = make({-2147483648.0, 2147483647, 0}, DType::int32),
               b = make({0, 0, -2147483648.0}, DType::int32);
  expect_values(a.minimum(b), DType::int32, {3}, {-2147483648.0, 0, -2147483648.0}, "min int32 extremes");
  expect_values(a.maximum(b), DType::int32, {3}, {0, 2147483647, 0}, "max int32 extremes");
  // Mixed dtypes: promotion happens before any negation.
  expect_values(make({5, 0}, DType::uint8).minimum(make({3, -1}, DType::float32)), DType::float32, {2},
                {3, -1}, "min uint8, float32");
  expect_values(make({3, -1}, DType::float32).minimum(make({5, 0}, DType::uint8)), DType::float32, {2},
                {3, -1}, "min float32, uint8");
  expect_values(make({-2147483648.0}, DType::int32).minimum(make({0}, DType::float64)), DType::float64, {1},
                {-2147483648.0}, "min int32 INT_MIN, float64");
  expect_values(make({200}, DType::uint8).minimum(make({-1}, DType::int32)), DType::int32, {1}, {-1},
                "min uint8, int32");
  const Tensor u = make({0, 3, 255}, DType::uint8);
  expect_values(u.min(), DType::uint8, {}, {0}, "min uint8");
  expect_values(u.clamp(1, 4), DType::uint8, {3}, {1, 3, 4}, "clamp uint8 (integer bounds)");
  expect_values(u.clamp(1.0, 4.0), DType::float32, {3}, {1, 3, 4}, "clamp uint8 (float scalar bounds)");
  // Against a scalar: the tensor's float dtype, float32 for integers (as clamp and arithmetic).
  expect_values(u.maximum(2.5), DType::float32, {3}, {2.5, 3, 255}, "maximum uint8, scalar");
  expect_values(u.minimum(2.5), DType::float32, {3}, {0, 2.5, 2.5}, "minimum uint8, scalar");
  const Tensor h = make({-1, 0.5, 3}, DType::float16);
  expect_values(h.maximum(0), DType::float16, {3}, {0, 0.5, 3}, "maximum float16, scalar");
  expect_values(h.minimum(0), DType::float16, {3}, {-1, 0, 0}, "minimum float16, scalar");
}

// ---- integer semantics
// ----------------------------------------------------------------------------------------
TEST(Ops, IntegerDivision) {
  // The `/` operator is true division for integers (like NumPy/PyTorch): float32 results.
  const Tensor a = make({7, -7, 7, -7, 1, 0}, DType::int32), b = make({2, 2, -2, -2, 0, 0}, DType::int32);
  expect_values(a / b, DType::float32, {6}, {3.5, -3.5, -3.5, 3.5, kInf, kNaN}, "int32 / int32");
  expect_values(make({7}, DType::int64) / make({2}, DType::int64), DType::float32, {1}, {3.5},
                "int64 / int64");
  // The Div primitive on integers truncates toward zero; division by zero gives 0; INT_MIN / -1 wraps.
  for (DType t : {DType::int32, DType::int64}) {
    const double lo = t == DType::int32 ? -2147483648.0 : -9223372036854775808.0;
    const Tensor p = make({7, -7, 7, -7, 5, lo}, t), q = make({2, 2, -2, -2, 0, -1}, t);
    expect_values(prim::binary(Op::Div, p, q), t, {6}, {3, -3, -3, 3, 0, lo},
                  std::string("prim div ") + dtype_name(t));
  }
  expect_values(prim::binary(Op::Div, make({200, 7}, DType::uint8), make({7, 0}, DType::uint8)), DType::uint8,
                {2}, {28, 0}, "prim div uint8");
  // Integer arithmetic wraps.
  expect_values(make({2147483647}, DType::int32) + make({1}, DType::int32), DType::int32, {1},
                {-2147483648.0}, "int32 overflow wraps");
  expect_values(make({250}, DType::uint8) * make({2}, DType::uint8), DType::uint8, {1}, {244}, "uint8 wraps");
}
