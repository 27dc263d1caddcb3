// tests/random_graph_test.cpp - random small graphs against the reference backend. A seeded
// generator builds expressions of elementwise ops (broadcasting operands), views (permute, strided
// slice, pad, flip, expand), reductions (sum, max, mean, var) and library ops between them (cumsum,
// take), with one output or several
// siblings realized together (multi-output reduce kernels); the fused executor (scheduler +
// generated kernels) must give the values of the reference backend (one primitive per kernel), and
// backward through the same graph the same gradients. The op tests check each op on its own; these
// check how the scheduler groups them. A failure prints the case's seed and expression.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "oracle_util.h"

using namespace aether;
using oracle_test::with_fusion;

namespace {

// Builds one random graph; called twice with the same seed it builds the same graph (fresh tensors).
class Generator {
 public:
  Generator(uint64_t seed, DType dtype, bool grad) : rng_(seed), dtype_(dtype), grad_(grad) {}

  // An expression of `shape`, at most `depth` ops deep; desc() says what it is.
  Tensor expr(const Shape& shape, int depth) {
    const int pick = depth == 0 ? 0 : int(rng_() % 10);
    if (pick <= 1) return leaf(shape);
    if (pick <= 3) return unary(shape, depth);
    if (pick <= 5) return binary(shape, depth);
    if (pick == 6) return reduce(shape, depth);
    if (shape.empty()) return leaf(shape);  // a scalar operand has no axis to view
    return view(shape, depth, pick);
  }
  // 1 to 3 outputs of `shape`: one expression, or sibling reductions of one expression.
  std::vector<Tensor> outputs(const Shape& shape, int depth) {
    if (rng_() % 2 == 0) return {expr(shape, depth)};
    const int64_t axis = int64_t(rng_() % (shape.size() + 1));
    Shape src = shape;
    src.insert(src.begin() + axis, 2 + int64_t(rng_() % 7));
    const Tensor base = expr(src, depth - 1);
    desc_ += " -> siblings over axis " + std::to_string(axis);
    return {base.sum({axis}), base.square().mean({axis}), base.max({axis})};
  }
  const std::vector<Tensor>& leaves() const { return leaves_; }
  const std::string& desc() const { return desc_; }
  int64_t pick(int64_t n) { return int64_t(rng_() % uint64_t(n)); }

 private:
  Tensor leaf(const Shape& shape) {
    std::uniform_real_distribution<double> u(-1.5, 1.5);
    std::vector<double> v(size_t(numel(shape)));
    for (auto& e : v) e = u(rng_);
    Tensor t = Tensor::from_vector(v, shape).cast(dtype_).contiguous();
    t.realize();
    t = t.detach();
    if (grad_) t.set_requires_grad();
    leaves_.push_back(t);
    desc_ += " leaf" + to_string(shape);
    return t;
  }
  Tensor unary(const Shape& shape, int depth) {
    const Tensor x = expr(shape, depth - 1).clamp(-3, 3);  // keeps exp and friends finite
    static const char* names[] = {"exp",  "neg",     "relu",        "tanh", "square", "abs", "sigmoid",
                                  "sqrt", "softmax", "log_softmax", "gelu", "cumsum", "take"};
    const int k = shape.empty() ? int(pick(11)) : int(pick(13));  // cumsum and take need an axis
    desc_ += std::string(" ") + names[k];
    switch (k) {
      case 0: return x.exp();
      case 1: return -x;
      case 2: return x.relu();
      case 3: return x.tanh();
      case 4: return x.square();
      case 5: return x.abs();
      case 6: return x.sigmoid();
      case 7: return (x.square() + 0.25).sqrt();
      case 8: return softmax(x, -1);
      case 9: return log_softmax(x, -1);
      case 10: return gelu(x);
      case 11: {  // a library kernel between generated ones
        const int64_t axis = pick(int64_t(shape.size()));
        desc_ += "(" + std::to_string(axis) + ")";
        return x.cumsum(axis);
      }
      default: {  // the same length, repeats and negative indices (a Gather, and a ScatterAdd back)
        const int64_t axis = pick(int64_t(shape.size())), n = shape[size_t(axis)];
        std::vector<int64_t> idx;
        for (int64_t i = 0; i < n; ++i) idx.push_back(pick(2 * n) - n);
        desc_ += "(" + std::to_string(axis) + ")";
        return x.take(Tensor::from_vector<int64_t>(idx), axis);
      }
    }
  }
  Tensor binary(const Shape& shape, int depth) {
    Tensor a = expr(shape, depth - 1);
    // The other operand broadcasts: a suffix of the shape, some dims 1.
    Shape bs(shape.end() - pick(int64_t(shape.size()) + 1), shape.end());
    for (auto& d : bs)
      if (pick(3) == 0) d = 1;
    Tensor b = expr(bs, depth - 1);
    const bool swap = pick(2) == 0;
    if (swap) std::swap(a, b);
    static const char* names[] = {"add", "mul", "sub", "maximum", "where", "div"};
    const int k = int(pick(6));
    desc_ += std::string(" ") + names[k] + (swap ? "(swapped)" : "");
    Tensor out;
    switch (k) {
      case 0: out = a + b; break;
      case 1: out = a * b; break;
      case 2: out = a - b; break;
      case 3: out = a.maximum(b); break;
      case 4: out = where(a > b, a, b * 2.0); break;
      default: out = a / (b.square() + 1.0); break;
    }
    return out.shape() == shape ? out : out + Tensor::zeros(shape, dtype_);  // the swapped broadcast
  }
  Tensor reduce(const Shape& shape, int depth) {
    const int64_t axis = pick(int64_t(shape.size()) + 1);
    Shape src = shape;
    src.insert(src.begin() + axis, 2 + pick(6));
    const Tensor x = expr(src, depth - 1);
    static const char* names[] = {"sum", "max", "mean", "var"};
    const int k = int(pick(4));
    desc_ += std::string(" ") + names[k] + "(" + std::to_string(axis) + ")";
    switch (k) {
      case 0: return x.sum({axis});
      case 1: return x.max({axis});
      case 2: return x.mean({axis});
      default: return x.var({axis});
    }
  }
  Tensor view(const Shape& shape, int depth, int pick_kind) {
    const int64_t nd = int64_t(shape.size());
    const int64_t axis = pick(nd);
    switch (pick_kind) {
      case 7: {  // permute of the permuted shape
        std::vector<int64_t> perm(static_cast<size_t>(nd));
        for (int64_t i = 0; i < nd; ++i) perm[size_t(i)] = i;
        std::shuffle(perm.begin(), perm.end(), rng_);
        Shape src(static_cast<size_t>(nd));
        for (int64_t i = 0; i < nd; ++i) src[size_t(perm[size_t(i)])] = shape[size_t(i)];
        desc_ += " permute";
        return expr(src, depth - 1).permute(perm);
      }
      case 8: {  // every other element from 1 of a twice longer axis
        Shape src = shape;
        src[size_t(axis)] *= 2;
        desc_ += " slice(" + std::to_string(axis) + ", 1::2)";
        return expr(src, depth - 1).slice(axis, 1, src[size_t(axis)], 2);
      }
      default: {
        if (shape[size_t(axis)] >= 2 && pick(2) == 0) {  // zero padding of a shorter axis
          Shape src = shape;
          const int64_t before = pick(2);
          src[size_t(axis)] -= 1;
          std::vector<std::pair<int64_t, int64_t>> pads(static_cast<size_t>(nd), {0, 0});
          pads[size_t(axis)] = {before, 1 - before};
          desc_ += " pad(" + std::to_string(axis) + ")";
          return expr(src, depth - 1).pad(pads);
        }
        if (pick(2) == 0) {
          desc_ += " flip(" + std::to_string(axis) + ")";
          return expr(shape, depth - 1).flip({axis});
        }
        Shape src = shape;
        src[size_t(axis)] = 1;
        desc_ += " expand(" + std::to_string(axis) + ")";
        return expr(src, depth - 1).expand(shape);
      }
    }
  }

  std::mt19937_64 rng_;
  DType dtype_;
  bool grad_;
  std::vector<Tensor> leaves_;
  std::string desc_;
};

Shape random_shape(uint64_t seed) {
  std::mt19937_64 g(seed ^ 0x9e3779b97f4a7c15ULL);
  Shape s(size_t(1 + g() % 3));
  for (auto& d : s) d = int64_t(1 + g() % 5);
  return s;
}

std::vector<double> values(const Tensor& t) { return t.cast(DType::float64).to_vector<double>(); }

void expect_close(const std::vector<double>& fused, const std::vector<double>& ref, double tol,
                  const std::string& what) {
  ASSERT_EQ(fused.size(), ref.size()) << what;
  for (size_t i = 0; i < ref.size(); ++i)
    ASSERT_NEAR(fused[i], ref[i], tol * (1 + std::abs(ref[i]))) << what << ", element " << i;
}

// The case's outputs on one backend: built from the seed, realized together.
std::vector<std::vector<double>> forward_values(uint64_t seed, DType dtype, bool fused, std::string* desc) {
  return with_fusion(fused, [&] {
    Generator g(seed, dtype, false);
    const std::vector<Tensor> outs = g.outputs(random_shape(seed), 1 + int(g.pick(4)));
    realize(outs);
    std::vector<std::vector<double>> v;
    for (const auto& o : outs) v.push_back(values(o));
    *desc = g.desc();
    return v;
  });
}

// The gradients of sum_k sum(out_k * w_k) with respect to every leaf, on one backend.
std::vector<std::vector<double>> gradient_values(uint64_t seed, bool fused, std::string* desc) {
  return with_fusion(fused, [&] {
    Generator g(seed, DType::float64, true);
    const std::vector<Tensor> outs = g.outputs(random_shape(seed), 1 + int(g.pick(4)));
    Tensor loss = Tensor::zeros({}, DType::float64);
    for (size_t k = 0; k < outs.size(); ++k)
      loss = loss + (outs[k] * Tensor::from_vector(oracle_test::uniform(size_t(outs[k].numel()), seed + k),
                                                   outs[k].shape()))
                        .sum();
    loss.backward();
    std::vector<std::vector<double>> v;
    for (const auto& leaf : g.leaves())
      v.push_back(leaf.grad().defined() ? values(leaf.grad())
                                        : std::vector<double>(size_t(leaf.numel()), 0.0));
    *desc = g.desc();
    return v;
  });
}

constexpr int kCases = 150;

}  // namespace

TEST(RandomGraphs, FusedValuesEqualTheReference) {
  for (const DType dtype : {DType::float64, DType::float32}) {
    // float32: sums in another order differ by a few ulps of the terms (and exp by its accuracy).
    const double tol = dtype == DType::float64 ? 1e-10 : 2e-5;
    for (uint64_t seed = 1; seed <= kCases; ++seed) {
      std::string desc, ref_desc;
      const auto fused = forward_values(seed, dtype, true, &desc);
      const auto ref = forward_values(seed, dtype, false, &ref_desc);
      ASSERT_EQ(desc, ref_desc);
      const std::string what = std::string(dtype_name(dtype)) + " seed " + std::to_string(seed) + ":" + desc;
      ASSERT_EQ(fused.size(), ref.size()) << what;
      for (size_t k = 0; k < ref.size(); ++k)
        expect_close(fused[k], ref[k], tol, what + ", output " + std::to_string(k));
    }
  }
}

TEST(RandomGraphs, FusedGradientsEqualTheReference) {
  for (uint64_t seed = 1; seed <= kCases; ++seed) {
    std::string desc, ref_desc;
    const auto fused = gradient_values(seed, true, &desc);
    const auto ref = gradient_values(seed, false, &ref_desc);
    ASSERT_EQ(desc, ref_desc);
    const std::string what = "seed " + std::to_string(seed) + ":" + desc;
    ASSERT_EQ(fused.size(), ref.size()) << what;
    for (size_t k = 0; k < ref.size(); ++k)
      expect_close(fused[k], ref[k], 1e-10, what + ", leaf " + std::to_string(k));
  }
}
