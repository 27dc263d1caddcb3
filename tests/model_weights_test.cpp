// Model::get_weights / set_weights and save_weights / load_weights (Keras'): the parameters then the
// buffers, as copies or a safetensors file; another model of the architecture takes them and
// computes as the source does; other float dtypes are cast; a wrong count, name, shape, dtype or
// value (NaN, a negative variance) is an error naming the value and its weight, and changes no
// weight; save_weights refuses to write such a value (load_weights would refuse the file) and keeps
// the previous file.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>
#include <vector>

#include "aether/io/safetensors.h"
#include "error_util.h"
#include "model_util.h"
#include "temp_dir.h"

using namespace aether;
using namespace model_test;
using aether::test::TempDir;

namespace {

// add_layers' network with its weights drawn after manual_seed(seed).
Model model_with_seed(uint64_t seed) {
  manual_seed(seed);
  Model m;
  add_layers(m);
  m.configure(sgd_config()).finalize({8, 8, 1});
  return m;
}

// Every weight of `m`, bit for bit, equals `w`.
void expect_weights(Model& m, const std::vector<Tensor>& w) {
  const std::vector<Tensor> now = m.get_weights();
  ASSERT_EQ(now.size(), w.size());
  for (size_t i = 0; i < w.size(); ++i) EXPECT_TRUE(bit_equal(now[i], w[i])) << "weight " << i;
}

}  // namespace

TEST(ModelWeights, GetGivesCopiesOfTheParametersThenTheBuffers) {
  const data::Dataset train = tiny_dataset();
  Model a = small_model();
  a.train(train, train_options(2));
  const std::vector<Tensor> w = a.get_weights();
  const auto params = a.network().named_parameters(), buffers = a.network().named_buffers();
  ASSERT_EQ(w.size(), params.size() + buffers.size());
  for (size_t i = 0; i < params.size(); ++i)
    EXPECT_TRUE(bit_equal(w[i], *params[i].second)) << params[i].first;
  for (size_t i = 0; i < buffers.size(); ++i)
    EXPECT_TRUE(bit_equal(w[params.size() + i], *buffers[i].second)) << buffers[i].first;
  // Copies: training on changes the model, not them.
  const std::vector<float> first = floats(w[0]);
  a.train(train, train_options(3));
  EXPECT_EQ(floats(w[0]), first);
  EXPECT_NE(floats(a.get_weights()[0]), first);
}

TEST(ModelWeights, AnotherModelTakesThemAndComputesAsTheSource) {
  const data::Dataset train = tiny_dataset();
  Model a = small_model();
  a.train(train, train_options(2));
  Model b = model_with_seed(99);
  const Tensor x = Tensor::randn({5, 8, 8, 1});  // already normalised images
  EXPECT_FALSE(bit_equal(a.predict(x), b.predict(x)));
  b.set_weights(a.get_weights());
  expect_same_weights(a, b);
  EXPECT_TRUE(bit_equal(a.predict(x), b.predict(x)));
  // float64 values are cast.
  std::vector<Tensor> doubles;
  for (const Tensor& t : a.get_weights()) doubles.push_back(t.cast(DType::float64));
  Model c = model_with_seed(7);
  c.set_weights(doubles);
  expect_same_weights(a, c);
}

TEST(ModelWeights, BadValuesNameTheWeightAndChangeNothing) {
  Model m = model_with_seed(3);
  const std::vector<Tensor> before = m.get_weights();
  const auto params = m.network().named_parameters(), buffers = m.network().named_buffers();
  const size_t n = params.size() + buffers.size();
  auto error = [&](const std::vector<Tensor>& values) {
    const std::string e = error_of([&] { m.set_weights(values); });
    expect_weights(m, before);  // unchanged
    return e;
  };
  auto with = [&](size_t i, const Tensor& v) {
    std::vector<Tensor> w = before;
    w[i] = v;
    return w;
  };
  EXPECT_EQ(error({}), detail::cat("set_weights: got 0 values for the model's ", n, " weights (",
                                   params.size(), " parameters, then ", buffers.size(), " buffers)"));
  EXPECT_EQ(error(with(0, Tensor::zeros({2}))), "set_weights: value 0 ('" + params[0].first +
                                                    "') has shape (2,), the weight has " +
                                                    to_string(params[0].second->shape()));
  EXPECT_EQ(error(with(1, Tensor::zeros(params[1].second->shape(), DType::int64))),
            "set_weights: value 1 ('" + params[1].first + "') is int64, expected floating-point values");
  // The last value holds NaN in its last place: checked before the first is assigned.
  Tensor nan = before.back().cast(DType::float32);
  std::vector<float> v = floats(nan);
  v.back() = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(error(with(n - 1, Tensor::from_vector<float>(v, nan.shape()))),
            "set_weights: value " + std::to_string(n - 1) + " ('" + buffers.back().first + "') holds NaN");
  size_t var = n;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].first.ends_with("running_var")) var = params.size() + i;
  ASSERT_LT(var, n);
  EXPECT_EQ(error(with(var, Tensor::full(before[var].shape(), -1.0))),
            "set_weights: value " + std::to_string(var) + " ('" + buffers[var - params.size()].first +
                "') holds the negative value -1 (a variance)");
  Model unfinished;
  EXPECT_NE(error_of([&] { unfinished.set_weights(before); }).find("set_weights"), std::string::npos);
  EXPECT_NE(error_of([&] { unfinished.get_weights(); }).find("get_weights"), std::string::npos);
}

TEST(ModelWeights, SaveAndLoadWeightsAsASafetensorsFile) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors"), bad = dir.file("bad.safetensors");
  Model a = small_model();
  a.train(tiny_dataset(), train_options(2));
  a.save_weights(path);
  const SafetensorsContents st = load_safetensors(path);
  const auto params = a.network().named_parameters(), buffers = a.network().named_buffers();
  ASSERT_EQ(st.tensors.size(), params.size() + buffers.size());
  for (size_t i = 0; i < params.size(); ++i) EXPECT_EQ(st.tensors[i].first, params[i].first);
  EXPECT_EQ(st.tensors.back().first, buffers.back().first);
  EXPECT_EQ(st.metadata.at("format"), "aether-weights");
  Model b = model_with_seed(99);
  b.load_weights(path);
  expect_same_weights(a, b);

  // Errors name the file and the tensor, and change nothing.
  Model c = model_with_seed(5);
  const std::vector<Tensor> before = c.get_weights();
  auto error = [&](NamedTensors tensors) {
    save_safetensors(bad, tensors);
    const std::string e = error_of([&] { c.load_weights(bad); });
    expect_weights(c, before);
    return e;
  };
  const std::string where = "load_weights: " + bad + ": ";
  NamedTensors t = st.tensors;
  t.erase(t.begin());
  EXPECT_EQ(error(t), where + "has no tensor '" + params[0].first +
                          "' (the model's weights: its parameters, then its buffers)");
  t = st.tensors;
  t.emplace_back("extra", Tensor::zeros({1}));
  EXPECT_EQ(error(t), where + "tensor 'extra' is no weight of the model");
  t = st.tensors;
  t[0].second = Tensor::zeros({2});
  EXPECT_EQ(error(t), where + "tensor '" + params[0].first + "' has shape (2,), the weight has " +
                          to_string(params[0].second->shape()));
  t = st.tensors;
  t[1].second = Tensor::full(t[1].second.shape(), std::numeric_limits<double>::infinity());
  EXPECT_EQ(error(t), where + "tensor '" + params[1].first + "' holds Inf");
  EXPECT_NE(error_of([&] { c.load_weights(dir.file("missing.safetensors")); }).find("missing.safetensors"),
            std::string::npos);
  // A checkpoint where the weights file goes, and the other way round, say what the file is (they
  // read "header length 563035920091984 exceeds the limit" and "not a zip file").
  const std::string ck = dir.file("m.aether");
  a.save(ck);
  EXPECT_EQ(error_of([&] { c.load_weights(ck); }),
            ck + ": not a safetensors file: it is a zip archive (an aether checkpoint, as Model.save writes? "
                 "Model.load reads those whole)");
  EXPECT_EQ(error_of([&] { (void)Model::load(path); }),
            path +
                ": not an aether checkpoint: it is a safetensors file (weights alone, as save_weights "
                "writes them); load_weights reads it into a model of the same layers");
  expect_weights(c, before);
}

namespace {
std::string bytes_of(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
// Element 0 of a float tensor set to v, in place (keeping its identity, as training would).
void set_first(Tensor* t, float v) {
  std::vector<float> values = floats(*t);
  values[0] = v;
  t->assign(Tensor::from_vector<float>(values, t->shape()));
}
}  // namespace

TEST(ModelWeights, SaveWeightsRefusesWhatLoadWeightsWouldAndKeepsThePreviousFile) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors"), fresh = dir.file("fresh.safetensors");
  Model a = small_model();
  a.save_weights(path);
  const std::string before = bytes_of(path);
  Tensor* var = nullptr;
  for (auto& [name, t] : a.network().named_buffers())
    if (name == "1.running_var") var = t;
  ASSERT_NE(var, nullptr);
  set_first(var, -2.0f);  // a negative variance gives NaN outputs
  EXPECT_EQ(error_of([&] { a.save_weights(path); }),
            "save_weights: '1.running_var' holds the negative value -2; not writing " + path +
                ", the previous file is kept");
  EXPECT_EQ(error_of([&] { a.save_weights(fresh); }),
            "save_weights: '1.running_var' holds the negative value -2; not writing " + fresh);
  set_first(var, 1.0f);
  Tensor* w = a.network().named_parameters()[0].second;
  const float old = floats(*w)[0];
  set_first(w, std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(error_of([&] { a.save_weights(path); }),
            "save_weights: '" + a.network().named_parameters()[0].first + "' holds NaN; not writing " + path +
                ", the previous file is kept");
  EXPECT_EQ(bytes_of(path), before);
  EXPECT_FALSE(std::filesystem::exists(fresh));
  set_first(w, old);
  a.save_weights(fresh);  // all good again: written, and loads
  Model b = model_with_seed(99);
  b.load_weights(fresh);
  expect_same_weights(a, b);
}
