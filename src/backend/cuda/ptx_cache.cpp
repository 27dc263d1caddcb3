// The on-disk PTX cache of generated CUDA kernels (see ptx_cache.h), in the directory of the host
// compiler's cache and with its helpers (codegen/disk_cache.h: the same rules).
#if AETHER_HAS_CUDA
#include "backend/cuda/ptx_cache.h"

#include <nvrtc.h>

#include <cstdio>

#include "aether/core/error.h"
#include "backend/cuda/lazy_libs.h"
#include "backend/cuda/nvrtc_compile.h"
#include "codegen/disk_cache.h"

namespace aether::cuda {
namespace {

namespace disk = codegen::disk;

// The cache directory ("" when none is usable: then PTX is only kept in memory).
const std::string& cache_dir() {
  static const std::string dir = disk::choose_cache_dir("PTX");
  return dir;
}

}  // namespace

std::string ptx_for(const std::string& source, const std::string& arch, bool* from_disk) {
  *from_disk = false;
  int major = 0, minor = 0;
  AE_LAZY(nvrtcVersion)(&major, &minor);
  // The options are nvrtc_compile's (backend/cuda/nvrtc_compile.cpp): keep this line in step with them.
  // (v2: the key file starts with the PTX's SHA-256.)
  const std::string key = detail::cat("aether-ptx-cache-v2\nnvrtc ", major, ".", minor, "\n", arch,
                                      " --std=c++17 --fmad=false\n", source);
  const std::string& dir = cache_dir();
  const std::string base = dir.empty() ? "" : dir + "/" + disk::hex16(disk::fnv1a(key));
  std::string ptx, why;
  // The verified bytes are what is returned: the file is not read again.
  if (!base.empty() && disk::verify_object(base, key, &why, disk::kPtxFiles, &ptx) && !ptx.empty()) {
    *from_disk = true;
    return ptx;
  }
  if (!codegen::nvrtc_compile(source, arch, &ptx)) {
    if (!base.empty()) disk::write_file(base + ".failed.cu", source);
    throw Error(detail::cat("cuda: NVRTC could not compile a generated kernel for ", arch,
                            base.empty() ? "" : " (source kept in " + base + ".failed.cu)", ":\n",
                            ptx.substr(0, 4000)),
                ErrorKind::runtime);
  }
  if (!base.empty()) {
    // Published like a compiled object: the PTX (0600, hashed) first, then the key that vouches for
    // it. Should that fail, the PTX is still used, from memory.
    const std::string tmp = disk::temp_base(base) + disk::kPtxFiles.object;
    if (!disk::write_file(tmp, ptx) || !disk::publish_object(tmp, base, key, &why, disk::kPtxFiles))
      std::remove(tmp.c_str());
  }
  return ptx;
}

}  // namespace aether::cuda
#endif  // AETHER_HAS_CUDA
