// codegen/render.h - renderers from the kernel IR to source a device compiler accepts.
//
// Both share one instruction -> C expression table (codegen/snippets.h) and differ in loop structure.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "codegen/ir.h"

namespace aether::codegen {

// C++ with OpenMP for the host compiler. The source defines
//   extern "C" long long aether_kernel_scratch(void);          // bytes of scratch it needs
//   extern "C" void aether_kernel(void** bufs, void* scratch,   // bufs in ir::Kernel::bufs order
//                                 const double* fp, const unsigned long long* ip);  // fparams, iparams
// and includes no headers (it compiles in a few tens of milliseconds).
std::string render_cpp(const ir::Kernel& k);

// How to run a kernel rendered by render_cuda: its entry points, launched in this order on one
// stream, each <<<grid, block>>> (launches over nothing are left out), and the device scratch memory
// all of them receive (reduction partials and results; no zeroing needed).
struct CudaLaunch {
  std::string entry;  // "aether_reduce", "aether_combine" or "aether_kernel"
  int64_t grid = 0;
  int block = 0;
};
struct CudaPlan {
  std::vector<CudaLaunch> launches;
  int64_t scratch_bytes = 0;
};

// CUDA C for NVRTC (no headers; compile with --fmad=false). Every entry point is
//   extern "C" __global__ void <entry>(T0* p0, ..., const Tk* pk,  // bufs in ir::Kernel::bufs order
//                                      double fp0, ..., u64 ip0, ..., void* scratch)
// with all arguments by value (cuLaunchKernel kernelParams): the buffers' device pointers (outputs
// writable), then ir::Kernel::fparams and iparams, then the scratch pointer. An elementwise kernel
// has one entry point, aether_kernel; a reduce kernel aether_reduce (per-block partials), then
// aether_combine when an output's points are split over several blocks (combined in a fixed order:
// deterministic, no atomics), then aether_kernel (the epilogue). See render_cuda.cpp.
std::string render_cuda(const ir::Kernel& k);
std::string render_cuda(const ir::Kernel& k, CudaPlan* plan);

// The renderer a device's runtime compiles (DeviceRuntime::target), and what it gives: the source and,
// for CUDA, how to launch it.
enum class Target { cpp, cuda };
struct Rendered {
  std::string name;    // ir::Kernel::name
  std::string source;  // what the device's compiler takes
  CudaPlan plan;       // Target::cuda only
};
Rendered render(Target target, const ir::Kernel& k);

}  // namespace aether::codegen
