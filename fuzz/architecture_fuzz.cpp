// fuzz/architecture_fuzz.cpp - libFuzzer target: the input as JSON text, read two ways.
//
// 1. As an architecture: nn::module_from_config on the text (which parses it with its nesting
//    limit) and, when aether::parse_json reads it as an object with one, on its "architecture"
//    member.
// 2. As a checkpoint's manifest.json: the input is stored as manifest.json in an in-memory zip next
//    to two empty safetensors members, written to a per-process scratch file and given to
//    Model::load (which reads it the way every .aether file is read: load_checkpoint's manifest
//    checks, then architecture, config, training state).
// Text that parse_json rejects (with an aether::Error) still goes to Model::load in step 2.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "aether/backend/backend.h"
#include "aether/io/safetensors.h"
#include "aether/model/model.h"
#include "aether/nn/module.h"
#include "fuzz_util.h"
#include "io/json.h"
#include "io/zip_archive.h"  // internal: zipio::write_zip (writing only; the reader under test is libaether's)

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  aether::set_fusion(false);  // the reference backend: no kernels generated and compiled at run time
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);

  // 1. module_from_config on the text (it parses it), and on its "architecture" member.
  aether::fuzz::expect_ok_or_error([&] { aether::nn::module_from_config(std::string(text)); });
  nlohmann::json doc;
  bool parsed = false;
  aether::fuzz::expect_ok_or_error([&] {
    doc = aether::parse_json(text, "fuzz.json");
    parsed = true;
  });
  if (parsed && doc.is_object() && doc.contains("architecture"))
    aether::fuzz::expect_ok_or_error([&] { aether::nn::module_from_config(doc["architecture"].dump()); });

  // 2. The text as the manifest.json of a checkpoint, through Model::load.
  static const std::string empty_safetensors = aether::write_safetensors({});
  std::string archive;
  try {
    archive = aether::zipio::write_zip({{"manifest.json", text, false},
                                        {"model.safetensors", empty_safetensors, false},
                                        {"optimizer.safetensors", empty_safetensors, false}},
                                       "fuzz");
  } catch (const aether::Error& e) {
    aether::fuzz::finding(std::string("the harness cannot build its zip: ") + e.what());
  }
  const std::string& path =
      aether::fuzz::write_scratch(reinterpret_cast<const uint8_t*>(archive.data()), archive.size());
  aether::fuzz::expect_ok_or_error([&] { aether::Model::load(path); });
  return 0;
}
