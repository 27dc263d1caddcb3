// The on-disk PTX cache of generated CUDA kernels (see ptx_cache.h), in the directory of the host
// compiler's cache (codegen/disk_cache.h: the same rules).
#if AETHER_HAS_CUDA
#include "backend/cuda/ptx_cache.h"

#include <nvrtc.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

#include "aether/core/error.h"
#include "codegen/disk_cache.h"
#include "codegen/nvrtc_compile.h"
#include "backend/cuda/lazy_libs.h"

namespace aether::cuda {
namespace {

// The cache directory ("" when none is usable: then PTX is only kept in memory).
const std::string& cache_dir() {
  static const std::string dir = codegen::disk::choose_cache_dir("PTX");
  return dir;
}

}  // namespace

std::string ptx_for(const std::string& source, const std::string& arch, bool* from_disk) {
  *from_disk = false;
  int major = 0, minor = 0;
  AE_LAZY(nvrtcVersion)(&major, &minor);
  // The options are nvrtc_compile's (codegen/nvrtc_compile.cpp): keep this line in step with them.
  const std::string key = detail::cat("aether-ptx-cache-v1\nnvrtc ", major, ".", minor, "\n", arch,
                                      " --std=c++17 --fmad=false\n", source);
  const std::string& dir = cache_dir();
  using codegen::disk::read_file;
  using codegen::disk::write_file;
  const std::string base = dir.empty() ? "" : dir + "/" + codegen::disk::hex16(codegen::disk::fnv1a(key));
  if (!base.empty() && read_file(base + ".ptxkey") == key) {
    std::string ptx = read_file(base + ".ptx");
    if (!ptx.empty()) {
      *from_disk = true;
      return ptx;
    }
  }
  std::string out;
  if (!codegen::nvrtc_compile(source, arch, &out)) {
    if (!base.empty()) write_file(base + ".failed.cu", source);
    throw Error(detail::cat("cuda: NVRTC could not compile a generated kernel for ", arch,
                            base.empty() ? "" : " (source kept in " + base + ".failed.cu)", ":\n",
                            out.substr(0, 4000)));
  }
  if (!base.empty()) {  // publish atomically: the PTX first, then the key that vouches for it
    const std::string tmp =
        detail::cat(base, ".", getpid(), ".", std::hash<std::thread::id>()(std::this_thread::get_id()));
    if (write_file(tmp + ".ptx", out) && std::rename((tmp + ".ptx").c_str(), (base + ".ptx").c_str()) == 0 &&
        write_file(tmp + ".ptxkey", key))
      std::rename((tmp + ".ptxkey").c_str(), (base + ".ptxkey").c_str());
    std::remove((tmp + ".ptx").c_str());
    std::remove((tmp + ".ptxkey").c_str());
  }
  return out;
}

}  // namespace aether::cuda
#endif  // AETHER_HAS_CUDA
