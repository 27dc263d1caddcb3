// backend/cuda/nvrtc_compile.h - compiles the CUDA C that the CUDA renderer writes to PTX with NVRTC.
//
// Built only when the CMake option AETHER_CUDA is ON (then AETHER_HAS_CUDA=1 is defined for the
// targets that link aether_nvrtc); needs the CUDA toolkit's libnvrtc, not a GPU.
#pragma once

#include <string>

namespace aether::codegen {

// Compiles `src` for the virtual architecture `arch` (e.g. "compute_90") with the options generated
// kernels assume (C++17, --fmad=false so float arithmetic rounds as on the CPU). Returns true with
// the PTX in *log_or_ptx, or false with NVRTC's error log (and the failing call) in *log_or_ptx.
bool nvrtc_compile(const std::string& src, const std::string& arch, std::string* log_or_ptx);

}  // namespace aether::codegen
