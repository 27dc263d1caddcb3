// The CUDA renderer (codegen/render_cuda.cpp): every kernel that the op tests' graphs schedule into
// is lowered, rendered as CUDA C and compiled with NVRTC for Hopper (compute_90), some also for
// Ampere (compute_80); the PTX must define each entry point of the launch plan and use no atomics.
// The CPU and CUDA renderers share one op -> snippet table: every ALU op renders in both languages,
// identically up to the spelling of math functions. Without a GPU, the rendered CUDA is also run on
// the host (compiled with a few stand-in definitions of CUDA's built-ins) and must compute the
// reference backend's values. Compiling needs the CUDA toolkit's NVRTC, not a GPU; a build without
// it (-DAETHER_CUDA=OFF) skips the NVRTC checks. The suite is named cuda_codegen so that
// `ctest -R cuda` selects it.
#include <gtest/gtest.h>

#include <algorithm>
#include <barrier>
#include <cmath>
#include <functional>
#include <string>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "aether/aether.h"
#include "aether/backend/backend.h"
#include "aether/graph/autograd.h"
#include "aether/ops/nn.h"
#include "aether/optim/optimizer.h"
#include "codegen/compiler.h"
#include "codegen/ir.h"
#include "codegen/lower.h"
#include "codegen/render.h"
#include "codegen/snippets.h"
#include "test_values.h"
#if AETHER_HAS_CUDA
#include "backend/cuda/nvrtc_compile.h"
#endif

using namespace aether;

namespace {

#if AETHER_HAS_CUDA
constexpr bool kHasCuda = true;
#else
constexpr bool kHasCuda = false;
#endif
constexpr const char* kNoCuda = "built without the CUDA toolkit (AETHER_CUDA=OFF): NVRTC is not available";

// Compiles with NVRTC: "" when it compiled (PTX in *ptx), else NVRTC's log.
std::string nvrtc_error(const std::string& src, const std::string& arch, std::string* ptx) {
#if AETHER_HAS_CUDA
  std::string out;
  if (codegen::nvrtc_compile(src, arch, &out)) {
    if (ptx) *ptx = out;
    return "";
  }
  return out.empty() ? "nvrtc failed without a log" : out;
#else
  (void)src, (void)arch, (void)ptx;
  return kNoCuda;
#endif
}

using testing_values::input;
using testing_values::values;

// The optimizers' update rules, reachable without running a step (update() only builds the lazy graph).
struct OpenSGD : optim::SGD {
  using optim::SGD::SGD;
  using optim::SGD::update;
};
struct OpenAdamW : optim::AdamW {
  using optim::Adam::update;
  using optim::AdamW::AdamW;
};

struct Case {
  const char* name;
  std::function<std::vector<Tensor>()> build;
};

// The kinds of graph the op tests and tests/codegen_test.cpp run through the fused executor.
const std::vector<Case>& cases() {
  static const std::vector<Case> cs = {
      {"elementwise chain",
       [] {
         const Tensor x = input({64, 48}, 1), y = input({64, 48}, 2);
         return std::vector<Tensor>{((x + y) * 0.5).exp() - y / (x.abs() + 1.0),
                                    (x * y).sin().log() + x.sqrt()};
       }},
      {"broadcast small inputs",
       [] {
         const Tensor x = input({256, 256}, 3), a = input({1, 256}, 4), b = input({256, 1}, 5);
         return std::vector<Tensor>{(x + a - b).relu(), (x * a).sqrt()};
       }},
      {"permuted, sliced, flipped and padded views",
       [] {
         const Tensor x = input({16, 24}, 6), y = input({24, 16}, 7);
         const Tensor t = x.transpose(0, 1) * y;                  // (24, 16)
         const Tensor s = x.slice(1, 1, 23, 3).flip({0}) + 1.0;   // (16, 8)
         const Tensor p = (x + 1.0).pad({{1, 2}, {0, 3}}).exp();  // (19, 27)
         return std::vector<Tensor>{t, s, p, p.sum({0})};
       }},
      {"reshapes",
       [] {
         const Tensor x = input({48, 4}, 8), z = input({8, 6, 4}, 9);
         // (Reshapes of computed values into coarser dims are not affine: the IR cannot express them yet.)
         return std::vector<Tensor>{(x + 1.0).reshape({8, 6, 4}) * z, (x * 2.0).reshape({8, 6, 4}).sum({1})};
       }},
      {"reductions over axes",
       [] {
         const Tensor x = input({32, 16, 8}, 11);
         return std::vector<Tensor>{x.sum(),    x.sum({0}),     x.sum({1}, true),
                                    x.max({2}), x.mean({0, 2}), x.min({1})};
       }},
      {"large reductions (split over blocks)",
       [] {
         const Tensor x = input({8, 8192}, 12), y = input({4096, 3}, 13);
         return std::vector<Tensor>{x.sum({1}), x.max(), y.sum({0}), (y * y).mean()};
       }},
      {"sibling reduces and their epilogues",
       [] {
         const Tensor x = input({128, 64}, 12), a = input({1, 64}, 13), b = input({1, 64}, 14);
         return std::vector<Tensor>{(x + a).sum() * 2.0, (x + b).sum() * 3.0, (x * a).sum({0}) + b};
       }},
      {"normalisation (mean, variance, broadcast back)",
       [] {
         const Tensor x = input({64, 10}, 15);
         const Tensor m = x.mean({1}, true);
         const Tensor c = x - m;
         return std::vector<Tensor>{c / ((c * c).mean({1}, true) + 1e-5).sqrt()};
       }},
      {"softmax, log-softmax and cross-entropy forward + backward",
       [] {
         Tensor x = input({32, 10}, 16, -20, 20);
         x.set_requires_grad();
         std::vector<int64_t> ys;
         for (int i = 0; i < 32; ++i) ys.push_back(i % 10);
         const Tensor loss = cross_entropy(x, Tensor::from_vector(ys), 0.1);
         auto g = gradients(loss, {x});
         return std::vector<Tensor>{softmax(x), log_softmax(x, 0), loss, g[0]};
       }},
      {"integers: wrap-around, division by zero, casts that saturate",
       [] {
         const Tensor a = Tensor::from_vector<int32_t>({2147483647, -7, 9, 0, -2147483647 - 1, 5}, {6});
         const Tensor b = Tensor::from_vector<int32_t>({1, 2, 0, 0, -1, -3}, {6});
         const Tensor f = Tensor::from_vector<float>({1e10f, -1e10f, NAN, 2.7f, -2.7f, 255.9f}, {6});
         return std::vector<Tensor>{a + b,
                                    a * b,
                                    a / b,
                                    -a,
                                    a.maximum(b),
                                    f.cast(DType::int32),
                                    f.cast(DType::uint8),
                                    f.cast(DType::int64),
                                    a.cast(DType::int64).sum(),
                                    a.sum(),
                                    a.max(),
                                    (a - b).cast(DType::float64),
                                    a.cast(DType::uint8) * b.cast(DType::uint8)};
       }},
      {"comparisons, where and bool",
       [] {
         const Tensor x = input({40, 30}, 17), y = input({40, 30}, 18);
         return std::vector<Tensor>{where(x.lt(y), x, y * 2.0), x.ge(y), x.eq(x),
                                    x.ne(y).cast(DType::int32).sum(),
                                    x.gt(Tensor::scalar(0.0)).cast(DType::float32).sum()};
       }},
      {"float64",
       [] {
         const Tensor x = input({50, 20}, 19).cast(DType::float64),
                      y = input({50, 20}, 20).cast(DType::float64);
         return std::vector<Tensor>{((x * y).abs() + 1.0).log(), (x * y).sum({0}), x.max({1}),
                                    (x / y).exp().sin()};
       }},
      {"random numbers",
       [] {
         const Tensor r = Tensor::rand({33, 17}), d = Tensor::rand({5, 7}, DType::float64);
         return std::vector<Tensor>{r * 2.0, d + 1.0, Tensor::rand({100}).sum(),
                                    dropout(input({16, 16}, 21), 0.25, true)};
       }},
      {"scalars and empty tensors",
       [] {
         const Tensor s = Tensor::scalar(3.0), e = Tensor::zeros({0, 4});
         return std::vector<Tensor>{s * 2.0 + 1.0, s.sum(), (e + 1.0).sum({0}), (e * 2.0), e.sum({1})};
       }},
      {"infinities and NaN constants",
       [] {
         const Tensor x = input({7, 5}, 26);
         return std::vector<Tensor>{x.maximum(Tensor::scalar(-INFINITY)),
                                    where(x.lt(Tensor::scalar(0.0)), NAN, x),
                                    x.cast(DType::float64).minimum(Tensor::scalar(INFINITY))};
       }},
      {"batch norm training + relu, forward and backward",
       [] {
         Tensor x = input({4, 5, 5, 8}, 22), w = input({8}, 23, 0.5, 1.5), b = input({8}, 24);
         const Tensor rm = Tensor::zeros({8}), rv = Tensor::ones({8});
         const Tensor dy = input({4, 5, 5, 8}, 25);
         x.set_requires_grad();
         w.set_requires_grad();
         b.set_requires_grad();
         const BatchNormResult r = batch_norm(x, w, b, rm, rv, true);
         const Tensor out = r.out.relu();
         auto g = gradients(out, {x, w, b}, dy);
         return std::vector<Tensor>{out, r.new_running_mean, r.new_running_var, g[0], g[1], g[2]};
       }},
      {"column reductions (the last dim kept: tiles of 32 neighbouring outputs, the last one partial)",
       [] {
         const Tensor x = input({600, 40}, 27), y = input({6, 10, 10, 48}, 28);
         Tensor z = input({8, 6, 6, 40}, 29), w = input({40}, 30, 0.5, 1.5), b = input({40}, 31);
         z.set_requires_grad();
         w.set_requires_grad();
         b.set_requires_grad();
         const BatchNormResult r = batch_norm(z, w, b, Tensor::zeros({40}), Tensor::ones({40}), true);
         auto g = gradients(r.out.relu(), {z, w, b}, input({8, 6, 6, 40}, 32));
         return std::vector<Tensor>{
             x.sum({0}), x.max({0}), (x * x).mean({0}, true), y.mean({0, 1, 2}), y.sum({0, 2}), r.out, g[0],
             g[1],       g[2]};
       }},
      {"optimizer updates (SGD with Nesterov momentum and weight decay, AdamW)",
       [] {
         std::vector<Tensor> params{input({64, 32}, 40).set_requires_grad(),
                                    input({32}, 41).set_requires_grad()};
         OpenSGD sgd(params,
                     optim::SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true, .weight_decay = 5e-4});
         OpenAdamW adam(params, optim::AdamOptions{.lr = 1e-3, .weight_decay = 0.01});
         std::vector<Tensor> outs;
         for (size_t i = 0; i < params.size(); ++i) {
           sgd.set_state(i, "momentum", input(params[i].shape(), uint32_t(50 + i)));
           outs.push_back(sgd.update(i, params[i].detach(), input(params[i].shape(), uint32_t(60 + i)), 2));
           outs.push_back(adam.update(i, params[i].detach(), input(params[i].shape(), uint32_t(70 + i)), 3));
         }
         for (auto& [name, t] : sgd.named_state()) outs.push_back(*t);
         for (auto& [name, t] : adam.named_state()) outs.push_back(*t);
         return outs;
       }},
  };
  return cs;
}

// Schedules `outs` and lowers every generated kernel, as the fused executor does (a value stored by
// an earlier kernel is read as a dense buffer). Kernels the IR cannot express yet are left out.
std::vector<ir::Kernel> kernels_of(const std::vector<Tensor>& outs) {
  const Schedule s = schedule(outs);
  std::unordered_set<const Node*> stored;
  auto leaf = [&](const Node& n) -> std::optional<View> {
    if (n.realized()) return n.view;
    if (stored.count(&n)) return View::contiguous(n.shape);
    return std::nullopt;
  };
  std::vector<ir::Kernel> ks;
  for (const Kernel& k : s.kernels) {
    if (k.generated()) {
      std::string why;
      if (auto l = codegen::lower(k, leaf, &why)) ks.push_back(std::move(l->kernel));
    }
    if (k.kind != KernelKind::ViewOnly)
      for (const NodePtr& o : k.outputs) stored.insert(o.get());
  }
  return ks;
}

bool contains(const std::string& s, const std::string& what) { return s.find(what) != std::string::npos; }

// Checks one rendered kernel's launch plan and, when NVRTC is there, that it compiles for `arch`
// into PTX that defines every entry point the plan launches and uses no atomic instruction.
void expect_compiles(const ir::Kernel& k, const std::string& arch) {
  codegen::CudaPlan plan;
  const std::string src = codegen::render_cuda(k, &plan);
  const std::string listing = ir::to_string(k);
  const bool empty = numel(k.is_reduce() ? k.reduced_shape() : k.full) == 0;
  EXPECT_EQ(plan.launches.empty(), empty) << listing;
  for (const codegen::CudaLaunch& l : plan.launches) {
    EXPECT_GE(l.grid, 1) << listing;
    EXPECT_EQ(l.block, 256) << listing;
    EXPECT_TRUE(contains(src, "__global__ void __launch_bounds__(256) " + l.entry + "(")) << l.entry << "\n"
                                                                                          << src;
  }
  if (!plan.launches.empty()) {
    EXPECT_EQ(plan.launches.back().entry, "aether_kernel") << listing;
  }
  EXPECT_FALSE(contains(src, "atomic")) << src;
  if (!kHasCuda) return;
  std::string ptx;
  const std::string err = nvrtc_error(src, arch, &ptx);
  ASSERT_EQ(err, "") << "kernel " << k.name << " does not compile for " << arch << ":\n"
                     << err << "\n"
                     << src;
  for (const char* e : {"aether_kernel", "aether_reduce", "aether_combine"}) {
    bool launched = false;
    for (const codegen::CudaLaunch& l : plan.launches) launched = launched || l.entry == e;
    if (launched) {
      EXPECT_TRUE(contains(ptx, std::string(".entry ") + e)) << e << " missing from the PTX of " << k.name;
    }
  }
  EXPECT_FALSE(contains(ptx, "atom.") || contains(ptx, "red.global")) << "atomics in the PTX of " << k.name;
}

}  // namespace

TEST(cuda_codegen, EveryKernelOfTheOpGraphsCompilesForHopper) {
  if (!kHasCuda) std::cout << "note: " << kNoCuda << "; checking the rendering only\n";
  int total = 0, reduces = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<ir::Kernel> ks = kernels_of(c.build());
    EXPECT_FALSE(ks.empty()) << "no generated kernel";
    for (const ir::Kernel& k : ks) {
      SCOPED_TRACE(k.name);
      expect_compiles(k, "compute_90");
      ++total;
      reduces += k.is_reduce();
    }
  }
  std::cout << total << " kernels (" << reduces << " reduce) rendered"
            << (kHasCuda ? " and compiled with NVRTC for compute_90\n" : "\n");
  EXPECT_GE(total, 40);
  EXPECT_GE(reduces, 15);
}

TEST(cuda_codegen, AGenericArchitectureCompilesToo) {
  if (!kHasCuda) GTEST_SKIP() << kNoCuda;
  // Nothing in the source is Hopper specific: a few kernels of each kind for Ampere.
  for (const char* name : {"elementwise chain", "large reductions (split over blocks)", "random numbers",
                           "integers: wrap-around, division by zero, casts that saturate"}) {
    SCOPED_TRACE(name);
    for (const Case& c : cases())
      if (std::string(c.name) == name)
        for (const ir::Kernel& k : kernels_of(c.build())) expect_compiles(k, "compute_80");
  }
}

// ---- the shared op table -------------------------------------------------------------------------------
namespace {

std::vector<Op> all_ops() {
  return {
#define AETHER_X(name, ...) Op::name,
      AETHER_OPS(AETHER_X)
#undef AETHER_X
  };
}

// The dtypes an ALU op of the table is rendered for (those the reference backend computes).
std::vector<DType> dtypes_of(Op op) {
  if (op_has(op, kFloatOnly)) return {DType::float32, DType::float64};
  if (op == Op::Cast)
    return {DType::float32, DType::float64, DType::int32, DType::int64, DType::uint8, DType::boolean};
  return {DType::float32, DType::float64, DType::int32, DType::int64, DType::uint8};
}

// A kernel over (3, 5) computing `op` on loads of dtype `in`, storing its result.
ir::Kernel alu_kernel(Op op, DType in, DType out) {
  ir::Kernel k;
  k.name = std::string("alu_") + op_name(op);
  k.full = {3, 5};
  const int n = op_num_srcs(op);
  k.bufs.push_back({out, 15, true});
  ir::Inst alu;
  alu.kind = ir::InstKind::Alu;
  alu.op = op;
  alu.dtype = out;
  for (int s = 0; s < n; ++s) {
    ir::Inst ld;
    ld.kind = ir::InstKind::Load;
    ld.dtype = op == Op::Where && s == 0 ? DType::boolean : in;
    ld.buf = int(k.bufs.size());
    ld.offset = ir::Affine::var(0, 2).scaled(5) + ir::Affine::var(1, 2);
    k.bufs.push_back({ld.dtype, 15, false});
    alu.srcs.push_back(int(k.body.size()));
    k.body.push_back(ld);
  }
  k.body.push_back(alu);
  ir::Inst st;
  st.kind = ir::InstKind::Store;
  st.dtype = out;
  st.buf = 0;
  st.srcs = {int(k.body.size()) - 1};
  st.offset = ir::Affine::var(0, 2).scaled(5) + ir::Affine::var(1, 2);
  k.body.push_back(st);
  return k;
}

}  // namespace

TEST(cuda_codegen, EveryAluOpOfTheTableRendersInBothLanguages) {
  using codegen::snippets::alu_expr;
  using codegen::snippets::Lang;
  int alu_ops = 0;
  std::string all_kernels;
  for (const Op op : all_ops()) {
    SCOPED_TRACE(op_name(op));
    const int n = std::max(op_num_srcs(op), 1);
    if (!is_elementwise(op)) {
      // Not an ALU op: both languages refuse it (an IR bug, never a silent wrong snippet).
      ir::Inst in;
      in.kind = ir::InstKind::Alu;
      in.op = op;
      const std::vector<std::string> a(size_t(n), "x");
      const std::vector<DType> t(size_t(n), DType::float32);
      EXPECT_THROW(alu_expr(Lang::Cpp, in, a, t), Error);
      EXPECT_THROW(alu_expr(Lang::Cuda, in, a, t), Error);
      continue;
    }
    ++alu_ops;
    for (const DType in_t : dtypes_of(op)) {
      const bool cmp = op_has(op, kBoolResult);
      std::vector<DType> outs = {cmp ? DType::boolean : in_t};
      if (op == Op::Cast)
        outs = {DType::float32, DType::float64, DType::int32, DType::int64, DType::uint8, DType::boolean};
      for (const DType out_t : outs) {
        SCOPED_TRACE(std::string(dtype_name(in_t)) + " -> " + dtype_name(out_t));
        const ir::Kernel k = alu_kernel(op, in_t, out_t);
        const ir::Inst& in = k.body[size_t(op_num_srcs(op))];
        std::vector<std::string> a;
        std::vector<DType> t;
        for (int s : in.srcs) {
          a.push_back(std::string("b").append(std::to_string(s)));  // not "b" + ...: GCC 12 -Wrestrict at -O3
          t.push_back(k.body[size_t(s)].dtype);
        }
        const std::string cpp = alu_expr(Lang::Cpp, in, a, t), cuda = alu_expr(Lang::Cuda, in, a, t);
        // One table: the two spellings differ only in the math library's names (and the CPU's
        // float exp, aether's vectorisable ae_expf, is CUDA's expf).
        std::string expect = cpp;
        for (size_t at; (at = expect.find("__builtin_")) != std::string::npos;) expect.erase(at, 10);
        for (size_t at; (at = expect.find("ae_expf(")) != std::string::npos;) expect.erase(at, 3);
        EXPECT_EQ(cuda, expect);
        EXPECT_TRUE(contains(codegen::render_cpp(k), cpp)) << "render_cpp does not use the table";
        EXPECT_TRUE(contains(codegen::render_cuda(k), cuda)) << "render_cuda does not use the table";
        // All of them in one program, compiled once: every entry renamed apart.
        std::string src = codegen::render_cuda(k);
        if (!all_kernels.empty()) src = src.substr(src.find("/*"));  // the prelude once
        const std::string suffix = "_" + std::to_string(all_kernels.size());
        for (size_t at = src.find("aether_kernel("); at != std::string::npos;
             at = src.find("aether_kernel(", at + 1))
          src.insert(at + 13, suffix);
        all_kernels += src;
      }
    }
  }
  EXPECT_EQ(alu_ops, 21) << "the op table's ALU ops: 9 unary, 11 binary and Where";
  if (!kHasCuda) {
    std::cout << "note: " << kNoCuda << "; not compiling them\n";
    return;
  }
  std::string ptx;
  const std::string err = nvrtc_error(all_kernels, "compute_90", &ptx);
  EXPECT_EQ(err, "") << all_kernels;
}

TEST(cuda_codegen, ConstantsAndInfinitiesUseDeviceSpellings) {
  using codegen::snippets::Lang;
  using codegen::snippets::literal;
  EXPECT_EQ(literal(Lang::Cuda, DType::float32, INFINITY), "__int_as_float(0x7f800000)");
  EXPECT_EQ(literal(Lang::Cuda, DType::float32, -INFINITY), "(-__int_as_float(0x7f800000))");
  EXPECT_EQ(literal(Lang::Cuda, DType::float64, NAN), "__longlong_as_double(0x7ff8000000000000LL)");
  EXPECT_EQ(literal(Lang::Cpp, DType::float32, -INFINITY), "(-__builtin_inff())");
  EXPECT_EQ(literal(Lang::Cpp, DType::float64, 0.5), "0x1p-1");
  EXPECT_EQ(literal(Lang::Cuda, DType::float32, 0.1), literal(Lang::Cpp, DType::float32, 0.1));
  EXPECT_EQ(literal(Lang::Cuda, DType::int32, 1e12), "(int)2147483647");
  // A max-reduce starts at -infinity (in float for float32: a maximum is exact in its own type; in
  // double for float64); the prelude's helpers are the same functions in both languages.
  const ir::Reduction r{Op::ReduceMax, DType::float32}, r64{Op::ReduceMax, DType::float64};
  const codegen::snippets::Acc cuda_acc{r, Lang::Cuda}, cpp_acc{r, Lang::Cpp};
  EXPECT_EQ(cuda_acc.init(), "(-__int_as_float(0x7f800000))");
  EXPECT_EQ(cpp_acc.init(), "(-__builtin_inff())");
  EXPECT_STREQ(cpp_acc.type(), "float");
  const codegen::snippets::Acc cuda_acc64{r64, Lang::Cuda}, cpp_acc64{r64, Lang::Cpp};
  EXPECT_EQ(cuda_acc64.init(), "(-__longlong_as_double(0x7ff0000000000000LL))");
  EXPECT_EQ(cpp_acc64.init(), "(-__builtin_inf())");
  EXPECT_STREQ(cpp_acc64.type(), "double");
  // Only the four bit casts (ae_fbits, ae_bitsf, ae_dbits, ae_bitsd: an intrinsic vs a builtin) and
  // ae_gt (the host's quiet comparison builtin vs `>`, which does not trap on a GPU) are spelled per
  // language.
  auto without_bit_casts = [](std::string s) {
    for (const char* fn : {"ae_fbits(float f)", "ae_bitsf(unsigned int u)", "ae_dbits(double f)",
                           "ae_bitsd(unsigned long long u)", "#define ae_gt(a, b)"}) {
      const size_t at = s.find(fn);
      EXPECT_NE(at, std::string::npos) << fn;
      if (at == std::string::npos) continue;
      const size_t b = s.rfind('\n', at), e = s.find('\n', at);
      s.erase(b == std::string::npos ? 0 : b + 1, e - (b == std::string::npos ? 0 : b + 1) + 1);
    }
    return s;
  };
  std::string cuda = without_bit_casts(codegen::snippets::prelude_helpers(Lang::Cuda));
  for (size_t at; (at = cuda.find("__device__ __forceinline__")) != std::string::npos;)
    cuda.replace(at, 26, "static inline");
  EXPECT_EQ(cuda, without_bit_casts(codegen::snippets::prelude_helpers(Lang::Cpp)));
}

// ---- launch structure of reductions -------------------------------------------------------------------
TEST(cuda_codegen, ReductionsCombinePartialsInAFixedOrder) {
  // (8, 8192) summed over axis 1: 8 outputs of 8192 points, split over blocks, then combined.
  const Tensor x = input({8, 8192}, 80);
  auto ks = kernels_of({x.sum({1})});
  ASSERT_EQ(ks.size(), 1u);
  codegen::CudaPlan plan;
  const std::string src = codegen::render_cuda(ks[0], &plan);
  ASSERT_EQ(plan.launches.size(), 3u) << src;
  EXPECT_EQ(plan.launches[0].entry, "aether_reduce");
  EXPECT_EQ(plan.launches[1].entry, "aether_combine");
  EXPECT_EQ(plan.launches[2].entry, "aether_kernel");
  // 8192 points per output, at least 4 per thread of a 256-thread block: 8 chunks per output, a
  // phase-1 block each (64), partials of 8 outputs x 8 chunks in double, results 8 floats (256-aligned).
  EXPECT_EQ(plan.launches[0].grid, 64);
  EXPECT_EQ(plan.scratch_bytes, 8 * 8 * 8 + 256);
  EXPECT_TRUE(contains(src, "__shared__ double sh0[256];")) << src;
  EXPECT_TRUE(contains(src, "for (i64 c_ = 1; c_ < 8; ++c_) x0 = x0 + a0[c_ * 8 + o_];")) << src;

  // (64, 10) summed over axis 1: 10 points per output, one thread each, no partials, no shared memory.
  ks = kernels_of({input({64, 10}, 81).sum({1})});
  ASSERT_EQ(ks.size(), 1u);
  const std::string small = codegen::render_cuda(ks[0], &plan);
  ASSERT_EQ(plan.launches.size(), 2u) << small;
  EXPECT_EQ(plan.launches[0].entry, "aether_reduce");
  EXPECT_EQ(plan.launches[1].entry, "aether_kernel");
  EXPECT_EQ(plan.scratch_bytes, 256);  // 64 float results
  EXPECT_FALSE(contains(small, "__shared__")) << small;
  EXPECT_TRUE(contains(small, "for (i64 s_ = 0; s_ < 10LL; ++s_)")) << small;

  // (2048, 40) summed over axis 0: the outputs are neighbours in memory, so a block takes 32 of them
  // (2 tiles, the second 8 wide) and 8 rows of points; 2048 points per output at least 4 per row
  // thread: 64 chunks, 128 phase-1 blocks; partials 64 x 40 doubles.
  ks = kernels_of({input({2048, 40}, 82).sum({0})});
  ASSERT_EQ(ks.size(), 1u);
  const std::string cols = codegen::render_cuda(ks[0], &plan);
  ASSERT_EQ(plan.launches.size(), 3u) << cols;
  EXPECT_EQ(plan.launches[0].grid, 128);
  EXPECT_EQ(plan.scratch_bytes, 64 * 40 * 8 + 256);
  EXPECT_TRUE(contains(cols, "l_ = tid_ % 32, r_ = tid_ / 32;")) << cols;
  EXPECT_TRUE(contains(cols, "s_ += 8)")) << cols;
  EXPECT_TRUE(contains(cols, "if (o_ < 40LL)")) << cols;
  // The same sum over axis 1 of (40, 2048) keeps the one-output-per-block layout.
  ks = kernels_of({input({40, 2048}, 83).sum({1})});
  ASSERT_EQ(ks.size(), 1u);
  EXPECT_FALSE(contains(codegen::render_cuda(ks[0], &plan), "l_ = tid_")) << "a row reduce in column mode";
}

// ---- the rendered CUDA run on the CPU ---------------------------------------------------------------------
// Without a GPU, the structure of the CUDA code (grid-stride loops, index decomposition, the block
// tree, chunked partials, their combination, the scratch layout, the argument order) is checked by
// running it on the host: the source, with a few definitions standing in for CUDA's (threadIdx,
// __syncthreads, __int_as_float, ...), is compiled by the host compiler like a generated CPU kernel,
// every block of every launch is run (a block's 256 threads as real threads where the code
// synchronises) and the outputs must equal the reference backend's.
namespace {

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + to.size()))
    s.replace(at, from.size(), to);
}

constexpr const char* kEntries[] = {"aether_reduce", "aether_combine", "aether_kernel"};

// What the host-compiled kernel reads from bufs[nbufs]: which entry point, block and thread.
struct EmuCtrl {
  int entry = 0;  // index into kEntries
  unsigned block = 0, thread = 0, grid = 0;
  void (*sync)(void*) = nullptr;
  void* sync_arg = nullptr;
};

constexpr const char* kShim = R"(// CUDA C on the host (tests/cuda_codegen_test.cpp)
struct ae_dim3 { unsigned x, y, z; };
struct EmuCtrl { int entry; unsigned block, thread, grid; void (*sync)(void*); void* sync_arg; };
static thread_local ae_dim3 threadIdx, blockIdx, gridDim;
static thread_local const EmuCtrl* ae_ctrl;
static void __syncthreads() { ae_ctrl->sync(ae_ctrl->sync_arg); }
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(n)
#define __shared__ static
static inline float __int_as_float(int i) { return __builtin_bit_cast(float, i); }
static inline float __uint_as_float(unsigned int u) { return __builtin_bit_cast(float, u); }
static inline unsigned int __float_as_uint(float f) { return __builtin_bit_cast(unsigned int, f); }
static inline double __longlong_as_double(long long i) { return __builtin_bit_cast(double, i); }
static inline long long __double_as_longlong(double d) { return __builtin_bit_cast(long long, d); }
extern "C" {
float expf(float); float logf(float); float sqrtf(float); float sinf(float);
double exp(double); double log(double); double sqrt(double); double sin(double);
}
)";

std::string emulation_source(const ir::Kernel& k, const codegen::CudaPlan& plan, std::string cuda) {
  replace_all(cuda, "extern \"C\" ", "");
  for (const char* e : kEntries) replace_all(cuda, std::string(e) + "(", std::string(e) + "_emu(");
  std::string args;
  for (size_t b = 0; b < k.bufs.size(); ++b)
    args += std::string("(") + (k.bufs[b].output ? "" : "const ") +
            codegen::snippets::ctype(k.bufs[b].dtype) + "*)bufs[" + std::to_string(b) + "], ";
  for (size_t i = 0; i < k.fparams.size(); ++i) args += "fp[" + std::to_string(i) + "], ";
  for (size_t i = 0; i < k.iparams.size(); ++i) args += "ip[" + std::to_string(i) + "], ";
  args += "scratch";
  std::string s = kShim + cuda;
  s += "extern \"C\" long long aether_kernel_scratch(void) { return 0; }\n";
  s += "extern \"C\" void aether_kernel(void** bufs, void* scratch, const double* fp, const u64* ip) {\n";
  s += "  (void)fp; (void)ip;\n";
  s += "  ae_ctrl = (const EmuCtrl*)bufs[" + std::to_string(k.bufs.size()) + "];\n";
  s += "  threadIdx = {ae_ctrl->thread, 0, 0}; blockIdx = {ae_ctrl->block, 0, 0}; gridDim = {ae_ctrl->grid, "
       "1, 1};\n";
  for (int e = 0; e < 3; ++e)
    for (const codegen::CudaLaunch& l : plan.launches)
      if (l.entry == kEntries[e]) {
        s += "  if (ae_ctrl->entry == " + std::to_string(e) + ") " + l.entry + "_emu(" + args + ");\n";
        break;
      }
  s += "}\n";
  return s;
}

// Runs the plan's launches: blocks in order; a block's threads one after another, or as 256 real
// threads meeting at each __syncthreads when the entry point synchronises.
void emulate(codegen::KernelFn fn, const codegen::CudaPlan& plan, const std::string& cuda,
             std::vector<void*> bufs, void* scratch, const ir::Kernel& k) {
  bufs.push_back(nullptr);
  for (const codegen::CudaLaunch& l : plan.launches) {
    const int entry = int(
        std::find_if(std::begin(kEntries), std::end(kEntries), [&](const char* e) { return l.entry == e; }) -
        std::begin(kEntries));
    const size_t at = cuda.find("void __launch_bounds__(256) " + l.entry + "(");
    const size_t end = cuda.find("\n}\n", at);
    const bool syncs = cuda.substr(at, end - at).find("__syncthreads") != std::string::npos;
    const unsigned grid = unsigned(l.grid), block = unsigned(l.block);
    if (!syncs) {
      EmuCtrl c;
      c.entry = entry, c.grid = grid;
      bufs.back() = &c;
      for (c.block = 0; c.block < grid; ++c.block)
        for (c.thread = 0; c.thread < block; ++c.thread)
          fn(bufs.data(), scratch, k.fparams.data(),
             reinterpret_cast<const unsigned long long*>(k.iparams.data()));
      continue;
    }
    std::barrier<> bar(block);
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < block; ++t)
      threads.emplace_back([&, t, bufs]() mutable {
        EmuCtrl c;
        c.entry = entry, c.grid = grid, c.thread = t, c.sync_arg = &bar;
        c.sync = [](void* b) { static_cast<std::barrier<>*>(b)->arrive_and_wait(); };
        bufs.back() = &c;
        for (c.block = 0; c.block < grid; ++c.block) {
          fn(bufs.data(), scratch, k.fparams.data(),
             reinterpret_cast<const unsigned long long*>(k.iparams.data()));
          bar.arrive_and_wait();  // the next block starts when this one has finished
        }
      });
    for (auto& t : threads) t.join();
  }
}

double element(const std::vector<uint64_t>& buf, DType t, size_t i) {
  const char* p = reinterpret_cast<const char*>(buf.data());
  switch (t) {
    case DType::float32: return double(reinterpret_cast<const float*>(p)[i]);
    case DType::float64: return reinterpret_cast<const double*>(p)[i];
    case DType::int32: return double(reinterpret_cast<const int32_t*>(p)[i]);
    case DType::int64: return double(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::uint8: return double(reinterpret_cast<const uint8_t*>(p)[i]);
    case DType::boolean: return reinterpret_cast<const bool*>(p)[i] ? 1.0 : 0.0;
    case DType::float16:
    case DType::bfloat16: break;
  }
  return NAN;
}

}  // namespace

TEST(cuda_codegen, RenderedKernelsRunOnTheHostComputeTheReferenceValues) {
  ASSERT_TRUE(codegen::host_compiler_available()) << "the test machine has a C++ compiler";
  int checked = 0, block_reduces = 0, column_reduces = 0;
  for (const Case& c : cases()) {
    SCOPED_TRACE(c.name);
    const std::vector<Tensor> outs = c.build();
    const Schedule s = schedule(outs);
    // Lower and render every kernel (a value stored by an earlier kernel is a dense buffer).
    std::unordered_set<const Node*> stored;
    auto leaf = [&](const Node& n) -> std::optional<View> {
      if (n.realized()) return n.view;
      if (stored.count(&n)) return View::contiguous(n.shape);
      return std::nullopt;
    };
    std::vector<codegen::Lowered> lowered;
    std::vector<codegen::CudaPlan> plans;
    std::vector<std::string> cuda, sources;
    for (const Kernel& k : s.kernels) {
      ASSERT_TRUE(k.kind == KernelKind::ViewOnly || k.generated()) << "a library call";
      if (k.generated()) {
        std::string why;
        auto l = codegen::lower(k, leaf, &why);
        ASSERT_TRUE(l) << why;
        plans.emplace_back();
        cuda.push_back(codegen::render_cuda(l->kernel, &plans.back()));
        sources.push_back(emulation_source(l->kernel, plans.back(), cuda.back()));
        block_reduces += contains(cuda.back(), "__syncthreads");
        column_reduces += contains(cuda.back(), "l_ = tid_ % 32");
        lowered.push_back(std::move(*l));
      }
      if (k.kind != KernelKind::ViewOnly)
        for (const NodePtr& o : k.outputs) stored.insert(o.get());
    }
    const auto compiled = codegen::compile_kernels(sources);
    // Run them in order, each output in a fresh buffer of garbage (0xCD bytes), the scratch too.
    std::unordered_map<const Node*, std::vector<uint64_t>> values;
    for (size_t i = 0; i < lowered.size(); ++i) {
      const codegen::Lowered& l = lowered[i];
      ASSERT_TRUE(compiled[i].fn) << compiled[i].error << "\n" << sources[i];
      std::vector<void*> bufs;
      for (const NodePtr& o : l.outputs) {
        auto& v = values[o.get()];
        v.assign(size_t(numel(o->shape) * dtype_size(o->dtype) + 7) / 8 + 1, 0xCDCDCDCDCDCDCDCDull);
        bufs.push_back(v.data());
      }
      for (const NodePtr& in : l.inputs)
        bufs.push_back(in->realized() ? in->buffer->data() : static_cast<void*>(values.at(in.get()).data()));
      std::vector<uint64_t> scratch(size_t(plans[i].scratch_bytes + 7) / 8 + 1, 0xFFFFFFFFFFFFFFFFull);
      emulate(compiled[i].fn, plans[i], cuda[i], bufs, scratch.data(), l.kernel);
    }
    // The reference backend computes every stored value; the emulated CUDA must agree.
    std::vector<NodePtr> targets;
    for (const codegen::Lowered& l : lowered)
      targets.insert(targets.end(), l.outputs.begin(), l.outputs.end());
    const bool was = fusion_enabled();
    set_fusion(false);
    realize_nodes(targets);
    set_fusion(was);
    for (const NodePtr& o : targets) {
      const std::vector<double> want = Tensor(o).to_vector<double>();
      const auto& got = values.at(o.get());
      for (size_t j = 0; j < want.size(); ++j) {
        const double w = want[j], g = element(got, o->dtype, j);
        ++checked;
        if (g == w) continue;
        if (std::isnan(w)) {
          EXPECT_TRUE(std::isnan(g)) << op_name(o->op) << " " << to_string(o->shape) << " [" << j << "]";
          continue;
        }
        // Elementwise math is the same host libm; sums accumulate in double in another order.
        EXPECT_NEAR(g, w, 1e-6 * std::max(1.0, std::fabs(w)))
            << op_name(o->op) << " " << to_string(o->shape) << " [" << j << "]";
      }
    }
  }
  std::cout << checked << " values checked; " << block_reduces << " kernels reduce with a block tree, "
            << column_reduces << " of them in tiles of 32 neighbouring outputs\n";
  EXPECT_GE(block_reduces, 4) << "the block-tree path is exercised";
  EXPECT_GE(column_reduces, 3) << "the column path is exercised";
}
