// Matmul on the CPU with oneDNN. The naive loop, the oracle
// this is tested against, is in reference_matmul.cpp.
#include <atomic>
#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <tuple>

#include "kernels.h"
#include "onednn.h"

namespace aether::cpu {

namespace {
std::optional<dnnl::memory::data_type> dnnl_type(DType t) {
  switch (t) {
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
}  // namespace

bool matmul_onednn(DType dtype, const void* a, const void* b, void* c, int64_t B, int64_t M, int64_t K,
                   int64_t N) {
  note_onednn_call();
  const auto dt = dnnl_type(dtype);
  if (!dt) return false;
  using tag = dnnl::memory::format_tag;
  // Primitives are created once per (dtype, shape) and cached.
  static std::mutex mu;
  static std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t>, dnnl::matmul> cache;
  const dnnl::memory::desc ad({B, M, K}, *dt, tag::abc), bd({B, K, N}, *dt, tag::abc),
      cd({B, M, N}, *dt, tag::abc);
  dnnl::matmul prim;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_tuple(int(dtype), B, M, K, N);
    auto it = cache.find(key);
    if (it == cache.end()) {
      try {
        dnnl::matmul::primitive_desc pd(onednn_engine(), ad, bd, cd);
        it = cache.emplace(key, dnnl::matmul(pd)).first;
      } catch (const dnnl::error&) {
        return false;  // e.g. bf16 on a CPU without AVX-512: the caller runs the naive loop
      }
    }
    prim = it->second;
  }
  dnnl::stream s(onednn_engine());
  dnnl::memory am(ad, onednn_engine(), const_cast<void*>(a)), bm(bd, onednn_engine(), const_cast<void*>(b)),
      cm(cd, onednn_engine(), c);
  prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  s.wait();
  return true;
}

}  // namespace aether::cpu
