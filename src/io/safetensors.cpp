// src/io/safetensors.cpp - safetensors writer and validating reader (format: aether/io/safetensors.h).
#include "aether/io/safetensors.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <set>
#include <sstream>

#include "aether/core/error.h"
#include "aether/io/file.h"
#include "io/json.h"

namespace aether {

// Tensor bytes are copied verbatim between memory and file; the file is little-endian.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using ojson = nlohmann::ordered_json;

std::optional<DType> lookup_dtype(const std::string& name) {
  for (int i = 0; i < kNumDTypes; ++i)
    if (name == safetensors_dtype_name(DType(i))) return DType(i);
  return std::nullopt;
}

std::string supported_dtype_list() {
  std::string s;
  for (int i = 0; i < kNumDTypes; ++i) s += std::string(i ? ", " : "") + safetensors_dtype_name(DType(i));
  return s;
}

// Validates the tensors and builds the padded header. sizes[i] = byte size of tensors[i].
std::string make_header(const NamedTensors& tensors, const SafetensorsMetadata& metadata,
                        std::vector<uint64_t>& sizes) {
  ojson header = ojson::object();
  if (!metadata.empty()) {
    ojson md = ojson::object();
    for (const auto& [key, value] : metadata) md[key] = value;
    header["__metadata__"] = std::move(md);
  }
  std::set<std::string_view> seen;
  uint64_t offset = 0;
  sizes.clear();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    AETHER_CHECK(!name.empty(), "write_safetensors", "tensor #", i, " has an empty name");
    AETHER_CHECK(name != "__metadata__", "write_safetensors", "tensor #", i,
                 " is named \"__metadata__\", which the format reserves");
    AETHER_CHECK(seen.insert(name).second, "write_safetensors", "duplicate tensor name '", name, "'");
    AETHER_CHECK(t.defined(), "write_safetensors", "tensor '", name, "' is an empty Tensor handle");
    const uint64_t nbytes = uint64_t(t.numel()) * uint64_t(dtype_size(t.dtype()));
    ojson entry = ojson::object();
    entry["dtype"] = safetensors_dtype_name(t.dtype());
    entry["shape"] = t.shape();
    entry["data_offsets"] = ojson::array({offset, offset + nbytes});
    header[name] = std::move(entry);
    sizes.push_back(nbytes);
    offset += nbytes;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception& e) {
    throw Error(
        detail::cat("write_safetensors: tensor names and metadata must be valid UTF-8 (", e.what(), ")"));
  }
  // Pad with spaces so the data buffer starts 8-byte aligned (8 + N is a multiple of 8).
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

// Writes the whole file through sink(const char*, size_t).
template <typename Sink>
void serialize(const NamedTensors& tensors, const SafetensorsMetadata& metadata, Sink&& sink) {
  std::vector<uint64_t> sizes;
  const std::string header = make_header(tensors, metadata, sizes);
  char len[8];
  const uint64_t n = header.size();
  std::memcpy(len, &n, 8);
  sink(len, 8);
  sink(header.data(), header.size());
  std::vector<char> buf;
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (sizes[i] == 0) continue;
    buf.resize(size_t(sizes[i]));
    const Tensor& t = tensors[i].second;
    t.copy_to(buf.data(), t.dtype());  // realizes; any view comes out dense and row-major
    sink(buf.data(), buf.size());
  }
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t nbytes;
  uint64_t begin, end;
};

// A JSON value that is a non-negative integer fitting int64 (nlohmann parses those as unsigned).
std::optional<uint64_t> as_index(const ojson& v) {
  if (!v.is_number_unsigned()) return std::nullopt;
  const uint64_t u = v.get<uint64_t>();
  if (u > uint64_t(std::numeric_limits<int64_t>::max())) return std::nullopt;
  return u;
}

Entry parse_entry(const std::string& src, const std::string& key, const ojson& v) {
  const std::string name = text_excerpt(key);  // for messages
  AETHER_CHECK_RUNTIME(v.is_object(), src, "tensor '", name,
                       "': header entry is not a JSON object: ", json_excerpt(v));
  Entry e{key, DType::float32, {}, 0, 0, 0};
  const auto dt = v.find("dtype");
  AETHER_CHECK_RUNTIME(dt != v.end(), src, "tensor '", name, "': header entry has no \"dtype\"");
  AETHER_CHECK_RUNTIME(dt->is_string(), src, "tensor '", name,
                       "': \"dtype\" is not a string: ", json_excerpt(*dt));
  const auto dtype = lookup_dtype(dt->get<std::string>());
  AETHER_CHECK_RUNTIME(dtype.has_value(), src, "tensor '", name, "': unknown or unsupported dtype ",
                       json_excerpt(*dt), " (aether reads ", supported_dtype_list(), ")");
  e.dtype = *dtype;

  const auto sh = v.find("shape");
  AETHER_CHECK_RUNTIME(sh != v.end(), src, "tensor '", name, "': header entry has no \"shape\"");
  AETHER_CHECK_RUNTIME(sh->is_array(), src, "tensor '", name,
                       "': \"shape\" is not an array: ", json_excerpt(*sh));
  AETHER_CHECK_RUNTIME(sh->size() <= size_t(kMaxDims), src, "tensor '", name, "': shape ", json_excerpt(*sh),
                       " has ", sh->size(), " dims; aether supports at most ", kMaxDims);
  // numel * size, like the reference's checked multiplication, and also the product of the
  // non-zero dims (times size): a tensor with a zero dim holds no data, but its strides are
  // products of the other dims. Every running product must fit int64. A valid file's tensors fit
  // in the file, far below that.
  constexpr uint64_t kLimit = uint64_t(std::numeric_limits<int64_t>::max());
  uint64_t numel = 1, extent = 1;  // numel <= extent
  for (const auto& d : *sh) {
    const auto dim = as_index(d);
    AETHER_CHECK_RUNTIME(dim.has_value(), src, "tensor '", name, "': shape ", json_excerpt(*sh),
                         " must hold non-negative integers");
    AETHER_CHECK_RUNTIME(*dim == 0 || extent <= kLimit / *dim, src, "tensor '", name, "': shape ",
                         json_excerpt(*sh), " has too many elements (overflow)");
    if (*dim != 0) extent *= *dim;
    numel *= *dim;
    e.shape.push_back(int64_t(*dim));
  }
  const uint64_t size = uint64_t(dtype_size(e.dtype));
  AETHER_CHECK_RUNTIME(extent <= kLimit / size, src, "tensor '", name, "': shape ", json_excerpt(*sh), " of ",
                       safetensors_dtype_name(e.dtype), " has too many bytes (overflow)");
  e.nbytes = numel * size;

  const auto off = v.find("data_offsets");
  AETHER_CHECK_RUNTIME(off != v.end(), src, "tensor '", name, "': header entry has no \"data_offsets\"");
  const bool pair = off->is_array() && off->size() == 2;
  const auto begin = pair ? as_index((*off)[0]) : std::nullopt;
  const auto end = pair ? as_index((*off)[1]) : std::nullopt;
  AETHER_CHECK_RUNTIME(begin && end, src, "tensor '", name,
                       "': \"data_offsets\" must be [begin, end] with non-negative ", "integers, got ",
                       json_excerpt(*off));
  AETHER_CHECK_RUNTIME(*begin <= *end, src, "tensor '", name, "': data_offsets [", *begin, ", ", *end,
                       "] end before they begin");
  e.begin = *begin;
  e.end = *end;
  return e;
}

}  // namespace

const char* safetensors_dtype_name(DType t) {
  switch (t) {
    case DType::float32: return "F32";
    case DType::float16: return "F16";
    case DType::bfloat16: return "BF16";
    case DType::float64: return "F64";
    case DType::int32: return "I32";
    case DType::int64: return "I64";
    case DType::uint8: return "U8";
    case DType::boolean: return "BOOL";
  }
  return "?";
}

DType dtype_from_safetensors_name(const std::string& name) {
  const auto t = lookup_dtype(name);
  AETHER_CHECK_RUNTIME(t.has_value(), "dtype_from_safetensors_name", "unknown or unsupported dtype \"", name,
                       "\" (aether reads ", supported_dtype_list(), ")");
  return *t;
}

void write_safetensors(std::ostream& os, const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  serialize(tensors, metadata, [&](const char* p, size_t n) {
    os.write(p, std::streamsize(n));
    AETHER_CHECK_RUNTIME(os.good(), "write_safetensors", "the output stream failed after writing ", n,
                         " bytes");
  });
}

std::string write_safetensors(const NamedTensors& tensors, const SafetensorsMetadata& metadata) {
  std::string out;
  serialize(tensors, metadata, [&](const char* p, size_t n) { out.append(p, n); });
  return out;
}

bool looks_like_safetensors(std::string_view bytes) {
  if (bytes.size() < 8) return false;
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  if (n > kSafetensorsMaxHeaderBytes || n > bytes.size() - 8) return false;
  const std::string_view header = bytes.substr(8, size_t(n));
  const size_t first = header.find_first_not_of(" \t\r\n");
  return first != std::string_view::npos && header[first] == '{';
}

SafetensorsContents read_safetensors(std::string_view bytes, const std::string& src) {
  AETHER_CHECK_RUNTIME(bytes.size() >= 8, src, "not a safetensors file: only ", bytes.size(),
                       " bytes, fewer than the 8-byte header length");
  AETHER_CHECK_RUNTIME(bytes.substr(0, 4) != std::string_view("PK\x03\x04", 4), src,
                       "not a safetensors file: it is a zip archive (an aether checkpoint, as Model.save "
                       "writes? Model.load reads those whole)");
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), 8);
  AETHER_CHECK_RUNTIME(n <= kSafetensorsMaxHeaderBytes, src, "header length ", n, " exceeds the limit of ",
                       kSafetensorsMaxHeaderBytes, " bytes (corrupt, or not a safetensors file)");
  AETHER_CHECK_RUNTIME(n <= bytes.size() - 8, src, "header length ", n, " runs past the end of the file (",
                       bytes.size(), " bytes): truncated, or not a safetensors file");
  const std::string_view header = bytes.substr(8, size_t(n));
  const size_t first = header.find_first_not_of(" \t\r\n");
  AETHER_CHECK_RUNTIME(first != std::string_view::npos && header[first] == '{', src,
                       "header is not a JSON object (it must start with '{')");
  // nlohmann's parser stops at a NUL byte; no valid header has one (padding is spaces).
  AETHER_CHECK_RUNTIME(header.find('\0') == std::string_view::npos, src,
                       "header is not valid JSON: it contains a NUL byte at offset ", 8 + header.find('\0'));

  // Parse keeping the file's key order (the tie-break between zero-size tensors) and rejecting
  // duplicate tensor names, which a plain JSON object would silently merge.
  std::set<std::string> keys;
  std::string duplicate;
  const ojson j = parse_ordered_json(header, src + ": header", [&](const std::string& key) {
    if (!keys.insert(key).second && duplicate.empty()) duplicate = key;
  });
  AETHER_CHECK_RUNTIME(j.is_object(), src, "header is not a JSON object");
  AETHER_CHECK_RUNTIME(duplicate.empty(), src, "header names tensor '", text_excerpt(duplicate),
                       "' more than once");

  SafetensorsContents out;
  std::vector<Entry> entries;
  for (const auto& [key, value] : j.items()) {
    if (key == "__metadata__") {
      AETHER_CHECK_RUNTIME(value.is_object(), src,
                           "\"__metadata__\" is not a JSON object: ", json_excerpt(value));
      for (const auto& [mk, mv] : value.items()) {
        AETHER_CHECK_RUNTIME(mv.is_string(), src, "\"__metadata__\" value of '", text_excerpt(mk),
                             "' is not a string: ", json_excerpt(mv));
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    entries.push_back(parse_entry(src, key, value));
  }

  // The tensors, in offset order, must tile the data buffer exactly.
  std::stable_sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  const std::string_view data = bytes.substr(8 + size_t(n));
  uint64_t pos = 0;
  const Entry* prev = nullptr;
  for (const Entry& e : entries) {
    AETHER_CHECK_RUNTIME(e.begin <= pos, src, "tensor '", text_excerpt(e.name), "': data_offsets [", e.begin,
                         ", ", e.end, "] leave a hole: bytes [", pos, ", ", e.begin,
                         ") of the data buffer belong to no tensor");
    AETHER_CHECK_RUNTIME(e.begin == pos, src, "tensor '", text_excerpt(e.name), "': data_offsets [", e.begin,
                         ", ", e.end, "] overlap tensor '", prev ? text_excerpt(prev->name) : "",
                         "' (which ends at ", pos, ")");
    AETHER_CHECK_RUNTIME(e.end - e.begin == e.nbytes, src, "tensor '", text_excerpt(e.name),
                         "': data_offsets [", e.begin, ", ", e.end, "] hold ", e.end - e.begin,
                         " bytes but shape ", to_string(e.shape), " of ", safetensors_dtype_name(e.dtype),
                         " needs ", e.nbytes);
    AETHER_CHECK_RUNTIME(e.end <= data.size(), src, "tensor '", text_excerpt(e.name), "': data_offsets [",
                         e.begin, ", ", e.end, "] run past the end of the data buffer (", data.size(),
                         " bytes): the file is truncated");
    pos = e.end;
    prev = &e;
  }
  AETHER_CHECK_RUNTIME(pos == data.size(), src, "the data buffer has ", data.size() - pos,
                       " bytes after the last tensor that belong to no tensor");

  out.tensors.reserve(entries.size());
  for (const Entry& e : entries) {
    const char* p = data.data() + e.begin;
    if (e.dtype == DType::boolean) {
      for (uint64_t i = 0; i < e.nbytes; ++i)
        AETHER_CHECK_RUNTIME(uint8_t(p[i]) <= 1, src, "tensor '", text_excerpt(e.name), "': BOOL element ", i,
                             " has byte value ", int(uint8_t(p[i])), " (must be 0 or 1)");
    }
    out.tensors.emplace_back(e.name, Tensor::from_blob(p, e.shape, e.dtype));
  }
  return out;
}

void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const SafetensorsMetadata& metadata) {
  write_file_atomic(path, write_safetensors(tensors, metadata));
}

SafetensorsContents load_safetensors(const std::string& path) {
  return read_safetensors(read_file(path), path);
}

}  // namespace aether
