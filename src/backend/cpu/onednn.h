// Internal: the process's one oneDNN CPU engine (created under the AETHER_CPU_ISA cap), the ISA
// oneDNN's kernels use, the count of calls into oneDNN, and aether's dtypes as oneDNN's.
#pragma once

#include <dnnl.hpp>
#include <optional>

#include "aether/core/dtype.h"

namespace aether::cpu {

// Every oneDNN primitive aether creates uses this engine; the first call applies AETHER_CPU_ISA's
// cap (dnnl::set_max_cpu_isa), which oneDNN accepts only before its first primitive.
dnnl::engine& onednn_engine();

// The oneDNN data type of `dtype` where aether's oneDNN calls take it (float32, bfloat16); else
// nullopt, and the caller widens or uses its reference path.
std::optional<dnnl::memory::data_type> onednn_type(DType dtype);

}  // namespace aether::cpu
