// fuzz/checkpoint_fuzz.cpp - libFuzzer target: Model::load on the input as an .aether checkpoint.
//
// Model::load takes a path, so the input goes to a per-process scratch file. It runs the whole
// chain for a file: zip (libzip), manifest.json (nlohmann::json), both safetensors members, the
// manifest against the tensors (load_checkpoint), then the architecture (module_from_config),
// configuration, training state and weights against the architecture.
#include <cstdint>

#include "aether/backend/backend.h"
#include "aether/model/model.h"
#include "fuzz_util.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  aether::set_fusion(false);  // the reference backend: no kernels generated and compiled at run time
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string& path = aether::fuzz::write_scratch(data, size);
  aether::fuzz::expect_ok_or_error([&] { aether::Model::load(path); });
  return 0;
}
