// Internal: PTX for generated CUDA kernels, compiled by NVRTC and cached on disk like the CPU
// kernels (codegen/compiler.h), with the same helpers and rules (codegen/disk_cache.h): the same
// directory (AETHER_CACHE_DIR, else $XDG_CACHE_HOME/aether/kernels, else ~/.cache/aether/kernels;
// created 0700, used only when it is this user's and neither it nor a directory above it can be
// written by others, else a private temporary directory), temporary files of dead processes removed
// when it is opened. An entry is <hash>.ptx with <hash>.ptxkey beside it, both 0600 whatever the
// umask: the key file holds the SHA-256 of the PTX, then the full key (NVRTC version, target
// architecture, options, source). Cached PTX is used only when both files are this user's regular
// files (not symlinks) that nobody else can write, the key matches exactly and the PTX's SHA-256 is
// the recorded one; otherwise it is compiled again and the entry overwritten.
#pragma once

#include <string>

namespace aether::cuda {

// PTX of `source` for `arch` ("compute_90"); *from_disk says whether it came from the cache. Throws
// aether::Error with NVRTC's log when the source does not compile.
std::string ptx_for(const std::string& source, const std::string& arch, bool* from_disk);

}  // namespace aether::cuda
