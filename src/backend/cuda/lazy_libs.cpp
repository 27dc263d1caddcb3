// Loads cuDNN, cuBLASLt and NVRTC with dlopen on first use (see lazy_libs.h).
#include "backend/cuda/lazy_libs.h"

#include <dlfcn.h>

#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "aether/core/error.h"

namespace aether::cuda::lazy {
namespace {

struct Lib {
  Lib(const char* p, const char* soname, const char* dir)
      : prefix(p), names{soname, std::string(dir) + "/" + soname} {}
  const char* prefix;
  std::vector<std::string> names;  // tried in order: soname (the loader's search path), then the build's copy
  void* handle = nullptr;
  std::string error;
  std::once_flag once;
};

std::span<Lib> libs() {
  static Lib l[] = {
      {"cublasLt", AETHER_CUBLASLT_SONAME, AETHER_CUBLASLT_LIBDIR},
      {"cudnn", AETHER_CUDNN_SONAME, AETHER_CUDNN_LIBDIR},
      {"nvrtc", AETHER_NVRTC_SONAME, AETHER_NVRTC_LIBDIR},
#ifdef AETHER_NCCL_SONAME
      {"nccl", AETHER_NCCL_SONAME, AETHER_NCCL_LIBDIR},
#endif
  };
  return l;
}

}  // namespace

void* symbol(const char* name) {
  Lib* lib = nullptr;
  for (Lib& l : libs())  // "cublasLt" before a shorter prefix could match
    if (!lib && std::strncmp(name, l.prefix, std::strlen(l.prefix)) == 0) lib = &l;
  if (!lib) throw Error(detail::cat("cuda: no library is known to provide ", name));
  std::call_once(lib->once, [&] {
    for (const std::string& n : lib->names) {
      lib->handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib->handle) return;
      const char* e = dlerror();
      lib->error += detail::cat(lib->error.empty() ? "" : "; ", e ? e : n.c_str());
    }
  });
  if (!lib->handle)
    throw Error(detail::cat("cuda: cannot load ", lib->names[0], " (needed for ", name, "): ", lib->error));
  void* p = dlsym(lib->handle, name);
  if (!p) throw Error(detail::cat("cuda: ", lib->names[0], " has no symbol ", name));
  return p;
}

}  // namespace aether::cuda::lazy
