// Helpers for `aether bench`: timing of repeated runs (fused, unfused or both alternately), shape
// parsing, plain-text tables, and this machine's copy bandwidth and FMA peak (STREAM-like).
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "aether/core/shape.h"

namespace aether::cli::bench {

// Wall times of the timed runs, in milliseconds, and their summary.
struct Timing {
  std::vector<double> ms;
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int runs = 0;
};
Timing summarize(std::vector<double> ms);
// {"median_ms", "min_ms", "max_ms", "runs"}.
nlohmann::ordered_json timing_json(const Timing& t);

// How to time: warm-up runs (untimed), timed runs, and which executor(s).
struct RunPlan {
  int warmup = 2;
  int runs = 10;
  bool unfused = false;  // the reference backend instead of the fused executor
  bool compare = false;  // fused and unfused alternately (fused, unfused, fused, ...)
};
// `main` is the fused executor's timing (the reference backend's with plan.unfused); `unfused` is
// set only with plan.compare.
struct Measured {
  Timing main;
  std::optional<Timing> unfused;
};
// Runs `once` plan.warmup times (each executor when comparing), then plan.runs timed times. The
// execution mode is restored afterwards (also when `once` throws).
Measured measure(const std::function<void()>& once, const RunPlan& plan);
// "fused" or "unfused", the executor a plain (not comparing) measurement uses.
const char* mode_name(const RunPlan& plan);

// "256,32,32,32" -> (256, 32, 32, 32); exactly `ndim` positive sizes, else aether::Error naming `what`.
Shape parse_shape(const std::string& text, size_t ndim, const std::string& what);

// Left-aligned first column, the others right-aligned, two spaces apart; rows[0] is the header.
std::string format_table(const std::vector<std::vector<std::string>>& rows);
// printf into a std::string.
std::string strf(const char* format, ...) __attribute__((format(printf, 1, 2)));
// 512 B, 4.0 KiB, 32.0 MiB, 2.25 GiB.
std::string human_bytes(int64_t bytes);

// The machine's copy bandwidth and FMA throughput, measured with code compiled at run time by the
// same compiler and flags as the fused executor's kernels (-O3 -march=native -fopenmp), so figures
// can be given as fractions of them; built-in loops (this binary's optimisation level) when no
// compiler works.
struct StreamResult {
  int64_t array_bytes = 0;     // each of the two arrays (float32)
  Timing copy;                 // one pass dst[i] = src[i]
  double copy_gb_per_s = 0;    // (read + write) bytes / median time, 1e9 B/s
  Timing fma;                  // one pass of the FMA loop (every thread)
  int64_t fma_per_run = 0;     // FMAs in one pass, all threads together
  double fma_gflop_per_s = 0;  // 2 * FMAs / median time, 1e9 FLOP/s
  int threads = 0;
  std::string code;  // "run-time compiled (...)" or "built-in"
};
StreamResult measure_stream(int64_t array_bytes, int warmup, int runs);

}  // namespace aether::cli::bench
