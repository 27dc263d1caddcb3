// Every primitive op of the op table (aether/graph/op.h) in bfloat16 and float16 against the same op
// in float32 on the same values, forward and (for differentiable ops) backward, with the tolerance
// docs/mixed-precision.md documents per op. Like every test file, it runs on the fused executor and,
// as `.reference`, on the reference backend.
//
// The inputs are drawn in float32 and rounded to the 16-bit type, so both runs see the same values;
// a 16-bit op computes in float32 and rounds its result once, so
//   |got - want| <= k u (|want| + floor * max|want|) + tiny
// where u is the type's unit roundoff (2^-8 for bfloat16, 2^-11 for float16), k the number of
// roundings the op may add (0 for exact ops: movement, max, select, comparisons, copies), `floor`
// the share of the output's largest magnitude that accumulation-order differences in sums may add,
// and `tiny` float16's subnormal spacing (2^-24).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/graph/collective.h"
#include "aether/graph/primitives.h"
#include "aether/ops/conv.h"
#include "aether/ops/nn.h"
#include "core/half_array.h"

using namespace aether;

namespace {

struct Input {
  Shape shape;
  double lo = -2, hi = 2;  // uniform in [lo, hi), then rounded to the 16-bit type
};

struct Tol {
  double k = 1;      // roundings, in units of u
  double floor = 0;  // share of max|want| added to |want| (sums)
};

struct Case {
  const char* name;
  Op op;  // the primitive the case records (the coverage check below)
  std::vector<Input> inputs;
  std::function<Tensor(const std::vector<Tensor>&)> build;
  Tol forward;
  Tol backward = {8, 1e-3};  // several roundings: dy times a rounded saved value, then rounded
  // The inputs' gradient dtype when not the 16-bit type: a gradient keeps the incoming gradient's
  // dtype promoted with its input's (docs/mixed-precision.md), so through a cast to float64, float64.
  std::optional<DType> grad_dtype = std::nullopt;
};

const Conv2dArg kConv{
    .stride_h = 1, .stride_w = 1, .pad_top = 1, .pad_left = 1, .pad_bottom = 1, .pad_right = 1};
const Pool2dArg kPoolTile{};  // 2x2, stride 2: every input in one window (exact backward)
const Pool2dArg kPoolOverlap{.kernel_h = 3,
                             .kernel_w = 3,
                             .stride_h = 2,
                             .stride_w = 2,
                             .pad_top = 1,
                             .pad_left = 1,
                             .pad_bottom = 1,
                             .pad_right = 1};

// A collective group of two ranks that hold the same values (widened to float32 and back).
int64_t two_ranks() {
  static const int64_t group = register_collective([](void* data, size_t n, DType t) {
    if (t == DType::float32) {
      for (size_t i = 0; i < n; ++i) static_cast<float*>(data)[i] *= 2;
      return;
    }
    std::vector<float> wide(n);  // (n)
    widen_16bit(t, static_cast<const uint16_t*>(data), wide.data(), int64_t(n));
    for (float& v : wide) v *= 2;
    narrow_16bit(t, wide.data(), static_cast<uint16_t*>(data), int64_t(n));
  });
  return group;
}

Tensor bin(Op op, const std::vector<Tensor>& x) { return prim::binary(op, x[0], x[1]); }
Tensor un(Op op, const std::vector<Tensor>& x) { return prim::unary(op, x[0]); }

const std::vector<Case>& cases() {
  const Shape e{3, 37};  // elementwise: odd sizes
  const Tol exact{0, 0}, once{1, 0}, sum{1, 1e-3};
  static const std::vector<Case> all = {
      {"Load (a realized input)", Op::Load, {{e}}, [](auto& x) { return x[0]; }, exact, {0, 0}},
      {"Const (times a constant that rounds too)",
       Op::Const,
       {{e}},
       [](auto& x) { return prim::binary(Op::Mul, x[0], prim::constant(0.3, x[0].shape(), x[0].dtype())); },
       {2, 0}},
      // 16-bit uniform draws are a grid of u over [0, 1) (the float32 draw's leading bits): within
      // u of the float32 draw, not within u of its value.
      {"Rand",
       Op::Rand,
       {{e}},
       [](auto& x) { return prim::rand(x[0].shape(), x[0].dtype(), /*seed=*/11, /*stream=*/3); },
       {1, 2}},
      {"Cast to float64 and back",
       Op::Cast,
       {{e}},
       [](auto& x) { return prim::cast(prim::cast(x[0], DType::float64), x[0].dtype()); },
       exact,
       {0, 0},
       DType::float64},
      {"Cast to int32",
       Op::Cast,
       {{e, -100, 100}},
       [](auto& x) { return prim::cast(x[0], DType::int32); },
       exact},
      {"Copy", Op::Copy, {{e}}, [](auto& x) { return un(Op::Copy, x); }, exact, {0, 0}},
      {"Neg", Op::Neg, {{e}}, [](auto& x) { return un(Op::Neg, x); }, exact, {0, 0}},
      {"Exp", Op::Exp, {{e, -4, 4}}, [](auto& x) { return un(Op::Exp, x); }, once},
      {"Log", Op::Log, {{e, 0.25, 4}}, [](auto& x) { return un(Op::Log, x); }, once},
      {"Sqrt", Op::Sqrt, {{e, 0.25, 4}}, [](auto& x) { return un(Op::Sqrt, x); }, once},
      {"Recip", Op::Recip, {{e, 0.5, 2}}, [](auto& x) { return un(Op::Recip, x); }, once},
      {"Sin", Op::Sin, {{e, -3, 3}}, [](auto& x) { return un(Op::Sin, x); }, once},
      {"Floor", Op::Floor, {{e, -3, 3}}, [](auto& x) { return un(Op::Floor, x); }, exact},
      {"Add", Op::Add, {{e}, {e}}, [](auto& x) { return bin(Op::Add, x); }, once},
      {"Sub", Op::Sub, {{e}, {e}}, [](auto& x) { return bin(Op::Sub, x); }, once},
      {"Mul", Op::Mul, {{e}, {e}}, [](auto& x) { return bin(Op::Mul, x); }, once},
      {"Div", Op::Div, {{e}, {e, 0.5, 2}}, [](auto& x) { return bin(Op::Div, x); }, once},
      {"Max", Op::Max, {{e}, {e}}, [](auto& x) { return bin(Op::Max, x); }, exact},
      {"Pow", Op::Pow, {{e, 0.5, 2}, {e, -2, 2}}, [](auto& x) { return bin(Op::Pow, x); }, once},
      {"Fmod", Op::Fmod, {{e, -4, 4}, {e, 0.5, 2}}, [](auto& x) { return bin(Op::Fmod, x); }, exact},
      {"CmpLt", Op::CmpLt, {{e}, {e}}, [](auto& x) { return bin(Op::CmpLt, x); }, exact},
      {"CmpLe", Op::CmpLe, {{e}, {e}}, [](auto& x) { return bin(Op::CmpLe, x); }, exact},
      {"CmpEq",
       Op::CmpEq,
       {{e, -2, 2}, {e, -2, 2}},
       [](auto& x) { return prim::binary(Op::CmpEq, x[0], prim::binary(Op::Max, x[0], x[1])); },
       exact},
      {"CmpNe",
       Op::CmpNe,
       {{e}, {e}},
       [](auto& x) { return prim::binary(Op::CmpNe, x[0], prim::binary(Op::Max, x[0], x[1])); },
       exact},
      {"Where",
       Op::Where,
       {{e}, {e}},
       [](auto& x) { return prim::where(prim::binary(Op::CmpLt, x[0], x[1]), x[0], x[1]); },
       exact,
       {0, 0}},
      {"ReduceSum",
       Op::ReduceSum,
       {{{4, 33, 5}}},
       [](auto& x) { return prim::reduce(Op::ReduceSum, x[0], {1}); },
       sum,
       sum},
      {"ReduceMax",
       Op::ReduceMax,
       {{{4, 33, 5}}},
       [](auto& x) { return prim::reduce(Op::ReduceMax, x[0], {1}); },
       exact,
       {0, 0}},
      {"Reshape",
       Op::Reshape,
       {{e}},
       [](auto& x) {
         return prim::reshape(x[0], {37, 3});
       },
       exact,
       {0, 0}},
      {"Permute",
       Op::Permute,
       {{{2, 3, 5}}},
       [](auto& x) {
         return prim::permute(x[0], {2, 0, 1});
       },
       exact,
       {0, 0}},
      {"Expand",
       Op::Expand,
       {{{3, 1}}},
       [](auto& x) {
         return prim::expand(x[0], {3, 37});
       },
       exact,
       sum},  // its gradient is a sum
      {"Slice",
       Op::Slice,
       {{e}},
       [](auto& x) {
         return prim::slice(x[0], SliceArg{{0, 1}, {3, 37}, {2, 3}});
       },
       exact,
       {0, 0}},
      {"Pad",
       Op::Pad,
       {{e}},
       [](auto& x) {
         return prim::pad(x[0], PadArg{{1, 0}, {0, 2}});
       },
       exact,
       {0, 0}},
      {"Flip", Op::Flip, {{e}}, [](auto& x) { return prim::flip(x[0], {1}); }, exact, {0, 0}},
      {"Matmul",
       Op::Matmul,
       {{{2, 5, 7}}, {{2, 7, 3}}},
       [](auto& x) { return prim::matmul(x[0], x[1]); },
       sum,
       sum},
      {"Conv2d",
       Op::Conv2d,
       {{{2, 6, 5, 3}}, {{4, 3, 3, 3}}},
       [](auto& x) { return prim::conv2d(x[0], x[1], kConv); },
       sum,
       sum},
      {"Conv2dBwdData",
       Op::Conv2dBwdData,
       {{{2, 6, 5, 4}}, {{4, 3, 3, 3}}},
       [](auto& x) {
         return prim::conv2d_bwd_data(x[0], x[1], {2, 6, 5, 3}, kConv);
       },
       sum},
      {"Conv2dBwdWeight",
       Op::Conv2dBwdWeight,
       {{{2, 6, 5, 3}}, {{2, 6, 5, 4}}},
       [](auto& x) {
         return prim::conv2d_bwd_weight(x[0], x[1], {4, 3, 3, 3}, kConv);
       },
       sum},
      {"MaxPool2d (tiling windows)",
       Op::MaxPool2d,
       {{{2, 6, 8, 3}}},
       [](auto& x) { return prim::maxpool2d(x[0], kPoolTile); },
       exact,
       {0, 0}},
      {"MaxPool2d (overlapping windows)",
       Op::MaxPool2d,
       {{{2, 7, 7, 3}}},
       [](auto& x) { return prim::maxpool2d(x[0], kPoolOverlap); },
       exact,
       sum},
      {"MaxPool2dBwd",
       Op::MaxPool2dBwd,
       {{{2, 7, 7, 3}}, {{2, 4, 4, 3}}},
       [](auto& x) { return prim::maxpool2d_bwd(x[0], x[1], kPoolOverlap); },
       sum},
      {"AvgPool2d",
       Op::AvgPool2d,
       {{{2, 7, 7, 3}}},
       [](auto& x) { return prim::avgpool2d(x[0], kPoolOverlap); },
       sum,
       sum},
      {"AvgPool2dBwd",
       Op::AvgPool2dBwd,
       {{{2, 4, 4, 3}}},
       [](auto& x) {
         return prim::avgpool2d_bwd(x[0], {2, 7, 7, 3}, kPoolOverlap);
       },
       sum},
      // Rows by index, repeated ones too: a copy (exact); its gradient and ScatterAdd sum rows.
      {"Gather",
       Op::Gather,
       {{{2, 3, 37}}},
       [](auto& x) {
         return prim::gather(x[0], Tensor::from_vector<int64_t>({2, 0, 2, 1, 1, 1, 0, 2}, {2, 4}));
       },
       exact,
       once},
      {"ScatterAdd",
       Op::ScatterAdd,
       {{{2, 3, 37}}},
       [](auto& x) {
         return prim::scatter_add(x[0], Tensor::from_vector<int64_t>({3, 0, 3, 4, 4, 4}, {2, 3}), 5);
       },
       once},
      // Running sums in double, rounded once (the gradient too: a running sum from the end).
      {"Cumsum", Op::Cumsum, {{e}}, [](auto& x) { return prim::cumsum(x[0]); }, once, once},
      // Running products of values near 1 (no overflow), in double, rounded once; the gradient too.
      {"Cumprod", Op::Cumprod, {{{3, 8}, 0.5, 1.5}}, [](auto& x) { return prim::cumprod(x[0]); }, once, once},
      {"CumprodBwd",
       Op::CumprodBwd,
       {{{3, 8}, 0.5, 1.5}, {{3, 8}}},
       [](auto& x) { return prim::cumprod_bwd(x[0], x[1]); },
       once},
      // The same rounded values in both runs: the same order.
      {"Argsort", Op::Argsort, {{e}}, [](auto& x) { return prim::argsort(x[0], false); }, exact},
      // Two ranks holding the same values: the sum doubles them, exactly in any float type.
      {"AllReduce",
       Op::AllReduce,
       {{e}},
       [](auto& x) { return all_reduce(x[0], two_ranks()); },
       exact,
       exact},
  };
  return all;
}

// The inputs of one case in dtype t (leaves, realized), drawn in float32 and rounded to `round_to`.
std::vector<Tensor> inputs(const Case& c, DType round_to, DType t, bool grad) {
  manual_seed(5);
  std::vector<Tensor> x;
  for (const Input& in : c.inputs) {
    Tensor v = Tensor::uniform(in.shape, in.lo, in.hi).cast(round_to).cast(t).detach();
    v.realize();
    if (grad) v.set_requires_grad(true);
    x.push_back(v);
  }
  return x;
}

double unit_roundoff(DType t) { return t == DType::bfloat16 ? std::ldexp(1.0, -8) : std::ldexp(1.0, -11); }

void expect_within(const std::vector<double>& got, const std::vector<double>& want, const Tol& tol, DType t,
                   const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  double peak = 0;
  for (double w : want) peak = std::max(peak, std::fabs(w));
  const double u = unit_roundoff(t), tiny = t == DType::float16 ? std::ldexp(1.0, -24) : 0.0;
  int reported = 0;
  for (size_t i = 0; i < want.size(); ++i) {
    const double bound = tol.k * u * (std::fabs(want[i]) + tol.floor * peak) + (tol.k > 0 ? tiny : 0.0);
    if (std::fabs(got[i] - want[i]) <= bound) continue;
    ADD_FAILURE() << what << " [" << i << "]: " << got[i] << ", float32 gives " << want[i] << " (bound "
                  << bound << ")";
    if (++reported == 5) return;
  }
}

}  // namespace

// Every row of the op table has a case here: a new op fails this test until it has one.
TEST(SixteenBitOps, EveryOpHasACase) {
  std::map<Op, int> covered;
  for (const Case& c : cases()) ++covered[c.op];
  for (int i = 0; i < kNumOps; ++i)
    EXPECT_TRUE(covered.count(Op(i))) << op_name(Op(i)) << " has no 16-bit case";
}

TEST(SixteenBitOps, ForwardAndBackwardTrackFloat32) {
  for (DType t : {DType::bfloat16, DType::float16}) {
    for (const Case& c : cases()) {
      const std::string what = std::string(c.name) + " in " + dtype_name(t);
      SCOPED_TRACE(what);
      const bool grad = !op_has(c.op, kNoGrad) && c.op != Op::Rand && c.op != Op::Const;
      std::vector<Tensor> x16 = inputs(c, t, t, grad), x32 = inputs(c, t, DType::float32, grad);
      manual_seed(9);
      const Tensor y16 = c.build(x16);
      manual_seed(9);
      const Tensor y32 = c.build(x32);
      const bool is_bool = op_has(c.op, kBoolResult),
                 is_int = y32.dtype() == DType::int32 || y32.dtype() == DType::int64;
      EXPECT_EQ(y16.dtype(), is_bool ? DType::boolean : is_int ? y32.dtype() : t) << "the result's dtype";
      expect_within(y16.to_vector<double>(), y32.to_vector<double>(), c.forward, t, what + " forward");
      if (!grad || is_bool || is_int) continue;
      // Backward with the same upstream gradient, in each run's dtype (a gradient keeps the dtype of
      // the incoming gradient).
      manual_seed(13);
      const Tensor dy = Tensor::uniform(y32.shape(), -1, 1).cast(t).detach();
      y16.backward(dy);
      y32.backward(dy.cast(DType::float32));
      for (size_t i = 0; i < x16.size(); ++i) {
        if (!x32[i].grad().defined()) continue;  // e.g. Where's condition comes from x, not a leaf
        ASSERT_TRUE(x16[i].grad().defined()) << "input " << i;
        EXPECT_EQ(x16[i].grad().dtype(), c.grad_dtype.value_or(t)) << "input " << i << "'s gradient";
        expect_within(x16[i].grad().to_vector<double>(), x32[i].grad().to_vector<double>(), c.backward, t,
                      what + " gradient of input " + std::to_string(i));
      }
    }
  }
}

// ---- the composite ops (src/ops/): built from the primitives above, so each rounds after every
// primitive it records unless it computes in float32 (erf, erfc and gelu do; cos does). Their
// tolerance is the number of roundings the composite adds, times u, as docs/mixed-precision.md lists.
namespace {

const std::vector<Case>& composite_cases() {
  const Shape e{3, 37}, rows{6, 10};
  const Tol two{2, 0}, four{4, 1e-3}, sum{2, 1e-2};
  const Tol biased{2, 5e-2};  // a rounded sum plus a bias, rounded again: cancels where they are opposite
  static const std::vector<Case> all = {
      {"abs", Op::Where, {{e}}, [](auto& x) { return x[0].abs(); }, {0, 0}, {0, 0}},
      {"square", Op::Mul, {{e}}, [](auto& x) { return x[0].square(); }, two},
      {"pow 3", Op::Mul, {{e, 0.5, 2}}, [](auto& x) { return x[0].pow(3); }, four},
      {"rsqrt", Op::Recip, {{e, 0.25, 4}}, [](auto& x) { return x[0].rsqrt(); }, two},
      {"cos", Op::Sin, {{e, -3, 3}}, [](auto& x) { return x[0].cos(); }, {1, 1e-3}},
      {"ceil", Op::Floor, {{e, -3, 3}}, [](auto& x) { return x[0].ceil(); }, {0, 0}, {0, 0}},
      {"trunc", Op::Floor, {{e, -3, 3}}, [](auto& x) { return x[0].trunc(); }, {0, 0}, {0, 0}},
      {"round", Op::Floor, {{e, -3, 3}}, [](auto& x) { return x[0].round(); }, {0, 0}, {0, 0}},
      {"remainder",
       Op::Fmod,
       {{e, -4, 4}, {e, 0.5, 2}},
       [](auto& x) { return x[0].remainder(x[1]); },
       {1, 0}},
      {"floor_divide",
       Op::Fmod,
       {{e, -4, 4}, {e, 0.5, 2}},
       [](auto& x) { return x[0].floor_divide(x[1]); },
       {1, 0}},
      {"minimum", Op::Max, {{e}, {e}}, [](auto& x) { return x[0].minimum(x[1]); }, {0, 0}, {0, 0}},
      {"clamp", Op::Max, {{e}}, [](auto& x) { return x[0].clamp(-0.5, 0.75); }, {0, 0}, {0, 0}},
      {"relu", Op::Max, {{e}}, [](auto& x) { return x[0].relu(); }, {0, 0}, {0, 0}},
      {"sigmoid", Op::Exp, {{e, -4, 4}}, [](auto& x) { return x[0].sigmoid(); }, four},
      {"tanh", Op::Exp, {{e, -3, 3}}, [](auto& x) { return x[0].tanh(); }, four},
      {"leaky_relu", Op::Where, {{e}}, [](auto& x) { return leaky_relu(x[0], 0.1); }, two},
      {"elu", Op::Exp, {{e}}, [](auto& x) { return elu(x[0]); }, four},
      {"erf", Op::Exp, {{e}}, [](auto& x) { return erf(x[0]); }, two},
      {"erfc", Op::Exp, {{e}}, [](auto& x) { return erfc(x[0]); }, two},
      {"gelu", Op::Exp, {{e, -3, 3}}, [](auto& x) { return gelu(x[0]); }, two},
      {"gelu (tanh)", Op::Exp, {{e, -3, 3}}, [](auto& x) { return gelu(x[0], true); }, four},
      {"softplus", Op::Exp, {{e, -3, 3}}, [](auto& x) { return softplus(x[0]); }, four},
      {"silu", Op::Exp, {{e, -3, 3}}, [](auto& x) { return silu(x[0]); }, four},
      {"exp2", Op::Exp, {{e}}, [](auto& x) { return exp2(x[0]); }, four},
      {"log2", Op::Log, {{e, 0.25, 4}}, [](auto& x) { return log2(x[0]); }, four},
      {"log10", Op::Log, {{e, 0.25, 4}}, [](auto& x) { return log10(x[0]); }, four},
      {"log1p", Op::Log, {{e, -0.9, 2}}, [](auto& x) { return log1p(x[0]); }, four},
      {"expm1", Op::Exp, {{e}}, [](auto& x) { return expm1(x[0]); }, four},
      {"mean", Op::ReduceSum, {{rows}}, [](auto& x) { return x[0].mean({1}); }, sum, sum},
      {"var", Op::ReduceSum, {{rows}}, [](auto& x) { return x[0].var({1}); }, sum, sum},
      {"min", Op::ReduceMax, {{rows}}, [](auto& x) { return x[0].min({1}); }, {0, 0}, {0, 0}},
      {"argmax", Op::ReduceMax, {{rows}}, [](auto& x) { return x[0].argmax(1); }, {0, 0}},
      {"softmax", Op::Exp, {{rows}}, [](auto& x) { return softmax(x[0]); }, four, {8, 1e-2}},
      {"log_softmax", Op::Exp, {{rows}}, [](auto& x) { return log_softmax(x[0]); }, four, {8, 1e-2}},
      {"cross_entropy (smoothed)",
       Op::Exp,
       {{rows}},
       [](auto& x) {
         return cross_entropy(x[0], Tensor::from_vector<int64_t>({0, 3, 9, 2, 2, 7}), 0.1);
       },
       sum,
       {8, 1e-2}},
      {"mse_loss", Op::Mul, {{rows}, {rows}}, [](auto& x) { return mse_loss(x[0], x[1]); }, sum, sum},
      {"binary_cross_entropy_with_logits (smoothed)",
       Op::Exp,
       {{rows, -4, 4}, {rows, 0, 1}},
       [](auto& x) { return binary_cross_entropy_with_logits(x[0], x[1], 0.1); },
       sum,
       sum},
      {"linear",
       Op::Matmul,
       {{{4, 7}}, {{5, 7}}, {{5}}},
       [](auto& x) { return linear(x[0], x[1], x[2]); },
       biased,
       sum},
      {"conv2d (bias, stride 2, same)",
       Op::Conv2d,
       {{{2, 7, 6, 3}}, {{4, 3, 3, 3}}, {{4}}},
       [](auto& x) {
         return conv2d(x[0], x[1], x[2], {.stride = {2, 2}, .padding = "same"});
       },
       biased,
       sum},
      {"max_pool2d (generated windows)",
       Op::ReduceMax,
       {{{2, 6, 8, 3}}},
       [](auto& x) {
         return max_pool2d(x[0], {2, 2});
       },
       {0, 0},
       {0, 0}},
      {"avg_pool2d",
       Op::AvgPool2d,
       {{{2, 6, 8, 3}}},
       [](auto& x) {
         return avg_pool2d(x[0], {2, 2});
       },
       sum,
       sum},
      {"global_avg_pool2d",
       Op::ReduceSum,
       {{{2, 6, 8, 3}}},
       [](auto& x) { return global_avg_pool2d(x[0]); },
       sum,
       sum},
      {"batch_norm (training)",
       Op::ReduceSum,
       {{{4, 3, 3, 5}, -1, 3}, {{5}}, {{5}}},
       [](auto& x) { return batch_norm(x[0], x[1], x[2], Tensor(), Tensor(), true).out; },
       {4, 1e-2},
       {8, 1e-2}},
      {"layer_norm",
       Op::ReduceSum,
       {{rows}, {{10}}, {{10}}},
       [](auto& x) { return layer_norm(x[0], x[1], x[2]); },
       {4, 1e-2},
       {8, 1e-2}},
      {"sort (descending)",
       Op::Gather,
       {{rows}},
       [](auto& x) { return x[0].sort(1, true).first; },
       {0, 0},
       {0, 0}},
      {"topk", Op::Gather, {{rows}}, [](auto& x) { return x[0].topk(3, 0).first; }, {0, 0}, {0, 0}},
      {"cumsum", Op::Cumsum, {{rows}}, [](auto& x) { return x[0].cumsum(0); }, {1, 0}, {1, 0}},
      {"prod", Op::Cumprod, {{rows, 0.5, 1.5}}, [](auto& x) { return x[0].prod({1}); }, {1, 0}, {1, 0}},
      {"cat",
       Op::Pad,
       {{e}, {e}},
       [](auto& x) {
         return cat({x[0], x[1]}, 1);
       },
       {0, 0},
       {0, 0}},
  };
  return all;
}

}  // namespace

TEST(SixteenBitOps, CompositesTrackFloat32) {
  for (DType t : {DType::bfloat16, DType::float16}) {
    for (const Case& c : composite_cases()) {
      const std::string what = std::string(c.name) + " in " + dtype_name(t);
      SCOPED_TRACE(what);
      std::vector<Tensor> x16 = inputs(c, t, t, true), x32 = inputs(c, t, DType::float32, true);
      const Tensor y16 = c.build(x16), y32 = c.build(x32);
      const bool is_int = y32.dtype() == DType::int64;
      EXPECT_EQ(y16.dtype(), is_int ? DType::int64 : t) << "the result's dtype";
      expect_within(y16.to_vector<double>(), y32.to_vector<double>(), c.forward, t, what + " forward");
      if (is_int) continue;
      manual_seed(13);
      const Tensor dy = Tensor::uniform(y32.shape(), -1, 1).cast(t).detach();
      y16.backward(dy);
      y32.backward(dy.cast(DType::float32));
      for (size_t i = 0; i < x16.size(); ++i) {
        ASSERT_TRUE(x16[i].grad().defined() && x32[i].grad().defined()) << "input " << i;
        // A composite that computes in float32 casts its input up, and the gradient through that
        // cast is float32 (the incoming gradient's dtype promoted with the input's).
        const DType g = x16[i].grad().dtype();
        EXPECT_TRUE(g == t || g == DType::float32) << "input " << i << "'s gradient is " << dtype_name(g);
        expect_within(x16[i].grad().to_vector<double>(), x32[i].grad().to_vector<double>(), c.backward, t,
                      what + " gradient of input " + std::to_string(i));
      }
    }
  }
}
