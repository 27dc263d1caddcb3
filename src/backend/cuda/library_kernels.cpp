// The CUDA C source of the library ops' own kernels, compiled at run time with NVRTC (one module
// per dtype and architecture, see library_common.cpp): max / average pooling forward and backward,
// the direct convolution used where cuDNN cannot run a case, and the zero-padding / cropping copies
// that turn an asymmetrically padded convolution into a symmetric one for cuDNN.
//
// Semantics are the CPU's (backend/cpu/pool.cpp, conv.cpp), expression by expression, so results
// agree to rounding (and bitwise for float32 / float64 pooling): arithmetic in float (double for
// float64), max keeps the FIRST maximum of a window in row-major scan order and a NaN wins,
// backward passes GATHER per input element (no atomics, a fixed summation order: the windows in
// (oh, ow) order, like the CPU's scatter loop), average divides by the CPU's divisor.
//
// Every kernel runs one thread per output element in a grid-stride loop (the channel dim fastest,
// so a warp reads contiguous NHWC memory). The body is device-independent: a prelude defines the
// storage type T, the arithmetic type A, ld() (T -> A) and cv() (A -> T, rounding to nearest even),
// AE_KERNEL, AE_FOR and AE_NEG_INF; tests/cuda_library_test.cpp compiles the same body on the host
// with its own prelude to check the index arithmetic without a GPU.
#include <string>

#include "library_common.h"

namespace aether::cuda::lib {

const char* kern_name(Kern k) {
  switch (k) {
    case Kern::maxpool_fwd: return "ae_maxpool_fwd";
    case Kern::maxpool_bwd: return "ae_maxpool_bwd";
    case Kern::avgpool_fwd: return "ae_avgpool_fwd";
    case Kern::avgpool_bwd: return "ae_avgpool_bwd";
    case Kern::conv_fwd: return "ae_conv_fwd";
    case Kern::conv_bwd_data: return "ae_conv_bwd_data";
    case Kern::conv_bwd_weight: return "ae_conv_bwd_weight";
    case Kern::pad: return "ae_pad";
    case Kern::crop: return "ae_crop";
    case Kern::matmul: return "ae_matmul";
  }
  return "";
}

const char* kernels_body() {
  return R"CUDA(
// ---- parameter blocks (the same layout as library_common.h's) -----------------------------------
struct PoolParams { i64 N, H, W, C, OH, OW, KH, KW, SH, SW, PT, PL, PB, PR, include_pad; };
struct ConvParams { i64 N, H, W, C, O, KH, KW, OH, OW, SH, SW, PT, PL, DH, DW, G; };
struct PadParams { i64 N, H, W, C, HP, WP, PT, PL; };
struct MatmulParams { i64 B, M, K, N; };

__device__ __forceinline__ i64 ae_min(i64 a, i64 b) { return a < b ? a : b; }
__device__ __forceinline__ i64 ae_max(i64 a, i64 b) { return a > b ? a : b; }

// ---- pooling: x (N,H,W,C) -> y (N,OH,OW,C) ------------------------------------------------------
// The first maximum of channel c of window (oh, ow) of image n: its value in *best, its position
// ih * W + iw as the result (-1 for a window without real elements, which cannot happen).
__device__ i64 ae_window_max(const T* x, const PoolParams& p, i64 n, i64 oh, i64 ow, i64 c, A* best) {
  const i64 hs = oh * p.SH - p.PT, ws = ow * p.SW - p.PL;
  const i64 h0 = ae_max(hs, 0), h1 = ae_min(hs + p.KH, p.H);
  const i64 w0 = ae_max(ws, 0), w1 = ae_min(ws + p.KW, p.W);
  A b = AE_NEG_INF;
  i64 pos = -1;
  for (i64 ih = h0; ih < h1; ++ih)
    for (i64 iw = w0; iw < w1; ++iw) {
      const A v = ld(x, ((n * p.H + ih) * p.W + iw) * p.C + c);
      const bool take = pos < 0 || ((v > b || v != v) && b == b);
      if (take) {
        b = v;
        pos = ih * p.W + iw;
      }
    }
  *best = b;
  return pos;
}

// The divisor of average window (oh, ow): the padded window clipped to the padded input, or the
// number of real elements.
__device__ A ae_avg_divisor(const PoolParams& p, i64 oh, i64 ow) {
  const i64 hs = oh * p.SH - p.PT, ws = ow * p.SW - p.PL;
  if (!p.include_pad) {
    const i64 h0 = ae_max(hs, 0), h1 = ae_min(hs + p.KH, p.H);
    const i64 w0 = ae_max(ws, 0), w1 = ae_min(ws + p.KW, p.W);
    return A((h1 - h0) * (w1 - w0));
  }
  const i64 he = ae_min(hs + p.KH, p.H + p.PB), we = ae_min(ws + p.KW, p.W + p.PR);
  return A((he - hs) * (we - ws));
}

// The output rows [*lo, *hi] whose windows hold input row i (window o covers o*S - P + [0, K)).
__device__ void ae_windows_of(i64 i, i64 K, i64 S, i64 P, i64 O, i64* lo, i64* hi) {
  const i64 a = i + P - K + 1;  // o*S >= a
  *lo = a <= 0 ? 0 : (a + S - 1) / S;
  *hi = ae_min(O - 1, (i + P) / S);
}

AE_KERNEL(ae_maxpool_fwd)(const T* __restrict__ x, T* __restrict__ y, PoolParams p) {
  const i64 total = p.N * p.OH * p.OW * p.C;
  AE_FOR(i, total) {
    const i64 c = i % p.C, r = i / p.C, ow = r % p.OW, r2 = r / p.OW, oh = r2 % p.OH, n = r2 / p.OH;
    A best;
    ae_window_max(x, p, n, oh, ow, c, &best);
    y[i] = cv(best);
  }
}

// dx (N,H,W,C): each input element sums dy over the windows whose first maximum it is.
AE_KERNEL(ae_maxpool_bwd)(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dx, PoolParams p) {
  const i64 total = p.N * p.H * p.W * p.C;
  AE_FOR(i, total) {
    const i64 c = i % p.C, r = i / p.C, iw = r % p.W, r2 = r / p.W, ih = r2 % p.H, n = r2 / p.H;
    i64 oh0, oh1, ow0, ow1;
    ae_windows_of(ih, p.KH, p.SH, p.PT, p.OH, &oh0, &oh1);
    ae_windows_of(iw, p.KW, p.SW, p.PL, p.OW, &ow0, &ow1);
    A acc = A(0);
    for (i64 oh = oh0; oh <= oh1; ++oh)
      for (i64 ow = ow0; ow <= ow1; ++ow) {
        A best;
        if (ae_window_max(x, p, n, oh, ow, c, &best) == ih * p.W + iw)
          acc += ld(dy, ((n * p.OH + oh) * p.OW + ow) * p.C + c);
      }
    dx[i] = cv(acc);
  }
}

AE_KERNEL(ae_avgpool_fwd)(const T* __restrict__ x, T* __restrict__ y, PoolParams p) {
  const i64 total = p.N * p.OH * p.OW * p.C;
  AE_FOR(i, total) {
    const i64 c = i % p.C, r = i / p.C, ow = r % p.OW, r2 = r / p.OW, oh = r2 % p.OH, n = r2 / p.OH;
    const i64 hs = oh * p.SH - p.PT, ws = ow * p.SW - p.PL;
    const i64 h0 = ae_max(hs, 0), h1 = ae_min(hs + p.KH, p.H);
    const i64 w0 = ae_max(ws, 0), w1 = ae_min(ws + p.KW, p.W);
    A sum = A(0);
    for (i64 ih = h0; ih < h1; ++ih)
      for (i64 iw = w0; iw < w1; ++iw) sum += ld(x, ((n * p.H + ih) * p.W + iw) * p.C + c);
    y[i] = cv(sum / ae_avg_divisor(p, oh, ow));
  }
}

AE_KERNEL(ae_avgpool_bwd)(const T* __restrict__ dy, T* __restrict__ dx, PoolParams p) {
  const i64 total = p.N * p.H * p.W * p.C;
  AE_FOR(i, total) {
    const i64 c = i % p.C, r = i / p.C, iw = r % p.W, r2 = r / p.W, ih = r2 % p.H, n = r2 / p.H;
    i64 oh0, oh1, ow0, ow1;
    ae_windows_of(ih, p.KH, p.SH, p.PT, p.OH, &oh0, &oh1);
    ae_windows_of(iw, p.KW, p.SW, p.PL, p.OW, &ow0, &ow1);
    A acc = A(0);
    for (i64 oh = oh0; oh <= oh1; ++oh)
      for (i64 ow = ow0; ow <= ow1; ++ow)
        acc += ld(dy, ((n * p.OH + oh) * p.OW + ow) * p.C + c) / ae_avg_divisor(p, oh, ow);
    dx[i] = cv(acc);
  }
}

// ---- direct convolution (cuDNN's fallback): x (N,H,W,C), w (O,KH,KW,Cg), y (N,OH,OW,O) ----------
// Input row of output row oh and kernel row kh: ih = oh*SH - PT + kh*DH; outside [0, H) reads 0.
AE_KERNEL(ae_conv_fwd)(const T* __restrict__ x, const T* __restrict__ w, T* __restrict__ y, ConvParams p) {
  const i64 Cg = p.C / p.G, Og = p.O / p.G;
  const i64 total = p.N * p.OH * p.OW * p.O;
  AE_FOR(i, total) {
    const i64 o = i % p.O, r = i / p.O, ow = r % p.OW, r2 = r / p.OW, oh = r2 % p.OH, n = r2 / p.OH;
    const i64 grp = o / Og;
    A acc = A(0);
    for (i64 kh = 0; kh < p.KH; ++kh) {
      const i64 ih = oh * p.SH - p.PT + kh * p.DH;
      if (ih < 0 || ih >= p.H) continue;
      for (i64 kw = 0; kw < p.KW; ++kw) {
        const i64 iw = ow * p.SW - p.PL + kw * p.DW;
        if (iw < 0 || iw >= p.W) continue;
        const i64 xb = ((n * p.H + ih) * p.W + iw) * p.C + grp * Cg;  // (Cg)
        const i64 wb = ((o * p.KH + kh) * p.KW + kw) * Cg;           // (Cg)
        for (i64 c = 0; c < Cg; ++c) acc += ld(x, xb + c) * ld(w, wb + c);
      }
    }
    y[i] = cv(acc);
  }
}

// dx (N,H,W,C): gathered per element over the (kh, kw, o) whose window puts a tap on it.
AE_KERNEL(ae_conv_bwd_data)(const T* __restrict__ dy, const T* __restrict__ w, T* __restrict__ dx,
                            ConvParams p) {
  const i64 Cg = p.C / p.G, Og = p.O / p.G;
  const i64 total = p.N * p.H * p.W * p.C;
  AE_FOR(i, total) {
    const i64 ci = i % p.C, r = i / p.C, iw = r % p.W, r2 = r / p.W, ih = r2 % p.H, n = r2 / p.H;
    const i64 grp = ci / Cg, c = ci % Cg;
    A acc = A(0);
    for (i64 kh = 0; kh < p.KH; ++kh) {
      const i64 th = ih + p.PT - kh * p.DH;  // = oh * SH
      if (th < 0 || th % p.SH != 0 || th / p.SH >= p.OH) continue;
      const i64 oh = th / p.SH;
      for (i64 kw = 0; kw < p.KW; ++kw) {
        const i64 tw = iw + p.PL - kw * p.DW;  // = ow * SW
        if (tw < 0 || tw % p.SW != 0 || tw / p.SW >= p.OW) continue;
        const i64 ow = tw / p.SW;
        const i64 db = ((n * p.OH + oh) * p.OW + ow) * p.O;  // (O)
        for (i64 oo = 0; oo < Og; ++oo) {
          const i64 o = grp * Og + oo;
          acc += ld(dy, db + o) * ld(w, ((o * p.KH + kh) * p.KW + kw) * Cg + c);
        }
      }
    }
    dx[i] = cv(acc);
  }
}

// dw (O,KH,KW,Cg) = sum over (n, oh, ow) of dy[n,oh,ow,o] * x[n,ih,iw,grp*Cg + c].
AE_KERNEL(ae_conv_bwd_weight)(const T* __restrict__ x, const T* __restrict__ dy, T* __restrict__ dw,
                              ConvParams p) {
  const i64 Cg = p.C / p.G, Og = p.O / p.G;
  const i64 total = p.O * p.KH * p.KW * Cg;
  AE_FOR(i, total) {
    const i64 c = i % Cg, r = i / Cg, kw = r % p.KW, r2 = r / p.KW, kh = r2 % p.KH, o = r2 / p.KH;
    const i64 ci = (o / Og) * Cg + c;
    A acc = A(0);
    for (i64 n = 0; n < p.N; ++n)
      for (i64 oh = 0; oh < p.OH; ++oh) {
        const i64 ih = oh * p.SH - p.PT + kh * p.DH;
        if (ih < 0 || ih >= p.H) continue;
        for (i64 ow = 0; ow < p.OW; ++ow) {
          const i64 iw = ow * p.SW - p.PL + kw * p.DW;
          if (iw < 0 || iw >= p.W) continue;
          acc += ld(dy, ((n * p.OH + oh) * p.OW + ow) * p.O + o) * ld(x, ((n * p.H + ih) * p.W + iw) * p.C + ci);
        }
      }
    dw[i] = cv(acc);
  }
}

// ---- explicit padding: x (N,H,W,C) <-> xp (N,HP,WP,C), x at (PT, PL) -----------------------------
AE_KERNEL(ae_pad)(const T* __restrict__ x, T* __restrict__ xp, PadParams p) {
  const i64 total = p.N * p.HP * p.WP * p.C;
  AE_FOR(i, total) {
    const i64 c = i % p.C, r = i / p.C, wp = r % p.WP, r2 = r / p.WP, hp = r2 % p.HP, n = r2 / p.HP;
    const i64 ih = hp - p.PT, iw = wp - p.PL;
    const bool in = ih >= 0 && ih < p.H && iw >= 0 && iw < p.W;
    xp[i] = in ? x[((n * p.H + ih) * p.W + iw) * p.C + c] : cv(A(0));
  }
}

AE_KERNEL(ae_crop)(const T* __restrict__ xp, T* __restrict__ x, PadParams p) {
  const i64 total = p.N * p.H * p.W * p.C;
  AE_FOR(i, total) {
    const i64 c = i % p.C, r = i / p.C, iw = r % p.W, r2 = r / p.W, ih = r2 % p.H, n = r2 / p.H;
    x[i] = xp[((n * p.HP + ih + p.PT) * p.WP + iw + p.PL) * p.C + c];
  }
}

// ---- matmul for the integer dtypes (cuBLASLt's float paths do the rest): a (B,M,K), b (B,K,N) ->
// c (B,M,N), row-major; one element of c per work item, its sum over k in A (for integers an
// unsigned 64-bit sum: wrap-around like the CPU's int64 accumulation, then modulo 2^bits).
AE_KERNEL(ae_matmul)(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, MatmulParams p) {
  const i64 total = p.B * p.M * p.N;
  AE_FOR(i, total) {
    const i64 j = i % p.N, r = i / p.N, m = r % p.M, bt = r / p.M;
    const T* ar = a + (bt * p.M + m) * p.K;  // (K): row m of a[bt]
    const T* bc = b + bt * p.K * p.N + j;    // (K) strided by N: column j of b[bt]
    A acc = A(0);
    for (i64 k = 0; k < p.K; ++k) acc += ld(ar, k) * ld(bc, k * p.N);
    c[i] = cv(acc);
  }
}
)CUDA";
}

namespace {

// The GPU prelude: integer types, the grid-stride loop and the dtype's T, A, ld, cv, AE_NEG_INF.
// float16 converts with the PTX cvt instructions (round to nearest even); bfloat16 with integer
// arithmetic, exactly as aether::float_to_bf16 on the host (NaN kept quiet).
std::string prelude(DType dtype) {
  std::string s = R"CUDA(// aether CUDA library kernels (backend/cuda/library_kernels.cpp)
typedef long long i64;
typedef unsigned int u32;
typedef unsigned short u16;
#define AE_KERNEL(name) extern "C" __global__ void __launch_bounds__(256) name
#define AE_FOR(i, n) \
  for (i64 i = (i64)blockIdx.x * blockDim.x + threadIdx.x; i < (n); i += (i64)gridDim.x * blockDim.x)
)CUDA";
  switch (dtype) {
    case DType::float32:
      s += "typedef float T;\ntypedef float A;\n#define AE_NEG_INF (-__int_as_float(0x7f800000))\n"
           "__device__ __forceinline__ A ld(const T* p, i64 i) { return p[i]; }\n"
           "__device__ __forceinline__ T cv(A a) { return a; }\n";
      break;
    case DType::float64:
      s += "typedef double T;\ntypedef double A;\n"
           "#define AE_NEG_INF (-__longlong_as_double(0x7ff0000000000000LL))\n"
           "__device__ __forceinline__ A ld(const T* p, i64 i) { return p[i]; }\n"
           "__device__ __forceinline__ T cv(A a) { return a; }\n";
      break;
    case DType::float16:
      s +=
          "typedef u16 T;\ntypedef float A;\n#define AE_NEG_INF (-__int_as_float(0x7f800000))\n"
          "__device__ __forceinline__ A ld(const T* p, i64 i) {\n"
          "  float f; const u16 h = p[i]; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;\n}\n"
          "__device__ __forceinline__ T cv(A a) {\n"
          "  u16 h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(a)); return h;\n}\n";
      break;
    case DType::bfloat16:
      s += "typedef u16 T;\ntypedef float A;\n#define AE_NEG_INF (-__int_as_float(0x7f800000))\n"
           "__device__ __forceinline__ A ld(const T* p, i64 i) { return __uint_as_float(u32(p[i]) << 16); }\n"
           "__device__ __forceinline__ T cv(A a) {\n"
           "  u32 u = __float_as_uint(a);\n"
           "  if ((u & 0x7fffffffu) > 0x7f800000u) return u16((u >> 16) | 0x40u);\n"
           "  u += 0x7fffu + ((u >> 16) & 1u);\n"
           "  return u16(u >> 16);\n}\n";
      break;
    case DType::int32:
    case DType::int64:
    case DType::uint8: {  // (only ae_matmul is launched for these; the rest just compiles)
      const char* t = dtype == DType::int32 ? "int" : dtype == DType::int64 ? "long long" : "unsigned char";
      s += detail::cat("typedef ", t, " T;\ntypedef unsigned long long A;\n#define AE_NEG_INF A(0)\n",
                       "__device__ __forceinline__ A ld(const T* p, i64 i) { return A(p[i]); }\n",
                       "__device__ __forceinline__ T cv(A a) { return T(a); }\n");
      break;
    }
    case DType::boolean:
      throw Error("cuda library kernels: expected a float or integer dtype, got " + dname(dtype),
                  ErrorKind::type);
  }
  return s;
}

}  // namespace

std::string kernels_source(DType dtype) { return prelude(dtype) + kernels_body(); }

}  // namespace aether::cuda::lib
