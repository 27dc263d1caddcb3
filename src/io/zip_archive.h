// src/io/zip_archive.h - (internal) in-memory zip archives with libzip, for .aether checkpoints.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

typedef struct zip zip_t;

namespace aether::zipio {

struct Member {
  std::string name;
  std::string_view data;  // must stay alive during write_zip
  bool compress;          // deflate; otherwise stored (safetensors data barely compresses)
};

// The bytes of a zip archive holding `members`, in that order. Throws aether::Error naming
// `what` on a libzip failure.
std::string write_zip(const std::vector<Member>& members, const std::string& what);

// A zip archive read from memory (the bytes must outlive the reader). Every failure throws
// aether::Error "<source>: ...": the constructor for bytes that are not a zip archive
// ("<source>: not <kind> (not a zip file)") or a damaged one; read() for a missing, corrupt
// (CRC) or truncated member.
class Reader {
 public:
  Reader(std::string_view bytes, std::string source, std::string kind);
  ~Reader();
  Reader(const Reader&) = delete;
  Reader& operator=(const Reader&) = delete;

  bool has(const std::string& name) const;
  // The member's bytes. Its declared uncompressed size is checked before anything is inflated: at
  // most max_bytes, and for a compressed member at most max_expansion times its compressed size
  // plus 1 MiB (deflate cannot expand more than ~1032 times, so a larger claim is corrupt).
  // Reading stops at the declared size; a member inflating to more is rejected as damaged.
  std::string read(const std::string& name, uint64_t max_bytes = UINT64_MAX,
                   uint64_t max_expansion = kMaxDeflateExpansion) const;
  static constexpr uint64_t kMaxDeflateExpansion = 1100;

 private:
  zip_t* za_ = nullptr;
  std::string source_;
  std::string kind_;
  uint64_t archive_size_;
};

}  // namespace aether::zipio
