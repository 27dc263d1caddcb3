// Matmul on the CPU: the naive loop (oracle) and oneDNN.
#include <dnnl.hpp>

#include <map>
#include <mutex>
#include <tuple>

#include "kernels.h"

namespace aether::cpu {

void matmul_naive(DType dtype, const void* a, const void* b, void* c, int64_t B, int64_t M,
                  int64_t K, int64_t N) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("matmul: bool is not supported");
    } else {
      using Acc = std::conditional_t<std::is_floating_point_v<T> || std::is_class_v<T>,
                                     std::conditional_t<std::is_same_v<T, double>, double, float>,
                                     int64_t>;
      const T* A = static_cast<const T*>(a);  // (B,M,K)
      const T* Bm = static_cast<const T*>(b);  // (B,K,N)
      T* C = static_cast<T*>(c);               // (B,M,N)
#pragma omp parallel for collapse(2) schedule(static)
      for (int64_t bi = 0; bi < B; ++bi)
        for (int64_t i = 0; i < M; ++i)
          for (int64_t j = 0; j < N; ++j) {
            Acc acc = 0;
            for (int64_t k = 0; k < K; ++k)
              acc += Acc(A[(bi * M + i) * K + k]) * Acc(Bm[(bi * K + k) * N + j]);
            C[(bi * M + i) * N + j] = T(acc);
          }
    }
  });
}

namespace {
dnnl::engine& cpu_engine() {
  static dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  return eng;
}
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

bool matmul_onednn(DType dtype, const void* a, const void* b, void* c, int64_t B, int64_t M,
                   int64_t K, int64_t N) {
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
        dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(ad, bd, cd), cpu_engine());
        it = cache.emplace(key, dnnl::matmul(pd)).first;
      } catch (const dnnl::error&) {
        return false;  // e.g. bf16 on a CPU without AVX-512: the caller runs the naive loop
      }
    }
    prim = it->second;
  }
  dnnl::stream s(cpu_engine());
  dnnl::memory am(ad, cpu_engine(), const_cast<void*>(a)), bm(bd, cpu_engine(), const_cast<void*>(b)),
      cm(cd, cpu_engine(), c);
  prim.execute(s, {{DNNL_ARG_SRC, am}, {DNNL_ARG_WEIGHTS, bm}, {DNNL_ARG_DST, cm}});
  s.wait();
  return true;
}

}  // namespace aether::cpu
