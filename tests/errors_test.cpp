// Error tests: every bad call throws aether::Error whose message names the op, what it got and
// what it expected; and a throw changes nothing (the tensors involved still work afterwards).
#include <gtest/gtest.h>

#include <functional>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>

#include "aether/aether.h"
#include "aether/data/dataset.h"
#include "aether/model/model.h"

using namespace aether;

namespace {

// Runs f, expecting an aether::Error whose message contains every string in `parts`.
void expect_error(const std::function<void()>& f, std::initializer_list<const char*> parts) {
  try {
    f();
  } catch (const Error& e) {
    const std::string m = e.what();
    for (const char* p : parts) EXPECT_NE(m.find(p), std::string::npos) << "'" << p << "' not in: " << m;
    return;
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-aether exception: " << e.what();
    return;
  }
  ADD_FAILURE() << "did not throw";
}

// The kind of the aether::Error f throws; nullopt when it throws none.
std::optional<ErrorKind> kind_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.kind();
  }
  return std::nullopt;
}

Tensor x23() { return Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3}); }

}  // namespace

TEST(Errors, ErrorIsAStdException) {
  static_assert(std::is_base_of_v<std::exception, Error>);
  EXPECT_THROW(x23() + Tensor::ones({4}), std::runtime_error);
}

TEST(Errors, ShapeMismatch) {
  const Tensor a = x23(), b = Tensor::ones({4});
  expect_error([&] { (void)(a + b); }, {"add", "(2, 3)", "(4,)"});
  expect_error([&] { (void)(a - b); }, {"sub", "(2, 3)", "(4,)"});
  expect_error([&] { (void)(a * b); }, {"mul", "(2, 3)", "(4,)"});
  expect_error([&] { (void)(a / b); }, {"div", "(2, 3)", "(4,)"});
  expect_error([&] { (void)a.maximum(b); }, {"maximum", "(2, 3)", "(4,)"});
  expect_error([&] { (void)a.minimum(b); }, {"minimum", "(2, 3)", "(4,)"});
  expect_error([&] { (void)a.lt(b); }, {"lt", "(2, 3)", "(4,)"});
  expect_error([&] { (void)where(a > 0.0, a, b); }, {"where", "(2, 3)", "(4,)"});
  expect_error([&] { (void)matmul(a, Tensor::ones({2, 2})); }, {"matmul", "(2, 3)", "(2, 2)"});
  expect_error([&] { (void)cat({a, Tensor::ones({2, 4})}, 0); }, {"cat", "(2, 3)", "(2, 4)"});
  expect_error([&] { (void)stack({a, Tensor::ones({3, 2})}); }, {"stack", "(2, 3)", "(3, 2)"});
  expect_error([&] { (void)a.expand({4, 3}); }, {"expand", "(2, 3)", "(4, 3)"});
  expect_error([&] { (void)prim::binary(Op::Add, a, Tensor::ones({3, 2})); }, {"Add", "(2, 3)", "(3, 2)"});
  expect_error([&] { (void)prim::binary(Op::Add, a, a.cast(DType::float64)); },
               {"Add", "float32", "float64"});
}

TEST(Errors, BadAxis) {
  const Tensor a = x23();
  expect_error([&] { (void)a.sum({2}); }, {"sum", "axis 2", "2 dims"});
  expect_error([&] { (void)a.sum({-3}); }, {"sum", "axis -3"});
  expect_error([&] { (void)a.sum({0, -2}); }, {"sum", "repeated"});
  expect_error([&] { (void)a.max({5}); }, {"max", "axis 5"});
  expect_error([&] { (void)a.min({5}); }, {"min", "axis 5"});
  expect_error([&] { (void)a.mean({5}); }, {"mean", "axis 5"});
  expect_error([&] { (void)a.argmax(2); }, {"argmax", "axis 2"});
  expect_error([&] { (void)a.permute({0, 2}); }, {"permute", "axis 2"});
  expect_error([&] { (void)a.permute({0, 0}); }, {"permute", "invalid permutation"});
  expect_error([&] { (void)a.permute({0}); }, {"permute", "(2, 3)"});
  expect_error([&] { (void)a.transpose(0, 3); }, {"transpose", "axis 3"});
  expect_error([&] { (void)a.slice(2, 0, 1); }, {"slice", "axis 2"});
  expect_error([&] { (void)a.flip({2}); }, {"flip", "axis 2"});
  expect_error([&] { (void)a.squeeze(0); }, {"squeeze", "(2, 3)", "not 1"});
  expect_error([&] { (void)a.unsqueeze(3); }, {"unsqueeze", "axis"});
  expect_error([&] { (void)a.size(2); }, {"size", "axis 2"});
  expect_error([&] { (void)cat({a, a}, 2); }, {"cat", "axis 2"});
  // A 0-dim tensor has no axes at all.
  const Tensor s = Tensor::scalar(1);
  expect_error([&] { (void)s.size(0); }, {"size", "axis 0", "0 dims"});
  expect_error([&] { (void)s.argmax(0); }, {"argmax", "axis 0"});
  expect_error([&] { (void)s.sum({0}); }, {"sum", "axis 0"});
  expect_error([&] { (void)cat({s, s}, 0); }, {"cat", "axis 0"});
}

TEST(Errors, Reshape) {
  const Tensor a = x23();
  expect_error([&] { (void)a.reshape({4}); }, {"reshape", "(2, 3)", "(4,)", "6", "4"});
  expect_error([&] { (void)a.reshape({4, -1}); }, {"reshape", "(2, 3)", "(4, -1)"});
  expect_error([&] { (void)a.reshape({-1, -1}); }, {"reshape", "-1"});
  expect_error([&] { (void)a.reshape({-2, -3}); }, {"reshape", "(-2, -3)"});
  expect_error([&] { (void)a.flatten(1, 0); }, {"flatten"});
}

TEST(Errors, UnsupportedDType) {
  expect_error([] { (void)Tensor::ones({2}, DType::int32).set_requires_grad(); },
               {"set_requires_grad", "int32", "float"});
  expect_error([] { (void)Tensor::ones({2}, DType::boolean).set_requires_grad(); },
               {"set_requires_grad", "bool"});
  expect_error(
      [] {
        (void)matmul(Tensor::ones({2, 2}, DType::boolean), Tensor::ones({2, 2}, DType::boolean));
      },
      {"matmul", "bool"});
  expect_error([] { (void)prim::unary(Op::Exp, Tensor::ones({2}, DType::int32)); },
               {"Exp", "int32", "float"});
  expect_error([] { (void)-Tensor::ones({2}, DType::boolean); }, {"neg", "bool"});
  expect_error([] { (void)Tensor::rand({2}, DType::int64); }, {"rand", "int64"});
  expect_error([] { (void)Tensor::randn({2}, DType::int32); }, {"randn", "int32"});  // was zeros
  expect_error([] { (void)Tensor::randint(0, 5, {2}, DType::float32); }, {"randint", "float32"});
  expect_error([] { (void)prim::where(Tensor::ones({2}), Tensor::ones({2}), Tensor::ones({2})); },
               {"where", "bool", "float32"});
  expect_error([] { (void)dtype_from_name("complex64"); }, {"dtype", "complex64"});
}

TEST(Errors, UnsupportedDevice) {
  expect_error([] { (void)Device::cuda(); }, {"cuda", "CUDA", "cpu"});
  expect_error([] { (void)Device::cuda(1); }, {"cuda(1)"});
  expect_error([] { (void)Device::parse("tpu"); }, {"Device::parse", "tpu", "cpu"});
  expect_error([] { (void)Device::parse("cuda"); }, {"cuda"});
  expect_error([] { (void)Device::parse("cuda:x"); }, {"Device::parse", "cuda:x"});
  EXPECT_EQ(Device::parse("cpu"), Device::cpu());
  EXPECT_EQ(Device::cpu().str(), "cpu");
  const Device fake{DeviceType::cuda, 0};
  expect_error([&] { (void)x23().to(fake); }, {"to", "cuda:0"});
  expect_error([&] { (void)Tensor::zeros({2}, DType::float32, fake).realize(); }, {"cuda:0"});
  expect_error([&] { Buffer b(fake, DType::float32, 4); }, {"Buffer", "cuda:0"});
  const Tensor t = x23();
  EXPECT_TRUE(t.to(Device::cpu()).same(t));
}

// The kind tells callers (Python's ValueError / TypeError / RuntimeError) what went wrong without
// reading the message. Before, Python sorted by the message's words, and a shape error that printed
// a tensor ("Tensor(shape=..., dtype=float32, ...)") became a TypeError, while a dtype error that
// did not say "dtype" became a ValueError.
TEST(Errors, TheKindSaysWhatWentWrong) {
  // value: shapes, arguments, settings, also where the message shows a tensor and its dtype
  EXPECT_EQ(kind_of([] { (void)(x23() + Tensor::ones({4})); }), ErrorKind::value);
  EXPECT_EQ(kind_of([] { (void)mse_loss(x23(), Tensor::ones({3, 2})); }), ErrorKind::value);
  EXPECT_EQ(kind_of([] { (void)x23().reshape({4, 2}); }), ErrorKind::value);
  EXPECT_EQ(kind_of([] { (void)Device::parse("tpu"); }), ErrorKind::value);
  // type: a dtype that does not fit the op, whatever the message's words
  EXPECT_EQ(kind_of([] { (void)prim::unary(Op::Exp, Tensor::ones({2}, DType::int32)); }), ErrorKind::type);
  EXPECT_EQ(kind_of([] { (void)-Tensor::ones({2}, DType::boolean); }), ErrorKind::type);
  EXPECT_EQ(kind_of([] { (void)Tensor::ones({2}, DType::int32).set_requires_grad(); }), ErrorKind::type);
  EXPECT_EQ(kind_of([] { (void)dtype_from_name("complex64"); }), ErrorKind::type);
  // not_found: a file or data set that is not there (Python's aether.NotFoundError, a FileNotFoundError)
  EXPECT_EQ(kind_of([] { (void)Model::load("/nonexistent/run.aether"); }), ErrorKind::not_found);
  EXPECT_EQ(kind_of([] { (void)data::load_cifar10("/nonexistent", data::Split::train); }),
            ErrorKind::not_found);
  EXPECT_EQ(kind_of([] { (void)data::read_idx_images("/nonexistent/x.gz"); }), ErrorKind::not_found);
  EXPECT_EQ(kind_of([] { (void)data::load_image_folder("/nonexistent", data::Split::train); }),
            ErrorKind::not_found);
  EXPECT_EQ(kind_of([] { (void)data::load_images({"/nonexistent/a.png"}, 8, 8, 1); }), ErrorKind::not_found);
  EXPECT_EQ(kind_of([] { (void)data::resolve_data_dir("cifar10", "/nonexistent"); }), ErrorKind::not_found);
  // runtime: other trouble with files and data sets on disk, devices
  EXPECT_EQ(kind_of([] { (void)Model::load("/dev/null"); }), ErrorKind::runtime);
  EXPECT_EQ(kind_of([] { (void)Device::cuda(1000); }), ErrorKind::runtime);
  // An error passed on with more context keeps its kind.
  EXPECT_EQ(kind_of([] { (void)x23().to(Device{DeviceType::cuda, 1000}); }), ErrorKind::runtime);
  EXPECT_EQ(Error("plain").kind(), ErrorKind::value);
}

TEST(Errors, ItemOnNonScalar) {
  expect_error([] { (void)x23().item<float>(); }, {"item", "(2, 3)"});
  expect_error([] { (void)Tensor::zeros({0}).item<float>(); }, {"item", "(0,)"});
  EXPECT_EQ(Tensor::ones({1, 1}).item<float>(), 1.0f);
}

TEST(Errors, EmptyAndMovedFromTensor) {
  const Tensor e;
  EXPECT_FALSE(e.defined());
  expect_error([&] { (void)e.shape(); }, {"empty tensor"});
  expect_error([&] { (void)e.dtype(); }, {"empty tensor"});
  expect_error([&] { (void)(e + 1.0); }, {"empty tensor"});
  expect_error([&] { (void)e.realize(); }, {"empty tensor"});
  expect_error([&] { (void)e.to_vector<float>(); }, {"empty tensor"});
  expect_error([&] { (void)(x23() + e); }, {"empty tensor"});
  EXPECT_EQ(e.str(), "Tensor(empty)");
  Tensor a = x23();
  Tensor b = std::move(a);
  expect_error([&] { (void)a.exp(); }, {"moved-from"});  // NOLINT(bugprone-use-after-move): on purpose
  EXPECT_EQ(b.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
}

TEST(Errors, TooManyDims) {
  const Shape nine(9, 1);
  expect_error([&] { (void)Tensor::zeros(nine); }, {"9 dims", "at most 8"});
  expect_error([&] { (void)Tensor::from_vector<float>({1}, nine); }, {"from_vector", "9 dims"});
  expect_error([&] { (void)Tensor::ones({1}).reshape(nine); }, {"reshape", "9 dims"});
  expect_error([&] { (void)Tensor::ones(Shape(8, 1)).unsqueeze(0); }, {"9 dims"});
  expect_error([&] { (void)Tensor::ones({1}).expand(nine); }, {"9 dims"});
  expect_error([&] { (void)Tensor::rand(nine); }, {"rand", "9 dims"});
  EXPECT_EQ(Tensor::ones(Shape(8, 1)).sum().item<float>(), 1.0f);  // 8 is fine
}

// A shape whose element count (or byte count) overflows int64 is refused where it is made,
// not wrapped around to a small count: (2^40, 2^30) counted 0 elements and summed to 0.
TEST(Errors, TooManyElements) {
  const int64_t big = int64_t(1) << 40, wide = int64_t(1) << 30;
  expect_error([&] { (void)Tensor::ones({big, wide}); }, {"constant", "(1099511627776, 1073741824)", "2^60"});
  expect_error([&] { (void)Tensor::rand({big, big}); }, {"rand", "2^60"});
  expect_error([&] { (void)Tensor::ones({8, 1}).reshape({2, big, big}); }, {"reshape", "2^60"});
  expect_error([&] { (void)Tensor::ones({8, 1}).reshape({big, big, -1}); }, {"reshape", "2^60"});
  // Shapes made by ops from valid inputs: a broadcast, an expand.
  expect_error([&] { (void)(Tensor::ones({big, 1}) + Tensor::ones({1, wide})); }, {"2^60"});
  expect_error([&] { (void)Tensor::ones({big, 1}).expand({big, wide}); }, {"expand", "2^60"});
  // At the limit, and an empty shape with large dims, are fine (nothing is allocated here).
  EXPECT_EQ(Tensor::ones({kMaxElements}).numel(), kMaxElements);
  EXPECT_EQ(Tensor::ones({big, wide, 0}).numel(), 0);
  EXPECT_EQ(Tensor::ones({big, wide, 0}).sum({1}).numel(), 0);
  EXPECT_EQ(kind_of([&] { (void)Tensor::ones({big, big}); }), ErrorKind::value);
}

TEST(Errors, Backward) {
  const Tensor x = Tensor::from_vector<double>({1, 2}).set_requires_grad();
  expect_error([&] { (x * 2.0).backward(); }, {"backward", "(2,)", "dy"});
  expect_error([&] { Tensor::ones({2}).sum().backward(); }, {"backward", "require"});
  expect_error([&] { (x * 2.0).backward(Tensor::ones({3}, DType::float64)); }, {"backward", "(3,)", "(2,)"});
  expect_error([&] { (x * 2.0).set_requires_grad(); }, {"set_requires_grad", "leaf"});
  Tensor y = Tensor::ones({2});
  expect_error([&] { y.assign(Tensor::ones({3})); }, {"assign", "(3,)", "(2,)"});
}

// A throw leaves everything as it was.
TEST(Errors, NothingChangesAfterAThrow) {
  Tensor x = x23();
  const NodePtr node = x.node();
  EXPECT_THROW(x + Tensor::ones({4}), Error);
  EXPECT_THROW(x.reshape({7}), Error);
  EXPECT_THROW(x.sum({3}), Error);
  EXPECT_THROW(x.assign(Tensor::ones({3})), Error);
  EXPECT_THROW(x.cast(DType::int32).set_requires_grad(), Error);
  EXPECT_EQ(x.node(), node);
  EXPECT_FALSE(x.requires_grad());
  EXPECT_EQ(x.to_vector<float>(), (std::vector<float>{1, 2, 3, 4, 5, 6}));
  EXPECT_EQ((x * 2.0).sum().item<float>(), 42.0f);

  // requires_grad on an int tensor that fails leaves the flag off.
  Tensor i = Tensor::ones({2}, DType::int32);
  EXPECT_THROW(i.set_requires_grad(), Error);
  EXPECT_FALSE(i.requires_grad());
  EXPECT_EQ(i.to_vector<int32_t>(), (std::vector<int32_t>{1, 1}));

  // A failed backward (freed graph) adds nothing to .grad and the graph's leaves still work.
  const Tensor w = Tensor::from_vector<double>({3}).set_requires_grad();
  const Tensor loss = (w * w).sum();
  loss.backward();
  EXPECT_THROW(loss.backward(), Error);
  EXPECT_EQ(w.grad().item<double>(), 6.0);
  (w * 4.0).sum().backward();
  EXPECT_EQ(w.grad().item<double>(), 10.0);

  // A failed realize (a graph that cannot run) leaves its inputs usable.
  const Tensor bad = Tensor::zeros({2}, DType::float32, Device{DeviceType::cuda, 0});
  EXPECT_THROW(bad.realize(), Error);
  EXPECT_FALSE(bad.is_realized());
  EXPECT_EQ(x.exp().log().to_vector<float>().size(), 6u);
}
