// tests/checkpoint_format_test.cpp - docs/checkpoint-format.md describes exactly what aether writes:
// a model saved now has the manifest structure of the document's example (the fenced ```json block
// after the marker below): the same top-level keys in the same order, the same architecture, the
// same training_state keys, each value of the same JSON type, and the same tensors (name, dtype,
// shape) in the same order in the manifest and in the safetensors members. Values that depend on
// the run (losses, learning rate, RNG counters) need not match.
//
// To regenerate the example after a format change: AETHER_WRITE_FORMAT_EXAMPLE=/tmp/m.json runs
// the test and also writes the saved manifest.json there.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "aether/aether.h"
#include "aether/core/random.h"
#include "aether/io/file.h"
#include "aether/model/model.h"
#include "io/checkpoint.h"
#include "io/zip_archive.h"

#ifndef AETHER_SOURCE_DIR
#error "AETHER_SOURCE_DIR (the source tree, for docs/checkpoint-format.md) must be defined"
#endif

using namespace aether;
namespace fs = std::filesystem;
using ojson = nlohmann::ordered_json;

namespace {

constexpr const char* kMarker = "<!-- checkpoint-format-test: example manifest -->";

// The JSON of the first ```json block after the marker in docs/checkpoint-format.md.
ojson documented_example() {
  const std::string doc = read_file(std::string(AETHER_SOURCE_DIR) + "/docs/checkpoint-format.md");
  const size_t marker = doc.find(kMarker);
  if (marker == std::string::npos)
    throw std::runtime_error("docs/checkpoint-format.md has no example marker");
  const size_t open = doc.find("```json\n", marker);
  const size_t close = doc.find("\n```", open + 8);
  if (open == std::string::npos || close == std::string::npos)
    throw std::runtime_error("no ```json block after the marker");
  return ojson::parse(doc.substr(open + 8, close - open - 8));
}

// 8 images (8,8,3) of 10 classes.
data::Dataset example_data() {
  data::Dataset d;
  d.name = "example";
  d.n = 8;
  d.h = 8;
  d.w = 8;
  d.c = 3;
  d.num_classes = 10;
  for (int i = 0; i < 10; ++i) d.class_names.push_back("class" + std::to_string(i));
  for (int64_t i = 0; i < d.n; ++i) {
    d.labels.push_back(i % 10);
    for (int64_t k = 0; k < 8 * 8 * 3; ++k) d.images.push_back(uint8_t((i * 37 + k * 11) % 256));
  }
  d.check();
  return d;
}

// The document's example: Conv2d + BatchNorm2d + ReLU + MaxPool2d + Flatten + Linear, SGD with
// momentum, trained for one epoch of 2 steps and saved.
std::string save_example(const std::string& path) {
  manual_seed(42);
  Model m;
  m.add(std::make_shared<nn::Conv2d>(3, 4, 3, Conv2dOptions{.padding = "same"}))
      .add(std::make_shared<nn::BatchNorm2d>(4))
      .add(std::make_shared<nn::ReLU>())
      .add(std::make_shared<nn::MaxPool2d>(2))
      .add(std::make_shared<nn::Flatten>())
      .add(std::make_shared<nn::Linear>(4 * 4 * 4, 10));
  ModelConfig c;
  c.optimizer = "sgd";
  c.lr = 0.05;
  c.momentum = 0.9;
  c.schedule = "cosine";
  m.configure(c).finalize({8, 8, 3});
  TrainOptions o;
  o.epochs = 1;
  o.data.batch_size = 4;
  o.data.seed = 7;
  o.data.mean = {0.49f, 0.48f, 0.45f};
  o.data.std = {0.25f, 0.24f, 0.26f};
  o.progress = false;
  m.train(example_data(), o);
  m.set_info(R"({"model": "example", "dataset": "example", "epochs": 1})");
  m.save(path);
  const std::string bytes = read_file(path);  // must outlive the reader
  const zipio::Reader zip(bytes, path, "an aether checkpoint");
  return zip.read("manifest.json");
}

// A value's JSON type, with objects and arrays described member by member.
ojson schema(const ojson& j) {
  switch (j.type()) {
    case ojson::value_t::object: {
      ojson out = ojson::object();
      for (const auto& [k, v] : j.items()) out[k] = schema(v);
      return out;
    }
    case ojson::value_t::array: {
      ojson out = ojson::array();
      for (const auto& v : j) out.push_back(schema(v));
      return out;
    }
    case ojson::value_t::number_integer:
    case ojson::value_t::number_unsigned: return "integer";
    case ojson::value_t::number_float: return "float";
    default: return j.type_name();
  }
}

std::vector<std::string> keys(const ojson& j) {
  std::vector<std::string> out;
  for (const auto& [k, v] : j.items()) out.push_back(k);
  return out;
}

// The tensor list of a manifest group as "name dtype shape" lines.
std::vector<std::string> tensor_lines(const ojson& list) {
  std::vector<std::string> out;
  for (const auto& e : list)
    out.push_back(e["name"].get<std::string>() + " " + e["dtype"].get<std::string>() + " " +
                  e["shape"].dump());
  return out;
}

struct TempFile {
  std::string path =
      (fs::temp_directory_path() / ("aether_format_" + std::to_string(::getpid()) + ".aether")).string();
  ~TempFile() {
    std::error_code ec;
    fs::remove(path, ec);
  }
};

}  // namespace

TEST(CheckpointFormat, TheDocumentedExampleIsWhatAetherWrites) {
  TempFile f;
  const std::string text = save_example(f.path);
  if (const char* out = std::getenv("AETHER_WRITE_FORMAT_EXAMPLE")) std::ofstream(out) << text;
  const ojson doc = documented_example();
  const ojson saved = ojson::parse(text);

  // Top-level keys, in order.
  EXPECT_EQ(keys(saved), keys(doc));
  EXPECT_EQ(saved["format"], "aether-checkpoint");
  EXPECT_EQ(doc["format"], saved["format"]);
  EXPECT_EQ(doc["format_version"], saved["format_version"]);
  // The architecture, input shape and layouts do not depend on the run: equal.
  EXPECT_EQ(doc["architecture"], saved["architecture"]) << saved["architecture"].dump(2);
  EXPECT_EQ(doc["input_shape"], saved["input_shape"]);
  EXPECT_EQ(doc["layouts"], saved["layouts"]);
  // Everything else: the same keys (in the same order) and JSON types throughout.
  for (const char* key : {"config", "precision", "normalization", "training_state", "optimizer", "info"}) {
    SCOPED_TRACE(key);
    EXPECT_EQ(schema(doc[key]).dump(), schema(saved[key]).dump());
  }
  EXPECT_EQ(
      keys(doc["training_state"]),
      (std::vector<std::string>{"early_stopping", "epoch", "loader", "loss_scale", "lr", "lr_plateau",
                                "optimizer_steps", "rng", "schedule_position", "scheduled_lr", "step"}));
  // The tensors: names, dtypes and shapes, in order.
  for (const char* group : {"model", "optimizer"})
    EXPECT_EQ(tensor_lines(doc["tensors"][group]), tensor_lines(saved["tensors"][group])) << group;

  // The safetensors members hold the tensors in the manifest's order (by data offset).
  const std::string bytes = read_file(f.path);  // must outlive the reader
  const zipio::Reader zip(bytes, f.path, "an aether checkpoint");
  for (const char* group : {"model", "optimizer"}) {
    const auto contents = read_safetensors(zip.read(std::string(group) + ".safetensors"));
    std::vector<std::string> names;
    for (const auto& [name, t] : contents.tensors) names.push_back(name);
    std::vector<std::string> documented;
    for (const auto& e : doc["tensors"][group]) documented.push_back(e["name"]);
    EXPECT_EQ(names, documented) << group;
  }
}

// The example's values are those of a real run, so the example loads back as a model: e.g. the
// parameters come before the buffers, the optimizer slots are named "<parameter>.momentum".
TEST(CheckpointFormat, TheDocumentedTensorNamesAreTheModulePaths) {
  const ojson doc = documented_example();
  const std::vector<std::string> model = tensor_lines(doc["tensors"]["model"]);
  ASSERT_EQ(model.size(), 8u);
  EXPECT_EQ(model.front(), "0.weight F32 [4,3,3,3]");  // OHWI
  EXPECT_EQ(model[6], "1.running_mean F32 [4]");
  EXPECT_EQ(model[7], "1.running_var F32 [4]");
  const std::vector<std::string> opt = tensor_lines(doc["tensors"]["optimizer"]);
  ASSERT_EQ(opt.size(), 6u);
  EXPECT_EQ(opt.front(), "0.weight.momentum F32 [4,3,3,3]");
}
