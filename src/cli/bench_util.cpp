// Helpers for `aether bench`: timing, shapes, tables, and the STREAM-like copy / FMA measurement.
#include "bench_util.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <memory>

#include "aether/backend/backend.h"
#include "aether/core/error.h"
#include "args.h"
#include "codegen/compiler.h"
#include "core/config.h"

namespace aether::cli::bench {
namespace {
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double time_ms(const std::function<void()>& fn) {
  const auto t0 = Clock::now();
  fn();
  return ms_since(t0);
}

// Restores the execution mode when it goes out of scope.
struct FusionRestore {
  bool was = fusion_enabled();
  ~FusionRestore() { set_fusion(was); }
};

// ---- the STREAM-like kernels, compiled at run time (codegen's ABI: aether_kernel(bufs, scratch, fp, ip))
// ----
const char* kCopySource = R"(// aether bench stream: copy
extern "C" long long aether_kernel_scratch(void) { return 0; }
// bufs[0]: dst float (n), bufs[1]: src float (n), bufs[2]: n (one int64)
extern "C" void aether_kernel(void** bufs, void* scratch, const double*, const unsigned long long*) {
  (void)scratch;
  float* __restrict__ dst = (float*)bufs[0];
  const float* __restrict__ src = (const float*)bufs[1];
  const long long n = *(const long long*)bufs[2];
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < n; ++i) dst[i] = src[i];
}
)";

// Independent FMA chains on registers: K accumulators of one vector register each, per thread.
const char* kFmaSource = R"(// aether bench stream: FMA peak
#include <omp.h>
#include <cmath>
#if defined(__AVX512F__)
#include <immintrin.h>
typedef __m512 V;
enum { W = 16, K = 12 };
static inline V vset(float x) { return _mm512_set1_ps(x); }
static inline V vfma(V a, V b, V c) { return _mm512_fmadd_ps(a, b, c); }
static inline float vsum(V v) { return _mm512_reduce_add_ps(v); }
#elif defined(__AVX2__) && defined(__FMA__)
#include <immintrin.h>
typedef __m256 V;
enum { W = 8, K = 10 };
static inline V vset(float x) { return _mm256_set1_ps(x); }
static inline V vfma(V a, V b, V c) { return _mm256_fmadd_ps(a, b, c); }
static inline float vsum(V v) {
  float t[8];
  _mm256_storeu_ps(t, v);
  return t[0] + t[1] + t[2] + t[3] + t[4] + t[5] + t[6] + t[7];
}
#else
typedef float V;
enum { W = 1, K = 12 };
static inline V vset(float x) { return x; }
static inline V vfma(V a, V b, V c) { return std::fma(a, b, c); }
static inline float vsum(V v) { return v; }
#endif
extern "C" long long aether_kernel_scratch(void) { return 0; }
// bufs[0]: iterations per thread (one int64); bufs[1]: a, b (two floats: acc = acc * a + b);
// bufs[2]: per-thread sums (256 floats, keeps the work alive); bufs[3]: out (two int64): threads, FMAs
// per thread and iteration.
extern "C" void aether_kernel(void** bufs, void* scratch, const double*, const unsigned long long*) {
  (void)scratch;
  const long long iters = *(const long long*)bufs[0];
  const float* ab = (const float*)bufs[1];
  float* sums = (float*)bufs[2];
  long long* info = (long long*)bufs[3];
#pragma omp parallel
  {
    const int t = omp_get_thread_num();
    const V a = vset(ab[0]), b = vset(ab[1]);
    V acc[K];
    for (int k = 0; k < K; ++k) acc[k] = vset(1e-3f * float(t + k));
    for (long long i = 0; i < iters; ++i) {
#pragma GCC unroll 16
      for (int k = 0; k < K; ++k) acc[k] = vfma(acc[k], a, b);
    }
    float s = 0;
    for (int k = 0; k < K; ++k) s += vsum(acc[k]);
    sums[t % 256] = s;
#pragma omp single
    {
      info[0] = omp_get_num_threads();
      info[1] = (long long)K * W;
    }
  }
}
)";

// The same kernels built into this binary (its optimisation level), used when no compiler works.
void builtin_copy(void** bufs, void*, const double*, const unsigned long long*) {
  float* dst = static_cast<float*>(bufs[0]);
  const float* src = static_cast<const float*>(bufs[1]);
  const long long n = *static_cast<const long long*>(bufs[2]);
#pragma omp parallel for simd schedule(static)
  for (long long i = 0; i < n; ++i) dst[i] = src[i];
}
void builtin_fma(void** bufs, void*, const double*, const unsigned long long*) {
  constexpr int kChains = 16;
  const long long iters = *static_cast<const long long*>(bufs[0]);
  const float* ab = static_cast<const float*>(bufs[1]);
  float* sums = static_cast<float*>(bufs[2]);
  long long* info = static_cast<long long*>(bufs[3]);
#pragma omp parallel
  {
    const int t = omp_get_thread_num();
    float acc[kChains];
    for (int k = 0; k < kChains; ++k) acc[k] = 1e-3f * float(t + k);
    for (long long i = 0; i < iters; ++i) {
#pragma omp simd
      for (int k = 0; k < kChains; ++k) acc[k] = std::fma(acc[k], ab[0], ab[1]);
    }
    float s = 0;
    for (int k = 0; k < kChains; ++k) s += acc[k];
    sums[t % 256] = s;
#pragma omp single
    {
      info[0] = omp_get_num_threads();
      info[1] = kChains;
    }
  }
}
}  // namespace

Timing summarize(std::vector<double> ms) {
  Timing t;
  t.ms = ms;
  t.runs = int(ms.size());
  if (ms.empty()) return t;
  std::sort(ms.begin(), ms.end());
  const size_t n = ms.size();
  t.median_ms = n % 2 ? ms[n / 2] : 0.5 * (ms[n / 2 - 1] + ms[n / 2]);
  t.min_ms = ms.front();
  t.max_ms = ms.back();
  return t;
}

nlohmann::ordered_json timing_json(const Timing& t) {
  return {{"median_ms", t.median_ms}, {"min_ms", t.min_ms}, {"max_ms", t.max_ms}, {"runs", t.runs}};
}

Measured measure(const std::function<void()>& once, const RunPlan& plan) {
  AETHER_CHECK(plan.runs >= 1 && plan.warmup >= 0, "bench", "need --runs >= 1 and --warmup >= 0, got ",
               plan.runs, " and ", plan.warmup);
  FusionRestore restore;
  Measured m;
  if (!plan.compare) {
    set_fusion(!plan.unfused);
    for (int i = 0; i < plan.warmup; ++i) once();
    std::vector<double> ms;
    for (int i = 0; i < plan.runs; ++i) ms.push_back(time_ms(once));
    m.main = summarize(ms);
    return m;
  }
  // Alternating runs, so both executors see the same machine load (a shared box drifts).
  for (int i = 0; i < plan.warmup; ++i) {
    set_fusion(true);
    once();
    set_fusion(false);
    once();
  }
  std::vector<double> fused, unfused;
  for (int i = 0; i < plan.runs; ++i) {
    set_fusion(true);
    fused.push_back(time_ms(once));
    set_fusion(false);
    unfused.push_back(time_ms(once));
  }
  m.main = summarize(fused);
  m.unfused = summarize(unfused);
  return m;
}

const char* mode_name(const RunPlan& plan) { return plan.unfused ? "unfused" : "fused"; }

Shape parse_shape(const std::string& text, size_t ndim, const std::string& what) {
  constexpr int64_t kMaxElements = int64_t(1) << 30;  // 4 GiB of float32 per tensor
  Shape s;
  size_t start = 0;
  bool ok = !text.empty();
  double elements = 1;  // a double: the product of unchecked sizes must not overflow
  while (ok && start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string part = text.substr(start, comma - start);
    ok = is_whole_number(part, 12);
    if (ok) {
      s.push_back(std::stoll(part));
      ok = s.back() > 0;
      elements *= double(s.back());
    }
    start = comma + 1;
  }
  AETHER_CHECK(ok && s.size() == ndim, "bench", "bad ", what, " ", shown(text), ": expected ", ndim,
               " positive sizes separated by commas");
  AETHER_CHECK(elements <= double(kMaxElements), "bench", what, " ", shown(text), " is too large (at most ",
               kMaxElements, " elements)");
  return s;
}

std::string format_table(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> width;
  for (const auto& r : rows)
    for (size_t c = 0; c < r.size(); ++c) {
      if (width.size() <= c) width.push_back(0);
      width[c] = std::max(width[c], r[c].size());
    }
  std::string out;
  for (const auto& r : rows) {
    std::string line;
    for (size_t c = 0; c < r.size(); ++c) {
      const std::string pad(width[c] - r[c].size(), ' ');
      line += (c ? "  " : "") + (c == 0 ? r[c] + pad : pad + r[c]);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + "\n";
  }
  return out;
}

std::string strf(const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  return buf;
}

std::string human_bytes(int64_t bytes) {
  const double b = double(bytes);
  if (bytes < 1024) return strf("%lld B", static_cast<long long>(bytes));
  if (bytes < 1024 * 1024) return strf("%.1f KiB", b / 1024.0);
  if (bytes < 1024 * 1024 * 1024) return strf("%.1f MiB", b / (1024.0 * 1024.0));
  return strf("%.2f GiB", b / (1024.0 * 1024.0 * 1024.0));
}

StreamResult measure_stream(int64_t array_bytes, int warmup, int runs) {
  AETHER_CHECK(array_bytes >= 4096 && runs >= 1 && warmup >= 0, "bench stream",
               "need arrays of at least 4 KiB, --runs >= 1 and --warmup >= 0");
  StreamResult r;
  codegen::KernelFn copy = builtin_copy, fma = builtin_fma;
  r.code = "built-in loops (this binary's optimisation level: no working compiler for generated kernels)";
  if (codegen::host_compiler_available()) {
    const auto k = codegen::compile_kernels({kCopySource, kFmaSource});
    if (k[0].fn && k[1].fn) {
      copy = k[0].fn;
      fma = k[1].fn;
      r.code = "compiled at run time like generated kernels (-O3 -march=native -fopenmp)";
    }
  }
  r.threads = omp_get_max_threads();

  // Copy: two arrays of float32, memset first (so the pages exist before timing).
  const long long n = array_bytes / 4;
  r.array_bytes = n * 4;
  std::unique_ptr<float[]> src(new float[size_t(n)]), dst(new float[size_t(n)]);
  std::memset(src.get(), 0, size_t(n) * 4);
  std::memset(dst.get(), 0, size_t(n) * 4);
  long long count = n;
  void* copy_bufs[] = {dst.get(), src.get(), &count};
  for (int i = 0; i < warmup; ++i) copy(copy_bufs, nullptr, nullptr, nullptr);
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) ms.push_back(time_ms([&] { copy(copy_bufs, nullptr, nullptr, nullptr); }));
  r.copy = summarize(ms);
  r.copy_gb_per_s = 2.0 * double(r.array_bytes) / (r.copy.median_ms * 1e-3) / 1e9;

  // FMA: double the iterations until the faster of two passes takes >= 10 ms (a shared machine can
  // stall one pass), then scale them to about 50 ms per pass. At least 2^20 iterations (~1e9 FMAs a
  // thread): on a loaded machine a tiny pass can take 10 ms of thread-scheduling stalls alone.
  long long iters = 1 << 12;
  const float ab[2] = {0.9999999f, 1e-7f};
  float sums[256] = {};
  long long info[2] = {0, 0};
  void* fma_bufs[] = {&iters, const_cast<float*>(ab), sums, info};
  for (;;) {
    const double t = std::min(time_ms([&] { fma(fma_bufs, nullptr, nullptr, nullptr); }),
                              time_ms([&] { fma(fma_bufs, nullptr, nullptr, nullptr); }));
    if ((t >= 10 && iters >= (1LL << 20)) || iters >= (1LL << 40)) {
      iters = std::max<long long>(1, (long long)(double(iters) * 50.0 / std::max(t, 1e-3)));
      break;
    }
    iters *= 2;
  }
  for (int i = 0; i < warmup; ++i) fma(fma_bufs, nullptr, nullptr, nullptr);
  ms.clear();
  for (int i = 0; i < runs; ++i) ms.push_back(time_ms([&] { fma(fma_bufs, nullptr, nullptr, nullptr); }));
  r.fma = summarize(ms);
  r.fma_per_run = iters * info[0] * info[1];
  r.fma_gflop_per_s = 2.0 * double(r.fma_per_run) / (r.fma.median_ms * 1e-3) / 1e9;
  return r;
}

}  // namespace aether::cli::bench
