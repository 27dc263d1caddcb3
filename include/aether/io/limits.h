// aether/io/limits.h - the limits on what aether reads from files (checkpoints, safetensors, data
// sets), in one place. A file past a limit is rejected with an aether::Error naming the file, what
// was too big and the limit, before the memory or the stack it would cost is spent. Every limit is
// far above what aether writes or what the data sets it reads need (docs/checkpoint-format.md,
// "Limits").
#pragma once

#include <cstddef>
#include <cstdint>

namespace aether {

// JSON (manifest.json, safetensors headers): arrays and objects nest at most this deep (the
// top-level object is level 1). Checked while parsing, so a deeper document is never built;
// keeps every recursive walk over parsed JSON (printing, comparing, rebuilding modules) shallow.
constexpr int kMaxJsonDepth = 64;

// module_from_config: modules (Sequential, Residual) nest at most this deep.
constexpr int kMaxModuleNesting = 64;

// module_from_config: a model built from one config holds at most this many values in all, its
// layers' parameters and buffers together (a Linear's in x out + out, a Conv2d's out x kh x kw x
// in/groups + out, a BatchNorm's 4 x channels): 2^27 float32 values are 512 MiB, far above any
// model aether trains (airbench94: 2 million; ResNet-50 would be 26 million). The whole config is
// counted before any layer allocates, so a config (or a checkpoint's manifest) cannot claim more
// memory than that (initialising a layer takes about twice its size for a moment).
constexpr int64_t kMaxConfigValues = int64_t(1) << 27;
// Every size in such a config (features, channels, kernel, stride, padding, dilation, groups) lies
// in [0, kMaxConfigDim].
constexpr int64_t kMaxConfigDim = int64_t(1) << 24;

// Error messages quote at most this many characters of a value read from a file (a JSON value, a
// tensor name), so that a hostile file cannot produce a huge message.
constexpr size_t kMaxQuotedChars = 80;

// .aether checkpoints (zip archives): manifest.json inflates to at most this many bytes (a manifest
// lists each tensor on a line of about 80 bytes: this is room for some 200,000 tensors; the parsed
// JSON may take several times the text's size).
constexpr uint64_t kMaxManifestBytes = uint64_t(16) << 20;  // 16 MiB
// Any other member (the safetensors data) that is compressed inflates to at most this many times
// its compressed size, plus 1 MiB. aether stores those members uncompressed, so its own files are
// never near this; it bounds the memory a small archive can claim.
constexpr uint64_t kMaxZipExpansion = 64;
// (safetensors headers: at most kSafetensorsMaxHeaderBytes, aether/io/safetensors.h; every
// tensor's data must lie inside the file.)
// Every zip member's size is checked against its limit before it is inflated, and reading stops at
// the size the member declares (a member that inflates to more is rejected as damaged).

// Data files (IDX, CIFAR-10 batches), after decompression: at most this many bytes of data in one
// file (Fashion-MNIST's largest file holds 47 MB, a CIFAR-10 batch 30 MB).
constexpr uint64_t kMaxDataFileBytes = uint64_t(1) << 30;  // 1 GiB

}  // namespace aether
