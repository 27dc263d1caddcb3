// Internal: cuDNN, cuBLASLt, NVRTC and NCCL are loaded on first use (dlopen), not linked.
//
// Linked, they cost every aether process - the CLI on a machine without a GPU, each of the ~1000 test
// processes - about 0.25 s and 250 MB of resident memory at start-up (the dynamic loader relocates
// these very large libraries), although only a GPU run or an NVRTC compile uses them. A call site
// writes AE_LAZY(cudnnCreate)(&handle): the function's type comes from the library's header
// (decltype, unevaluated: no link dependency), its address from dlsym on first use, cached in a
// function-local static. A missing library or symbol throws aether::Error naming both.
#pragma once

namespace aether::cuda::lazy {

// The address of `name` from the library that provides the prefix of `name` ("cudnn", "cublasLt",
// "nvrtc", "nccl"); throws aether::Error when the library or the symbol cannot be loaded.
void* symbol(const char* name);

}  // namespace aether::cuda::lazy

#define AE_LAZY(fn)                                                                           \
  ([]() -> decltype(&fn) {                                                                    \
    static const auto p = reinterpret_cast<decltype(&fn)>(::aether::cuda::lazy::symbol(#fn)); \
    return p;                                                                                 \
  }())
