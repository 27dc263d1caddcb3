// aether/io/safetensors.h - reading and writing the safetensors format (Hugging Face).
//
// Layout of a file (https://github.com/huggingface/safetensors, the published spec):
//   bytes [0, 8)        N, unsigned 64-bit little-endian: the header length
//   bytes [8, 8+N)      UTF-8 JSON object, possibly padded with trailing spaces (we pad to a
//                       multiple of 8 so the data starts 8-byte aligned):
//                         {"__metadata__": {"key": "value", ...},            (optional, str->str)
//                          "<tensor name>": {"dtype": "F32", "shape": [2, 3],
//                                            "data_offsets": [begin, end]}, ...}
//   bytes [8+N, end)    the data buffer; offsets are relative to its start. Each tensor's bytes
//                       are row-major (C order), little-endian, end - begin == numel * size; the
//                       tensors tile the buffer exactly, with no holes, overlaps or extra bytes.
// dtype names: F32 F16 BF16 F64 I32 I64 U8 BOOL (bool is one byte, 0 or 1). Other spec dtypes
// (I8, I16, U16, U32, U64, F8_*) have no aether dtype and are rejected when read.
//
// Reading validates everything (header length <= 100,000,000 bytes and within the file, JSON
// nested at most kMaxJsonDepth = 64 levels, dtypes, shapes, every offset, bool bytes) and throws
// aether::Error "<source>: <what was wrong>" naming the tensor; it never reads out of bounds. Writing keeps
// the caller's order: tensors are packed in list order, and reading returns them in offset order, i.e. the
// order written.
#pragma once

#include <cstdint>
#include <iosfwd>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "aether/core/dtype.h"
#include "aether/graph/tensor.h"

namespace aether {

// An ordered list of named tensors: a model's parameters and buffers, an optimizer's state...
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
// The optional "__metadata__" map of a safetensors header.
using SafetensorsMetadata = std::map<std::string, std::string>;

struct SafetensorsContents {
  NamedTensors tensors;  // in file (offset) order; realized CPU tensors
  SafetensorsMetadata metadata;
};

constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;  // as the reference implementation

// "F32", "BF16", ... for each aether dtype.
const char* safetensors_dtype_name(DType t);
// The aether dtype of a safetensors dtype name; throws aether::Error for names aether lacks.
DType dtype_from_safetensors_name(const std::string& name);

// Serialises `tensors` (any device, any view; realized as needed) in list order. Names must be
// unique, non-empty, valid UTF-8 and not "__metadata__"; tensors must be defined. Everything is
// checked before the first byte is written. Throws aether::Error on bad input or a stream failure.
void write_safetensors(std::ostream& os, const NamedTensors& tensors,
                       const SafetensorsMetadata& metadata = {});
std::string write_safetensors(const NamedTensors& tensors, const SafetensorsMetadata& metadata = {});

// Parses a whole safetensors file held in `bytes`. `source_name` (a path, "ckpt.aether:model.safetensors")
// prefixes every error message.
SafetensorsContents read_safetensors(std::string_view bytes, const std::string& source_name = "<memory>");

// Whether `bytes` begin as a safetensors file does: a header length within the file and the
// limit, then a JSON object ('{' after any spaces). For telling a safetensors file from another
// format before reading it; read_safetensors checks everything else.
bool looks_like_safetensors(std::string_view bytes);

// File versions. save_safetensors writes atomically (see aether/io/file.h).
void save_safetensors(const std::string& path, const NamedTensors& tensors,
                      const SafetensorsMetadata& metadata = {});
SafetensorsContents load_safetensors(const std::string& path);

}  // namespace aether
