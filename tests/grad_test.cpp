// Autograd tests: central finite differences in float64 for every differentiable primitive and
// tensor op (elementwise, reductions, movement, matmul, composites), plus the engine's behaviour:
// accumulation, broadcasting, no-grad scopes, retain_graph, detach, gradient dtypes, the ReLU
// backward structure and gradients() w.r.t. intermediate tensors.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "graph_util.h"

using namespace aether;

namespace {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

struct Input {
  std::vector<double> v;
  Shape shape;
};

// Fixed, irregular weights so that sum(w * y) exercises every output element differently.
std::vector<double> weights(int64_t n) {
  std::vector<double> w(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) w[size_t(k)] = std::sin(1.7 * double(k) + 0.3) + 0.1;
  return w;
}

double weighted_sum(const Fn& f, const std::vector<Input>& in, const std::vector<double>& w) {
  NoGradGuard no_grad;
  std::vector<Tensor> xs;
  for (const auto& i : in) xs.push_back(Tensor::from_vector<double>(i.v, i.shape));
  const auto y = f(xs).to_vector<double>();
  double s = 0;
  for (size_t k = 0; k < y.size(); ++k) s += w[k] * y[k];
  return s;
}

// Compares backward() of sum(w * f(x)) with central differences, for every element of every input.
void check_grad(const std::string& what, const Fn& f, const std::vector<Input>& in, double eps = 1e-6,
                double rtol = 1e-6) {
  SCOPED_TRACE(what);
  std::vector<Tensor> xs;
  for (const auto& i : in) xs.push_back(Tensor::from_vector<double>(i.v, i.shape).set_requires_grad());
  const Tensor y = f(xs);
  ASSERT_EQ(y.dtype(), DType::float64);
  const auto w = weights(y.numel());
  y.backward(Tensor::from_vector<double>(w, y.shape()));
  for (size_t i = 0; i < in.size(); ++i) {
    const Tensor g = xs[i].grad();
    ASSERT_TRUE(g.defined()) << "input " << i << " got no gradient";
    ASSERT_EQ(g.shape(), in[i].shape) << "input " << i;
    ASSERT_EQ(g.dtype(), DType::float64) << "input " << i;
    const auto analytic = g.to_vector<double>();
    for (size_t j = 0; j < in[i].v.size(); ++j) {
      auto plus = in, minus = in;
      plus[i].v[j] += eps;
      minus[i].v[j] -= eps;
      const double numeric = (weighted_sum(f, plus, w) - weighted_sum(f, minus, w)) / (2 * eps);
      const double scale = std::max({1.0, std::fabs(numeric), std::fabs(analytic[j])});
      EXPECT_NEAR(analytic[j], numeric, rtol * scale) << "input " << i << " element " << j;
    }
  }
}

std::vector<double> vals(int64_t n, double lo, double hi, int seed = 0) {
  std::vector<double> v;
  for (int64_t k = 0; k < n; ++k)
    v.push_back(lo + (hi - lo) * std::fmod(0.618034 * double(k + 1 + seed * 7) + 0.1 * seed, 1.0));
  return v;
}

Input in(const Shape& s, double lo = -2, double hi = 2, int seed = 0) {
  return {vals(numel(s), lo, hi, seed), s};
}

// Ops in the (unrealized) graph of t, counted by kind.
int count_ops(const Tensor& t, Op op) { return int(testing_graph::nodes_of(t, op).size()); }

}  // namespace

// ---- elementwise unary -------------------------------------------------------------------------------
TEST(Grad, Unary) {
  const Shape s{2, 3};
  check_grad("neg", [](auto x) { return -x[0]; }, {in(s)});
  check_grad("exp", [](auto x) { return x[0].exp(); }, {in(s)});
  check_grad("log", [](auto x) { return x[0].log(); }, {in(s, 0.3, 3)});
  check_grad("sqrt", [](auto x) { return x[0].sqrt(); }, {in(s, 0.3, 3)});
  check_grad("rsqrt", [](auto x) { return x[0].rsqrt(); }, {in(s, 0.3, 3)});
  check_grad("reciprocal", [](auto x) { return x[0].reciprocal(); }, {in(s, 0.3, 3)});
  check_grad("sin", [](auto x) { return x[0].sin(); }, {in(s)});
  check_grad("cos", [](auto x) { return x[0].cos(); }, {in(s)});
  check_grad("abs", [](auto x) { return x[0].abs(); }, {{{-2, -1.5, -0.3, 0.4, 1.1, 2}, s}});
  check_grad("square", [](auto x) { return x[0].square(); }, {in(s)});
  for (double e : {2.0, 3.0, 4.0, 7.0, -1.0, -2.0, -3.0})
    check_grad("pow " + std::to_string(e), [e](auto x) { return x[0].pow(e); },
               {{{-2, -1.5, -0.3, 0.4, 1.1, 2}, s}});
  for (double e : {0.5, 2.5, -1.5, 1.0 / 3})
    check_grad("pow " + std::to_string(e), [e](auto x) { return x[0].pow(e); }, {in(s, 0.3, 3)});
  check_grad("relu", [](auto x) { return x[0].relu(); }, {{{-2, -1.5, -0.3, 0.4, 1.1, 2}, s}});
  check_grad("sigmoid", [](auto x) { return x[0].sigmoid(); }, {in(s, -4, 4)});
  check_grad("tanh", [](auto x) { return x[0].tanh(); }, {in(s, -3, 3)});
  check_grad("clamp", [](auto x) { return x[0].clamp(-1, 1); }, {{{-2, -0.5, 0.3, 0.7, 1.4, 0.99}, s}});
  check_grad("copy (contiguous)", [](auto x) { return x[0].t().contiguous(); }, {in(s)});
  check_grad("cast f64->f64", [](auto x) { return x[0].cast(DType::float64) * 3.0; }, {in(s)});
}

TEST(Grad, PowZeroHasZeroGradient) {
  const Tensor x = Tensor::from_vector<double>({-2, 0, 3}).set_requires_grad();
  (x.pow(0) * 5.0).sum().backward();
  ASSERT_TRUE(x.grad().defined());
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 0}));
}

// PyTorch's rules where the formulas are 0 * inf: d/dx of x^0 is 0 (also at x = 0), d/de of 0^e is
// 0 for e >= 0; and 0^e for e < 0 is inf with a -inf exponent gradient, as x^e ln x gives.
TEST(Grad, PowOfTensorsAtZero) {
  const Tensor x = Tensor::from_vector<double>({0, 0, 0, 0, 2}).set_requires_grad();
  const Tensor e = Tensor::from_vector<double>({0, 2, 0.5, -1, 0}).set_requires_grad();
  const Tensor y = x.pow(e);
  EXPECT_EQ(y.to_vector<double>(), (std::vector<double>{1, 0, 0, INFINITY, 1}));
  y.sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, INFINITY, -INFINITY, 0}));
  EXPECT_EQ(e.grad().to_vector<double>(), (std::vector<double>{0, 0, 0, -INFINITY, std::log(2.0)}));
}

// ---- elementwise binary, with broadcasting ---------------------------------------------------------------
TEST(Grad, Binary) {
  const Shape s{2, 3};
  for (const auto& bs : {Shape{2, 3}, Shape{3}, Shape{2, 1}, Shape{}}) {
    const std::string b = " b=" + to_string(bs);
    check_grad("add" + b, [](auto x) { return x[0] + x[1]; }, {in(s), in(bs, -2, 2, 1)});
    check_grad("sub" + b, [](auto x) { return x[0] - x[1]; }, {in(s), in(bs, -2, 2, 1)});
    check_grad("mul" + b, [](auto x) { return x[0] * x[1]; }, {in(s), in(bs, -2, 2, 1)});
    check_grad("div" + b, [](auto x) { return x[0] / x[1]; }, {in(s), in(bs, 0.5, 2, 1)});
    check_grad("rdiv" + b, [](auto x) { return x[1] / x[0]; }, {in(s, 0.5, 2), in(bs, -2, 2, 1)});
    // Inputs chosen so that no pair ties.
    check_grad("maximum" + b, [](auto x) { return x[0].maximum(x[1]); },
               {in(s, -2, 2), in(bs, -2.05, 1.95, 1)});
    check_grad("minimum" + b, [](auto x) { return x[0].minimum(x[1]); },
               {in(s, -2, 2), in(bs, -2.05, 1.95, 1)});
  }
  for (const auto& bs : {Shape{2, 3}, Shape{3}, Shape{}})
    check_grad("pow b=" + to_string(bs), [](auto x) { return x[0].pow(x[1]); },
               {in(s, 0.3, 3), in(bs, -2, 2, 1)});
  // A negative base with integer exponents (its exponent's gradient, x^e ln x, is NaN there: not checked).
  check_grad("pow of negative x",
             [](auto x) {
               return x[0].pow(Tensor::from_vector<double>({2, 3, -1}, {3}));
             },
             {{{-2, -1.5, -0.3, 0.4, 1.1, 2}, s}});
  check_grad("base^x", [](auto x) { return pow(2.5, x[0]) + pow(0.5, x[0]); }, {in(s)});
  check_grad("x * x", [](auto x) { return x[0] * x[0]; }, {in(s)});
  check_grad("scalars", [](auto x) { return (2.0 - x[0]) * 3.0 / (x[0] * x[0] + 1.0) + 0.5; }, {in(s)});
}

// Rounding is flat between whole numbers, integer division too; the remainders are a minus a
// piecewise-constant multiple of b (PyTorch's rules). The inputs keep a, a / b away from the jumps.
TEST(Grad, RoundingAndIntegerDivision) {
  const Shape s{2, 3};
  const Input x{{-2.3, -1.7, -0.2, 0.4, 1.2, 2.6}, s};
  for (const auto& [name, f] :
       std::vector<std::pair<std::string, Fn>>{{"floor", [](auto x) { return x[0].floor() + x[0]; }},
                                               {"ceil", [](auto x) { return x[0].ceil() * 2.0 + x[0]; }},
                                               {"trunc", [](auto x) { return x[0].trunc() + x[0].square(); }},
                                               {"round", [](auto x) { return x[0].round() * x[0]; }}})
    check_grad(name, f, {x});
  for (const auto& bs : {Shape{2, 3}, Shape{3}, Shape{}}) {
    const std::string b = " b=" + to_string(bs);
    for (const auto& [lo, hi] : {std::pair{0.55, 1.35}, std::pair{-1.35, -0.55}}) {
      const Input d = in(bs, lo, hi, 1);
      check_grad("fmod" + b, [](auto x) { return x[0].fmod(x[1]); }, {x, d});
      check_grad("remainder" + b, [](auto x) { return x[0].remainder(x[1]); }, {x, d});
      check_grad("floor_divide" + b, [](auto x) { return x[0].floor_divide(x[1]) + x[0] * x[1]; }, {x, d});
    }
  }
}

// take (Gather): repeated indices sum their gradients (ScatterAdd), untaken elements get 0.
TEST(Grad, Take) {
  const Shape s{3, 4, 2};
  const Tensor rows = Tensor::from_vector<int64_t>({2, 0, 2, -1}),
               grid = Tensor::from_vector<int64_t>({3, -1, 3, 1}, {2, 2});
  check_grad("take axis 0", [&](auto x) { return x[0].take(rows); }, {in(s)});
  check_grad("take axis 1", [&](auto x) { return x[0].take(grid, 1) * x[0].take(grid, 1); }, {in(s)});
  check_grad("take axis 2",
             [&](auto x) {
               return x[0].take(Tensor::from_vector<int64_t>({1, 1, 1}), 2).exp();
             },
             {in(s)});
  check_grad("clone", [](auto x) { return x[0].clone() * x[0]; }, {in(s)});
  check_grad("sign (flat)", [](auto x) { return x[0].sign() * x[0] + x[0]; }, {in(s)});
  // Float32 with many repeats: the sums are exact small integers.
  const Tensor x = Tensor::zeros({2, 3}).set_requires_grad();
  x.take(Tensor::from_vector<int64_t>({1, 1, 0, 1}), 0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{1, 1, 1, 3, 3, 3}));
}

// cumprod's and prod's gradients come from CumprodBwd, which divides by nothing: exact where inputs
// are 0 (one zero, two zeros in a line), as the finite differences see them (products are linear in
// each element).
TEST(Grad, CumprodAndProdAtZeros) {
  const Input z{{2, 0, 3, 0.5, -1, 0, 0, 4, 1.5, -2, 0.5, 3}, {3, 4}};
  for (int axis : {0, 1, -1}) {
    check_grad(detail::cat("cumprod axis ", axis), [&](auto x) { return x[0].cumprod(axis); }, {z});
    check_grad(detail::cat("prod axis ", axis), [&](auto x) { return x[0].prod({axis}); }, {z});
  }
  check_grad("prod all", [](auto x) { return x[0].prod(); }, {in({2, 3}, 0.5, 1.5)});
  check_grad("prod two axes, keepdim",
             [](auto x) {
               return x[0].prod({0, 2}, true);
             },
             {in({2, 3, 2}, -1.5, 1.5)});
  check_grad("prod of nothing", [](auto x) { return x[0].prod({1}) * 2.0; }, {in({2, 0})});
}

// The ops along one axis: cumsum's gradient is a running sum from the end; sort's, topk's and
// take_along_axis's send each value's gradient back to where it came from (repeats sum).
TEST(Grad, AlongAxis) {
  const Shape s{3, 4, 2};
  for (int axis : {0, 1, 2, -1})
    check_grad(detail::cat("cumsum axis ", axis), [&](auto x) { return x[0].cumsum(axis).square(); },
               {in(s)});
  // Distinct values (a random draw), so the sorting order is the same under the finite differences.
  check_grad("sort", [](auto x) { return x[0].sort(1).first.exp(); }, {in(s, -2, 2, 3)});
  check_grad("sort descending", [](auto x) { return x[0].sort(0, true).first * x[0]; }, {in(s, -2, 2, 4)});
  check_grad("topk", [](auto x) { return x[0].topk(2, 1).first.square(); }, {in(s, -2, 2, 5)});
  check_grad("topk smallest", [](auto x) { return x[0].topk(1, 0, false).first; }, {in(s, -2, 2, 6)});
  const Tensor idx = Tensor::from_vector<int64_t>({3, 3, -1, 0, 1, 1}, {1, 6, 1});  // broadcast, repeats
  check_grad("take_along_axis", [&](auto x) { return x[0].take_along_axis(idx, 1).exp(); }, {in(s)});
  check_grad("index_add",
             [&](auto x) {
               return x[0].index_add(1, Tensor::from_vector<int64_t>({2, 2, -1}), x[1].exp()).square();
             },
             {in(s), in({3, 3, 2}, -1, 1, 7)});
  // float64 gradients stay float64 through the scatter (they were once summed through float32).
  const double tiny = std::ldexp(1.0, -40);
  const Tensor x = Tensor::zeros({2, 2}, DType::float64).set_requires_grad();
  x.take(Tensor::from_vector<int64_t>({1, 1}), 0).backward(Tensor::full({2, 2}, 1 + tiny, DType::float64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0, 2 + 2 * tiny, 2 + 2 * tiny}));
}

TEST(Grad, MaximumTiesSplit) {
  const Tensor a = Tensor::from_vector<double>({1, 2, 3}).set_requires_grad();
  const Tensor b = Tensor::from_vector<double>({1, 5, 0}).set_requires_grad();
  a.maximum(b).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>{0.5, 0, 1}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{0.5, 1, 0}));
  const Tensor c = Tensor::from_vector<double>({2}).set_requires_grad();
  c.maximum(c).sum().backward();  // the two halves meet again: 1 in total
  EXPECT_EQ(c.grad().item<double>(), 1.0);
}

TEST(Grad, Where) {
  const Shape s{2, 3};
  const Tensor cond = Tensor::from_vector<bool>({true, false, false, true, true, false}, s);
  check_grad("where", [&](auto x) { return where(cond, x[0], x[1]); }, {in(s), in(s, -2, 2, 1)});
  check_grad("where broadcast", [&](auto x) { return where(cond, x[0], x[1]); },
             {in({3}), in({2, 1}, -2, 2, 1)});
  check_grad("where scalar", [&](auto x) { return where(cond, x[0], 2.0) * x[0]; }, {in(s)});
  check_grad("where cond from x", [](auto x) { return where(x[0] > 0.0, x[0] * 2.0, x[0].exp()); },
             {{{-2, -1.5, -0.3, 0.4, 1.1, 2}, s}});
}

// ---- reductions ------------------------------------------------------------------------------------------
TEST(Grad, Reductions) {
  const Shape s{2, 3, 4};
  const std::vector<std::vector<int64_t>> axes_sets = {{}, {0}, {1}, {-1}, {0, 2}, {1, 2}};
  for (const auto& ax : axes_sets)
    for (bool keep : {false, true}) {
      const std::string w = " axes=" + std::to_string(ax.size()) +
                            (ax.empty() ? "" : ":" + std::to_string(ax[0])) + (keep ? " keepdim" : "");
      check_grad("sum" + w, [&](auto x) { return x[0].sum(ax, keep); }, {in(s)});
      check_grad("max" + w, [&](auto x) { return x[0].max(ax, keep); }, {in(s)});  // distinct values
      check_grad("min" + w, [&](auto x) { return x[0].min(ax, keep); }, {in(s)});
      check_grad("mean" + w, [&](auto x) { return x[0].mean(ax, keep); }, {in(s)});
      check_grad("var" + w, [&](auto x) { return x[0].var(ax, keep); }, {in(s)});
      check_grad("var unbiased" + w, [&](auto x) { return x[0].var(ax, keep, 1); }, {in(s)});
      check_grad("std" + w, [&](auto x) { return x[0].std(ax, keep, 1); }, {in(s)});
    }
  check_grad("softmax",
             [](auto x) {
               const Tensor e = (x[0] - x[0].max({1}, true)).exp();
               return e / e.sum({1}, true);
             },
             {in({2, 5})});
  check_grad("logsumexp", [](auto x) { return x[0].exp().sum({0}).log(); }, {in({3, 2})});
}

TEST(Grad, MaxTiesSplitEvenly) {
  const Tensor x = Tensor::from_vector<double>({1, 3, 3, 2, 5, 5, 5, 0}, {2, 4}).set_requires_grad();
  x.max({1}).backward(Tensor::from_vector<double>({1, 6}));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{0, 0.5, 0.5, 0, 2, 2, 2, 0}));
  const Tensor y = Tensor::from_vector<double>({4, 4}).set_requires_grad();
  y.max().backward();
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{0.5, 0.5}));
}

// ---- movement ---------------------------------------------------------------------------------------------
TEST(Grad, Movement) {
  const Shape s{3, 4};
  check_grad("reshape",
             [](auto x) {
               return x[0].reshape({2, 6}) * x[0].reshape({2, 6}).flip({0});
             },
             {in(s)});
  check_grad("permute", [](auto x) { return x[0].reshape({3, 2, 2}).permute({2, 0, 1}); }, {in(s)});
  check_grad("transpose", [](auto x) { return x[0].t(); }, {in(s)});
  check_grad("expand", [](auto x) { return x[0].expand({2, 3, 4}); }, {in({3, 1})});
  check_grad("broadcast_to", [](auto x) { return x[0].broadcast_to({3, 4}); }, {in({4})});
  check_grad("expand scalar", [](auto x) { return x[0].expand({2, 2}); }, {in({})});
  check_grad("pad", [](auto x) { return x[0].pad({{1, 2}, {0, 3}}); }, {in(s)});
  check_grad("flip", [](auto x) { return x[0].flip({0, 1}); }, {in(s)});
  check_grad("flip one", [](auto x) { return x[0].flip({-1}); }, {in(s)});
  check_grad("squeeze/unsqueeze", [](auto x) { return x[0].unsqueeze(1).squeeze(); }, {in({3, 1, 4})});
  check_grad("flatten", [](auto x) { return x[0].flatten(); }, {in({2, 3, 2})});
  struct Sl {
    int64_t a, b, c;
  };
  for (const auto& sl :
       {Sl{0, 4, 1}, Sl{1, 3, 1}, Sl{0, 4, 2}, Sl{1, 4, 2}, Sl{0, 7, 3}, Sl{1, 7, 3}, Sl{2, 3, 5},
        Sl{-3, -1, 1}, Sl{3, 0, -1}, Sl{-1, -8, -2}, Sl{2, -8, -3}, Sl{3, 1, -2}})
    for (int64_t axis : {0, 1})
      check_grad("slice(" + std::to_string(axis) + ", " + std::to_string(sl.a) + ", " + std::to_string(sl.b) +
                     ", " + std::to_string(sl.c) + ")",
                 [&](auto x) { return x[0].slice(axis, sl.a, sl.b, sl.c); }, {in({7, 4})});
  check_grad("slice of slice", [](auto x) { return x[0].slice(0, 1, 7, 2).slice(1, 3, -5, -2); },
             {in({7, 6})});
  check_grad("cat", [](auto x) { return cat({x[0], x[1], x[0]}, 1); }, {in({2, 3}), in({2, 1}, -1, 1, 2)});
  check_grad("stack", [](auto x) { return stack({x[0], x[1]}, 1); }, {in({2, 3}), in({2, 3}, -1, 1, 2)});
  check_grad(
      "chain",
      [](auto x) {
        return x[0].permute({1, 0}).slice(1, 0, 3, 2).flip({0}).pad({{1, 0}, {0, 1}}).reshape({-1}) * 2.0;
      },
      {in({3, 4})});
}

// ---- matmul
// ------------------------------------------------------------------------------------------------
TEST(Grad, Matmul) {
  check_grad("matmul 2d", [](auto x) { return matmul(x[0], x[1]); }, {in({2, 3}), in({3, 4}, -1, 1, 1)});
  check_grad("matmul batched", [](auto x) { return matmul(x[0], x[1]); },
             {in({2, 2, 3}), in({3, 2}, -1, 1, 1)});
  check_grad("matmul broadcast", [](auto x) { return matmul(x[0], x[1]); },
             {in({2, 1, 2, 3}), in({3, 3, 2}, -1, 1, 1)});
  check_grad("matmul vec", [](auto x) { return matmul(x[0], x[1]); }, {in({3}), in({3, 2}, -1, 1, 1)});
  check_grad("matmul dot", [](auto x) { return matmul(x[0], x[1]); }, {in({4}), in({4}, -1, 1, 1)});
  check_grad("matmul transposed", [](auto x) { return matmul(x[0].t(), x[0]); }, {in({3, 2})});
}

// A linear layer's y = x w^T: w's gradient is made as the transpose of a dense product (dy^T x, not
// (x^T dy)^T), so it is dense in w's layout and the optimizer reads it in order. The same for a
// transposed left operand. Values against the plain formulas.
TEST(Grad, TransposedOperandsGetDenseGradients) {
  const Tensor x = Tensor::from_vector<double>(vals(12, -1, 1, 1), {4, 3});
  const Tensor w = Tensor::from_vector<double>(vals(6, -1, 1, 2), {2, 3}).set_requires_grad();
  const Tensor dy = Tensor::from_vector<double>(vals(8, -1, 1, 3), {4, 2});
  matmul(x, w.t()).backward(dy);
  const Tensor g = w.grad().realize();
  EXPECT_TRUE(g.node()->view.is_contiguous()) << g.node()->view;
  EXPECT_EQ(g.to_vector<double>(), matmul(dy.t(), x).to_vector<double>());
  const Tensor a = Tensor::from_vector<double>(vals(12, -1, 1, 4), {3, 4}).set_requires_grad();
  matmul(a.t(), w.t().detach()).backward(dy);  // (4,3) x (3,2)
  const Tensor ga = a.grad().realize();
  EXPECT_TRUE(ga.node()->view.is_contiguous()) << ga.node()->view;
  EXPECT_EQ(ga.to_vector<double>(), matmul(w.t().detach(), dy.t()).to_vector<double>());
}

// einsum is built of matmul, products, sums and views: each of its ways, differentiated by autograd.
TEST(Grad, Einsum) {
  auto e = [](const char* spec) { return [spec](const std::vector<Tensor>& x) { return einsum(spec, x); }; };
  check_grad("einsum matmul", e("ij,jk->ik"), {in({2, 3}), in({3, 4}, -1, 1, 1)});
  check_grad("einsum batched, transposed", e("bji,bjk->bki"), {in({2, 3, 2}), in({2, 3, 4}, -1, 1, 1)});
  check_grad("einsum product summed", e("ij,j->i"), {in({2, 3}), in({3}, -1, 1, 1)});
  check_grad("einsum outer", e("i,j->ij"), {in({3}), in({2}, -1, 1, 1)});
  check_grad("einsum diagonal", e("iij->ji"), {in({3, 3, 2})});
  check_grad("einsum trace", e("ii"), {in({3, 3})});
  check_grad("einsum ellipsis, broadcast", e("...ij,...jk->...ik"),
             {in({2, 1, 2, 3}), in({3, 3, 2}, -1, 1, 1)});
  check_grad("einsum size-1 stretched", e("ij,jk->ik"), {in({2, 1}), in({3, 4}, -1, 1, 1)});
  check_grad("einsum three operands", e("bi,ij,bj->b"),
             {in({2, 3}), in({3, 3}, -1, 1, 1), in({2, 3}, -1, 1, 2)});
}

// ---- casts
// ---------------------------------------------------------------------------------------------------
TEST(Grad, CastFloat32Float64) {
  // float64 leaf -> float32 -> float64: the gradient comes back in float64.
  const Tensor x = Tensor::from_vector<double>({1.5, -2, 3}).set_requires_grad();
  const Tensor w = Tensor::from_vector<float>({1, 2, -4});
  (x.cast(DType::float32) * w).sum().backward();
  EXPECT_EQ(x.grad().dtype(), DType::float64);  // promote(float32 dy, float64 input)
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 2, -4}));
  // float32 leaf -> float64: d/dx sum(x^2) = 2x; the float64 upstream gradient keeps its dtype.
  const Tensor y = Tensor::from_vector<float>({0.5f, -3}).set_requires_grad();
  y.cast(DType::float64).square().sum().backward();
  EXPECT_EQ(y.grad().dtype(), DType::float64);
  EXPECT_EQ(y.grad().to_vector<double>(), (std::vector<double>{1, -6}));
  // Through float32 -> float64 -> float32: the float64 step widens the gradient, which stays float64.
  const Tensor z = Tensor::from_vector<float>({2, 3}).set_requires_grad();
  (z.cast(DType::float64) * 2.0).cast(DType::float32).sum().backward();
  EXPECT_EQ(z.grad().dtype(), DType::float64);
  EXPECT_EQ(z.grad().to_vector<float>(), (std::vector<float>{2, 2}));
}

// ---- the engine
// ------------------------------------------------------------------------------------------------
TEST(Grad, AccumulatesAcrossBackwardCalls) {
  Tensor x = Tensor::from_vector<double>({1, 2}).set_requires_grad();
  (x * 3.0).sum().backward();
  (x * x).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{3 + 2, 3 + 4}));
  x.zero_grad();
  EXPECT_FALSE(x.grad().defined());
  (x * 2.0).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2}));
}

TEST(Grad, ThroughBroadcasting) {
  const Tensor a = Tensor::from_vector<double>({1, 2, 3, 4, 5, 6}, {2, 3}).set_requires_grad();
  const Tensor b = Tensor::from_vector<double>({10, 20, 30}).set_requires_grad();
  const Tensor c = Tensor::scalar(2, DType::float64).set_requires_grad();
  ((a + b) * c).sum().backward();
  EXPECT_EQ(a.grad().to_vector<double>(), (std::vector<double>(6, 2)));
  EXPECT_EQ(b.grad().shape(), (Shape{3}));
  EXPECT_EQ(b.grad().to_vector<double>(), (std::vector<double>{4, 4, 4}));
  EXPECT_EQ(c.grad().shape(), Shape{});
  EXPECT_EQ(c.grad().item<double>(), 21.0 + 2 * 60.0);  // sum(a + b), b counted per row
}

TEST(Grad, NoGradGuardRecordsNothing) {
  const Tensor x = Tensor::from_vector<double>({1, 2}).set_requires_grad();
  EXPECT_TRUE(grad_enabled());
  {
    NoGradGuard g;
    EXPECT_FALSE(grad_enabled());
    const Tensor y = (x * 2.0).exp().sum();
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    EXPECT_THROW(y.backward(), Error);
    {
      NoGradGuard nested;
      EXPECT_FALSE(grad_enabled());
    }
    EXPECT_FALSE(grad_enabled());  // the inner guard restores the outer state
  }
  EXPECT_TRUE(grad_enabled());
  const Tensor z = x * 2.0;
  EXPECT_TRUE(z.requires_grad());
  EXPECT_NE(z.grad_fn(), nullptr);
  EXPECT_FALSE(x.grad().defined());
}

TEST(Grad, BackwardTwiceNeedsRetainGraph) {
  const Tensor x = Tensor::from_vector<double>({1, 2}).set_requires_grad();
  const Tensor y = (x * x).sum();
  y.backward();
  try {
    y.backward();
    FAIL() << "second backward() did not throw";
  } catch (const Error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("backward"), std::string::npos) << m;
    EXPECT_NE(m.find("retain_graph"), std::string::npos) << m;
  }
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 4}));  // the failed call added nothing

  const Tensor u = Tensor::from_vector<double>({1, 2}).set_requires_grad();
  const Tensor v = (u * u).sum();
  v.backward(Tensor(), /*retain_graph=*/true);
  v.backward(Tensor(), true);
  v.backward();
  EXPECT_EQ(u.grad().to_vector<double>(), (std::vector<double>{6, 12}));
  EXPECT_THROW(v.backward(), Error);
}

TEST(Grad, DetachStopsGradients) {
  const Tensor x = Tensor::from_vector<double>({1, 2}).set_requires_grad();
  const Tensor d = x.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_EQ(d.grad_fn(), nullptr);
  EXPECT_EQ(d.node(), x.node());  // same value, no copy
  (d * x).sum().backward();
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{1, 2}));
  const Tensor y = (x * 3.0).detach();
  EXPECT_FALSE(y.requires_grad());
  EXPECT_THROW(y.sum().backward(), Error);
}

TEST(Grad, ErrorsAndLeafRules) {
  const Tensor x = Tensor::from_vector<double>({1, 2}).set_requires_grad();
  Tensor y = x * 2.0;
  EXPECT_THROW(y.backward(), Error);                                   // non-scalar needs dy
  EXPECT_THROW(y.backward(Tensor::ones({3}, DType::float64)), Error);  // wrong dy shape
  EXPECT_THROW(y.set_requires_grad(false), Error);                     // not a leaf
  EXPECT_THROW(Tensor::ones({2}, DType::int32).set_requires_grad(), Error);
  EXPECT_FALSE(x.grad().defined());
  y.backward(Tensor::ones({2}, DType::float64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{2, 2}));
}

// The leaf's grad must not alias the caller's dy handle.
TEST(Grad, LeafGradDoesNotAliasUpstreamTensor) {
  const Tensor x = Tensor::from_vector<double>({1, 2}).set_requires_grad();
  Tensor dy = Tensor::from_vector<double>({5, 7});
  x.backward(dy);
  dy.assign(Tensor::zeros({2}, DType::float64));
  EXPECT_EQ(x.grad().to_vector<double>(), (std::vector<double>{5, 7}));
  EXPECT_FALSE(x.grad().requires_grad());
}

TEST(Grad, ReluBackwardIsOneSelect) {
  const Tensor x = Tensor::from_vector<double>({-1, 2, -3, 4}).set_requires_grad();
  const double nan = std::nan("");
  x.relu().backward(Tensor::from_vector<double>({nan, 5, nan, nan}));
  const Tensor g = x.grad();
  EXPECT_FALSE(g.is_realized());
  EXPECT_EQ(count_ops(g, Op::Where), 1);
  EXPECT_EQ(count_ops(g, Op::Mul), 0);
  const auto gv = g.to_vector<double>();
  EXPECT_EQ(gv[0], 0.0);  // inactive: the NaN upstream gradient does not leak
  EXPECT_EQ(gv[1], 5.0);
  EXPECT_EQ(gv[2], 0.0);
  EXPECT_TRUE(std::isnan(gv[3]));  // active: passes through
}

TEST(Grad, GradientDTypeFollowsIncomingGradient) {
  // float32 leaf -> float16 -> relu, float32 upstream gradient.
  const Tensor x = Tensor::from_vector<float>({-1, 2, 3}).set_requires_grad();
  const Tensor h = x.cast(DType::float16);
  const Tensor r = h.relu();
  ASSERT_EQ(r.dtype(), DType::float16);
  const Tensor dy = Tensor::from_vector<float>({1.0f, 1.0f + 1.0f / 4096, 3});  // not exact in float16
  const auto gh = gradients(r, {h}, dy, /*retain_graph=*/true);
  EXPECT_EQ(gh[0].dtype(), DType::float32);  // the relu step's gradient is float32
  EXPECT_EQ(gh[0].to_vector<float>(), (std::vector<float>{0, 1.0f + 1.0f / 4096, 3}));
  r.backward(dy);
  EXPECT_EQ(x.grad().dtype(), DType::float32);
  EXPECT_EQ(x.grad().to_vector<float>(), (std::vector<float>{0, 1.0f + 1.0f / 4096, 3}));
  // A float16 leaf with a float32 upstream gradient gets a float32 gradient too.
  const Tensor y = Tensor::from_vector<float>({2, -1}).cast(DType::float16).detach().set_requires_grad();
  (y * 3.0).backward(Tensor::from_vector<float>({1, 1}));
  EXPECT_EQ(y.grad().dtype(), DType::float32);
  EXPECT_EQ(y.grad().to_vector<float>(), (std::vector<float>{3, 3}));
  // And the default (implicit) gradient of a float16 scalar is float16.
  const Tensor z = Tensor::from_vector<float>({2}).cast(DType::float16).detach().set_requires_grad();
  (z * z).sum().backward();
  EXPECT_EQ(z.grad().dtype(), DType::float16);
  EXPECT_EQ(z.grad().item<float>(), 4.0f);
}

TEST(Grad, GradientsOfIntermediates) {
  const Tensor x = Tensor::from_vector<double>({1, 2, 3}).set_requires_grad();
  const Tensor h = x * 2.0;  // not a leaf
  const Tensor y = (h * h).sum();
  const auto g = gradients(y, {h, x}, Tensor(), /*retain_graph=*/true);
  EXPECT_EQ(g[0].to_vector<double>(), (std::vector<double>{4, 8, 12}));   // 2h
  EXPECT_EQ(g[1].to_vector<double>(), (std::vector<double>{8, 16, 24}));  // 8x
  EXPECT_FALSE(x.grad().defined());                                       // gradients() leaves .grad alone
  // An input the output does not depend on gets zeros.
  const Tensor other = Tensor::from_vector<double>({1, 1}).set_requires_grad();
  const auto g2 = gradients(y, {other});
  EXPECT_EQ(g2[0].to_vector<double>(), (std::vector<double>{0, 0}));
}

TEST(Grad, SavesOnlyWhatRulesNeed) {
  const Tensor x = Tensor::from_vector<double>({1, 2}).set_requires_grad();
  const Tensor e = x.exp();
  ASSERT_NE(e.grad_fn(), nullptr);
  EXPECT_EQ(e.grad_fn()->inputs[0], nullptr);  // exp keeps its output, not its input
  EXPECT_NE(e.grad_fn()->output, nullptr);
  const Tensor a = x + x;
  EXPECT_EQ(a.grad_fn()->inputs[0], nullptr);
  EXPECT_EQ(a.grad_fn()->output, nullptr);
  const Tensor l = x.log();
  EXPECT_NE(l.grad_fn()->inputs[0], nullptr);
  // After backward without retain_graph, the saved values are released.
  e.sum().backward();
  EXPECT_TRUE(e.grad_fn()->freed);
  EXPECT_EQ(e.grad_fn()->output, nullptr);
}
