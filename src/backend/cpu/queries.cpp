// The CPU backend's answers to the public queries of aether/backend/backend.h.
#include "aether/backend/backend.h"
#include "backend/cpu/kernels.h"
#include "codegen/compiler.h"
#include "core/config.h"

namespace aether {

int64_t conv_weight_reorders() { return cpu::conv_weight_reorders(); }

CpuIsa cpu_isa() {
  check_config("cpu_isa");
  // Asked of the library itself: one tiny bfloat16 matmul, and whether it had to widen it.
  const uint16_t one = 0x3f80;  // 1.0 in bfloat16
  uint16_t out = 0;
  const int64_t widened = cpu::matmul_widened_calls();
  const bool native = cpu::matmul_onednn(DType::bfloat16, &one, &one, &out, 1, 1, 1, 1) &&
                      cpu::matmul_widened_calls() == widened;
  return {
      cpu_isa_name(config().cpu_isa), codegen::kernel_isa(), cpu::onednn_isa(),
      native ? "bfloat16 conv and matmul native (oneDNN); float16 in float32 on 16-bit storage"
             : "bfloat16 and float16 conv and matmul in float32 on 16-bit storage (no native bfloat16 here)"};
}

}  // namespace aether
