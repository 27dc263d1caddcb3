// tests/io_checkpoint_test.cpp - .aether checkpoints: round trip, zip layout, atomic saving under
// simulated failures (throwing input, failing at each write stage, full disk, read-only directory)
// and clear errors for corrupt, truncated, foreign, too-new or inconsistent files.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>

#include "aether/aether.h"
#include "aether/io/file.h"
#include "io/checkpoint.h"
#include "io/zip_archive.h"

using namespace aether;
namespace fs = std::filesystem;
using json = nlohmann::json;

namespace {

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

std::string raw(const Tensor& t) {
  std::string s(size_t(t.numel() * dtype_size(t.dtype())), '\0');
  t.copy_to(s.data(), t.dtype());
  return s;
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
}

std::vector<float> ramp(size_t n, float start, float step) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = start + step * float(i);
  return v;
}

// A small but complete checkpoint; `seed` changes every value so that two differ.
Checkpoint make_checkpoint(float seed) {
  Checkpoint c;
  c.manifest_extra = {
      {"architecture",
       {{"name", "tiny_cnn"}, {"layers", {{{"type", "conv"}, {"out", 4}}, {{"type", "linear"}}}}}},
      {"training_state",
       {{"epoch", 3},
        {"step", 1200 + int(seed)},
        {"rng", {{"seed", 42}, {"next_stream", 17}}},
        {"schedule", {{"name", "cosine"}, {"position", 0.25}}}}},
  };
  c.model = {
      {"0.conv.weight", Tensor::from_vector<float>(ramp(72, seed, 0.01f), {4, 3, 3, 2})},  // OHWI
      {"0.conv.bias", Tensor::from_vector<float>({seed, -1, 2, -3}, {4})},
      {"1.bn.num_batches_tracked", Tensor::from_vector<int64_t>({int64_t(seed) + 7}, {})},
      {"2.linear.weight", Tensor::from_vector<float>(ramp(15, -seed, 0.5f), {3, 5}).cast(DType::bfloat16)},
  };
  c.optimizer = {
      {"0.conv.weight.exp_avg", Tensor::from_vector<float>(ramp(72, seed, -0.02f), {4, 3, 3, 2})},
      {"step", Tensor::from_vector<int64_t>({int64_t(seed) * 10}, {})},
      {"mask", Tensor::from_vector<bool>({true, false, false, true}, {2, 2})},
      {"empty", Tensor::zeros({0}, DType::float16)},
  };
  return c;
}

void expect_same_tensors(const NamedTensors& got, const NamedTensors& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].first);
    EXPECT_EQ(got[i].first, want[i].first);
    EXPECT_EQ(got[i].second.dtype(), want[i].second.dtype());
    EXPECT_EQ(got[i].second.shape(), want[i].second.shape());
    EXPECT_EQ(raw(got[i].second), raw(want[i].second));
  }
}

// Walks the zip's local file headers (PKWARE APPNOTE 4.3.7) independently of libzip.
struct LocalEntry {
  std::string name;
  uint16_t method;
  std::string data;  // as stored (compressed for deflate)
};
std::vector<LocalEntry> local_entries(const std::string& zip) {
  auto u16 = [&](size_t at) { return uint16_t(uint8_t(zip[at]) | uint8_t(zip[at + 1]) << 8); };
  auto u32 = [&](size_t at) { return uint32_t(u16(at)) | uint32_t(u16(at + 2)) << 16; };
  std::vector<LocalEntry> out;
  size_t at = 0;
  while (at + 30 <= zip.size() && zip.compare(at, 4, "PK\x03\x04") == 0) {
    const uint16_t flags = u16(at + 6), method = u16(at + 8), name_len = u16(at + 26),
                   extra_len = u16(at + 28);
    const uint32_t comp_size = u32(at + 18);
    EXPECT_EQ(flags & 8, 0) << "sizes deferred to a data descriptor";
    const size_t data_at = at + 30 + name_len + extra_len;
    out.push_back({zip.substr(at + 30, name_len), method, zip.substr(data_at, comp_size)});
    at = data_at + comp_size;
  }
  return out;
}

class Checkpoints : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "aether_io_ckpt_XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    path_ = (fs::path(dir_) / "run.aether").string();
  }
  void TearDown() override {
    detail::set_atomic_write_hook({});
    ::chmod(dir_.c_str(), 0755);
    fs::remove_all(dir_);
  }
  std::set<std::string> files() const {
    std::set<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.insert(e.path().filename().string());
    return names;
  }
  // The three members of a saved checkpoint.
  std::vector<std::string> members(const std::string& path) const {
    const std::string bytes = read_file(path);
    const zipio::Reader zip(bytes, path, "an aether checkpoint");
    return {zip.read("manifest.json"), zip.read("model.safetensors"), zip.read("optimizer.safetensors")};
  }
  std::string rezip(const std::vector<std::pair<std::string, std::string>>& m) const {
    std::vector<zipio::Member> list;
    for (const auto& [name, data] : m) list.push_back({name, data, true});
    return zipio::write_zip(list, "test");
  }
  // load_checkpoint's error for a file holding `bytes`.
  std::string load_error(const std::string& bytes) const {
    write_bytes(path_, bytes);
    return error_of([&] { load_checkpoint(path_); });
  }

  std::string dir_, path_;
};

}  // namespace

// ---- round trip and layout --------------------------------------------------------------------------

TEST_F(Checkpoints, RoundTrip) {
  const Checkpoint c = make_checkpoint(1.5f);
  save_checkpoint(path_, c);
  const Checkpoint back = load_checkpoint(path_);
  EXPECT_EQ(back.manifest_extra, c.manifest_extra);
  expect_same_tensors(back.model, c.model);
  expect_same_tensors(back.optimizer, c.optimizer);
  // Spot-check values against the inputs' definition, not only against each other.
  EXPECT_EQ(back.model[1].second.to_vector<float>(), (std::vector<float>{1.5f, -1, 2, -3}));
  EXPECT_EQ(back.model[2].second.item<int64_t>(), 8);
  EXPECT_EQ(back.model[3].second.dtype(), DType::bfloat16);
  EXPECT_EQ(back.model[3].second.to_vector<float>()[2], -0.5f);
  EXPECT_EQ(back.optimizer[2].second.to_vector<bool>(), (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(files(), (std::set<std::string>{"run.aether"}));
}

TEST_F(Checkpoints, TheTrainingGroupIsAThirdMemberOnlyWhenItHasTensors) {
  Checkpoint c = make_checkpoint(2);
  c.training = {{"early_stopping.w", Tensor::from_vector<float>({4, -5, 6}, {3})}};
  save_checkpoint(path_, c);
  const auto entries = local_entries(read_file(path_));
  ASSERT_EQ(entries.size(), 4u);
  EXPECT_EQ(entries[3].name, "training.safetensors");
  EXPECT_EQ(entries[3].method, 0);
  const Checkpoint back = load_checkpoint(path_);
  expect_same_tensors(back.training, c.training);
  expect_same_tensors(back.model, c.model);
  EXPECT_EQ(read_checkpoint_manifest(path_)["tensors"]["training"][0]["name"], "early_stopping.w");
  // Listed but missing: named. Without tensors, no member and no list.
  const std::string bytes = read_file(path_);
  const zipio::Reader zip(bytes, path_, "x");
  EXPECT_EQ(load_error(rezip({{"manifest.json", zip.read("manifest.json")},
                              {"model.safetensors", zip.read("model.safetensors")},
                              {"optimizer.safetensors", zip.read("optimizer.safetensors")}})),
            path_ + ": damaged checkpoint: the zip archive has no training.safetensors");
  c.training.clear();
  save_checkpoint(path_, c);
  EXPECT_EQ(local_entries(read_file(path_)).size(), 3u);
  EXPECT_FALSE(read_checkpoint_manifest(path_)["tensors"].contains("training"));
  EXPECT_TRUE(load_checkpoint(path_).training.empty());
}

TEST_F(Checkpoints, EmptyAndNullExtra) {
  Checkpoint c;
  c.manifest_extra = nullptr;
  save_checkpoint(path_, c);
  const Checkpoint back = load_checkpoint(path_);
  EXPECT_EQ(back.manifest_extra, json::object());
  EXPECT_TRUE(back.model.empty());
  EXPECT_TRUE(back.optimizer.empty());
}

TEST_F(Checkpoints, ManifestContents) {
  save_checkpoint(path_, make_checkpoint(2));
  const json m = read_checkpoint_manifest(path_);
  EXPECT_EQ(m["format"], "aether-checkpoint");
  EXPECT_EQ(m["format_version"], 1);
  EXPECT_EQ(m["training_state"]["step"], 1202);
  EXPECT_EQ(m["training_state"]["rng"], (json{{"seed", 42}, {"next_stream", 17}}));
  EXPECT_EQ(m["architecture"]["name"], "tiny_cnn");
  EXPECT_EQ(m["tensors"]["model"][0],
            json::parse(R"({"name": "0.conv.weight", "dtype": "F32", "shape": [4, 3, 3, 2]})"));
  EXPECT_EQ(m["tensors"]["model"][2],
            json::parse(R"({"name": "1.bn.num_batches_tracked", "dtype": "I64", "shape": []})"));
  EXPECT_EQ(m["tensors"]["model"][3]["dtype"], "BF16");
  EXPECT_EQ(m["tensors"]["optimizer"].size(), 4u);
  EXPECT_EQ(m["tensors"]["optimizer"][2],
            json::parse(R"({"name": "mask", "dtype": "BOOL", "shape": [2, 2]})"));
  EXPECT_EQ(m["tensors"]["optimizer"][3], json::parse(R"({"name": "empty", "dtype": "F16", "shape": [0]})"));
}

TEST_F(Checkpoints, ManifestText) {
  // The exact manifest.json: marker first, the caller's members, one line per tensor.
  Checkpoint c;
  c.manifest_extra = {{"architecture", {{"name", "mlp"}}}, {"training_state", {{"epoch", 2}}}};
  c.model = {{"0.linear.weight", Tensor::zeros({3, 2})}, {"0.linear.bias", Tensor::zeros({3})}};
  c.optimizer = {{"step", Tensor::zeros({}, DType::int64)}};
  save_checkpoint(path_, c);
  const std::string bytes = read_file(path_);
  const zipio::Reader zip(bytes, path_, "an aether checkpoint");
  EXPECT_EQ(zip.read("manifest.json"), R"({
  "format": "aether-checkpoint",
  "format_version": 1,
  "architecture": {
    "name": "mlp"
  },
  "training_state": {
    "epoch": 2
  },
  "tensors": {
    "model": [
      {"name":"0.linear.weight","dtype":"F32","shape":[3,2]},
      {"name":"0.linear.bias","dtype":"F32","shape":[3]}
    ],
    "optimizer": [
      {"name":"step","dtype":"I64","shape":[]}
    ]
  }
}
)");
  c.model.clear();
  c.optimizer.clear();
  c.manifest_extra = json::object();
  save_checkpoint(path_, c);
  EXPECT_EQ(json::parse(zipio::Reader(read_file(path_), path_, "x").read("manifest.json")),
            json::parse(R"({"format": "aether-checkpoint", "format_version": 1,
                            "tensors": {"model": [], "optimizer": []}})"));
}

TEST_F(Checkpoints, ZipLayout) {
  const Checkpoint c = make_checkpoint(3);
  save_checkpoint(path_, c);
  const auto entries = local_entries(read_file(path_));
  ASSERT_EQ(entries.size(), 3u);
  EXPECT_EQ(entries[0].name, "manifest.json");
  EXPECT_EQ(entries[0].method, 8);  // deflate
  EXPECT_EQ(entries[1].name, "model.safetensors");
  EXPECT_EQ(entries[1].method, 0);  // stored: the safetensors bytes sit in the archive verbatim
  EXPECT_EQ(entries[2].name, "optimizer.safetensors");
  EXPECT_EQ(entries[2].method, 0);
  expect_same_tensors(read_safetensors(entries[1].data).tensors, c.model);
  expect_same_tensors(read_safetensors(entries[2].data).tensors, c.optimizer);
}

TEST_F(Checkpoints, BadExtraIsRejectedBeforeWriting) {
  Checkpoint c = make_checkpoint(1);
  c.manifest_extra["format_version"] = 7;
  EXPECT_TRUE(contains(error_of([&] { save_checkpoint(path_, c); }), "reserved key \"format_version\""));
  c.manifest_extra = json::array({1, 2});
  EXPECT_TRUE(contains(error_of([&] { save_checkpoint(path_, c); }), "must be a JSON object, got array"));
  c.manifest_extra = {{"note", "bad\xff"}};
  EXPECT_TRUE(contains(error_of([&] { save_checkpoint(path_, c); }), "UTF-8"));
  EXPECT_TRUE(files().empty());
}

// ---- atomic saving -----------------------------------------------------------------------------------

TEST_F(Checkpoints, ThrowingTensorLeavesOldFileIntact) {
  save_checkpoint(path_, make_checkpoint(1));
  const std::string before = read_file(path_);
  Checkpoint bad = make_checkpoint(2);
  bad.optimizer.emplace_back("broken", Tensor());  // throws when serialised
  EXPECT_TRUE(contains(error_of([&] { save_checkpoint(path_, bad); }), "tensor 'broken'"));
  EXPECT_EQ(read_file(path_), before);
  EXPECT_EQ(files(), (std::set<std::string>{"run.aether"}));
}

TEST_F(Checkpoints, FailureAtEveryWriteStageLeavesOldFileIntact) {
  const Checkpoint old_ckpt = make_checkpoint(1);
  save_checkpoint(path_, old_ckpt);
  const std::string before = read_file(path_);
  for (const std::string stage : {"created", "partially_written", "written", "synced"}) {
    SCOPED_TRACE(stage);
    int fired = 0;
    std::string temp_seen;
    detail::set_atomic_write_hook([&](const char* s) {
      if (stage != s) return;
      ++fired;
      // The temporary file exists at this point, next to the target.
      for (const auto& e : fs::directory_iterator(dir_))
        if (e.path().filename() != "run.aether") temp_seen = e.path().filename().string();
      throw Error("simulated crash at " + stage);
    });
    const std::string msg = error_of([&] { save_checkpoint(path_, make_checkpoint(2)); });
    EXPECT_EQ(fired, 1);
    EXPECT_TRUE(contains(msg, "simulated crash")) << msg;
    EXPECT_TRUE(temp_seen.rfind(".run.aether.tmp-", 0) == 0) << temp_seen;
    EXPECT_EQ(read_file(path_), before);
    EXPECT_EQ(files(), (std::set<std::string>{"run.aether"}));
    expect_same_tensors(load_checkpoint(path_).model, old_ckpt.model);
  }
  detail::set_atomic_write_hook({});
  const Checkpoint new_ckpt = make_checkpoint(2);
  save_checkpoint(path_, new_ckpt);
  expect_same_tensors(load_checkpoint(path_).model, new_ckpt.model);
  EXPECT_EQ(files(), (std::set<std::string>{"run.aether"}));
}

TEST_F(Checkpoints, FullDiskLeavesOldFileIntact) {
  // RLIMIT_FSIZE makes write() fail with EFBIG past the limit, for root too: a real I/O error.
  save_checkpoint(path_, make_checkpoint(1));
  const std::string before = read_file(path_);
  Checkpoint big = make_checkpoint(2);
  big.model.emplace_back("big", Tensor::from_vector<float>(ramp(100000, 0, 1), {100000}));  // 400 kB

  rlimit old_limit{};
  ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &old_limit), 0);
  rlimit limit = old_limit;
  limit.rlim_cur = 64 * 1024;
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &limit), 0);
  const auto old_handler = std::signal(SIGXFSZ, SIG_IGN);
  const std::string msg = error_of([&] { save_checkpoint(path_, big); });
  std::signal(SIGXFSZ, old_handler);
  ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &old_limit), 0);

  EXPECT_TRUE(contains(msg, path_ + ": cannot save: writing the temporary file failed")) << msg;
  EXPECT_EQ(read_file(path_), before);
  EXPECT_EQ(files(), (std::set<std::string>{"run.aether"}));
}

TEST_F(Checkpoints, ReadOnlyDirectoryLeavesOldFileIntact) {
  save_checkpoint(path_, make_checkpoint(1));
  const std::string before = read_file(path_);
  ASSERT_EQ(::chmod(dir_.c_str(), 0555), 0);
  if (::access(dir_.c_str(), W_OK) == 0)
    GTEST_SKIP() << "running with CAP_DAC_OVERRIDE (root): permissions do not apply";
  const std::string msg = error_of([&] { save_checkpoint(path_, make_checkpoint(2)); });
  EXPECT_TRUE(contains(msg, "cannot create a temporary file")) << msg;
  ::chmod(dir_.c_str(), 0755);
  EXPECT_EQ(read_file(path_), before);
  EXPECT_EQ(files(), (std::set<std::string>{"run.aether"}));
}

TEST_F(Checkpoints, TargetIsADirectory) {
  fs::create_directory(path_);
  EXPECT_TRUE(
      contains(error_of([&] { save_checkpoint(path_, make_checkpoint(1)); }), "a directory of that name"));
  EXPECT_EQ(files(), (std::set<std::string>{"run.aether"}));
  EXPECT_TRUE(fs::is_directory(path_));
}

TEST_F(Checkpoints, FileModes) {
  save_checkpoint(path_, make_checkpoint(1));
  struct stat st {};
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  ASSERT_EQ(::chmod(path_.c_str(), 0600), 0);
  save_checkpoint(path_, make_checkpoint(2));
  ASSERT_EQ(::stat(path_.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);  // a replaced file keeps its permissions
}

// ---- rejecting bad files -----------------------------------------------------------------------------

TEST_F(Checkpoints, RejectsMissingEmptyAndForeignFiles) {
  EXPECT_TRUE(contains(error_of([&] { load_checkpoint(path_); }), path_ + ": cannot read: No such file"));
  EXPECT_EQ(load_error(""), path_ + ": not an aether checkpoint (empty file)");
  std::string noise(4096, '\0');
  uint32_t x = 12345;
  for (char& ch : noise) ch = char((x = x * 1664525u + 1013904223u) >> 24);
  EXPECT_EQ(load_error(noise), path_ + ": not an aether checkpoint (not a zip file)");
  const std::string st = write_safetensors({{"w", Tensor::ones({3})}});
  const std::string weights_file = path_ +
                                   ": not an aether checkpoint: it is a safetensors file (weights alone, as "
                                   "save_weights writes them); load_weights reads it into a model of the "
                                   "same layers";
  EXPECT_EQ(load_error(st), weights_file);
  // One whose header starts with spaces (valid safetensors, as another writer may pad it) is one too;
  // this check once looked for '{' right after the length, and said "not a zip file".
  const std::string header = " {}";
  std::string padded(8, '\0');
  padded[0] = char(header.size());
  EXPECT_EQ(load_error(padded + header), weights_file);
  // A valid zip that is not a checkpoint.
  EXPECT_EQ(load_error(rezip({{"readme.txt", "hello"}})),
            path_ + ": not an aether checkpoint (the zip archive has no manifest.json)");
}

TEST_F(Checkpoints, RejectsTruncatedFiles) {
  save_checkpoint(path_, make_checkpoint(1));
  const std::string good = read_file(path_);
  for (size_t keep : {size_t(10), size_t(100), good.size() / 2, good.size() - 22, good.size() - 1}) {
    SCOPED_TRACE(keep);
    const std::string msg = load_error(good.substr(0, keep));
    EXPECT_TRUE(contains(msg, path_ + ": damaged zip archive")) << msg;
  }
}

TEST_F(Checkpoints, RejectsCorruptedData) {
  const Checkpoint c = make_checkpoint(1);
  save_checkpoint(path_, c);
  std::string bytes = read_file(path_);
  // Flip one byte of the stored conv bias (1.5f, -1, 2, -3) inside model.safetensors.
  const std::string bias = raw(c.model[1].second);
  const size_t at = bytes.find(bias);
  ASSERT_NE(at, std::string::npos);
  bytes[at + 5] ^= 0x40;
  const std::string msg = load_error(bytes);
  EXPECT_TRUE(contains(msg, path_ + ": model.safetensors: damaged zip entry")) << msg;
}

TEST_F(Checkpoints, RejectsMissingMembers) {
  save_checkpoint(path_, make_checkpoint(1));
  const auto m = members(path_);
  EXPECT_EQ(load_error(rezip({{"manifest.json", m[0]}, {"model.safetensors", m[1]}})),
            path_ + ": damaged checkpoint: the zip archive has no optimizer.safetensors");
  EXPECT_EQ(load_error(rezip({{"manifest.json", m[0]}, {"optimizer.safetensors", m[2]}})),
            path_ + ": damaged checkpoint: the zip archive has no model.safetensors");
  EXPECT_EQ(load_error(rezip({{"model.safetensors", m[1]}, {"optimizer.safetensors", m[2]}})),
            path_ + ": not an aether checkpoint (the zip archive has no manifest.json)");
  // All three, plus an unknown extra member (ignored, for forward compatibility): loads.
  write_bytes(path_, rezip({{"manifest.json", m[0]},
                            {"model.safetensors", m[1]},
                            {"optimizer.safetensors", m[2]},
                            {"notes.txt", "x"}}));
  EXPECT_NO_THROW(load_checkpoint(path_));
}

TEST_F(Checkpoints, RejectsBadManifests) {
  save_checkpoint(path_, make_checkpoint(1));
  const auto m = members(path_);
  const json manifest = json::parse(m[0]);
  auto with = [&](const std::string& text) {
    return load_error(
        rezip({{"manifest.json", text}, {"model.safetensors", m[1]}, {"optimizer.safetensors", m[2]}}));
  };
  auto edited = [&](const std::function<void(json&)>& edit) {
    json j = manifest;
    edit(j);
    return with(j.dump());
  };
  EXPECT_TRUE(contains(with("{\"format\": "), path_ + ": manifest.json is not valid JSON"));
  EXPECT_EQ(with("[1]"), path_ + ": manifest.json is not a JSON object");
  EXPECT_EQ(edited([](json& j) { j["format"] = "zipped-weights"; }),
            path_ +
                ": not an aether checkpoint (manifest.json has format \"zipped-weights\", expected "
                "\"aether-checkpoint\")");
  EXPECT_EQ(
      edited([](json& j) { j["format_version"] = 2; }),
      path_ + ": checkpoint format version 2 is newer than this build of aether reads (1); upgrade aether");
  EXPECT_TRUE(contains(edited([](json& j) { j["format_version"] = 0; }), "invalid format_version 0"));
  EXPECT_TRUE(contains(edited([](json& j) { j["format_version"] = "1"; }), "no integer \"format_version\""));
  EXPECT_TRUE(contains(edited([](json& j) { j.erase("tensors"); }), "no \"tensors\" object"));
  EXPECT_TRUE(contains(edited([](json& j) { j["tensors"].erase("optimizer"); }), "\"optimizer\" list"));
  EXPECT_TRUE(contains(edited([](json& j) { j["tensors"]["model"][0].erase("shape"); }),
                       "bad \"model\" tensor entry"));
}

TEST_F(Checkpoints, RejectsManifestDisagreeingWithTensors) {
  save_checkpoint(path_, make_checkpoint(1));
  const auto m = members(path_);
  const json manifest = json::parse(m[0]);
  auto edited = [&](const std::function<void(json&)>& edit) {
    json j = manifest;
    edit(j);
    return load_error(
        rezip({{"manifest.json", j.dump()}, {"model.safetensors", m[1]}, {"optimizer.safetensors", m[2]}}));
  };
  const std::string where = path_ + ": manifest.json disagrees with ";
  EXPECT_EQ(edited([](json& j) { j["tensors"]["model"][1]["name"] = "0.conv.b"; }),
            where + "model.safetensors: it lists tensor '0.conv.b', which model.safetensors lacks");
  EXPECT_EQ(edited([](json& j) { j["tensors"]["model"][0]["dtype"] = "F16"; }),
            where +
                "model.safetensors: tensor '0.conv.weight' is \"F16\" in the manifest but F32 in "
                "model.safetensors");
  EXPECT_EQ(edited([](json& j) {
              j["tensors"]["optimizer"][0]["shape"] = {4, 3, 2, 3};
            }),
            where +
                "optimizer.safetensors: tensor '0.conv.weight.exp_avg' has shape [4,3,2,3] in the manifest "
                "but [4,3,3,2] in optimizer.safetensors");
  EXPECT_EQ(edited([](json& j) { j["tensors"]["optimizer"].erase(3); }),
            where + "optimizer.safetensors: the manifest lists 3 tensors but optimizer.safetensors holds 4");
  // Tensors swapped between the groups.
  EXPECT_TRUE(contains(edited([](json& j) { std::swap(j["tensors"]["model"], j["tensors"]["optimizer"]); }),
                       "which model.safetensors lacks"));
}

TEST_F(Checkpoints, RejectsCorruptSafetensorsMember) {
  save_checkpoint(path_, make_checkpoint(1));
  const auto m = members(path_);
  const std::string cut = m[1].substr(0, m[1].size() - 4);
  const std::string msg = load_error(
      rezip({{"manifest.json", m[0]}, {"model.safetensors", cut}, {"optimizer.safetensors", m[2]}}));
  EXPECT_TRUE(contains(msg, path_ + ":model.safetensors: tensor '2.linear.weight'")) << msg;
  EXPECT_TRUE(contains(msg, "truncated")) << msg;
}
