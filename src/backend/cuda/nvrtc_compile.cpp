// NVRTC front end for generated CUDA kernels (see nvrtc_compile.h). Part of the CUDA backend:
// compiled into libaether only when AETHER_CUDA is ON (CMakeLists.txt).
#include "backend/cuda/nvrtc_compile.h"

#include <nvrtc.h>

#include "backend/cuda/lazy_libs.h"

namespace aether::codegen {

bool nvrtc_compile(const std::string& src, const std::string& arch, std::string* log_or_ptx) {
  std::string out;
  auto failed = [&](const char* call, nvrtcResult r) {
    out = std::string(call) + ": " + AE_LAZY(nvrtcGetErrorString)(r) + "\n" + out;
    if (log_or_ptx) *log_or_ptx = out;
    return false;
  };
  nvrtcProgram prog = nullptr;
  nvrtcResult r = AE_LAZY(nvrtcCreateProgram)(&prog, src.c_str(), "aether_kernel.cu", 0, nullptr, nullptr);
  if (r != NVRTC_SUCCESS) return failed("nvrtcCreateProgram", r);
  const std::string arch_opt = "--gpu-architecture=" + arch;
  const char* opts[] = {arch_opt.c_str(), "--std=c++17", "--fmad=false"};
  const nvrtcResult compiled = AE_LAZY(nvrtcCompileProgram)(prog, int(sizeof opts / sizeof opts[0]), opts);
  size_t n = 0;
  if (AE_LAZY(nvrtcGetProgramLogSize)(prog, &n) == NVRTC_SUCCESS && n > 1) {
    std::string log(n, '\0');
    if (AE_LAZY(nvrtcGetProgramLog)(prog, log.data()) == NVRTC_SUCCESS) out = log.c_str();
  }
  if (compiled != NVRTC_SUCCESS) {
    AE_LAZY(nvrtcDestroyProgram)(&prog);
    return failed("nvrtcCompileProgram", compiled);
  }
  r = AE_LAZY(nvrtcGetPTXSize)(prog, &n);
  if (r == NVRTC_SUCCESS) {
    out.assign(n, '\0');
    r = AE_LAZY(nvrtcGetPTX)(prog, out.data());
    out.resize(n > 0 ? n - 1 : 0);  // without the terminating NUL
  }
  AE_LAZY(nvrtcDestroyProgram)(&prog);
  if (r != NVRTC_SUCCESS) return failed("nvrtcGetPTX", r);
  if (log_or_ptx) *log_or_ptx = std::move(out);
  return true;
}

}  // namespace aether::codegen
