// fetch/tar.h - TarReader (used by `aether data fetch`; not part of libaether): a small reader for POSIX
// ustar / GNU tar archives.
//
// Reads from a ByteReader, so a .tar.gz or .tar.xz is decompressed on the fly. Every header's
// checksum is validated and sizes are parsed strictly (octal, or GNU base-256); a truncated
// archive, a bad checksum or a missing end-of-archive block throws aether::Error naming the file
// and the offset in the (decompressed) tar stream. GNU long names ('L') are supported; pax
// headers ('x', 'g') are skipped.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "aether/data/byte_reader.h"

namespace aether::data {

struct TarEntry {
  std::string name;     // full member path ("cifar-10-batches-bin/data_batch_1.bin")
  uint64_t size = 0;    // bytes of data
  char type = '0';      // '0' regular file, '5' directory, ... (a '\0' type flag is reported as '0')
  uint64_t offset = 0;  // offset of its header in the tar stream
  bool is_file() const { return type == '0' || type == '7'; }
};

class TarReader {
 public:
  explicit TarReader(ByteReader& in) : in_(in) {}
  // The next member (skipping what is left of the current one), or nullopt at the end of the archive.
  std::optional<TarEntry> next();
  // Reads up to n bytes of the current member's data; returns 0 at its end.
  size_t read(void* dst, size_t n);

 private:
  void skip_rest();
  ByteReader& in_;
  std::string current_;     // name of the current member (for messages)
  uint64_t remaining_ = 0;  // data bytes of the current member not read yet
  uint64_t padding_ = 0;    // zero bytes after its data, up to the next 512-byte block
};

}  // namespace aether::data
