// Batched matmul on the GPU through cuBLASLt: a (B,M,K) x b (B,K,N) -> c (B,M,N), all row-major.
//
// cuBLASLt is column-major, and a row-major (R,C) matrix is the column-major (C,R) matrix of its
// transpose, so c = a b is computed as c^T = b^T a^T: a column-major product with m = N, n = M,
// k = K, "A" = b (ld N), "B" = a (ld K), "C" = c (ld N), strided over the batch. No transposes.
//
// Precision: float32 computes in full float32 (CUBLAS_COMPUTE_32F: no TF32 tensor cores, so
// results match the CPU to float32 rounding); float64 in float64; float16 and bfloat16 with float32
// accumulation (CUBLAS_COMPUTE_32F, tensor cores). The plan (descriptors and the heuristic's best
// algorithm) is chosen once per (device, dtype, shape, pointer alignment) and cached; its workspace
// comes from workspace() on the call's stream.
#include <map>
#include <tuple>

#include "backend/cuda/lazy_libs.h"
#include "backend/cuda/library.h"
#include "library_common.h"

namespace aether::cuda {
namespace {

using lib::dname;

constexpr uint64_t kMaxWorkspace = 32ull << 20;  // cuBLAS's recommendation for Hopper

struct Types {
  cudaDataType_t data;
  cublasComputeType_t compute;
  cudaDataType_t scale;  // the type of alpha and beta
};
Types types_of(DType dtype) {
  switch (dtype) {
    case DType::float32: return {CUDA_R_32F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::float64: return {CUDA_R_64F, CUBLAS_COMPUTE_64F, CUDA_R_64F};
    case DType::float16: return {CUDA_R_16F, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::bfloat16: return {CUDA_R_16BF, CUBLAS_COMPUTE_32F, CUDA_R_32F};
    case DType::int32:
    case DType::int64:
    case DType::uint8:
    case DType::boolean: break;
  }
  throw Error("matmul (cuda, cuBLASLt): expected float32, float64, float16 or bfloat16, got " + dname(dtype),
              ErrorKind::type);
}

// The largest power of two (at most 256) dividing the address and every batch stride in bytes:
// the alignment each batch's matrix is guaranteed to have.
uint32_t alignment(const void* p, int64_t stride_bytes, int64_t B) {
  uint64_t bits = uint64_t(reinterpret_cast<uintptr_t>(p)) | 256u;
  if (B > 1) bits |= uint64_t(stride_bytes);
  return uint32_t(bits & (~bits + 1));  // lowest set bit
}

struct Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;  // column-major "A" (= b), "B" (= a), "C"
  cublasLtMatmulAlgo_t algo{};
  size_t workspace = 0;
};

using Key = std::tuple<int, int, int64_t, int64_t, int64_t, int64_t, uint32_t, uint32_t, uint32_t>;

// A column-major (rows, cols) layout with leading dimension `ld`, `batch` matrices `stride` apart.
cublasLtMatrixLayout_t layout(cudaDataType_t t, int64_t rows, int64_t cols, int64_t ld, int64_t batch,
                              int64_t stride, const std::string& ctx) {
  cublasLtMatrixLayout_t l = nullptr;
  AETHER_LIB_CHECK(AE_LAZY(cublasLtMatrixLayoutCreate)(&l, t, uint64_t(rows), uint64_t(cols), ld), ctx);
  const int32_t count = int32_t(batch);
  AETHER_LIB_CHECK(
      AE_LAZY(cublasLtMatrixLayoutSetAttribute)(l, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof count),
      ctx);
  AETHER_LIB_CHECK(AE_LAZY(cublasLtMatrixLayoutSetAttribute)(l, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET,
                                                             &stride, sizeof stride),
                   ctx);
  return l;
}

Plan make_plan(cublasLtHandle_t lt, const Types& t, int64_t B, int64_t M, int64_t K, int64_t N,
               uint32_t align_a, uint32_t align_b, uint32_t align_c, const std::string& ctx) {
  Plan p;
  AETHER_LIB_CHECK(AE_LAZY(cublasLtMatmulDescCreate)(&p.desc, t.compute, t.scale), ctx);
  const cublasOperation_t no = CUBLAS_OP_N;
  AETHER_LIB_CHECK(
      AE_LAZY(cublasLtMatmulDescSetAttribute)(p.desc, CUBLASLT_MATMUL_DESC_TRANSA, &no, sizeof no), ctx);
  AETHER_LIB_CHECK(
      AE_LAZY(cublasLtMatmulDescSetAttribute)(p.desc, CUBLASLT_MATMUL_DESC_TRANSB, &no, sizeof no), ctx);
  p.a = layout(t.data, N, K, N, B, K * N, ctx);  // b (K,N) row-major = (N,K) column-major
  p.b = layout(t.data, K, M, K, B, M * K, ctx);  // a (M,K) row-major = (K,M) column-major
  p.c = layout(t.data, N, M, N, B, M * N, ctx);  // c (M,N) row-major = (N,M) column-major
  cublasLtMatmulPreference_t pref = nullptr;
  AETHER_LIB_CHECK(AE_LAZY(cublasLtMatmulPreferenceCreate)(&pref), ctx);
  auto set_pref = [&](cublasLtMatmulPreferenceAttributes_t attr, const void* v, size_t n) {
    const cublasStatus_t s = AE_LAZY(cublasLtMatmulPreferenceSetAttribute)(pref, attr, v, n);
    if (!lib::ok(s)) {
      AE_LAZY(cublasLtMatmulPreferenceDestroy)(pref);
      lib::fail(s, "cublasLtMatmulPreferenceSetAttribute", ctx);
    }
  };
  set_pref(CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kMaxWorkspace, sizeof kMaxWorkspace);
  // The column-major "A" is the user's b, "B" the user's a.
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_b, sizeof align_b);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_a, sizeof align_a);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c);
  set_pref(CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t s =
      AE_LAZY(cublasLtMatmulAlgoGetHeuristic)(lt, p.desc, p.a, p.b, p.c, p.c, pref, 1, &result, &found);
  AE_LAZY(cublasLtMatmulPreferenceDestroy)(pref);
  if (!lib::ok(s)) lib::fail(s, "cublasLtMatmulAlgoGetHeuristic", ctx);
  if (found < 1 || !lib::ok(result.state))
    throw Error(ctx + ": cublasLtMatmulAlgoGetHeuristic found no algorithm", ErrorKind::runtime);
  p.algo = result.algo;
  p.workspace = result.workspaceSize;
  return p;
}

}  // namespace

void matmul(cudaStream_t stream, DType dtype, const void* a, const void* b, void* c, int64_t B, int64_t M,
            int64_t K, int64_t N) {
  auto ctx = [&] {
    return detail::cat("matmul (cuda): a (", B, ",", M, ",", K, ") x b (", B, ",", K, ",", N, ") ",
                       dname(dtype));
  };
  AETHER_CHECK(B >= 0 && M >= 0 && K >= 0 && N >= 0 && B <= INT32_MAX, ctx(), "bad sizes");
  if (dtype == DType::boolean)
    throw Error(ctx() + ": expected a float or integer dtype, got bool", ErrorKind::type);
  if (B == 0 || M == 0 || N == 0) return;
  const int64_t esize = dtype_size(dtype);
  if (K == 0) {  // an empty sum: zeros
    AETHER_LIB_CHECK(cudaMemsetAsync(c, 0, size_t(B * M * N * esize), stream), ctx());
    return;
  }
  if (is_int(dtype)) {  // cuBLASLt multiplies floats only: the NVRTC kernel, one thread per element of c
    lib::MatmulParams p{B, M, K, N};
    void* args[] = {&a, &b, &c, &p};
    lib::launch(lib::kernel(dtype, lib::Kern::matmul, "matmul (cuda)"), B * M * N, args, stream, ctx());
    return;
  }
  const Types t = types_of(dtype);
  const int device = lib::current_device();
  lib::Handles& h = lib::handles(device);
  const uint32_t al_a = alignment(a, M * K * esize, B), al_b = alignment(b, K * N * esize, B),
                 al_c = alignment(c, M * N * esize, B);
  static std::mutex mu;
  static auto* plans = new std::map<Key, Plan>();  // never destroyed (descriptors outlive teardown)
  Plan p;
  {
    std::lock_guard<std::mutex> lock(mu);
    const Key key{device, int(dtype), B, M, K, N, al_a, al_b, al_c};
    auto it = plans->find(key);
    if (it == plans->end())
      it = plans->emplace(key, make_plan(h.lt, t, B, M, K, N, al_a, al_b, al_c, ctx())).first;
    p = it->second;
  }
  void* ws = p.workspace > 0 ? workspace(stream, p.workspace) : nullptr;
  const float one_f = 1, zero_f = 0;
  const double one_d = 1, zero_d = 0;
  const bool f64 = dtype == DType::float64;
  const void* alpha = f64 ? static_cast<const void*>(&one_d) : &one_f;
  const void* beta = f64 ? static_cast<const void*>(&zero_d) : &zero_f;
  AETHER_LIB_CHECK(AE_LAZY(cublasLtMatmul)(h.lt, p.desc, alpha, b, p.a, a, p.b, beta, c, p.c, c, p.c, &p.algo,
                                           ws, p.workspace, stream),
                   ctx());
}

}  // namespace aether::cuda
