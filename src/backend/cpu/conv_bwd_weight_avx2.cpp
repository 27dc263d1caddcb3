// Backward-weights of a float32 convolution in AVX2 + FMA, for the CPUs where oneDNN runs its AVX2
// kernels (no AVX-512, or AETHER_CPU_ISA=avx2). There oneDNN 3.2's backward-weights (jit:avx2, the
// kernel PyTorch runs too) ran cifarnet's batch-64 step's layers at 65-71% of the FMA peak against
// 96-99% for its forward; this loop nest runs them at 91-98% (48-51 ms instead of 66-72 ms on a
// Zen 4 capped at AVX2; docs/results.md).
//
//   dw[o, kh, kw, c] = sum over (n, oh, ow) of dy[n, oh, ow, o] * x[n, ih, iw, c],
//   ih = oh - pad_top + kh, iw = ow - pad_left + kw,
//
// over the input pixels inside the image (padding contributes 0). Layouts: x (N,H,W,C) NHWC,
// dy (N,OH,OW,O) NHWC, dw (O,KH,KW,C) OHWI, all float32. Handled: stride 1, dilation 1, one group,
// C % 8 == 0, any kernel size, padding, O and N (conv2d_bwd_weight_avx2 declines the rest).
//
// Work: the output positions are cut into chunks of about kChunkPositions (a few output rows of one
// image, or whole images when they are small). The threads form P groups over contiguous ranges of
// chunks, each group summing into its own copy of dw (group 0 into dw itself), times Q groups over
// blocks of output channels (disjoint rows of the same copy); the copies are added at the end in
// group order, so for a given thread count every run gives the same bits.
// Per chunk the operands are packed so that the innermost loop reads consecutive memory (in NHWC a
// block of 16 channels is every C-th float: those lines crowd a few L1 sets):
//   xp  (C/16 blocks, images, input rows, W, 16): the input rows the chunk's windows touch; when
//       C % 16 == 8 the last block is 8 wide.
//   dyp (ceil(O/6) blocks, positions, 6): in the last block the lanes past O are 0.
// A tile is <= 6 output channels x 16 input channels of one kernel offset (kh, kw): 12 ymm
// accumulators (per position 6 broadcasts of dy times 2 vectors of x), loaded from dw, summed over
// the chunk's runs of positions whose input pixel exists, and stored back. A run is one (image,
// output row): the output columns whose input column for this kw is inside the image.
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>
#include <vector>

#include "core/config.h"
#include "kernels.h"

#define AETHER_AVX2 __attribute__((target("avx2,fma")))

namespace aether::cpu {

namespace {

constexpr int64_t kChunkPositions = 256;  // output positions per chunk (packed: at most 256 x (C + O) floats)
constexpr int kTileO = 6;                 // output channels per tile (broadcasts)
constexpr int kBlockC = 16;               // input channels per tile (two ymm vectors)
constexpr int64_t kPositionsPerCopy = 1024;  // least output positions per copy of dw (conv2d_bwd_weight_avx2)
std::atomic<int64_t> g_calls{0};

// Output positions [n0, n1) x [oh0, oh1) (every ow), which read input rows [ih0, ih1).
struct Chunk {
  int64_t n0, n1, oh0, oh1, ih0, ih1;
  int64_t images() const { return n1 - n0; }
  int64_t out_rows() const { return oh1 - oh0; }
  int64_t in_rows() const { return ih1 - ih0; }
};

std::vector<Chunk> make_chunks(const ConvGeom& g) {
  std::vector<Chunk> cs;
  auto add = [&](int64_t n0, int64_t n1, int64_t oh0, int64_t oh1) {
    const int64_t ih0 = std::clamp<int64_t>(oh0 - g.arg.pad_top, 0, g.H);
    const int64_t ih1 = std::clamp<int64_t>(oh1 - 1 - g.arg.pad_top + g.KH, ih0, g.H);
    cs.push_back({n0, n1, oh0, oh1, ih0, ih1});
  };
  const int64_t per_image = g.OH * g.OW;
  if (per_image >= kChunkPositions) {  // a few rows of one image
    const int64_t rows = std::max<int64_t>(1, kChunkPositions / g.OW);
    for (int64_t n = 0; n < g.N; ++n)
      for (int64_t oh = 0; oh < g.OH; oh += rows) add(n, n + 1, oh, std::min(g.OH, oh + rows));
  } else {  // whole images
    const int64_t k = std::max<int64_t>(1, kChunkPositions / std::max<int64_t>(1, per_image));
    for (int64_t n = 0; n < g.N; n += k) add(n, std::min(g.N, n + k), 0, g.OH);
  }
  return cs;
}

// One run of a tile: `len` positions from packed x position `x` (in the block's rows of W) and
// packed dy position `d`.
struct Run {
  int x, d, len;
};

// What one thread works in, carved out of buffers the calling thread allocates before the parallel
// region (nothing inside it allocates or throws).
struct ThreadSpace {
  float* xp;   // (pixels_max * C): packed x
  float* dyp;  // (positions_max * O rounded up to 6, + 8): packed dy
  Run* runs;   // (KH*KW * rows_max): the chunk's runs
  int* first;  // (KH*KW + 1): runs of offset k are runs[first[k] .. first[k+1])
};

// lane i of the result is on (all bits) for i < k
AETHER_AVX2 __m256i first_lanes(int k) {
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(k), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}

AETHER_AVX2 inline __m256 load_row(const float* out, int64_t ostride, int r, int ro, int v) {
  return r < ro ? _mm256_loadu_ps(out + r * ostride + 8 * v) : _mm256_setzero_ps();
}
AETHER_AVX2 inline void store_row(float* out, int64_t ostride, int r, int ro, int v, __m256 a) {
  if (r < ro) _mm256_storeu_ps(out + r * ostride + 8 * v, a);
}

// dw tile (ro <= 6 output channels x 8*RV input channels, at `out`, rows `ostride` apart) +=
// sum over the runs of dyp (positions, 6; lanes past ro are 0) x xp (positions, 8*RV).
// The twelve accumulators are named variables, not an array: GCC keeps an array of vectors in
// memory across the two loops in some of its instantiations (a store per FMA, measured at half speed).
template <int RV>
AETHER_AVX2 void tile(const float* xp, const float* dyp, float* out, int64_t ostride, int ro, const Run* runs,
                      int nruns) {
  static_assert(RV == 1 || RV == 2);
  // a_r: channels 0-7 of output row r; b_r: channels 8-15 (RV == 2)
  __m256 a0 = load_row(out, ostride, 0, ro, 0), a1 = load_row(out, ostride, 1, ro, 0),
         a2 = load_row(out, ostride, 2, ro, 0), a3 = load_row(out, ostride, 3, ro, 0),
         a4 = load_row(out, ostride, 4, ro, 0), a5 = load_row(out, ostride, 5, ro, 0);
  __m256 b0 = _mm256_setzero_ps(), b1 = b0, b2 = b0, b3 = b0, b4 = b0, b5 = b0;
  if constexpr (RV == 2) {
    b0 = load_row(out, ostride, 0, ro, 1), b1 = load_row(out, ostride, 1, ro, 1);
    b2 = load_row(out, ostride, 2, ro, 1), b3 = load_row(out, ostride, 3, ro, 1);
    b4 = load_row(out, ostride, 4, ro, 1), b5 = load_row(out, ostride, 5, ro, 1);
  }
  for (int i = 0; i < nruns; ++i) {
    const float* xr = xp + size_t(runs[i].x) * (8 * RV);  // (len, 8*RV)
    const float* dr = dyp + size_t(runs[i].d) * kTileO;   // (len, 6)
    for (int k = runs[i].len; k > 0; --k, xr += 8 * RV, dr += kTileO) {
      const __m256 x0 = _mm256_load_ps(xr);
      const __m256 x1 = RV == 2 ? _mm256_load_ps(xr + 8) : x0;
      __m256 d = _mm256_broadcast_ss(dr);
      a0 = _mm256_fmadd_ps(d, x0, a0);
      if constexpr (RV == 2) b0 = _mm256_fmadd_ps(d, x1, b0);
      d = _mm256_broadcast_ss(dr + 1);
      a1 = _mm256_fmadd_ps(d, x0, a1);
      if constexpr (RV == 2) b1 = _mm256_fmadd_ps(d, x1, b1);
      d = _mm256_broadcast_ss(dr + 2);
      a2 = _mm256_fmadd_ps(d, x0, a2);
      if constexpr (RV == 2) b2 = _mm256_fmadd_ps(d, x1, b2);
      d = _mm256_broadcast_ss(dr + 3);
      a3 = _mm256_fmadd_ps(d, x0, a3);
      if constexpr (RV == 2) b3 = _mm256_fmadd_ps(d, x1, b3);
      d = _mm256_broadcast_ss(dr + 4);
      a4 = _mm256_fmadd_ps(d, x0, a4);
      if constexpr (RV == 2) b4 = _mm256_fmadd_ps(d, x1, b4);
      d = _mm256_broadcast_ss(dr + 5);
      a5 = _mm256_fmadd_ps(d, x0, a5);
      if constexpr (RV == 2) b5 = _mm256_fmadd_ps(d, x1, b5);
    }
  }
  store_row(out, ostride, 0, ro, 0, a0), store_row(out, ostride, 1, ro, 0, a1);
  store_row(out, ostride, 2, ro, 0, a2), store_row(out, ostride, 3, ro, 0, a3);
  store_row(out, ostride, 4, ro, 0, a4), store_row(out, ostride, 5, ro, 0, a5);
  if constexpr (RV == 2) {
    store_row(out, ostride, 0, ro, 1, b0), store_row(out, ostride, 1, ro, 1, b1);
    store_row(out, ostride, 2, ro, 1, b2), store_row(out, ostride, 3, ro, 1, b3);
    store_row(out, ostride, 4, ro, 1, b4), store_row(out, ostride, 5, ro, 1, b5);
  }
}

// xp (C/16 blocks, images, in_rows, W, 16 or 8 for a last half block) <- the chunk's input rows.
AETHER_AVX2 void pack_x(const float* x, const ConvGeom& g, const Chunk& ch, float* xp) {
  const int64_t pixels = ch.images() * ch.in_rows() * g.W;  // per block
  for (int64_t i = 0; i < ch.images(); ++i)
    for (int64_t r = 0; r < ch.in_rows(); ++r) {
      const float* src = x + ((ch.n0 + i) * g.H + ch.ih0 + r) * g.W * g.C;  // (W, C)
      const int64_t p0 = (i * ch.in_rows() + r) * g.W;
      for (int64_t w = 0; w < g.W; ++w, src += g.C) {
        int64_t c = 0;
        for (; c + kBlockC <= g.C; c += kBlockC) {
          float* dst = xp + c * pixels + (p0 + w) * kBlockC;
          _mm256_store_ps(dst, _mm256_loadu_ps(src + c));
          _mm256_store_ps(dst + 8, _mm256_loadu_ps(src + c + 8));
        }
        if (c < g.C) _mm256_store_ps(xp + c * pixels + (p0 + w) * 8, _mm256_loadu_ps(src + c));
      }
    }
}

// dyp (blocks of output channels [o_lo, o_hi), positions, 6) <- the chunk's `positions` rows of dy
// (consecutive in dy); in the last block the lanes past O are 0. Each row is written 8 wide, the 2
// extra lanes landing on the next row, written after it; the block's last row is written with a mask.
AETHER_AVX2 void pack_dy(const float* dy, const ConvGeom& g, int64_t positions, int64_t o_lo, int64_t o_hi,
                         float* dyp) {
  const __m256i six = first_lanes(kTileO);
  for (int64_t o0 = o_lo; o0 < o_hi; o0 += kTileO) {
    const __m256i m = first_lanes(int(std::min<int64_t>(kTileO, g.O - o0)));  // masked lanes load 0
    float* dst = dyp + (o0 - o_lo) * positions;
    const float* src = dy + o0;
    for (int64_t p = 0; p + 1 < positions; ++p)
      _mm256_storeu_ps(dst + p * kTileO, _mm256_maskload_ps(src + p * g.O, m));
    _mm256_maskstore_ps(dst + (positions - 1) * kTileO, six,
                        _mm256_maskload_ps(src + (positions - 1) * g.O, m));
  }
}

// The runs of every kernel offset (kh, kw) in a chunk: runs[first[k] .. first[k+1]) for k = kh*KW+kw;
// at most images * out_rows per offset.
void make_runs(const ConvGeom& g, const Chunk& ch, Run* runs, int* first) {
  int n = 0;
  for (int64_t kh = 0; kh < g.KH; ++kh)
    for (int64_t kw = 0; kw < g.KW; ++kw) {
      first[kh * g.KW + kw] = n;
      // output columns whose input column ow - pad_left + kw is in [0, W)
      const int64_t ow0 = std::max<int64_t>(0, g.arg.pad_left - kw);
      const int64_t ow1 = std::min<int64_t>(g.OW, g.W + g.arg.pad_left - kw);
      if (ow1 <= ow0) continue;
      for (int64_t i = 0; i < ch.images(); ++i)
        for (int64_t oh = ch.oh0; oh < ch.oh1; ++oh) {
          const int64_t ih = oh - g.arg.pad_top + kh;
          if (ih < 0 || ih >= g.H) continue;
          runs[n++] = {int((i * ch.in_rows() + ih - ch.ih0) * g.W + ow0 - g.arg.pad_left + kw),
                       int((i * ch.out_rows() + oh - ch.oh0) * g.OW + ow0), int(ow1 - ow0)};
        }
    }
  first[g.KH * g.KW] = n;
}

// Rows [o_lo, o_hi) of acc (O,KH,KW,C) += the contributions of chunks [c0, c1).
AETHER_AVX2 void run_chunks(const float* x, const float* dy, float* acc, const ConvGeom& g,
                            const std::vector<Chunk>& chunks, size_t c0, size_t c1, int64_t o_lo,
                            int64_t o_hi, const ThreadSpace& ws) {
  const int64_t ostride = g.KH * g.KW * g.C;  // floats between two output channels of dw
  for (size_t ci = c0; ci < c1; ++ci) {
    const Chunk& ch = chunks[ci];
    const int64_t pixels = ch.images() * ch.in_rows() * g.W, positions = ch.images() * ch.out_rows() * g.OW;
    pack_x(x, g, ch, ws.xp);
    pack_dy(dy + (ch.n0 * g.OH + ch.oh0) * g.OW * g.O, g, positions, o_lo, o_hi, ws.dyp);
    make_runs(g, ch, ws.runs, ws.first);
    for (int64_t c = 0; c < g.C; c += kBlockC) {
      const bool half = c + kBlockC > g.C;  // the last block is 8 wide
      const float* xb = ws.xp + c * pixels;
      for (int64_t o0 = o_lo; o0 < o_hi; o0 += kTileO) {
        const int ro = int(std::min<int64_t>(kTileO, g.O - o0));
        const float* db = ws.dyp + (o0 - o_lo) * positions;
        for (int64_t k = 0; k < g.KH * g.KW; ++k) {
          float* out = acc + (o0 * g.KH * g.KW + k) * g.C + c;
          const Run* r = ws.runs + ws.first[k];
          const int nr = ws.first[k + 1] - ws.first[k];
          if (half)
            tile<1>(xb, db, out, ostride, ro, r, nr);
          else
            tile<2>(xb, db, out, ostride, ro, r, nr);
        }
      }
    }
  }
}

bool cpu_has_avx2_fma() {
  static const bool has = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  return has;
}

}  // namespace

bool conv2d_bwd_weight_avx2(DType dtype, const void* x, const void* dy, void* dw, const ConvGeom& g) {
  const Conv2dArg& a = g.arg;
  if (dtype != DType::float32 || !cpu_has_avx2_fma() || a.stride_h != 1 || a.stride_w != 1 || a.dil_h != 1 ||
      a.dil_w != 1 || a.groups != 1 || g.C % 8 != 0 || g.N <= 0 || g.OH <= 0 || g.OW <= 0)
    return false;
  ++g_calls;
  const auto* xf = static_cast<const float*>(x);
  const auto* dyf = static_cast<const float*>(dy);
  auto* dwf = static_cast<float*>(dw);
  const size_t nw = size_t(g.O * g.KH * g.KW * g.C);
  const std::vector<Chunk> chunks = make_chunks(g);
  // Threads: P groups over the chunks, each summing into its own copy of dw (thread group 0 into dw),
  // times Q groups over the 6-wide blocks of output channels (disjoint rows of the same copy). A copy
  // costs a zeroing and an addition per element, memory-bound, about what 50 multiply-adds per
  // element cost at the FMA peak; each output position adds one multiply-add to every element, so P
  // keeps at least kPositionsPerCopy positions per copy (the copies under 5% of the work), and the
  // other threads split the output channels, each packing its chunks' x itself. One thread below
  // 2^22 multiply-adds (waking a team costs more).
  const int64_t positions_all = g.N * g.OH * g.OW, blocks = (g.O + kTileO - 1) / kTileO;
  const double macs = double(positions_all) * double(g.O * g.KH * g.KW * g.C);
  const int threads = macs < double(1 << 22) ? 1 : std::max(1, omp_get_max_threads());
  const int p_most = int(std::clamp<int64_t>(positions_all / kPositionsPerCopy, 1,
                                             std::min<int64_t>(threads, int64_t(chunks.size()))));
  // Every buffer the threads use, allocated here (the parallel region neither allocates nor throws).
  int64_t pixels_max = 0, positions_max = 0, rows_max = 0;
  for (const Chunk& ch : chunks) {
    pixels_max = std::max(pixels_max, ch.images() * ch.in_rows() * g.W);
    positions_max = std::max(positions_max, ch.images() * ch.out_rows() * g.OW);
    rows_max = std::max(rows_max, ch.images() * ch.out_rows());
  }
  const int64_t offsets = g.KH * g.KW;
  // per thread: xp and dyp (floats, each rounded to 64 bytes), the runs and `first` (ints)
  const int64_t xp_n = (pixels_max * g.C + 15) / 16 * 16,
                dyp_n = (positions_max * blocks * kTileO + 8 + 15) / 16 * 16;
  const int64_t run_ints = offsets * rows_max * 3 + offsets + 1;  // a Run is 3 ints
  Buffer work(Device::cpu(), DType::float32, (xp_n + dyp_n) * threads, /*zero_fill=*/false);
  Buffer run_work(Device::cpu(), DType::int32, run_ints * threads, /*zero_fill=*/false);
  Buffer copies(Device::cpu(), DType::float32, int64_t(nw) * (p_most - 1),
                /*zero_fill=*/false);  // groups 1..
  float* const base = static_cast<float*>(work.data());
  int* const run_base = static_cast<int*>(run_work.data());
  float* const parts = static_cast<float*>(copies.data());  // (p_most - 1, O, KH, KW, C)
  auto space = [&](int t) {
    float* b = base + (xp_n + dyp_n) * t;
    int* r = run_base + run_ints * t;
    return ThreadSpace{b, b + xp_n, reinterpret_cast<Run*>(r), r + offsets * rows_max * 3};
  };
#pragma omp parallel num_threads(threads)
  {
    const int t = omp_get_thread_num(), nt = omp_get_num_threads();  // nt <= threads
    const int P = std::min(p_most, nt), Q = int(std::min<int64_t>(nt / P, blocks));
    if (t < P * Q) {
      const int p = t / Q, q = t % Q;
      const int64_t o_lo = blocks * q / Q * kTileO, o_hi = std::min(g.O, blocks * (q + 1) / Q * kTileO);
      float* acc = p == 0 ? dwf : parts + size_t(p - 1) * nw;
      const size_t row = size_t(g.KH * g.KW * g.C);  // floats of one output channel
      std::memset(acc + size_t(o_lo) * row, 0, size_t(o_hi - o_lo) * row * sizeof(float));
      run_chunks(xf, dyf, acc, g, chunks, chunks.size() * size_t(p) / size_t(P),
                 chunks.size() * size_t(p + 1) / size_t(P), o_lo, o_hi, space(t));
    }
#pragma omp barrier
    if (P > 1) {
#pragma omp for schedule(static)
      for (int64_t i = 0; i < int64_t(nw); ++i)
        for (int k = 0; k + 1 < P; ++k) dwf[i] += parts[size_t(k) * nw + size_t(i)];
    }
  }
  return true;
}

int64_t conv_bwd_weight_avx2_calls() { return g_calls.load(); }

bool conv2d_bwd_weight_library(DType dtype, const void* x, const void* dy, void* dw, const ConvGeom& g) {
  static const bool avx2_level = [] {
    const std::string isa = onednn_isa();
    return isa == "avx2" || isa == "avx2_vnni" || isa == "avx2_vnni_2";
  }();
  if (avx2_level && config().conv_bwd_weight_avx2 && conv2d_bwd_weight_avx2(dtype, x, dy, dw, g)) return true;
  return conv2d_bwd_weight_onednn(dtype, x, dy, dw, g);
}

}  // namespace aether::cpu
