// src/io/checkpoint.h - (internal) .aether checkpoints: model weights, optimizer state and training state.
//
// A .aether file is a zip archive (docs/checkpoint-format.md has the full description):
//   manifest.json          format marker and version, the caller's JSON (architecture, training
//                          state: epoch, step, RNG state, schedule position...), and the name,
//                          dtype and shape of every tensor of both groups
//   model.safetensors      weights and buffers (aether/io/safetensors.h), in the caller's order
//   optimizer.safetensors  optimizer state
//   training.safetensors   other tensors of the training state (early stopping's best epoch);
//                          present only when there are some
// Saving is atomic (aether/io/file.h): a failure at any point leaves the previous file intact.
// Loading checks everything and throws aether::Error "<path>: <what was wrong>" for a file that is
// not a zip, lacks a member, is truncated or corrupt, is too new, or whose manifest disagrees with
// the tensors stored, and for one past the limits of aether/io/limits.h (manifest.json over 16 MiB
// or nested deeper than 64 levels, a member inflating far more than deflate or its declared size
// allows), checked before the memory is spent.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "aether/io/safetensors.h"

namespace aether {

constexpr int kCheckpointFormatVersion = 1;                         // written; loading accepts 1..this
constexpr const char* kCheckpointFormatName = "aether-checkpoint";  // manifest "format"

struct Checkpoint {
  // A JSON object whose members go to the top level of manifest.json next to the reserved ones
  // ("format", "format_version", "tensors", which it must not contain). Conventionally
  // "architecture" (the model's description) and "training_state" (epoch, step, RNG state,
  // schedule position, ...). Loading gives back exactly what was saved.
  nlohmann::json manifest_extra = nlohmann::json::object();
  NamedTensors model;      // parameters and buffers, named by module path ("0.conv.weight")
  NamedTensors optimizer;  // optimizer state ("0.conv.weight.exp_avg", ...)
  NamedTensors training;   // other training state ("early_stopping.0.conv.weight"); often empty
};

// Writes `ckpt` to `path` atomically. Throws aether::Error on bad input (see write_safetensors;
// manifest_extra not an object or using a reserved key) or an I/O failure.
void save_checkpoint(const std::string& path, const Checkpoint& ckpt);

// Reads and validates a checkpoint; the tensors are realized CPU tensors.
Checkpoint load_checkpoint(const std::string& path);

// Only the validated manifest.json of a checkpoint (cheap: no tensor data is decoded).
nlohmann::json read_checkpoint_manifest(const std::string& path);

}  // namespace aether
