// tests/io_safetensors_test.cpp - safetensors writer/reader: exact bytes against the published
// format, hand-built files, round trips of every dtype and of views, and rejection of bad files.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "aether/aether.h"
#include "aether/io/safetensors.h"

using namespace aether;

namespace {

// ---- byte helpers (independent of the code under test) ---------------------------------------
template <typename T>
std::string bytes_of(const std::vector<T>& v) {
  std::string s(v.size() * sizeof(T), '\0');
  if (!v.empty()) std::memcpy(s.data(), v.data(), s.size());
  return s;
}
std::string le64(uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((n >> (8 * i)) & 0xff);
  return s;
}
// A whole file: 8-byte little-endian header length, header text, data.
std::string make_file(const std::string& header, const std::string& data = "") {
  return le64(header.size()) + header + data;
}
// The raw bytes of a tensor's elements in its own dtype (row-major).
std::string raw(const Tensor& t) {
  std::string s(size_t(t.numel() * dtype_size(t.dtype())), '\0');
  t.copy_to(s.data(), t.dtype());
  return s;
}

// The aether::Error message thrown by f, or "<no error>".
std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "<no error>";
}
bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

#define EXPECT_READ_ERROR(bytes, ...)                                                       \
  do {                                                                                      \
    const std::string msg_ = error_of([&] { read_safetensors(bytes, "bad.safetensors"); }); \
    EXPECT_TRUE(contains(msg_, "bad.safetensors: ")) << msg_;                               \
    for (const std::string& part_ : std::vector<std::string>{__VA_ARGS__})                  \
      EXPECT_TRUE(contains(msg_, part_)) << "expected '" << part_ << "' in: " << msg_;      \
  } while (0)

struct Case {
  std::string name;
  DType dtype;
  Shape shape;
  std::string bytes;  // expected element bytes, little-endian, row-major
};

// Six elements of every dtype, including extremes, NaN, signed zero and subnormals.
std::vector<Case> dtype_cases() {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  return {
      {"f32", DType::float32, {2, 3}, bytes_of<float>({1.5f, -2.25f, 0.f, 3.0e38f, -1e-30f, nan})},
      {"f16", DType::float16, {2, 3}, bytes_of<uint16_t>({0x3C00, 0xC000, 0x7BFF, 0x0001, 0x8000, 0x7E00})},
      {"bf16", DType::bfloat16, {3, 2}, bytes_of<uint16_t>({0x3F80, 0xC040, 0x7F7F, 0x0001, 0x8000, 0x7FC0})},
      {"f64", DType::float64, {6}, bytes_of<double>({1.0 / 3, -1e300, 5e-324, 0.0, -0.0, INFINITY})},
      {"i32", DType::int32, {1, 6}, bytes_of<int32_t>({INT32_MIN, -1, 0, 1, 123456789, INT32_MAX})},
      {"i64", DType::int64, {2, 1, 3}, bytes_of<int64_t>({INT64_MIN, -1, 0, 1, int64_t(1) << 40, INT64_MAX})},
      {"u8", DType::uint8, {6, 1}, bytes_of<uint8_t>({0, 1, 127, 128, 254, 255})},
      {"bool", DType::boolean, {2, 3}, bytes_of<uint8_t>({1, 0, 0, 1, 1, 0})},
  };
}

}  // namespace

// ---- exact bytes, as the format's reference implementation produces them ------------------------

TEST(Safetensors, WriterMatchesReferenceBytes) {
  // One F32 tensor (1, 2, 3): the JSON is exactly 64 bytes, so no padding.
  const std::string header = R"({"attn.0":{"dtype":"F32","shape":[1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header.size(), 64u);
  const std::string data = bytes_of<float>({0, 1, 2, 3, 4, 5});
  const NamedTensors tensors = {{"attn.0", Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 2, 3})}};
  EXPECT_EQ(write_safetensors(tensors), le64(64) + header + data);

  // Padding with spaces to a multiple of 8: a 65-byte JSON gets seven.
  const std::string header2 = R"({"attn0":{"dtype":"F32","shape":[1,1,2,3],"data_offsets":[0,24]}})";
  ASSERT_EQ(header2.size(), 65u);
  const NamedTensors tensors2 = {{"attn0", Tensor::from_vector<float>({0, 1, 2, 3, 4, 5}, {1, 1, 2, 3})}};
  EXPECT_EQ(write_safetensors(tensors2), le64(72) + header2 + std::string(7, ' ') + data);

  // No tensors: "{}" padded to 8; with metadata, "__metadata__" comes first.
  EXPECT_EQ(write_safetensors({}), le64(8) + "{}      ");
  EXPECT_EQ(write_safetensors({}, {{"framework", "pt"}}),
            le64(40) + R"({"__metadata__":{"framework":"pt"}})" + "     ");
}

TEST(Safetensors, WriterHeaderAndDataLayout) {
  // Parse the written file with nlohmann directly (not with our reader) and check every field.
  const auto cases = dtype_cases();
  NamedTensors tensors;
  std::string expected_data;
  for (const Case& c : cases) {
    tensors.emplace_back(c.name, Tensor::from_blob(c.bytes.data(), c.shape, c.dtype));
    expected_data += c.bytes;
  }
  const std::string file = write_safetensors(tensors, {{"epoch", "3"}, {"note", "héllo"}});
  uint64_t n = 0;
  std::memcpy(&n, file.data(), 8);
  ASSERT_EQ((8 + n) % 8, 0u);
  ASSERT_LE(8 + n, file.size());
  const auto header = nlohmann::json::parse(file.substr(8, n));
  EXPECT_EQ(header["__metadata__"], (nlohmann::json{{"epoch", "3"}, {"note", "héllo"}}));
  const char* names[] = {"F32", "F16", "BF16", "F64", "I32", "I64", "U8", "BOOL"};
  uint64_t offset = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    const auto& h = header[cases[i].name];
    EXPECT_EQ(h["dtype"], names[i]);
    EXPECT_EQ(h["shape"], nlohmann::json(cases[i].shape));
    EXPECT_EQ(h["data_offsets"], nlohmann::json({offset, offset + cases[i].bytes.size()}));
    offset += cases[i].bytes.size();
  }
  EXPECT_EQ(file.substr(8 + n), expected_data);
}

// ---- hand-built files parse to the right values ----------------------------------------------------

TEST(Safetensors, ReadsTheSpecExample) {
  // The example from the format's documentation: I32 (2, 2) of zeros, a 60-byte header.
  const std::string file = std::string("<\0\0\0\0\0\0\0", 8) +
                           R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})" +
                           std::string(16, '\0');
  const auto st = read_safetensors(file);
  ASSERT_EQ(st.tensors.size(), 1u);
  EXPECT_EQ(st.tensors[0].first, "test");
  EXPECT_EQ(st.tensors[0].second.dtype(), DType::int32);
  EXPECT_EQ(st.tensors[0].second.shape(), (Shape{2, 2}));
  EXPECT_EQ(st.tensors[0].second.to_vector<int32_t>(), (std::vector<int32_t>{0, 0, 0, 0}));
  EXPECT_TRUE(st.metadata.empty());
}

TEST(Safetensors, ReadsHandBuiltFile) {
  // Keys listed out of offset order, whitespace in the JSON, trailing space padding, metadata.
  const std::string header = R"({ "c": {"dtype": "BOOL", "shape": [3], "data_offsets": [62, 65]},)"
                             R"( "__metadata__": {"format": "pt", "k": ""},)"
                             R"( "b": {"shape": [3], "dtype": "F16", "data_offsets": [16, 22]},)"
                             R"( "a": {"dtype": "I32", "shape": [2, 2], "data_offsets": [0, 16]},)"
                             R"( "d": {"dtype": "BF16", "shape": [], "data_offsets": [22, 24]},)"
                             R"( "e": {"dtype": "F64", "shape": [1, 2], "data_offsets": [24, 40]},)"
                             R"( "f": {"dtype": "I64", "shape": [2], "data_offsets": [40, 56]},)"
                             R"( "g": {"dtype": "U8", "shape": [2, 3], "data_offsets": [56, 62]},)"
                             R"( "h": {"dtype": "F32", "shape": [0, 4], "data_offsets": [65, 65]},)"
                             R"( "i": {"dtype": "F32", "shape": [2], "data_offsets": [65, 73]} }   )";
  std::string data;
  data +=
      std::string("\x01\x00\x00\x00\xfe\xff\xff\xff\x00\x00\x00\x80\xff\xff\xff\x7f", 16);  // 1 -2 MIN MAX
  data += std::string("\x00\x3c\x00\xc0\xff\x7b", 6);                                       // 1 -2 65504
  data += std::string("\x40\xc0", 2);                                                       // bf16 -3
  data += std::string("\x00\x00\x00\x00\x00\x00\xf8\x3f\x00\x00\x00\x00\x00\x00\x10\xc0", 16);  // 1.5 -4
  data += std::string("\xff\xff\xff\xff\xff\xff\xff\xff\x00\x00\x00\x00\x00\x01\x00\x00", 16);  // -1 2^40
  data += std::string("\x00\x01\x7f\x80\xfe\xff", 6);
  data += std::string("\x01\x00\x01", 3);
  data += std::string("\x00\x00\x80\x3f\x00\x00\x20\xc1", 8);  // 1 -10
  const auto st = read_safetensors(make_file(header, data), "hand.safetensors");

  ASSERT_EQ(st.tensors.size(), 9u);
  std::vector<std::string> names;
  for (const auto& [name, t] : st.tensors) names.push_back(name);
  // Offset order; "h" and "i" tie on begin, the shorter one first.
  EXPECT_EQ(names, (std::vector<std::string>{"a", "b", "d", "e", "f", "g", "c", "h", "i"}));
  EXPECT_EQ(st.metadata, (SafetensorsMetadata{{"format", "pt"}, {"k", ""}}));

  const auto& t = st.tensors;
  EXPECT_EQ(t[0].second.shape(), (Shape{2, 2}));
  EXPECT_EQ(t[0].second.to_vector<int32_t>(), (std::vector<int32_t>{1, -2, INT32_MIN, INT32_MAX}));
  EXPECT_EQ(t[1].second.dtype(), DType::float16);
  EXPECT_EQ(t[1].second.to_vector<float>(), (std::vector<float>{1.f, -2.f, 65504.f}));
  EXPECT_EQ(t[2].second.dtype(), DType::bfloat16);
  EXPECT_EQ(t[2].second.shape(), Shape{});
  EXPECT_EQ(t[2].second.item<float>(), -3.f);
  EXPECT_EQ(t[3].second.to_vector<double>(), (std::vector<double>{1.5, -4.0}));
  EXPECT_EQ(t[4].second.to_vector<int64_t>(), (std::vector<int64_t>{-1, int64_t(1) << 40}));
  EXPECT_EQ(t[5].second.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 127, 128, 254, 255}));
  EXPECT_EQ(t[5].second.shape(), (Shape{2, 3}));
  EXPECT_EQ(t[6].second.dtype(), DType::boolean);
  EXPECT_EQ(t[6].second.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  EXPECT_EQ(t[7].second.shape(), (Shape{0, 4}));
  EXPECT_EQ(t[7].second.numel(), 0);
  EXPECT_EQ(t[8].second.to_vector<float>(), (std::vector<float>{1.f, -10.f}));
}

// ---- round trips -------------------------------------------------------------------------------------

TEST(Safetensors, RoundTripEveryDtypeWithScalarsAndEmpty) {
  NamedTensors tensors;
  std::vector<Case> expected;
  for (const Case& c : dtype_cases()) {
    const size_t size = size_t(dtype_size(c.dtype));
    for (const Case& v :
         {c, Case{c.name + ".scalar", c.dtype, {}, c.bytes.substr(size, size)},
          Case{c.name + ".empty", c.dtype, {0, 3}, ""}, Case{c.name + ".empty2", c.dtype, {4, 0, 2}, ""}}) {
      tensors.emplace_back(v.name, Tensor::from_blob(v.bytes.data(), v.shape, v.dtype));
      expected.push_back(v);
    }
  }
  const auto st = read_safetensors(write_safetensors(tensors));
  ASSERT_EQ(st.tensors.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    SCOPED_TRACE(expected[i].name);
    EXPECT_EQ(st.tensors[i].first, expected[i].name);  // the caller's order, zero-size ones included
    EXPECT_EQ(st.tensors[i].second.dtype(), expected[i].dtype);
    EXPECT_EQ(st.tensors[i].second.shape(), expected[i].shape);
    EXPECT_EQ(raw(st.tensors[i].second), expected[i].bytes);  // bit-exact, NaN payloads too
  }
}

TEST(Safetensors, RoundTripViewsAndLazyTensors) {
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[size_t(i)] = float(i) + 0.5f;
  const Tensor base = Tensor::from_vector<float>(v, {3, 4});  // base(i, j) = 4i + j + 0.5

  std::vector<float> transposed, strided, flipped;
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 3; ++i) transposed.push_back(v[size_t(4 * i + j)]);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 4; j += 2) strided.push_back(v[size_t(4 * i + j)]);
  for (int i = 2; i >= 0; --i)
    for (int j = 0; j < 4; ++j) flipped.push_back(v[size_t(4 * i + j)]);
  std::vector<float> lazy;
  for (float x : v) lazy.push_back(2 * x + 1);

  const NamedTensors tensors = {
      {"transposed", base.permute({1, 0})},
      {"strided", base.slice(1, 0, 4, 2)},
      {"flipped", base.flip({0})},
      {"expanded", Tensor::from_vector<int32_t>({7, 8, 9}, {3}).expand({2, 3})},
      {"lazy", base * 2.0 + 1.0},
      {"transposed_f64", base.permute({1, 0}).cast(DType::float64)},
  };
  const auto st = read_safetensors(write_safetensors(tensors));
  ASSERT_EQ(st.tensors.size(), 6u);
  EXPECT_EQ(st.tensors[0].second.shape(), (Shape{4, 3}));
  EXPECT_EQ(st.tensors[0].second.to_vector<float>(), transposed);
  EXPECT_EQ(st.tensors[1].second.shape(), (Shape{3, 2}));
  EXPECT_EQ(st.tensors[1].second.to_vector<float>(), strided);
  EXPECT_EQ(st.tensors[2].second.to_vector<float>(), flipped);
  EXPECT_EQ(st.tensors[3].second.shape(), (Shape{2, 3}));
  EXPECT_EQ(st.tensors[3].second.to_vector<int32_t>(), (std::vector<int32_t>{7, 8, 9, 7, 8, 9}));
  EXPECT_EQ(st.tensors[4].second.to_vector<float>(), lazy);
  EXPECT_EQ(st.tensors[5].second.dtype(), DType::float64);
  EXPECT_EQ(st.tensors[5].second.to_vector<float>(), transposed);
}

TEST(Safetensors, StreamWriterAndFiles) {
  const NamedTensors tensors = {{"w", Tensor::from_vector<float>({1, 2, 3}, {3})},
                                {"b", Tensor::from_vector<int64_t>({-4}, {1})}};
  std::ostringstream os;
  write_safetensors(os, tensors, {{"a", "b"}});
  EXPECT_EQ(os.str(), write_safetensors(tensors, {{"a", "b"}}));

  const auto dir = std::filesystem::temp_directory_path() / ("aether_io_st_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string path = (dir / "w.safetensors").string();
  save_safetensors(path, tensors, {{"a", "b"}});
  const auto st = load_safetensors(path);
  EXPECT_EQ(st.metadata.at("a"), "b");
  ASSERT_EQ(st.tensors.size(), 2u);
  EXPECT_EQ(st.tensors[1].second.to_vector<int64_t>(), (std::vector<int64_t>{-4}));
  const std::string missing = (dir / "missing.safetensors").string();
  const std::string msg = error_of([&] { load_safetensors(missing); });
  EXPECT_TRUE(contains(msg, missing + ": cannot read: ")) << msg;
  std::filesystem::remove_all(dir);
}

TEST(Safetensors, DtypeNames) {
  EXPECT_STREQ(safetensors_dtype_name(DType::bfloat16), "BF16");
  EXPECT_EQ(dtype_from_safetensors_name("BOOL"), DType::boolean);
  EXPECT_EQ(dtype_from_safetensors_name("U8"), DType::uint8);
  EXPECT_TRUE(contains(error_of([] { dtype_from_safetensors_name("I8"); }), "\"I8\""));
}

// ---- the writer rejects bad input ------------------------------------------------------------------

TEST(Safetensors, WriterRejectsBadInput) {
  const Tensor t = Tensor::from_vector<float>({1}, {1});
  EXPECT_TRUE(contains(error_of([&] {
                         write_safetensors({{"a", t}, {"a", t}});
                       }),
                       "duplicate tensor name 'a'"));
  EXPECT_TRUE(contains(error_of([&] { write_safetensors({{"", t}}); }), "empty name"));
  EXPECT_TRUE(contains(error_of([&] { write_safetensors({{"__metadata__", t}}); }), "reserves"));
  EXPECT_TRUE(contains(error_of([&] { write_safetensors({{"a", t}, {"x", Tensor()}}); }), "tensor 'x'"));
  EXPECT_TRUE(contains(error_of([&] { write_safetensors({{"bad\xff", t}}); }), "UTF-8"));
  EXPECT_TRUE(contains(error_of([&] { write_safetensors({}, {{"k", "bad\xff"}}); }), "UTF-8"));
  // Nothing reaches the stream when the input is bad.
  std::ostringstream os;
  EXPECT_THROW(write_safetensors(os, {{"a", t}, {"a", t}}), Error);
  EXPECT_TRUE(os.str().empty());
}

// ---- the reader rejects bad files ------------------------------------------------------------------

namespace {
const std::string kF32x2 = R"("dtype":"F32","shape":[2])";  // 8 bytes of data
const std::string kTwoFloats = bytes_of<float>({1, 2});
}  // namespace

TEST(Safetensors, LooksLikeSafetensorsReadsTheHeaderAsTheReaderDoes) {
  // What the writer writes, the spec's example, and a header with spaces before its '{'.
  EXPECT_TRUE(looks_like_safetensors(write_safetensors({{"w", Tensor::ones({3})}})));
  EXPECT_TRUE(looks_like_safetensors(write_safetensors({})));
  EXPECT_TRUE(looks_like_safetensors(
      make_file(R"({"test":{"dtype":"I32","shape":[2,2],"data_offsets":[0,16]}})", std::string(16, '\0'))));
  EXPECT_TRUE(looks_like_safetensors(make_file("  \n{}")));
  // Too short, a zip archive (a checkpoint), a header length past the end or over the limit, a
  // header that is not a JSON object.
  EXPECT_FALSE(looks_like_safetensors(""));
  EXPECT_FALSE(looks_like_safetensors(le64(2).substr(0, 7)));
  EXPECT_FALSE(looks_like_safetensors(std::string("PK\x03\x04", 4) + std::string(60, '\0')));
  EXPECT_FALSE(looks_like_safetensors(le64(100) + "{}"));
  EXPECT_FALSE(looks_like_safetensors(le64(~uint64_t(0)) + "{}"));
  EXPECT_FALSE(looks_like_safetensors(make_file("[1, 2]")));
  EXPECT_FALSE(looks_like_safetensors(make_file("        ")));
  EXPECT_FALSE(looks_like_safetensors(le64(0)));
}

TEST(SafetensorsReject, TooShortAndBadHeaderLength) {
  EXPECT_READ_ERROR(std::string("\x08\0\0", 3), "only 3 bytes");
  EXPECT_READ_ERROR(std::string(), "only 0 bytes");
  // Header length larger than the file.
  EXPECT_READ_ERROR(le64(100) + "{}", "header length 100 runs past the end of the file (10 bytes)");
  // Header length beyond the 100 MB limit (and a huge one that would overflow 8 + N).
  EXPECT_READ_ERROR(le64(100'000'001) + "{}", "exceeds the limit of 100000000");
  EXPECT_READ_ERROR(le64(~uint64_t(0)) + "{}", "exceeds the limit");
  // A truncated header.
  const std::string good = write_safetensors({{"w", Tensor::from_vector<float>({1, 2}, {2})}});
  EXPECT_READ_ERROR(good.substr(0, 20), "runs past the end of the file");
}

TEST(SafetensorsReject, BadJson) {
  EXPECT_READ_ERROR(make_file("{\"a\": {"), "not valid JSON");
  EXPECT_READ_ERROR(make_file("{\"a\": 1,}"), "not valid JSON");
  EXPECT_READ_ERROR(make_file("[1, 2]   "), "not a JSON object");
  EXPECT_READ_ERROR(make_file("        "), "not a JSON object");
  EXPECT_READ_ERROR(make_file(std::string("{}\0\0\0\0\0\0", 8)), "NUL byte at offset 10");
  EXPECT_READ_ERROR(make_file("{\"a\xff\": 1}"), "not valid JSON");  // bad UTF-8
  EXPECT_READ_ERROR(make_file("{\"__metadata__\": [1]}"), "\"__metadata__\" is not a JSON object");
  EXPECT_READ_ERROR(make_file("{\"__metadata__\": {\"k\": 1}}"), "value of 'k' is not a string");
  EXPECT_READ_ERROR(make_file("{\"w\": 5}"), "tensor 'w'", "not a JSON object");
  EXPECT_READ_ERROR(make_file("{\"w\": {\"shape\": [2], \"data_offsets\": [0, 8]}}", kTwoFloats),
                    "tensor 'w'", "no \"dtype\"");
  EXPECT_READ_ERROR(make_file("{\"w\": {\"dtype\": \"F32\", \"data_offsets\": [0, 8]}}", kTwoFloats),
                    "no \"shape\"");
  EXPECT_READ_ERROR(make_file("{\"w\": {" + kF32x2 + "}}", kTwoFloats), "no \"data_offsets\"");
  // The same name twice.
  EXPECT_READ_ERROR(make_file("{\"w\": {" + kF32x2 + ",\"data_offsets\":[0,8]}, \"w\": {" + kF32x2 +
                                  ",\"data_offsets\":[8,16]}}",
                              kTwoFloats + kTwoFloats),
                    "names tensor 'w' more than once");
}

TEST(SafetensorsReject, BadDtypeAndShape) {
  auto file = [](const std::string& dtype, const std::string& shape, const std::string& offsets,
                 const std::string& data) {
    return make_file(
        "{\"w\":{\"dtype\":\"" + dtype + "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}}",
        data);
  };
  EXPECT_READ_ERROR(file("Q4", "[2]", "[0,8]", kTwoFloats), "tensor 'w'",
                    "unknown or unsupported dtype \"Q4\"");
  EXPECT_READ_ERROR(file("I8", "[8]", "[0,8]", kTwoFloats), "unsupported dtype \"I8\"", "F32, F16, BF16");
  EXPECT_READ_ERROR(file("f32", "[2]", "[0,8]", kTwoFloats), "\"f32\"");
  EXPECT_READ_ERROR(file("F32", "[-2]", "[0,8]", kTwoFloats), "tensor 'w'", "non-negative integers");
  EXPECT_READ_ERROR(file("F32", "[2.0]", "[0,8]", kTwoFloats), "non-negative integers");
  EXPECT_READ_ERROR(file("F32", "2", "[0,8]", kTwoFloats), "\"shape\" is not an array");
  EXPECT_READ_ERROR(file("F32", "[1,1,1,1,1,1,1,1,2]", "[0,8]", kTwoFloats), "9 dims");
  EXPECT_READ_ERROR(file("U8", "[4294967296,4294967296]", "[0,8]", kTwoFloats), "overflow");
  EXPECT_READ_ERROR(file("F64", "[4611686018427387904]", "[0,8]", kTwoFloats), "overflow");
  EXPECT_READ_ERROR(file("F32", "[2]", "[0]", kTwoFloats), "must be [begin, end]");
  EXPECT_READ_ERROR(file("F32", "[2]", "[0,-8]", kTwoFloats), "must be [begin, end]");
  EXPECT_READ_ERROR(file("F32", "[2]", "[8,0]", kTwoFloats), "end before they begin");
  // BOOL bytes must be 0 or 1.
  EXPECT_READ_ERROR(file("BOOL", "[3]", "[0,3]", std::string("\x01\x02\x00", 3)),
                    "element 1 has byte value 2");
}

TEST(SafetensorsReject, BadOffsets) {
  const std::string a = "\"a\":{" + kF32x2 + ",\"data_offsets\":";
  const std::string b = "\"b\":{" + kF32x2 + ",\"data_offsets\":";
  const std::string four = kTwoFloats + kTwoFloats;
  // Out of range: the data buffer is shorter than the offsets claim.
  EXPECT_READ_ERROR(make_file("{" + a + "[0,8]}," + b + "[8,16]}}", kTwoFloats), "tensor 'b'",
                    "run past the end of the data buffer (8 bytes)", "truncated");
  // Overlap.
  EXPECT_READ_ERROR(make_file("{" + a + "[0,8]}," + b + "[4,12]}}", four.substr(0, 12)), "tensor 'b'",
                    "overlap tensor 'a'");
  EXPECT_READ_ERROR(make_file("{" + a + "[0,8]}," + b + "[0,8]}}", kTwoFloats), "overlap");
  // Holes: at the start, between tensors, and after the last one.
  EXPECT_READ_ERROR(make_file("{" + a + "[4,12]}}", four.substr(0, 12)), "tensor 'a'", "leave a hole",
                    "bytes [0, 4)");
  EXPECT_READ_ERROR(make_file("{" + a + "[0,8]}," + b + "[12,20]}}", four + "xxxx"), "tensor 'b'", "hole");
  EXPECT_READ_ERROR(make_file("{" + a + "[0,8]}}", four), "8 bytes after the last tensor");
  EXPECT_READ_ERROR(make_file("{}", "x"), "1 bytes after the last tensor");
  // Size mismatch: 2 F32 need 8 bytes.
  EXPECT_READ_ERROR(make_file("{" + a + "[0,12]}}", four.substr(0, 12)), "tensor 'a'", "hold 12 bytes",
                    "shape (2,) of F32 needs 8");
  EXPECT_READ_ERROR(make_file("{" + a + "[0,4]}}", four.substr(0, 4)), "hold 4 bytes");
}

TEST(SafetensorsReject, TruncatedData) {
  const NamedTensors tensors = {{"w", Tensor::from_vector<float>({1, 2, 3}, {3})},
                                {"v", Tensor::from_vector<double>({4, 5}, {2})}};
  const std::string good = write_safetensors(tensors);
  ASSERT_NO_THROW(read_safetensors(good));
  for (size_t cut : {size_t(1), size_t(8), size_t(15), size_t(16), size_t(20)}) {
    SCOPED_TRACE(cut);
    EXPECT_READ_ERROR(good.substr(0, good.size() - cut), "truncated");
  }
  // Extra bytes at the end are rejected too.
  EXPECT_READ_ERROR(good + "junk", "4 bytes after the last tensor");
}
