// src/nn/config_json.h - (internal) module configs as nlohmann::json inside the library. The public
// API (aether/nn/module.h) passes them as JSON text, so no third-party type is in a public header.
#pragma once

#include <nlohmann/json.hpp>

#include "aether/nn/module.h"

namespace aether::nn {

// m.config() parsed (a module written outside the library may return malformed text: an
// aether::Error names the module type).
nlohmann::json child_config(const Module& m);
// module_from_config of parsed JSON (the checkpoint loader reads the architecture this way).
ModulePtr module_from_json(const nlohmann::json& config);

}  // namespace aether::nn
