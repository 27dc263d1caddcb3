// Matmul on the CPU with oneDNN. The naive loop, the oracle
// this is tested against, is in reference_matmul.cpp.
#include <atomic>
#include <dnnl.hpp>
#include <map>
#include <mutex>
#include <optional>
#include <tuple>

#include "kernels.h"
#include "onednn.h"
#include "widen.h"

namespace aether::cpu {

namespace {
std::atomic<int64_t> g_widened_calls{0};
bool matmul_native(DType dtype, const void* a, const void* b, void* c, int64_t B, int64_t M, int64_t K,
                   int64_t N, bool ta, bool tb) {
  const auto dt = onednn_type(dtype);
  if (!dt) return false;
  using tag = dnnl::memory::format_tag;
  // Primitives are created once per (dtype, shape) and cached.
  static std::mutex mu;
  // (empty: oneDNN refused it here, e.g. bf16 on a CPU without AVX-512; not asked again)
  static std::map<std::tuple<int, int64_t, int64_t, int64_t, int64_t, bool, bool>,
                  std::optional<dnnl::matmul>>
      cache;
  // acb: each batch's matrix stored transposed (a (B,K,M), b (B,N,K) in memory)
  const dnnl::memory::desc ad({B, M, K}, *dt, ta ? tag::acb : tag::abc),
      bd({B, K, N}, *dt, tb ? tag::acb : tag::abc), cd({B, M, N}, *dt, tag::abc);
  dnnl::matmul prim;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto key = std::make_tuple(int(dtype), B, M, K, N, ta, tb);
    auto it = cache.find(key);
    if (it == cache.end()) {
      std::optional<dnnl::matmul> made;
      try {
        made = dnnl::matmul(dnnl::matmul::primitive_desc(onednn_engine(), ad, bd, cd));
      } catch (const dnnl::error&) {
      }
      it = cache.emplace(key, std::move(made)).first;
    }
    if (!it->second) return false;
    prim = *it->second;
  }
  dnnl::stream s(onednn_engine());
  dnnl::memory am(ad, onednn_engine(), const_cast<void*>(a)), bm(bd, onednn_engine(), const_cast<void*>(b)),
      cm(cd, onednn_engine(), c);
  prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  s.wait();
  return true;
}
}  // namespace

bool matmul_onednn(DType dtype, const void* a, const void* b, void* c, int64_t B, int64_t M, int64_t K,
                   int64_t N, bool ta, bool tb) {
  note_onednn_call();
  if (matmul_native(dtype, a, b, c, B, M, K, N, ta, tb)) return true;
  if (!is_16bit_float(dtype)) return false;
  // No 16-bit matmul on this CPU: float32 on widened copies, rounded back (widen.h).
  const BufferPtr fa = widen(dtype, a, B * M * K), fb = widen(dtype, b, B * K * N);
  const auto fc = std::make_shared<Buffer>(Device::cpu(), DType::float32, B * M * N, /*zero_fill=*/false);
  if (!matmul_native(DType::float32, fa->data(), fb->data(), fc->data(), B, M, K, N, ta, tb)) return false;
  narrow(dtype, static_cast<const float*>(fc->data()), c, B * M * N);
  ++g_widened_calls;
  return true;
}
int64_t matmul_widened_calls() { return g_widened_calls.load(); }

}  // namespace aether::cpu
