// tests/io_limits_test.cpp - hostile inputs to the checkpoint and safetensors readers: JSON nested
// far past kMaxJsonDepth (manifest values, architectures, safetensors headers), error messages that
// quote huge values, zip members that inflate past their limits or past what they declare, module
// configs nested too deep, and temporary files left behind by a save that was killed.
// The hostile inputs are generated here; none is stored as a file.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "aether/aether.h"
#include "aether/io/file.h"
#include "aether/io/limits.h"
#include "aether/nn/layers.h"
#include "aether/nn/module.h"
#include "io/checkpoint.h"
#include "io/json.h"
#include "io/zip_archive.h"

using namespace aether;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

// Module configs as parsed JSON, and modules rebuilt from JSON (the API passes JSON text).
nn::ModulePtr from_config(const json& c) { return nn::module_from_config(c.dump()); }
json config_of(const nn::Module& m) { return json::parse(m.config()); }

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Error messages quote at most kMaxQuotedChars of any one value, so a few hundred characters is
// plenty for a whole message (path, tensor name, value, explanation).
constexpr size_t kMaxMessage = 600;

#define EXPECT_ERROR(msg, ...)                                                   \
  do {                                                                           \
    const std::string m_ = (msg);                                                \
    EXPECT_LE(m_.size(), kMaxMessage) << m_.substr(0, 2 * kMaxMessage);          \
    for (const std::string& part_ : std::vector<std::string>{__VA_ARGS__})       \
      EXPECT_TRUE(contains(m_, part_))                                           \
          << "expected '" << part_ << "' in: " << m_.substr(0, 2 * kMaxMessage); \
  } while (0)

// `depth` nested arrays around `inner`: [[[...inner...]]].
std::string nested_arrays(size_t depth, const std::string& inner = "1") {
  return std::string(depth, '[') + inner + std::string(depth, ']');
}

// A JSON value nested `depth` levels deep, built without recursion (and freed without it:
// nlohmann 3.11 destroys values iteratively).
json deep_value(size_t depth) {
  json root = json::array();
  json* cur = &root;
  for (size_t i = 1; i < depth; ++i) {
    cur->push_back(json::array());
    cur = &cur->back();
  }
  cur->push_back(1);
  return root;
}

// A Sequential module config nesting `depth` Sequentials, the innermost holding one ReLU.
json nested_sequential(size_t depth) {
  json root = {{"type", "Sequential"}, {"layers", json::array()}};
  json* cur = &root;
  for (size_t i = 1; i < depth; ++i) {
    (*cur)["layers"].push_back({{"type", "Sequential"}, {"layers", json::array()}});
    cur = &(*cur)["layers"].back();
  }
  (*cur)["layers"].push_back({{"type", "ReLU"}});
  return root;
}

// The architecture text of nested_sequential(depth), built as text.
std::string nested_sequential_text(size_t depth) {
  std::string s;
  for (size_t i = 0; i < depth; ++i) s += "{\"type\":\"Sequential\",\"layers\":[";
  s += "{\"type\":\"ReLU\"}";
  for (size_t i = 0; i < depth; ++i) s += "]}";
  return s;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

uint32_t get_le32(const std::string& s, size_t at) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = v << 8 | uint8_t(s[at + size_t(i)]);
  return v;
}
void put_le32(std::string& s, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) s[at + size_t(i)] = char((v >> (8 * i)) & 0xff);
}
std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return s;
}

// Sets the uncompressed size that `name`'s local header and central directory entry declare
// (PKWARE APPNOTE 4.3.7 and 4.3.12), as a lying archive would.
void set_declared_size(std::string& zip, const std::string& name, uint32_t size) {
  int patched = 0;
  for (size_t at = 0; at + 46 <= zip.size(); ++at) {
    if (zip.compare(at, 4, "PK\x03\x04") == 0 && zip.compare(at + 30, name.size(), name) == 0 &&
        get_le32(zip, at + 26) % 65536 == name.size()) {
      put_le32(zip, at + 22, size);
      ++patched;
    }
    if (zip.compare(at, 4, "PK\x01\x02") == 0 && zip.compare(at + 46, name.size(), name) == 0 &&
        get_le32(zip, at + 28) % 65536 == name.size()) {
      put_le32(zip, at + 24, size);
      ++patched;
    }
  }
  ASSERT_EQ(patched, 2) << "no local and central entry for " << name;
}

class Hostile : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "aether_io_limits_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = (fs::path(dir_) / "run.aether").string();
    Checkpoint c;
    c.model = {{"w", Tensor::from_vector<float>({1, 2, 3}, {3})}};
    save_checkpoint(path_, c);
    const std::string bytes = read_file(path_);
    const zipio::Reader zip(bytes, path_, "an aether checkpoint");
    manifest_ = json::parse(zip.read("manifest.json"));
    model_ = zip.read("model.safetensors");
    optimizer_ = zip.read("optimizer.safetensors");
  }
  void TearDown() override {
    detail::set_atomic_write_hook({});
    fs::remove_all(dir_);
  }
  std::set<std::string> files() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.insert(e.path().filename().string());
    return names;
  }
  // A checkpoint archive of these members (all deflated, as the manifest is normally).
  std::string archive(const std::string& manifest, const std::string& model,
                      bool compress_model = true) const {
    return zipio::write_zip({{"manifest.json", manifest, true},
                             {"model.safetensors", model, compress_model},
                             {"optimizer.safetensors", optimizer_, false}},
                            "test");
  }
  // The manifest text of the saved checkpoint with `member` added before its closing brace.
  std::string manifest_with(const std::string& member) const {
    std::string text = manifest_.dump();
    text.insert(text.size() - 1, "," + member);
    return text;
  }
  std::string load_error(const std::string& bytes) const {
    write_bytes(path_, bytes);
    return error_of([&] { load_checkpoint(path_); });
  }

  std::string dir_, path_;
  json manifest_;
  std::string model_, optimizer_;
};

}  // namespace

// ---- JSON nesting and quoting -------------------------------------------------------------------

TEST(JsonLimits, ParseRejectsDeepNestingAtTheLimit) {
  EXPECT_EQ(parse_json(nested_arrays(kMaxJsonDepth), "doc"), json::parse(nested_arrays(kMaxJsonDepth)));
  EXPECT_EQ(error_of([] { parse_json(nested_arrays(kMaxJsonDepth + 1), "doc"); }),
            "doc is nested deeper than 64 levels (the limit for JSON aether reads)");
  std::string objects;
  for (int i = 0; i <= kMaxJsonDepth; ++i) objects += "{\"a\":";
  objects += "1" + std::string(size_t(kMaxJsonDepth) + 1, '}');
  EXPECT_ERROR(error_of([&] { parse_ordered_json(objects, "doc"); }), "doc is nested deeper than 64 levels");
  // A million levels: rejected as soon as level 65 opens.
  EXPECT_ERROR(error_of([] { parse_json(nested_arrays(1000000), "doc"); }), "doc is nested deeper than 64");
  EXPECT_ERROR(error_of([] { parse_ordered_json(nested_arrays(1000000), "doc"); }), "nested deeper than 64");
}

TEST(JsonLimits, ParseErrorsAreShort) {
  EXPECT_ERROR(error_of([] { parse_json("{\"a\": ", "doc"); }), "doc is not valid JSON: ");
  // The parser's message quotes the token read so far: here a 1 MB unterminated string.
  EXPECT_ERROR(error_of([] { parse_json("[\"" + std::string(1 << 20, 'x'), "doc"); }),
               "doc is not valid JSON");
}

TEST(JsonLimits, TopLevelKeysAreReported) {
  std::vector<std::string> keys;
  const auto j = parse_ordered_json(R"({"b": {"x": 1}, "a": 2, "b": 3})", "doc",
                                    [&](const std::string& k) { keys.push_back(k); });
  EXPECT_EQ(keys, (std::vector<std::string>{"b", "a", "b"}));
  EXPECT_EQ(j.begin().key(), "b");
}

TEST(JsonLimits, ExcerptsAreBounded) {
  EXPECT_EQ(json_excerpt(json::parse(R"({"a":[1,2.5,"x"],"b":null})")), R"({"a":[1,2.5,"x"],"b":null})");
  EXPECT_EQ(json_excerpt(json("caf\xc3\xa9")), "\"caf\\u00e9\"");  // ASCII only
  EXPECT_EQ(json_excerpt(nlohmann::ordered_json::parse(R"({"z":1,"a":2})")), R"({"z":1,"a":2})");

  json big = json::array();
  for (int i = 0; i < 100000; ++i) big.push_back(i);
  const std::string e = json_excerpt(big);
  EXPECT_EQ(e.size(), kMaxQuotedChars);
  EXPECT_EQ(e.substr(0, 8), "[0,1,2,3");
  EXPECT_EQ(e.substr(e.size() - 3), "...");
  EXPECT_EQ(json_excerpt(json(std::string(1 << 20, 'y')), 10), "\"yyyyyy...");
  // Far deeper than anything parsed can be; quoting it neither recurses deeply nor grows.
  const json deep = deep_value(200000);
  EXPECT_EQ(json_excerpt(deep, 12), "[[[[[[[[[...");
  EXPECT_EQ(json_excerpt(deep_value(3)), "[[[1]]]");
  EXPECT_EQ(json_excerpt(deep_value(70), 1000), std::string(64, '[') + "..." + std::string(64, ']'));
}

TEST(JsonLimits, TextExcerptCutsAtCharacterBoundaries) {
  EXPECT_EQ(text_excerpt("short"), "short");
  EXPECT_EQ(text_excerpt(std::string(1000, 'n')), std::string(kMaxQuotedChars - 3, 'n') + "...");
  // "aé" is 3 bytes; cutting a string of them at byte 7 would split an é.
  std::string s;
  for (int i = 0; i < 10; ++i) s += "a\xc3\xa9";
  EXPECT_EQ(text_excerpt(s, 10),
            "a\xc3\xa9"
            "a\xc3\xa9"
            "a...");
}

// ---- checkpoints ----------------------------------------------------------------------------------

TEST_F(Hostile, DeepManifestValueIsRejected) {
  // As a tensor entry, whose error message quoted it whole (a recursive dump: a stack overflow).
  std::string text = manifest_.dump();
  const std::string list = "\"optimizer\":[";
  const size_t at = text.find(list);
  ASSERT_NE(at, std::string::npos);
  text.insert(at + list.size(), nested_arrays(1000000));
  EXPECT_ERROR(load_error(archive(text, model_)), path_ + ": manifest.json is nested deeper than 64 levels");
  // As one of the caller's members, which load_checkpoint returned.
  EXPECT_ERROR(load_error(archive(manifest_with("\"deep\":" + nested_arrays(1000000)), model_)),
               path_ + ": manifest.json is nested deeper than 64 levels");
  EXPECT_ERROR(error_of([&] { read_checkpoint_manifest(path_); }), "manifest.json is nested deeper than 64");
  // 64 levels (the manifest object and 63 arrays) load.
  write_bytes(path_, archive(manifest_with("\"deep\":" + nested_arrays(63)), model_));
  EXPECT_EQ(load_checkpoint(path_).manifest_extra["deep"], json::parse(nested_arrays(63)));
}

TEST_F(Hostile, DeepArchitectureIsRejected) {
  const std::string msg =
      load_error(archive(manifest_with("\"architecture\":" + nested_sequential_text(20000)), model_));
  EXPECT_ERROR(msg, path_ + ": manifest.json is nested deeper than 64 levels");
}

TEST_F(Hostile, ManifestValuesInErrorsAreShort) {
  // A bad tensor entry holding a 1 MB string, and a format that is a 1 MB string.
  std::string text = manifest_.dump();
  const std::string list = "\"optimizer\":[";
  text.insert(text.find(list) + list.size(), "{\"name\":\"" + std::string(1 << 20, 'n') + "\"}");
  EXPECT_ERROR(load_error(archive(text, model_)), "bad \"optimizer\" tensor entry {\"name\":\"nnnn", "...");
  json m = manifest_;
  m["format"] = std::string(1 << 20, 'f');
  EXPECT_ERROR(load_error(archive(m.dump(), model_)),
               "not an aether checkpoint (manifest.json has format \"fff", "...");
  // A tensor whose listed shape is a huge array.
  m = manifest_;
  m["tensors"]["model"][0]["shape"] = json::array();
  for (int i = 0; i < 200000; ++i) m["tensors"]["model"][0]["shape"].push_back(i);
  EXPECT_ERROR(load_error(archive(m.dump(), model_)), "tensor 'w' has shape [0,1,2,", "...");
}

TEST_F(Hostile, ManifestInflatingPastItsLimitIsRejectedBeforeInflating) {
  // Valid JSON: the manifest padded with spaces to just over the limit (deflates ~1000:1).
  std::string text = manifest_.dump();
  text.insert(1, std::string(kMaxManifestBytes + 1 - text.size(), ' '));
  ASSERT_EQ(text.size(), kMaxManifestBytes + 1);
  const std::string zip = archive(text, model_);
  ASSERT_LT(zip.size(), kMaxManifestBytes / 100);
  EXPECT_ERROR(
      load_error(zip),
      path_ +
          ": manifest.json: the zip entry inflates to 16777217 bytes, more than the limit of 16777216 bytes");
  EXPECT_ERROR(error_of([&] { read_checkpoint_manifest(path_); }), "more than the limit of 16777216 bytes");
  // At the limit it loads.
  text.erase(1, 1);
  ASSERT_EQ(text.size(), kMaxManifestBytes);
  write_bytes(path_, archive(text, model_));
  EXPECT_NO_THROW(load_checkpoint(path_));
}

TEST_F(Hostile, MemberInflatingPastWhatItDeclaresIsRejected) {
  // The archive claims a 100-byte manifest; reading stops there and finds more data.
  const std::string text = manifest_.dump();
  ASSERT_GT(text.size(), 100u);
  std::string zip = archive(text, model_);
  set_declared_size(zip, "manifest.json", 100);
  EXPECT_ERROR(load_error(zip), path_ + ": manifest.json: damaged zip entry: ");
  // A stored member claiming more than it holds in the archive.
  zip = archive(text, model_, false);
  set_declared_size(zip, "model.safetensors", uint32_t(model_.size()) * 1000);
  EXPECT_ERROR(load_error(zip), path_ + ": model.safetensors: damaged zip entry: claims");
}

TEST_F(Hostile, CompressedTensorMemberIsBoundedByItsCompressedSize) {
  // A valid safetensors file holding 4 MiB of zeros, deflated ~1000:1: past kMaxZipExpansion.
  const std::string zeros = write_safetensors({{"w", Tensor::zeros({1 << 20})}});
  const std::string zip = archive(manifest_.dump(), zeros);
  EXPECT_ERROR(load_error(zip), path_ + ": model.safetensors: the zip entry inflates to ",
               "more than the limit of 64 times its compressed size");
  // The same data stored, as aether writes it, is checked only against the manifest.
  EXPECT_ERROR(load_error(archive(manifest_.dump(), zeros, false)), "disagrees with model.safetensors");
  // Small compressed members (tests, other writers) stay readable.
  write_bytes(path_, archive(manifest_.dump(), model_, true));
  EXPECT_EQ(load_checkpoint(path_).model[0].second.to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

// ---- module configs -------------------------------------------------------------------------------

TEST(ModuleConfigLimits, DeepNestingIsAnErrorNotACrash) {
  // The text is parsed with a depth limit (two JSON levels per Sequential) before any module is
  // built; module_from_config then checks its own depth.
  // (Built as text: dumping a JSON value this deep would recurse 20000 levels in the test itself.)
  EXPECT_ERROR(error_of([&] { nn::module_from_config(nested_sequential_text(20000)); }),
               "module config is nested deeper than 130 levels");
  // 64 modules deep: 63 Sequentials around a ReLU.
  EXPECT_ERROR(error_of([&] { from_config(nested_sequential(64)); }), "nested deeper than 64");
  const auto ok = from_config(nested_sequential(63));
  EXPECT_EQ(config_of(*ok), nested_sequential(63));
  // The guard unwinds: a later shallow call works.
  EXPECT_NO_THROW(from_config(nested_sequential(3)));
  // Residual nests through "body".
  json r = {{"type", "ReLU"}};
  for (int i = 0; i < 70; ++i) r = json{{"type", "Residual"}, {"body", std::move(r)}};
  EXPECT_ERROR(error_of([&] { from_config(r); }), "nested deeper than 64");
}

TEST(ModuleConfigLimits, QuotedConfigsAreShort) {
  json c = {{"type", "Linear"}, {"in", 3}, {"out", json::array()}};
  for (int i = 0; i < 100000; ++i) c["out"].push_back(i);
  EXPECT_ERROR(error_of([&] { from_config(c); }),
               "module_from_config: \"out\" must be a whole number, got [0,1,2,", "...");
  EXPECT_LT(error_of([&] { from_config(c); }).size(), 600u);
  EXPECT_ERROR(error_of([&] {
                 from_config(json{{"type", std::string(1 << 20, 't')}});
               }),
               "unknown layer type 'ttt", "...'");
  EXPECT_ERROR(error_of([&] { from_config(json::array({std::string(1 << 20, 'q')})); }),
               "expected an object with a \"type\", got [\"qqq", "...");
}

// The fuzz target's findings (fuzz/corpus/architecture): each is an aether::Error naming the field,
// not a json::type_error through std::terminate, undefined behaviour converting 1e300, a silently
// truncated 3.5, or an allocation of terabytes.
TEST(ModuleConfigLimits, FieldsAreTypedAndSizesBounded) {
  EXPECT_ERROR(error_of([&] {
                 from_config(json{{"type", 5}});
               }),
               "module_from_config: \"type\" must be a string, got 5");
  EXPECT_ERROR(error_of([&] {
                 from_config(json{{"type", "Linear"}, {"in", 3.5}, {"out", 2}});
               }),
               "\"in\" must be a whole number, got 3.5");
  EXPECT_ERROR(error_of([&] {
                 from_config(json{{"type", "Linear"}, {"in", 3}, {"out", 1e300}});
               }),
               "\"out\" must be a whole number, got 1e+300");
  EXPECT_ERROR(error_of([&] {
                 from_config(json{{"type", "Linear"}, {"in", -3}, {"out", 2}});
               }),
               "\"in\" = -3 is outside [0, 16777216]");
  EXPECT_ERROR(error_of([&] {
                 from_config(json{{"type", "Linear"}, {"in", 1 << 20}, {"out", 1 << 20}});
               }),
               "would hold 1.09951e+12 values; at most 134217728 are allowed in one model");
  const json conv = {{"type", "Conv2d"},   {"in", 65536},       {"out", 65536},
                     {"kernel", {64, 64}}, {"stride", 1},       {"dilation", 1},
                     {"groups", 1},        {"padding", "same"}, {"bias", true}};
  EXPECT_ERROR(error_of([&] { from_config(conv); }), "values; at most 134217728");
  json bad_pad = conv;
  bad_pad["in"] = 3, bad_pad["out"] = 4, bad_pad["kernel"] = 3, bad_pad["padding"] = json::array({1, 1});
  EXPECT_ERROR(error_of([&] { from_config(bad_pad); }),
               "\"padding\" must be \"same\", \"valid\" or [top, bottom, left, right], got [1,1]");
  EXPECT_ERROR(
      error_of([&] {
        from_config(json{{"type", "BatchNorm2d"}, {"channels", 4}, {"momentum", "x"}, {"eps", 1e-5}});
      }),
      "\"momentum\" must be a finite number, got \"x\"");
  EXPECT_ERROR(error_of([&] {
                 from_config(json{{"type", "GELU"}, {"tanh_approx", 1}});
               }),
               "\"tanh_approx\" must be true or false, got 1");
  // The same fields, well formed, still build the layers.
  bad_pad["padding"] = json::array({1, 1, 1, 1});
  EXPECT_EQ(config_of(*from_config(bad_pad)).at("out"), 4);
  EXPECT_NO_THROW(from_config(json{{"type", "Linear"}, {"in", 3}, {"out", 2}}));
}

// The count is over the whole config, before any layer allocates: many layers that each fit do
// not add up to more than kMaxConfigValues (the architecture fuzz target's out-of-memory finding, a
// Linear of 1048576 x 1857, was under the earlier per-layer limit of 2^31 parameters).
TEST(ModuleConfigLimits, ValuesAreCountedOverTheWholeConfig) {
  static_assert(kMaxConfigValues == int64_t(1) << 27);
  EXPECT_ERROR(error_of([&] {
                 from_config(json{{"type", "Linear"}, {"in", 1048576}, {"out", 1857}});
               }),
               "would hold 1.94721e+09 values; at most 134217728");
  // Just under 2^27 values each (weight 8191 x 16384 + bias 8191), after 4 x 2^24 in a BatchNorm: six
  // of them (8.7e8 values, 3.3 GiB) are rejected before the first is allocated.
  const json big = {{"type", "Linear"}, {"in", 16384}, {"out", 8191}};
  json layers =
      json::array({{{"type", "BatchNorm2d"}, {"channels", 1 << 24}, {"momentum", 0.1}, {"eps", 1e-5}}});
  for (int i = 0; i < 6; ++i) layers.push_back(big);
  EXPECT_ERROR(error_of([&] {
                 from_config(json{{"type", "Sequential"}, {"layers", layers}});
               }),
               "module_from_config: {\"layers\":[", "would hold 8.72366e+08 values; at most 134217728");
  // Inside a Residual too.
  EXPECT_ERROR(error_of([&] {
                 from_config(json{{"type", "Residual"}, {"body", big}, {"shortcut", big}});
               }),
               "would hold 2.68419e+08 values");
  // A config at the limit's scale but under it builds, and the count starts again with each call.
  const json small = {
      {"type", "Sequential"},
      {"layers",
       json::array({{{"type", "Linear"}, {"in", 1024}, {"out", 1024}},
                    {{"type", "BatchNorm1d"}, {"channels", 1024}, {"momentum", 0.1}, {"eps", 1e-5}}})}};
  for (int i = 0; i < 3; ++i) EXPECT_NO_THROW(from_config(small));
}

// ---- safetensors ----------------------------------------------------------------------------------

TEST(SafetensorsLimits, DeepHeaderIsRejected) {
  const std::string header = "{\"x\":" + nested_arrays(100000) + "}";
  const std::string file = le64(header.size()) + header;
  EXPECT_ERROR(error_of([&] { read_safetensors(file, "bad.safetensors"); }),
               "bad.safetensors: header is nested deeper than 64 levels");
  // Within the limit, the entry's error quotes it briefly.
  const std::string ok_depth = "{\"x\":" + nested_arrays(60) + "}";
  EXPECT_ERROR(error_of([&] { read_safetensors(le64(ok_depth.size()) + ok_depth, "bad.safetensors"); }),
               "bad.safetensors: tensor 'x': header entry is not a JSON object: [[[[", "...");
}

TEST(SafetensorsLimits, QuotedValuesAndNamesAreShort) {
  const auto error = [](const std::string& header) {
    return error_of([&] { read_safetensors(le64(header.size()) + header, "bad.safetensors"); });
  };
  std::string shape = "[";
  for (int i = 0; i < 100000; ++i) shape += std::to_string(i) + ",";
  shape.back() = ']';
  EXPECT_ERROR(error("{\"x\":{\"dtype\":\"F32\",\"shape\":" + shape + ",\"data_offsets\":[0,0]}}"),
               "tensor 'x': shape [0,1,2,", "dims; aether supports at most");
  const std::string name(1 << 20, 'n');
  EXPECT_ERROR(error("{\"" + name + "\":{\"dtype\":\"Q7\",\"shape\":[],\"data_offsets\":[0,1]}}"),
               "tensor 'nnnn", "...': unknown or unsupported dtype \"Q7\"");
  EXPECT_ERROR(error("{\"" + name + "\":{},\"" + name + "\":{}}"), "header names tensor 'nnn",
               "...' more than once");
  EXPECT_ERROR(error("{\"__metadata__\":{\"k\":" + shape + "}}"),
               "\"__metadata__\" value of 'k' is not a string: [0,1,");
  EXPECT_ERROR(error("{\"" + name + "\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}}"),
               "tensor 'nnn", "...': data_offsets [0, 4] run past the end of the data buffer (0 bytes)");
}

TEST(SafetensorsLimits, TensorsAreBoundedByTheFileAndByInt64) {
  const auto error = [](const std::string& header, const std::string& data = "") {
    return error_of([&] { read_safetensors(le64(header.size()) + header + data, "bad.safetensors"); });
  };
  // 2^40 floats (4 TiB) claimed by a file of 16 bytes of data: nothing is allocated.
  EXPECT_ERROR(error(R"({"t":{"dtype":"F32","shape":[1099511627776],"data_offsets":[0,4398046511104]}})",
                     std::string(16, '\0')),
               "tensor 't': data_offsets [0, 4398046511104] run past the end of the data buffer (16 bytes)");
  // Shapes whose products overflow int64, also beside a zero dim (no data, but strides would).
  EXPECT_ERROR(error(R"({"t":{"dtype":"U8","shape":[4294967296,4294967296],"data_offsets":[0,0]}})"),
               "too many elements (overflow)");
  EXPECT_ERROR(error(R"({"t":{"dtype":"U8","shape":[0,4294967296,4294967296],"data_offsets":[0,0]}})"),
               "tensor 't': shape [0,4294967296,4294967296] has too many elements (overflow)");
  EXPECT_ERROR(error(R"({"t":{"dtype":"F64","shape":[0,2305843009213693952],"data_offsets":[0,0]}})"),
               "tensor 't': shape [0,2305843009213693952] of F64 has too many bytes (overflow)");
  // A zero dim with a representable extent is an empty tensor.
  const std::string empty = R"({"t":{"dtype":"F32","shape":[0,1000000],"data_offsets":[0,0]}})";
  const auto ok = read_safetensors(le64(empty.size()) + empty);
  ASSERT_EQ(ok.tensors.size(), 1u);
  EXPECT_EQ(ok.tensors[0].second.shape(), (Shape{0, 1000000}));
}

// ---- temporary files of killed saves --------------------------------------------------------------

TEST_F(Hostile, SaveRemovesTemporaryFilesOfDeadWriters) {
  // As a writer killed mid-save leaves them (nobody holds them locked), with bystanders.
  const std::set<std::string> keep = {"run.aether", ".other.aether.tmp-AbC123", ".run.aether.tmp-AbC123x",
                                      "run.aether.tmp-AbC123", ".run.aether.tmp-Ab.123"};
  for (const char* name : {".run.aether.tmp-AbC123", ".run.aether.tmp-000000"})
    write_bytes(dir_ + "/" + name, "partial");
  for (const std::string& name : keep)
    if (name != "run.aether") write_bytes(dir_ + "/" + name, "other");
  save_checkpoint(path_, Checkpoint{});
  EXPECT_EQ(files(), keep);
  // save_safetensors (and every write_file_atomic) cleans up the same way.
  write_bytes(dir_ + "/.w.safetensors.tmp-zzzzzz", "partial");
  save_safetensors(dir_ + "/w.safetensors", {});
  EXPECT_EQ(files().count(".w.safetensors.tmp-zzzzzz"), 0u);
}

TEST_F(Hostile, SaveKeepsTheTemporaryFileOfALiveWriterInThisProcess) {
  std::set<std::string> seen;
  bool nested = false;
  detail::set_atomic_write_hook([&](const char* stage) {
    if (std::string(stage) != "partially_written" || nested) return;
    nested = true;
    write_file_atomic(path_, "second");  // runs its clean-up while the first save is mid-write
    seen = files();
  });
  write_file_atomic(path_, "first");
  ASSERT_EQ(seen.size(), 2u) << "the first save's temporary file was removed";
  EXPECT_EQ(seen.count("run.aether"), 1u);
  EXPECT_EQ(read_file(path_), "first");
  EXPECT_EQ(files(), (std::set<std::string>{"run.aether"}));
}

TEST_F(Hostile, KilledSaveIsCleanedUpOnlyOnceItsWriterIsDead) {
  int ready[2];
  ASSERT_EQ(::pipe(ready), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The child saves and stops half-way, as if working on a large file, until it is killed.
    detail::set_atomic_write_hook([&](const char* stage) {
      if (std::string(stage) != "partially_written") return;
      const char c = 'x';
      if (::write(ready[1], &c, 1) != 1) ::_exit(2);
      for (;;) ::pause();
    });
    try {
      write_file_atomic(path_, std::string(1 << 16, 'c'));
    } catch (...) {
    }
    ::_exit(1);
  }
  ::close(ready[1]);
  char c = 0;
  ASSERT_EQ(::read(ready[0], &c, 1), 1) << "the child did not reach the middle of its save";
  ::close(ready[0]);
  const std::set<std::string> during = files();
  ASSERT_EQ(during.size(), 2u);
  const std::string temp =
      *std::find_if(during.begin(), during.end(), [](const std::string& n) { return n != "run.aether"; });
  EXPECT_TRUE(temp.rfind(".run.aether.tmp-", 0) == 0) << temp;

  // The child is alive and mid-save: a save now must leave its file alone.
  write_file_atomic(path_, "parent");
  EXPECT_EQ(files(), (std::set<std::string>{"run.aether", temp}));

  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(files(), (std::set<std::string>{"run.aether", temp})) << "kill -9 leaves the temporary file";

  write_file_atomic(path_, "next");
  EXPECT_EQ(files(), (std::set<std::string>{"run.aether"}));
  EXPECT_EQ(read_file(path_), "next");
}
