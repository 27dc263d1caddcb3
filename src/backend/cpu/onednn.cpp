// The process's one oneDNN CPU engine, created under the ISA cap of AETHER_CPU_ISA, the count of
// calls into oneDNN, and aether's dtypes as oneDNN's.
#include "onednn.h"

#include <atomic>
#include <cstdio>

#include "core/config.h"

namespace aether::cpu {

namespace {
std::atomic<int64_t> g_onednn_calls{0};

// AETHER_CPU_ISA -> oneDNN's cap. oneDNN takes it only before its first primitive: the engine below
// is that point, so every primitive aether creates runs under it. "avx512" allows AVX-512 with VNNI
// and BF16 (Zen4: avx512_core_bf16), not AMX or AVX-512 FP16.
void cap_onednn_isa() {
  const int cap = config().cpu_isa.load();
  if (cap == kCpuIsaNative) return;  // oneDNN's own choice (or DNNL_MAX_CPU_ISA / ONEDNN_MAX_CPU_ISA)
  const dnnl::cpu_isa isa = cap == kCpuIsaAvx2 ? dnnl::cpu_isa::avx2 : dnnl::cpu_isa::avx512_core_bf16;
  try {
    dnnl::set_max_cpu_isa(isa);
  } catch (const dnnl::error& e) {
    std::fprintf(stderr, "aether: AETHER_CPU_ISA=%s: oneDNN did not take the cap (%s); it runs uncapped\n",
                 cpu_isa_name(cap), e.what());
  }
}
}  // namespace

void note_onednn_call() { ++g_onednn_calls; }
int64_t onednn_calls() { return g_onednn_calls.load(); }

dnnl::engine& onednn_engine() {
  static dnnl::engine* eng = [] {
    cap_onednn_isa();
    return new dnnl::engine(dnnl::engine::kind::cpu, 0);
  }();
  return *eng;
}

std::optional<dnnl::memory::data_type> onednn_type(DType dtype) {
  switch (dtype) {
    case DType::float32: return dnnl::memory::data_type::f32;
    case DType::bfloat16: return dnnl::memory::data_type::bf16;
    case DType::float16:
    case DType::float64:
    case DType::int32:
    case DType::int64:
    case DType::uint8:
    case DType::boolean: return std::nullopt;
  }
  return std::nullopt;
}

std::string onednn_isa() {
  onednn_engine();
  switch (dnnl::get_effective_cpu_isa()) {
    case dnnl::cpu_isa::sse41: return "sse41";
    case dnnl::cpu_isa::avx: return "avx";
    case dnnl::cpu_isa::avx2: return "avx2";
    case dnnl::cpu_isa::avx2_vnni: return "avx2_vnni";
    case dnnl::cpu_isa::avx2_vnni_2: return "avx2_vnni_2";
    case dnnl::cpu_isa::avx512_core: return "avx512_core";
    case dnnl::cpu_isa::avx512_core_vnni: return "avx512_core_vnni";
    case dnnl::cpu_isa::avx512_core_bf16: return "avx512_core_bf16";
    case dnnl::cpu_isa::avx512_core_fp16: return "avx512_core_fp16";
    case dnnl::cpu_isa::avx512_core_amx: return "avx512_core_amx";
    case dnnl::cpu_isa::avx512_core_amx_fp16: return "avx512_core_amx_fp16";
    default: return "other";
  }
}

}  // namespace aether::cpu
