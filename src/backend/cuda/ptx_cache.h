// Internal: PTX for generated CUDA kernels, compiled by NVRTC and cached on disk like the CPU
// kernels (codegen/compiler.h): the same directory (AETHER_CACHE_DIR, else
// $XDG_CACHE_HOME/aether/kernels, else ~/.cache/aether/kernels; created 0700, used only when owned by
// this user and not writable by others, else a private temporary directory), files <hash>.ptx with
// <hash>.ptxkey holding the full key (NVRTC version, arch, options, source): a PTX file is used only
// when its key matches exactly.
#pragma once

#include <string>

namespace aether::cuda {

// PTX of `source` for `arch` ("compute_90"); *from_disk says whether it came from the cache. Throws
// aether::Error with NVRTC's log when the source does not compile.
std::string ptx_for(const std::string& source, const std::string& arch, bool* from_disk);

}  // namespace aether::cuda
