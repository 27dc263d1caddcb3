// The CPU backend's answers to the public queries of aether/backend/backend.h.
#include "aether/backend/backend.h"
#include "backend/cpu/kernels.h"
#include "codegen/compiler.h"
#include "core/config.h"

namespace aether {

int64_t conv_weight_reorders() { return cpu::conv_weight_reorders(); }

CpuIsa cpu_isa() {
  check_config("cpu_isa");
  return {cpu_isa_name(config().cpu_isa), codegen::kernel_isa(), cpu::onednn_isa()};
}

}  // namespace aether
