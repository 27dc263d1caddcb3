// Loads cuDNN, cuBLASLt and NVRTC with dlopen on first use (see lazy_libs.h).
#include "backend/cuda/lazy_libs.h"

#include <dlfcn.h>
#include <glob.h>

#include <cstring>
#include <mutex>
#include <span>
#include <string>
#include <vector>

#include "aether/core/error.h"

namespace aether::cuda::lazy {
namespace {

struct Lib {
  Lib(const char* p, const char* soname, const char* dir, const char* companions = nullptr)
      : prefix(p), names{soname, std::string(dir) + "/" + soname}, dir(dir), companions(companions) {}
  const char* prefix;
  std::vector<std::string> names;  // tried in order: soname (the loader's search path), then the build's copy
  std::string dir;
  // A glob (in `dir`) of the libraries it opens itself by soname (NVRTC: libnvrtc-builtins.so.X.Y),
  // loaded first when the library comes from `dir`, which the loader's path may not name.
  const char* companions;
  void* handle = nullptr;
  std::string error;
  std::once_flag once;
};

std::span<Lib> libs() {
  static Lib l[] = {
      {"cublasLt", AETHER_CUBLASLT_SONAME, AETHER_CUBLASLT_LIBDIR},
      {"cudnn", AETHER_CUDNN_SONAME, AETHER_CUDNN_LIBDIR},
      {"nvrtc", AETHER_NVRTC_SONAME, AETHER_NVRTC_LIBDIR, "libnvrtc-builtins.so.*"},
#ifdef AETHER_NCCL_SONAME
      {"nccl", AETHER_NCCL_SONAME, AETHER_NCCL_LIBDIR},
#endif
  };
  return l;
}

// Loads the libraries matching `pattern` (never unloaded), so that a later dlopen of their soname
// finds them loaded; names that do not load are left to that dlopen's own error.
void preload(const std::string& pattern) {
  glob_t g{};
  if (glob(pattern.c_str(), 0, nullptr, &g) == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) (void)dlopen(g.gl_pathv[i], RTLD_NOW | RTLD_GLOBAL);
  globfree(&g);
}

}  // namespace

void* symbol(const char* name) {
  Lib* lib = nullptr;
  for (Lib& l : libs())  // "cublasLt" before a shorter prefix could match
    if (!lib && std::strncmp(name, l.prefix, std::strlen(l.prefix)) == 0) lib = &l;
  if (!lib) throw Error(detail::cat("cuda: no library is known to provide ", name), ErrorKind::runtime);
  std::call_once(lib->once, [&] {
    for (const std::string& n : lib->names) {
      if (n != lib->names[0] && lib->companions != nullptr) preload(lib->dir + "/" + lib->companions);
      lib->handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib->handle) return;
      const char* e = dlerror();
      lib->error += detail::cat(lib->error.empty() ? "" : "; ", e ? e : n.c_str());
    }
  });
  if (!lib->handle)
    throw Error(detail::cat("cuda: cannot load ", lib->names[0], " (needed for ", name, "): ", lib->error),
                ErrorKind::runtime);
  void* p = dlsym(lib->handle, name);
  if (!p) throw Error(detail::cat("cuda: ", lib->names[0], " has no symbol ", name), ErrorKind::runtime);
  return p;
}

}  // namespace aether::cuda::lazy
