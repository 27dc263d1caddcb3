// The matmul oracle: a plain loop over row-major buffers, no library. The reference backend
// (AETHER_FUSE=0) runs it; oneDNN (and cuBLASLt) are tested against it.
//
//   c[b,i,j] = sum over k of a[b,i,k] * b[b,k,j],   a (B,M,K), b (B,K,N), c (B,M,N)
//
// Float types accumulate in double and round once; integer types accumulate in int64 with
// wrap-around (two's complement, no UB) and convert back modulo 2^bits; bool is refused.
// The innermost loop runs over a row of b and of c (j), so every access is contiguous.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels.h"
#include "oracle.h"

namespace aether::cpu {

void matmul_naive(DType dtype, const void* a, const void* b, void* c, int64_t B, int64_t M, int64_t K,
                  int64_t N) {
  dispatch_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    const T* A = static_cast<const T*>(a);   // (B,M,K)
    const T* Bm = static_cast<const T*>(b);  // (B,K,N)
    T* C = static_cast<T*>(c);               // (B,M,N)
    if constexpr (std::is_same_v<T, bool>) {
      throw Error("matmul: bool is not supported");
    } else if constexpr (std::is_integral_v<T>) {
#pragma omp parallel for collapse(2) schedule(static) if (B * M * N * K >= kOracleParallelWork)
      for (int64_t bi = 0; bi < B; ++bi)
        for (int64_t i = 0; i < M; ++i) {
          std::vector<uint64_t> acc(size_t(N), 0);  // c[bi,i,:] (N), wrapping
          for (int64_t k = 0; k < K; ++k) {
            const uint64_t av = uint64_t(int64_t(A[(bi * M + i) * K + k]));
            const T* br = Bm + (bi * K + k) * N;  // b[bi,k,:] (N)
            for (int64_t j = 0; j < N; ++j) acc[size_t(j)] += av * uint64_t(int64_t(br[j]));
          }
          for (int64_t j = 0; j < N; ++j) C[(bi * M + i) * N + j] = T(int64_t(acc[size_t(j)]));
        }
    } else {
      std::vector<double> bd(size_t(B * K * N));  // b as double (B,K,N)
      for (int64_t i = 0; i < B * K * N; ++i) bd[size_t(i)] = to_f64(Bm[i]);
#pragma omp parallel for collapse(2) schedule(static) if (B * M * N * K >= kOracleParallelWork)
      for (int64_t bi = 0; bi < B; ++bi)
        for (int64_t i = 0; i < M; ++i) {
          std::vector<double> acc(size_t(N), 0.0);  // c[bi,i,:] (N)
          for (int64_t k = 0; k < K; ++k) {
            const double av = to_f64(A[(bi * M + i) * K + k]);
            const double* br = &bd[size_t((bi * K + k) * N)];  // b[bi,k,:] (N)
            for (int64_t j = 0; j < N; ++j) acc[size_t(j)] += av * br[j];
          }
          for (int64_t j = 0; j < N; ++j) C[(bi * M + i) * N + j] = from_f64<T>(acc[size_t(j)]);
        }
    }
  });
}

}  // namespace aether::cpu
