// Walks the op table (aether/graph/op.h): every primitive has an example below (a switch over Op
// without `default:`, so a new row fails to compile until it gets one), and for each the test
// checks what adding an op must bring along:
//  * a reference implementation: the reference backend computes it (AETHER_FUSE=0's path), and the
//    fused executor agrees with it;
//  * a gradient rule, or the mark that it has none (is_differentiable): a differentiable op's
//    gradients reach every float input with its shape;
//  * a snippet in each renderer: an elementwise op has an ALU expression in C++ and CUDA C, a
//    reduction an accumulator in both; movement ops are index arithmetic and library ops library
//    calls, so they need none.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/graph/autograd.h"
#include "aether/graph/collective.h"
#include "aether/graph/primitives.h"
#include "codegen/snippets.h"

using namespace aether;

namespace {

bool g_grad = false;  // example() makes leaves that require grad

Tensor values(const Shape& s, double scale = 1.0) {
  std::vector<float> v(size_t(numel(s)));
  for (size_t i = 0; i < v.size(); ++i) v[i] = float(scale * (double((i * 7) % 11) / 11.0 + 0.1));
  Tensor t = Tensor::from_vector<float>(v, s).realize();
  if (g_grad) t.set_requires_grad();
  return t;
}

// A collective group of three ranks that hold the same values: its sum is three times the values.
int64_t three_ranks() {
  static const int64_t group = register_collective([](void* data, size_t n, DType t) {
    ASSERT_EQ(t, DType::float32);
    for (size_t i = 0; i < n; ++i) static_cast<float*>(data)[i] *= 3;
  });
  return group;
}

struct Example {
  std::vector<Tensor> inputs;  // the float leaves (gradients are taken w.r.t. them)
  Tensor out;
};

// One use of `op` on small float32 inputs (leaves requiring grad when `grad`).
Example example(Op op, bool grad = false) {
  g_grad = grad;
  struct Reset {
    ~Reset() { g_grad = false; }
  } reset;
  const Tensor a = values({2, 3}), b = values({2, 3}, 0.5);
  const Conv2dArg conv{};  // 1x1 strides, no padding
  Pool2dArg pool{};        // 2x2 windows, stride 2
  switch (op) {
    case Op::Load: return {{a}, a};
    case Op::Const:  // (prim::constant makes a (1,1) Const and expands it)
      return {{}, Tensor(make_node(Op::Const, DType::float32, {2, 3}, Device::cpu(), {}, 1.5))};
    case Op::Rand: return {{}, prim::rand({2, 3}, DType::float32, 7, 1)};
    case Op::Copy:
    case Op::Neg:
    case Op::Exp:
    case Op::Log:
    case Op::Sqrt:
    case Op::Recip:
    case Op::Sin:
    case Op::Floor: return {{a}, prim::unary(op, a)};
    case Op::Cast: return {{a}, prim::cast(a, DType::float64)};
    case Op::Add:
    case Op::Sub:
    case Op::Mul:
    case Op::Div:
    case Op::Max:
    case Op::Pow:
    case Op::Fmod:
    case Op::CmpLt:
    case Op::CmpLe:
    case Op::CmpEq:
    case Op::CmpNe: return {{a, b}, prim::binary(op, a, b)};
    case Op::Where: return {{a, b}, prim::where(prim::binary(Op::CmpLt, a, b), a, b)};
    case Op::ReduceSum:
    case Op::ReduceMax: return {{a}, prim::reduce(op, a, {1})};
    case Op::Reshape: return {{a}, prim::reshape(a, {3, 2})};
    case Op::Permute: return {{a}, prim::permute(a, {1, 0})};
    case Op::Expand: {
      const Tensor r = values({1, 3});
      return {{r}, prim::expand(r, {4, 3})};
    }
    case Op::Slice: return {{a}, prim::slice(a, SliceArg{{0, 1}, {2, 3}, {1, 2}})};
    case Op::Pad: return {{a}, prim::pad(a, PadArg{{1, 0}, {0, 2}})};
    case Op::Flip: return {{a}, prim::flip(a, {1})};
    case Op::Matmul: {
      const Tensor x = values({1, 2, 3}), y = values({1, 3, 4}, 0.5);
      return {{x, y}, prim::matmul(x, y)};
    }
    case Op::Conv2d: {
      const Tensor x = values({1, 4, 4, 2}), w = values({3, 2, 2, 2}, 0.5);  // -> (1,3,3,3)
      return {{x, w}, prim::conv2d(x, w, conv)};
    }
    case Op::Conv2dBwdData: {
      const Tensor dy = values({1, 3, 3, 3}), w = values({3, 2, 2, 2}, 0.5);
      return {{dy, w}, prim::conv2d_bwd_data(dy, w, {1, 4, 4, 2}, conv)};
    }
    case Op::Conv2dBwdWeight: {
      const Tensor x = values({1, 4, 4, 2}), dy = values({1, 3, 3, 3}, 0.5);
      return {{x, dy}, prim::conv2d_bwd_weight(x, dy, {3, 2, 2, 2}, conv)};
    }
    case Op::MaxPool2d: {
      const Tensor x = values({1, 4, 4, 2});
      return {{x}, prim::maxpool2d(x, pool)};
    }
    case Op::MaxPool2dBwd: {
      const Tensor x = values({1, 4, 4, 2}), dy = values({1, 2, 2, 2}, 0.5);
      return {{x, dy}, prim::maxpool2d_bwd(x, dy, pool)};
    }
    case Op::AvgPool2d: {
      const Tensor x = values({1, 4, 4, 2});
      return {{x}, prim::avgpool2d(x, pool)};
    }
    case Op::AvgPool2dBwd: {
      const Tensor dy = values({1, 2, 2, 2});
      return {{dy}, prim::avgpool2d_bwd(dy, {1, 4, 4, 2}, pool)};
    }
    case Op::AllReduce: return {{a}, all_reduce(a, three_ranks())};
    case Op::Gather:  // (1,3,3)
      return {{a}, prim::gather(a.reshape({1, 2, 3}), Tensor::from_vector<int64_t>({1, 0, 1}, {1, 3}))};
    case Op::ScatterAdd:  // (1,4,3)
      return {{a}, prim::scatter_add(a.reshape({1, 2, 3}), Tensor::from_vector<int64_t>({3, 0}, {1, 2}), 4)};
    case Op::Cumsum: return {{a}, prim::cumsum(a)};
    case Op::Cumprod: return {{a}, prim::cumprod(a)};
    case Op::CumprodBwd: return {{a, b}, prim::cumprod_bwd(a, b)};
    case Op::Argsort: return {{a}, prim::argsort(a, true)};
  }
  return {};
}

// The example's values on the reference backend (fusion off) or the fused executor.
std::vector<double> run(Op op, bool fused) {
  const bool was = fusion_enabled();
  set_fusion(fused);
  Example e = example(op);
  std::vector<double> v = e.out.to_vector<double>();
  set_fusion(was);
  return v;
}

std::vector<Op> all_ops() {
  std::vector<Op> ops;
  for (int i = 0; i < kNumOps; ++i) ops.push_back(Op(i));
  return ops;
}

}  // namespace

TEST(OpTable, EveryOpHasAnExampleOfItsOwnOp) {
  for (Op op : all_ops()) {
    const Example e = example(op);
    ASSERT_TRUE(e.out.defined()) << op_name(op);
    EXPECT_EQ(e.out.node()->op, op) << "the example of " << op_name(op) << " makes "
                                    << op_name(e.out.node()->op);
    EXPECT_EQ(int(e.out.node()->srcs.size()), op == Op::Load ? 0 : op_num_srcs(op)) << op_name(op);
  }
}

TEST(OpTable, EveryOpHasAReferenceImplementationThatTheFusedExecutorMatches) {
  for (Op op : all_ops()) {
    SCOPED_TRACE(op_name(op));
    std::vector<double> ref, fused;
    ASSERT_NO_THROW(ref = run(op, false)) << "the reference backend cannot compute " << op_name(op);
    ASSERT_NO_THROW(fused = run(op, true));
    ASSERT_EQ(ref.size(), fused.size());
    for (size_t i = 0; i < ref.size(); ++i) EXPECT_NEAR(ref[i], fused[i], 1e-5) << "at " << i;
  }
}

TEST(OpTable, EveryOpHasAGradientRuleOrIsMarkedWithoutOne) {
  for (Op op : all_ops()) {
    SCOPED_TRACE(op_name(op));
    const Example e = example(op, /*grad=*/true);
    if (!is_differentiable(op) || e.inputs.empty()) {
      EXPECT_FALSE(e.out.requires_grad() && op != Op::Load) << "an op marked without a gradient records one";
      continue;
    }
    ASSERT_TRUE(e.out.requires_grad()) << "no gradient is recorded for " << op_name(op);
    std::vector<Tensor> grads;
    ASSERT_NO_THROW(grads = gradients(e.out.cast(DType::float32).sum(), e.inputs))
        << "no gradient rule for " << op_name(op);
    ASSERT_EQ(grads.size(), e.inputs.size());
    for (size_t i = 0; i < grads.size(); ++i) {
      EXPECT_EQ(grads[i].shape(), e.inputs[i].shape()) << "input " << i;
      for (double v : grads[i].to_vector<double>()) ASSERT_TRUE(std::isfinite(v)) << "input " << i;
    }
  }
}

TEST(OpTable, EveryElementwiseAndReduceOpHasASnippetInEachRenderer) {
  using codegen::snippets::Lang;
  for (Op op : all_ops()) {
    SCOPED_TRACE(op_name(op));
    for (Lang lang : {Lang::Cpp, Lang::Cuda}) {
      const char* lname = lang == Lang::Cpp ? "C++" : "CUDA";
      if (is_elementwise(op)) {
        ir::Inst in;
        in.kind = ir::InstKind::Alu;
        in.op = op;
        const bool cmp = op_has(op, kBoolResult);
        in.dtype = cmp ? DType::boolean : op == Op::Cast ? DType::float64 : DType::float32;
        std::vector<std::string> a;
        std::vector<DType> t;
        for (int i = 0; i < op_num_srcs(op); ++i) {
          a.push_back(std::string("v").append(std::to_string(i)));  // not "v" + ...: GCC 12 -Wrestrict at -O3
          t.push_back(op == Op::Where && i == 0 ? DType::boolean : DType::float32);
        }
        std::string expr;
        ASSERT_NO_THROW(expr = codegen::snippets::alu_expr(lang, in, a, t)) << lname;
        EXPECT_FALSE(expr.empty()) << lname;
        for (const std::string& v : a) EXPECT_NE(expr.find(v), std::string::npos) << lname << ": " << expr;
      } else if (op_kind(op) == OpKind::Reduce) {
        const ir::Reduction r{op, DType::float32};
        const codegen::snippets::Acc acc{r, lang};
        EXPECT_FALSE(acc.init().empty()) << lname;
        EXPECT_NE(acc.add("acc", "x").find('x'), std::string::npos) << lname;
        EXPECT_FALSE(acc.combine("a", "b").empty()) << lname;
        EXPECT_FALSE(acc.final("acc").empty()) << lname;
      }
    }
  }
}

// The row's properties agree with what the op does.
TEST(OpTable, EveryRowsPropertiesMatchTheOp) {
  const Tensor i = Tensor::from_vector<int32_t>({1, 2, 3, 4, 5, 6}, {2, 3});
  for (Op op : all_ops()) {
    SCOPED_TRACE(op_name(op));
    const int n = op_num_srcs(op);
    for (int k = 0; k < 3; ++k)
      if (op_has(op, kSavesIn0 << k)) {
        EXPECT_LT(k, n) << "saves source " << k << " of " << n;
      }
    if (op_has(op, kBoolResult)) {
      EXPECT_EQ(op_kind(op), OpKind::Binary);
      EXPECT_EQ(example(op).out.dtype(), DType::boolean);
    }
    if (op_has(op, kNoGrad)) {
      EXPECT_FALSE(op_has(op, kSavesIn0 | kSavesIn1 | kSavesIn2 | kSavesOut));
    }
    if (!is_elementwise(op)) {  // snippets belong to elementwise rows only
      EXPECT_STREQ(op_snippet(op, true), "");
      EXPECT_STREQ(op_snippet(op, false), "");
      EXPECT_FALSE(op_has(op, kFloatOnly | kExact16))
          << "an elementwise property on a " << op_kind_name(op_kind(op)) << " op";
      continue;
    }
    if (op == Op::Cast) continue;  // rendered by the conversion rules
    EXPECT_STRNE(op_snippet(op, true), "");
    // Float-only ops: the tensor API refuses integers, and the row has no integer snippet.
    if (op_has(op, kFloatOnly)) {
      EXPECT_THROW(op_kind(op) == OpKind::Binary ? prim::binary(op, i, i) : prim::unary(op, i), Error);
      EXPECT_STREQ(op_snippet(op, false), "");
    } else {
      EXPECT_STRNE(op_snippet(op, false), "");
      if (op_kind(op) == OpKind::Unary) {
        EXPECT_EQ(prim::unary(op, i).dtype(), DType::int32);
      }
      if (op_kind(op) == OpKind::Binary) {
        EXPECT_NO_THROW(prim::binary(op, i, i));
      }
    }
  }
}

// kExact16: the renderers store the op's float value in a 16-bit type without rounding it again
// (exact because the op only moves or negates bits); every other float op's result is rounded.
TEST(OpTable, OnlyExactRowsSkipTheSixteenBitRounding) {
  using codegen::snippets::Lang;
  for (Op op : all_ops()) {
    // Cast rounds once, in its conversion; comparisons give bools.
    if (!is_elementwise(op) || op == Op::Cast || op_has(op, kBoolResult)) continue;
    SCOPED_TRACE(op_name(op));
    std::vector<ir::Inst> insts;
    std::vector<int> srcs;
    for (int k = 0; k < op_num_srcs(op); ++k) {
      ir::Inst ld;
      ld.kind = ir::InstKind::Load;
      ld.dtype = op == Op::Where && k == 0 ? DType::boolean : DType::bfloat16;
      ld.buf = k;
      srcs.push_back(int(insts.size()));
      insts.push_back(ld);
    }
    ir::Inst alu;
    alu.kind = ir::InstKind::Alu;
    alu.op = op;
    alu.dtype = DType::bfloat16;
    alu.srcs = srcs;
    insts.push_back(alu);
    const std::string e = codegen::snippets::value_expr(Lang::Cpp, insts, insts.size() - 1, "v", {4});
    EXPECT_EQ(e.rfind("ae_rb(", 0) == 0, !op_has(op, kExact16)) << e;
  }
}
