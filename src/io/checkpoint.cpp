// src/io/checkpoint.cpp - save_checkpoint / load_checkpoint: a zip of manifest.json and two or three
// safetensors files, written atomically and validated on load (format: io/checkpoint.h).
#include "io/checkpoint.h"

#include <map>
#include <string_view>
#include <utility>
#include <vector>

#include "aether/core/error.h"
#include "aether/io/file.h"
#include "aether/io/limits.h"
#include "io/json.h"
#include "zip_archive.h"

namespace aether {

namespace {

using json = nlohmann::json;

constexpr const char* kManifestMember = "manifest.json";
constexpr const char* kModelMember = "model.safetensors";
constexpr const char* kOptimizerMember = "optimizer.safetensors";
constexpr const char* kTrainingMember = "training.safetensors";  // only when Checkpoint::training has tensors
constexpr const char* kReservedKeys[] = {"format", "format_version", "tensors"};

// Indents every line but the first by `n` spaces.
std::string indent_rest(const std::string& s, size_t n) {
  std::string out;
  for (char ch : s) {
    out += ch;
    if (ch == '\n') out.append(n, ' ');
  }
  return out;
}

// A JSON list with one {"name": ..., "dtype": "F32", "shape": [...]} per line, in list order.
std::string tensor_list(const NamedTensors& tensors, const std::string& pad) {
  if (tensors.empty()) return "[]";
  std::string out = "[\n";
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    nlohmann::ordered_json e = {
        {"name", name}, {"dtype", safetensors_dtype_name(t.dtype())}, {"shape", t.shape()}};
    out += pad + "  " + e.dump() + (i + 1 < tensors.size() ? ",\n" : "\n");
  }
  return out + pad + "]";
}

// manifest.json, laid out for people: the format marker first, the caller's members, then one
// line per tensor.
std::string make_manifest(const Checkpoint& ckpt) {
  const json& extra = ckpt.manifest_extra;
  AETHER_CHECK(extra.is_object() || extra.is_null(), "save_checkpoint",
               "manifest_extra must be a JSON object, got ", extra.type_name());
  for (const char* key : kReservedKeys)
    AETHER_CHECK(!extra.contains(key), "save_checkpoint",
                 "manifest_extra must not contain the reserved key \"", key, "\"");
  try {
    std::string text = "{\n";
    text += "  \"format\": " + json(kCheckpointFormatName).dump() + ",\n";
    text += "  \"format_version\": " + std::to_string(kCheckpointFormatVersion) + ",\n";
    if (extra.is_object())
      for (const auto& [key, value] : extra.items())
        text += "  " + json(key).dump() + ": " + indent_rest(value.dump(2), 2) + ",\n";
    text += "  \"tensors\": {\n";
    text += "    \"model\": " + tensor_list(ckpt.model, "    ") + ",\n";
    text += "    \"optimizer\": " + tensor_list(ckpt.optimizer, "    ");
    if (!ckpt.training.empty()) text += ",\n    \"training\": " + tensor_list(ckpt.training, "    ");
    text += "\n";
    text += "  }\n}\n";
    return text;
  } catch (const json::exception& e) {
    throw Error(detail::cat("save_checkpoint: manifest_extra strings must be valid UTF-8 (", e.what(), ")"),
                ErrorKind::runtime);
  }
}

// Checks manifest.json and returns it parsed.
json parse_manifest(const zipio::Reader& zip, const std::string& path) {
  AETHER_CHECK_RUNTIME(zip.has(kManifestMember), path, "not an aether checkpoint (the zip archive has no ",
                       kManifestMember, ")");
  const std::string text = zip.read(kManifestMember, kMaxManifestBytes);
  json m = parse_json(text, detail::cat(path, ": ", kManifestMember));
  AETHER_CHECK_RUNTIME(m.is_object(), path, kManifestMember, " is not a JSON object");
  const auto format = m.find("format");
  AETHER_CHECK_RUNTIME(format != m.end() && *format == kCheckpointFormatName, path,
                       "not an aether checkpoint (", kManifestMember, " has format ",
                       format != m.end() ? json_excerpt(*format) : "<none>", ", expected \"",
                       kCheckpointFormatName, "\")");
  const auto version = m.find("format_version");
  AETHER_CHECK_RUNTIME(version != m.end() && version->is_number_integer(), path, kManifestMember,
                       " has no integer \"format_version\"");
  const int64_t v = version->get<int64_t>();
  AETHER_CHECK_RUNTIME(v >= 1, path, kManifestMember, " has an invalid format_version ", v);
  AETHER_CHECK_RUNTIME(v <= kCheckpointFormatVersion, path, "checkpoint format version ", v,
                       " is newer than this build of aether reads (", kCheckpointFormatVersion,
                       "); upgrade aether");
  const auto tensors = m.find("tensors");
  AETHER_CHECK_RUNTIME(tensors != m.end() && tensors->is_object(), path, kManifestMember,
                       " has no \"tensors\" object");
  for (const char* group : {"model", "optimizer", "training"}) {
    const auto list = tensors->find(group);
    if (list == tensors->end() && std::string(group) == "training") continue;  // optional
    AETHER_CHECK_RUNTIME(list != tensors->end() && list->is_array(), path, kManifestMember,
                         " has no \"tensors\".\"", group, "\" list");
    for (const json& e : *list) {
      const bool ok = e.is_object() && e.contains("name") && e["name"].is_string() && e.contains("dtype") &&
                      e["dtype"].is_string() && e.contains("shape") && e["shape"].is_array();
      AETHER_CHECK_RUNTIME(ok, path, kManifestMember, ": bad \"", group, "\" tensor entry ", json_excerpt(e),
                           " (expected {\"name\": string, \"dtype\": string, \"shape\": [...]})");
    }
  }
  return m;
}

// Reads one safetensors member and checks it against the manifest's list; returns the tensors in
// the manifest's order.
NamedTensors load_group(const zipio::Reader& zip, const std::string& path, const char* member,
                        const json& listed) {
  AETHER_CHECK_RUNTIME(zip.has(member), path, "damaged checkpoint: the zip archive has no ", member);
  const std::string bytes = zip.read(member, UINT64_MAX, kMaxZipExpansion);
  SafetensorsContents contents = read_safetensors(bytes, path + ":" + member);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < contents.tensors.size(); ++i) index[contents.tensors[i].first] = i;

  const std::string where = detail::cat(path, ": ", kManifestMember, " disagrees with ", member);
  NamedTensors out;
  for (const json& e : listed) {
    const std::string name = e["name"].get<std::string>();
    const auto it = index.find(name);
    AETHER_CHECK_RUNTIME(it != index.end(), where, "it lists tensor '", text_excerpt(name), "', which ",
                         member, " lacks");
    const Tensor& t = contents.tensors[it->second].second;
    AETHER_CHECK_RUNTIME(e["dtype"] == safetensors_dtype_name(t.dtype()), where, "tensor '",
                         text_excerpt(name), "' is ", json_excerpt(e["dtype"]), " in the manifest but ",
                         safetensors_dtype_name(t.dtype()), " in ", member);
    AETHER_CHECK_RUNTIME(e["shape"] == json(t.shape()), where, "tensor '", text_excerpt(name), "' has shape ",
                         json_excerpt(e["shape"]), " in the manifest but ", json(t.shape()).dump(), " in ",
                         member);
    out.emplace_back(name, t);
  }
  AETHER_CHECK_RUNTIME(out.size() == contents.tensors.size(), where, "the manifest lists ", listed.size(),
                       " tensors but ", member, " holds ", contents.tensors.size());
  return out;
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  // Everything is serialised in memory first, so bad input fails before the file system is touched.
  const std::string model = write_safetensors(ckpt.model);
  const std::string optimizer = write_safetensors(ckpt.optimizer);
  const std::string training = ckpt.training.empty() ? std::string() : write_safetensors(ckpt.training);
  const std::string manifest = make_manifest(ckpt);
  std::vector<zipio::Member> members = {
      {kManifestMember, manifest, true}, {kModelMember, model, false}, {kOptimizerMember, optimizer, false}};
  if (!ckpt.training.empty()) members.push_back({kTrainingMember, training, false});
  const std::string archive = zipio::write_zip(members, path);
  write_file_atomic(path, archive);
}

namespace {
// save_weights' safetensors file (an 8-byte header length, then the JSON header) where a checkpoint
// goes: say so, instead of "not a zip file".
void check_not_weights_file(std::string_view bytes, const std::string& path) {
  AETHER_CHECK_RUNTIME(!looks_like_safetensors(bytes), path,
                       "not an aether checkpoint: it is a safetensors file (weights alone, as save_weights "
                       "writes them); load_weights reads it into a model of the same layers");
}
}  // namespace

Checkpoint load_checkpoint(const std::string& path) {
  const std::string bytes = read_file(path);
  check_not_weights_file(bytes, path);
  const zipio::Reader zip(bytes, path, "an aether checkpoint");
  json manifest = parse_manifest(zip, path);
  Checkpoint ckpt;
  ckpt.model = load_group(zip, path, kModelMember, manifest["tensors"]["model"]);
  ckpt.optimizer = load_group(zip, path, kOptimizerMember, manifest["tensors"]["optimizer"]);
  if (manifest["tensors"].contains("training"))
    ckpt.training = load_group(zip, path, kTrainingMember, manifest["tensors"]["training"]);
  for (const char* key : kReservedKeys) manifest.erase(key);
  ckpt.manifest_extra = std::move(manifest);
  return ckpt;
}

json read_checkpoint_manifest(const std::string& path) {
  const std::string bytes = read_file(path);
  check_not_weights_file(bytes, path);
  const zipio::Reader zip(bytes, path, "an aether checkpoint");
  return parse_manifest(zip, path);
}

}  // namespace aether
