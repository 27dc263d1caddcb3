// codegen/render.h - renderers from the kernel IR to source a device compiler accepts.
#pragma once

#include <string>

#include "aether/codegen/ir.h"

namespace aether::codegen {

// C++ with OpenMP for the host compiler. The source defines
//   extern "C" long long aether_kernel_scratch(void);          // bytes of scratch it needs
//   extern "C" void aether_kernel(void** bufs, void* scratch);  // bufs in ir::Kernel::bufs order
// and includes no headers (it compiles in a few tens of milliseconds).
std::string render_cpp(const ir::Kernel& k);

}  // namespace aether::codegen
