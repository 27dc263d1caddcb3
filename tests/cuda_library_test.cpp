// The CUDA library ops (backend/cuda/library_*.cpp: cuBLASLt matmul, cuDNN convolution, the NVRTC
// pooling / direct-convolution / padding kernels) against the CPU's naive kernels
// (backend/cpu/kernels.h), on small random shapes: stride 2, groups (incl. depthwise), dilation,
// asymmetric padding, overlapping pooling windows, ties and count_include_pad, in float32, float64,
// float16 and bfloat16. Device memory comes straight from cudaMalloc (only the library's own scratch
// goes through workspace()).
//
// Without a GPU (no driver, or no device) the GPU tests are skipped with the reason. What needs no
// GPU still runs: the kernels' CUDA C compiles with NVRTC for Hopper (and the oldest architecture
// CUDA 13 supports), the same kernel body compiled on the host (a few stand-in definitions for
// CUDA's built-ins, several blocks and threads emulated) computes the CPU's values, and bad calls
// throw aether::Error naming the op and the dtype before touching a device. Named cuda_library so
// that `ctest -R cuda` selects it.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "aether/core/dtype.h"
#include "aether/core/error.h"
#include "backend/cpu/kernels.h"

#if AETHER_HAS_CUDA
#include <cuda_runtime_api.h>

#include "backend/cuda/library.h"
#include "backend/cuda/library_common.h"
#include "backend/cuda/nvrtc_compile.h"
#include "codegen/compiler.h"
#endif

using namespace aether;

#if !AETHER_HAS_CUDA
TEST(cuda_library, Skipped) { GTEST_SKIP() << "built without CUDA (AETHER_CUDA=OFF)"; }
#else

namespace {

// ---- host buffers of any float dtype ------------------------------------------------------------------
struct HostBuf {
  DType dtype = DType::float32;
  std::vector<uint8_t> bytes;
  int64_t numel() const { return int64_t(bytes.size()) / dtype_size(dtype); }
  double at(int64_t i) const {
    double v = 0;
    cpu::dispatch_float(dtype, "test", [&](auto tag) {
      using T = decltype(tag);
      v = double(float(reinterpret_cast<const T*>(bytes.data())[i]));
      if constexpr (std::is_same_v<T, double>) v = reinterpret_cast<const double*>(bytes.data())[i];
    });
    return v;
  }
};

HostBuf host_buf(DType t, const std::vector<double>& v) {
  HostBuf b{t, std::vector<uint8_t>(v.size() * size_t(dtype_size(t)))};
  cpu::dispatch_float(t, "test", [&](auto tag) {
    using T = decltype(tag);
    T* p = reinterpret_cast<T*>(b.bytes.data());
    for (size_t i = 0; i < v.size(); ++i) {
      if constexpr (std::is_same_v<T, double>)
        p[i] = v[i];
      else
        p[i] = T(float(v[i]));
    }
  });
  return b;
}
HostBuf zeros(DType t, int64_t n) { return host_buf(t, std::vector<double>(size_t(n), 0.0)); }

std::vector<double> uniform(int64_t n, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(gen);
  return v;
}
// Small integers: many ties in a pooling window (the first-maximum rule).
std::vector<double> small_ints(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_int_distribution<int> d(-2, 2);
  std::vector<double> v(static_cast<size_t>(n));
  for (auto& x : v) x = d(gen);
  return v;
}

// |got - want| <= tol * (scale + |want|) everywhere; reports the first few mismatches.
void expect_close(const HostBuf& got, const HostBuf& want, double tol, double scale,
                  const std::string& what) {
  ASSERT_EQ(got.numel(), want.numel()) << what;
  int bad = 0;
  for (int64_t i = 0; i < got.numel(); ++i) {
    const double g = got.at(i), w = want.at(i);
    const bool same_nan = std::isnan(g) && std::isnan(w);
    if (!same_nan && !(std::fabs(g - w) <= tol * (scale + std::fabs(w)))) {
      if (++bad <= 5) ADD_FAILURE() << what << ": element " << i << " is " << g << ", expected " << w;
    }
  }
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.numel() << " elements differ";
}

void expect_error(const std::function<void()>& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "expected aether::Error";
  } catch (const Error& e) {
    for (const auto& p : parts)
      EXPECT_NE(std::string(e.what()).find(p), std::string::npos)
          << "missing \"" << p << "\" in: " << e.what();
  }
}

const std::vector<DType> kFloatTypes = {DType::float32, DType::float64, DType::float16, DType::bfloat16};

// Relative tolerance of a GPU result against the CPU's naive loop in the same dtype. float32:
// cuDNN may pick Winograd or FFT algorithms (exact in exact arithmetic, different roundings).
double tol_of(DType t) {
  switch (t) {
    case DType::float32: return 1e-4;
    case DType::float64: return 1e-10;
    case DType::float16: return 4e-3;
    case DType::bfloat16: return 2e-2;
    case DType::int32:
    case DType::int64:
    case DType::uint8:
    case DType::boolean: break;
  }
  return 0;
}

// ---- geometries ----------------------------------------------------------------------------------------
ConvGeom conv_geom(int64_t N, int64_t H, int64_t W, int64_t C, int64_t O, int64_t KH, int64_t KW,
                   Conv2dArg a) {
  ConvGeom g{N, H, W, C, O, KH, KW, 0, 0, a};
  g.OH = conv_out_size(H, KH, a.stride_h, a.pad_top, a.pad_bottom, a.dil_h);
  g.OW = conv_out_size(W, KW, a.stride_w, a.pad_left, a.pad_right, a.dil_w);
  return g;
}
Conv2dArg conv_arg(int64_t stride, int64_t pt, int64_t pl, int64_t pb, int64_t pr, int64_t dil,
                   int64_t groups) {
  Conv2dArg a;
  a.stride_h = a.stride_w = stride;
  a.pad_top = pt, a.pad_left = pl, a.pad_bottom = pb, a.pad_right = pr;
  a.dil_h = a.dil_w = dil;
  a.groups = groups;
  return a;
}
struct ConvCase {
  const char* name;
  ConvGeom g;
};
std::vector<ConvCase> conv_cases() {
  return {
      {"3x3 same", conv_geom(2, 6, 5, 8, 16, 3, 3, conv_arg(1, 1, 1, 1, 1, 1, 1))},
      {"1x1", conv_geom(3, 4, 4, 16, 8, 1, 1, conv_arg(1, 0, 0, 0, 0, 1, 1))},
      {"stride 2", conv_geom(2, 9, 8, 4, 8, 3, 3, conv_arg(2, 1, 1, 1, 1, 1, 1))},
      {"groups 2", conv_geom(2, 5, 6, 8, 12, 3, 3, conv_arg(1, 1, 1, 1, 1, 1, 2))},
      {"depthwise", conv_geom(2, 7, 7, 8, 8, 3, 3, conv_arg(1, 1, 1, 1, 1, 1, 8))},
      {"dilation 2", conv_geom(1, 9, 9, 4, 8, 3, 3, conv_arg(1, 2, 2, 2, 2, 2, 1))},
      {"asymmetric pad", conv_geom(2, 6, 7, 4, 8, 3, 3, conv_arg(1, 0, 2, 1, 0, 1, 1))},
      {"asymmetric pad stride 2 (TF same)", conv_geom(2, 8, 8, 8, 8, 3, 3, conv_arg(2, 0, 0, 1, 1, 1, 1))},
      {"asymmetric, groups, dilation, 2x4 kernel",
       conv_geom(1, 9, 10, 6, 9, 2, 4, conv_arg(1, 1, 0, 2, 3, 2, 3))},
      {"no padding, odd sizes", conv_geom(3, 7, 5, 3, 5, 3, 2, conv_arg(1, 0, 0, 0, 0, 1, 1))},
  };
}

PoolGeom pool_geom(int64_t N, int64_t H, int64_t W, int64_t C, Pool2dArg a) {
  PoolGeom g{N, H, W, C, 0, 0, a};
  g.OH = conv_out_size(H, a.kernel_h, a.stride_h, a.pad_top, a.pad_bottom, 1);
  g.OW = conv_out_size(W, a.kernel_w, a.stride_w, a.pad_left, a.pad_right, 1);
  return g;
}
Pool2dArg pool_arg(int64_t kh, int64_t kw, int64_t sh, int64_t sw, int64_t pt, int64_t pl, int64_t pb,
                   int64_t pr, bool include_pad) {
  Pool2dArg a;
  a.kernel_h = kh, a.kernel_w = kw, a.stride_h = sh, a.stride_w = sw;
  a.pad_top = pt, a.pad_left = pl, a.pad_bottom = pb, a.pad_right = pr;
  a.count_include_pad = include_pad;
  return a;
}
struct PoolCase {
  const char* name;
  PoolGeom g;
};
std::vector<PoolCase> pool_cases() {
  return {
      {"2x2 stride 2", pool_geom(2, 8, 6, 5, pool_arg(2, 2, 2, 2, 0, 0, 0, 0, false))},
      {"3x3 stride 2 overlapping, pad 1", pool_geom(2, 7, 9, 3, pool_arg(3, 3, 2, 2, 1, 1, 1, 1, false))},
      {"3x3 stride 1 pad 1, count_include_pad",
       pool_geom(1, 5, 6, 4, pool_arg(3, 3, 1, 1, 1, 1, 1, 1, true))},
      {"asymmetric pad", pool_geom(2, 6, 7, 3, pool_arg(3, 2, 2, 1, 0, 1, 2, 0, false))},
      {"asymmetric pad, count_include_pad", pool_geom(2, 6, 7, 3, pool_arg(3, 2, 2, 1, 2, 0, 1, 1, true))},
      {"global 4x4", pool_geom(3, 4, 4, 7, pool_arg(4, 4, 4, 4, 0, 0, 0, 0, false))},
      {"stride > kernel", pool_geom(1, 9, 9, 2, pool_arg(2, 2, 3, 3, 0, 0, 0, 0, false))},
  };
}

// ---- a GPU, if there is one ------------------------------------------------------------------------------
// "" when a usable GPU is present, else why not (for GTEST_SKIP).
std::string no_gpu_reason() {
  static const std::string why = [] {
    int n = 0;
    const cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return std::string("no usable CUDA driver or GPU: ") + cudaGetErrorString(e);
    }
    if (n == 0) return std::string("no CUDA GPU on this machine");
    return std::string();
  }();
  return why;
}
#define REQUIRE_GPU()                         \
  do {                                        \
    const std::string why_ = no_gpu_reason(); \
    if (!why_.empty()) GTEST_SKIP() << why_;  \
  } while (0)

void cuda_ok(cudaError_t e, const char* what) {
  ASSERT_EQ(e, cudaSuccess) << what << ": " << cudaGetErrorString(e);
}

cudaStream_t test_stream() {
  static cudaStream_t s = [] {
    cudaStream_t st = nullptr;
    cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking);
    return st;
  }();
  return s;
}

// Device memory holding a copy of a host buffer.
struct DevBuf {
  void* p = nullptr;
  size_t bytes = 0;
  explicit DevBuf(const HostBuf& h) : bytes(h.bytes.size()) {
    cuda_ok(cudaMalloc(&p, bytes ? bytes : 1), "cudaMalloc");
    if (bytes) cuda_ok(cudaMemcpy(p, h.bytes.data(), bytes, cudaMemcpyHostToDevice), "cudaMemcpy H2D");
  }
  ~DevBuf() { cudaFree(p); }
  DevBuf(const DevBuf&) = delete;
  DevBuf& operator=(const DevBuf&) = delete;
  HostBuf get(DType t) const {
    HostBuf h{t, std::vector<uint8_t>(bytes)};
    cuda_ok(cudaStreamSynchronize(test_stream()), "cudaStreamSynchronize");
    if (bytes) cuda_ok(cudaMemcpy(h.bytes.data(), p, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy D2H");
    return h;
  }
};
// An output buffer pre-filled with garbage (NaN patterns), so unwritten elements show.
HostBuf garbage(DType t, int64_t n) {
  HostBuf b{t, std::vector<uint8_t>(size_t(n * dtype_size(t)), 0xFF)};
  return b;
}

}  // namespace

// ---- without a GPU ------------------------------------------------------------------------------------

TEST(cuda_library, KernelSourceCompilesWithNvrtcForEveryFloatDtype) {
  for (DType t : kFloatTypes)
    for (const char* arch : {"compute_90", "compute_75"}) {
      std::string ptx;
      ASSERT_TRUE(codegen::nvrtc_compile(cuda::lib::kernels_source(t), arch, &ptx))
          << dtype_name(t) << " " << arch << ":\n"
          << ptx;
      for (int k = 0; k < cuda::lib::kNumKerns; ++k) {
        const std::string entry = std::string(".entry ") + cuda::lib::kern_name(cuda::lib::Kern(k));
        EXPECT_NE(ptx.find(entry), std::string::npos)
            << entry << " missing for " << dtype_name(t) << " " << arch;
      }
      // NVRTC passes inline PTX (the float16 conversions) through unchecked: assemble the PTX too,
      // as the driver will, when the toolkit's ptxas is here.
      const char* ptxas = "/usr/local/cuda/bin/ptxas";
      if (std::string(arch) == "compute_90" && std::ifstream(ptxas).good()) {
        const std::string base = ::testing::TempDir() + "cuda_library_" + dtype_name(t);
        std::ofstream(base + ".ptx") << ptx;
        const std::string cmd = std::string(ptxas) + " -arch=sm_90 " + base + ".ptx -o " + base +
                                ".cubin > " + base + ".log 2>&1";
        EXPECT_EQ(std::system(cmd.c_str()), 0)
            << "ptxas rejected the PTX for " << dtype_name(t) << ": see " << base << ".log";
      }
    }
}

// The integer dtypes get the kernels too (integer matmul: cuBLASLt has none); bool does not.
TEST(cuda_library, KernelSourceCompilesWithNvrtcForIntegerDtypesAndRejectsBool) {
  for (DType t : {DType::int32, DType::int64, DType::uint8}) {
    std::string ptx;
    ASSERT_TRUE(codegen::nvrtc_compile(cuda::lib::kernels_source(t), "compute_90", &ptx))
        << dtype_name(t) << ":\n"
        << ptx;
    EXPECT_NE(ptx.find(".entry ae_matmul"), std::string::npos) << dtype_name(t);
  }
  expect_error([] { cuda::lib::kernels_source(DType::boolean); }, {"float or integer", "bool"});
}

// The device-independent kernel body compiled by the host compiler, run over every (block, thread)
// of a small grid, must compute what the CPU's naive kernels compute (float32 and float64).
namespace {

constexpr const char* kHostPrelude = R"(// library kernels on the host (tests/cuda_library_test.cpp)
typedef long long i64;
typedef unsigned int u32;
typedef unsigned short u16;
struct ae_dim3 { unsigned x, y, z; };
static thread_local ae_dim3 blockIdx, threadIdx, blockDim, gridDim;
#define __device__
#define __forceinline__ inline
#define AE_KERNEL(name) static void name
#define AE_FOR(i, n) \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)
#define AE_NEG_INF (-__builtin_inf())
static inline A ld(const T* p, i64 i) { return p[i]; }
static inline T cv(A a) { return (T)a; }
)";

// bufs: the kernel's pointer arguments then its parameter block; ip[0] the kernel (Kern order),
// ip[1] blocks, ip[2] threads per block.
constexpr const char* kHostEntry = R"(
extern "C" long long aether_kernel_scratch(void) { return 0; }
extern "C" void aether_kernel(void** b, void* scratch, const double* fp, const unsigned long long* ip) {
  (void)scratch; (void)fp;
  gridDim = {(unsigned)ip[1], 1, 1};
  blockDim = {(unsigned)ip[2], 1, 1};
  for (unsigned blk = 0; blk < gridDim.x; ++blk)
    for (unsigned thr = 0; thr < blockDim.x; ++thr) {
      blockIdx = {blk, 0, 0};
      threadIdx = {thr, 0, 0};
      switch (ip[0]) {
        case 0: ae_maxpool_fwd((const T*)b[0], (T*)b[1], *(const PoolParams*)b[2]); break;
        case 1: ae_maxpool_bwd((const T*)b[0], (const T*)b[1], (T*)b[2], *(const PoolParams*)b[3]); break;
        case 2: ae_avgpool_fwd((const T*)b[0], (T*)b[1], *(const PoolParams*)b[2]); break;
        case 3: ae_avgpool_bwd((const T*)b[0], (T*)b[1], *(const PoolParams*)b[2]); break;
        case 4: ae_conv_fwd((const T*)b[0], (const T*)b[1], (T*)b[2], *(const ConvParams*)b[3]); break;
        case 5: ae_conv_bwd_data((const T*)b[0], (const T*)b[1], (T*)b[2], *(const ConvParams*)b[3]); break;
        case 6: ae_conv_bwd_weight((const T*)b[0], (const T*)b[1], (T*)b[2], *(const ConvParams*)b[3]); break;
        case 7: ae_pad((const T*)b[0], (T*)b[1], *(const PadParams*)b[2]); break;
        case 8: ae_crop((const T*)b[0], (T*)b[1], *(const PadParams*)b[2]); break;
        case 9: ae_matmul((const T*)b[0], (const T*)b[1], (T*)b[2], *(const MatmulParams*)b[3]); break;
      }
    }
}
)";

struct HostKernels {
  codegen::KernelFn fn = nullptr;
  DType dtype;
  // Runs kernel k over a grid of 3 blocks of 7 threads (so every grid-stride step is exercised).
  void run(cuda::lib::Kern k, std::vector<void*> bufs) const {
    const unsigned long long ip[3] = {static_cast<unsigned long long>(k), 3, 7};
    fn(bufs.data(), nullptr, nullptr, ip);
  }
};

HostKernels host_kernels(DType t) {
  const std::string types = t == DType::float64 ? "typedef double T;\ntypedef double A;\n"
                            : t == DType::int32 ? "typedef int T;\ntypedef unsigned long long A;\n"
                                                : "typedef float T;\ntypedef float A;\n";
  const std::string src = types + kHostPrelude + cuda::lib::kernels_body() + kHostEntry;
  const auto compiled = codegen::compile_kernels({src});
  EXPECT_TRUE(compiled[0].fn) << compiled[0].error;
  return {compiled[0].fn, t};
}

cuda::lib::PoolParams pool_params(const PoolGeom& g) {
  const Pool2dArg& a = g.arg;
  return {g.N,       g.H,        g.W,          g.C,         g.OH,
          g.OW,      a.kernel_h, a.kernel_w,   a.stride_h,  a.stride_w,
          a.pad_top, a.pad_left, a.pad_bottom, a.pad_right, a.count_include_pad};
}
cuda::lib::ConvParams conv_params(const ConvGeom& g) {
  const Conv2dArg& a = g.arg;
  return {g.N,  g.H,        g.W,        g.C,       g.O,        g.KH,    g.KW,    g.OH,
          g.OW, a.stride_h, a.stride_w, a.pad_top, a.pad_left, a.dil_h, a.dil_w, a.groups};
}

}  // namespace

TEST(cuda_library, KernelBodyOnTheHostComputesTheCpuValues) {
  ASSERT_TRUE(codegen::host_compiler_available()) << "the test machine has a C++ compiler";
  using cuda::lib::Kern;
  for (DType t : {DType::float32, DType::float64}) {
    const HostKernels hk = host_kernels(t);
    ASSERT_TRUE(hk.fn);
    const double tol = t == DType::float64 ? 1e-13 : 1e-6;
    uint32_t seed = 1;
    for (const PoolCase& c : pool_cases()) {
      const std::string what = std::string(dtype_name(t)) + " pool " + c.name;
      const PoolGeom& g = c.g;
      cuda::lib::PoolParams p = pool_params(g);
      const HostBuf x = host_buf(t, small_ints(g.N * g.H * g.W * g.C, seed++));
      const HostBuf dy = host_buf(t, uniform(g.N * g.OH * g.OW * g.C, seed++));
      const int64_t ny = g.N * g.OH * g.OW * g.C, nx = g.N * g.H * g.W * g.C;
      HostBuf y = garbage(t, ny), want_y = zeros(t, ny), dx = garbage(t, nx), want_dx = zeros(t, nx);
      hk.run(Kern::maxpool_fwd, {(void*)x.bytes.data(), y.bytes.data(), &p});
      cpu::maxpool2d_fwd_naive(t, x.bytes.data(), want_y.bytes.data(), g);
      expect_close(y, want_y, 0, 0, what + " max fwd");
      hk.run(Kern::maxpool_bwd, {(void*)x.bytes.data(), (void*)dy.bytes.data(), dx.bytes.data(), &p});
      cpu::maxpool2d_bwd_naive(t, x.bytes.data(), dy.bytes.data(), want_dx.bytes.data(), g);
      expect_close(dx, want_dx, tol, 1, what + " max bwd");
      hk.run(Kern::avgpool_fwd, {(void*)x.bytes.data(), y.bytes.data(), &p});
      cpu::avgpool2d_fwd_naive(t, x.bytes.data(), want_y.bytes.data(), g);
      expect_close(y, want_y, tol, 1, what + " avg fwd");
      hk.run(Kern::avgpool_bwd, {(void*)dy.bytes.data(), dx.bytes.data(), &p});
      cpu::avgpool2d_bwd_naive(t, dy.bytes.data(), want_dx.bytes.data(), g);
      expect_close(dx, want_dx, tol, 1, what + " avg bwd");
    }
    for (const ConvCase& c : conv_cases()) {
      const std::string what = std::string(dtype_name(t)) + " conv " + c.name;
      const ConvGeom& g = c.g;
      cuda::lib::ConvParams p = conv_params(g);
      const int64_t nx = g.N * g.H * g.W * g.C, ny = g.N * g.OH * g.OW * g.O,
                    nw = g.O * g.KH * g.KW * (g.C / g.arg.groups);
      const HostBuf x = host_buf(t, uniform(nx, seed++)), w = host_buf(t, uniform(nw, seed++)),
                    dy = host_buf(t, uniform(ny, seed++));
      HostBuf y = garbage(t, ny), want_y = zeros(t, ny);
      hk.run(Kern::conv_fwd, {(void*)x.bytes.data(), (void*)w.bytes.data(), y.bytes.data(), &p});
      cpu::conv2d_fwd_naive(t, x.bytes.data(), w.bytes.data(), want_y.bytes.data(), g);
      expect_close(y, want_y, tol, 1, what + " fwd");
      HostBuf dx = garbage(t, nx), want_dx = zeros(t, nx);
      hk.run(Kern::conv_bwd_data, {(void*)dy.bytes.data(), (void*)w.bytes.data(), dx.bytes.data(), &p});
      cpu::conv2d_bwd_data_naive(t, dy.bytes.data(), w.bytes.data(), want_dx.bytes.data(), g);
      expect_close(dx, want_dx, tol, 1, what + " bwd data");
      HostBuf dw = garbage(t, nw), want_dw = zeros(t, nw);
      hk.run(Kern::conv_bwd_weight, {(void*)x.bytes.data(), (void*)dy.bytes.data(), dw.bytes.data(), &p});
      cpu::conv2d_bwd_weight_naive(t, x.bytes.data(), dy.bytes.data(), want_dw.bytes.data(), g);
      expect_close(dw, want_dw, tol, 1, what + " bwd weight");
      // The asymmetric-padding route: pad x explicitly, convolve without padding, crop the data gradient.
      const Conv2dArg& a = g.arg;
      cuda::lib::PadParams pp{
          g.N,       g.H,       g.W, g.C, g.H + a.pad_top + a.pad_bottom, g.W + a.pad_left + a.pad_right,
          a.pad_top, a.pad_left};
      HostBuf xp = garbage(t, g.N * pp.HP * pp.WP * g.C);
      hk.run(Kern::pad, {(void*)x.bytes.data(), xp.bytes.data(), &pp});
      ConvGeom gp = g;
      gp.H = pp.HP, gp.W = pp.WP;
      gp.arg.pad_top = gp.arg.pad_left = gp.arg.pad_bottom = gp.arg.pad_right = 0;
      HostBuf yp = zeros(t, ny);
      cpu::conv2d_fwd_naive(t, xp.bytes.data(), w.bytes.data(), yp.bytes.data(), gp);
      expect_close(yp, want_y, tol, 1, what + " through explicit padding, fwd");
      HostBuf dxp = zeros(t, g.N * pp.HP * pp.WP * g.C);
      cpu::conv2d_bwd_data_naive(t, dy.bytes.data(), w.bytes.data(), dxp.bytes.data(), gp);
      HostBuf dxc = garbage(t, nx);
      hk.run(Kern::crop, {(void*)dxp.bytes.data(), dxc.bytes.data(), &pp});
      expect_close(dxc, want_dx, tol, 1, what + " through explicit padding, bwd data");
      HostBuf dwp = zeros(t, nw);
      cpu::conv2d_bwd_weight_naive(t, xp.bytes.data(), dy.bytes.data(), dwp.bytes.data(), gp);
      expect_close(dwp, want_dw, tol, 1, what + " through explicit padding, bwd weight");
    }
  }
}

// The integer matmul kernel (what the GPU runs for int32, int64 and uint8) on the host computes the
// CPU oracle's values: int32 with products and sums that wrap around, batched, odd sizes, K = 1.
TEST(cuda_library, IntegerMatmulKernelOnTheHostComputesTheCpuValues) {
  ASSERT_TRUE(codegen::host_compiler_available()) << "the test machine has a C++ compiler";
  const HostKernels hk = host_kernels(DType::int32);
  ASSERT_TRUE(hk.fn);
  uint32_t seed = 5;
  for (auto [B, M, K, N] : {std::array<int64_t, 4>{1, 1, 1, 1}, {2, 3, 5, 7}, {3, 4, 1, 9}, {1, 17, 13, 5}}) {
    std::vector<int32_t> a(size_t(B * M * K)), b(size_t(B * K * N));
    for (auto& v : a) v = int32_t(seed = seed * 1664525u + 1013904223u);  // full-range: products wrap
    for (auto& v : b) v = int32_t(seed = seed * 1664525u + 1013904223u) >> 7;
    std::vector<int32_t> c(size_t(B * M * N), -1), want(c.size(), 0);
    cuda::lib::MatmulParams p{B, M, K, N};
    hk.run(cuda::lib::Kern::matmul, {a.data(), b.data(), c.data(), &p});
    cpu::matmul_naive(DType::int32, a.data(), b.data(), want.data(), B, M, K, N);
    EXPECT_EQ(c, want) << B << "x" << M << "x" << K << "x" << N;
  }
}

TEST(cuda_library, BadCallsThrowBeforeTouchingADevice) {
  expect_error([] { cuda::matmul(nullptr, DType::boolean, nullptr, nullptr, nullptr, 1, 2, 3, 4); },
               {"matmul", "bool"});
  ConvGeom g = conv_geom(1, 4, 4, 2, 2, 3, 3, conv_arg(1, 1, 1, 1, 1, 1, 1));
  expect_error([&] { cuda::conv2d_fwd(nullptr, DType::int64, nullptr, nullptr, nullptr, g); },
               {"conv2d", "int64", "x (1,4,4,2)"});
  ConvGeom bad = g;
  bad.arg.groups = 3;
  expect_error([&] { cuda::conv2d_bwd_data(nullptr, DType::float32, nullptr, nullptr, nullptr, bad); },
               {"conv2d_bwd_data", "groups"});
  bad = g;
  bad.OH = 7;
  expect_error([&] { cuda::conv2d_bwd_weight(nullptr, DType::float32, nullptr, nullptr, nullptr, bad); },
               {"conv2d_bwd_weight", "inconsistent geometry"});
  PoolGeom pg = pool_geom(1, 4, 4, 2, pool_arg(2, 2, 2, 2, 0, 0, 0, 0, false));
  expect_error([&] { cuda::maxpool2d_fwd(nullptr, DType::uint8, nullptr, nullptr, pg); },
               {"max_pool2d", "uint8"});
  pg.OW = 3;
  expect_error([&] { cuda::avgpool2d_bwd(nullptr, DType::float32, nullptr, nullptr, pg); },
               {"avg_pool2d_bwd", "inconsistent geometry"});
}

// ---- with a GPU -----------------------------------------------------------------------------------------

TEST(cuda_library, MatmulMatchesCpu) {
  REQUIRE_GPU();
  struct Shape4 {
    int64_t B, M, K, N;
  };
  const std::vector<Shape4> shapes = {{1, 1, 1, 1},  {3, 5, 7, 4}, {2, 33, 65, 17}, {1, 64, 128, 96},
                                      {4, 16, 1, 8}, {2, 3, 0, 5}, {1, 257, 31, 3}};
  uint32_t seed = 100;
  for (DType t : kFloatTypes)
    for (const Shape4& s : shapes) {
      const std::string what = std::string("matmul ") + dtype_name(t) + " (" + std::to_string(s.B) + "," +
                               std::to_string(s.M) + "," + std::to_string(s.K) + "," + std::to_string(s.N) +
                               ")";
      const HostBuf a = host_buf(t, uniform(s.B * s.M * s.K, seed++)),
                    b = host_buf(t, uniform(s.B * s.K * s.N, seed++));
      HostBuf want = zeros(t, s.B * s.M * s.N);
      cpu::matmul_naive(t, a.bytes.data(), b.bytes.data(), want.bytes.data(), s.B, s.M, s.K, s.N);
      DevBuf da(a), db(b), dc(garbage(t, s.B * s.M * s.N));
      cuda::matmul(test_stream(), t, da.p, db.p, dc.p, s.B, s.M, s.K, s.N);
      expect_close(dc.get(t), want, tol_of(t), std::sqrt(double(s.K) + 1), what);
    }
}

TEST(cuda_library, MatmulOfUnalignedViews) {
  REQUIRE_GPU();
  // Pointers one element past an allocation's start (2-byte aligned for float16): the plan must
  // ask for algorithms that accept that alignment.
  for (DType t : {DType::float16, DType::float32}) {
    const int64_t B = 2, M = 9, K = 13, N = 7;
    const HostBuf a = host_buf(t, uniform(1 + B * M * K, 7)), b = host_buf(t, uniform(1 + B * K * N, 8));
    HostBuf want = zeros(t, B * M * N);
    const int64_t es = dtype_size(t);
    cpu::matmul_naive(t, a.bytes.data() + es, b.bytes.data() + es, want.bytes.data(), B, M, K, N);
    DevBuf da(a), db(b), dc(garbage(t, 1 + B * M * N));
    cuda::matmul(test_stream(), t, static_cast<char*>(da.p) + es, static_cast<char*>(db.p) + es,
                 static_cast<char*>(dc.p) + es, B, M, K, N);
    HostBuf got = dc.get(t);
    got.bytes.erase(got.bytes.begin(), got.bytes.begin() + es);
    expect_close(got, want, tol_of(t), std::sqrt(double(K)),
                 std::string("unaligned matmul ") + dtype_name(t));
  }
}

TEST(cuda_library, ConvMatchesCpu) {
  REQUIRE_GPU();
  uint32_t seed = 200;
  for (DType t : kFloatTypes)
    for (const ConvCase& c : conv_cases()) {
      const ConvGeom& g = c.g;
      const std::string what = std::string(dtype_name(t)) + " conv " + c.name;
      const int64_t nx = g.N * g.H * g.W * g.C, ny = g.N * g.OH * g.OW * g.O,
                    nw = g.O * g.KH * g.KW * (g.C / g.arg.groups);
      const HostBuf x = host_buf(t, uniform(nx, seed++)), w = host_buf(t, uniform(nw, seed++)),
                    dy = host_buf(t, uniform(ny, seed++));
      DevBuf dx_in(x), dw_in(w), ddy(dy);
      const double fwd_scale = std::sqrt(double(g.KH * g.KW * g.C / g.arg.groups));
      {
        HostBuf want = zeros(t, ny);
        cpu::conv2d_fwd_naive(t, x.bytes.data(), w.bytes.data(), want.bytes.data(), g);
        DevBuf out(garbage(t, ny));
        cuda::conv2d_fwd(test_stream(), t, dx_in.p, dw_in.p, out.p, g);
        expect_close(out.get(t), want, tol_of(t), fwd_scale, what + " fwd");
      }
      {
        HostBuf want = zeros(t, nx);
        cpu::conv2d_bwd_data_naive(t, dy.bytes.data(), w.bytes.data(), want.bytes.data(), g);
        DevBuf out(garbage(t, nx));
        cuda::conv2d_bwd_data(test_stream(), t, ddy.p, dw_in.p, out.p, g);
        expect_close(out.get(t), want, tol_of(t), std::sqrt(double(g.KH * g.KW * g.O / g.arg.groups)),
                     what + " bwd data");
      }
      {
        HostBuf want = zeros(t, nw);
        cpu::conv2d_bwd_weight_naive(t, x.bytes.data(), dy.bytes.data(), want.bytes.data(), g);
        DevBuf out(garbage(t, nw));
        cuda::conv2d_bwd_weight(test_stream(), t, dx_in.p, ddy.p, out.p, g);
        expect_close(out.get(t), want, tol_of(t), std::sqrt(double(g.N * g.OH * g.OW)), what + " bwd weight");
      }
      // Twice: the second call runs the cached plan.
      HostBuf want = zeros(t, ny);
      cpu::conv2d_fwd_naive(t, x.bytes.data(), w.bytes.data(), want.bytes.data(), g);
      DevBuf out(garbage(t, ny));
      cuda::conv2d_fwd(test_stream(), t, dx_in.p, dw_in.p, out.p, g);
      expect_close(out.get(t), want, tol_of(t), fwd_scale, what + " fwd, cached plan");
    }
}

// The direct kernels (cuDNN's fallback) and the padding copies, launched on the GPU.
TEST(cuda_library, DirectConvKernelsMatchCpu) {
  REQUIRE_GPU();
  using cuda::lib::Kern;
  uint32_t seed = 300;
  for (DType t : kFloatTypes)
    for (const ConvCase& c : conv_cases()) {
      const ConvGeom& g = c.g;
      const std::string what = std::string(dtype_name(t)) + " direct conv " + c.name;
      const int64_t nx = g.N * g.H * g.W * g.C, ny = g.N * g.OH * g.OW * g.O,
                    nw = g.O * g.KH * g.KW * (g.C / g.arg.groups);
      const HostBuf x = host_buf(t, uniform(nx, seed++)), w = host_buf(t, uniform(nw, seed++)),
                    dy = host_buf(t, uniform(ny, seed++));
      DevBuf dxin(x), dwin(w), ddy(dy), y(garbage(t, ny)), dx(garbage(t, nx)), dw(garbage(t, nw));
      cuda::lib::ConvParams p = conv_params(g);
      void* args_f[] = {&dxin.p, &dwin.p, &y.p, &p};
      cuda::lib::launch(cuda::lib::kernel(t, Kern::conv_fwd, "test"), ny, args_f, test_stream(), what);
      void* args_d[] = {&ddy.p, &dwin.p, &dx.p, &p};
      cuda::lib::launch(cuda::lib::kernel(t, Kern::conv_bwd_data, "test"), nx, args_d, test_stream(), what);
      void* args_w[] = {&dxin.p, &ddy.p, &dw.p, &p};
      cuda::lib::launch(cuda::lib::kernel(t, Kern::conv_bwd_weight, "test"), nw, args_w, test_stream(), what);
      HostBuf want_y = zeros(t, ny), want_dx = zeros(t, nx), want_dw = zeros(t, nw);
      cpu::conv2d_fwd_naive(t, x.bytes.data(), w.bytes.data(), want_y.bytes.data(), g);
      cpu::conv2d_bwd_data_naive(t, dy.bytes.data(), w.bytes.data(), want_dx.bytes.data(), g);
      cpu::conv2d_bwd_weight_naive(t, x.bytes.data(), dy.bytes.data(), want_dw.bytes.data(), g);
      // Same summation order as the CPU: only FMA contraction (off in NVRTC here) or rounding differ.
      const double tol = t == DType::float32 ? 1e-6 : t == DType::float64 ? 1e-13 : tol_of(t);
      expect_close(y.get(t), want_y, tol, 1, what + " fwd");
      expect_close(dx.get(t), want_dx, tol, 1, what + " bwd data");
      expect_close(dw.get(t), want_dw, tol, 1, what + " bwd weight");
    }
}

TEST(cuda_library, PoolingMatchesCpu) {
  REQUIRE_GPU();
  uint32_t seed = 400;
  for (DType t : kFloatTypes)
    for (const PoolCase& c : pool_cases()) {
      const PoolGeom& g = c.g;
      const std::string what = std::string(dtype_name(t)) + " pool " + c.name;
      const int64_t nx = g.N * g.H * g.W * g.C, ny = g.N * g.OH * g.OW * g.C;
      // Small integers: ties everywhere, so the first-maximum rule decides the max gradient.
      const HostBuf x = host_buf(t, small_ints(nx, seed++)), dy = host_buf(t, uniform(ny, seed++));
      DevBuf dxin(x), ddy(dy);
      // Max and average of small integers, and routing of dy, are exact in every dtype up to the
      // rounding of the (float) accumulation to the dtype: compare to the dtype's rounding.
      const double tol = t == DType::float64 ? 1e-14 : t == DType::float32 ? 1e-6 : tol_of(t);
      {
        HostBuf want = zeros(t, ny);
        cpu::maxpool2d_fwd_naive(t, x.bytes.data(), want.bytes.data(), g);
        DevBuf out(garbage(t, ny));
        cuda::maxpool2d_fwd(test_stream(), t, dxin.p, out.p, g);
        expect_close(out.get(t), want, 0, 0, what + " max fwd");
      }
      {
        HostBuf want = zeros(t, nx);
        cpu::maxpool2d_bwd_naive(t, x.bytes.data(), dy.bytes.data(), want.bytes.data(), g);
        DevBuf out(garbage(t, nx));
        cuda::maxpool2d_bwd(test_stream(), t, dxin.p, ddy.p, out.p, g);
        expect_close(out.get(t), want, tol, 1, what + " max bwd");
      }
      {
        HostBuf want = zeros(t, ny);
        cpu::avgpool2d_fwd_naive(t, x.bytes.data(), want.bytes.data(), g);
        DevBuf out(garbage(t, ny));
        cuda::avgpool2d_fwd(test_stream(), t, dxin.p, out.p, g);
        expect_close(out.get(t), want, tol, 1, what + " avg fwd");
      }
      {
        HostBuf want = zeros(t, nx);
        cpu::avgpool2d_bwd_naive(t, dy.bytes.data(), want.bytes.data(), g);
        DevBuf out(garbage(t, nx));
        cuda::avgpool2d_bwd(test_stream(), t, ddy.p, out.p, g);
        expect_close(out.get(t), want, tol, 1, what + " avg bwd");
      }
    }
}

TEST(cuda_library, MaxPoolPropagatesNaNLikeTheCpu) {
  REQUIRE_GPU();
  const PoolGeom g = pool_geom(1, 4, 4, 2, pool_arg(2, 2, 2, 2, 0, 0, 0, 0, false));
  std::vector<double> v = small_ints(32, 9);
  v[5] = std::nan("");   // (0,2,1) channel 1: window (0,1)
  v[18] = std::nan("");  // (2,1,0) channel 0: window (1,0)
  for (DType t : {DType::float32, DType::float16}) {
    const HostBuf x = host_buf(t, v), dy = host_buf(t, uniform(8, 3));
    HostBuf want_y = zeros(t, 8), want_dx = zeros(t, 32);
    cpu::maxpool2d_fwd_naive(t, x.bytes.data(), want_y.bytes.data(), g);
    cpu::maxpool2d_bwd_naive(t, x.bytes.data(), dy.bytes.data(), want_dx.bytes.data(), g);
    DevBuf dxin(x), ddy(dy), y(garbage(t, 8)), dx(garbage(t, 32));
    cuda::maxpool2d_fwd(test_stream(), t, dxin.p, y.p, g);
    cuda::maxpool2d_bwd(test_stream(), t, dxin.p, ddy.p, dx.p, g);
    expect_close(y.get(t), want_y, 0, 0, std::string("NaN max fwd ") + dtype_name(t));
    expect_close(dx.get(t), want_dx, 1e-6, 1, std::string("NaN max bwd ") + dtype_name(t));
  }
}

TEST(cuda_library, EmptyReductionsGiveZeros) {
  REQUIRE_GPU();
  // K = 0 matmul and a conv whose output has no rows: the gradients are zeros, written.
  const DType t = DType::float32;
  DevBuf c(garbage(t, 6));
  cuda::matmul(test_stream(), t, c.p, c.p, c.p, 1, 2, 0, 3);
  expect_close(c.get(t), zeros(t, 6), 0, 0, "matmul K=0");
  const ConvGeom g = conv_geom(1, 2, 2, 3, 4, 3, 3, conv_arg(1, 0, 0, 0, 0, 1, 1));  // OH = OW = 0
  ASSERT_EQ(g.OH, 0);
  const HostBuf x = host_buf(t, uniform(12, 5));
  DevBuf dxin(x), dw(garbage(t, 4 * 3 * 3 * 3)), dx(garbage(t, 12));
  cuda::conv2d_bwd_weight(test_stream(), t, dxin.p, dxin.p, dw.p, g);
  expect_close(dw.get(t), zeros(t, 4 * 9 * 3), 0, 0, "conv bwd weight with no output rows");
  cuda::conv2d_bwd_data(test_stream(), t, dxin.p, dxin.p, dx.p, g);
  expect_close(dx.get(t), zeros(t, 12), 0, 0, "conv bwd data with no output rows");
}

#endif  // AETHER_HAS_CUDA
