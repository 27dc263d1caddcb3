// Internal: the process's one oneDNN CPU engine (created under the AETHER_CPU_ISA cap), the ISA
// oneDNN's kernels use, and the count of calls into oneDNN.
#pragma once

#include <dnnl.hpp>

namespace aether::cpu {

// Every oneDNN primitive aether creates uses this engine; the first call applies AETHER_CPU_ISA's
// cap (dnnl::set_max_cpu_isa), which oneDNN accepts only before its first primitive.
dnnl::engine& onednn_engine();

}  // namespace aether::cpu
